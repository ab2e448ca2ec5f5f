"""OSU-style bandwidth: rank 0 streams a window of Isends, rank 1 answers each window with a 4-byte ack.

As osu_bw does it: bandwidth = size x window x iterations / elapsed; rank 0 prints
``size  bandwidth(MB/s)`` (MB = 10^6 bytes).

Usage: osu_bw.py [MAX_BYTES] [ITERATIONS]  (default 4194304, 20)
"""

import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
max_bytes = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 22
iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 20
skip, window = 2, 64
sbuf = np.full(max_bytes, ord("a"), dtype="B")
rbuf = np.zeros(max_bytes, dtype="B")
ack = np.zeros(4, dtype="B")
if rank == 0:
    print("# OSU MPI-style Bandwidth Test (mpi4py)")
    print(f"{'# Size':<10}{'Bandwidth (MB/s)':>20}")
size = 1
while size <= max_bytes:
    comm.Barrier()
    t_start = 0.0
    for i in range(iterations + skip):
        if i == skip:
            t_start = MPI.Wtime()
        if rank == 0:
            requests = [comm.Isend([sbuf, size, MPI.BYTE], dest=1, tag=100) for _ in range(window)]
            MPI.Request.Waitall(requests)
            comm.Recv([ack, 4, MPI.BYTE], source=1, tag=101)
        elif rank == 1:
            requests = [comm.Irecv([rbuf, size, MPI.BYTE], source=0, tag=100) for _ in range(window)]
            MPI.Request.Waitall(requests)
            comm.Send([ack, 4, MPI.BYTE], dest=0, tag=101)
    if rank == 0:
        elapsed = MPI.Wtime() - t_start
        print(f"{size:<10}{size * window * iterations / elapsed / 1e6:>20.2f}")
    size *= 4
