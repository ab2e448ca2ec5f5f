"""Links: which links bound the run and when -- a heat map of the most utilised links over time,
next to each link's utilisation, coloured by link class.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from mpisim.report.plots.style import (
    LINK_CLASS_COLOURS,
    new_figure,
    time_unit,
)
from mpisim.report.records import WorldRecords
from mpisim.report.tables import (
    link_table,
)


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
    fig = new_figure(12 if has_map else 8, height)
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
