"""NCCL's tuner: each algorithm's predicted time per protocol, and the choice of the least.

**The tuner.** Each algorithm picks its protocol per call the way NCCL's tuner does: the one
whose predicted time is least (:func:`tune`). Predictions are closed forms over the same
parameters the simulation uses -- per hop: protocol latency + route latency + bytes on the
wire over the route's bandwidth, shared among the channels' concurrent flows on the
network, in turn on the analytic one and at once on the fair-share one -- so the tuner's choice is the simulation's fastest protocol, up to the
contention the closed forms approximate. The ``nccl`` rule set of :mod:`~mpisim.collectives.select`
takes the least predicted time over (algorithm, protocol).

Across nodes every step of every NCCL channel is posted by the CPU proxy thread of the GPU it
leaves and completed by that of the GPU it enters, one post after another (src/proxy.cc,
src/transport/net.cc; :func:`~mpisim.collectives.nccl.protocols.ring_protocol`), so a ring
goes no faster than its busiest proxy (:func:`proxy_period`): the World queues the posts of
every message, this module and the ring's twin bound the call by them.

Three rules of NCCL's tuner decide which protocols exist at all and what they cost across
nodes, and both the tuner and the messages follow them: LL128 only where GPUs are joined by
NVLink (:func:`ll128_enabled`), and only those the fabrics allow (``allowed_protocols``, NCCL_PROTO:
:func:`enabled_protocols`); a ring spanning several nodes pays the network post overhead
on every step (:func:`ring_protocol`); and LL across nodes goes no faster than NCCL's cap on
its bus bandwidth (``llMaxBws``: 39 GB/s on 2 nodes, 20.4 from 3 on), the pace of the CPU proxy
thread that turns LL's buffers round (:func:`ll_pace`). That pace is not bytes on a link: the
NICs still carry LL's own two bytes per byte of data, and each GPU that sends across nodes
does so through a private *pace link* (:meth:`~mpisim.network.topology.Topology.paced_route`)
that caps its LL sends, rings and trees alike. What NCCL's tuner has and this model does not:
a tree's LL bandwidth divided by 3.8 (an empirical factor, ``busBw * 1.0 / 3.8``); the Simple
ring's "plateau" factor (tuning.cc ``ncclTopoGetAlgoTime``: an allreduce's latency x 1.4 across
nodes, x 1.9 before Ampere), an empirical correction of NCCL's own estimate, with nothing in the
hardware for a simulation to charge; Simple's flush latency (``interLat += latencyInter``),
the network device's declared latency, which NCCL's InfiniBand/RoCE transport sets to 0; and
the LL128 cap per channel (``perChMaxRingLL128Bw``, 36.7 GB/s on Hopper), which is per NCCL
channel, of which NCCL runs more than mpisim's one per NIC, so that across nodes it exceeds
what the NICs carry and does not bind.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mpisim.collectives.calls import world_table
from mpisim.collectives.nccl.protocols import (
    PROTOCOLS,
    Protocol,
    enabled_protocols,
    nvls_wire,
    protocols,
    ring_protocol,
    tree_protocol,
)
from mpisim.collectives.nccl.switchalu import alu_time
from mpisim.collectives.nccl.topology import (
    _LAYOUTS,
    channel_count,
    in_network_reduction,
    nvls_groups,
    ring_orders,
    tree_links,
)
from mpisim.collectives.nccl.treechannel import tree_cut
from mpisim.collectives.trees import DBT_SEGMENT, NCCL_STEPS
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.wire import Wire

#: Algorithms the ``nccl`` rule set chooses between, in order of preference on a tie.
ALGORITHMS = ("nccl_ring", "nccl_tree", "nvls", "nvls_tree")
#: The in-switch algorithms: one protocol (NVLS, :func:`nvls_wire`).
NVLS_ALGORITHMS = ("nvls", "nvls_tree")
#: Every NCCL-style algorithm name: the allreduce family above, and NCCL's grouped
#: point-to-point alltoall (:mod:`~mpisim.collectives.nccl.p2p`).
GPU_ALGORITHMS = (*ALGORITHMS, "nccl_p2p")

# ---------------------------------------------------------------------------------------- predictions


def link_loads(routes: Sequence[Any]) -> dict[int, int]:
    """How many of *routes* cross each link (by link index): transfers that share a link share it."""
    load: dict[int, int] = {}
    for route in routes:
        for i in route.ids:
            load[i] = load.get(i, 0) + 1
    return load


def _hop_costs(comm: Comm, hops: list[tuple[int, int]], wire: Wire) -> list[tuple[float, float]]:
    """Return (latency, seconds per payload byte) of each concurrent hop (comm ranks src -> dst).

    Latency is the protocol's plus the route's; the bandwidth of a hop is its slowest link's,
    divided among the hops that cross that link at the same time (on either network model: the
    analytic one serves them in turn, the fair-share one at once), and at most the protocol's
    pace between nodes (Wire.pace_inter).
    """
    topology = comm.world.topology
    group = comm.group
    routes = [topology.route(group[a], group[b]) for a, b in hops]
    load = link_loads(routes)
    by_kind: dict[str, tuple[float, float]] = {}  # the wire's bytes per payload byte and latency
    out = []
    for (a, b), route in zip(hops, routes, strict=True):
        if not route.links:
            out.append((0.0, 0.0))
            continue
        kind = topology.path_kind(group[a], group[b])
        factors = by_kind.get(kind)
        if factors is None:
            factors = by_kind[kind] = (wire.wire_bytes(1 << 20, kind) / (1 << 20), wire.latency(kind))
        # The protocol's pace, if any, is a link of the hop's own (Topology.paced_route).
        rate = min(wire.wire_rate_cap(kind), *(link.effective_bandwidth / load.get(link.index, 1) for link in route.links))
        out.append((factors[1] + route.latency, factors[0] / rate))
    return out


def proxy_period(comm: Comm, wire: Wire, hops: Sequence[tuple[int, int]]) -> float:
    """Seconds the busiest proxy thread works per step when every hop (comm ranks src -> dst) sends one message.

    A message across nodes keeps its sender's proxy busy ``wire.proxy_send`` and its receiver's
    ``wire.proxy_recv`` (:mod:`mpisim.mpi.wire`, "proxy"); a GPU's one proxy thread does its
    sends and receives in turn, so a pipeline of steps goes no faster than its busiest proxy.
    """
    topology, group = comm.world.topology, comm.group
    work: dict[int, float] = {}
    for a, b in hops:
        if wire.proxied(topology.path_kind(group[a], group[b])):
            work[a] = work.get(a, 0.0) + wire.proxy_send
            work[b] = work.get(b, 0.0) + wire.proxy_recv
    return max(work.values(), default=0.0)


def proxy_extra(wire: Wire) -> float:
    """Seconds a lone message across nodes waits for the other channels' posts at both ends (mpisim.mpi.wire)."""
    return wire.proxy_extra()


