"""Pipelined trees at collective fidelity: one flow per tree edge instead of one message per segment.

NCCL's trees (``nccl_tree``, and the rail trees of ``nvls`` across nodes) allreduce their
share of the vector in segments: every segment climbs the tree, reduced at every level, and
comes back down, and a sender may put segment j+1 on an edge only once the receiver has
granted a credit for it (:func:`~mpisim.collectives.allreduce.tree_allreduce`). On the message
path that is one data message and one credit per segment per edge: 1 GiB on 16 x dgx-h100 is
over a million messages. At ``fidelity: collective`` (:func:`fluid_trees`) the same call is
timed from one flow per tree edge and direction carrying all of that edge's segments, posted
when the last rank has joined, so the flows share the links with each other and with
everything else in flight, and every link carries exactly the bytes the segments would have
put on it.

The call's time is the message path's pipeline, with each edge's per-segment transfer time
taken from its flow (what the edge gets of its links while every edge of the call is
busy). For an edge e with protocol + route latency l_e and a segment of w wire bytes:

* *solo* transfer y_e = w / (route bottleneck): the segment alone on its links;
* *shared* transfer x_e = w x (flow time - route latency) / (the flow's bytes): the segment
  while all the call's edges share the links;
* the first segment goes up the tree and down again, each edge taking l_e + y_e and each
  rank reducing what its children sent (``reduce_cost``);
* every later segment follows one *period* behind: the slowest edge's round, which is the
  credit loop 2 l_e + y_e when latency rules (one segment in flight per edge) or the shared
  transfer x_e when bandwidth rules (the links are full);

so a tree takes first + (segments - 1) x period, and the call the slowest of its trees. It is
NCCL's own shape of a pipelined tree's cost (``src/graph/tuning.cc``: a latency per tree
level, and the bytes at the tree's bandwidth), with the bandwidth measured from the flows.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass

from mpisim.collectives.allreduce import DBT_SEGMENT
from mpisim.collectives.bcast import segments
from mpisim.engine.events import Call
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.payload import Payload
from mpisim.mpi.wire import Wire

#: ``links[r] = (parent, children)`` of every comm rank r in one tree (a rank outside it: (None, [])).
Links = list[tuple[int | None, list[int]]]


@dataclass(frozen=True)
class Tree:
    """One pipelined tree of a call: its shape, the protocol of its messages, and its segments' sizes."""

    links: Links
    wire: Wire
    segments: tuple[int, ...]
    group: int = 0

    @classmethod
    def over(cls, links: Links, wire: Wire, share: Payload, group: int = 0) -> Tree:
        """The tree that allreduces *share* over *links* in DBT_SEGMENT segments, as tree_allreduce cuts it.

        Trees of one *group* (the two trees of a channel, or of a rail) run in step.
        """
        return cls(links, wire, tuple(seg.nbytes for seg in segments(share, DBT_SEGMENT)), group)


@dataclass
class _Edge:
    """One direction of one tree edge: its costs and, once its flow has finished, the flow's time."""

    tree: int
    src: int
    dst: int
    up: bool
    latency: float  # protocol + route latency of one message
    route_latency: float
    solo: float  # seconds per wire byte alone on the route
    wire: tuple[int, ...]  # wire bytes of each segment
    t_flow: float = 0.0
    together: int = 1  # edges of trees in step with this one on the same pair, same direction (itself included)


class _Call:
    """One call in progress: the ranks that have arrived, their wake-ups, and the flows still moving."""

    __slots__ = ("arrived", "events", "pending", "t_start")

    def __init__(self) -> None:
        self.arrived = 0
        self.events: list = []
        self.pending = 0
        self.t_start = 0.0


#: Calls in progress per world, keyed by (communicator context, call number).
_CALLS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def fluid_trees(comm: Comm, build: Callable[[], list[Tree]]) -> Proc[None]:
    """Time pipelined tree allreduces running at once as one flow per tree edge (see the module docstring).

    Every rank of *comm* calls it; when the last one has joined, ``build()`` returns the
    call's trees (built once, not by every rank), their flows start, and every rank returns
    when the slowest tree has finished.
    """
    world = comm.world
    calls = _CALLS.setdefault(world, {})
    seq_key = ("seq", comm.context, comm.rank)
    number = calls.get(seq_key, 0)
    calls[seq_key] = number + 1
    key = (comm.context, number)
    call = calls.get(key)
    if call is None:
        call = calls[key] = _Call()
    event = comm.env.event()
    call.events.append(event)
    call.arrived += 1
    if call.arrived == comm.size:
        del calls[key]
        _start(comm, call, build())
    yield event


def _edges(comm: Comm, trees: list[Tree]) -> list[_Edge]:
    """Both directions of every edge of every tree, with their costs."""
    topology = comm.world.topology
    out = []
    for t, tree in enumerate(trees):
        for r, (parent, _) in enumerate(tree.links):
            if parent is None:
                continue
            for a, b, up in ((r, parent, True), (parent, r, False)):
                src, dst = comm.group[a], comm.group[b]
                kind = topology.path_kind(src, dst)
                route = topology.route(src, dst)
                solo = 1.0 / route.bottleneck if route.links else 0.0
                wire = tuple(tree.wire.wire_bytes(n, kind) for n in tree.segments)
                out.append(_Edge(t, a, b, up, tree.wire.latency(kind) + route.latency, route.latency, solo, wire))
    same: dict[tuple[int, int, int, bool], int] = {}
    for e in out:
        key = (trees[e.tree].group, e.src, e.dst, e.up)
        same[key] = same.get(key, 0) + 1
    for e in out:
        e.together = same[(trees[e.tree].group, e.src, e.dst, e.up)]
    return out


