"""OSU-style collective latency: MPI_Allreduce of float32 buffers, the average over ranks of each rank's time.

Rank 0 prints ``size  avg latency(us)``; every rank checks the sum.

Usage: osu_allreduce.py [MAX_BYTES] [ITERATIONS]  (default 1048576, 20)
"""

import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
max_bytes = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 20
iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 20
if rank == 0:
    print("# OSU MPI-style Allreduce Latency Test (mpi4py)")
    print(f"{'# Size':<10}{'Avg Latency (us)':>20}")
nbytes = 4
while nbytes <= max_bytes:
    count = nbytes // 4
    sbuf = np.full(count, rank + 1, dtype="f")
    rbuf = np.zeros(count, dtype="f")
    comm.Barrier()
    t_total = 0.0
    for _ in range(iterations):
        t0 = MPI.Wtime()
        comm.Allreduce(sbuf, rbuf, op=MPI.SUM)
        t_total += MPI.Wtime() - t0
        comm.Barrier()
    assert np.all(rbuf == size * (size + 1) / 2), "wrong sum"
    average = comm.reduce(t_total / iterations, op=MPI.SUM, root=0)
    if rank == 0:
        print(f"{nbytes:<10}{average / size * 1e6:>20.2f}")
    nbytes *= 4
