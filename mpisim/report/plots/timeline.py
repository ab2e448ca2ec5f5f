"""Timeline: what every rank does when -- compute, send, receive, wait, reduce, and the protocol
phases (RTS, CTS, data, FIN) of its messages, one band per rank, a deadlock marked where it stopped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from mpisim.report.plots.style import (
    KIND_COLOURS,
    KIND_NAMES,
    new_figure,
    time_unit,
)
from mpisim.report.records import WorldRecords
from mpisim.report.tables import (
    PHASE_KINDS,
    world_ranks,
)

#: The strips of a rank's band in a timeline: which span kinds each holds, and what it is called.
TIMELINE_STRIPS = (
    ("local work", ("compute", "reduce", "copy"), 1.0),
    ("blocked in MPI", ("send", "recv", "wait"), 1.0),
    ("protocol phases", PHASE_KINDS, 0.7),
)


def plot_timeline(world: WorldRecords, *, max_ranks: int = 64, window: tuple[float, float] | None = None,
                  title: str | None = None, failure: dict[str, Any] | None = None) -> Figure | None:
    """Draw the per-rank Gantt chart of *world*: one band per rank, time left to right.

    A rank's band has up to three strips, so that activities that overlap in time (backward
    compute while a gradient allreduce runs) are all visible: local work (compute, reductions,
    copies), time blocked in MPI calls (send, receive, wait), and the protocol phases of its
    messages (RTS and data as a sender, CTS and FIN as a receiver). Strips no span uses are
    left out. Only the first *max_ranks* ranks and the spans inside *window* (seconds,
    default: the whole run) are drawn. Returns None if the world has no span records.

    Blocked time and protocol phases are distinct on purpose: a rank blocked in a rendezvous
    send waits the whole time, while its RTS is only the control message in flight. With a
    deadlock *failure* (the result's ``failure``), each rank's call that never returns is
    marked where it stopped, with the call and why it cannot return, and the cycle of waits
    is named in the title.
    """
    if not world.spans:
        return None
    p = world_ranks(world)
    shown = min(p, max_ranks)
    t0, t1 = window if window is not None else (0.0, max(world.t_end, max(s.t_end for s in world.spans)))
    if t1 <= t0:
        t1 = t0 + 1e-9
    scale, unit = time_unit(t1 - t0)
    bars: dict[str, list[list[tuple[float, float]]]] = {k: [[] for _ in range(shown)] for k in KIND_COLOURS}
    for span in world.spans:
        if span.rank >= shown or span.t_end < t0 or span.t_start > t1 or span.kind not in bars:
            continue
        start, end = max(span.t_start, t0), min(span.t_end, t1)
        bars[span.kind][span.rank].append(((start - t0) / scale, max((end - start) / scale, 0.0)))
    strips = [(name, kinds, weight) for name, kinds, weight in TIMELINE_STRIPS if any(any(bars[k]) for k in kinds)]
    total = sum(weight for _, _, weight in strips)
    height = min(max(2.6 + (0.22 + 0.12 * len(strips)) * shown, 3.4), 16.0)
    fig = new_figure(11, height)
    ax = fig.add_subplot()
    used = []
    # A thin white edge separates back-to-back calls (the steps of a ring), unless bars are so
    # many that the edges would hide them.
    count = sum(len(r) for per_rank in bars.values() for r in per_rank)
    edge = {"edgecolor": "white", "linewidth": 0.6} if count <= 40 * shown * 4 else {"edgecolor": "none"}
    lower = -0.42
    for _name, kinds, weight in strips:
        thick = 0.84 * weight / total
        for kind in kinds:
            per_rank = bars[kind]
            if not any(per_rank):
                continue
            used.append(kind)
            for rank, ranges in enumerate(per_rank):
                if ranges:
                    ax.broken_barh(ranges, (rank + lower + 0.02, thick - 0.04), facecolors=KIND_COLOURS[kind], **edge)
        lower += thick
    ax.set_ylim(shown - 0.5, -0.5)
    step = max(1, math.ceil(shown / 32))
    ax.set_yticks(range(0, shown, step))
    ax.set_ylabel("rank" + (f" (first {shown} of {p})" if shown < p else ""))
    ax.set_xlim(0, (t1 - t0) / scale)
    ax.set_xlabel(f"time (simulated {unit})" + (f", from t = {t0 / scale:.4g} {unit}" if t0 > 0 else ""))
    ax.set_title(title or f"{world.label}: what each rank does over time")
    ax.grid(axis="x", alpha=0.3)
    handles = [Patch(facecolor=KIND_COLOURS[k], label=KIND_NAMES[k]) for k in used]
    if failure is not None and failure.get("kind") == "deadlock":
        stops = _mark_deadlock(ax, world, shown, t0, scale, strips, total)
        if stops:
            handles.append(Line2D([], [], linestyle="none", marker="X", color=DEADLOCK_COLOUR, markersize=9,
                                  label="deadlock: the call never returns"))
            cycle = next((line.strip() for line in str(failure.get("message", "")).splitlines()
                          if line.strip().startswith("cycle of waits")), "")
            ax.set_title((title or world.label) + f"\ndeadlock, {stops} rank{'s' if stops > 1 else ''} stopped"
                         + (f"; {cycle}" if cycle else ""))
    layout = " | ".join(name for name, _, _ in strips)
    fig.legend(handles=handles, loc="outside lower center", ncols=min(5, len(handles)), fontsize=9,
               title=f"each rank's band, top to bottom: {layout}", title_fontsize=9)
    return fig


#: Colour of the marks that show where a deadlocked rank stopped.
DEADLOCK_COLOUR = "#C00000"


def _mark_deadlock(ax: Axes, world: WorldRecords, shown: int, t0: float, scale: float,
                   strips: Sequence[tuple[str, tuple[str, ...], float]], total: float) -> int:
    """Mark each rank's blocked call that the deadlock left open; return how many ranks are marked.

    Those calls' spans end when the simulation stopped and carry the reason in their label
    (``send(...) -- waiting for rank 1 to receive ...``): a cross marks the end, and the call
    and the reason are written over the span, on the strip of blocked time.
    """
    blocked = next((i for i, (name, _, _) in enumerate(strips) if name == "blocked in MPI"), None)
    if blocked is None:
        return 0
    lower = -0.42 + sum(0.84 * weight / total for _, _, weight in strips[:blocked])
    middle = lower + 0.42 * strips[blocked][2] / total
    end = max(world.t_end, max(s.t_end for s in world.spans))
    marked = 0
    for span in world.spans:
        if span.rank >= shown or span.kind not in ("send", "recv", "wait") or " -- " not in span.label:
            continue
        if not math.isclose(span.t_end, end, rel_tol=1e-12, abs_tol=1e-18):
            continue
        call, why = span.label.split(" -- ", 1)
        x = (span.t_end - t0) / scale
        ax.plot([x], [span.rank + middle], marker="X", color=DEADLOCK_COLOUR, markersize=11, markeredgecolor="white",
                zorder=5, clip_on=False)
        ax.annotate(f"stopped in {call}:\n{why}", ((span.t_start - t0) / scale, span.rank + middle),
                    xytext=(4, 0), textcoords="offset points", va="center", ha="left", fontsize=8,
                    color=DEADLOCK_COLOUR, zorder=6,
                    bbox={"facecolor": "white", "edgecolor": DEADLOCK_COLOUR, "alpha": 0.9, "pad": 2})
        marked += 1
    return marked
