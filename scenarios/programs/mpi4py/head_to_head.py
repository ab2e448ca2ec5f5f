"""Head-to-head blocking sends: fine below the eager limit, a deadlock above it.

Ranks 0 and 1 both Send first and Recv second. Below the eager limit MPI copies the message
out and Send returns; above it Send waits for the matching receive, which neither rank has
posted. Under a real MPI the program hangs; mpisim names both ranks, the call and this line.

Usage: head_to_head.py [BYTES]  (default 1048576)
"""

import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
nbytes = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 20
if rank < 2:
    other = 1 - rank
    outgoing = np.full(nbytes, rank, dtype="B")
    incoming = np.empty(nbytes, dtype="B")
    comm.Send(outgoing, dest=other, tag=0)
    comm.Recv(incoming, source=other, tag=0)
    print(f"rank {rank}: received {nbytes} bytes of {incoming[0]} from rank {other}")
