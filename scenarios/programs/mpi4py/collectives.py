"""Every collective once, uppercase on numpy buffers and lowercase on objects, with values each rank prints.

Integer data, so every MPI's answer is exactly the same whatever its algorithm.
"""

import array

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
out = []

buf = np.arange(4, dtype="i") if rank == 0 else np.zeros(4, dtype="i")
comm.Bcast(buf, root=0)
out.append(f"Bcast {buf.tolist()}")

total = np.zeros(2, dtype="l")
comm.Reduce(np.array([rank, 1], dtype="l"), total if rank == 0 else None, op=MPI.SUM, root=0)
if rank == 0:
    out.append(f"Reduce {total.tolist()}")

mx = np.zeros(1, dtype="i")
comm.Allreduce(np.array([rank * 7 % 5], dtype="i"), mx, op=MPI.MAX)
inplace = np.array([rank + 1], dtype="i")
comm.Allreduce(MPI.IN_PLACE, inplace, op=MPI.PROD)
out.append(f"Allreduce max {mx[0]} prod {inplace[0]}")

gathered = np.zeros(size, dtype="i") if rank == 0 else None
comm.Gather(np.array([rank * rank], dtype="i"), gathered, root=0)
if rank == 0:
    out.append(f"Gather {gathered.tolist()}")

piece = np.zeros(2, dtype="d")
comm.Scatter(np.arange(2 * size, dtype="d") if rank == 0 else None, piece, root=0)
out.append(f"Scatter {piece.tolist()}")

everyone = array.array("i", [0] * size)
comm.Allgather(array.array("i", [rank + 10]), everyone)
out.append(f"Allgather {everyone.tolist()}")

swapped = np.zeros(size, dtype="i")
comm.Alltoall(np.array([100 * rank + j for j in range(size)], dtype="i"), swapped)
out.append(f"Alltoall {swapped.tolist()}")

counts = [i + 1 for i in range(size)]
displs = [sum(counts[:i]) for i in range(size)]
vbuf = np.zeros(sum(counts), dtype="i")
comm.Allgatherv(np.full(rank + 1, rank, dtype="i"), [vbuf, counts, displs, MPI.INT])
out.append(f"Allgatherv {vbuf.tolist()}")

gv = np.zeros(sum(counts), dtype="i") if rank == 0 else None
comm.Gatherv(np.full(rank + 1, -rank, dtype="i"), [gv, counts, displs, MPI.INT] if rank == 0 else None, root=0)
if rank == 0:
    out.append(f"Gatherv {gv.tolist()}")

sv = np.zeros(rank + 1, dtype="i")
comm.Scatterv([np.arange(sum(counts), dtype="i"), counts, displs, MPI.INT] if rank == 0 else None, sv, root=0)
out.append(f"Scatterv {sv.tolist()}")

scounts = [1] * size
rcounts = [1] * size
a2av = np.zeros(size, dtype="i")
comm.Alltoallv([np.arange(size, dtype="i") + 10 * rank, scounts, list(range(size)), MPI.INT],
               [a2av, rcounts, list(range(size)), MPI.INT])
out.append(f"Alltoallv {a2av.tolist()}")

block = np.zeros(2, dtype="i")
comm.Reduce_scatter_block(np.arange(2 * size, dtype="i"), block, op=MPI.SUM)
out.append(f"Reduce_scatter_block {block.tolist()}")

raw = bytearray(8)
if rank == 0:
    raw[:] = b"mpi4py!!"
comm.Bcast([raw, 8, MPI.BYTE], root=0)
out.append(f"Bcast bytes {bytes(raw).decode()}")

out.append(f"bcast {comm.bcast({'a': [1, 2]} if rank == 0 else None, root=0)}")
out.append(f"scatter {comm.scatter([f'item{i}' for i in range(size)] if rank == 0 else None, root=0)}")
g = comm.gather((rank, 'x' * rank), root=0)
if rank == 0:
    out.append(f"gather {g}")
out.append(f"allgather {comm.allgather(rank * 2)}")
out.append(f"alltoall {comm.alltoall([(rank, j) for j in range(size)])}")
out.append(f"reduce {comm.reduce([rank], op=MPI.SUM, root=0)}")
out.append(f"allreduce min {comm.allreduce(10 - rank, op=MPI.MIN)} minloc {comm.allreduce((rank % 2, rank), op=MPI.MINLOC)}")

half = comm.Split(color=rank % 2, key=-rank)
out.append(f"Split color {rank % 2}: rank {half.Get_rank()} of {half.Get_size()}, "
           f"sum {half.allreduce(rank)}")
dup = comm.Dup()
out.append(f"Dup size {dup.Get_size()} compare {comm.Compare(dup) == MPI.CONGRUENT}")
dup.Free()
half.Free()
comm.Barrier()
for line in out:
    print(f"rank {rank}: {line}")
