"""Link traffic timed off the simulated world, credited to the links that would have carried it.

A model may time some traffic without simulating it on the world's network: a training run
that folds its tensor-parallel groups (:mod:`mpisim.workloads.training.plan`) times one
group's collective once on a fresh world and lets every group wait that long. Those bytes
still cross real links -- each node's NVLink ports -- and a report of where the traffic went
must show them next to the NICs that the simulated ranks drove. The model credits them here,
per link name, in the world's memo; the link counters that reports read add them
(:func:`mpisim.scenario.observe.link_totals`).
"""

from __future__ import annotations

from mpisim.engine.memo import Memo

_TABLE = "network.credited_links"


def credit(memo: Memo, link: str, nbytes: float, busy_s: float) -> None:
    """Add *nbytes* carried and *busy_s* seconds busy to *link*, traffic the world did not simulate."""
    table = memo.table(_TABLE)
    held = table.get(link, (0.0, 0.0))
    table[link] = (held[0] + nbytes, held[1] + busy_s)


def credited(memo: Memo) -> dict[str, tuple[float, float]]:
    """Return the credited (bytes, busy seconds) per link name."""
    return dict(memo.table(_TABLE))
