"""A student's bug: the send buffer is overwritten before the Isend has completed.

Rank 0 starts sending `work` to rank 1, then prepares the next step in the same array before
waiting. Depending on the message size and timing a real MPI sends the old values, the new
ones or a mix; `mpisim exec --check` reports the Isend's line and the first changed element.
"""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
work = np.full(1000, 1.0)
if rank == 0:
    req = comm.Isend(work, dest=1)
    work[:] = 2.0  # too early: the Isend may still be reading work
    req.Wait()
elif rank == 1:
    comm.Recv(work, source=0)
    print(f"rank 1 received a sum of {work.sum():.0f}")
