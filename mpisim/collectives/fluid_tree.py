"""Pipelined trees at collective fidelity: one flow per tree edge instead of one message per segment.

NCCL's trees (``nccl_tree``, and the rail trees of ``nvls`` across nodes) allreduce their
share of the vector in segments of DBT_SEGMENT bytes: every segment climbs the tree, reduced
at every level, and comes back down, and a sender puts segment j+1 on an edge only once the
receiver has granted a credit for it (:func:`~mpisim.collectives.allreduce.tree_allreduce`).
On the message path that is one data message and one credit per segment per edge: 1 GiB on
16 x dgx-h100 is about a million messages. At ``fidelity: collective`` (:func:`fluid_trees`)
the call instead posts, when its last rank has joined, one flow per tree edge and direction
carrying all of that edge's segments (as the protocol puts them on the wire), through the
World, so the flows share the links with each other and with everything else in flight and
every link carries exactly the bytes the segments would have put on it. The call then ends
after the longer of two bounds (:func:`static_bounds`), for its slowest tree:

* the **latency bound** -- the tree program replayed segment by segment without messages
  (:func:`replay`): the first segment goes up and down the tree, and each later one follows
  a credit round behind on every edge, each message taking its protocol + route latency plus
  its bytes at the route's bandwidth, shared with the transfers that cross a link at the same
  moment -- those of the same stage of the same sweep in the trees of its group (the two
  trees of a channel share the chain inside a node; a rank sends to its children at once).
  For k segments and depth D it is about 2D + 2(k-1) latencies plus the bytes: NCCL's own
  shape of a pipelined tree's cost (``src/graph/tuning.cc``: a latency per tree level and
  per step, and the bytes at the tree's bandwidth);
* the **bandwidth bound** -- the slowest edge's flow, which has shared its links with every
  other edge of the call for the whole time, for the k-1 later segments, after the first.

**MPI's double binary tree** (``double_binary_tree``, a :class:`Tree` without a GPU wire and
with window 1) runs here too: its segments and credits are MPI messages, each timed by the MPI
layer's own phases (:meth:`~mpisim.mpi.world.World.message_cost`: envelope, the rendezvous
handshake once the receive is posted, overheads, copies), with the same one flow per edge for
the links' bytes. With one segment per tree the replay is the program. With several, the
streams that share a NIC fall into and out of phase under fair sharing, which no count fixed in
advance captures, so the program runs as a fluid until its period shows
(:mod:`~mpisim.collectives.fluid_pipeline`) and that is its latency bound; its flows bound it
only where other traffic slows them more. Against the message path (mpisim.validation_fidelity's
grid: full, star, fat tree, rail with 8 and 64 ranks, 4 x dgx-h100; 1 KiB to 1 GiB) every case
comes out within 0.2 %.

Reductions are in the replay (``reduce_cost`` per byte, at every rank with children). Once
a segment moves every rank by the same period as the one before, the replay adds that
period for the remaining segments of the same size instead of replaying them (exact for a
max-plus recurrence), so a call costs about its edges, not its edges x segments.

**Where it is the message path, and where not** (tests/validation/test_gpu_fidelity.py;
dgx-h100 nodes, fluid against message; the two network models agree on the message path to
1 %, because a tree has one connection per peer and NCCL_STEPS segments in flight on it).
Every link carries the same bytes, at every size. With one segment per tree (1 MiB) the times
agree within 1 % on 1, 2 and 4 nodes, and ``nvls`` on one node to the last digits. Once
segments pipeline:

==================  =====================  =====================
algorithm, nodes    16 MiB (fs / an)       256 MiB (fs / an)
==================  =====================  =====================
``nccl_tree``, 1    +1.9 % / +2.9 %        +0.4 % / +0.5 %
``nccl_tree``, 2    +4.0 % / +4.0 %        +5.8 % / +5.8 %
``nccl_tree``, 4    -2.3 % / -2.5 %        -23 % / -22 %
``nvls``, 2         +6.2 % / +6.2 %        +0.9 % / +0.9 %
``nvls``, 4         +6.8 % / +8.4 %        -2.8 % / -1.4 %
==================  =====================  =====================

At mid sizes the pipeline fills a little differently (the message path interleaves the two
trees' segments on a pair's connection, the replay makes the later tree wait for the earlier
one's first segment). On 4 nodes at large sizes the message path leaves every NIC idle about
a quarter of the time (with LL128, 72.9 MB over node 1's NICs at 47 GB/s was 1.55 ms of a 2.29 ms call):
a node's up and down streams share its NIC and each waits for segments the other's
dependencies hold back. This path charges the busiest link's bytes at its full rate plus the
pipeline's fill, which NCCL's own model does too (``src/graph/tuning.cc``); which of the
two is nearer a real 4-node tree no published row here says.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from mpisim.collectives.allreduce import DBT_SEGMENT, NCCL_STEPS
from mpisim.collectives.bcast import segments
from mpisim.collectives.fluid_pipeline import PipelineEdge, pipeline_time
from mpisim.engine.events import Call
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.cost import MessageCost
from mpisim.mpi.payload import Payload
from mpisim.mpi.wire import Wire

#: ``links[r] = (parent, children)`` of every comm rank r in one tree (a rank outside it: (None, [])).
Links = list[tuple[int | None, list[int]]]


@dataclass(frozen=True)
class Tree:
    """One pipelined tree of a call: its shape, the protocol of its messages, and its segments' sizes."""

    links: Links
    wire: Wire | None  # a GPU library's protocol; None: MPI messages, with the World's protocols and costs
    segments: tuple[int, ...]
    group: int = 0
    window: int = NCCL_STEPS  # segments a sender may have on an edge ahead of the receiver's credits

    @classmethod
    def over(cls, links: Links, wire: Wire | None, share: Payload, group: int = 0, window: int = NCCL_STEPS) -> Tree:
        """The tree that allreduces *share* over *links* in DBT_SEGMENT segments, as tree_allreduce cuts it.

        Trees of one *group* (the two trees of a channel, or of a rail) run in step.
        """
        return cls(links, wire, tuple(seg.nbytes for seg in segments(share, DBT_SEGMENT)), group, window)


