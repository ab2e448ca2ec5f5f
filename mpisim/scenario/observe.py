"""What a finished world knows beyond its records: per-link totals and its alpha-beta-gamma numbers.

Reports are drawn from results.json alone, so whatever they need from the live simulation must
be copied into the result when a world ends. Two small things are:

* **per-link totals** -- the network model's counters (bytes and busy seconds per directed
  link, and the link's capacity). They are kept even when per-flow link records are off, so a
  report can always say which link carried the most and how close to its capacity it ran;
* **network parameters** -- alpha (seconds per message: worst path latency plus the per-message
  overheads), beta (seconds per byte on the slowest path) and gamma (seconds per byte reduced),
  measured the way ``auto`` selection measures them, plus the latency and beta of the path
  from rank 0 to rank 1 (where point-to-point benchmarks run). Closed-form costs in reports
  are evaluated with these.

:func:`wants_link_records` decides when ``mpisim run -o DIR`` records per-flow link activity
(the heat map of links over time) for a scenario that did not ask for it.
"""

from __future__ import annotations

import math
from typing import Any

from mpisim.collectives.select import network_parameters
from mpisim.mpi.world import World
from mpisim.network.analytic import LinkStats
from mpisim.network.credited import credited
from mpisim.report.records import MAX_LINK_TOTALS
from mpisim.report.tables import link_class
from mpisim.scenario.model import Scenario

__all__ = ["LINK_RECORD_RANKS", "link_totals", "network_summary", "wants_link_records"]

#: Up to this many ranks, writing a report turns per-flow link records on by itself.
LINK_RECORD_RANKS = 64


def link_totals(world: World, limit: int = MAX_LINK_TOTALS) -> list[dict[str, Any]]:
    """Return up to *limit* links of *world* that carried bytes, most utilised first.

    Each entry is ``{"link", "kind", "nbytes", "busy_s", "capacity_Bps"}``; links that carried
    nothing are left out. Links are ranked by the time their bytes need at full rate (bytes
    over capacity), not by bytes: a GPU cluster's NVLink ports carry the most bytes while its
    NICs, eight times slower, bound the run. The cut keeps every link class: each class
    (:func:`~mpisim.report.tables.link_class`) has at least ``limit // 8`` of its most utilised
    links kept, so links.csv always shows the NICs and the spine next to the NVLink ports. A
    network model without ``link_stats`` gives an empty list.
    """
    stats = getattr(world.network, "link_stats", None)
    if stats is None:
        return []
    # Traffic timed off the world (a folded training run's tensor-parallel collectives).
    memo = getattr(world, "memo", None)
    credits = credited(memo) if memo is not None else {}
    # Only links that carried bytes are ranked: without credits to add, ask for those alone
    # (a million-rank world has millions of links; the same entries, in the same order).
    used_stats = getattr(world.network, "used_link_stats", None)
    totals = used_stats() if used_stats is not None and not credits else stats()
    kinds = {link.name: link.kind for link in world.topology.links if link.name in totals}
    for name, (nbytes, busy) in credits.items():
        held = totals.get(name)
        if held is None:  # a link the world builds on first use (a full mesh) that its own ranks never used
            totals[name] = LinkStats(name, int(nbytes), busy, nbytes / busy if busy > 0 else 0.0)
            continue
        totals[name] = type(held)(name, held.nbytes + int(nbytes), held.busy_time + busy, held.capacity)
    used = [s for s in totals.values() if s.nbytes > 0]
    used.sort(key=lambda s: (-(s.nbytes / s.capacity if s.capacity > 0 else 0.0), -s.nbytes, s.name))
    per_class: dict[str, list[Any]] = {}
    for s in used:
        per_class.setdefault(link_class(s.name, kinds.get(s.name)), []).append(s)
    reserved = {s.name for members in per_class.values() for s in members[: max(limit // 8, 1)]}
    extra = [s.name for s in used if s.name not in reserved][: max(limit - len(reserved), 0)]
    chosen = reserved.union(extra)
    kept = [s for s in used if s.name in chosen]  # still most utilised first
    return [
        {"link": s.name, "kind": kinds.get(s.name, "net"), "nbytes": int(s.nbytes), "busy_s": float(s.busy_time),
         "capacity_Bps": float(s.capacity)}
        for s in kept
    ]


def network_summary(world: World) -> dict[str, float]:
    """Return the alpha-beta-gamma parameters of *world* (see the module docstring); {} for one rank."""
    if world.size < 2:
        return {}
    alpha, beta, gamma = network_parameters(world.comm_world(0))
    route = world.topology.route(0, 1)
    pair_beta = 0.0 if math.isinf(route.bottleneck) else 1.0 / route.bottleneck
    return {
        "alpha_s": alpha,
        "beta_s_per_B": beta,
        "gamma_s_per_B": gamma,
        "pair_latency_s": route.latency,
        "pair_beta_s_per_B": pair_beta,
    }


def wants_link_records(scenario: Scenario) -> bool:
    """True if a report of *scenario* should record per-flow link activity although it did not ask.

    Link records make the links-over-time heat map. They cost memory (flows x hops), so they
    are switched on by themselves only for scenarios without a sweep, of at most
    :data:`LINK_RECORD_RANKS` ranks, that say nothing about ``trace.links`` (an explicit
    ``trace: {links: false}`` is obeyed).
    """
    trace = scenario.raw.get("trace")
    explicit = isinstance(trace, dict) and "links" in trace
    return not explicit and not scenario.trace.links and not scenario.sweep and scenario.ranks <= LINK_RECORD_RANKS
