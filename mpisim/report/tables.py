"""Summaries drawn from a :class:`~mpisim.report.records.RunResult`: the tables behind plots and report.md.

Everything a report shows is computed here from the result alone (rows and records), so the
figures, the Markdown and the tests agree on one set of numbers:

* :func:`row_kinds` sorts result rows into collective, point-to-point, training (data-parallel),
  hybrid (tensor x pipeline x data parallel training) and other rows;
* :func:`series` groups rows into named curves (one per algorithm, or per algorithm and sweep
  point: "ring, oversubscription=2");
* :func:`link_table` ranks the links by their utilisation (the time their bytes need at full
  rate, over the run), from the per-link counters a world keeps (or, in older results, from
  its link records); :func:`link_class` names a link's class (NVLink, PCIe, NIC, spine) and
  :func:`class_leaders` keeps the busiest link of every class, so a NIC is never hidden by the
  many NVLink ports of a GPU cluster;
* :func:`rank_breakdown` adds up how long each rank spent computing, sending, waiting...;
* :func:`closed_form_rows` pairs each collective row with its algorithm's closed-form time.

The ``fmt_*`` helpers format numbers for people: three or four significant digits and a unit
chosen by magnitude (``43.65 us``, ``1.2 GB``). Tables in report.md use them, and the tests
re-format results.json with the same helpers to check report.md against it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from mpisim.engine.units import pretty_bandwidth, pretty_size, pretty_time
from mpisim.report.records import RunResult, WorldRecords

__all__ = [
    "LINK_CLASSES",
    "LinkUse",
    "Series",
    "class_leaders",
    "closed_form_rows",
    "fmt_bandwidth",
    "fmt_bytes",
    "fmt_num",
    "fmt_percent",
    "fmt_time",
    "link_class",
    "link_table",
    "point_label",
    "rank_breakdown",
    "row_kinds",
    "series",
    "sweep_keys",
    "world_title",
]

#: Span kinds that are a rank's own activity (its "state"); protocol phases overlap them.
STATE_KINDS = ("compute", "send", "recv", "wait", "reduce", "copy")
#: Protocol phases of a message, drawn on their own strip of each rank's timeline.
PHASE_KINDS = ("rts", "cts", "data", "fin")


# ----------------------------------------------------------------------------- number formats


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def fmt_num(x: Any, digits: int = 4) -> str:
    """Return *x* with *digits* significant digits (``"n/a"`` for None or a non-number)."""
    if not _finite(x):
        return "n/a" if x is None or isinstance(x, str | bool) else str(x)
    if x == 0:
        return "0"
    return f"{x:.{digits}g}"


def fmt_time(seconds: Any, digits: int = 4) -> str:
    """Return a duration in the unit that suits it: ``"43.65 us"``, ``"1.2 s"``, ``"0 s"`` (``"n/a"`` if missing).

    The table form of :func:`~mpisim.engine.units.pretty_time`: *digits* (four) significant digits.
    """
    return pretty_time(seconds, digits) if _finite(seconds) else fmt_num(seconds)


def fmt_bytes(nbytes: Any) -> str:
    """Return a size: binary units when exact (``"32 KiB"``), else bytes below 100 kB (``"8193 B"``),
    else decimal units (``"1.2 GB"``); ``"n/a"`` if missing.

    The table form of :func:`~mpisim.engine.units.pretty_size`: four significant digits, and
    small odd sizes (an eager limit plus one byte) exactly, as they read best.
    """
    return pretty_size(int(nbytes), 4, exact_below=100_000) if _finite(nbytes) else fmt_num(nbytes)


def fmt_bandwidth(bytes_per_s: Any) -> str:
    """Return a bandwidth in decimal units (``"23.5 GB/s"``, as nccl-tests and OSU print them); ``"n/a"`` if missing.

    The table form of :func:`~mpisim.engine.units.pretty_bandwidth`: four significant digits.
    """
    return pretty_bandwidth(bytes_per_s, 4) if _finite(bytes_per_s) else fmt_num(bytes_per_s)


def fmt_percent(fraction: Any) -> str:
    """Return a fraction as a percentage with one decimal: ``0.995 -> "99.5 %"``."""
    if not _finite(fraction):
        return fmt_num(fraction)
    return f"{fraction * 100:.1f} %"


# ----------------------------------------------------------------------------- rows and series


def row_kinds(result: RunResult) -> dict[str, list[dict[str, Any]]]:
    """Sort the result rows by kind: ``collective``, ``p2p``, ``training``, ``hybrid``, ``other``.

    ``training`` rows are the data-parallel workload's (compute, exposed communication, scaling
    efficiency); ``hybrid`` rows are hybrid-parallel training iterations, which carry their
    layout (``tp``, ``pp``, ``dp``) and the breakdown of their critical path by dimension.
    """
    kinds: dict[str, list[dict[str, Any]]] = {"collective": [], "p2p": [], "training": [], "hybrid": [], "other": []}
    for row in result.rows:
        if "collective" in row and "time_s" in row:
            kinds["collective"].append(row)
        elif "test" in row and "bytes" in row:
            kinds["p2p"].append(row)
        elif "iteration_time_s" in row and "tp" in row and "bubble_s" in row:
            kinds["hybrid"].append(row)
        elif "iteration_time_s" in row:
            kinds["training"].append(row)
        else:
            kinds["other"].append(row)
    return kinds


def sweep_keys(result: RunResult) -> list[str]:
    """Return the dotted keys the scenario swept over, in the scenario's order."""
    return list((result.scenario.get("sweep") or {}).keys())


