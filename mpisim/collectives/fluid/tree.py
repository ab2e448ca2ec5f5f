"""Pipelined trees at collective fidelity: one flow per tree edge instead of one message per segment.

NCCL's trees (``nccl_tree``) allreduce their share of the vector in segments of DBT_SEGMENT
bytes: every segment climbs the tree, reduced
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
(:mod:`~mpisim.collectives.fluid.pipeline`) and that is its latency bound; its flows bound it
only where other traffic slows them more. Against the message path (mpisim.validation.fidelity's
grid: full, star, fat tree, rail with 8 and 64 ranks, 4 x dgx-h100; 1 KiB to 1 GiB) every case
comes out within 0.2 %. These trees have a plan of their own (:func:`_mpi_plan`): one flow
per edge, no weighted merging (see below).

Reductions are in the replay (``reduce_cost`` per byte, at every rank with children). Once
a segment moves every rank by the same period as the one before, the replay adds that
period for the remaining segments of the same size instead of replaying them (exact for a
max-plus recurrence), so a call costs about its edges, not its edges x segments.

**Fewer flows than edges.** Many edges join the same two ranks: the two trees of a channel
share a node's chain, and the chains of a node's channels share all but one of its pairs
(``nccl_tree`` on 128 x dgx-h100: 32,736 edges, 5,600 distinct pairs). On the fair-share
network, which serves equal flows that start together on one route identically, the edges
of one pair with equal bytes ride one flow weighted by their number
(:mod:`mpisim.network.fairshare`, "Weighted flows"): each edge finishes when its own flow
would have, and every link carries the same bytes. The edges' costs are worked out once
per tree layout (a training run's buckets of every size and protocol share them), and the
trees that are copies of each other on other ranks are replayed once per call shape. MPI's
trees post one flow per edge instead: their messages of one pair do not share a connection,
and their program's sharing is the fluid's (:mod:`~mpisim.collectives.fluid.pipeline`).

**Where it is the message path, and where not** (tests/validation/test_gpu_fidelity.py;
dgx-h100 nodes, fluid against message; the two network models agree on the message path to
1 %, because a tree has one connection per peer and NCCL_STEPS segments in flight on it).
Every link carries the same bytes, at every size. With one segment per tree the times agree
within 1 % on 1, 2 and 4 nodes (on one node up to 1 MiB; across nodes a tree's segments are
NCCL's chunks, :mod:`~mpisim.collectives.nccl.treechannel`, LL128's as small as 18,000 bytes,
so up to 256 KiB on nodes of 8 NICs), and ``nvls`` on one node to the last digits. Once
segments pipeline (16 MiB across nodes: LL128 in 72,000-byte chunks, paced by the thread
blocks; 256 MiB: Simple in 512 KiB ones):

==================  =====================  =====================
algorithm, nodes    16 MiB (fs / an)       256 MiB (fs / an)
==================  =====================  =====================
``nccl_tree``, 1    +1.9 % / +2.9 %        +0.4 % / +0.5 %
``nccl_tree``, 2    -1.5 % / -1.0 %        +5.8 % / +5.8 %
``nccl_tree``, 4    -3.4 % / -2.6 %        -23 % / -22 %
==================  =====================  =====================

At mid sizes the pipeline fills a little differently (the message path interleaves the two
trees' segments on a pair's connection, the replay makes the later tree wait for the earlier
one's first segment). On 4 nodes at large sizes the message path leaves every NIC idle about
a quarter of the time (with LL128, 72.9 MB over node 1's NICs at 47 GB/s was 1.55 ms of a 2.29 ms call):
a node's up and down streams share its NIC and each waits for segments the other's
dependencies hold back. This path charges the busiest link's bytes at its full rate plus the
pipeline's fill, which NCCL's own model does too (``src/graph/tuning.cc``). The one published
row of a tree on that many nodes sides with the message path: H4 (5 nodes of 8 H100s, 4 NICs
each, NCCL_ALGO=Tree, 1 GiB) measured 150 GB/s of bus bandwidth, against 153 GB/s on the
message path and 180 GB/s here (reports/validation.md runs the message path). For trees of
many segments on four or more nodes, time the call at ``fidelity: message`` where it matters;
running the tree program itself as a fluid, as MPI's trees do (:mod:`~mpisim.collectives.fluid.pipeline`),
is the way to close the gap.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from itertools import pairwise

from mpisim.collectives.bcast import segments
from mpisim.collectives.calls import join_call, world_table
from mpisim.collectives.fluid.pipeline import PipelineEdge, pipeline_time
from mpisim.collectives.registry import FluidTwin
from mpisim.collectives.trees import DBT_SEGMENT, NCCL_STEPS, double_binary_tree
from mpisim.engine.events import Call
from mpisim.engine.records import SpanRecord
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.cost import MessageCost
from mpisim.mpi.ops import Op
from mpisim.mpi.payload import Payload, SizePayload
from mpisim.mpi.wire import Wire
from mpisim.network.links import Route

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
    #: Seconds per byte each rank's loop needs at least per segment (a GPU library's thread block
    #: per channel, :mod:`~mpisim.collectives.nccl.treechannel`); 0: no such pace.
    channel_pace: float = 0.0

    @classmethod
    def over(cls, links: Links, wire: Wire | None, share: Payload, group: int = 0, window: int = NCCL_STEPS,
             segment: int = DBT_SEGMENT, channel_pace: float = 0.0) -> Tree:
        """The tree that allreduces *share* over *links* in segments of *segment* bytes, as tree_allreduce cuts it.

        Trees of one *group* (the two trees of a channel, or of a rail) run in step.
        """
        return cls(links, wire, tuple(seg.nbytes for seg in segments(share, segment)), group, window, channel_pace)


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
    pairs: int = 1  # transfers in step with this one on its busiest link, its own included (_edge_shapes, _mpi_edges)
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


def fluid_trees(comm: Comm, build: Callable[[], list[Tree]], shape: Hashable, launch: float = 0.0,
                label: str = "launch") -> Proc[None]:
    """Time pipelined tree allreduces running at once as one flow per tree edge (see the module docstring).

    Every rank of *comm* calls it; when the last one has joined, ``build()`` returns the
    call's trees (built once, not by every rank), their flows start, and every rank returns
    when the slowest tree has finished. *shape* names what ``build()`` depends on besides the
    communicator (algorithm, size, protocol): calls of one shape on one group of ranks reuse
    its trees' edges and replays (a training run's equal buckets build them once).

    *launch* is the call's set-up time on every rank (a GPU library's kernel launch), local
    work before the rank's part of the call begins: the flows start *launch* after the last
    rank has joined, which is when the last rank's set-up would have ended, and each rank's
    set-up is a compute span named *label*. Each rank so waits on one event, not two.
    """
    world = comm.world
    if launch > 0 and world.tracer.record_spans:
        t_start = world.env.now
        world.tracer.span(SpanRecord(comm.world_rank, "compute", t_start, t_start + launch, label))
    call, event, last = join_call(comm, _CALLS, _Call)
    if last:
        plans = world_table(_PLANS, world)
        plan_key = (tuple(comm.group), shape)
        plan = plans.get(plan_key)
        if plan is None:
            trees = build()
            plan = plans[plan_key] = (_mpi_plan if any(tree.wire is None for tree in trees) else _plan)(comm, trees)
        if launch > 0:
            # NOTE: the queue entry the last rank's set-up would have ended with (same time,
            # same place among the events of that instant).
            Call(world.env, _start_after_launch, (comm, call, plan), launch)
        else:
            _start(comm, call, plan)
    yield event


def _start_after_launch(args: tuple[Comm, _Call, _Plan]) -> None:
    _start(*args)


@dataclass(frozen=True)
class _Skeleton:
    """What a call's edges cost besides their segments' bytes: shared by calls of other sizes."""

    shapes: list[tuple]  # per edge, both ways: (tree, src, dst, up, path kind, route latency, solo, pairs, shares_pair, route)
    by_tree: list[list[int]]  # the indices in shapes of each tree's edges
    classes: list[int]  # per tree: trees of one class with equal protocols and segments have equal bounds


def _skeleton(comm: Comm, trees: list[Tree]) -> _Skeleton:
    """The trees' edges without their segments' bytes (see _Edge), once per world and tree layout.

    They depend only on the trees' shapes and groups, which a training run's buckets of
    different sizes and protocols share.
    """
    cache = world_table(_PLANS, comm.world)
    key = ("edges", tuple(comm.group), tuple((_frozen(tree.links), tree.group, _pace(tree)) for tree in trees))
    skeleton = cache.get(key)
    if skeleton is None:
        shapes = _edge_shapes(comm, trees)
        by_tree: list[list[int]] = [[] for _ in trees]
        for i, shape in enumerate(shapes):
            by_tree[shape[0]].append(i)
        skeleton = cache[key] = _Skeleton(shapes, by_tree, _classes(trees, shapes, by_tree))
    return skeleton


def _classes(trees: list[Tree], shapes: list[tuple], by_tree: list[list[int]]) -> list[int]:
    """Number the trees by everything their bounds read but their segments, ranks renamed by a walk.

    :func:`replay` adds, multiplies and takes maxima rank by rank along a tree, never looking
    at a rank's number, and the queue ahead of a tree reads its edges' costs only: two trees
    of one class with the same protocol and segments have the very same floats (the channels'
    trees are copies of each other on other ranks).
    """
    index: dict[tuple, int] = {}
    out = []
    for t, tree in enumerate(trees):
        links = tree.links
        costs = {}
        for i in by_tree[t]:
            _, a, b, up, kind, latency, solo, pairs, shares_pair, _ = shapes[i]
            costs[a if up else b, up] = (kind, latency, solo, pairs, shares_pair)
        roots = [r for r, (parent, children) in enumerate(links) if parent is None and children]
        order, stack = [], roots[:1]  # as replay walks it
        while stack:
            r = stack.pop()
            order.append(r)
            stack.extend(links[r][1])
        signature = tuple((len(links[r][1]), costs.get((r, True)), costs.get((r, False))) for r in order)
        out.append(index.setdefault(signature, len(index)))
    return out


def _pace(tree: Tree) -> float:
    """The pace of *tree*'s protocol between nodes (mpisim.mpi.wire; ``inf``: none, as for MPI trees)."""
    return tree.wire.pace_inter if tree.wire is not None else math.inf


