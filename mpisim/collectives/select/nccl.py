"""The ``nccl`` rule set: GPU collectives as NCCL's tuner chooses them.

An allreduce runs the (algorithm, protocol) with the least predicted time among
``nccl_ring``, ``nccl_tree`` and, where the NVSwitch reduces in the switch, ``nvls``
(:func:`mpisim.collectives.nccl.tuner.best`) -- or, where running them is cheap, the one the
simulation times fastest (:mod:`.timed`). Allgather and reduce-scatter run ``nccl_ring``,
broadcast ``nccl_ring``, alltoall ``nccl_p2p``; the other collectives follow the ``mpich`` rules.
"""

from __future__ import annotations

from mpisim.collectives.nccl.tuner import best, candidates
from mpisim.collectives.select import timed
from mpisim.mpi.comm import Comm
from mpisim.mpi.ops import Op

#: Collectives NCCL runs one way only: broadcast on its rings, alltoall as grouped send/recv
#: (which crosses nodes through the destination's rail, PXN).
NCCL_ONLY = {"bcast": "nccl_ring", "alltoall": "nccl_p2p"}


def choose(comm: Comm, collective: str, nbytes: int, op: Op, itemsize: int = 4) -> str | None:
    """Return the NCCL-style algorithm for this call, or None where the ``mpich`` rules decide.

    An allreduce whose candidates are cheap to run is timed (:mod:`.timed`): the simulation's
    own fastest; elsewhere the least predicted time decides, as NCCL's tuner does.
    """
    p = comm.size
    if collective == "allreduce" and op.commutative and p > 1 and timed.cheap(comm, nbytes):
        names = candidates(comm, collective)
        return names[0] if len(names) == 1 else timed.fastest(comm, names, nbytes, op, itemsize)
    if collective in ("allreduce", "allgather", "reduce_scatter") and op.commutative and p > 1:
        return best(comm, nbytes, collective).algorithm
    if collective in NCCL_ONLY and p > 1:
        return NCCL_ONLY[collective]
    return None