def predict_ring(comm: Comm, protocol: Protocol, nbytes: int, collective: str = "allreduce") -> float:
    """Predicted time of ``nccl_ring`` with *protocol*: base + steps x (mean hop latency + slowest hop's bytes) on one channel.

    An allreduce takes 2(p-1) steps (p-1 of them reducing), a reduce-scatter p-1 reducing
    steps, an allgather p-1 plain ones; *nbytes* follows nccl-tests (each rank's buffer for
    allreduce, the whole array for the other two). Each step moves n / (channels x p) bytes on
    every hop of every channel at once, so its transfer waits for the slowest hop (bandwidth
    shared among the flows on each link). Latencies add up along the chain of steps, which
    goes once round the ring every p steps: the mean hop latency per step, as NCCL counts
    2(nodes-1) network hops in an allreduce and NVLink hops for the rest. With several channels
    (across nodes) one channel's latency passes while another's bytes move, so the steps'
    latencies and their bytes overlap: the longer of the two counts. A reducing step also
    reduces its block (``reduce_cost``).
    """
    p = comm.size
    if p == 1:
        return 0.0
    rings = ring_orders(comm)
    block = nbytes / (len(rings) * p)
    layouts = world_table(_LAYOUTS, comm.world)
    key = ("ring hops", comm.group, protocol.wire)
    costs = layouts.get(key)
    if costs is None:  # the tuner asks once per size and protocol; the hops are the same
        hops = [(ring[i], ring[(i + 1) % p]) for ring in rings for i in range(p)]
        costs = layouts[key] = (_hop_costs(comm, hops, protocol.wire), proxy_period(comm, protocol.wire, hops))
    costs, proxy = costs
    latency = sum(lat for lat, _ in costs) / len(costs)
    steps = 2 * (p - 1) if collective == "allreduce" else p - 1
    reducing = 0 if collective == "allgather" else p - 1
    if len(rings) == 1:
        moving = steps * (latency + max(block * per_byte for _, per_byte in costs))
    else:
        # Channels queued on one link hide each other's latencies: the call takes the longer
        # of its bytes on the slowest hop and its chain of step latencies (as fluid_ring).
        flows = [steps * block * per_byte for _, per_byte in costs]
        moving = max(max(lat + flow for (lat, _), flow in zip(costs, flows, strict=True)),
                     steps * latency + sum(flows) / len(flows))
    # Across nodes the proxies post every step: no faster than the busiest one, plus the last
    # crossing (its latency and the other channels' posts).
    if proxy:
        moving = max(moving, steps * proxy + max(lat for lat, _ in costs) + proxy_extra(protocol.wire))
    return protocol.base + moving + reducing * block * comm.world.config.reduce_cost