def _frozen(links: Links) -> tuple:
    return tuple((parent, tuple(children)) for parent, children in links)


def _edge_shapes(comm: Comm, trees: list[Tree]) -> list[tuple]:
    """Each edge of :func:`_skeleton`, both ways, as (tree, src, dst, up, path kind, route latency, solo, pairs,
    shares_pair, route).

    A paced protocol's edges between nodes take their sender's pace link (World.wire_route):
    the edges a tree's head sends across share it, as they share its NIC.
    """
    world = comm.world
    topology, group = world.topology, comm.group
    out, routes = [], []
    paths: dict[tuple, tuple] = {}  # (kind, route, solo) per pair and pace: the trees share most pairs
    for t, tree in enumerate(trees):
        pace = _pace(tree)
        for r, (parent, _) in enumerate(tree.links):
            if parent is None:
                continue
            for a, b, up in ((r, parent, True), (parent, r, False)):
                path = paths.get((a, b, pace))
                if path is None:
                    src, dst = group[a], group[b]
                    kind = topology.path_kind(src, dst)
                    route = (world.wire_route(src, dst, tree.wire, kind) if tree.wire is not None else None) \
                        or topology.route(src, dst)
                    path = paths[a, b, pace] = (kind, route, 1.0 / route.bottleneck if route.links else 0.0)
                kind, route, solo = path
                out.append([t, a, b, up, kind, route.latency, solo, 1, False, route])
                routes.append(route)
    # The first segment crosses an edge up at its child's height in the tree (hops to the leaf
    # below it furthest away) and down at the child's depth. Edges of one group at the same stage
    # of the same sweep move it at the same moments: on a link they cross together, the pairs
    # share it, and a pair's edges (one connection per peer, nccl.py) go one after the other.
    stages = [_stages(tree.links) for tree in trees]
    keys = []
    for t, a, b, up, *_ in out:
        height, depth = stages[t]
        keys.append((trees[t].group, up, height[a] if up else depth[b]))
    # Per (group, sweep, stage, link): how many edges of each pair cross it then (a tree has
    # one edge per pair and direction, so a count above one is another tree on the same pair).
    on_link: dict[tuple, dict[tuple[int, int], int]] = {}
    crossings = []  # per edge, the counts of the links it crosses
    for e, key, route in zip(out, keys, routes, strict=True):
        pair = (e[1], e[2])
        crossing = []
        for i in route.ids:
            pairs = on_link.get((key, i))
            if pairs is None:
                pairs = on_link[key, i] = {}
            pairs[pair] = pairs.get(pair, 0) + 1
            crossing.append(pairs)
        crossings.append(crossing)
    for e, crossing in zip(out, crossings, strict=True):
        pair = (e[1], e[2])
        e[7] = max(map(len, crossing), default=1)
        e[8] = any(pairs[pair] > 1 for pairs in crossing)
    return [tuple(e) for e in out]


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
    """What a call's trees cost before any flow has run: their flows and their flow-free bounds."""

    flows: list[tuple[int, int, int, int]]  # (src, dst, wire bytes, weight) of each flow, world ranks
    by_tree: list[list[int]]  # the indices in flows of each tree's edges' flows (each once)
    static: list[tuple[float, float, float, int]]  # per tree: latency bound, first segment, queued, segments
    mpi: bool = False  # MPI trees (_mpi_plan): the latency bound has the trees' own sharing in it
    #: The flows that take a route of their own (a paced protocol's, World.wire_route), by index in flows.
    routes: dict[int, Route] = field(default_factory=dict)
    messages: tuple[int, int] = (0, 0)  # MPI trees: the messages (segments and credits) they stand for, and their bytes


