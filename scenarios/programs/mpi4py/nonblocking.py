"""Non-blocking exchange: every rank posts Irecvs from both ring neighbours, then Isends, then Waitall."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
left, right = (rank - 1) % size, (rank + 1) % size
from_left, from_right = np.empty(3, dtype="i"), np.empty(3, dtype="i")
mine = np.array([rank, rank * rank, -rank], dtype="i")
requests = [comm.Irecv(from_left, source=left, tag=1), comm.Irecv(from_right, source=right, tag=2),
            comm.Isend(mine, dest=right, tag=1), comm.Isend(mine, dest=left, tag=2)]
statuses = [MPI.Status() for _ in requests]
MPI.Request.Waitall(requests, statuses)
print(f"rank {rank}: from left {from_left.tolist()} (source {statuses[0].Get_source()}), "
      f"from right {from_right.tolist()} (source {statuses[1].Get_source()}), "
      f"{statuses[0].Get_count(MPI.INT)} ints each")
# The lowercase forms: isend an object, irecv it, test until it arrives.
req = comm.irecv(source=left, tag=3)
comm.isend({"from": rank}, dest=right, tag=3).wait()
while True:
    done, got = req.test()
    if done:
        break
print(f"rank {rank}: object {got}")