def predict_tree(comm: Comm, protocol: Protocol, nbytes: int) -> float:
    """Predicted time of ``nccl_tree``: base + the pipelined trees of every channel (see _tree_time).

    Each of the 2 x channels trees carries its share of the vector, n / (2 x channels) bytes.
    """
    if comm.size == 1:
        return 0.0
    channels = channel_count(comm)
    cut = tree_cut(comm, protocol.name, nbytes)
    return protocol.base + _tree_time(comm, lambda: [tree for c in range(channels) for tree in tree_links(comm, c)],
                                      nbytes / (2 * channels), protocol.wire, "nccl_tree", cut.segment,
                                      cut.channel_pace)


def _tree_time(comm: Comm, build: Callable[[], list[list[tuple[int | None, list[int]]]]], share: float, wire: Wire,
               trees: str, segment: int = DBT_SEGMENT, channel_pace: float = 0.0) -> float:
    """Time of pipelined tree allreduces running at once, each over *share* bytes in segments.

    ``build()`` returns the trees' links (only the first call per layout and wire needs them).

    Each tree carries *share* bytes in k segments of s bytes (at most *segment*). The first
    segment climbs from the deepest leaf to the root (reduced at every level) and comes back
    down the same path at each hop's own speed; the trees whose edges cross one link go
    through it one after another (one connection per peer), so the last of L trees in line
    starts (L-1) segment transfers late. Every later segment follows one period behind: the
    busiest link's L segments, or a credit round (2 x latency + s x seconds per byte) over
    the NCCL_STEPS segments a connection keeps in flight, whichever is longer. With a
    thread block's *channel_pace* (:mod:`~mpisim.collectives.nccl.treechannel`) the leaf's
    first segment takes s x pace before it leaves (later ranks pass it on as it arrives), and
    no period is shorter than s x pace.
    """
    paths, costs = _tree_hop_costs(comm, build, wire, trees)
    s = min(segment, share)
    k = max(1, math.ceil(share / segment))
    gamma = comm.world.config.reduce_cost
    first = 0.0
    for hops in paths:
        path = 0.0
        for up, down in hops:
            path += up[0] + s * (up[1] + gamma) + down[0] + s * down[1]
        first = max(first, path)
    if channel_pace:
        first += s * channel_pace
    # Over the distinct (latency alone, seconds per byte alone, shared) of the hops: the same
    # maxima as over every hop.
    queued = max(s * (per_byte - alone_per_byte) for _, alone_per_byte, per_byte in costs)
    if k == 1:
        return first + queued
    period = max(max(s * per_byte, (2 * latency + s * alone_per_byte) / NCCL_STEPS)
                 for latency, alone_per_byte, per_byte in costs)
    period = max(period, s * channel_pace)
    return first + queued + (k - 1) * period


