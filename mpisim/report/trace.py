"""Chrome trace-event JSON: a run's records as a timeline that Perfetto (ui.perfetto.dev) opens.

The trace-event format is a JSON object whose ``traceEvents`` list holds events of a few
phases (``ph``); mpisim writes these:

* ``"X"`` (complete event): a bar with ``name``, ``cat``, ``ts`` and ``dur`` in microseconds,
  ``pid`` and ``tid`` (which track it sits on) and ``args`` (shown when the bar is clicked:
  peer rank, bytes, protocol);
* ``"M"`` (metadata): ``process_name`` / ``thread_name`` give tracks their names, and
  ``process_sort_index`` / ``thread_sort_index`` their order;
* ``"s"`` and ``"f"`` (flow start and finish, sharing an ``id``): an arrow from each message's
  send (on the sender's track, when it was posted) to its receive (on the receiver's, when the
  data had arrived), bound to the slices around those instants (``"bp": "e"``); at most
  :data:`MAX_FLOWS` per world.

Every simulated world becomes one *process* (``allreduce/ring 1 MiB``), and inside it:

* one track per rank, ``rank r``: the collective calls (``allreduce/ring``) with the MPI calls
  and local work inside them (``sendrecv(dest=1, source=3)``, compute, reduce);
* one track per rank for protocol phases, ``rank r protocol``: RTS and data (as sender), CTS
  and FIN (as receiver), each with its peer and size;
* one track per busy link (when link records were kept), ``link <name>``: each flow that
  crossed it, with its bytes and average rate.

Perfetto wants the complete events of one track to nest (a child inside its parent, never
half-overlapping). A rank's protocol phases do overlap each other (a root that sends to
three ranks at once) and flows share links, so overlapping events are spread over extra
tracks of the same name with a suffix (``rank 0 protocol #2``): :func:`assign_lanes`.

:func:`validate_trace` checks the fields the format requires; tests run it on every trace.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mpisim.report.records import RunResult, WorldRecords
from mpisim.report.tables import PHASE_KINDS, fmt_bytes, link_table, world_ranks

__all__ = ["MAX_EVENTS", "assign_lanes", "chrome_trace", "validate_trace"]

#: Stop adding worlds once the trace holds this many events (a 200 MB trace helps nobody).
MAX_EVENTS = 300_000
#: Flow arrows (send -> receive) per world: the first messages only.
MAX_FLOWS = 20_000
#: Link tracks per world: the busiest links only.
MAX_LINK_TRACKS = 32

_PHASE_NAMES = {"rts": "RTS", "cts": "CTS", "data": "data", "fin": "FIN"}


def _us(seconds: float) -> float:
    """Seconds to microseconds, rounded to the nanosecond so that nesting survives the conversion."""
    return round(seconds * 1e6, 3)


@dataclass(order=True)
class _Bar:
    ts: float
    neg_dur: float
    seq: int
    event: dict[str, Any] = field(compare=False)

    @property
    def end(self) -> float:
        return self.ts - self.neg_dur


def assign_lanes(bars: Iterable[tuple[float, float, Any]]) -> list[list[Any]]:
    """Spread (start, end, item) intervals over lanes in which intervals nest or are disjoint.

    Intervals are placed in order of start (longest first on ties) into the first lane where
    they either start after everything open has ended or fit inside the innermost open
    interval. Returns the items of each lane; lane 0 is the fullest.
    """
    lanes: list[list[Any]] = []
    stacks: list[list[float]] = []  # per lane: ends of the open (enclosing) intervals
    for start, end, item in sorted(bars, key=lambda b: (b[0], -(b[1] - b[0]))):
        for lane, stack in enumerate(stacks):
            while stack and stack[-1] <= start:
                stack.pop()
            if not stack or end <= stack[-1]:
                stack.append(end)
                lanes[lane].append(item)
                break
        else:
            stacks.append([end])
            lanes.append([item])
    return lanes


class _Builder:
    """Collects the events of one trace, handing out track ids."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._next_tid: dict[int, int] = {}
        self._flow_id = 0  # flow ids are unique in the whole trace

    def process(self, pid: int, name: str) -> None:
        self.events.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": name}})
        self.events.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": pid}})

    def thread(self, pid: int, name: str, sort_index: int) -> int:
        tid = self._next_tid.get(pid, 1)
        self._next_tid[pid] = tid + 1
        self.events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
        self.events.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                            "args": {"sort_index": sort_index}})
        return tid

    def lanes(self, pid: int, name: str, sort_index: int, bars: list[tuple[float, float, dict[str, Any]]],
              always: bool = False) -> list[tuple[int, list[dict[str, Any]]]]:
        """Add *bars* on as many tracks named *name* (``#2``, ``#3``...) as nesting needs; return (tid, events) of each."""
        lanes = assign_lanes(bars)
        if not lanes and always:
            lanes = [[]]
        tracks = []
        for i, events in enumerate(lanes):
            tid = self.thread(pid, name if i == 0 else f"{name} #{i + 1}", sort_index + i)
            for event in events:
                event["pid"], event["tid"] = pid, tid
                self.events.append(event)
            tracks.append((tid, events))
        return tracks

    def flows(self, pid: int, world: WorldRecords, tracks: dict[int, list[tuple[int, list[dict[str, Any]]]]]) -> None:
        """Link each message's send to its receive with a flow (``"s"`` then ``"f"``), at most MAX_FLOWS per world.

        Perfetto binds a flow's ends to the slices enclosing them (``"bp": "e"``): the send
        call on the sender's track when the send was posted, the receive or wait on the
        receiver's when the data had arrived. It draws the arrow between them and follows it on
        a click. A message to oneself has no arrow.
        """
        for msg in [m for m in world.messages if m.src != m.dst and m.src in tracks and m.dst in tracks][:MAX_FLOWS]:
            self._flow_id += 1
            common = {"name": f"message {fmt_bytes(msg.nbytes)}", "cat": "message", "id": self._flow_id, "pid": pid,
                      "bp": "e"}
            self.events.append({**common, "ph": "s", "ts": _us(msg.t_post), "tid": _track_at(tracks, msg.src, msg.t_post),
                                "args": {"dest": msg.dst, "tag": msg.tag, "bytes": msg.nbytes,
                                         "protocol": msg.protocol}})
            self.events.append({**common, "ph": "f", "ts": _us(msg.t_done), "tid": _track_at(tracks, msg.dst, msg.t_done)})