#: Plans per world, keyed by (the communicator's ranks, the call's shape), and skeletons (see
#: _skeleton) keyed by ("edges", the communicator's ranks, the trees' layout).
_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _plan(comm: Comm, trees: list[Tree]) -> _Plan:
    """The call's flows and bounds (see _Plan).

    On a network that takes weighted flows (mpisim.network.fairshare, "Weighted flows") the
    edges of one pair of ranks with equal bytes -- the two trees of a channel share a node's
    chain, and the chains of a node's channels share all but one of its pairs -- become one
    flow of that weight: max-min fair share serves equal flows that start together on one
    route identically, so each edge finishes when it would have on its own, and every link
    carries the same bytes. Edges of one pair with different bytes stay separate flows.
    """
    skeleton = _skeleton(comm, trees)
    shapes, group = skeleton.shapes, comm.group
    gamma = comm.world.config.reduce_cost
    merge = comm.world.network.capabilities.weighted
    wires: dict[tuple[int, str], tuple[tuple[int, ...], int]] = {}  # a tree's segments' wire bytes, and their sum
    flows: list[tuple[int, int, int, int]] = []
    index: dict[tuple[int, int, int], int] = {}
    by_tree: list[list[int]] = [[] for _ in trees]
    routes: dict[int, Route] = {}
    for t, a, b, _, kind, *_, route in shapes:
        wire = wires.get((t, kind))
        if wire is None:
            wire_bytes = tuple(trees[t].wire.wire_bytes(n, kind) for n in trees[t].segments)
            wire = wires[t, kind] = (wire_bytes, sum(wire_bytes))
        src, dst, nbytes = group[a], group[b], wire[1]
        f = index.get((src, dst, nbytes), -1) if merge else -1
        if f < 0:
            f = len(flows)
            flows.append((src, dst, nbytes, 1))
            if merge:
                index[src, dst, nbytes] = f
            if route.links and route.links[-1].kind == "pace":
                routes[f] = route
        else:
            flows[f] = (src, dst, nbytes, flows[f][3] + 1)
        by_tree[t].append(f)  # a tree has one edge per pair and direction: each flow once
    seen: dict[int, int] = {}
    static = []
    bounds: dict[tuple, tuple[float, float, float, int]] = {}  # by class and segments (see _classes)
    for t, tree in enumerate(trees):
        position = seen.get(tree.group, 0)
        seen[tree.group] = position + 1
        key = (skeleton.classes[t], tree.wire, tree.segments, tree.window, tree.channel_pace)
        one = bounds.get(key)
        if one is None:
            latency = tree.wire.latency  # the protocol's, added to the route's
            edges = [_Edge(t, a, b, up, latency(kind) + route_latency, solo, wires[t, kind][0], pairs, shares_pair)
                     for _, a, b, up, kind, route_latency, solo, pairs, shares_pair, _
                     in map(shapes.__getitem__, skeleton.by_tree[t])]
            one = bounds[key] = static_bounds(tree, edges, gamma, 1)
        latency_bound, first, queued_one, k = one
        static.append((latency_bound, first, position * queued_one, k))
    return _Plan(flows, by_tree, static, routes=routes)