def _tree_hop_costs(comm: Comm, build: Callable[[], list[list[tuple[int | None, list[int]]]]], wire: Wire, trees: str):
    """The paths of the first segment and the hops' costs, once per layout and wire: (paths, costs).

    *paths* holds, for each leaf of each tree, its edges' costs alone ((latency, seconds per
    byte) up, then down) from the leaf to the root, each distinct sequence once: the slowest
    path is a leaf's (a rank above one has a suffix of its path, and a float sum of costs >= 0
    never drops below the same sum without its first terms). *costs* holds the distinct
    (latency alone, seconds per byte alone, seconds per byte shared) of the edges both ways
    (see _hop_costs): the maxima over them are the maxima over every hop.

    *trees* names which trees ``build()`` returns (``"nccl_tree"``, ``"nvls"``): with the
    communicator's ranks and the wire it fixes them, so every size the tuner tries reuses the
    costs (and builds no trees).
    """
    layouts = world_table(_LAYOUTS, comm.world)
    key = ("tree hops", trees, comm.group, wire)
    cached = layouts.get(key)
    if cached is None:
        classes, hop_classes, path_classes = _tree_hop_classes(comm, build, trees, wire)
        # Each class's costs, as _hop_costs_unshared and _hop_costs work them out for its hops.
        factors = {kind: (wire.wire_bytes(1 << 20, kind) / (1 << 20), wire.latency(kind)) for kind in {c[0] for c in classes}}
        alone, shared = [], []
        for kind, latency, bottleneck, rate in classes:
            per_byte, wire_latency = factors[kind]
            alone.append((wire_latency + latency, 0.0 if rate is None else per_byte / bottleneck))
            shared.append(0.0 if rate is None else per_byte / rate)
        costs = sorted({(*alone[c], shared[c]) for c in hop_classes})
        paths = sorted({tuple((alone[up], alone[down]) for up, down in path) for path in path_classes})
        cached = layouts[key] = (paths, costs)
    return cached


