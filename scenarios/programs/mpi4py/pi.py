"""pi by the midpoint rule, the sum split over ranks and combined with Reduce (mpi4py's demo/compute-pi).

Usage: pi.py [N]  (N intervals, default 100000)
"""

import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
n = np.array(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000, dtype="i")
comm.Bcast([n, MPI.INT], root=0)
h = 1.0 / n
x = h * (np.arange(rank, n, size, dtype="d") + 0.5)
mine = np.array(h * np.sum(4.0 / (1.0 + x * x)), dtype="d")
pi = np.array(0.0, dtype="d")
comm.Reduce([mine, MPI.DOUBLE], [pi, MPI.DOUBLE], op=MPI.SUM, root=0)
if rank == 0:
    print(f"pi is approximately {pi:.12f}, error {abs(pi - np.pi):.3e}")
