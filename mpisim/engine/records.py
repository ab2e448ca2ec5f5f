"""Result records: one frozen row per fact, the raw material of every table, plot and trace.

A run produces lists of these (collected by :class:`mpisim.engine.trace.Tracer`); reports are
rendered from them alone, so a report can be re-created from ``results.json`` without
re-running the simulation. Times are simulated seconds, sizes are bytes, ranks are
``COMM_WORLD`` ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """One point-to-point message, from the send being posted to the data being delivered.

    ``t_match`` is when the send met its receive (for rendezvous: when the RTS matched),
    ``t_data`` when the payload started to move, ``t_done`` when the last byte arrived.
    """

    src: int
    dst: int
    tag: int
    context: int
    nbytes: int
    protocol: str  # "eager" | "rendezvous" | "self"
    t_post: float
    t_match: float
    t_data: float
    t_done: float


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """An interval of one rank's time spent in one kind of activity (a timeline bar).

    ``kind`` is one of ``compute``, ``send``, ``recv``, ``wait``, ``reduce``, ``copy``,
    ``rts``, ``cts``, ``data``, ``fin`` (protocol phases) or ``collective``.
    """

    rank: int
    kind: str
    t_start: float
    t_end: float
    label: str = ""
    peer: int = -1
    nbytes: int = 0


@dataclass(frozen=True, slots=True)
class CollectiveRecord:
    """One rank's part in one collective call, with the algorithm that actually ran."""

    collective: str
    algorithm: str
    rank: int
    nbytes: int
    t_enter: float
    t_exit: float
    call: int = 0  # sequence number of the call on its communicator
    # A GPU library's choice for the call, resolved once at dispatch (None for MPI's algorithms):
    protocol: str | None = None  # NCCL's protocol (LL, LL128, Simple, NVLS)
    channels: int | None = None  # rings or trees side by side (one per NIC across nodes)
    chunk_bytes: int | None = None  # payload of one message: a ring step's block, a tree's segment


@dataclass(frozen=True, slots=True)
class LinkRecord:
    """Bytes one flow moved through one directed link during ``[t_start, t_end]``."""

    link: str
    t_start: float
    t_end: float
    nbytes: int


def record_columns(cls: type) -> list[str]:
    """Return the column names of a record class, in declaration order."""
    return [f.name for f in fields(cls)]
