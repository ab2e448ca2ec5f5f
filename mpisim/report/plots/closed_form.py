"""Closed forms: the simulated time next to the closed-form alpha-beta-gamma time of each algorithm.
"""

from __future__ import annotations

import math

from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

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
    closed_form_rows,
    series,
    sweep_keys,
)


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
    fig = new_figure(12, 5)
    ax_t, ax_r = fig.subplots(1, 2, sharex=True)
    values = [v for c in (*sim_curves, *model_curves) for v in c.ys if v > 0]
    scale, unit = time_unit(max(values) if values else 1.0)
    for i, (sim, model) in enumerate(zip(sim_curves, model_curves, strict=True)):
        colour, marker = curve_colour(i), MARKERS[i % len(MARKERS)]
        ax_t.plot(sim.xs, [y / scale for y in sim.ys], marker=marker, color=colour, label=f"{sim.label} simulated")
        ax_t.plot(model.xs, [y / scale for y in model.ys], linestyle="--", color=colour, label=f"{sim.label} formula")
        ax_r.plot(sim.xs, [r["ratio"] for r in sim.rows], marker=marker, color=colour, label=sim.label)
    for ax in (ax_t, ax_r):
        if x == "bytes":
            size_axis(ax, [r["bytes"] for r in rows])
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
        plain_log(ax_t)
    ax_t.set_ylabel(f"time ({unit})")
    ax_t.set_title("simulated (solid) vs closed form (dashed)")
    add_legend(fig, ax_t, 7)
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