def _short_key(key: str) -> str:
    return key.rsplit(".", 1)[-1]


def point_label(values: dict[str, Any], keys: Sequence[str]) -> str:
    """Label a sweep point for a legend: ``"ib-hdr, nodes=8"`` (a preset shows by its name alone)."""
    parts = []
    for key in keys:
        if key not in values:
            continue
        value = values[key]
        parts.append(str(value) if _short_key(key) in ("preset", "model", "topology") else f"{_short_key(key)}={value}")
    return ", ".join(parts)


@dataclass
class Series:
    """One curve: a label and its points (x ascending), with the rows they came from."""

    label: str
    xs: list[float]
    ys: list[float]
    rows: list[dict[str, Any]]


#: How the columns that split curves are written in legends.
LEGEND_FORMATS: dict[str, Any] = {"ranks": lambda v: f"{v} ranks", "bytes": lambda v: fmt_bytes(v)}


def series(rows: Iterable[dict[str, Any]], x: str, y: str, by: Sequence[str], keys: Sequence[str] = ()) -> list[Series]:
    """Group *rows* into curves of *y* against *x*, one per distinct value of the *by* columns.

    *keys* are sweep keys that also split curves (except those used as *x*). Rows whose *x* or
    *y* is not a finite number are left out. Curves keep the order in which their first row
    appears, so legends follow the scenario; labels write ranks and sizes with their units.
    """
    split = [k for k in (*by, *keys) if k != x]
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        if not (_finite(row.get(x)) and _finite(row.get(y))):
            continue
        groups.setdefault(tuple(row.get(k) for k in split), []).append(row)
    out = []
    for group_key, members in groups.items():
        members = sorted(members, key=lambda r: r[x])
        named = dict(zip(split, group_key, strict=True))
        by_part = ", ".join(LEGEND_FORMATS.get(k, str)(named[k]) for k in by if k != x and named.get(k) is not None)
        key_part = point_label(named, [k for k in keys if k != x])
        label = ", ".join(part for part in (by_part, key_part) if part) or y
        out.append(Series(label, [r[x] for r in members], [r[y] for r in members], members))
    return out


# ----------------------------------------------------------------------------- links


#: Link classes, in the order reports list them, from the link kinds of the network layer:
#: ``shm`` ports, PCIe lanes, NVLink ports, NIC ports (a NIC to its switch, or a direct cable)
#: and switch-to-switch cables ("spine").
LINK_CLASSES = ("shared memory", "PCIe", "NVLink", "NIC", "spine")
_KIND_CLASSES = {"shm": "shared memory", "pcie": "PCIe", "nvlink": "NVLink"}


def link_class(name: str, kind: str | None = None) -> str:
    """Return the class of the link called *name*, whose network-layer kind is *kind*.

    ``net`` links are split by their ends: a cable between two switches (a leaf and a spine)
    is "spine", any other is a NIC port. Results written before links carried their kind are
    classified by name alone (``node0.nvswitch->rank3`` is NVLink).
    """
    if kind in _KIND_CLASSES:
        return _KIND_CLASSES[kind]
    if kind is None:
        for word, cls in (("nvswitch", "NVLink"), ("pcie", "PCIe"), ("shm", "shared memory")):
            if word in name:
                return cls
    return "spine" if "spine" in name else "NIC"


@dataclass
class LinkUse:
    """How hard one directed link worked in one world.

    ``kind`` is its :func:`link_class`. Two measures of load differ on purpose:
    ``utilisation`` is the time the link's bytes need at its full rate over the run (how
    much of the run this link alone forces), ``busy_share`` the share of the run during which
    it carried anything, at whatever rate.
    """

    link: str
    nbytes: int
    busy_s: float
    capacity_Bps: float
    elapsed_s: float
    kind: str = "NIC"

    @property
    def full_rate_s(self) -> float:
        """Seconds the link's bytes take at its capacity: a lower bound on the run; 0 when unknown."""
        if not _finite(self.capacity_Bps) or self.capacity_Bps <= 0:
            return 0.0
        return self.nbytes / self.capacity_Bps

    @property
    def utilisation(self) -> float:
        """Average utilisation over the run: bytes / (elapsed x capacity); 0 when unknown."""
        return self.full_rate_s / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def busy_share(self) -> float:
        """Share of the run during which the link carried data."""
        return self.busy_s / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def rate_when_busy(self) -> float:
        """Bytes per second while the link was busy (how close to capacity it ran then)."""
        return self.nbytes / self.busy_s if self.busy_s > 0 else 0.0


