"""Isendrecv and Isendrecv_replace (MPI 4): a send and a receive as one request, around a ring."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size

recv = np.full(3, -1, dtype="i")
status = MPI.Status()
req = comm.Isendrecv(np.full(3, rank, dtype="i"), right, 7, recv, MPI.ANY_SOURCE, MPI.ANY_TAG)
req.Wait(status)
print("isendrecv", recv.tolist())  # (MPICH 5.0.2 leaves the status of an Isendrecv undefined)

buf = np.arange(4, dtype="d") + 10 * rank
req = comm.Isendrecv_replace(buf, right, 3, left, 3)
buf[:] += 0  # the data sent is the buffer as it was at the call
MPI.Request.Waitall([req])
print("isendrecv_replace", buf.tolist())

null = np.full(2, -1, dtype="i")
comm.Isendrecv(np.zeros(2, dtype="i"), MPI.PROC_NULL, 0, null, MPI.PROC_NULL, 0).Wait(status)
print("proc_null", null.tolist())