def _start(comm: Comm, call: _Call, trees: list[Tree]) -> None:
    world, env = comm.world, comm.env
    edges = _edges(comm, trees)
    call.t_start = env.now
    call.pending = len(edges)

    def finished(i: int) -> None:
        edges[i].t_flow = env.now - call.t_start
        call.pending -= 1
        if call.pending == 0:
            gamma = world.config.reduce_cost
            span = max((tree_time(trees[t], [e for e in edges if e.tree == t], gamma) for t in range(len(trees))),
                       default=0.0)
            end = call.t_start + span
            for event in call.events:
                Call(env, lambda ev: ev.succeed(), event, max(0.0, end - env.now))

    if not edges:  # a tree of one rank: nothing moves
        for event in call.events:
            event.succeed()
        return
    for i, edge in enumerate(edges):
        if world._post(comm.group[edge.src], comm.group[edge.dst], sum(edge.wire), finished, i):
            finished(i)


def tree_time(tree: Tree, edges: list[_Edge], gamma: float) -> float:
    """Seconds one pipelined tree takes: the longer of its latency bound and its bandwidth bound."""
    if not edges:
        return 0.0
    latency_bound = replay(tree, edges, gamma, len(tree.segments))
    mode = __import__("os").environ.get("FT_MODE", "max")
    if mode == "lat":
        return latency_bound
    first = replay(tree, edges, gamma, 1)
    k = len(tree.segments)
    bandwidth_bound = max(e.t_flow for e in edges) * (k - 1) / k + first
    return max(latency_bound, bandwidth_bound)


def replay(tree: Tree, edges: list[_Edge], gamma: float, k: int) -> float:
    """Seconds one pipelined tree takes: tree_allreduce's program, replayed segment by segment.

    The same dependencies as the message path (module docstring), as a max-plus recurrence:
    a rank takes segment j from its children once it has sent segment j-1 on (its up loop),
    grants its children the credit for j+1 as soon as j has arrived, reduces, and sends j to
    its parent once the parent's credit for j has arrived; the root turns each reduced segment
    round to its children, and every other rank passes it down once its child's credit has
    arrived. A message of w wire bytes on edge e takes e.latency + w x (the edge's seconds per
    byte while the call's flows share the links); a credit takes its path's latency.
    """
    if not edges:
        return 0.0
    links = tree.links
    root = next(r for r, (parent, children) in enumerate(links) if parent is None and children)
    order, stack = [], [root]  # parents before children
    while stack:
        r = stack.pop()
        order.append(r)
        stack.extend(links[r][1])
    post_order = order[::-1]
    # Per child rank: latency and seconds per wire byte of its edge up (to its parent) and down (from it).
    lat_up, lat_down, rate_up, rate_down, wire_up, wire_down = {}, {}, {}, {}, {}, {}
    for e in edges:
        rate = (e.t_flow - e.route_latency) / sum(e.wire) if sum(e.wire) else 0.0
        rate = e.solo * e.together
        child = e.src if e.up else e.dst
        (lat_up if e.up else lat_down)[child] = e.latency
        (rate_up if e.up else rate_down)[child] = rate
        (wire_up if e.up else wire_down)[child] = e.wire
    inf = float("-inf")
    g_prev: dict[int, float] = dict.fromkeys(order, inf)  # when segment j-1 arrived from the children
    md_prev: dict[int, float] = dict.fromkeys(order, inf)  # when segment j-1 came down to the rank
    u_end: dict[int, float] = dict.fromkeys(order, 0.0)  # when the up loop finished segment j-1
    d_end: dict[int, float] = dict.fromkeys(order, 0.0)  # when the down loop finished segment j-1
    s_up: dict[int, float] = {}
    s_down: dict[int, float] = {}
    g: dict[int, float] = {}
    md: dict[int, float] = {}
    for j, nbytes in enumerate(tree.segments[:k]):
        for r in post_order:
            parent, children = links[r]
            arrived = max((s_up[c] + lat_up[c] + wire_up[c][j] * rate_up[c] for c in children), default=inf)
            g[r] = max(u_end[r], arrived)
            t = g[r] + len(children) * nbytes * gamma
            if parent is not None:
                s_up[r] = t = max(t, g_prev[parent] + lat_down[r])
            else:
                for c in children:
                    s_down[c] = t = max(t, md_prev[c] + lat_up[c])
            u_end[r] = t
        for r in order:
            parent, children = links[r]
            if parent is None:
                continue
            md[r] = t = max(d_end[r], s_down[r] + lat_down[r] + wire_down[r][j] * rate_down[r])
            for c in children:
                s_down[c] = t = max(t, md_prev[c] + lat_up[c])
            d_end[r] = t
        g_prev, g = g, g_prev
        md_prev, md = md, md_prev
    return max(max(u_end.values()), max(d_end.values()))
