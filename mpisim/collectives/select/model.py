"""The ``model`` rule set: the cheapest closed-form cost with this communicator's measured parameters.

Evaluate every applicable algorithm's closed-form cost with alpha (worst path latency plus
per-message overheads), beta (slowest path) and gamma, and take the cheapest; ties go to an
algorithm whose formula is exact on this many ranks, then to the name that sorts first.
"""

from __future__ import annotations

import math

from mpisim.collectives import registry
from mpisim.mpi.comm import Comm


def network_parameters(comm: Comm) -> tuple[float, float, float]:
    """Return (alpha, beta, gamma) of *comm*: worst latency and slowest path from rank 0, plus overheads.

    Rank 0's paths to every other member (the network's declared path costs) are a cheap,
    deterministic sample: on the symmetric fabrics mpisim builds, they include the slowest
    path class.
    """
    world = comm.world
    cfg = world.config
    # Asked by auto's choice, the row's closed form and the run's summary: measured once per
    # group (rank 0's paths to each of a million ranks cost seconds).
    memo = world.__dict__.setdefault("_network_parameters", {})
    key = (tuple(comm.group), cfg.send_overhead, cfg.recv_overhead, cfg.reduce_cost)
    if key not in memo:
        memo[key] = _measure(comm)
    return memo[key]


def _measure(comm: Comm) -> tuple[float, float, float]:
    world = comm.world
    cfg = world.config
    alpha, bottleneck = 0.0, math.inf
    src = comm.group[0]
    for dst in comm.group[1:]:
        path = world.network.path_costs(src, dst)
        alpha = max(alpha, path.latency)
        bottleneck = min(bottleneck, path.bottleneck)
    beta = 0.0 if math.isinf(bottleneck) else 1.0 / bottleneck
    return alpha + cfg.send_overhead + cfg.recv_overhead, beta, cfg.reduce_cost



def choose(comm: Comm, nbytes: int, candidates: list[registry.Algorithm]) -> registry.Algorithm:
    """Return the candidate with the least closed-form cost on *comm* (the first one if none has a cost)."""
    p = comm.size
    alpha, beta, gamma = network_parameters(comm)
    costed = [a for a in candidates if a.cost is not None] or candidates
    if costed[0].cost is None:
        return costed[0]
    # Ties go to an algorithm whose formula is exact here (a single-port textbook formula
    # over-charges concurrent sends), then to the name that sorts first.
    return min(costed, key=lambda a: (a.cost(p, nbytes, alpha, beta, gamma), not a.exact(p), a.name))  # type: ignore[misc]
