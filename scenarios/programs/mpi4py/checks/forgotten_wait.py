"""A student's bug: the Isend's request is never waited for.

Rank 0 sends its value to rank 1 with Isend and forgets the request. The message is small, so
it goes eagerly and rank 1 receives it: under a real MPI the program "works". MPI requires
every request to be completed (Wait, Test, Waitall, ...); `mpisim exec --check` names the rank
and the line of the Isend.
"""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
data = np.arange(4, dtype="d")
if rank == 0:
    req = comm.Isend(data, dest=1, tag=7)
elif rank == 1:
    comm.Recv(data, source=0, tag=7)
    print(f"rank 1 got {data.sum():.0f}")
