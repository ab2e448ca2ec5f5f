"""What every figure shares: colours per span kind and link class, figure and legend helpers,
and size and time axes (sizes on base-2 log axes labelled ``1 KiB``, ``1 MiB``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

from mpisim.report.tables import (
    fmt_bytes,
)

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


def save_png(fig: Figure, path: Path) -> None:
    """Write *fig* to *path* as a PNG with no creator stamp, so the same figure gives the same bytes."""
    FigureCanvasAgg(fig)  # the Agg canvas: raster output with no display and no pyplot state
    fig.savefig(path, format="png", metadata={"Software": None})


def new_figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def curve_colour(i: int) -> str:
    return CURVE_COLOURS[i % len(CURVE_COLOURS)]


#: An axes holds its legend up to this many entries; beyond, the legend goes beside the axes.
AXES_LEGEND_ENTRIES = 8


def add_legend(fig: Figure, ax: Axes, fontsize: float = 8) -> None:
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


def size_axis(ax: Axes, values: Sequence[float], axis: str = "x") -> None:
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


def plain_log(ax: Axes, axis: str = "y") -> None:
    """Put an axis on a log scale labelled with plain numbers (0.1, 1, 10), not powers of ten."""
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    target = ax.yaxis if axis == "y" else ax.xaxis
    target.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    target.set_minor_formatter(NullFormatter())


def log_if_wide(ax: Axes, values: Sequence[float], axis: str = "y", decades: float = 1.5) -> bool:
    """Use a log scale when positive *values* span more than *decades* decades."""
    positive = [v for v in values if v > 0]
    if positive and math.log10(max(positive) / min(positive)) > decades:
        plain_log(ax, axis)
        return True
    return False
