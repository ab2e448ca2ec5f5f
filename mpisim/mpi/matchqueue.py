"""MPI's two matching queues, indexed by envelope so a match costs the same at any queue length.

The MPI standard defines matching on *ordered* queues: a receive takes the **first** message in
arrival order whose envelope (context, source, tag) it accepts, and an arriving message the
**first** posted receive that accepts it, where a receive may accept any source (``ANY_SOURCE``)
or any tag (``ANY_TAG``). MPICH keeps them as linked lists and scans them. A scan is fine when a
queue holds a few entries, but a pipelined collective (a GPU library's trees, with eight
segments in flight on every connection) keeps hundreds of envelopes waiting on one rank, and
the scan then costs more than the message it matches.

These queues give the same answer in constant time. Each holds its entries in buckets by exact
envelope, every entry numbered in arrival (or posting) order:

* **Unexpected messages** carry concrete envelopes. A receive that names its source and tag
  takes the head of one bucket; a wildcard receive looks at the head of every bucket it
  accepts and takes the lowest number -- the first in arrival order, as a scan would.
* **Posted receives** carry patterns. An arriving message can only be accepted by four
  buckets -- (source, tag), (source, any tag), (any source, tag), (any source, any tag) -- so it
  compares four heads and takes the lowest number.

Both keep the queue's order for everything that reads it whole (probes, deadlock reports, the
correctness checker): iterating a queue yields its entries in arrival order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from mpisim.mpi.constants import ANY_SOURCE, ANY_TAG

Envelope = tuple[int, int, int]  # (context, source, tag)


class _Queue:
    """Entries bucketed by envelope, numbered in order; iteration, ``in`` and ``remove`` as a list's.

    Each subclass says how its entries are addressed, in ``_envelope(entry)``.
    """

    __slots__ = ("_buckets", "_next", "_order")
    _envelope: Callable[[Any], Envelope]

    def __init__(self) -> None:
        self._buckets: dict[Envelope, deque[tuple[int, Any]]] = {}
        self._order: dict[int, Any] = {}  # id(entry) -> entry, in arrival order
        self._next = 0

    def append(self, entry: Any) -> None:
        number = self._next
        self._next = number + 1
        key = self._envelope(entry)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = deque()
        bucket.append((number, entry))
        self._order[id(entry)] = entry

    def _pop_head(self, key: Envelope) -> Any:
        bucket = self._buckets[key]
        entry = bucket.popleft()[1]
        if not bucket:
            del self._buckets[key]
        del self._order[id(entry)]
        return entry

    def remove(self, entry: Any) -> None:
        """Take *entry* out wherever it is (a cancelled receive, a message a probe dequeued)."""
        if id(entry) not in self._order:
            raise ValueError("entry is not in the queue")
        key = self._envelope(entry)
        bucket = self._buckets[key]
        for i, (_, e) in enumerate(bucket):
            if e is entry:
                del bucket[i]
                break
        if not bucket:
            del self._buckets[key]
        del self._order[id(entry)]

    def __contains__(self, entry: object) -> bool:
        return self._order.get(id(entry)) is entry

    def __iter__(self) -> Iterator[Any]:
        return iter(tuple(self._order.values()))  # a snapshot: readers may remove while they walk

    def __len__(self) -> int:
        return len(self._order)

    def __bool__(self) -> bool:
        return bool(self._order)


class UnexpectedQueue(_Queue):
    """Messages that arrived before a receive accepted them, by (context, source, tag)."""

    __slots__ = ()

    @staticmethod
    def _envelope(msg: Any) -> Envelope:
        return (msg.context, msg.src_rank, msg.tag)

    def _first_key(self, context: int, source: int, tag: int) -> Envelope | None:
        if source != ANY_SOURCE and tag != ANY_TAG:
            key = (context, source, tag)
            return key if key in self._buckets else None
        best, best_key = None, None
        for key, bucket in self._buckets.items():
            if key[0] == context and (source == ANY_SOURCE or key[1] == source) and (tag == ANY_TAG or key[2] == tag):
                number = bucket[0][0]
                if best is None or number < best:
                    best, best_key = number, key
        return best_key

    def first(self, context: int, source: int, tag: int) -> Any:
        """The earliest-arrived message a receive (source and tag may be wildcards) accepts, or None."""
        key = self._first_key(context, source, tag)
        return None if key is None else self._buckets[key][0][1]

    def take(self, context: int, source: int, tag: int) -> Any:
        """Dequeue and return :meth:`first`'s message, or None."""
        if not self._buckets:
            return None  # NOTE: the common case (receives posted before their messages), no more calls
        key = self._first_key(context, source, tag)
        return None if key is None else self._pop_head(key)


class PostedQueue(_Queue):
    """Receives waiting for a message, by (context, source or ANY_SOURCE, tag or ANY_TAG)."""

    __slots__ = ()

    @staticmethod
    def _envelope(req: Any) -> Envelope:
        return (req.comm.context, req.peer, req.tag)

    def append(self, req: Any) -> None:
        """:meth:`_Queue.append`, with the envelope read in place (NOTE: once per receive)."""
        number = self._next
        self._next = number + 1
        key = (req.comm.context, req.peer, req.tag)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = deque()
        bucket.append((number, req))
        self._order[id(req)] = req

    def take(self, context: int, source: int, tag: int) -> Any:
        """Dequeue and return the earliest-posted receive that accepts a message's envelope, or None."""
        buckets = self._buckets
        if not buckets:
            return None  # NOTE: no receive posted (a message arriving first), no more calls
        if len(buckets) == 1:
            # NOTE: one envelope waiting (a rank in a ring step): accept it or not, no lookups.
            key, bucket = next(iter(buckets.items()))
            if key[0] == context and (key[1] == source or key[1] == ANY_SOURCE) and (key[2] == tag or key[2] == ANY_TAG):
                req = bucket.popleft()[1]  # NOTE: _pop_head, inlined
                if not bucket:
                    del buckets[key]
                del self._order[id(req)]
                return req
            return None
        best, best_key = None, None
        for key in ((context, source, tag), (context, source, ANY_TAG),
                    (context, ANY_SOURCE, tag), (context, ANY_SOURCE, ANY_TAG)):
            bucket = buckets.get(key)
            if bucket is not None and (best is None or bucket[0][0] < best):
                best, best_key = bucket[0][0], key
        return None if best_key is None else self._pop_head(best_key)
