"""A student's bug: the result depends on which message arrives first.

Ranks 1 and 2 each send their rank to rank 0, which receives from ANY_SOURCE and keeps
"first - second". The two messages arrive at nearly the same time: a real network may deliver
either first, so the program prints 1 or -1 from one run to the next. `mpisim exec --check`
re-runs the program with the other arrival order and reports the receive whose outcome changes.
"""

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
if rank == 0:
    first = comm.recv(source=MPI.ANY_SOURCE)
    second = comm.recv(source=MPI.ANY_SOURCE)
    print(f"first - second = {first - second}")
elif rank in (1, 2):
    comm.send(rank, dest=0)
