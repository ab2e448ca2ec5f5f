"""What a run produced: result rows, checked expectations, and the records of every world.

A :class:`RunResult` is the only thing reports are drawn from, so ``results.json`` holds all of
it and :meth:`RunResult.from_json` gives it back without re-running anything (desmod keeps the
config next to the results in the same way). It holds:

* ``scenario`` -- the resolved scenario as plain data (SI numbers), exactly what
  ``mpisim check`` prints;
* ``rows`` -- the result table (one dict per measured point, keys as in DESIGN.md's ``--json``
  contract; with a sweep each row also carries the swept keys);
* ``expectations`` -- one dict per ``expect:`` entry with ``passed``, ``got``, ``expected``,
  ``detail``;
* ``notes`` -- things worth saying that are not errors (messages never received);
* ``records`` -- one :class:`WorldRecords` per simulated world (a workload runs a fresh world
  for each independent measurement): the engine's message, span, collective and link records;
* ``failure`` -- how the simulated program failed, when the scenario expected it to
  (``expect_failure: deadlock``), else ``None``;
* ``fingerprint`` -- what besides the scenario the numbers depend on: mpisim's version and
  code, the preset files read, the algorithm registry (see ``mpisim.scenario.fingerprint``);
* ``meta`` -- version and wall-clock time: the only part that differs between two runs of the
  same scenario and seed, and the part golden tests ignore.

:attr:`RunResult.summary` is the deterministic digest golden tests compare, and
:meth:`RunResult.contract` the ``--json`` document scripts rely on.

In JSON, records are stored column-wise (``{"columns": [...], "rows": [[...], ...]}``): a ring
allreduce over 1024 ranks sends two million messages, and repeating every field name two million
times would triple the file. Non-finite floats become the strings ``"inf"``, ``"-inf"``, ``"nan"``
so that every file is strict JSON.
"""

from __future__ import annotations

import json
import math
import operator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mpisim.engine.records import CollectiveRecord, LinkRecord, MessageRecord, SpanRecord, record_columns

__all__ = ["MAX_LINK_TOTALS", "RunResult", "WorldRecords", "jsonable"]

#: How many links' totals a world keeps (most utilised first, every link class kept): a 16384-rank fat
#: tree has ~100k links.
MAX_LINK_TOTALS = 256

_RECORD_KINDS: dict[str, type] = {
    "messages": MessageRecord,
    "spans": SpanRecord,
    "collectives": CollectiveRecord,
    "links": LinkRecord,
}


def jsonable(value: Any) -> Any:
    """Return *value* as strict-JSON data: numpy scalars and arrays unwrapped, non-finite floats
    as ``"inf"``/``"-inf"``/``"nan"``, tuples as lists, mapping keys as strings."""
    if isinstance(value, dict):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _record_rows(records: list[Any], columns: list[str]) -> list[list[Any]]:
    """Return records as lists of values, strict-JSON ready.

    NOTE: records normally hold plain ints, floats and strings; checking that with one C-speed
    ``json.dumps`` is much faster than visiting every value in Python, which is only done when
    the check fails (a numpy scalar or an infinite time slipped in).
    """
    get = operator.attrgetter(*columns)
    rows = [list(get(r)) for r in records] if len(columns) > 1 else [[get(r)] for r in records]
    try:
        json.dumps(rows, allow_nan=False)
    except (TypeError, ValueError):
        return jsonable(rows)
    return rows


@dataclass
class WorldRecords:
    """The records of one simulated world, labelled by the workload (``allreduce/ring/1 MiB``).

    ``point`` is the sweep point the world belongs to (its dotted overrides; ``{}`` without a
    sweep). ``message_count``/``message_bytes`` count every message even when message records
    were switched off; ``t_end`` is the simulated time when the world stopped.

    ``link_totals`` holds the network model's per-link counters, kept even when link records
    are off, so a report can name the link that bounds the run: one ``{"link", "kind",
    "nbytes", "busy_s", "capacity_Bps"}`` per link that carried bytes, most utilised first (at
    most :data:`MAX_LINK_TOTALS`, every link class kept; ``kind`` is the network layer's
    link kind, absent in older results). ``network`` holds the alpha-beta-gamma parameters of the world
    (``alpha_s``, ``beta_s_per_B``, ``gamma_s_per_B``), which closed-form costs are evaluated
    with. Both are empty in results written before they existed.
    """

    label: str
    point: dict[str, Any] = field(default_factory=dict)
    messages: list[MessageRecord] = field(default_factory=list)
    spans: list[SpanRecord] = field(default_factory=list)
    collectives: list[CollectiveRecord] = field(default_factory=list)
    links: list[LinkRecord] = field(default_factory=list)
    message_count: int = 0
    message_bytes: int = 0
    t_end: float = 0.0
    unmatched: list[str] = field(default_factory=list)
    link_totals: list[dict[str, Any]] = field(default_factory=list)
    network: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form, records column-wise."""
        out: dict[str, Any] = {
            "label": self.label,
            "point": jsonable(self.point),
            "message_count": self.message_count,
            "message_bytes": self.message_bytes,
            "t_end": self.t_end,
            "unmatched": list(self.unmatched),
            "link_totals": jsonable(self.link_totals),
            "network": jsonable(self.network),
        }
        out = jsonable(out)
        for kind, cls in _RECORD_KINDS.items():
            columns = record_columns(cls)
            out[kind] = {"columns": columns, "rows": _record_rows(getattr(self, kind), columns)}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorldRecords:
        """Rebuild from :meth:`to_dict`'s form. Raises KeyError/TypeError on a malformed dict."""
        lists = {}
        for kind, record_cls in _RECORD_KINDS.items():
            table = data.get(kind) or {"columns": [], "rows": []}
            columns = table["columns"]
            if columns == record_columns(record_cls):  # NOTE: positional is 3x faster for big runs
                lists[kind] = [record_cls(*row) for row in table["rows"]]
            else:
                lists[kind] = [record_cls(**dict(zip(columns, row, strict=True))) for row in table["rows"]]
        return cls(
            label=data["label"],
            point=dict(data.get("point") or {}),
            message_count=data.get("message_count", 0),
            message_bytes=data.get("message_bytes", 0),
            t_end=data.get("t_end", 0.0),
            unmatched=list(data.get("unmatched") or []),
            link_totals=[dict(link) for link in data.get("link_totals") or []],
            network=dict(data.get("network") or {}),
            **lists,
        )

    def summary(self) -> dict[str, Any]:
        """Deterministic totals of this world (what golden tests compare)."""
        return {
            "label": self.label,
            "point": jsonable(self.point),
            "messages": self.message_count,
            "message_bytes": self.message_bytes,
            "collective_records": len(self.collectives),
            "t_end": self.t_end,
            "unmatched": len(self.unmatched),
        }


