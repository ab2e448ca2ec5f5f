"""Point-to-point: OSU latency and bandwidth against size, with the switch from eager to
rendezvous marked.
"""

from __future__ import annotations

import math

from matplotlib.figure import Figure

from mpisim.report.plots.style import (
    ZERO_BYTES,
    curve_colour,
    log_if_wide,
    new_figure,
    size_axis,
    time_unit,
)
from mpisim.report.records import RunResult
from mpisim.report.tables import (
    fmt_bytes,
    row_kinds,
    series,
    sweep_keys,
)


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
    fig = new_figure(6 * len(present), 4.8)
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
            colour = curve_colour(i)
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
        size_axis(ax, [r["bytes"] or ZERO_BYTES for r in mine])
        log_if_wide(ax, values, "y")
        ax.set_xlabel("message size")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{test} (OSU style)")
        ax.grid(alpha=0.3, which="both")
        ax.tick_params(axis="x", labelrotation=30)
        ax.legend(fontsize=8)
    fig.suptitle(f"point-to-point between ranks 0 and 1: {result.scenario.get('name', '')}")
    return fig
