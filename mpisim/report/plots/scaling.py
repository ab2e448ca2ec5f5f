"""Capacity planning: iteration time and scaling efficiency against ranks, one curve per
interconnect (or collective time against ranks), and compute against exposed communication.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from mpisim.report.plots.style import (
    KIND_COLOURS,
    MARKERS,
    add_legend,
    curve_colour,
    log_if_wide,
    new_figure,
    time_unit,
)
from mpisim.report.plots.sweeps import curve_column, mark_what_ran, ran_markers, what_ran_legend
from mpisim.report.records import RunResult
from mpisim.report.tables import (
    row_kinds,
    series,
    sweep_keys,
)


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
    fig = new_figure(12, 5)
    ax_t, ax_e = fig.subplots(1, 2, sharex=True)
    times = [y for c in curves for y in c.ys]
    scale, unit = time_unit(max(times))
    ranks = sorted({x for c in curves for x in c.xs})
    ran_marker = ran_markers(curves) if y1 == "time_s" and curve_column(rows) == "requested" else None
    for i, curve in enumerate(curves):
        colour, marker = curve_colour(i), None if ran_marker else MARKERS[i % len(MARKERS)]
        ax_t.plot(curve.xs, [y / scale for y in curve.ys], marker=marker, color=colour, label=curve.label)
        pts = [(r["ranks"], r[y2]) for r in curve.rows if isinstance(r.get(y2), int | float)]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax_e.plot(xs, [v * 100 for v in ys] if y2 in ("scaling_efficiency", "mfu") else ys, marker=marker, color=colour,
                      label=curve.label)
        if ran_marker:
            mark_what_ran(curve, "ranks", ran_marker, colour, ax_t, scale, ax_e, labels=False)
    if ran_marker:
        what_ran_legend(ax_t, ran_marker)
    for ax in (ax_t, ax_e):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(ranks))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("ranks")
        ax.grid(alpha=0.3)
    ax_t.set_ylabel(f"{'iteration' if y1 == 'iteration_time_s' else 'collective'} time ({unit})")
    if not log_if_wide(ax_t, times, "y"):
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
    add_legend(fig, ax_t)
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
    fig = new_figure(min(4.2 * n + 1, 16), 4.8)
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
