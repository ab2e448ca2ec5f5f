"""OSU-style latency: ping-pong between ranks 0 and 1, half the round trip, timed with MPI.Wtime.

As osu_latency does it: for each size, ``skip`` warm-up iterations, then ``iterations`` timed
ones; rank 0 prints ``size  latency(us)``.

Usage: osu_latency.py [MAX_BYTES] [ITERATIONS]  (default 4194304, 100)
"""

import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
max_bytes = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 22
iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 100
skip = 10
sbuf = np.full(max_bytes, ord("a"), dtype="B")
rbuf = np.zeros(max_bytes, dtype="B")
if rank == 0:
    print("# OSU MPI-style Latency Test (mpi4py)")
    print(f"{'# Size':<10}{'Latency (us)':>18}")
size = 1
while size <= max_bytes:
    comm.Barrier()
    t_start = 0.0
    for i in range(iterations + skip):
        if i == skip:
            t_start = MPI.Wtime()
        if rank == 0:
            comm.Send([sbuf, size, MPI.BYTE], dest=1, tag=1)
            comm.Recv([rbuf, size, MPI.BYTE], source=1, tag=1)
        elif rank == 1:
            comm.Recv([rbuf, size, MPI.BYTE], source=0, tag=1)
            comm.Send([sbuf, size, MPI.BYTE], dest=0, tag=1)
    if rank == 0:
        latency = (MPI.Wtime() - t_start) * 1e6 / (2 * iterations)
        print(f"{size:<10}{latency:>18.2f}")
    size *= 2