def link_table(world: WorldRecords, limit: int | None = None) -> list[LinkUse]:
    """Return the links of *world* that carried bytes, most utilised first.

    Links are ranked by utilisation, not bytes: on a GPU node an NVLink port carries more
    bytes than a NIC at eight times the rate, yet the NIC is what bounds the run. With a
    *limit*, the first *limit* links are returned, except that the busiest link of every class
    present replaces the tail if it would be cut (see :func:`class_leaders`). Without capacities
    (results without link counters) links are ranked by bytes.

    Uses the world's per-link counters; results without them fall back to summing its link
    records (busy time is then the union of the records' intervals, capacity unknown).
    """
    elapsed = world.t_end
    if world.link_totals:
        uses = [
            LinkUse(t["link"], int(t["nbytes"]), float(t["busy_s"]), float(t.get("capacity_Bps") or 0.0), elapsed,
                    link_class(t["link"], t.get("kind")))
            for t in world.link_totals
            if t.get("nbytes", 0) > 0
        ]
    else:
        by_link: dict[str, list] = defaultdict(list)
        for rec in world.links:
            by_link[rec.link].append(rec)
        uses = []
        for name, recs in by_link.items():
            busy = covered((r.t_start, r.t_end) for r in recs)
            uses.append(LinkUse(name, sum(r.nbytes for r in recs), busy, 0.0, elapsed, link_class(name)))
    uses.sort(key=lambda u: (-u.full_rate_s, -u.nbytes, u.link))
    if limit is None or len(uses) <= limit:
        return uses
    leaders = [u for u in class_leaders(uses).values() if u not in uses[:limit]]
    keep = uses[: max(limit - len(leaders), 0)] + leaders
    return sorted(keep, key=lambda u: (-u.full_rate_s, -u.nbytes, u.link))[:limit]


def class_leaders(uses: Iterable[LinkUse]) -> dict[str, LinkUse]:
    """Return the most utilised link of each class present in *uses*, in :data:`LINK_CLASSES` order."""
    best: dict[str, LinkUse] = {}
    for use in uses:
        held = best.get(use.kind)
        if held is None or (use.full_rate_s, use.nbytes) > (held.full_rate_s, held.nbytes):
            best[use.kind] = use
    order = {name: i for i, name in enumerate(LINK_CLASSES)}
    return dict(sorted(best.items(), key=lambda item: order.get(item[0], len(order))))


def world_title(world: WorldRecords) -> str:
    """Name a world for people: its label and its sweep point (``training 8 ranks (ib-hdr, nodes=8)``)."""
    where = point_label(world.point, [k for k in world.point if k != "topology.nodes"])
    return f"{world.label} ({where})" if where else world.label


# ----------------------------------------------------------------------------- ranks


def covered(intervals: Iterable[tuple[float, float]]) -> float:
    """Return the length of the union of (start, end) intervals (overlaps counted once)."""
    total, reach = 0.0, -math.inf
    for start, end in sorted(intervals):
        start = max(start, reach)
        if end > start:
            total += end - start
        reach = max(reach, end)
    return total


def rank_breakdown(world: WorldRecords) -> dict[int, dict[str, float]]:
    """Return, per rank, the seconds spent in each kind of span (states and protocol phases).

    Spans of one kind can overlap on a rank (a wait inside a waitall, concurrent transfers):
    each kind's time is the union of its spans, so no kind exceeds the length of the run.
    """
    spans: dict[int, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for span in world.spans:
        spans[span.rank][span.kind].append((span.t_start, span.t_end))
    return {rank: {kind: covered(ivs) for kind, ivs in kinds.items()} for rank, kinds in sorted(spans.items())}


def world_ranks(world: WorldRecords) -> int:
    """Return the number of ranks that appear in *world*'s records."""
    ranks = {s.rank for s in world.spans} | {c.rank for c in world.collectives}
    ranks |= {m.src for m in world.messages} | {m.dst for m in world.messages}
    return max(ranks) + 1 if ranks else 0


# ----------------------------------------------------------------------------- closed forms


def closed_form_rows(result: RunResult) -> list[dict[str, Any]]:
    """Pair each collective row with its algorithm's closed-form time, where one is registered.

    Each returned dict is the row plus ``model_s`` (the row's ``model_time_s``: the formula
    evaluated when the run happened, with the world's alpha, beta, gamma) and ``ratio``
    (simulated / model) and ``exact`` (whether the formula is exact for this many ranks, not
    an estimate). Rows of algorithms without a formula are left out.
    """
    out = []
    for row in row_kinds(result)["collective"]:
        model = row.get("model_time_s")
        if not _finite(model) or not _finite(row.get("time_s")):
            continue
        ratio = row["time_s"] / model if model > 0 else math.nan
        out.append({**row, "model_s": model, "ratio": ratio, "exact": bool(row.get("model_exact"))})
    return out
