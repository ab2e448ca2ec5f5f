"""Hybrid-parallel training in a report: where an iteration goes, which layout wins, what each stage ran.

A hybrid-parallel training row (``kind: training`` with ``model:``) splits one iteration of the
rank on the critical path into compute, the pipeline bubble and the communication of each
parallel dimension. This module turns rows and records into the numbers the figures, the
"which layout" table and the findings share:

* :func:`breakdown` -- the iteration as a stack of :data:`COSTS`: compute, bubble,
  tensor-parallel, pipeline, expert- and context-parallel communication, and the data-parallel sync left
  exposed (what the exposed communication holds beyond the other three: the gradient buckets
  that backward did not hide, the ZeRO allgather of updated parameters, FSDP's waits for
  parameters);
* :func:`layout_label` -- a row's layout for people (``tp 2, pp 4, dp 8``, plus any other
  swept setting: ``zero=1``);
* :func:`layout_groups` -- rows of a sweep grouped by GPU count and sorted by iteration time:
  the "which layout" question is asked at a fixed number of GPUs;
* :func:`pipeline_lanes` -- from a world's compute spans, the forward and backward passes of
  each pipeline stage (one rank per stage: tensor-parallel rank 0 of data-parallel replica 0),
  which the pipeline timeline draws. Spans are recorded only with ``trace: {spans: true}``.

Everything comes from results.json alone (rows, the resolved scenario, span records), so
``mpisim report DIR`` draws the same figures again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mpisim.report.records import RunResult, WorldRecords
from mpisim.report.tables import point_label, row_kinds

__all__ = [
    "COSTS",
    "PARALLEL_KEYS",
    "Pass",
    "best_row",
    "breakdown",
    "has_pipeline",
    "hybrid_row_of",
    "layout_groups",
    "layout_label",
    "pipeline_lanes",
    "stage_ranks",
]

#: The parts of an iteration, in stacking order: (key, name for people).
COSTS = (
    ("compute", "compute"),
    ("bubble", "pipeline bubble"),
    ("tp", "tensor-parallel communication"),
    ("pp", "pipeline transfers"),
    ("ep", "expert-parallel all-to-all"),
    ("cp", "context-parallel K/V exchange"),
    ("dp", "exposed data-parallel sync"),
)
#: Row columns that hold the layout: a sweep key ending in one of these is shown once, as the layout.
PARALLEL_KEYS = ("tp", "cp", "pp", "dp", "ep")
#: The layout dimensions, innermost first, when the scenario does not say (the workload's default).
DEFAULT_ORDER = ("tp", "pp", "dp")
#: A compute span that is part of a pipeline pass: ``F3`` (forward of micro-batch 3), ``B3.1``
#: (backward of micro-batch 3 through model chunk 1, interleaved schedule).
PASS_LABEL = re.compile(r"^([FB])(\d+)(?:\.(\d+))?$")


def _num(row: dict[str, Any], key: str) -> float:
    value = row.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def breakdown(row: dict[str, Any]) -> dict[str, float]:
    """Return the seconds of each of :data:`COSTS` in *row*'s iteration.

    Compute, bubble, tensor-, pipeline- and expert-parallel communication are the row's own
    columns (time on the critical rank). The exposed data-parallel sync is the rest of the
    exposed communication, ``exposed_comm_s - tp - pp - ep``, clipped at 0: the data-parallel
    collectives run beside backward, so only what they add to the iteration is counted, not
    their duration (``dp_comm_s``). The parts add up to the iteration time unless the clip
    applied.
    """
    tp, pp, ep, cp = _num(row, "tp_comm_s"), _num(row, "pp_comm_s"), _num(row, "ep_comm_s"), _num(row, "cp_comm_s")
    return {
        "compute": _num(row, "compute_s"),
        "bubble": _num(row, "bubble_s"),
        "tp": tp,
        "pp": pp,
        "ep": ep,
        "cp": cp,
        "dp": max(0.0, _num(row, "exposed_comm_s") - tp - pp - ep - cp),
    }


def _is_parallel_key(key: str) -> bool:
    return key.rsplit(".", 1)[-1] in PARALLEL_KEYS or key.endswith(".parallel")


def layout_label(row: dict[str, Any], keys: list[str] | tuple[str, ...] = ()) -> str:
    """Name *row*'s layout: ``tp 2, pp 4, dp 8`` (``ep`` when above 1), then its other swept values.

    *keys* are the scenario's sweep keys; those that set the layout are already said by the
    layout itself, the others (``workload.zero``, ``topology.nodes``) are added as ``zero=1``.
    """
    parts = [f"{dim} {row[dim]}" for dim in PARALLEL_KEYS if dim in row and (dim not in ("ep", "cp") or row[dim] != 1)]
    others = point_label(row, [k for k in keys if not _is_parallel_key(k)])
    return ", ".join(part for part in (", ".join(parts), others) if part)


def by_gpu_count(result: RunResult) -> list[tuple[int, list[dict[str, Any]]]]:
    """The hybrid rows grouped by GPU count, in the order the counts first appear."""
    groups: dict[int, list[dict[str, Any]]] = {}
    for row in row_kinds(result)["hybrid"]:
        groups.setdefault(int(row.get("ranks") or 0), []).append(row)
    return list(groups.items())


def layout_groups(result: RunResult) -> dict[int, list[dict[str, Any]]]:
    """Return the hybrid rows by GPU count, fastest first, for GPU counts with two rows or more.

    Rows that do not fit the device's memory (``fits`` false) sort after those that do, as
    the first row is the layout to pick. Layouts with equal times keep the sweep's order.
    """
    groups: dict[int, list[dict[str, Any]]] = {}
    for row in row_kinds(result)["hybrid"]:
        groups.setdefault(int(row.get("ranks") or 0), []).append(row)
    return {ranks: sorted(rows, key=lambda r: (r.get("fits") is False, _num(r, "iteration_time_s")))
            for ranks, rows in sorted(groups.items()) if len(rows) >= 2}


def best_row(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Return the fastest of *rows* that fits the device's memory (the fastest of all if none fits)."""
    fitting = [r for r in rows if r.get("fits") is not False] or rows
    return min(fitting, key=lambda r: _num(r, "iteration_time_s"), default=None)