# ------------------------------------------------------------------------- MPI's trees


def _mpi_plan(comm: Comm, trees: list[Tree]) -> _Plan:
    """MPI trees' flows and bounds: one flow per edge and direction, the program replayed or run as a fluid.

    No skeleton and no weighted flows: an MPI edge's costs are messages of the World's protocols
    (not a shape shared across sizes), and the fluid's latency bound already has the trees'
    own sharing of their links in it, so each edge keeps its flow.
    """
    if not all(tree.wire is None for tree in trees):
        raise ValueError("a call's trees are either all MPI trees or all a GPU library's")
    edges = _mpi_edges(comm, trees)
    gamma = comm.world.config.reduce_cost
    group = comm.group
    by_tree: list[list[int]] = [[] for _ in trees]
    flows: list[tuple[int, int, int, int]] = []
    for i, e in enumerate(edges):
        by_tree[e.tree].append(i)
        flows.append((group[e.src], group[e.dst], sum(e.wire), 1))
    # MPI messages of one pair share the link (pairs counts them): no tree queues behind another.
    static = [static_bounds(tree, [edges[i] for i in by_tree[t]], gamma) for t, tree in enumerate(trees)]
    if any(len(tree.segments) > 1 for tree in trees):
        static = _pipeline_bounds(comm, trees, [[edges[i] for i in indices] for indices in by_tree], static)
    # An edge stands for one message per segment and a credit for each after the window.
    count = sum(2 * len(e.wire) - min(trees[e.tree].window, len(e.wire)) for e in edges)
    nbytes = sum(sum(e.wire) for e in edges)
    return _Plan(flows, by_tree, static, mpi=True, messages=(count, nbytes))


