"""The overlap exercise: start a nonblocking allreduce, compute meanwhile, then wait (and the same with Ibcast, Test)."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

grad = np.arange(8, dtype="d") + rank
total = np.empty_like(grad)
req = comm.Iallreduce(grad, total, op=MPI.SUM)
local = float(np.sum(np.sqrt(np.arange(1, 10_000, dtype="d"))))  # work while the reduction runs
req.Wait()
print(f"sum {total.tolist()} local {local:.3f}")

step = np.zeros(4, dtype="i")
if rank == 0:
    step[:] = [3, 1, 4, 1]
req = comm.Ibcast(step, root=0)
polls = 0
while not req.Test():
    polls += 1
print(f"bcast {step.tolist()} done {req == MPI.REQUEST_NULL}")

maxima = np.zeros(1, dtype="i")
reqs = [comm.Iallreduce(np.array([rank * rank], dtype="i"), maxima, op=MPI.MAX), comm.Ibarrier()]
MPI.Request.Waitall(reqs)
print(f"max {int(maxima[0])} all done {all(r == MPI.REQUEST_NULL for r in reqs)}")
