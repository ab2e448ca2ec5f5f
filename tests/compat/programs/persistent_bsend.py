"""Persistent requests started many times, and buffered sends that return before any receive is posted."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size

out = np.zeros(3, dtype="i")
got = np.zeros(3, dtype="i")
reqs = [comm.Send_init(out, dest=right, tag=4), comm.Recv_init(got, source=left, tag=4)]
total = 0
for step in range(3):
    out[:] = [rank, step, rank * step]  # read at each Start
    MPI.Prequest.Startall(reqs)
    MPI.Request.Waitall(reqs)
    total += int(got.sum())
    print("step", step, got.tolist(), "inactive, not null:", reqs[0] != MPI.REQUEST_NULL)
for req in reqs:
    req.Free()
print("total", total, "freed:", reqs[1] == MPI.REQUEST_NULL)

# buffered: every rank sends to the next before anyone receives; the sends cannot wait
n = 50_000
MPI.Attach_buffer(bytearray(2 * (n * 8 + MPI.BSEND_OVERHEAD)))
comm.Bsend(np.full(n, float(rank)), dest=right, tag=9)
comm.bsend({"from": rank}, dest=right, tag=10)
big = np.zeros(n)
comm.Recv(big, source=left, tag=9)
obj = comm.recv(source=left, tag=10)
buf = MPI.Detach_buffer()
print("buffered", big[0], big[-1], obj, len(buf))
try:
    comm.Bsend(np.zeros(4), dest=right, tag=11)
except MPI.Exception as err:
    print("no buffer:", err.Get_error_class() == MPI.ERR_BUFFER)
