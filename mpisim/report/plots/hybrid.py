"""Figures of hybrid-parallel training: where the iteration goes, what each stage runs, which layout.

Like the other modules of :mod:`mpisim.report.plots`, each function reads a
:class:`~mpisim.report.records.RunResult` and returns a new Figure, or ``None`` when there is
nothing to draw.

=========================  ================================================================
figure                     what it answers
=========================  ================================================================
``plot_parallel_breakdown`` where each layout's iteration goes: compute, pipeline bubble,
                           tensor-, pipeline- and expert-parallel communication and the
                           exposed data-parallel sync, stacked, one bar per row
``plot_pipeline``          what each pipeline stage does when: its forward and backward
                           passes as boxes coloured by micro-batch; the bubble is the gaps
``plot_layouts``           which layout to pick at a fixed GPU count: iteration time, MFU
                           and memory per GPU, layouts that do not fit hatched
=========================  ================================================================
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from mpisim.report.hybrid import COSTS, breakdown, hybrid_row_of, layout_groups, layout_label, pipeline_lanes
from mpisim.report.plots.style import time_unit
from mpisim.report.records import RunResult, WorldRecords
from mpisim.report.tables import covered, fmt_bytes, fmt_percent, fmt_time, row_kinds, sweep_keys, world_title

__all__ = ["COST_COLOURS", "plot_layouts", "plot_parallel_breakdown", "plot_pipeline"]

#: One colour per part of the iteration (Okabe-Ito hues; tensor parallelism in NVLink's green,
#: the exposed data-parallel sync in the red of "exposed communication" elsewhere).
COST_COLOURS = {
    "compute": "#8c8c8c",
    "bubble": "#F0E442",
    "tp": "#009E73",
    "pp": "#56B4E9",
    "ep": "#CC79A7",
    "cp": "#E69F00",
    "dp": "#D55E00",
}
#: Colour of a layout that fits the device's memory, and of one that does not.
FITS_COLOUR, NO_FIT_COLOUR = "#0072B2", "#c8c8c8"
NO_FIT_HATCH = "//"
NO_FIT_TEXT = "#B00000"
#: Micro-batch colours: (forward, backward) pairs, lighter and darker of one hue (matplotlib's tab20).
MICRO_COLOURS = [("#aec7e8", "#1f77b4"), ("#ffbb78", "#ff7f0e"), ("#98df8a", "#2ca02c"), ("#ff9896", "#d62728"),
                 ("#c5b0d5", "#9467bd"), ("#c49c94", "#8c564b"), ("#f7b6d2", "#e377c2"), ("#c7c7c7", "#7f7f7f"),
                 ("#dbdb8d", "#bcbd22"), ("#9edae5", "#17becf")]
#: A figure is at most this wide (inches), whatever the number of bars.
MAX_WIDTH = 24.0


def _figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _bar_labels(rows: list[dict[str, Any]], keys: list[str]) -> list[str]:
    return [layout_label(row, keys) for row in rows]


def _label_axis(ax: Any, labels: list[str], rows: list[dict[str, Any]]) -> None:
    """Write the layouts under the bars, in red where the layout does not fit the device's memory."""
    rotate = len(labels) > 4 or max((len(s) for s in labels), default=0) > 18
    ax.set_xticks(range(len(labels)), labels, rotation=35 if rotate else 0, ha="right" if rotate else "center",
                  fontsize=8 if len(labels) <= 24 else 6)
    for tick, row in zip(ax.get_xticklabels(), rows, strict=True):
        if row.get("fits") is False:
            tick.set_color(NO_FIT_TEXT)


def plot_parallel_breakdown(result: RunResult) -> Figure | None:
    """Draw one stacked bar per hybrid-parallel row: where its iteration goes, by parallel dimension.

    The stack is :data:`~mpisim.report.hybrid.COSTS` (compute, bubble, tensor-, pipeline- and
    expert-parallel communication, exposed data-parallel sync); a black tick and the number on
    top give the iteration time. Bars keep the sweep's order and are labelled by layout.
    Returns None without hybrid rows.
    """
    rows = row_kinds(result)["hybrid"]
    if not rows:
        return None
    keys = sweep_keys(result)
    parts = [breakdown(row) for row in rows]
    present = [(key, name) for key, name in COSTS if any(p[key] > 0 for p in parts)]
    top = max(max(r["iteration_time_s"] for r in rows), max(sum(p.values()) for p in parts))
    scale, unit = time_unit(top)
    n = len(rows)
    fig = _figure(min(max(7.5, 0.5 * n + 3.0), MAX_WIDTH), 5.6)
    ax = fig.add_subplot()
    x = np.arange(n)
    bottom = np.zeros(n)
    for key, name in present:
        heights = np.array([p[key] for p in parts]) / scale
        ax.bar(x, heights, 0.7, bottom=bottom, color=COST_COLOURS[key], label=name, edgecolor="white", linewidth=0.4)
        bottom += heights
    iteration = np.array([r["iteration_time_s"] for r in rows]) / scale
    ax.plot(x, iteration, linestyle="none", marker="_", markersize=22 if n <= 16 else 10, color="black",
            markeredgewidth=2, label="iteration time")
    for xi, t, stack in zip(x, iteration, bottom, strict=True):
        ax.annotate(f"{t:.3g}", (xi, max(t, stack)), textcoords="offset points", xytext=(0, 3), ha="center",
                    fontsize=8 if n <= 24 else 6)
    _label_axis(ax, _bar_labels(rows, keys), rows)
    ax.set_ylim(0, top / scale * 1.12)
    ax.set_ylabel(f"time per iteration ({unit})")
    ax.set_xlabel("layout" + ("; red: does not fit the device's memory" if any(r.get("fits") is False for r in rows)
                              else ""))
    ax.grid(axis="y", alpha=0.3)
    ax.set_xlim(-0.6, n - 0.4)
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=3, fontsize=8)
    fig.suptitle(f"where the iteration goes, by parallel dimension: {result.scenario.get('name', '')}")
    return fig