def _tree_hop_classes(comm: Comm, build: Callable[[], list[list[tuple[int | None, list[int]]]]], trees: str,
                      wire: Wire):
    """What the tree edges' costs depend on besides the wire's costs, once per layout and pace (see _tree_hop_costs).

    Returns (classes, hop classes, path classes): the distinct (path kind, route latency,
    route bottleneck, bandwidth shared among the hops on its busiest link; None without links)
    of the edges; the class of every edge both ways; and each leaf's path to its root as
    (up class, down class) pairs, each distinct path once.
    """
    layouts = world_table(_LAYOUTS, comm.world)
    key = ("tree hop classes", trees, comm.group, wire.pace_inter)
    cached = layouts.get(key)
    if cached is None:
        topology, group = comm.world.topology, comm.group
        links = build()
        ups = [(r, parent) for tree in links for r, (parent, _) in enumerate(tree) if parent is not None]
        hops = ups + [(parent, r) for r, parent in ups]
        routes = [topology.route(group[a], group[b]) for a, b in hops]
        load = link_loads(routes)
        # A paced wire's hops between nodes also cross their sender's pace link (World.wire_route):
        # its capacity, shared among the sender's hops across nodes, as link_loads would count them.
        pace = wire.wire_rate_cap("inter")
        across: dict[int, int] = {}
        if pace != math.inf:
            node = topology.node_of
            for a, b in hops:
                if node(group[a]) != node(group[b]):
                    across[a] = across.get(a, 0) + 1
        index: dict[tuple, int] = {}
        hop_class: dict[tuple[int, int], int] = {}  # the trees share most hops: each is worked out once
        for hop, route in zip(hops, routes, strict=True):
            if hop in hop_class:
                continue
            kind = topology.path_kind(group[hop[0]], group[hop[1]])
            rate = min(link.effective_bandwidth / load.get(link.index, 1) for link in route.links) if route.links else None
            bottleneck = route.bottleneck
            if kind == "inter" and across:
                rate, bottleneck = min(rate, pace / across[hop[0]]), min(bottleneck, pace)  # type: ignore[type-var]
            shape = (kind, route.latency, bottleneck, rate)
            hop_class[hop] = index.setdefault(shape, len(index))
        hop_classes = set(hop_class.values())
        paths = set()
        for tree in links:
            for leaf, (parent, children) in enumerate(tree):
                if parent is None or children:
                    continue
                path, r = [], leaf
                while parent is not None:
                    path.append((hop_class[(r, parent)], hop_class[(parent, r)]))
                    r, parent = parent, tree[parent][0]
                paths.add(tuple(path))
        cached = layouts[key] = (list(index), sorted(hop_classes), sorted(paths))
    return cached


def _hop_costs_unshared(comm: Comm, hops: list[tuple[int, int]], wire: Wire) -> list[tuple[float, float]]:
    world = comm.world
    out = []
    for a, b in hops:
        src, dst = comm.group[a], comm.group[b]
        route = world.topology.route(src, dst)
        kind = world.topology.path_kind(src, dst)
        per_byte = wire.wire_bytes(1 << 20, kind) / (1 << 20) / route.bottleneck if route.links else 0.0
        out.append((wire.latency(kind) + route.latency, per_byte))
    return out


def _nvls_in_node(comm: Comm, protocol: Protocol, nbytes: int) -> tuple[float, float]:
    """The in-node part of an NVLS call (base, reduce-scatter, multicast) and each rank's block: (seconds, bytes).

    The ports' work, or the switch chips' adds where the topology declares them
    (:func:`~mpisim.collectives.nccl.switchalu.alu_time`), whichever is longer.
    """
    groups = nvls_groups(comm) or [list(range(comm.size))]
    members = groups[0]
    q = len(members)
    block = nbytes / q
    costs = _hop_costs_unshared(comm, [(members[0], j) for j in members[1:]], protocol.wire)
    phase = max(lat + (q - 1) * block * per_byte for lat, per_byte in costs)
    ports = 2 * phase + (q - 1) * block * comm.world.config.reduce_cost
    return protocol.base + max(ports, switch_floor(comm, protocol, nbytes, costs, q)), block


def switch_floor(comm: Comm, protocol: Protocol, nbytes: float, costs: list[tuple[float, float]] | None = None,
                 q: int | None = None) -> float:
    """Seconds an in-node NVLS call of *nbytes* takes at least for the switch chips' adds (0 if undeclared).

    The adds stream with the ports' work; what they cannot hide is the two crossings of the
    switch (the first chunk's load-reduce, the last one's multicast): 2 x latency + t_alu.
    """
    members = (nvls_groups(comm) or [list(range(comm.size))])[0]
    q = len(members) if q is None else q
    alu = alu_time(comm, nbytes, q)
    if alu == 0.0:
        return 0.0
    if costs is not None:
        return 2 * max(lat for lat, _ in costs) + alu
    layouts = world_table(_LAYOUTS, comm.world)  # every rank of every call asks: work the crossing out once
    key = ("nvls crossing", comm.group, protocol.wire)
    latency = layouts.get(key)
    if latency is None:
        hops = _hop_costs_unshared(comm, [(members[0], j) for j in members[1:]], protocol.wire)
        latency = layouts[key] = max(lat for lat, _ in hops)
    return 2 * latency + alu