@dataclass
class _Edge:
    """One direction of one tree edge: its costs, and where it meets other edges on its links."""

    tree: int
    src: int
    dst: int
    up: bool
    latency: float  # protocol + route latency of one message
    solo: float  # seconds per wire byte alone on the route
    wire: tuple[int, ...]  # wire bytes of each segment
    pairs: int = 1  # transfers in step with this one on its busiest link (its own included; see _edges)
    shares_pair: bool = False  # another tree of its group sends on the same pair in step
    #: MPI trees: each segment size's message, and the zero-byte credit back (mpisim.mpi.cost).
    costs: dict[int, MessageCost] | None = None
    credit: MessageCost | None = None
    links: tuple[int, ...] = ()  # the ids of its route's links


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


def join_call(comm: Comm, calls_by_world: weakref.WeakKeyDictionary, new_call: Callable[[], Any]) -> tuple[Any, Any, bool]:
    """Join this rank to its communicator's next collective-fidelity call: (call, wake-up event, last to join).

    Every rank's n-th call on a communicator is the same call (collectives are called in the
    same order by all ranks), kept in *calls_by_world* until its last rank has joined; *new_call*
    makes the call's record (with ``arrived`` and ``events``) when the first rank joins.
    """
    calls = calls_by_world.setdefault(comm.world, {})
    seq_key = ("seq", comm.context, comm.rank)
    number = calls.get(seq_key, 0)
    calls[seq_key] = number + 1
    key = (comm.context, number)
    call = calls.get(key)
    if call is None:
        call = calls[key] = new_call()
    event = comm.env.event()
    call.events.append(event)
    call.arrived += 1
    last = call.arrived == comm.size
    if last:
        del calls[key]
    return call, event, last


