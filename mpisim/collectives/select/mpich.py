"""The ``mpich`` rule set: MPICH's default tuning, by message size, rank count and op.

The decision rules of ``maint/tuning/coll/mpir/generic.json`` (thresholds in ../shared
COSTS.md section 2): by message size, rank count (power of two or not) and op
commutativity. E.g. allreduce: up to 8 B recursive doubling; otherwise Rabenseifner when the
op is built in and there are at least as many elements as the largest power of two <= p,
else recursive doubling.
"""

from __future__ import annotations

from collections.abc import Callable

from mpisim.collectives.costmodel import pof2_at_most
from mpisim.collectives.registry import power_of_two
from mpisim.mpi.ops import OPS, Op


def _mpich_barrier(p: int, n: int, op: Op, itemsize: int) -> str:
    return "dissemination"


def _mpich_bcast(p: int, n: int, op: Op, itemsize: int) -> str:
    if p < 8 or n <= 12288:
        return "binomial"
    if power_of_two(p) and n <= 524288:
        return "scatter_recursive_doubling_allgather"
    return "scatter_ring_allgather"


def _mpich_allreduce(p: int, n: int, op: Op, itemsize: int) -> str:
    builtin = op.name in OPS and OPS[op.name] is op
    if n <= 8 or not builtin:
        return "recursive_doubling"
    count = n // itemsize
    return "rabenseifner" if count >= pof2_at_most(p) else "recursive_doubling"


def _mpich_reduce(p: int, n: int, op: Op, itemsize: int) -> str:
    builtin = op.name in OPS and OPS[op.name] is op
    if n <= 2048 or not builtin:
        return "binomial"
    return "rabenseifner" if n // itemsize >= pof2_at_most(p) else "binomial"


def _mpich_allgather(p: int, n: int, op: Op, itemsize: int) -> str:
    if power_of_two(p):
        return "recursive_doubling" if n < 524288 else "ring"
    return "bruck" if n < 81920 else "ring"


def _mpich_reduce_scatter(p: int, n: int, op: Op, itemsize: int) -> str:
    if op.commutative:
        return "recursive_halving" if n < 524288 else "pairwise"
    return "reduce_then_scatter"


def _mpich_alltoall(p: int, n: int, op: Op, itemsize: int) -> str:
    per_peer = n // max(p, 1)
    if p >= 8 and per_peer <= 256:
        return "bruck"
    if per_peer <= 32768:
        return "linear"
    return "pairwise"


def _mpich_rooted(p: int, n: int, op: Op, itemsize: int) -> str:
    return "binomial"


#: Rule per collective: (ranks, bytes, op, bytes per element) -> algorithm name. MPICH's
#: thresholds on element counts (Rabenseifner needs at least pof2(p) elements) use the
#: call's datatype size, so a float64 call of 4 elements counts 4, not 8.
MPICH_RULES: dict[str, Callable[[int, int, Op, int], str]] = {
    "barrier": _mpich_barrier,
    "bcast": _mpich_bcast,
    "reduce": _mpich_reduce,
    "allreduce": _mpich_allreduce,
    "allgather": _mpich_allgather,
    "reduce_scatter": _mpich_reduce_scatter,
    "alltoall": _mpich_alltoall,
    "gather": _mpich_rooted,
    "scatter": _mpich_rooted,
}



def choose(collective: str, p: int, nbytes: int, op: Op, itemsize: int) -> str:
    """Return the name of the algorithm MPICH's rules pick for *collective* on *p* ranks."""
    return MPICH_RULES[collective](p, nbytes, op, itemsize)