def plot_pipeline(result: RunResult, world: WorldRecords, *, title: str | None = None) -> Figure | None:
    """Draw the pipeline timeline of *world*: one lane per stage, its passes as boxes over time.

    Each lane is the rank of tensor-parallel rank 0, data-parallel replica 0 of a stage. A box
    is a forward (lighter) or backward (darker; hatched unless boxes are many) pass of one micro-batch, its colour the
    micro-batch's (ten hues, repeated); it spans the pass's layers and the tensor-parallel
    communication between them. Gaps are time the stage is not running a pass: the pipeline
    bubble, waiting for a transfer, and the data-parallel sync at the end. Each lane is labelled
    with that idle share of the run. Returns None unless span records of two stages or more exist.
    """
    lanes = pipeline_lanes(result, world)
    if not lanes:
        return None
    t_end = max(world.t_end, max(p.t_end for _, passes in lanes for p in passes))
    scale, unit = time_unit(t_end)
    stages = len(lanes)
    boxes = sum(len(passes) for _, passes in lanes)
    fig = _figure(13, min(max(2.4 + 0.5 * stages, 3.6), 14.0))
    ax = fig.add_subplot()
    width = t_end / scale
    named = boxes <= 400  # beyond, names would not fit their boxes
    # White edges and hatching separate boxes; with many narrow boxes they would cover them.
    sparse = boxes <= 60 * stages
    edge = {"edgecolor": "white", "linewidth": 0.5} if sparse else {"edgecolor": "none"}
    micro_batches = set()
    for stage, (_rank, passes) in enumerate(lanes):
        for kind, hatch in (("F", None), ("B", "//" if sparse else None)):
            mine = [p for p in passes if p.kind == kind]
            micro_batches.update(p.micro for p in mine)
            ranges = [(p.t_start / scale, (p.t_end - p.t_start) / scale) for p in mine]
            colours = [MICRO_COLOURS[p.micro % len(MICRO_COLOURS)][kind == "B"] for p in mine]
            ax.broken_barh(ranges, (stage - 0.38, 0.76), facecolors=colours, hatch=hatch, **edge)
            if named:
                for p, (start, length) in zip(mine, ranges, strict=True):
                    if length >= width / 70:
                        ax.text(start + length / 2, stage, p.name, ha="center", va="center", fontsize=7,
                                color="white" if kind == "B" else "black", clip_on=True)
    labels = []
    for stage, (rank, passes) in enumerate(lanes):
        busy = covered((p.t_start, p.t_end) for p in passes)
        labels.append(f"stage {stage} (rank {rank})")
        ax.annotate(f"idle {fmt_percent(1 - busy / t_end)}", (1.0, stage), xycoords=("axes fraction", "data"),
                    xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_yticks(range(stages), labels, fontsize=8)
    ax.set_ylim(stages - 0.5, -0.5)
    ax.set_xlim(0, width)
    ax.set_xlabel(f"time (simulated {unit})")
    ax.grid(axis="x", alpha=0.3)
    row = hybrid_row_of(result, world)
    head = title or f"{world_title(world)}: pipeline schedule"
    if row is not None and row.get("iteration_time_s"):
        head += (f"\n{row.get('schedule')}, {row.get('micro_batches')} micro-batches; bubble on the critical rank "
                 f"{fmt_time(row.get('bubble_s'))} ({fmt_percent(row['bubble_s'] / row['iteration_time_s'])} "
                 "of the iteration)")
    ax.set_title(head, fontsize=10)
    shown = sorted(micro_batches)[: len(MICRO_COLOURS)]
    handles = [Patch(facecolor=MICRO_COLOURS[m][0], label=f"F{m}") for m in shown[:5]]
    handles += [Patch(facecolor=MICRO_COLOURS[m][1], hatch="//" if sparse else None, edgecolor="white", label=f"B{m}")
                for m in shown[:5]]
    handles.append(Line2D([], [], linestyle="none", label="gap: bubble, transfer or sync"))
    cycle = f", colours repeat every {len(MICRO_COLOURS)}" if len(micro_batches) > len(MICRO_COLOURS) else ""
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 11), fontsize=8,
               title=f"forward (lighter) and backward (darker) pass of micro-batch i{cycle}",
               title_fontsize=8)
    return fig


