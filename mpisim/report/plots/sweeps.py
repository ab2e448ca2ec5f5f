"""Size sweeps: the nccl-tests view -- time, algbw and busbw against message size, one curve per
algorithm (asked for; ``auto`` marks what it chose).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from mpisim.report.plots.style import (
    AXES_LEGEND_ENTRIES,
    MARKERS,
    add_legend,
    curve_colour,
    new_figure,
    plain_log,
    size_axis,
    time_unit,
)
from mpisim.report.records import RunResult
from mpisim.report.tables import (
    Series,
    row_kinds,
    series,
    sweep_keys,
)


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


def ran_markers(curves: Sequence[Series]) -> dict[str, str]:
    """One marker per algorithm that ran, the same on every curve (in order of appearance)."""
    ran = dict.fromkeys(r["algorithm"] for c in curves for r in c.rows)
    return {name: MARKERS[j % len(MARKERS)] for j, name in enumerate(ran)}


def mark_what_ran(curve: Series, x: str, ran_marker: dict[str, str], colour: str, ax_t: Axes, scale: float,
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


def what_ran_legend(ax: Axes, ran_marker: dict[str, str]) -> None:
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
    ran_marker = ran_markers(curves)
    auto_points = sum(1 for c in curves for r in c.rows if r.get("requested") == "auto")

    fig = new_figure(12, 5.2)
    ax_t, ax_b = fig.subplots(1, 2)
    sizes = sorted({x for c in curves for x in c.xs})
    times = [y for c in curves for y in c.ys if y > 0]
    scale, unit = time_unit(max(times) if times else 1.0)
    for i, curve in enumerate(curves):
        colour = curve_colour(i)
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
            mark_what_ran(curve, "bytes", ran_marker, colour, ax_t, scale, ax_b, labels=auto_points <= AUTO_POINT_LABELS)
    if by_request:
        what_ran_legend(ax_t, ran_marker)
    collective = rows[0]["collective"]
    ranks = sorted({r["ranks"] for r in rows})
    for ax in (ax_t, ax_b):
        size_axis(ax, sizes)
        ax.set_xlabel("message size (nccl-tests convention)")
        ax.grid(alpha=0.3, which="both")
        ax.tick_params(axis="x", labelrotation=30)
    plain_log(ax_t)
    ax_t.set_ylabel(f"time ({unit}, log scale)")
    ax_t.set_title("time per call (lower is better)")
    add_legend(fig, ax_t)
    ax_b.set_ylabel("bandwidth (GB/s)")
    ax_b.set_title("busbw (solid) and algbw (dashed), higher is better")
    if len(curves) <= AXES_LEGEND_ENTRIES // 2:  # busbw and algbw per curve; the left legend names the curves
        ax_b.legend(fontsize=7, ncols=2 if len(curves) > 2 else 1)
    fig.suptitle(f"{collective} on {', '.join(map(str, ranks))} ranks: {result.scenario.get('name', '')}")
    return fig
