"""Hello world: every rank says who it is (mpi4py tutorial, first program)."""

from mpi4py import MPI

comm = MPI.COMM_WORLD
print(f"Hello, World! I am process {comm.Get_rank()} of {comm.Get_size()}.")
