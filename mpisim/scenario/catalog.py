"""What a scenario can name, as rows: topology presets, collective algorithms, workload kinds.

``mpisim list WHAT`` prints these rows as a table or (``--json``) as a list of objects. Each
catalogue comes with its columns, a header and how to read the cell from a row, so the table and
the JSON hold the same facts. An algorithm's ``gpu`` says whether it needs GPU hardware
(``"only"``: NVLS needs a switch that reduces) or is NCCL's and runs on any fabric (``"nccl"``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mpisim.collectives import nccl, registry  # importing the package registers every algorithm
from mpisim.network.presets import list_presets
from mpisim.workloads import workloads  # importing the package registers every kind

__all__ = ["CATALOGUES", "catalogue"]

CATALOGUES = ("topologies", "algorithms", "workloads")

Column = tuple[str, Callable[[dict[str, Any]], Any]]


def _gpu(algo: registry.Algorithm) -> str | None:
    """"only": it needs GPU hardware (nvls: a switch that reduces); "nccl": NCCL's, runs anywhere."""
    if "in_switch_reduction" in algo.requires:
        return "only"
    return "nccl" if algo.name in nccl.GPU_ALGORITHMS else None


def catalogue(what: str) -> tuple[list[dict[str, Any]], list[Column]]:
    """The rows of catalogue *what* (one of :data:`CATALOGUES`) and its table columns."""
    if what == "topologies":
        items = [{"name": name, "summary": summary} for name, summary in list_presets()]
        return items, [("name", lambda i: i["name"]), ("summary", lambda i: i["summary"])]
    if what == "algorithms":
        items = [{**algo.to_dict(), "gpu": _gpu(algo)} for algo in registry.available()]
        return items, [
            ("collective", lambda i: i["collective"]),
            ("algorithm", lambda i: i["algorithm"]),
            ("GPU", lambda i: {"only": "only (NVLS switch)", "nccl": "NCCL-style"}.get(i["gpu"] or "", "")),
            ("requires", lambda i: ", ".join(i["requires"])),
            ("summary", lambda i: i["summary"]),
        ]
    items = [{"kind": w.kind, "summary": w.summary} for w in workloads()]
    return items, [("kind", lambda i: i["kind"]), ("summary", lambda i: i["summary"])]
