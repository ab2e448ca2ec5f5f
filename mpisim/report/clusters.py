"""Whole clusters compared in a planner's units: which cluster trains the model soonest, and for how much.

A capacity plan is often a sweep over *clusters* -- presets, node counts, GPUs -- with the
model and layout fixed::

    sweep:
      topology.preset: [dgx-a100, dgx-h100]
      topology.nodes: [16, 32]

Each point is one cluster. :func:`cluster_rows` picks them out of a result (hybrid-parallel
training rows of a sweep that changes a ``topology.`` key) and :func:`cluster_table` lays them
side by side, soonest trained first: GPUs, time per iteration, tokens/s, MFU and, where the
scenario gives ``workload.tokens`` (and a price), the run's time to train, GPU-hours, cost and
energy. The figure (:func:`mpisim.report.plots.clusters.plot_clusters`) draws the same rows.
Everything comes from results.json, so ``mpisim report DIR`` renders it again.
"""

from __future__ import annotations

from typing import Any

from mpisim.report.records import RunResult
from mpisim.report.tables import fmt_bytes, fmt_percent, fmt_time, point_label, row_kinds, sweep_keys

__all__ = ["cluster_findings", "cluster_label", "cluster_rows", "cluster_table"]

#: The planner's columns of the table: (row key, header, how to write it).
_COLUMNS: tuple[tuple[str, str, Any], ...] = (
    ("ranks", "GPUs", lambda v: f"{v:,}"),
    ("iteration_time_s", "iteration", fmt_time),
    ("tokens_per_s", "tokens/s", lambda v: f"{v:,.0f}"),
    ("mfu", "MFU", fmt_percent),
    ("time_to_train_s", "time to train", lambda v: f"{v / 86400:,.1f} days"),
    ("gpu_hours", "GPU-hours", lambda v: f"{v:,.0f}"),
    ("cost", "cost", lambda v: f"{v:,.0f}"),
    ("price_per_gpu_hour", "per GPU-hour", lambda v: f"{v:,.2f}"),
    ("energy_kwh", "energy", lambda v: f"{v / 1000:,.1f} MWh"),
    ("memory_per_gpu_bytes", "memory per GPU", fmt_bytes),
)


def _cluster_keys(result: RunResult) -> list[str]:
    return [key for key in sweep_keys(result) if key.startswith("topology.")]


def cluster_rows(result: RunResult) -> list[dict[str, Any]]:
    """The hybrid training rows of a sweep over clusters, soonest trained (else fastest iteration) first.

    Empty unless the sweep changes a ``topology.`` key and there are two rows or more. Rows that
    do not fit the device's memory sort last, as in the "which layout" table.
    """
    rows = row_kinds(result)["hybrid"]
    if not _cluster_keys(result) or len(rows) < 2:
        return []

    def when(row: dict[str, Any]) -> float:
        value = row.get("time_to_train_s", row.get("iteration_time_s"))
        return float(value) if isinstance(value, int | float) else float("inf")

    return sorted(rows, key=lambda r: (r.get("fits") is False, when(r)))


def cluster_label(row: dict[str, Any], result: RunResult) -> str:
    """Name a row's cluster: its swept topology values, ``dgx-h100, nodes=32`` (other swept keys after)."""
    keys = sweep_keys(result)
    label = point_label(row, [k for k in keys if k.startswith("topology.")])
    others = point_label(row, [k for k in keys if not k.startswith("topology.")])
    return ", ".join(part for part in (label, others) if part)


def cluster_table(result: RunResult) -> tuple[list[str], list[list[str]]]:
    """The clusters side by side: (headers, rows), one row per cluster; columns no row has are left out."""
    rows = cluster_rows(result)
    if not rows:
        return [], []
    columns = [(key, header, fmt) for key, header, fmt in _COLUMNS
               if any(isinstance(r.get(key), int | float) and not isinstance(r.get(key), bool) for r in rows)]
    headers = ["cluster", *(header for _, header, _ in columns), "fits"]
    out = []
    for row in rows:
        cells = [cluster_label(row, result)]
        for key, _, fmt in columns:
            value = row.get(key)
            cells.append(fmt(value) if isinstance(value, int | float) and not isinstance(value, bool) else "n/a")
        fits = row.get("fits")
        cells.append("n/a" if fits is None else ("yes" if fits else "**NO**"))
        out.append(cells)
    return headers, out


def cluster_findings(result: RunResult) -> list[str]:
    """The answer of a sweep over clusters in one line: the cluster that trains soonest and, when
    another costs less, the cheapest, each with its time to train and cost (clusters whose layout
    fits the device's memory only)."""
    rows = [r for r in cluster_rows(result) if r.get("fits") is not False]
    if len(rows) < 2 or not all(isinstance(r.get("time_to_train_s"), int | float) for r in rows):
        return []

    def said(row: dict[str, Any]) -> str:
        cost = row.get("cost")
        money = f", cost {cost:,.0f}" if isinstance(cost, int | float) else ""
        return f"{row['time_to_train_s'] / 86400:,.1f} days on {row.get('ranks')} GPUs{money}"

    soonest = rows[0]
    text = f"**Soonest trained: {cluster_label(soonest, result)}** ({said(soonest)})"
    costed = [r for r in rows if isinstance(r.get("cost"), int | float)]
    cheapest = min(costed, key=lambda r: r["cost"], default=None)
    if cheapest is not None and cheapest is not soonest and cheapest["cost"] < soonest["cost"]:
        text += (f"; **cheapest: {cluster_label(cheapest, result)}** ({said(cheapest)}: "
                 f"{1 - cheapest['cost'] / soonest['cost']:.0%} less, "
                 f"{cheapest['time_to_train_s'] / soonest['time_to_train_s']:.2f}x the time)")
    return [text + "."]
