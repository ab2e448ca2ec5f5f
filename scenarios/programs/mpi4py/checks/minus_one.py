"""A student's bug: rank - 1 on rank 0 is -1, which MPICH takes as MPI.PROC_NULL.

A chain where each rank passes a value to its left neighbour: on rank 0, rank - 1 is -1, which
is MPI.PROC_NULL under MPICH (the send silently does nothing) and an invalid rank under Open
MPI. `mpisim exec --check` reports the computed -1.
"""

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
left = rank - 1
right = rank + 1 if rank + 1 < size else MPI.PROC_NULL
comm.send(rank, dest=left)
got = comm.recv(source=right)
print(f"rank {rank} got {got}")
