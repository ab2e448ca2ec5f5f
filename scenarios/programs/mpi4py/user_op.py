"""A user-defined reduction (Op.Create): the element-wise value of largest magnitude, sign kept.

Every rank contributes a vector whose entries change sign with the rank; Allreduce with the
user op and the built-in MAXLOC on (value, rank) pairs agree on who holds the largest value.
"""

import numpy as np
from mpi4py import MPI


def absmax(inbuf, inoutbuf, datatype):
    a = np.frombuffer(inbuf, dtype="d")
    b = np.frombuffer(inoutbuf, dtype="d")
    b[:] = np.where(np.abs(a) > np.abs(b), a, b)


ABSMAX = MPI.Op.Create(absmax, commute=True)
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
mine = np.array([(-1) ** rank * rank, rank - size / 2, 1.0 / (rank + 1)], dtype="d")
result = np.zeros(3, dtype="d")
comm.Allreduce([mine, MPI.DOUBLE], [result, MPI.DOUBLE], op=ABSMAX)
best = comm.allreduce((float(mine[0]) ** 2, rank), op=MPI.MAXLOC)
print(f"rank {rank}: absmax {result.tolist()}, largest square {best[0]} on rank {best[1]}")
ABSMAX.Free()
