"""Run programs written for another MPI API, unchanged, on the simulated MPI.

``mpisim.compat.mpi4py`` is the ``MPI`` module an mpi4py program imports (``from mpi4py
import MPI``) when it runs under ``mpisim exec``; :mod:`mpisim.compat.ranks` runs each rank of
such a program in its own greenlet, so its blocking calls (``comm.Recv(buf)``) need no
``yield from``: the rank's greenlet hands the call to the SimPy engine and sleeps until the
simulated MPI completes it.

This layer sits above ``mpi`` and ``collectives`` (it lays mpi4py's names over
:class:`~mpisim.mpi.comm.Comm` and the collective algorithms) and below ``workloads``.
"""
