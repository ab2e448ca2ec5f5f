"""``auto``: choosing an algorithm for a call, by one of two documented rule sets.

``mpich``
    The decision rules of MPICH's default tuning (``maint/tuning/coll/mpir/generic.json``;
    thresholds in ../shared COSTS.md section 2): by message size, rank count (power of two
    or not) and op commutativity. E.g. allreduce: up to 8 B recursive doubling; otherwise
    Rabenseifner when the op is built in and there are at least as many elements as the
    largest power of two <= p, else recursive doubling.

``model``
    NCCL-style: evaluate every applicable algorithm's closed-form cost with this
    communicator's measured alpha (worst path latency plus per-message overheads), beta
    (slowest path) and gamma, and take the cheapest; ties go to an algorithm whose formula is
    exact on this many ranks, then to the name that sorts first.

``nccl``
    For GPU collectives, as NCCL's tuner chooses: an allreduce runs the (algorithm, protocol)
    with the least predicted time among ``nccl_ring``, ``nccl_tree`` and, where the NVSwitch
    reduces in the switch, ``nvls`` (:func:`mpisim.collectives.nccl.best`); the algorithm
    then picks the same protocol itself. Allgather, reduce-scatter and broadcast run
    ``nccl_ring``, alltoall ``nccl_p2p`` (grouped send/recv, as NCCL has no other); the
    other collectives follow the ``mpich`` rules.

Whatever is chosen is recorded in the call's CollectiveRecord.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from mpisim.collectives import nccl, registry
from mpisim.mpi.comm import Comm
from mpisim.mpi.ops import OPS, Op

RULE_SETS = ("mpich", "model", "nccl")

#: Collectives NCCL runs one way only: broadcast on its rings, alltoall as grouped send/recv
#: (which crosses nodes through the destination's rail, PXN).
NCCL_ONLY = {"bcast": "nccl_ring", "alltoall": "nccl_p2p"}


def _pof2(p: int) -> bool:
    return p & (p - 1) == 0


def _largest_pof2(p: int) -> int:
    return 1 << (p.bit_length() - 1)


def _mpich_barrier(p: int, n: int, op: Op, itemsize: int) -> str:
    return "dissemination"


def _mpich_bcast(p: int, n: int, op: Op, itemsize: int) -> str:
    if p < 8 or n <= 12288:
        return "binomial"
    if _pof2(p) and n <= 524288:
        return "scatter_recursive_doubling_allgather"
    return "scatter_ring_allgather"


def _mpich_allreduce(p: int, n: int, op: Op, itemsize: int) -> str:
    builtin = op.name in OPS and OPS[op.name] is op
    if n <= 8 or not builtin:
        return "recursive_doubling"
    count = n // itemsize
    return "rabenseifner" if count >= _largest_pof2(p) else "recursive_doubling"


def _mpich_reduce(p: int, n: int, op: Op, itemsize: int) -> str:
    builtin = op.name in OPS and OPS[op.name] is op
    if n <= 2048 or not builtin:
        return "binomial"
    return "rabenseifner" if n // itemsize >= _largest_pof2(p) else "binomial"


def _mpich_allgather(p: int, n: int, op: Op, itemsize: int) -> str:
    if _pof2(p):
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


def network_parameters(comm: Comm) -> tuple[float, float, float]:
    """Return (alpha, beta, gamma) of *comm*: worst latency and slowest path from rank 0, plus overheads.

    Rank 0's routes to every other member are a cheap, deterministic sample: on the
    symmetric fabrics mpisim builds, they include the slowest path class.
    """
    world = comm.world
    cfg = world.config
    alpha, bottleneck = 0.0, math.inf
    src = comm.group[0]
    for dst in comm.group[1:]:
        route = world.topology.route(src, dst)
        alpha = max(alpha, route.latency)
        bottleneck = min(bottleneck, route.bottleneck)
    beta = 0.0 if math.isinf(bottleneck) else 1.0 / bottleneck
    return alpha + cfg.send_overhead + cfg.recv_overhead, beta, cfg.reduce_cost


def choose(comm: Comm, collective: str, nbytes: int, op: Op, rule_set: str = "mpich", *,
           itemsize: int = 4) -> registry.Algorithm:
    """Return the algorithm that ``auto`` picks for this call under *rule_set*.

    *itemsize* is the bytes per element of the call's datatype (rules that count elements use it).
    """
    p = comm.size
    spec = comm.world.topology.spec
    candidates = [a for a in registry.available(collective) if a.allows(p, op.commutative) and a.runs_on(spec)]
    if not candidates:
        raise registry.UnknownAlgorithm(f"no registered {collective} algorithm can run on {p} ranks with op {op.name}")
    if rule_set == "model":
        alpha, beta, gamma = network_parameters(comm)
        costed = [a for a in candidates if a.cost is not None] or candidates
        if costed[0].cost is None:
            return costed[0]
        # Ties go to an algorithm whose formula is exact here (a single-port textbook formula
        # over-charges concurrent sends), then to the name that sorts first.
        return min(costed, key=lambda a: (a.cost(p, nbytes, alpha, beta, gamma), not a.exact(p), a.name))  # type: ignore[misc]
    if rule_set == "nccl" and collective in ("allreduce", "allgather", "reduce_scatter") and op.commutative and p > 1:
        return registry.get(collective, nccl.best(comm, nbytes, collective).algorithm)
    if rule_set == "nccl" and collective in NCCL_ONLY and p > 1:
        return registry.get(collective, NCCL_ONLY[collective])
    name = MPICH_RULES[collective](p, nbytes, op, itemsize)
    by_name = {a.name: a for a in candidates}
    if name in by_name:
        return by_name[name]
    return candidates[0]