def _track_at(tracks: dict[int, list[tuple[int, list[dict[str, Any]]]]], rank: int, t: float) -> int:
    """The track of *rank* with a slice around time *t* (its first track if none has one)."""
    ts = _us(t)
    lanes = tracks[rank]
    for tid, events in lanes:
        if any(e["ts"] <= ts <= e["ts"] + e["dur"] for e in events):
            return tid
    return lanes[0][0]


def _complete(name: str, cat: str, t_start: float, t_end: float, args: dict[str, Any]) -> tuple[float, float, dict[str, Any]]:
    ts, end = _us(t_start), _us(t_end)
    event = {"name": name, "cat": cat, "ph": "X", "ts": ts, "dur": round(max(end - ts, 0.0), 3), "args": args}
    return ts, end, event


def _rank_bars(world: WorldRecords, rank_of: dict[int, list], phase_of: dict[int, list]) -> None:
    messages = _message_args(world)
    for rec in world.collectives:
        rank_of.setdefault(rec.rank, []).append(_complete(
            f"{rec.collective}/{rec.algorithm}", "collective", rec.t_enter, rec.t_exit,
            {"collective": rec.collective, "algorithm": rec.algorithm, "bytes": rec.nbytes, "call": rec.call},
        ))
    for span in world.spans:
        args: dict[str, Any] = {"kind": span.kind}
        if span.peer >= 0:
            args["peer"] = span.peer
        if span.nbytes:
            args["bytes"] = span.nbytes
        if span.kind in PHASE_KINDS:
            arrow = "->" if span.kind in ("rts", "data") else "<-"
            name = f"{_PHASE_NAMES[span.kind]} {arrow} rank {span.peer}"
            if span.kind == "data":
                name += f" ({fmt_bytes(span.nbytes)})"
                args.update(messages.get((span.rank, span.peer, _us(span.t_start)), {}))
            phase_of.setdefault(span.rank, []).append(_complete(name, "protocol", span.t_start, span.t_end, args))
        else:
            name = span.label or span.kind
            rank_of.setdefault(span.rank, []).append(_complete(name, span.kind, span.t_start, span.t_end, args))


def _message_args(world: WorldRecords) -> dict[tuple[int, int, float], dict[str, Any]]:
    """Protocol and timing of each message, keyed by (src, dst, t_data) for the data phase's args."""
    out = {}
    for msg in world.messages:
        out[(msg.src, msg.dst, _us(msg.t_data))] = {
            "protocol": msg.protocol, "tag": msg.tag, "posted_us": _us(msg.t_post), "delivered_us": _us(msg.t_done),
        }
    return out


