"""Read numbers from stdin on rank 0 (as mpiexec forwards it), broadcast them, each rank sums its share.

Usage: printf '1 2 3 4 5 6 7 8 9 10' | stdin_sum.py
"""

import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
numbers = [int(word) for word in sys.stdin.read().split()] if rank == 0 else None
numbers = comm.bcast(numbers, root=0)
mine = sum(numbers[rank::size])
total = comm.reduce(mine, op=MPI.SUM, root=0)
print(f"rank {rank}: my share sums to {mine}")
if rank == 0:
    print(f"total of {len(numbers)} numbers: {total}")