def _mpi_edges(comm: Comm, trees: list[Tree]) -> list[_Edge]:
    """Both directions of every edge of MPI trees, with their messages' costs (World.message_cost)."""
    world = comm.world
    topology, group = world.topology, comm.group
    out, routes = [], []
    for t, tree in enumerate(trees):
        sizes = set(tree.segments)
        for r, (parent, _) in enumerate(tree.links):
            if parent is None:
                continue
            for a, b, up in ((r, parent, True), (parent, r, False)):
                src, dst = group[a], group[b]
                route = topology.route(src, dst)
                solo = 1.0 / route.bottleneck if route.links else 0.0
                costs = {n: world.message_cost(src, dst, n) for n in sizes}
                out.append(_Edge(t, a, b, up, route.latency, solo, tree.segments, costs=costs,
                                 credit=world.message_cost(dst, src, 0), links=route.ids))
                routes.append(route)
    # As in _edge_shapes, edges at the same stage of the same sweep cross a link together; MPI
    # messages of one pair do not queue on a connection, so every transfer counts, not every pair.
    stages = [_stages(tree.links) for tree in trees]
    keys = []
    for e in out:
        height, depth = stages[e.tree]
        child = e.src if e.up else e.dst
        keys.append((trees[e.tree].group, e.up, height[child] if e.up else depth[child]))
    on_link: dict[tuple, int] = {}
    for key, route in zip(keys, routes, strict=True):
        for i in route.ids:
            on_link[key, i] = on_link.get((key, i), 0) + 1
    for e, key, route in zip(out, keys, routes, strict=True):
        e.pairs = max((on_link[key, i] for i in route.ids), default=1)
    return out


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


# ------------------------------------------------------------------------- running a plan