def plot_layouts(result: RunResult) -> Figure | None:
    """Draw the "which layout" figure: one panel per GPU count with two layouts or more.

    Bars are iteration times, fastest first (layouts that do not fit sort last, grey and
    hatched); the label at the foot of each bar is its MFU; diamonds on the right axis are the memory per
    GPU, with the device's memory as a dashed line when the sweep does not change it.
    Returns None without such a sweep.
    """
    groups = layout_groups(result)
    if not groups:
        return None
    keys = sweep_keys(result)
    topology = result.scenario.get("topology") or {}
    device = topology.get("device_memory") if not any(k.startswith("topology.") and k != "topology.nodes"
                                                        for k in keys) else None
    shown = list(groups.items())[:4]
    widest = max(len(rows) for _, rows in shown)
    fig = _figure(min(max(7.0, 0.55 * widest * len(shown) + 3.5), MAX_WIDTH), 5.6)
    axes = fig.subplots(1, len(shown), squeeze=False)[0]
    top = max(r["iteration_time_s"] for _, rows in shown for r in rows)
    scale, unit = time_unit(top)
    memory_top = max([r.get("memory_per_gpu_bytes") or 0 for _, rows in shown for r in rows] + [device or 0])
    for ax, (ranks, rows) in zip(axes, shown, strict=True):
        x = np.arange(len(rows))
        fits = [r.get("fits") is not False for r in rows]
        ax.bar(x, [r["iteration_time_s"] / scale for r in rows], 0.7,
               color=[FITS_COLOUR if f else NO_FIT_COLOUR for f in fits],
               hatch=[None if f else NO_FIT_HATCH for f in fits], edgecolor=["white" if f else "#666666" for f in fits])
        for xi, row in zip(x, rows, strict=True):
            mfu = row.get("mfu")
            text = f"MFU\n{mfu * 100:.0f}%" if isinstance(mfu, int | float) else ""
            if row.get("fits") is False:
                ax.annotate("does not fit" + (f"\n{text}" if text else ""), (xi, row["iteration_time_s"] / scale),
                            textcoords="offset points", xytext=(0, 3), ha="center", fontsize=7, color=NO_FIT_TEXT)
            elif text:  # inside the bar, at its foot: clear of the memory line and, mostly, of the diamonds
                ax.annotate(text, (xi, 0), textcoords="offset points", xytext=(0, 4), ha="center", va="bottom",
                            fontsize=7, color="white")
        _label_axis(ax, _bar_labels(rows, keys), rows)
        ax.set_ylim(0, top / scale * 1.18)
        ax.set_ylabel(f"iteration time ({unit})")
        ax.set_title(f"{ranks} GPUs, fastest first", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        mem = ax.twinx()
        memory = [r.get("memory_per_gpu_bytes") for r in rows]
        points = [(xi, m / 1e9) for xi, m in zip(x, memory, strict=True) if isinstance(m, int | float)]
        if points:
            mem.plot(*zip(*points, strict=True), linestyle="none", marker="D", color="black", markersize=6,
                     label="memory per GPU")
        if device:
            mem.axhline(device / 1e9, color=NO_FIT_TEXT, linestyle="--", linewidth=1)
            mem.annotate(f"device memory {fmt_bytes(device)}", (0.0, device / 1e9), xycoords=("axes fraction", "data"),
                         xytext=(3, 3), textcoords="offset points", fontsize=7, color=NO_FIT_TEXT)
        mem.set_ylim(0, max(memory_top / 1e9 * 1.15, 1e-9))
        mem.set_ylabel("memory per GPU (GB, diamonds)")
    handles = [Patch(facecolor=FITS_COLOUR, label="iteration time")]
    if any(r.get("fits") is False for _, rows in shown for r in rows):
        handles.append(Patch(facecolor=NO_FIT_COLOUR, hatch=NO_FIT_HATCH, edgecolor="#666666",
                             label="does not fit in memory"))
    handles.append(Line2D([], [], linestyle="none", marker="D", color="black", label="memory per GPU"))
    fig.legend(handles=handles, loc="outside lower center", ncols=3, fontsize=8)
    fig.suptitle(f"which layout: {result.scenario.get('name', '')}")
    return fig

