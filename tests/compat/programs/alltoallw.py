"""Alltoallw and Ialltoallw: per-peer counts, byte displacements and datatypes, one buffer of mixed types."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

# Rank r sends r+1 ints to every peer; peer p receives them as ints at byte offset 16*p.
send = np.arange(size * (rank + 1), dtype="i") + 100 * rank
scounts = [rank + 1] * size
sdispls = [4 * (rank + 1) * p for p in range(size)]
recv = np.full(4 * size, -1, dtype="i")
rcounts = [p + 1 for p in range(size)]
rdispls = [16 * p for p in range(size)]
comm.Alltoallw([send, scounts, sdispls, [MPI.INT] * size], [recv, rcounts, rdispls, [MPI.INT] * size])
print("alltoallw", recv.tolist())

# Doubles to even peers, bytes to odd ones, nonblocking.
dsend = np.arange(2 * size, dtype="d") + rank / 10
types = [MPI.DOUBLE if p % 2 == 0 else MPI.BYTE for p in range(size)]
counts = [2 if p % 2 == 0 else 16 for p in range(size)]
displs = [16 * p for p in range(size)]
drecv = np.zeros(2 * size, dtype="d")
rtypes = [MPI.DOUBLE if rank % 2 == 0 else MPI.BYTE] * size
rcounts = [2 if rank % 2 == 0 else 16] * size
req = comm.Ialltoallw([dsend, counts, displs, types], [drecv, rcounts, displs, rtypes])
req.Wait()
print("ialltoallw", drecv.tolist())