#: The in-switch algorithms register theirs (:mod:`~mpisim.collectives.nccl.nvlstree`).
_PREDICTORS = {"nccl_ring": predict_ring, "nccl_tree": predict_tree}
#: Predictors of other collectives' NCCL-style algorithms, by (collective, algorithm): the
#: modules that define them register them here (register_predictor).
_COLLECTIVE_PREDICTORS: dict[tuple[str, str], Callable[[Comm, Protocol, int], float]] = {}
#: How other collectives' algorithms cut a call (see shape), by (collective, algorithm).
_SHAPES: dict[tuple[str, str], Callable[[Comm, Protocol, int], tuple[int, int]]] = {}


def register_predictor(collective: str, algorithm: str, predict: Callable[[Comm, Protocol, int], float]) -> None:
    """Let :func:`tune` time *algorithm* of *collective* with *predict(comm, protocol, nbytes)*."""
    _COLLECTIVE_PREDICTORS[(collective, algorithm)] = predict


def register_shape(collective: str, algorithm: str, cut: Callable[[Comm, Protocol, int], tuple[int, int]]) -> None:
    """Let :func:`shape` cut *algorithm* of *collective* with *cut(comm, protocol, nbytes)* -> (channels, chunk)."""
    _SHAPES[(collective, algorithm)] = cut


@dataclass(frozen=True, slots=True)
class Choice:
    """What the library picked for one call: algorithm, protocol, predicted time (s), channels and chunk.

    Resolved once per call shape at dispatch (:mod:`mpisim.collectives.dispatch`), handed to
    the algorithm and written on the call's collective record. ``chunk_bytes`` is the payload
    of one message: a ring step's block per channel, a tree's segment, a broadcast's step, or
    NVLS's per-rank block inside a node -- with the protocol and the channels, the numbers a
    user needs to see why a time is what it is.
    """

    algorithm: str
    protocol: Protocol
    predicted: float
    channels: int
    chunk_bytes: int


def tune(comm: Comm, algorithm: str, nbytes: int, collective: str = "allreduce") -> Choice:
    """Return *algorithm*'s choice for a *collective* call of *nbytes* on *comm*: the protocol of least predicted time.

    *nbytes* follows nccl-tests (the whole array for allgather and reduce_scatter). Ties go to
    the protocol listed first in PROTOCOLS. ``nvls`` has one protocol (see :func:`nvls_wire`).
    """
    if algorithm in NVLS_ALGORITHMS:
        options = [nvls_wire(comm)]
    else:
        spec = comm.world.topology.spec
        table = protocols(spec)
        options = [table[name] for name in enabled_protocols(spec, PROTOCOLS)]
        if algorithm == "nccl_ring":
            options = [ring_protocol(comm, proto, collective, nbytes) for proto in options]
        elif algorithm == "nccl_tree":
            options = [tree_protocol(comm, proto, nbytes) for proto in options]
    forced = comm.world.memo.table(FORCED_PROTOCOLS).get((comm.group, algorithm, nbytes, collective))
    if forced is not None:  # auto timed the protocols and found this one fastest (select.timed)
        options = [proto for proto in options if proto.name == forced] or options
    predictor = _COLLECTIVE_PREDICTORS.get((collective, algorithm))
    if predictor is not None:
        timed = [(predictor(comm, proto, nbytes), i, proto) for i, proto in enumerate(options)]
    elif algorithm == "nccl_ring":
        timed = [(predict_ring(comm, proto, nbytes, collective), i, proto) for i, proto in enumerate(options)]
    else:
        timed = [(_PREDICTORS[algorithm](comm, proto, nbytes), i, proto) for i, proto in enumerate(options)]
    predicted, _, protocol = min(timed, key=lambda t: (t[0], t[1]))
    channels, chunk = shape(comm, algorithm, protocol, nbytes, collective)
    return Choice(algorithm, protocol, predicted, channels, chunk)


