"""Collective algorithms: the registry, one generator per algorithm, closed-form costs, ``auto`` selection.

Importing this package registers every algorithm and installs the collective runner on
:class:`~mpisim.mpi.comm.Comm`, so ``yield from comm.allreduce(buf)`` works.
"""

from mpisim.collectives import costmodel, dispatch, registry, select  # noqa: F401
from mpisim.collectives import (  # noqa: F401  (importing registers the algorithms)
    allgather,
    allreduce,
    alltoall,
    barrier,
    bcast,
    gather,
    reduce,
    reduce_scatter,
    scatter,
)
from mpisim.collectives.registry import Algorithm, algorithm, available, get

__all__ = ["Algorithm", "algorithm", "available", "get"]
