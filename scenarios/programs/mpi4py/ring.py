"""Token ring: rank 0 starts a token, each rank adds its number and passes it on (lowercase send/recv)."""

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
right, left = (rank + 1) % size, (rank - 1) % size
if rank == 0:
    comm.send({"token": 0, "path": [0]}, dest=right, tag=11)
    token = comm.recv(source=left, tag=11)
    print(f"rank 0: the token came back with {token['token']} after {token['path']}")
else:
    token = comm.recv(source=left, tag=11)
    token["token"] += rank
    token["path"].append(rank)
    print(f"rank {rank}: got {token['token'] - rank} from rank {left}")
    comm.send(token, dest=right, tag=11)