#: The world's memo table of protocols fixed for a call shape, (group, algorithm, nbytes,
#: collective) -> protocol name: ``auto``, where it times its candidates, times each protocol
#: too and fixes the fastest (:mod:`mpisim.collectives.select.timed`).
FORCED_PROTOCOLS = "nccl.forced_protocols"


def protocol_names(comm: Comm, algorithm: str) -> list[str]:
    """The protocols :func:`tune` chooses between for *algorithm* on *comm*."""
    if algorithm in NVLS_ALGORITHMS:
        return [nvls_wire(comm).name]
    return list(enabled_protocols(comm.world.topology.spec, PROTOCOLS))


def planner(algorithm: str, collective: str) -> Callable[[Comm, int], Choice]:
    """Return the registry's ``plan`` of *algorithm* of *collective*: ``plan(comm, nbytes)`` is :func:`tune`'s choice."""

    def plan(comm: Comm, nbytes: int) -> Choice:
        return tune(comm, algorithm, nbytes, collective)

    return plan


def candidates(comm: Comm, collective: str = "allreduce") -> list[str]:
    """Return the algorithms NCCL would consider for *collective* on *comm*.

    Allreduce: ring, tree and, where the NVSwitch reduces, NCCL's in-switch algorithms by its
    rule (tuning.cc): ``nvls`` inside one node (one NVLink domain), and across nodes only
    where the network's switches reduce too (``in_network_reduction``, NVLS + CollNet);
    ``nvls_tree`` (NVLSTree) across nodes, never on one node. Allgather and reduce_scatter:
    the ring.
    """
    if collective != "allreduce":
        return ["nccl_ring"]
    names = ["nccl_ring", "nccl_tree"]
    groups = nvls_groups(comm)
    if groups is not None:
        if len(groups) == 1 or in_network_reduction(comm):
            names.append("nvls")
        if len(groups) > 1:
            names.append("nvls_tree")
    return names


def best(comm: Comm, nbytes: int, collective: str = "allreduce") -> Choice:
    """Return the (algorithm, protocol) with the least predicted time, as NCCL's tuner picks them."""
    timed = [tune(comm, name, nbytes, collective) for name in candidates(comm, collective)]
    return min(timed, key=lambda c: (c.predicted, ALGORITHMS.index(c.algorithm)))


def shape(comm: Comm, algorithm: str, protocol: Protocol, nbytes: int, collective: str = "allreduce") -> tuple[int, int]:
    """Return (channels, chunk bytes) of a call of *algorithm* moving *nbytes* (nccl-tests' size) with *protocol*."""
    cut = _SHAPES.get((collective, algorithm))
    if cut is not None:
        return cut(comm, protocol, nbytes)
    p = comm.size
    if algorithm in NVLS_ALGORITHMS:
        groups = nvls_groups(comm) or [list(range(p))]
        return (len(groups[0]) if len(groups) > 1 else 1), nbytes // len(groups[0])
    if algorithm == "nccl_tree":
        channels = channel_count(comm)
        return channels, min(tree_cut(comm, protocol.name, nbytes).segment, nbytes // (2 * channels))
    channels = len(ring_orders(comm))
    return channels, nbytes // (channels * p)


def call_shape(choice: Choice) -> dict[str, object]:
    """Return the row fields of *choice*: protocol, channels and chunk bytes (see :class:`Choice`)."""
    return {"protocol": choice.protocol.name, "channels": choice.channels, "chunk_bytes": choice.chunk_bytes}


# ---------------------------------------------------------------------------------------- algorithms


def launch(comm: Comm, choice: Choice) -> Proc[None]:
    """Charge the call's base latency (kernel launch and set-up) as local work on this rank."""
    yield from comm.compute(choice.protocol.base, launch_label(choice))


def launch_label(choice: Choice) -> str:
    return f"{choice.algorithm} launch ({choice.protocol.name})"
