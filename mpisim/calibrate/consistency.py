"""Measurements checked against each other, before any model: where no cluster produces them all.

Some sets of measurements cannot all come from one cluster in a steady state, whatever its
parameters. A fit then has to miss some point, and the user should learn *which measurements
disagree and why*, not only that one point is off.

The check here is about a host that caps both directions together (``osu_bibw`` no higher
than ``osu_bw``, as the TCP stack of a cloud VM does, published row C4b). Such a host moves at
most ``cap`` bytes per second through its stack, sent and received together, so a message
between two of its hosts, alone or in a stream, moves at most ``cap`` bytes per second too.
A ping-pong's time then grows by at least ``(s2 - s1) / cap`` from size ``s1`` to ``s2`` when
both go by rendezvous: its fixed costs (latency, handshakes) do not shrink as the message
grows. (Across the eager limit they can: an eager message pays a host copy per byte that a
rendezvous one does not, so steps that cross it are not checked.) When an ``osu_latency``
curve grows more slowly than that -- its *marginal bandwidth* ``(s2 - s1) / (t2 - t1)`` above
the cap -- the ping-pong and the bandwidth runs disagree; typically they ran at different
times on a cloud network whose bandwidth varies from run to run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mpisim.calibrate.measurements import Series
from mpisim.engine.units import format_size

#: A marginal bandwidth this much above the cap is reported (measurement noise stays below it).
TOLERANCE = 0.10
#: Only size steps whose bytes, at the cap, take at least this share of the larger ping-pong
#: count: on smaller steps the time difference is mostly noise and fixed costs.
BANDWIDTH_BOUND_SHARE = 0.25


def faster_than_the_host_cap(series: Sequence[Series], cap: float, cap_source: str, *,
                             eager_limit: int) -> list[str]:
    """Return one line per ``osu_latency`` size step whose marginal bandwidth beats *cap* (bytes/s).

    *series* are the inter-node series of the fit; *cap_source* names the measurement the cap
    comes from (``osu_bibw.txt:3``), for the message; only steps between two sizes above
    *eager_limit* (both rendezvous) are checked.
    """
    found = []
    for s in series:
        if s.test != "latency":
            continue
        for small, large in zip(s.points, s.points[1:], strict=False):
            if small.nbytes <= eager_limit:
                continue
            grown_bytes = large.nbytes - small.nbytes
            grown_time = large.value - small.value
            if grown_bytes / cap < BANDWIDTH_BOUND_SHARE * large.value:
                continue
            marginal = grown_bytes / grown_time if grown_time > 0 else float("inf")
            if marginal > (1 + TOLERANCE) * cap:
                name = Path(s.file).name
                found.append(
                    f"{name}:{small.line}-{large.line}: from {format_size(small.nbytes)} to "
                    f"{format_size(large.nbytes)} the ping-pong grows by {grown_time * 1e6:.4g} us, "
                    f"{marginal / 1e9:.3g} GB/s, faster than the {cap / 1e9:.3g} GB/s the host carries in "
                    f"{cap_source}: a message cannot outrun the host's stack, so no parameters fit both "
                    "(were they measured at different times?); the fit splits the difference")
    return found