# ----------------------------------------------------------------------------- pipeline passes


@dataclass(frozen=True)
class Pass:
    """One forward (``F``) or backward (``B``) pass of a micro-batch through a stage's model chunk.

    It lasts from the start of its first compute span to the end of its last: the layers'
    compute and the tensor- and expert-parallel communication between them.
    """

    kind: str
    micro: int
    chunk: int | None
    t_start: float
    t_end: float

    @property
    def name(self) -> str:
        """``F3`` or, with model chunks, ``F3.1``."""
        return f"{self.kind}{self.micro}" + (f".{self.chunk}" if self.chunk is not None else "")


def hybrid_row_of(result: RunResult, world: WorldRecords) -> dict[str, Any] | None:
    """Return the hybrid row measured in *world*: the one of its sweep point (None if there is none)."""
    rows = [row for row in row_kinds(result)["hybrid"]
            if all(str(row.get(key)) == str(value) for key, value in world.point.items())]
    return rows[0] if len(rows) == 1 else None


def _order(result: RunResult, world: WorldRecords) -> tuple[str, ...]:
    """The layout's dimension order (innermost first): the sweep point's, else the scenario's."""
    value = world.point.get("workload.parallel.order")
    if value is None:
        parallel = (result.scenario.get("workload") or {}).get("parallel")
        value = parallel.get("order") if isinstance(parallel, dict) else None
    if isinstance(value, str):
        value = re.findall(r"[a-z]+", value)
    order = tuple(str(v) for v in value) if isinstance(value, list | tuple) else DEFAULT_ORDER
    return order if sorted(order) == sorted(DEFAULT_ORDER) else DEFAULT_ORDER


def stage_ranks(result: RunResult, world: WorldRecords) -> list[int]:
    """Return the rank that runs each pipeline stage in *world* (tensor-parallel rank 0, replica 0).

    The rank of a GPU is its position in the layout, counted innermost dimension first (the
    workload's ``parallel.order``): with ``tp, pp, dp``, stage s is rank ``s x tp``.
    """
    row = hybrid_row_of(result, world)
    if row is None:
        return []
    sizes = {dim: int(row.get(dim) or 1) for dim in DEFAULT_ORDER}
    ranks = []
    for stage in range(sizes["pp"]):
        position = {"tp": 0, "pp": stage, "dp": 0}
        rank, stride = 0, 1
        for dim in _order(result, world):
            rank += position[dim] * stride
            stride *= sizes[dim]
        ranks.append(rank)
    return ranks


def _passes(spans: list[Any]) -> list[Pass]:
    """The passes in one rank's pass-labelled compute *spans*: runs of spans with one label, in time order."""
    out: list[Pass] = []
    label, first, last = "", 0.0, 0.0
    for span in sorted(spans, key=lambda s: (s.t_start, s.t_end)):
        if span.label != label:
            if label:
                out.append(_pass(label, first, last))
            label, first, last = span.label, span.t_start, span.t_end
        else:
            last = max(last, span.t_end)
    if label:
        out.append(_pass(label, first, last))
    return out


def _pass(label: str, t_start: float, t_end: float) -> Pass:
    match = PASS_LABEL.match(label)
    assert match is not None  # only matching labels are collected
    kind, micro, chunk = match.groups()
    return Pass(kind, int(micro), None if chunk is None else int(chunk), t_start, t_end)


def pipeline_lanes(result: RunResult, world: WorldRecords) -> list[tuple[int, list[Pass]]]:
    """Return ``(rank, passes)`` for each pipeline stage of *world*, stage 0 first.

    Empty when the world has no pass spans (spans were not traced, or records were slimmed
    away), is not a hybrid-parallel training world, or has a single stage.
    """
    ranks = stage_ranks(result, world)
    if len(ranks) < 2 or not world.spans:
        return []
    mine: dict[int, list[Any]] = {rank: [] for rank in ranks}
    for span in world.spans:
        if span.kind == "compute" and span.rank in mine and PASS_LABEL.match(span.label):
            mine[span.rank].append(span)
    lanes = [(rank, _passes(mine[rank])) for rank in ranks]
    return lanes if all(passes for _, passes in lanes) else []


def has_pipeline(result: RunResult, world: WorldRecords) -> bool:
    """Whether *world* has a pipeline timeline to draw (see :func:`pipeline_lanes`)."""
    return bool(world.spans) and bool(pipeline_lanes(result, world))

