"""How many records a world keeps: the trace-volume policy a run follows and its estimate counts.

A ring allreduce over 1024 ranks sends two million messages; keeping a record of each would
cost gigabytes. So when a scenario leaves ``trace.messages`` or ``trace.spans`` unset, a world
of more than :data:`LARGE_WORLD_RANKS` ranks keeps no records of that kind, and no world keeps
more than :data:`RECORD_BUDGET` of one kind unless the scenario asks for them
(:mod:`mpisim.scenario.run` applies it, :mod:`mpisim.scenario.estimate` counts with it).
"""

from __future__ import annotations

from collections.abc import Mapping

from mpisim.scenario.model import Scenario

__all__ = ["LARGE_WORLD_RANKS", "RECORD_BUDGET", "explicit_trace_keys", "trace_records"]

#: Worlds with more ranks than this keep no message or span records unless the scenario asks.
LARGE_WORLD_RANKS = 256
#: Message (and span) records a world keeps by default, about 200 MB of them: beyond, they are
#: dropped and the run says so (a 1 GiB nccl_ring over 16 DGX nodes makes millions of slices).
RECORD_BUDGET = 1_000_000


def explicit_trace_keys(scenario: Scenario) -> set[str]:
    """Return which of ``trace.messages`` and ``trace.spans`` the scenario sets (null is unset)."""
    raw = scenario.raw.get("trace")
    if not isinstance(raw, Mapping):
        return set()
    return {key for key in ("messages", "spans") if raw.get(key) is not None}


def trace_records(scenario: Scenario, ranks: int) -> tuple[bool, bool]:
    """Return whether a world of *ranks* keeps (message, span) records under *scenario*.

    The scenario's own ``trace.messages`` / ``trace.spans`` win; a key it leaves unset is off
    for worlds of more than :data:`LARGE_WORLD_RANKS` ranks.
    """
    trace, explicit = scenario.trace, explicit_trace_keys(scenario)
    large = ranks > LARGE_WORLD_RANKS
    messages = trace.messages if "messages" in explicit or not large else False
    spans = trace.spans if "spans" in explicit or not large else False
    return messages, spans
