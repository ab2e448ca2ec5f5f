"""Figures: pure functions from result records to a matplotlib :class:`~matplotlib.figure.Figure`.

Each function reads a :class:`~mpisim.report.records.RunResult` (or one of its worlds) and
returns a new Figure, or ``None`` when the result holds nothing it could draw (a timeline
without span records, a bandwidth plot without collective rows): an empty axis is never
returned. The figures use matplotlib's object API only (``Figure()``, never ``pyplot``), so
they hold no global state and need no display; :mod:`mpisim.report.render` saves them with the
Agg canvas.

=======================  ==================================================================
figure                   what it answers
=======================  ==================================================================
``plot_timeline``        what every rank does when: compute, send, receive, wait, reduce,
                         and the protocol phases (RTS, CTS, data, FIN) of its messages
``plot_links``           which links bound the run and when: a heat map of the most utilised
                         links over time, next to each link's utilisation, by link class
``plot_bandwidth``       the nccl-tests view: time, algbw and busbw against message size,
                         one curve per algorithm (asked for: ``auto`` marks what it chose)
``plot_p2p``             OSU latency and bandwidth against size, with the switch from eager
                         to rendezvous marked
``plot_scaling``         capacity planning: iteration time and scaling efficiency against
                         ranks, one curve per interconnect (or collective time vs ranks)
``plot_breakdown``       compute vs exposed communication per iteration, stacked
``plot_closed_form``     simulated time next to the closed-form alpha-beta-gamma time
``plot_message_diagram`` teaching: ranks x time, one arrow per message, steps shaded
=======================  ==================================================================

Sizes span decades, so size axes are logarithmic (base 2, labelled ``1 KiB``, ``1 MiB``) and
so are time axes where times do. Every axis names its quantity and unit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

from mpisim.report.records import RunResult, WorldRecords
from mpisim.report.tables import (
    PHASE_KINDS,
    Series,
    closed_form_rows,
    fmt_bytes,
    link_table,
    row_kinds,
    series,
    sweep_keys,
    world_ranks,
)

__all__ = [
    "KIND_COLOURS",
    "bandwidth_caption",
    "bandwidth_curves",
    "curve_column",
    "plot_bandwidth",
    "plot_breakdown",
    "plot_closed_form",
    "plot_links",
    "plot_message_diagram",
    "plot_p2p",
    "plot_scaling",
    "plot_timeline",
]

#: One colour per span kind, the same in every figure (colour-blind-safe Okabe-Ito hues first).
KIND_COLOURS = {
    "compute": "#8c8c8c",
    "send": "#E69F00",
    "recv": "#009E73",
    "wait": "#F0A3A3",
    "reduce": "#CC79A7",
    "copy": "#8B5A2B",
    "rts": "#F0E442",
    "cts": "#56B4E9",
    "data": "#0047AB",
    "fin": "#D55E00",
}
KIND_NAMES = {
    "compute": "compute",
    "send": "blocked in send",
    "recv": "blocked in receive / sendrecv",
    "wait": "waiting (wait, waitall)",
    "reduce": "reduction (local op)",
    "copy": "memory copy",
    "rts": "RTS (request to send)",
    "cts": "CTS (clear to send)",
    "data": "data transfer",
    "fin": "FIN",
}
#: One colour per link class (see :func:`mpisim.report.tables.link_class`).
LINK_CLASS_COLOURS = {"shared memory": "#8c8c8c", "PCIe": "#E69F00", "NVLink": "#009E73", "NIC": "#D55E00",
                      "spine": "#0072B2"}
#: Line colours for curves (Okabe-Ito, then matplotlib's tab10).
CURVE_COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
                 "#8c564b", "#7f7f7f", "#bcbd22", "#17becf", "#9467bd"]
#: Dark colours (readable as text on white), one per sending rank in message diagrams.
DIAGRAM_COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#8c564b", "#6a3d9a", "#000000", "#a6761d",
                   "#1f78b4", "#b2182b", "#33a02c", "#e7298a"]
#: Where a 0-byte message sits on a logarithmic size axis (labelled "0 B").
ZERO_BYTES = 0.5
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p"]


def _figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _colour(i: int) -> str:
    return CURVE_COLOURS[i % len(CURVE_COLOURS)]


#: An axes holds its legend up to this many entries; beyond, the legend goes beside the axes.
AXES_LEGEND_ENTRIES = 8


def _legend(fig: Figure, ax: Axes, fontsize: float = 8) -> None:
    """Add *ax*'s legend so that it stays inside the figure, however many entries it has.

    A few entries fit inside the axes (matplotlib picks the emptiest corner); more would
    overflow the axes and run off the image, so they go in columns to the right of the plots,
    where the constrained layout makes room for them.
    """
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    if len(handles) <= AXES_LEGEND_ENTRIES:
        ax.legend(fontsize=fontsize)
        return
    fig.legend(handles, labels, loc="outside right upper", fontsize=min(fontsize, 7), ncols=math.ceil(len(handles) / 28))


def time_unit(seconds: float) -> tuple[float, str]:
    """Return (scale, unit) that makes *seconds* read well on an axis: (1e-6, "us") for 40 us."""
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if seconds >= scale:
            return scale, unit
    return 1e-9, "ns"


def _size_axis(ax: Axes, values: Sequence[float], axis: str = "x") -> None:
    """Make a base-2 log axis labelled with sizes, at most about nine labelled ticks."""
    positive = [v for v in values if v > 0]
    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log", base=2)
    if not positive:
        return
    distinct = sorted(set(positive))
    octaves = max(math.log2(distinct[-1] / distinct[0]), 1.0)
    if len(distinct) <= 10:
        # Label the measured sizes, but not two so close that their labels would overlap.
        ticks = [distinct[-1]]
        for size in reversed(distinct[:-1]):
            if math.log2(ticks[-1] / size) >= octaves / 9:
                ticks.append(size)
        ticks.reverse()
    else:
        lo, hi = math.floor(math.log2(distinct[0])), math.ceil(math.log2(distinct[-1]))
        step = max(1, math.ceil((hi - lo + 1) / 9))
        ticks = [2.0**k for k in range(hi, lo - 1, -step)][::-1]  # the largest size always gets a label
    target.set_major_locator(FixedLocator(ticks))
    target.set_major_formatter(FuncFormatter(lambda v, _pos: fmt_bytes(round(v)) if v >= 1 else "0 B"))
    target.set_minor_locator(NullLocator())
    target.set_minor_formatter(NullFormatter())


def _plain_log(ax: Axes, axis: str = "y") -> None:
    """Put an axis on a log scale labelled with plain numbers (0.1, 1, 10), not powers of ten."""
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    target = ax.yaxis if axis == "y" else ax.xaxis
    target.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    target.set_minor_formatter(NullFormatter())


def _log_if_wide(ax: Axes, values: Sequence[float], axis: str = "y", decades: float = 1.5) -> bool:
    """Use a log scale when positive *values* span more than *decades* decades."""
    positive = [v for v in values if v > 0]
    if positive and math.log10(max(positive) / min(positive)) > decades:
        _plain_log(ax, axis)
        return True
    return False


# ----------------------------------------------------------------------------- timeline


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
    fig = _figure(11, height)
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


# ----------------------------------------------------------------------------- links


def link_heatmap(world: WorldRecords, links: Sequence[str], capacities: dict[str, float], bins: int,
                 t_end: float) -> np.ndarray:
    """Return a (links x bins) matrix of utilisation (0..1), or of bytes/s where capacity is unknown.

    Each link record's bytes are spread evenly over its interval (its average rate there).
    """
    index = {name: i for i, name in enumerate(links)}
    edges = np.linspace(0.0, t_end, bins + 1)
    width = t_end / bins
    grid = np.zeros((len(links), bins))
    for rec in world.links:
        i = index.get(rec.link)
        if i is None or rec.nbytes <= 0:
            continue
        start, end = rec.t_start, max(rec.t_end, rec.t_start)
        if end == start:
            b = min(int(start / width), bins - 1)
            grid[i, b] += rec.nbytes
            continue
        rate = rec.nbytes / (end - start)
        first, last = int(start / width), min(int(end / width), bins - 1)
        for b in range(max(first, 0), last + 1):
            overlap = min(end, edges[b + 1]) - max(start, edges[b])
            if overlap > 0:
                grid[i, b] += rate * overlap
    grid /= width  # bytes per bin -> bytes per second
    for name, i in index.items():
        cap = capacities.get(name, 0.0)
        if cap > 0:
            grid[i] /= cap
    return grid


def _short_link(name: str, width: int = 28) -> str:
    return name if len(name) <= width else "…" + name[-(width - 1):]


def plot_links(world: WorldRecords, *, top: int = 16, bins: int = 120, title: str | None = None) -> Figure | None:
    """Draw where the traffic goes: the *top* most utilised links of *world*.

    The links are those of :func:`~mpisim.report.tables.link_table`: most utilised first, with
    the busiest link of every class kept, so a GPU cluster's NICs show next to its NVLink
    ports. With link records, the left panel is a heat map of links x time (utilisation: the
    link's throughput over its capacity, averaged per time bin); the right panel always shows
    each link's utilisation over the whole run, coloured by link class.
    Returns None if the world has neither link records nor link counters.
    """
    uses = link_table(world, top)
    if not uses:
        return None
    names = [u.link for u in uses]
    capacities = {u.link: u.capacity_Bps for u in uses}
    known_capacity = all(c > 0 for c in capacities.values())
    t_end = world.t_end or max((r.t_end for r in world.links), default=0.0)
    height = min(2.4 + 0.34 * len(names), 12.0)
    has_map = bool(world.links) and t_end > 0
    fig = _figure(12 if has_map else 8, height)
    if has_map:
        ax_map, ax_bar = fig.subplots(1, 2, sharey=True, width_ratios=[3, 1.2])
        scale, unit = time_unit(t_end)
        grid = link_heatmap(world, names, capacities, bins, t_end)
        if known_capacity:
            image = ax_map.imshow(grid * 100, aspect="auto", interpolation="nearest", cmap="magma", vmin=0, vmax=100,
                                  extent=(0, t_end / scale, len(names) - 0.5, -0.5))
            label = "utilisation (% of capacity)"
        else:
            image = ax_map.imshow(grid / 1e9, aspect="auto", interpolation="nearest", cmap="magma", vmin=0,
                                  extent=(0, t_end / scale, len(names) - 0.5, -0.5))
            label = "throughput (GB/s)"
        fig.colorbar(image, ax=ax_map, label=label, location="bottom", shrink=0.6, aspect=40)
        ax_map.set_xlabel(f"time (simulated {unit})")
        ax_map.set_yticks(range(len(names)), [_short_link(n) for n in names], fontsize=8)
        ax_map.set_ylabel("directed link (most utilised first)")
        ax_map.set_title("link activity over time")
    else:
        ax_bar = fig.add_subplot()
        ax_bar.set_yticks(range(len(names)), [_short_link(n) for n in names], fontsize=8)
        ax_bar.set_ylabel("directed link (most utilised first)")
    y = np.arange(len(names))
    # One bar per link: utilisation (the time its bytes need at full rate, over the run). The
    # share of time busy is not drawn: under fair sharing a busy link runs at its capacity
    # whenever it limits a flow, so the two bars came out equal and said nothing twice.
    if known_capacity:
        values, xlabel = [u.utilisation * 100 for u in uses], "utilisation (% of the run at full rate)"
    else:
        values, xlabel = [u.busy_share * 100 for u in uses], "% of the run busy (capacity unknown)"
    ax_bar.barh(y, values, height=0.7, color=[LINK_CLASS_COLOURS.get(u.kind, "#7f7f7f") for u in uses])
    for yi, v in zip(y, values, strict=True):
        ax_bar.annotate(f"{v:.0f}%", (v, yi), xytext=(2, 0), textcoords="offset points", va="center", fontsize=7)
    ax_bar.set_xlim(0, 115)
    ax_bar.set_xlabel(xlabel)
    ax_bar.set_ylim(len(names) - 0.5, -0.5)
    classes = list(dict.fromkeys(u.kind for u in uses))
    handles = [Patch(facecolor=LINK_CLASS_COLOURS.get(c, "#7f7f7f"), label=c) for c in classes]
    fig.legend(handles=handles, loc="outside lower right", ncols=len(handles), fontsize=8, title="link class",
               title_fontsize=8)
    ax_bar.grid(axis="x", alpha=0.3)
    ax_bar.set_title("over the whole run")
    fig.suptitle(title or f"{world.label}: the {len(names)} most utilised links")
    return fig


# ----------------------------------------------------------------------------- size sweeps


def curve_column(rows: Sequence[dict[str, Any]]) -> str:
    """The column that names a row's curve: ``requested`` where ``auto`` chose some rows' algorithm, else ``algorithm``.

    ``auto`` may choose a different algorithm at every size (and sweep point); curves of the
    chosen algorithm would then join sizes the algorithm was not chosen at and split one request
    into pieces. A curve follows what was asked for instead, and each point says what ran.
    """
    return "requested" if any(r.get("requested") == "auto" for r in rows) else "algorithm"


def bandwidth_curves(result: RunResult) -> list[Series]:
    """The curves of :func:`plot_bandwidth`: time against size, one per algorithm asked for and sweep point.

    With ``auto`` among the algorithms, ``auto`` is one curve per sweep point (and rank count),
    whatever it chose at each size; each curve's rows say what ran (``algorithm``).
    """
    rows = row_kinds(result)["collective"]
    keys = [k for k in sweep_keys(result) if k != "topology.nodes"]
    by = [curve_column(rows)] + (["ranks"] if len({r["ranks"] for r in rows}) > 1 else [])
    return series(rows, "bytes", "time_s", by=by, keys=keys)


def _gapped(points: Sequence[tuple[float, float]], sizes: Sequence[float]) -> tuple[list[float], list[float]]:
    """*points* (x ascending) with a NaN wherever a size of *sizes* between two of them is missing: no line across it."""
    xs: list[float] = []
    ys: list[float] = []
    present = {x for x, _ in points}
    for x, y in points:
        if xs and any(xs[-1] < size < x and size not in present for size in sizes):
            xs.append(math.nan)
            ys.append(math.nan)
        xs.append(x)
        ys.append(y)
    return xs, ys


def _ran_markers(curves: Sequence[Series]) -> dict[str, str]:
    """One marker per algorithm that ran, the same on every curve (in order of appearance)."""
    ran = dict.fromkeys(r["algorithm"] for c in curves for r in c.rows)
    return {name: MARKERS[j % len(MARKERS)] for j, name in enumerate(ran)}


def _mark_what_ran(curve: Series, x: str, ran_marker: dict[str, str], colour: str, ax_t: Axes, scale: float,
                   ax_bw: Axes, labels: bool) -> None:
    """Mark each point of *curve* with the marker of the algorithm that ran there (time, and busbw on *ax_bw*).

    With *labels*, an ``auto`` point is also labelled with that algorithm's name.
    """
    for row in curve.rows:
        marker = ran_marker[row["algorithm"]]
        ax_t.plot([row[x]], [row["time_s"] / scale], marker=marker, color=colour, linestyle="none")
        if isinstance(row.get("busbw_GBps"), int | float):
            ax_bw.plot([row[x]], [row["busbw_GBps"]], marker=marker, color=colour, linestyle="none")
        if labels and row.get("requested") == "auto":
            ax_t.annotate(row["algorithm"], (row[x], row["time_s"] / scale), textcoords="offset points",
                          xytext=(4, -9), fontsize=6, color=colour)


def _what_ran_legend(ax: Axes, ran_marker: dict[str, str]) -> None:
    """Legend entries (grey markers) naming the algorithm each marker stands for."""
    for name, marker in ran_marker.items():
        ax.plot([], [], marker=marker, color="grey", linestyle="none", label=f"ran {name}")


def bandwidth_caption(result: RunResult) -> str:
    """The report's caption under :func:`plot_bandwidth`'s figure."""
    curves = "One curve per algorithm. "
    if curve_column(row_kinds(result)["collective"]) == "requested":
        curves = ("One curve per algorithm asked for" + (" and sweep point" if sweep_keys(result) else "") + ": "
                  "where auto chose, the marker of each point (and, for a few points, its label) names the "
                  "algorithm that ran there. ")
    return (curves + "Left: time per call (log-log; lower is better). Right: bus bandwidth (solid; comparable with "
            "the hardware's link bandwidth) and algorithm bandwidth (dashed; size/time).")


#: At most this many points of ``auto`` curves are labelled with the algorithm they ran.
AUTO_POINT_LABELS = 16


def plot_bandwidth(result: RunResult) -> Figure | None:
    """Draw the nccl-tests view of a collective size sweep: time, and algbw/busbw, against size.

    One curve per algorithm (and sweep point) -- per algorithm asked for when ``auto`` is among
    them (:func:`bandwidth_curves`): then a point's marker names the algorithm that ran there
    (the legend lists them), the same marker for the same algorithm on every curve, and a few
    points are labelled with it. Left: time (log-log). Right: busbw (solid) and algbw (dashed)
    in GB/s. A line never crosses a size that its curve lacks and others have. Returns None
    without collective rows covering at least two sizes.
    """
    rows = row_kinds(result)["collective"]
    curves = bandwidth_curves(result)
    if not curves or max(len(set(c.xs)) for c in curves) < 2:
        return None
    by_request = curve_column(rows) == "requested"
    ran_marker = _ran_markers(curves)
    auto_points = sum(1 for c in curves for r in c.rows if r.get("requested") == "auto")

    fig = _figure(12, 5.2)
    ax_t, ax_b = fig.subplots(1, 2)
    sizes = sorted({x for c in curves for x in c.xs})
    times = [y for c in curves for y in c.ys if y > 0]
    scale, unit = time_unit(max(times) if times else 1.0)
    for i, curve in enumerate(curves):
        colour = _colour(i)
        marker = None if by_request else MARKERS[i % len(MARKERS)]
        ax_t.plot(*_gapped([(x, y / scale) for x, y in zip(curve.xs, curve.ys, strict=True)], sizes), marker=marker,
                  color=colour, label=curve.label)
        bus = [(r["bytes"], r["busbw_GBps"]) for r in curve.rows if isinstance(r.get("busbw_GBps"), int | float)]
        alg = [(r["bytes"], r["algbw_GBps"]) for r in curve.rows if isinstance(r.get("algbw_GBps"), int | float)]
        if bus:
            ax_b.plot(*_gapped(bus, sizes), marker=marker, color=colour, label=f"{curve.label} busbw")
        if alg:
            ax_b.plot(*_gapped(alg, sizes), linestyle="--", color=colour, alpha=0.7, label=f"{curve.label} algbw")
        if by_request:
            _mark_what_ran(curve, "bytes", ran_marker, colour, ax_t, scale, ax_b, labels=auto_points <= AUTO_POINT_LABELS)
    if by_request:
        _what_ran_legend(ax_t, ran_marker)
    collective = rows[0]["collective"]
    ranks = sorted({r["ranks"] for r in rows})
    for ax in (ax_t, ax_b):
        _size_axis(ax, sizes)
        ax.set_xlabel("message size (nccl-tests convention)")
        ax.grid(alpha=0.3, which="both")
        ax.tick_params(axis="x", labelrotation=30)
    _plain_log(ax_t)
    ax_t.set_ylabel(f"time ({unit}, log scale)")
    ax_t.set_title("time per call (lower is better)")
    _legend(fig, ax_t)
    ax_b.set_ylabel("bandwidth (GB/s)")
    ax_b.set_title("busbw (solid) and algbw (dashed), higher is better")
    if len(curves) <= AXES_LEGEND_ENTRIES // 2:  # busbw and algbw per curve; the left legend names the curves
        ax_b.legend(fontsize=7, ncols=2 if len(curves) > 2 else 1)
    fig.suptitle(f"{collective} on {', '.join(map(str, ranks))} ranks: {result.scenario.get('name', '')}")
    return fig


def plot_p2p(result: RunResult) -> Figure | None:
    """Draw OSU-style point-to-point results against size, marking the eager -> rendezvous switch.

    Latency rows (one-way time, log-log) on the left, bandwidth rows on the right; filled
    markers are eager messages, hollow ones rendezvous. Returns None without p2p rows.
    """
    rows = row_kinds(result)["p2p"]
    if not rows:
        return None
    panels = [("latency", "latency_s"), ("bandwidth", "bandwidth_Bps"), ("bibw", "bandwidth_Bps")]
    present = [(test, key) for test, key in panels if any(r["test"] == test and key in r for r in rows)]
    if not present:
        return None
    fig = _figure(6 * len(present), 4.8)
    axes = fig.subplots(1, len(present), squeeze=False)[0]
    keys = sweep_keys(result)
    for ax, (test, key) in zip(axes, present, strict=True):
        mine = [r for r in rows if r["test"] == test and isinstance(r.get(key), int | float)]
        curves = series(mine, "bytes", key, by=[], keys=keys)
        values = [r[key] for r in mine]
        if key == "latency_s":
            scale, unit = time_unit(max(values))
            ylabel = f"one-way latency ({unit})"
        else:
            scale, unit = 1e6, "MB/s"
            ylabel = "bandwidth (MB/s)"
        for i, curve in enumerate(curves):
            colour = _colour(i)
            xs = [x if x > 0 else ZERO_BYTES for x in curve.xs]  # a log axis has no 0: 0 B sits at 1/2 B
            # Later curves are drawn thinner, so a curve that runs on top of another leaves it visible.
            ax.plot(xs, [y / scale for y in curve.ys], color=colour, linewidth=max(2.8 - 0.7 * i, 1.0),
                    label=curve.label if len(curves) > 1 else None)
            for proto, face in (("eager", colour), ("rendezvous", "white")):
                pts = [(r["bytes"] or ZERO_BYTES, r[key] / scale) for r in curve.rows if r.get("protocol") == proto]
                if pts:
                    ax.plot(*zip(*pts, strict=True), linestyle="none", marker="o", markerfacecolor=face,
                            markeredgecolor=colour)
            eager = [r["bytes"] for r in curve.rows if r.get("protocol") == "eager"]
            rndv = [r["bytes"] for r in curve.rows if r.get("protocol") == "rendezvous"]
            if eager and rndv and 0 < max(eager) < min(rndv):
                lo, hi = max(eager), min(rndv)
                switch = math.sqrt(max(lo, 1) * hi)
                ax.axvline(switch, color=colour, linestyle=":", linewidth=1.5)
                ax.annotate(f"eager limit\n{fmt_bytes(lo)} | {fmt_bytes(hi)}", (switch, 0.97),
                            xycoords=("data", "axes fraction"), ha="center", va="top", fontsize=8, color=colour,
                            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8})
        kinds = {r.get("protocol") for r in mine}
        for proto, face in (("eager", "black"), ("rendezvous", "white")):
            if proto in kinds:  # one legend entry per protocol, whatever the curves' colours
                ax.plot([], [], linestyle="none", marker="o", markerfacecolor=face, markeredgecolor="black",
                        label=f"{proto} ({'filled' if proto == 'eager' else 'hollow'})")
        _size_axis(ax, [r["bytes"] or ZERO_BYTES for r in mine])
        _log_if_wide(ax, values, "y")
        ax.set_xlabel("message size")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{test} (OSU style)")
        ax.grid(alpha=0.3, which="both")
        ax.tick_params(axis="x", labelrotation=30)
        ax.legend(fontsize=8)
    fig.suptitle(f"point-to-point between ranks 0 and 1: {result.scenario.get('name', '')}")
    return fig


# ----------------------------------------------------------------------------- capacity planning


def _interconnect_keys(result: RunResult) -> list[str]:
    return [k for k in sweep_keys(result) if k != "topology.nodes"]


def plot_scaling(result: RunResult) -> Figure | None:
    """Draw time and efficiency against the number of ranks, one curve per interconnect.

    Training rows give iteration time and scaling efficiency, hybrid-parallel training rows
    iteration time and MFU (their layout changes with the rank count); collective rows whose rank
    count varies give time per call and busbw, one curve per collective, algorithm and size.
    Only curves with at least two rank counts are drawn; returns None if there is none.
    """
    kinds = row_kinds(result)
    keys = _interconnect_keys(result)
    if kinds["training"]:
        rows, y1, y2 = kinds["training"], "iteration_time_s", "scaling_efficiency"
        curves = series(rows, "ranks", y1, by=[], keys=keys)
        titles = ("iteration time (lower is better)", "scaling efficiency (higher is better)")
    elif kinds["hybrid"]:
        rows, y1, y2 = kinds["hybrid"], "iteration_time_s", "mfu"
        curves = series(rows, "ranks", y1, by=[], keys=keys)
        titles = ("iteration time (lower is better)", "model FLOPs utilisation (higher is better)")
    else:
        rows, y1, y2 = kinds["collective"], "time_s", "busbw_GBps"
        by = (["collective"] if len({r["collective"] for r in rows}) > 1 else []) + [curve_column(rows), "bytes"]
        curves = series(rows, "ranks", y1, by=by, keys=keys)
        titles = ("time per call (lower is better)", "bus bandwidth (higher is better)")
    # A curve is drawn only if its rank count varies: points of one rank count (a sweep over
    # bandwidths at a fixed size of cluster) would all sit at one x, which says nothing.
    curves = [c for c in curves if len(set(c.xs)) >= 2]
    if not curves:
        return None
    fig = _figure(12, 5)
    ax_t, ax_e = fig.subplots(1, 2, sharex=True)
    times = [y for c in curves for y in c.ys]
    scale, unit = time_unit(max(times))
    ranks = sorted({x for c in curves for x in c.xs})
    ran_marker = _ran_markers(curves) if y1 == "time_s" and curve_column(rows) == "requested" else None
    for i, curve in enumerate(curves):
        colour, marker = _colour(i), None if ran_marker else MARKERS[i % len(MARKERS)]
        ax_t.plot(curve.xs, [y / scale for y in curve.ys], marker=marker, color=colour, label=curve.label)
        pts = [(r["ranks"], r[y2]) for r in curve.rows if isinstance(r.get(y2), int | float)]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax_e.plot(xs, [v * 100 for v in ys] if y2 in ("scaling_efficiency", "mfu") else ys, marker=marker, color=colour,
                      label=curve.label)
        if ran_marker:
            _mark_what_ran(curve, "ranks", ran_marker, colour, ax_t, scale, ax_e, labels=False)
    if ran_marker:
        _what_ran_legend(ax_t, ran_marker)
    for ax in (ax_t, ax_e):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(ranks))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("ranks")
        ax.grid(alpha=0.3)
    ax_t.set_ylabel(f"{'iteration' if y1 == 'iteration_time_s' else 'collective'} time ({unit})")
    if not _log_if_wide(ax_t, times, "y"):
        ax_t.set_ylim(bottom=0)
    if y2 == "mfu":
        ax_e.set_ylabel("MFU (%)")
        ax_e.set_ylim(bottom=0)
    elif y2 == "scaling_efficiency":
        ax_e.set_ylabel("scaling efficiency (%)")
        ax_e.set_ylim(0, 105)
        ax_e.axhline(100, color="grey", linewidth=0.8, linestyle=":")
    else:
        ax_e.set_ylabel("busbw (GB/s)")
    ax_t.set_title(titles[0])
    ax_e.set_title(titles[1])
    _legend(fig, ax_t)
    fig.suptitle(f"capacity planning: {result.scenario.get('name', '')}")
    return fig


def plot_breakdown(result: RunResult) -> Figure | None:
    """Draw stacked bars per rank count: compute, and the communication left exposed after it.

    One panel per interconnect (sweep point other than the rank count); each bar is labelled
    with the exposed share of the iteration. Returns None without training rows.
    """
    rows = row_kinds(result)["training"]
    if not rows:
        return None
    keys = _interconnect_keys(result)
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row.get(k) for k in keys), []).append(row)
    n = len(groups)
    fig = _figure(min(4.2 * n + 1, 16), 4.8)
    axes = fig.subplots(1, n, sharey=True, squeeze=False)[0]
    top = max(r["iteration_time_s"] for r in rows)
    scale, unit = time_unit(top)
    for ax, (group, members) in zip(axes, groups.items(), strict=True):
        members = sorted(members, key=lambda r: r["ranks"])
        labels = [str(r["ranks"]) for r in members]
        x = np.arange(len(members))
        compute = np.array([r["compute_s"] for r in members]) / scale
        exposed = np.array([r["exposed_comm_s"] for r in members]) / scale
        ax.bar(x, compute, color=KIND_COLOURS["compute"], label="compute")
        ax.bar(x, exposed, bottom=compute, color="#D55E00", label="exposed communication")
        for xi, r, c, e in zip(x, members, compute, exposed, strict=True):
            share = r["exposed_comm_s"] / r["iteration_time_s"] if r["iteration_time_s"] > 0 else 0.0
            ax.annotate(f"{share * 100:.0f}%", (xi, c + e), textcoords="offset points", xytext=(0, 2), ha="center",
                        fontsize=8)
        ax.set_xticks(x, labels)
        ax.set_xlabel("ranks")
        ax.set_title(", ".join(str(v) for v in group) or "iteration")
        ax.grid(axis="y", alpha=0.3)
        ax.set_ylim(0, top / scale * 1.12)
    axes[0].set_ylabel(f"time per iteration ({unit})")
    axes[0].legend(fontsize=8, loc="upper left")
    fig.suptitle("where the iteration goes (label: exposed communication share)")
    return fig


# ----------------------------------------------------------------------------- closed forms


def plot_closed_form(result: RunResult) -> Figure | None:
    """Draw simulated time next to the closed-form alpha-beta-gamma time, and their ratio.

    x is the message size, or the rank count when sizes do not vary. Solid lines with markers
    are simulated, dashed lines the formula. Returns None if no row has a formula.
    """
    rows = closed_form_rows(result)
    if not rows:
        return None
    sizes, ranks = {r["bytes"] for r in rows}, {r["ranks"] for r in rows}
    x = "bytes" if len(sizes) >= len(ranks) else "ranks"
    keys = [k for k in sweep_keys(result) if k != "topology.nodes"]
    by = ["algorithm"] + (["bytes"] if x == "ranks" and len(sizes) > 1 else ["ranks"] if x == "bytes" and len(ranks) > 1 else [])
    sim_curves = series(rows, x, "time_s", by=by, keys=keys)
    model_curves = series(rows, x, "model_s", by=by, keys=keys)
    fig = _figure(12, 5)
    ax_t, ax_r = fig.subplots(1, 2, sharex=True)
    values = [v for c in (*sim_curves, *model_curves) for v in c.ys if v > 0]
    scale, unit = time_unit(max(values) if values else 1.0)
    for i, (sim, model) in enumerate(zip(sim_curves, model_curves, strict=True)):
        colour, marker = _colour(i), MARKERS[i % len(MARKERS)]
        ax_t.plot(sim.xs, [y / scale for y in sim.ys], marker=marker, color=colour, label=f"{sim.label} simulated")
        ax_t.plot(model.xs, [y / scale for y in model.ys], linestyle="--", color=colour, label=f"{sim.label} formula")
        ax_r.plot(sim.xs, [r["ratio"] for r in sim.rows], marker=marker, color=colour, label=sim.label)
    for ax in (ax_t, ax_r):
        if x == "bytes":
            _size_axis(ax, [r["bytes"] for r in rows])
            ax.set_xlabel("message size")
            ax.tick_params(axis="x", labelrotation=30)
        else:
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_locator(FixedLocator(sorted({r["ranks"] for r in rows})))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xlabel("ranks")
        ax.grid(alpha=0.3, which="both")
    if values and max(values) / min(values) > 30:
        _plain_log(ax_t)
    ax_t.set_ylabel(f"time ({unit})")
    ax_t.set_title("simulated (solid) vs closed form (dashed)")
    _legend(fig, ax_t, 7)
    ax_r.axhline(1.0, color="grey", linestyle=":")
    ax_r.set_ylabel("simulated / closed form")
    ax_r.set_title("ratio (1 = the formula holds)")
    ratios = [r["ratio"] for r in rows if math.isfinite(r["ratio"])]
    if ratios:
        lo, hi = min(min(ratios), 1.0), max(max(ratios), 1.0)
        pad = max((hi - lo) * 0.1, 0.05)
        ax_r.set_ylim(max(lo - pad, 0), hi + pad)
    if len(sim_curves) <= AXES_LEGEND_ENTRIES:
        ax_r.legend(fontsize=8)
    fig.suptitle("closed-form alpha-beta-gamma cost vs simulation")
    return fig


# ----------------------------------------------------------------------------- teaching


def plot_message_diagram(p: int, messages: Sequence[dict[str, Any]], *, title: str = "",
                         step_labels: Sequence[str] = ()) -> Figure:
    """Draw a teaching diagram: ranks down, steps across, one arrow per message.

    Each message is a dict with ``src``, ``dst``, ``step`` (1-based) and an optional ``label``
    (what it carries), written at the start of its arrow. *step_labels* go under the step
    numbers (e.g. the step's time range).
    """
    steps = max((m["step"] for m in messages), default=0)
    width = min(max(7.5, 1.9 * steps + 2.0), 22.0)
    fig = _figure(width, min(1.8 + 0.6 * p, 14.0))
    ax = fig.add_subplot()
    for k in range(1, steps + 1):
        ax.axvspan(k - 0.5, k + 0.5, color="#eef2f8" if k % 2 else "#f8f4ec", zorder=0)
    for r in range(p):
        ax.axhline(r, color="#bbbbbb", linewidth=0.8, zorder=1)
    per_step: dict[int, int] = {}
    for msg in messages:
        per_step[msg["step"]] = per_step.get(msg["step"], 0) + 1
    show_labels = max(per_step.values(), default=0) <= 16  # beyond that, labels would overlap
    for msg in messages:
        k = msg["step"]
        colour = DIAGRAM_COLOURS[msg["src"] % len(DIAGRAM_COLOURS)]  # one colour per sender: follow a rank
        x0, x1, y0, y1 = k - 0.38, k + 0.38, msg["src"], msg["dst"]
        ax.annotate("", xy=(x1, y1), xytext=(x0, y0), zorder=3,
                    arrowprops={"arrowstyle": "-|>", "color": colour, "linewidth": 1.4, "shrinkA": 3, "shrinkB": 3})
        if show_labels and msg.get("label"):
            ax.annotate(msg["label"], (x0 + 0.05, y0), xytext=(0, 5 if y1 >= y0 else -5), textcoords="offset points",
                        fontsize=7, ha="left", va="bottom" if y1 >= y0 else "top", color=colour, zorder=4,
                        bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 0.4})
    ax.set_ylim(p - 0.5, -0.7)
    ax.set_yticks(range(p), [f"rank {r}" for r in range(p)])
    ax.set_xlim(0.5, steps + 0.5)
    labels = [f"step {k}" + (f"\n{step_labels[k - 1]}" if k - 1 < len(step_labels) else "") for k in range(1, steps + 1)]
    ax.set_xticks(range(1, steps + 1), labels, fontsize=8)
    ax.set_xlabel("step (one more than the step of the last message the sender had received)", fontsize=9)
    ax.set_title(title)
    return fig
