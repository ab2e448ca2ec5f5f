"""The clusters of a sweep side by side: time per iteration, time to train, cost and MFU.

One panel per quantity, one bar per cluster in the order of the report's "which cluster"
table (:func:`mpisim.report.clusters.cluster_rows`: soonest trained first). Time to train and
cost are drawn only when the rows have them (``workload.tokens``, ``price``); clusters whose
layout does not fit the device's memory are grey and hatched, as in the "which layout" figure.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from mpisim.report.clusters import cluster_label, cluster_rows
from mpisim.report.plots.hybrid import FITS_COLOUR, NO_FIT_COLOUR, NO_FIT_HATCH
from mpisim.report.plots.style import time_unit
from mpisim.report.records import RunResult

__all__ = ["plot_clusters"]

#: The panels: (row key, axis label, scale of the value for the axis).
_PANELS = (
    ("iteration_time_s", "time per iteration", None),
    ("time_to_train_s", "time to train (days)", 1 / 86400),
    ("cost", "cost (price x GPU-hours)", 1.0),
    ("mfu", "MFU (%)", 100.0),
)


def plot_clusters(result: RunResult) -> Figure | None:
    """Draw the clusters of a sweep over ``topology.`` keys; None without such a sweep."""
    rows = cluster_rows(result)
    if not rows:
        return None
    panels = [(key, label, scale) for key, label, scale in _PANELS
              if all(isinstance(r.get(key), int | float) for r in rows)]
    if not panels:
        return None
    labels = [cluster_label(r, result).replace(", ", "\n") for r in rows]
    fits = [r.get("fits") is not False for r in rows]
    x = np.arange(len(rows))
    fig = Figure(figsize=(min(max(7.0, 0.6 * len(rows) * len(panels) + 2.0), 24.0), 4.8), dpi=100,
                 layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (key, label, scale) in zip(axes, panels, strict=True):
        values = [float(r[key]) for r in rows]
        if scale is None:  # a time axis in the unit that suits it
            scale, unit = time_unit(max(values))
            scale, label = 1 / scale, f"{label} ({unit})"
        ax.bar(x, [v * scale for v in values], 0.7, color=[FITS_COLOUR if f else NO_FIT_COLOUR for f in fits],
               hatch=[None if f else NO_FIT_HATCH for f in fits], edgecolor=["white" if f else "#666666" for f in fits])
        ax.set_xticks(x, labels, fontsize=7, rotation=30 if len(rows) > 4 else 0, ha="right" if len(rows) > 4 else "center")
        ax.set_ylabel(label)
        ax.set_title(label.split(" (")[0], fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(f"which cluster: {result.scenario.get('name', '')} (soonest trained first)")
    return fig
