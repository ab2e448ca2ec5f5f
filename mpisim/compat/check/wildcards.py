"""Receives from ``ANY_SOURCE``: which message each one took, and which others it could have taken.

A receive from ``MPI.ANY_SOURCE`` takes the first matching message to arrive. When two ranks'
messages arrive close together, which one comes first depends on the network, the load and
the operating system: a program whose output depends on it is correct on one run and wrong on
the next, and a real MPI shows the bug once in a hundred runs. The simulation is
deterministic, so it always takes the same one -- and can therefore explore the others.

:class:`WildcardLog` sits in the world's matching (``world.wildcards``). It numbers each rank's
wildcard receives (the k-th ``ANY_SOURCE`` receive of rank r is the same receive on every
run, as long as the runs agree up to it), records the message each one matched, and lists the
*rivals*: messages from other ranks that the same receive would have accepted (same
communicator, a matching tag) and that arrived within :data:`NEAR_TIE_S` of the one it took.
Given *forced* choices ``{(rank, k): source}``, it makes the k-th wildcard receive of that
rank take the message of *source* instead: the same run with another arrival order.

The window is wide on purpose: under ``compute: explicit`` the program's Python between MPI
calls costs no simulated time, while on a real machine it takes microseconds to milliseconds,
so arrivals a real run would reorder look nearly simultaneous here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Messages arriving within this many seconds of each other are taken as possibly reordered.
NEAR_TIE_S = 100e-6
#: ANY_SOURCE is -2 in mpisim (MPICH).
ANY_SOURCE = -2
ANY_TAG = -1


@dataclass
class WildcardReceive:
    """The k-th ``ANY_SOURCE`` receive of a rank: where it was posted, what it took and its rivals."""

    rank: int
    k: int
    file: str
    line: int
    t_post: float
    context: int
    tag: int
    source: int = -1  # the communicator rank whose message it took (-1: not matched)
    t_arrival: float = -1.0
    rivals: dict[int, float] = field(default_factory=dict)  # source -> arrival time of its message
    forced: bool = False


class WildcardLog:
    """The world's hook on matching (see the module docstring)."""

    def __init__(self, locate: Any, forced: dict[tuple[int, int], int] | None = None) -> None:
        self.locate = locate  # () -> (file name, line) of the program's call in progress
        self.forced = dict(forced or {})
        self.posted_count: dict[int, int] = {}
        self.receives: list[WildcardReceive] = []
        self._pending: dict[int, list[WildcardReceive]] = {}  # world rank -> matched receives still in their window
        self._arrived: dict[int, float] = {}  # id(message) -> arrival time (messages waiting unmatched)

    # ---- called by the world

    def posted(self, req: Any, now: float) -> None:
        """A receive from ANY_SOURCE was posted: number it, and force its source if told to."""
        rank = req.comm.world_rank
        k = self.posted_count.get(rank, 0)
        self.posted_count[rank] = k + 1
        file, line = self.locate()
        record = WildcardReceive(rank, k, file, line, now, req.comm.context, req.tag)
        source = self.forced.get((rank, k))
        if source is not None:
            req.peer, record.forced = source, True  # only this rank's message matches it now
        req.wildcard = record
        self.receives.append(record)

    def arrived(self, msg: Any, now: float) -> None:
        """A message reached its destination's matching: a rival of any receive it falls within the window of."""
        self._arrived[id(msg)] = now
        pending = self._pending.get(msg.dst)
        if not pending:
            return
        keep = []
        for record in pending:
            if now - record.t_arrival > NEAR_TIE_S:
                continue
            keep.append(record)
            if self._accepts(record, msg):
                record.rivals.setdefault(msg.src_rank, now)
        self._pending[msg.dst] = keep

    def matched(self, msg: Any, req: Any, unexpected: list[Any], now: float) -> None:
        """*req* took *msg*; if *req* is a wildcard receive, the messages in *unexpected* it accepts are rivals."""
        t_arrival = self._arrived.pop(id(msg), now)
        record = getattr(req, "wildcard", None)
        if record is None:
            return
        record.source, record.t_arrival = msg.src_rank, t_arrival
        for other in unexpected:
            t = self._arrived.get(id(other), now)
            if other is not msg and self._accepts(record, other) and abs(t - record.t_arrival) <= NEAR_TIE_S:
                record.rivals.setdefault(other.src_rank, t)
        if not record.forced:
            self._pending.setdefault(msg.dst, []).append(record)

    def _accepts(self, record: WildcardReceive, msg: Any) -> bool:
        return (msg.context == record.context and msg.src_rank != record.source
                and (record.tag == ANY_TAG or record.tag == msg.tag))

    # ---- read by the explorer

    def choices(self) -> list[tuple[WildcardReceive, int]]:
        """Every other arrival order worth a run: (receive, the rival source it takes instead), in run order."""
        return [(record, source) for record in self.receives if not record.forced
                for source in sorted(record.rivals)]
