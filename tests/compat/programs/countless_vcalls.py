"""Buffers whose counts mpi4py derives: Reduce_scatter without recvcounts, v-calls given a bare
buffer, ``[buf, count]`` or ``(count, stride)``, Alltoallw's short forms, and Op.Reduce_local."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
total = size * (size + 1) // 2

# Reduce_scatter with recvcounts=None: every rank's receive count is allgathered first, so rank r
# may keep r+1 elements (not the even split of the send buffer).
recv = np.full(rank + 1, -1, dtype="i")
comm.Reduce_scatter(np.arange(total, dtype="i") + rank, recv, None, MPI.SUM)
print("reduce_scatter", recv.tolist())
try:
    comm.Reduce_scatter(np.arange(total + 1, dtype="i"), recv, None, MPI.SUM)
except ValueError as err:
    print("reduce_scatter refused:", type(err).__name__)

# A bare buffer in a v-call: split in size runs, the first total % size runs one element longer.
odd = 2 * size + 1
gathered = np.full(odd * size, -1, dtype="i")
block = np.full(odd, rank, dtype="i")
comm.Allgatherv(block, [gathered, odd])
print("allgatherv [buf, count]", gathered.tolist())
mine = np.full(2 * size + 1, rank, dtype="i")
split = [2 + (i < 1) for i in range(size)]
everyone = np.full(sum(split) if rank == 0 else 1, -1, dtype="i")
comm.Gatherv(mine[:split[rank]], everyone if rank == 0 else None, 0)
if rank == 0:
    print("gatherv bare", everyone.tolist())

# (count, stride): block r starts at element r * stride.
strided = np.full(3 * size, -1, dtype="i")
comm.Allgatherv(np.full(2, rank, dtype="i"), (strided, (2, 3), MPI.INT))
print("allgatherv strided", strided.tolist())
out = np.arange(size, dtype="d") + 10 * rank
back = np.zeros(size, dtype="d")
comm.Alltoallv(out, back)
print("alltoallv bare", back.tolist())

# Alltoallw: [buf, (counts, displs), types] and [buf, types] (one element each, at byte 0).
send = np.arange(size, dtype="i") + 100 * rank
got = np.full(size, -1, dtype="i")
disp = [4 * p for p in range(size)]
comm.Alltoallw((send, ([1] * size, disp), [MPI.INT] * size), (got, ([1] * size, disp), [MPI.INT] * size))
print("alltoallw pair", got.tolist())

# Op.Reduce_local: inoutbuf = inbuf op inoutbuf, on this rank only.
acc = np.arange(4, dtype="d")
MPI.SUM.Reduce_local(np.ones(4), acc)
MPI.MAX.Reduce_local(np.full(4, 2.0), acc)
print("reduce_local", acc.tolist())
for bad in (([np.zeros(3, "i"), 2, MPI.INT], [np.zeros(3, "i"), 3, MPI.INT]),
            ([np.zeros(3, "i"), 1, MPI.INT], [np.zeros(3, "i"), 1, MPI.SHORT])):
    try:
        MPI.PROD.Reduce_local(*bad)
    except ValueError as err:
        print("reduce_local refused:", type(err).__name__)

# Alltoallw from MPI.BOTTOM: each peer's datatype names its block by address.
src = np.arange(2 * size, dtype="i") + 10 * rank
dst = np.full(2 * size, -1, dtype="i")
saddr, raddr = MPI.Get_address(src), MPI.Get_address(dst)
stypes = [MPI.Datatype.Create_struct([2], [saddr + 8 * p], [MPI.INT]).Commit() for p in range(size)]
rtypes = [MPI.Datatype.Create_struct([2], [raddr + 8 * p], [MPI.INT]).Commit() for p in range(size)]
comm.Alltoallw((MPI.BOTTOM, ([1] * size, [0] * size), stypes), (MPI.BOTTOM, ([1] * size, [0] * size), rtypes))
print("alltoallw bottom", dst.tolist())