def _world_events(builder: _Builder, pid: int, world: WorldRecords) -> None:
    name = world.label + (f" [{', '.join(f'{k}={v}' for k, v in world.point.items())}]" if world.point else "")
    builder.process(pid, name)
    rank_of: dict[int, list] = {}
    phase_of: dict[int, list] = {}
    _rank_bars(world, rank_of, phase_of)
    p = world_ranks(world)
    tracks = {}
    for rank in range(p):
        tracks[rank] = builder.lanes(pid, f"rank {rank}", rank * 1000, rank_of.get(rank, []), always=True)
        if phase_of.get(rank):
            builder.lanes(pid, f"rank {rank} protocol", rank * 1000 + 500, phase_of[rank])
    builder.flows(pid, world, tracks)
    if not world.links:
        return
    busiest = link_table(world, MAX_LINK_TRACKS)
    wanted = {use.link: i for i, use in enumerate(busiest)}
    per_link: dict[str, list] = {}
    for rec in world.links:
        if rec.link in wanted:
            rate = rec.nbytes / (rec.t_end - rec.t_start) if rec.t_end > rec.t_start else math.inf
            args = {"bytes": rec.nbytes, "average_rate_GBps": round(rate / 1e9, 6) if math.isfinite(rate) else "inf"}
            per_link.setdefault(rec.link, []).append(_complete(fmt_bytes(rec.nbytes), "link", rec.t_start, rec.t_end, args))
    for link, i in wanted.items():
        if per_link.get(link):
            builder.lanes(pid, f"link {link}", 10_000_000 + i * 100, per_link[link])


def chrome_trace(result: RunResult, *, max_events: int = MAX_EVENTS, prefer: Sequence[int] = ()) -> dict[str, Any]:
    """Return the trace-event document of *result*: one process per world (see the module docstring).

    Worlds are added -- those whose indices are in *prefer* first, then the others in order --
    until the trace holds *max_events* events; the worlds left out are counted in
    ``otherData.worlds_left_out``. A world's process id is its index in ``result.records`` + 1.
    """
    builder = _Builder()
    order = [i for i in prefer if 0 <= i < len(result.records)]
    order += [i for i in range(len(result.records)) if i not in set(order)]
    left_out = 0
    for index in order:
        if len(builder.events) >= max_events:
            left_out += 1
            continue
        _world_events(builder, index + 1, result.records[index])
    return {
        "traceEvents": builder.events,
        "displayTimeUnit": "ns",
        "otherData": {
            "scenario": result.scenario.get("name", ""),
            "time_unit": "simulated microseconds",
            "worlds": len(result.records),
            "worlds_left_out": left_out,
        },
    }


_REQUIRED = {
    "X": ("name", "ph", "ts", "dur", "pid", "tid"),
    "M": ("name", "ph", "pid", "args"),
    "C": ("name", "ph", "ts", "pid", "args"),
    "i": ("name", "ph", "ts", "pid", "tid"),
    "s": ("name", "ph", "ts", "pid", "tid", "id"),
    "f": ("name", "ph", "ts", "pid", "tid", "id"),
}


def validate_trace(doc: Any) -> list[str]:
    """Return the problems that keep *doc* from being a valid trace-event document ([] if none).

    Checks the JSON-object form: a ``traceEvents`` list whose events have the fields their
    phase requires, numeric non-negative ``ts``/``dur``, integer ``pid``/``tid``, and
    ``args.name`` on ``process_name``/``thread_name`` metadata.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["the document must be an object with a 'traceEvents' list"]
    problems = []
    for i, event in enumerate(doc["traceEvents"]):
        if not isinstance(event, dict):
            problems.append(f"event {i}: not an object")
            continue
        ph = event.get("ph")
        if ph not in _REQUIRED:
            problems.append(f"event {i}: unknown phase {ph!r}")
            continue
        missing = [key for key in _REQUIRED[ph] if key not in event]
        if missing:
            problems.append(f"event {i} ({ph}): missing {', '.join(missing)}")
            continue
        for key in ("ts", "dur"):
            if key in event and (not isinstance(event[key], int | float) or isinstance(event[key], bool) or event[key] < 0):
                problems.append(f"event {i} ({ph}): {key} must be a number >= 0, got {event[key]!r}")
        for key in ("pid", "tid"):
            if key in event and not isinstance(event[key], int):
                problems.append(f"event {i} ({ph}): {key} must be an integer, got {event[key]!r}")
        named = ph == "M" and event["name"] in ("process_name", "thread_name")
        if named and (not isinstance(event["args"], dict) or not isinstance(event["args"].get("name"), str)):
            problems.append(f"event {i} (M {event['name']}): args.name must be a string")
    return problems