@dataclass
class RunResult:
    """Everything one ``mpisim run`` produced (see the module docstring)."""

    scenario: dict[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)
    expectations: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    records: list[WorldRecords] = field(default_factory=list)
    failure: dict[str, Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    fingerprint: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """True when every expectation passed (and there is no unexpected failure)."""
        return all(exp.get("passed") for exp in self.expectations)

    @property
    def failed_expectations(self) -> list[dict[str, Any]]:
        """The expectation results that did not pass."""
        return [exp for exp in self.expectations if not exp.get("passed")]

    @property
    def summary(self) -> dict[str, Any]:
        """The deterministic digest golden tests compare: rows, expectation outcomes, failure
        kind, notes and per-world totals; no wall-clock time, no version."""
        return jsonable(
            {
                "name": self.scenario.get("name"),
                "rows": self.rows,
                "expectations": [
                    {key: exp.get(key) for key in ("check", "metric", "expected", "got", "passed")}
                    for exp in self.expectations
                ],
                "failure": None if self.failure is None else {k: self.failure.get(k) for k in ("kind", "message")},
                "notes": self.notes,
                "worlds": [world.summary() for world in self.records],
            }
        )

    def contract(self, version: str) -> dict[str, Any]:
        """Return the ``--json`` document: ``mpisim_version, scenario, results, expectations``
        (plus ``notes``, ``fingerprint`` and, for an expected failure, ``failure``). Deterministic: no times."""
        out: dict[str, Any] = {
            "mpisim_version": version,
            "scenario": self.scenario,
            "fingerprint": self.fingerprint,
            "results": self.rows,
            "expectations": self.expectations,
            "notes": self.notes,
        }
        if self.failure is not None:
            out["failure"] = self.failure
        return jsonable(out)

    def to_dict(self) -> dict[str, Any]:
        """Return the whole result as JSON data (the content of ``results.json``)."""
        out = jsonable(
            {
                "scenario": self.scenario,
                "results": self.rows,
                "expectations": self.expectations,
                "notes": self.notes,
                "failure": self.failure,
                "summary": self.summary,
                "meta": self.meta,
                "fingerprint": self.fingerprint,
            }
        )
        out["records"] = [world.to_dict() for world in self.records]  # already JSON-ready
        return out

    def to_json(self, indent: int | None = None) -> str:
        """Return :meth:`to_dict` as a JSON string with sorted keys."""
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        """Rebuild a result from :meth:`to_dict`'s form. Raises KeyError/TypeError if malformed."""
        return cls(
            scenario=data["scenario"],
            rows=list(data.get("results") or []),
            expectations=list(data.get("expectations") or []),
            notes=list(data.get("notes") or []),
            records=[WorldRecords.from_dict(world) for world in data.get("records") or []],
            failure=data.get("failure"),
            meta=dict(data.get("meta") or {}),
            fingerprint=dict(data.get("fingerprint") or {}),
        )

    @classmethod
    def from_json(cls, text: str) -> RunResult:
        """Rebuild a result from :meth:`to_json`'s text. Raises ValueError on invalid JSON."""
        return cls.from_dict(json.loads(text))

    def tables(self) -> dict[str, tuple[list[str], list[list[Any]]]]:
        """Return the flat tables behind the CSV files: ``results``, ``messages``, ``collectives``.

        Each is ``(columns, rows)``. Record tables start with a ``world`` column (the world's
        label), followed by the sweep point's keys when there is a sweep.
        """
        columns = list(dict.fromkeys(key for row in self.rows for key in row))
        tables = {"results": (columns, [[row.get(c) for c in columns] for row in self.rows])}
        point_keys = list(dict.fromkeys(key for world in self.records for key in world.point))
        for kind in ("messages", "collectives"):
            record_cols = record_columns(_RECORD_KINDS[kind])
            rows = [
                [world.label, *(world.point.get(k) for k in point_keys), *(getattr(r, c) for c in record_cols)]
                for world in self.records
                for r in getattr(world, kind)
            ]
            tables[kind] = (["world", *point_keys, *record_cols], rows)
        return tables


# --- value kinds ----------------------------------------------------------------------------------


def value_kind(key: str) -> str:
    """Return how values of row key *key* are written: time, size, bandwidth, count, number or raw."""
    if key == "bytes" or key.endswith("_bytes"):
        return "size"
    if key.endswith("_GBps"):
        return "number"
    if key.endswith("_Bps"):
        return "bandwidth"
    if key.endswith("_per_s"):
        return "number"  # a rate (tokens_per_s), not a time
    if key.endswith("_s"):
        return "time"
    if key == "ranks":
        return "count"
    if key in ("scaling_efficiency",) or key.endswith("_efficiency"):
        return "number"
    return "raw"
