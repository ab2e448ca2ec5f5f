"""A student's bug: a user op declared commutative that is not.

The op keeps the left operand's digits and appends the right one's (a "concatenation" of
decimal digits): the order matters, yet it is created with commute=True, which lets MPI combine
the ranks' values in any order. `mpisim exec --check` evaluates both orders on the actual data.
"""

from mpi4py import MPI


def concat(a, b, datatype):
    return int(f"{a}{b}")


comm = MPI.COMM_WORLD
op = MPI.Op.Create(concat, commute=True)
digits = comm.allreduce(comm.Get_rank() + 1, op=op)
if comm.Get_rank() == 0:
    print(f"digits: {digits}")