def fluid_trees(comm: Comm, build: Callable[[], list[Tree]], shape: Hashable) -> Proc[None]:
    """Time pipelined tree allreduces running at once as one flow per tree edge (see the module docstring).

    Every rank of *comm* calls it; when the last one has joined, ``build()`` returns the
    call's trees (built once, not by every rank), their flows start, and every rank returns
    when the slowest tree has finished. *shape* names what ``build()`` depends on besides the
    communicator (algorithm, size, protocol): calls of one shape on one group of ranks reuse
    its trees' edges and replays (a training run's equal buckets build them once).
    """
    world = comm.world
    call, event, last = join_call(comm, _CALLS, _Call)
    if last:
        plans = _PLANS.setdefault(world, {})
        plan_key = (tuple(comm.group), shape)
        plan = plans.get(plan_key)
        if plan is None:
            plan = plans[plan_key] = _plan(comm, build())
        _start(comm, call, plan)
    yield event


def _edges(comm: Comm, trees: list[Tree]) -> list[_Edge]:
    """Both directions of every edge of every tree, with their costs."""
    world = comm.world
    topology = world.topology
    out = []
    wires: dict[tuple[int, str], tuple[int, ...]] = {}  # wire bytes of a tree's segments, by path kind
    for t, tree in enumerate(trees):
        for r, (parent, _) in enumerate(tree.links):
            if parent is None:
                continue
            for a, b, up in ((r, parent, True), (parent, r, False)):
                src, dst = comm.group[a], comm.group[b]
                kind = topology.path_kind(src, dst)
                route = topology.route(src, dst)
                solo = 1.0 / route.bottleneck if route.links else 0.0
                if tree.wire is None:  # MPI messages: the payload's bytes, the World's protocols
                    costs = {n: world.message_cost(src, dst, n) for n in set(tree.segments)}
                    out.append(_Edge(t, a, b, up, route.latency, solo, tree.segments, costs=costs,
                                     credit=world.message_cost(dst, src, 0)))
                    continue
                wire = wires.get((t, kind))
                if wire is None:
                    wire = wires[t, kind] = tuple(tree.wire.wire_bytes(n, kind) for n in tree.segments)
                out.append(_Edge(t, a, b, up, tree.wire.latency(kind) + route.latency, solo, wire))
    # The first segment crosses an edge up at its child's height in the tree (hops to the leaf
    # below it furthest away) and down at the child's depth. Edges of one group at the same stage
    # of the same sweep move it at the same moments: on a link they cross together, the pairs
    # share it, and a pair's edges (one connection per peer, nccl.py) go one after the other.
    stages = [_stages(tree.links) for tree in trees]
    routes = [topology.route(comm.group[e.src], comm.group[e.dst]) for e in out]
    keys = []
    for e in out:
        height, depth = stages[e.tree]
        child = e.src if e.up else e.dst
        keys.append((trees[e.tree].group, e.up, height[child] if e.up else depth[child]))
    on_link: dict[tuple, set] = {}
    for e, key, route in zip(out, keys, routes, strict=True):
        e.links = route.ids
        for i in route.ids:
            on_link.setdefault((*key, i), set()).add((e.src, e.dst, e.tree))
    for e, key, route in zip(out, keys, routes, strict=True):
        crossing = [on_link[(*key, i)] for i in route.ids]
        if e.costs is None:
            e.pairs = max((len({(a, b) for a, b, _ in edges}) for edges in crossing), default=1)
        else:  # MPI messages of one pair do not queue on a connection: they share the link
            e.pairs = max((len(edges) for edges in crossing), default=1)
        e.shares_pair = any((a, b) == (e.src, e.dst) and t != e.tree for edges in crossing for a, b, t in edges)
    return out


