"""The indexed matching queues pair exactly as MPI's ordered linear queues do.

A reference matcher keeps both queues as plain lists and scans them in order, as the MPI
standard describes (and MPICH implements); random interleavings of receives (wildcards
included) and arriving messages must produce the same pairs, in the same order, and leave
the same entries queued.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from mpisim.mpi.constants import ANY_SOURCE, ANY_TAG
from mpisim.mpi.matchqueue import PostedQueue, UnexpectedQueue


@dataclass(eq=False)
class _Comm:
    context: int


@dataclass(eq=False)
class _Recv:
    comm: _Comm
    peer: int
    tag: int
    name: str


@dataclass(eq=False)
class _Msg:
    context: int
    src_rank: int
    tag: int
    name: str


def _accepts(req: _Recv, msg: _Msg) -> bool:
    return (req.comm.context == msg.context and req.peer in (ANY_SOURCE, msg.src_rank)
            and req.tag in (ANY_TAG, msg.tag))


class _ListQueue(list):
    """The reference: a plain list scanned in order, as the MPI standard describes (and MPICH does)."""

    def __init__(self, accepts):
        super().__init__()
        self.accepts = accepts  # (queued entry, context, source, tag) -> bool

    def take(self, context, source, tag):
        hit = next((e for e in self if self.accepts(e, context, source, tag)), None)
        if hit is not None:
            self.remove(hit)
        return hit


def _reference_queues():
    def message_accepted(msg, context, source, tag):  # a queued message, by a receive's pattern
        return _accepts(_Recv(_Comm(context), source, tag, ""), msg)

    def receive_accepts(req, context, source, tag):  # a queued receive, for a message's envelope
        return _accepts(req, _Msg(context, source, tag, ""))

    return _ListQueue(receive_accepts), _ListQueue(message_accepted)


def _play(events, posted, unexpected):
    """Offer *events* to the two queues in turn; return the pairs made and what stays queued."""
    pairs = []
    for kind, item in events:
        if kind == "recv":
            hit = unexpected.take(item.comm.context, item.peer, item.tag)
            if hit is None:
                posted.append(item)
            else:
                pairs.append((hit.name, item.name))
        else:
            hit = posted.take(item.context, item.src_rank, item.tag)
            if hit is None:
                unexpected.append(item)
            else:
                pairs.append((item.name, hit.name))
    return pairs, [r.name for r in posted], [m.name for m in unexpected]


_contexts = st.sampled_from([0, 1])
_sources = st.integers(0, 2)
_tags = st.integers(0, 2)
_event = st.one_of(
    st.tuples(st.just("recv"), _contexts, st.one_of(_sources, st.just(ANY_SOURCE)), st.one_of(_tags, st.just(ANY_TAG))),
    st.tuples(st.just("msg"), _contexts, _sources, _tags),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_event, max_size=40))
def test_indexed_queues_pair_as_ordered_linear_queues_do(raw):
    events = []
    for i, (kind, context, source, tag) in enumerate(raw):
        if kind == "recv":
            events.append((kind, _Recv(_Comm(context), source, tag, f"r{i}")))
        else:
            events.append((kind, _Msg(context, source, tag, f"m{i}")))
    assert _play(events, PostedQueue(), UnexpectedQueue()) == _play(events, *_reference_queues())


def test_first_and_remove_keep_arrival_order():
    queue = UnexpectedQueue()
    a, b, c = _Msg(0, 1, 5, "a"), _Msg(0, 2, 5, "b"), _Msg(0, 1, 6, "c")
    for m in (a, b, c):
        queue.append(m)
    assert queue.first(0, ANY_SOURCE, ANY_TAG) is a
    assert queue.first(0, ANY_SOURCE, 5) is a
    assert queue.first(0, 1, ANY_TAG) is a
    assert queue.first(0, 2, 6) is None
    queue.remove(a)
    assert a not in queue and len(queue) == 2
    assert queue.first(0, ANY_SOURCE, ANY_TAG) is b
    assert [m.name for m in queue] == ["b", "c"]
