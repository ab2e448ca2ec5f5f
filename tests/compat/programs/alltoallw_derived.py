"""Alltoallw with derived datatypes: a column (vector) of a matrix to each peer, received into every second int."""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
r, p = comm.rank, comm.size
# send to peer j: a column j of a p x p matrix (a vector type); receive: every second int of a row (resized)
send = (np.arange(p * p, dtype="i4").reshape(p, p) + 100 * r)
col = MPI.INT.Create_vector(p, 1, p).Commit()
every2 = MPI.INT.Create_vector(p, 1, 2).Commit()
recv = np.full(2 * p * p, -1, dtype="i4")
sdispl = [4 * j for j in range(p)]
rdispl = [4 * 2 * p * j for j in range(p)]
comm.Alltoallw([send, [1] * p, sdispl, [col] * p], [recv, [1] * p, rdispl, [every2] * p])
print(r, recv.tolist())
mixed = np.full(p + 2, -1, dtype="i4")
comm.Alltoallw([np.arange(p, dtype="i4") + 10 * r, [1] * p, [4 * j for j in range(p)], [MPI.INT] * p],
               [mixed, [1] * p, [4 * j for j in range(p)], [MPI.INT] * p])
print(r, mixed.tolist())
col.Free()
every2.Free()