def _stages(links: Links) -> tuple[dict[int, int], dict[int, int]]:
    """Return each rank's height (hops down to its furthest leaf) and depth (hops up to the root) in a tree."""
    roots = [r for r, (parent, children) in enumerate(links) if parent is None and children]
    depth: dict[int, int] = {}
    order = []
    stack = [(r, 0) for r in roots]
    while stack:
        r, d = stack.pop()
        depth[r] = d
        order.append(r)
        stack.extend((c, d + 1) for c in links[r][1])
    height: dict[int, int] = {}
    for r in reversed(order):
        height[r] = max((height[c] + 1 for c in links[r][1]), default=0)
    return height, depth


@dataclass(frozen=True)
class _Plan:
    """What a call's trees cost before any flow has run: their edges and their flow-free bounds."""

    edges: list[_Edge]
    by_tree: list[list[int]]  # the indices in edges of each tree's edges
    static: list[tuple[float, float, float, int]]  # per tree: latency bound, first segment, queued, segments
    messages: tuple[int, int] = (0, 0)  # MPI trees: the messages (segments and credits) they stand for, and their bytes


#: Plans per world, keyed by (the communicator's ranks, the call's shape).
_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _plan(comm: Comm, trees: list[Tree]) -> _Plan:
    edges = _edges(comm, trees)
    gamma = comm.world.config.reduce_cost
    by_tree: list[list[int]] = [[] for _ in trees]
    for i, e in enumerate(edges):
        by_tree[e.tree].append(i)
    seen: dict[int, int] = {}
    static = []
    for t, tree in enumerate(trees):
        position = seen.get(tree.group, 0)
        seen[tree.group] = position + 1
        static.append(static_bounds(tree, [edges[i] for i in by_tree[t]], gamma, position))
    if any(tree.wire is None and len(tree.segments) > 1 for tree in trees):
        static = _pipeline_bounds(comm, trees, [[edges[i] for i in indices] for indices in by_tree], static)
    # An MPI tree's edge stands for one message per segment and a credit for each after the window.
    count = sum(2 * len(e.wire) - min(trees[e.tree].window, len(e.wire)) for e in edges if e.costs is not None)
    nbytes = sum(sum(e.wire) for e in edges if e.costs is not None)
    return _Plan(edges, by_tree, static, (count, nbytes))


def _pipeline_bounds(comm: Comm, trees: list[Tree], edges: list[list[_Edge]],
                     static: list[tuple[float, float, float, int]]) -> list[tuple[float, float, float, int]]:
    """MPI trees of several segments: their latency bound is the program run as a fluid (fluid_pipeline).

    The trees run together there, so each tree's bound is the call's.
    """
    topology = comm.world.topology
    program = []
    for tree, tree_edges in zip(trees, edges, strict=True):
        up, down = {}, {}
        for e in tree_edges:
            edge = PipelineEdge(e.costs, e.credit, e.links)  # type: ignore[arg-type]
            if e.up:
                up[e.src] = edge
            else:
                down[e.dst] = edge
        program.append((tree.links, tree.segments, up, down))
    window = trees[0].window
    total = pipeline_time(program, window, comm.world.config.reduce_cost,
                          lambda link: topology.links[link].effective_bandwidth)
    return [(total, first, queued, k) for _, first, queued, k in static]


def _start(comm: Comm, call: _Call, plan: _Plan) -> None:
    world, env = comm.world, comm.env
    edges = plan.edges
    call.t_start = env.now
    call.pending = len(edges)
    t_flow = [0.0] * len(edges)

    def finished(i: int) -> None:
        t_flow[i] = env.now - call.t_start
        call.pending -= 1
        if call.pending == 0:
            span = 0.0
            for indices, (latency_bound, first, queued, k) in zip(plan.by_tree, plan.static, strict=True):
                if indices and edges[indices[0]].costs is not None:
                    # An MPI tree's latency bound has its own links' sharing in it (fluid_pipeline):
                    # its flows bound it only where other traffic slows them beyond that.
                    span = max(span, latency_bound, max(t_flow[i] for i in indices))
                elif indices:
                    bandwidth_bound = max(t_flow[i] for i in indices) * (k - 1) / k + first
                    span = max(span, max(latency_bound, bandwidth_bound) + queued)
            end = call.t_start + span
            for event in call.events:
                Call(env, lambda ev: ev.succeed(), event, max(0.0, end - env.now))

    count, nbytes = plan.messages
    if count:
        world.tracer.count_messages(count, nbytes)
    if not edges:  # a tree of one rank: nothing moves
        for event in call.events:
            event.succeed()
        return
    for i, edge in enumerate(edges):
        if world._post(comm.group[edge.src], comm.group[edge.dst], sum(edge.wire), finished, i):
            finished(i)


