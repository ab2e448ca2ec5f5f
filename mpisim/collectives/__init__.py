"""Collective algorithms: the registry, one generator per algorithm, closed-form costs, ``auto`` selection.

Importing this package registers every algorithm and installs the collective runner on
:class:`~mpisim.mpi.comm.Comm`, so ``yield from comm.allreduce(buf)`` works.
"""

from mpisim.collectives import (  # noqa: F401  (importing registers the algorithms)
    allgather,
    allreduce,
    alltoall,
    barrier,
    bcast,
    costmodel,
    dispatch,
    gather,
    nccl,
    reduce,
    reduce_scatter,
    registry,
    scatter,
    select,
)
from mpisim.collectives.registry import Algorithm, algorithm, available, get

__all__ = ["Algorithm", "algorithm", "available", "get"]