def _start(comm: Comm, call: _Call, plan: _Plan) -> None:
    world, env = comm.world, comm.env
    flows = plan.flows
    t_start = call.t_start = env.now
    call.pending = len(flows)
    t_flow = [0.0] * len(flows)

    def ended() -> None:
        """Every flow has arrived: wake the ranks once the slowest tree's bounds are over."""
        span = 0.0
        for indices, (latency_bound, first, queued, k) in zip(plan.by_tree, plan.static, strict=True):
            if indices and plan.mpi:
                # An MPI tree's latency bound has its own links' sharing in it (fluid_pipeline):
                # its flows bound it only where other traffic slows them beyond that.
                span = max(span, latency_bound, max(map(t_flow.__getitem__, indices)))
            elif indices:
                bandwidth_bound = max(map(t_flow.__getitem__, indices)) * (k - 1) / k + first
                span = max(span, max(latency_bound, bandwidth_bound) + queued)
        end = call.t_start + span
        # NOTE: one queue entry wakes every rank, in joining order: what an entry per rank,
        # all due at one instant one after another, would do.
        Call(env, _wake, call.events, max(0.0, end - env.now))

    def finished(i: int) -> None:
        t_flow[i] = env.now - t_start
        call.pending -= 1
        if call.pending == 0:
            ended()

    def all_arrived(t_arrived: list[float]) -> None:
        t_flow[:] = [t - t_start for t in t_arrived]
        ended()

    count, nbytes = plan.messages
    if count:
        world.tracer.count_messages(count, nbytes)
    if not flows:  # a tree of one rank: nothing moves
        for event in call.events:
            event.succeed()
        return
    if world.network.capabilities.post_all and not plan.routes:  # the loop below, with only the last arrival told
        world.network.post_all([(src, dst, nbytes * weight, weight) for src, dst, nbytes, weight in flows], all_arrived)
        return
    post, routes = world._post, plan.routes
    for i, (src, dst, nbytes, weight) in enumerate(flows):
        route = routes.get(i)
        if weight == 1:
            done = post(src, dst, nbytes, finished, i, None, route=route)
        else:  # weighted flows exist only on networks that take them (_plan)
            done = post(src, dst, nbytes * weight, finished, i, None, route=route, weight=weight)
        if done:
            finished(i)


def _wake(events: list) -> None:
    for event in events:
        event.succeed()


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
    # connection; MPI trees' edges never set shares_pair: their messages share the link, which pairs counts).
    queued = position * max((e.wire[0] * e.solo for e in edges if e.shares_pair), default=0.0)
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
    pace = tree.channel_pace

    def to_child(c: int, t: float, md_credit: dict[int, float], credited: bool) -> float:
        """When a segment ready at *t* can go down to child *c*: once the child's credit for it is back."""
        if mpi:
            return credit_down[c].complete(md_credit[c], t) if credited else t
        return max(t, md_credit[c] + lat_up[c])

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
            if pace:  # the thread block passes a segment on no sooner than its pace after the one before
                t = max(t, u_end[r] + nbytes * pace)
            if parent is not None:
                if mpi:
                    t = credit_up[r].complete(g_credit[parent], t) if credited else t
                else:
                    t = max(t, g_credit[parent] + lat_down[r])
                s_up[r] = t
            else:
                for c in children:
                    s_down[c] = t = to_child(c, t, md_credit, credited)
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
            if pace:
                t = max(t, d_end[r] + nbytes * pace)
            for c in children:
                s_down[c] = t = to_child(c, t, md_credit, credited)
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


# ---------------------------------------------------------------------------------------- MPI's twin


def _dbt_applies(comm: Comm, buf: Payload) -> bool:
    """True if a ``double_binary_tree`` call may run as flows: size-only data, MPI's own messages,
    a network whose links are shared max-min fairly, as the flows share them, and no rendezvous
    overhead (the algorithm's docstring says why each)."""
    world = comm.world
    return (comm.wire is None and buf.__class__ is SizePayload and world.network.capabilities.max_min_sharing
            and not world.config.rendezvous_overhead)


def _double_binary_tree(comm: Comm, buf: Payload, op: Op) -> Proc[Payload]:
    """The two trees, each over half of the vector, as one flow per edge (credit window 1: MPI's)."""

    def build() -> list[Tree]:
        links = [double_binary_tree(comm.size, r) for r in range(comm.size)]
        return [Tree.over([tree[t] for tree in links], None, half, 0, window=1) for t, half in enumerate(buf.split(2))]

    yield from fluid_trees(comm, build, ("double_binary_tree", buf.count, buf.dtype.str))
    return buf


#: The twin of ``double_binary_tree`` allreduce (registered with it).
DOUBLE_BINARY_TREE = FluidTwin(_double_binary_tree, _dbt_applies)