def static_bounds(tree: Tree, edges: list[_Edge], gamma: float, position: int = 0) -> tuple[float, float, float, int]:
    """One pipelined tree's bounds that need no flow: (latency bound, first segment, queued, segments).

    The tree takes the longer of its latency bound and its bandwidth bound (its slowest edge's
    flow over the k-1 later segments, after the first), plus *queued* (module docstring): a
    pair's transfers go one after the other (one connection per peer), so the tree that is
    *position* in its group's line starts that many first-segment transfers late.
    """
    if not edges:
        return 0.0, 0.0, 0.0, 1
    k = len(tree.segments)
    latency_bound = replay(tree, edges, gamma, k)
    first = replay(tree, edges, gamma, 1)
    # Queued behind the trees ahead of it in its group, on the pairs they share (a GPU library's
    # connection; MPI's messages of one pair share the link instead, which pairs counts).
    queued = position * max((e.wire[0] * e.solo for e in edges if e.shares_pair and e.costs is None), default=0.0)
    return latency_bound, first, queued, k


def replay(tree: Tree, edges: list[_Edge], gamma: float, k: int) -> float:
    """Seconds the first *k* segments of one tree take: tree_allreduce's program, replayed without messages.

    The message path's dependencies, as a max-plus recurrence over segments: in its up loop a
    rank takes segment j from its children once it has sent segment j-1 on, grants them the
    credit for j+1 as soon as j has arrived, reduces, and sends j to its parent once the
    parent's credit for j has arrived; the root turns each reduced segment round to its
    children, and in its down loop every other rank passes segment j on to each child once
    that child's credit has arrived. A segment of w wire bytes on edge e takes e.latency +
    w x the route's seconds per byte, times the distinct pairs of ranks whose transfers cross
    its busiest link at the same stage of the sweep; a credit takes its path's latency. An MPI
    tree's segments and credits are MPI messages instead (:class:`~mpisim.mpi.cost.MessageCost`),
    each with its receive posted when its loop came round to it: a rendezvous handshake waits
    for that, and a message's CPU overheads and copies are in its time.
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
    # MPI trees: per child rank, its edges' messages by size, the credits back, and the link's sharing.
    cost_up, cost_down, credit_up, credit_down, share_up, share_down = {}, {}, {}, {}, {}, {}
    for e in edges:
        rate = e.solo * e.pairs
        child = e.src if e.up else e.dst
        (lat_up if e.up else lat_down)[child] = e.latency
        (rate_up if e.up else rate_down)[child] = rate
        (wire_up if e.up else wire_down)[child] = e.wire
        (cost_up if e.up else cost_down)[child] = e.costs
        (credit_up if e.up else credit_down)[child] = e.credit
        (share_up if e.up else share_down)[child] = e.pairs
    mpi = tree.wire is None
    inf = float("-inf")
    window = tree.window
    # Segment j waits for the credit its receiver grants when segment j - window has arrived, so
    # the replay keeps the arrival times of the last window + 1 segments (newest last):
    g_hist: list[dict[int, float]] = []  # when segment j arrived from the children, at every rank
    md_hist: list[dict[int, float]] = []  # when segment j came down to every rank but the root
    none: dict[int, float] = dict.fromkeys(order, inf)  # before the first segment: no wait
    u_end: dict[int, float] = dict.fromkeys(order, 0.0)  # when the up loop finished segment j-1
    d_end: dict[int, float] = dict.fromkeys(order, 0.0)  # when the down loop finished segment j-1
    s_up: dict[int, float] = {}
    s_down: dict[int, float] = {}
    sizes = tree.segments[:k]
    below = [r for r in order if links[r][0] is not None]  # the ranks with a down loop
    j = 0
    while j < len(sizes):
        nbytes = sizes[j]
        g_credit = g_hist[-window] if len(g_hist) >= window else none
        md_credit = md_hist[-window] if len(md_hist) >= window else none
        g: dict[int, float] = {}
        md: dict[int, float] = {}
        before = [*u_end.values(), *(d_end[r] for r in below)]
        credited = j >= window  # a send waits for its receiver's credit
        for r in post_order:
            parent, children = links[r]
            if mpi:  # the receives were posted when the loop came round (u_end): see mpisim.mpi.cost
                posted = u_end[r]
                arrived = max((cost_up[c][nbytes].complete(s_up[c], posted, share_up[c]) for c in children),
                              default=inf)
            else:
                arrived = max((s_up[c] + lat_up[c] + wire_up[c][j] * rate_up[c] for c in children), default=inf)
            g[r] = max(u_end[r], arrived)
            t = g[r] + len(children) * nbytes * gamma
            if parent is not None:
                if mpi:
                    t = credit_up[r].complete(g_credit[parent], t) if credited else t
                else:
                    t = max(t, g_credit[parent] + lat_down[r])
                s_up[r] = t
            else:
                for c in children:
                    if mpi:
                        t = credit_down[c].complete(md_credit[c], t) if credited else t
                    else:
                        t = max(t, md_credit[c] + lat_up[c])
                    s_down[c] = t
            u_end[r] = t
        for r in order:
            parent, children = links[r]
            if parent is None:
                continue
            if mpi:
                t = max(d_end[r], cost_down[r][nbytes].complete(s_down[r], d_end[r], share_down[r]))
            else:
                t = max(d_end[r], s_down[r] + lat_down[r] + wire_down[r][j] * rate_down[r])
            md[r] = t
            for c in children:
                if mpi:
                    t = credit_down[c].complete(md_credit[c], t) if credited else t
                else:
                    t = max(t, md_credit[c] + lat_up[c])
                s_down[c] = t
            d_end[r] = t
        g_hist = [*g_hist[-window:], g]
        md_hist = [*md_hist[-window:], md]
        j += 1
        # Steady state: once a segment moves every rank, and every arrival of the last window + 1
        # segments, by the same period as the one before, so will every later segment of the
        # same size (the recurrence is max-plus: adding a constant to all its inputs adds it to
        # all its outputs).
        moved = [b - a for a, b in zip(before, [*u_end.values(), *(d_end[r] for r in below)], strict=True)]
        period = moved[0]
        if len(g_hist) <= window or j >= len(sizes) or sizes[j] != nbytes:
            continue
        if not (_shifted(moved, period) and _hist_shifted(g_hist, order, period)
                and _hist_shifted(md_hist, below, period)):
            continue
        same = 0
        while j + same < len(sizes) and sizes[j + same] == nbytes:
            same += 1
        for state, ranks in ((u_end, order), (d_end, below), *((h, order) for h in g_hist),
                             *((h, below) for h in md_hist)):
            for r in ranks:
                state[r] += same * period
        j += same
    return max(max(u_end.values()), max(d_end.values()))


def _shifted(moved: list[float], period: float) -> bool:
    """True if every value moved by *period* (to a relative 1e-12)."""
    return all(abs(m - period) <= 1e-12 * abs(period) for m in moved)


def _hist_shifted(hist: list[dict[int, float]], ranks: list[int], period: float) -> bool:
    """True if each segment in *hist* arrived *period* after the one before, at every rank of *ranks*."""
    return all(_shifted([b[r] - a[r] for r in ranks], period) for a, b in pairwise(hist))
