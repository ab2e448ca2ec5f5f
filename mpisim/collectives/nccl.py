"""GPU collectives as NCCL runs them: ring, tree and in-switch (NVLS) algorithms, each with a protocol.

MPI libraries move a collective's messages through eager and rendezvous point-to-point
protocols, with CPU overheads on every message. A GPU collective library (NCCL, RCCL) runs the
whole collective inside one GPU kernel per rank, and moves data with one of a few *protocols*
(:mod:`mpisim.mpi.wire`): ``LL`` (8-byte stores carrying their own flags: least latency, at
most half the bandwidth), ``LL128`` (128-byte lines, 120 bytes of data: ~94 % of the bandwidth)
and ``Simple`` (whole chunks, then a fence and a flag: most latency, all the bandwidth). Where
the NVSwitch can reduce and multicast (NVLink SHARP), ``NVLS`` lets the switch do the sums.

What a call costs, in NCCL's own model (``src/graph/tuning.cc``, ../shared COSTS.md section 3),
and in mpisim's simulation of it:

* a **base latency** per call and protocol -- the kernel launch and set-up
  (``base_latency`` in the topology; NCCL's defaults 6.6 / 14 / 8.4 us);
* a **latency per hop**, by protocol and link type -- NVLink, PCIe or network
  (``protocols.<P>.latency`` of each fabric: what the protocol adds to the path's own latency;
  by default NCCL's ``hwLat`` minus the path's latency, since ``hwLat`` is the whole hop);
* a **share of each link's bandwidth**, by protocol (``protocols.<P>.efficiency``; 0.5 for
  LL, 0.92 for LL128, 1 for Simple by default).

mpisim charges the base latency as local work on every rank before the first message (a
``launch`` span), and the other two on every message the algorithm sends, through a
communicator view ``comm.with_wire(wire)``: the algorithms here are ordinary point-to-point
programs that move real data, and time comes only from their messages, their reductions and
the launch.

**Algorithms** (allreduce; ``nccl_ring`` also for allgather and reduce_scatter):

``nccl_ring``
    The ring allreduce on *channels*: with several nodes, one ring per NIC, each leaving a
    node through a different NIC, so all NICs carry traffic at once (NCCL's channels); the
    vector is split between the channels. Ranks of a node are consecutive in every ring.
``nccl_tree``
    NCCL's tree, on the same channels: in channel c a chain through the ranks of each node
    from local rank c, and a double binary tree
    (:func:`~mpisim.collectives.allreduce.double_binary_tree`) between the nodes' heads, so
    each channel crosses the network through its own NIC. It crosses the network 2 lg(nodes)
    times in sequence where the ring does 2(nodes - 1), so it wins for small vectors on many
    nodes; pipelined in segments.
``nvls``
    In-switch reduction: every rank sends block j of its vector to local rank j of its node
    through the switch, which adds the contributions on the way (NVLS ``multimem.ld_reduce``);
    each rank then stores its reduced block once and the switch multicasts it to the node
    (``multimem.st``). Each GPU port carries n(q+1)/q bytes each way instead of the ring's
    2n(q-1)/q (q ranks per node). The messages are the direct exchange; on a switch with
    ``in_switch_reduction`` they ride the NVLS protocol, whose bandwidth share is scaled by
    2(q-1)/(q+1) so that each port is charged the in-switch byte count. Across nodes it is
    NCCL's NVLS + tree: between the two in-node phases, local rank j of every node allreduces
    its block over a double binary tree on rail j (Simple protocol), so every NIC carries
    n/q each way. Without ``in_switch_reduction`` the same direct exchange runs over all
    ranks as Simple-protocol messages, with no switch help (the ``nccl`` selector never picks
    it there, and a scenario that names it there is refused: NVLS is not what such hardware runs).

Broadcast runs NCCL's pipelined ring (:mod:`~mpisim.collectives.nccl_bcast`) and alltoall
NCCL's grouped send/recv, across nodes through the destination's rail (PXN,
:mod:`~mpisim.collectives.nccl_p2p`, which also has NCCL's point-to-point send and recv).

**The tuner.** Each algorithm picks its protocol per call the way NCCL's tuner does: the one
whose predicted time is least (:func:`tune`). Predictions are closed forms over the same
parameters the simulation uses -- per hop: protocol latency + route latency + bytes on the
wire over the route's bandwidth, shared among the channels' concurrent flows on the
network, in turn on the analytic one and at once on the fair-share one -- so the tuner's choice is the simulation's fastest protocol, up to the
contention the closed forms approximate. The ``nccl`` rule set of :mod:`~mpisim.collectives.select`
takes the least predicted time over (algorithm, protocol).

Three rules of NCCL's tuner decide which protocols exist at all and what they cost across
nodes, and both the tuner and the messages follow them: LL128 only where GPUs are joined by
NVLink (:func:`ll128_enabled`); a ring spanning several nodes pays the network post overhead
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

import dataclasses
import functools
import math
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mpisim.collectives.allreduce import DBT_SEGMENT, NCCL_STEPS, double_binary_tree, tree_allreduce
from mpisim.collectives.calls import join_call, world_table
from mpisim.collectives.fluid_tree import Tree, fluid_trees
from mpisim.collectives.registry import algorithm
from mpisim.engine.events import Call
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.ops import Op
from mpisim.mpi.payload import Payload, SizePayload
from mpisim.mpi.wire import Wire

if TYPE_CHECKING:
    from mpisim.network.topology import FabricSpec, TopologySpec

US = 1e-6

#: NCCL's MAXCHANNELS: at most this many channels, whatever the NICs (an NVL72 rack has 72).
MAX_CHANNELS = 32
#: Protocols of the ring and tree algorithms, in NCCL's order (ties go to the first).
PROTOCOLS = ("LL", "LL128", "Simple")
#: Algorithms the ``nccl`` rule set chooses between, in order of preference on a tie.
ALGORITHMS = ("nccl_ring", "nccl_tree", "nvls")
#: Every NCCL-style algorithm name: the allreduce family above, and NCCL's grouped
#: point-to-point alltoall (:mod:`~mpisim.collectives.nccl_p2p`).
GPU_ALGORITHMS = (*ALGORITHMS, "nccl_p2p")

#: NCCL's base latency per call and protocol (tuning.cc ``baseLat``, Ring row; NVLS has none).
NCCL_BASE_LATENCY = {"LL": 6.6 * US, "LL128": 14.0 * US, "Simple": 8.4 * US, "NVLS": 0.0}
#: NCCL's latency per hop (tuning.cc ``hwLat``, Ring columns) by link type; NVLS by its own column.
NCCL_HOP_LATENCY = {
    "nvlink": {"LL": 0.6 * US, "LL128": 1.9 * US, "Simple": 3.4 * US, "NVLS": 25.0 * US},
    "pcie": {"LL": 1.0 * US, "LL128": 2.5 * US, "Simple": 5.7 * US, "NVLS": 0.0},
    "net": {"LL": 2.7 * US, "LL128": 4.0 * US, "Simple": 14.0 * US, "NVLS": 18.0 * US},
}
#: NCCL's bandwidth share per protocol: LL busBw x 0.5, LL128 x 0.92 ("120.0/128.0"), Simple
#: all of it; NVLS: ``nvlsEfficiency`` of Hopper (0.85).
NCCL_EFFICIENCY = {"LL": 0.5, "LL128": 0.92, "Simple": 1.0, "NVLS": 0.85}
#: Which row of NCCL_HOP_LATENCY an intra-node fabric kind uses (GPUs on shared memory go
#: through PCIe and host memory).
LINK_TYPE = {"nvswitch": "nvlink", "pcie": "pcie", "shm": "pcie"}
#: NCCL's network post overhead by host CPU (tuning.cc ``getNetOverhead``: 2 us on AMD x86
#: hosts, 1 us on Intel x86 and non-x86 ones; a topology without ``host_cpu`` takes the 1 us).
#: A ring across nodes is paced by its network steps, each posted by the CPU proxy thread, so
#: no step of it -- NVLink ones included -- goes faster than one post ("Inter-node rings still
#: have to launch nsteps * net overhead", ``intraLat = max(intraLat, netOverhead)``).
NCCL_NET_OVERHEAD = {"amd": 2.0 * US, "other": 1.0 * US}
#: Posts per step by protocol: Simple's step is a send, a receive and the GPUDirect flush of
#: what was received (tuning.cc ``if (p == NCCL_PROTO_SIMPLE) netOverhead *= 3``).
NCCL_NET_OVERHEAD_POSTS = {"LL": 1, "LL128": 1, "Simple": 3}
#: NCCL's cap on LL's bus bandwidth across nodes, in bytes/s, by host CPU and node count
#: (tuning.cc ``llMaxBws``: Intel and non-x86 hosts 39.0 GB/s on 2 nodes, 20.4 GB/s from 3 on;
#: AMD x86 hosts 22.5 and 19.0; a topology without ``host_cpu`` takes the first row). Across
#: nodes LL's buffers are turned round by the CPU proxy thread, and LL goes no faster than that,
#: however fast the NICs: a pace, not bytes on a link (Wire.pace_inter).
NCCL_LL_MAX_BUSBW = {"amd": {2: 22.5e9, 3: 19.0e9}, "other": {2: 39.0e9, 3: 20.4e9}}
#: Collectives whose rings NCCL charges the network overhead on every step (tuning.cc: all but
#: Broadcast and Reduce, which pipeline one way and take one hop's latency).
RING_COLLECTIVES = ("allreduce", "allgather", "reduce_scatter")


# ---------------------------------------------------------------------------------------- protocols


def _host(spec: TopologySpec) -> str:
    """The row of NCCL's host-keyed tables for *spec*: ``amd`` or ``other`` (Intel, Arm, not given)."""
    return "amd" if spec.host_cpu == "amd" else "other"


def net_overhead(spec: TopologySpec) -> float:
    """NCCL's network post overhead (s) on the hosts of *spec* (NCCL_NET_OVERHEAD)."""
    return NCCL_NET_OVERHEAD[_host(spec)]


def ll_max_busbw(spec: TopologySpec, nodes: int) -> float:
    """NCCL's cap on LL's bus bandwidth (bytes/s) across *nodes* > 1 nodes of *spec* (NCCL_LL_MAX_BUSBW)."""
    return NCCL_LL_MAX_BUSBW[_host(spec)][min(nodes, 3)]


@dataclass(frozen=True)
class Protocol:
    """One protocol on this cluster: its per-call base latency and its per-message wire costs."""

    name: str
    base: float
    wire: Wire


def _fabric_costs(fabric: FabricSpec | None, link_type: str, name: str) -> tuple[float, float]:
    """Return (latency added per message, bandwidth share) of protocol *name* on *fabric*.

    Unlisted protocols take NCCL's values. NCCL's ``hwLat`` is a hop's whole latency, and the
    path already carries the fabric's own latency, so the protocol adds only the rest (NVLS:
    NCCL's latency is for the whole call, which here is two messages in sequence).
    """
    given = fabric.protocol(name) if fabric is not None else None
    if given is not None:
        return given.latency, given.efficiency
    path = fabric.latency if fabric is not None else 0.0
    hop = NCCL_HOP_LATENCY[link_type][name]
    added = max(0.0, hop / 2 - path) if name == "NVLS" else max(0.0, hop - path)
    return added, NCCL_EFFICIENCY[name]


@functools.lru_cache(maxsize=256)
def protocols(spec: TopologySpec) -> dict[str, Protocol]:
    """Return every protocol's costs on the cluster *spec*: the topology's values, else NCCL's defaults."""
    base = dict(spec.base_latency)
    intra_type = LINK_TYPE.get(spec.intra.kind, "pcie") if spec.intra is not None else "pcie"
    out = {}
    for name in (*PROTOCOLS, "NVLS"):
        lat_intra, eff_intra = _fabric_costs(spec.intra, intra_type, name)
        lat_inter, eff_inter = _fabric_costs(spec.inter, "net", name)
        out[name] = Protocol(name, base.get(name, NCCL_BASE_LATENCY[name]),
                             Wire(name, lat_intra, lat_inter, eff_intra, eff_inter))
    return out


def ll128_enabled(spec: TopologySpec) -> bool:
    """True if NCCL enables LL128 on this cluster by default: GPUs joined by NVLink.

    tuning.cc enables LL128 only where the ring's intra-node path is NVLink (``typeIntra <=
    PATH_NVB``) and the NIC hangs off the GPU's PCIe switch (``typeInter <= PATH_PXB``, or
    ``PATH_PXN`` on Hopper): "Other cases are not tested and may cause silent data
    corruption", since LL128 relies on 128-byte stores arriving whole, which NVLink
    guarantees and PCIe does not. mpisim's NICs sit by their GPUs (rail-optimized), so the
    fabric inside a node decides: an ``nvswitch`` node has LL128; a ``pcie`` or ``shm`` one
    only if its fabric lists LL128 (as ``NCCL_PROTO=LL128`` forces it).
    """
    intra = spec.intra
    if intra is None:
        return True  # one rank per node: no intra-node path to rule LL128 out
    return intra.kind == "nvswitch" or intra.protocol("LL128") is not None


def nvls_groups(comm: Comm) -> Sequence[Sequence[int]] | None:
    """Return *comm*'s ranks by node if every node's NVSwitch can reduce in the switch (NVLS), else None.

    NVLS needs at least two ranks on each node and, across nodes, the same number on each
    (local rank j of every node joins the others' local rank j over rail j).
    """
    spec = comm.world.topology.spec
    if spec.intra is None or not spec.intra.in_switch_reduction or comm.size < 2:
        return None
    nodes = node_members(comm)
    q = len(nodes[0])
    if q < 2 or not _evenly_spread(comm):
        return None
    return nodes


def _evenly_spread(comm: Comm) -> bool:
    """True if every node holds the same number of *comm*'s ranks."""
    layouts = world_table(_LAYOUTS, comm.world)
    key = ("even", comm.context)
    even = layouts.get(key)
    if even is None:
        nodes = node_members(comm)
        even = layouts[key] = all(len(members) == len(nodes[0]) for members in nodes)
    return even


def in_switch_reduction(comm: Comm) -> bool:
    """True if *comm*'s nodes reduce in the switch, so that ``nvls`` runs as NCCL's NVLS (see nvls_groups)."""
    return nvls_groups(comm) is not None


def nvls_wire(comm: Comm) -> Protocol:
    """Return the protocol of the ``nvls`` algorithm's messages inside a node (see the module docstring)."""
    table = protocols(comm.world.topology.spec)
    groups = nvls_groups(comm)
    if groups is None:
        return table["Simple"]
    nvls, q = table["NVLS"], len(groups[0])
    # The direct exchange puts 2n(q-1)/q bytes through each port; the switch makes it n(q+1)/q.
    gain = 2 * (q - 1) / (q + 1)
    wire = Wire("NVLS", nvls.wire.latency_intra, nvls.wire.latency_inter,
                nvls.wire.efficiency_intra * gain, table["Simple"].wire.efficiency_inter)
    return Protocol("NVLS", nvls.base, wire)


# ---------------------------------------------------------------------------------------- layout


#: Each world's communicator layouts: every rank of every call asks. Keyed by the handle's
#: context (one communicator's, cheaper to look up than its group of world ranks) or, for
#: costs that every communicator of the same ranks shares (hop costs), by its group.
_LAYOUTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def node_order(comm: Comm) -> list[int]:
    """Return *comm*'s ranks sorted by node, then by rank: the order NCCL's rings and trees follow."""
    return sorted(range(comm.size), key=lambda r: (comm.node_of(r), r))


def node_members(comm: Comm) -> tuple[tuple[int, ...], ...]:
    """Return *comm*'s ranks grouped by node, nodes in order, ranks in order within each."""
    layouts = world_table(_LAYOUTS, comm.world)
    key = ("members", comm.context)
    members = layouts.get(key)
    if members is None:
        nodes: dict[int, list[int]] = {}
        for r in node_order(comm):
            nodes.setdefault(comm.node_of(r), []).append(r)
        members = layouts[key] = tuple(tuple(ranks) for ranks in nodes.values())
    return members


def channel_count(comm: Comm) -> int:
    """Return how many channels NCCL-style rings and trees use on *comm*: one per NIC across nodes.

    One node, or nodes holding unequal numbers of this communicator's ranks: one channel.
    Otherwise one channel per NIC of a node, at most one per rank of a node and at most
    :data:`MAX_CHANNELS`, so that every NIC carries one channel's cross-node traffic (rail-optimized: the channel of NIC c leaves
    every node from local rank c).
    """
    layouts = world_table(_LAYOUTS, comm.world)
    key = ("channels", comm.context)
    channels = layouts.get(key)
    if channels is None:
        nodes = node_members(comm)
        q = len(nodes[0])
        inter = comm.world.topology.spec.inter
        if len(nodes) == 1 or inter is None or not _evenly_spread(comm):
            channels = 1
        else:
            channels = max(1, min(inter.nics, q, MAX_CHANNELS))
        layouts[key] = channels
    return channels


def ring_orders(comm: Comm) -> list[list[int]]:
    """Return one ring (a cyclic order of *comm*'s ranks) per channel.

    One channel: a single ring in :func:`node_order`. Otherwise, in channel c every node's
    ranks are visited starting after local rank c, so the rank that leaves a node -- local
    rank c, through NIC c -- differs between channels and all NICs carry traffic at once.
    Worked out once per communicator (every rank of every call asks): callers must not change
    the lists.
    """
    layouts = world_table(_LAYOUTS, comm.world)
    key = ("rings", comm.context)
    rings = layouts.get(key)
    if rings is not None:
        return rings
    channels = channel_count(comm)
    nodes = node_members(comm)
    if channels == 1:
        rings = [[r for members in nodes for r in members]]
    else:
        q = len(nodes[0])
        rings = []
        for c in range(channels):
            start = (c + 1) % q
            rings.append([members[(start + j) % q] for members in nodes for j in range(q)])
    layouts[key] = rings
    return rings


def ring_protocol(comm: Comm, protocol: Protocol, collective: str = "allreduce") -> Protocol:
    """Return *protocol* as a ring of *comm* runs it: NCCL's costs of a ring across nodes added.

    On one node the protocol is unchanged. Across nodes NCCL's model (tuning.cc
    ``ncclTopoTuneModel``, ring branch) has two terms more, and so do this ring's messages (the
    wire), so the tuner and the simulation agree:

    * for the rings of RING_COLLECTIVES, every step costs at least the network post overhead
      (:func:`net_overhead`, three posts for Simple), so an intra-node hop's latency, the path's
      own included, is raised to it;
    * for every ring, broadcast's too, LL's bus bandwidth is at most NCCL_LL_MAX_BUSBW
      (``busBw = min(llMaxBw, busBw * .5)``): the proxy's pace. The ring rank that leaves a
      node in a channel is paced at the cap / channels (:func:`ll_pace`, ``Wire.pace_inter``),
      and the ring, which moves at its slowest hop, reaches exactly NCCL's capped bus
      bandwidth. The NICs still carry LL's own bytes only (two per byte of data).
    """
    spec = comm.world.topology.spec
    m = len(node_members(comm))
    if m == 1 or spec.inter is None:
        return protocol
    wire = protocol.wire
    path = spec.intra.latency if spec.intra is not None else 0.0
    latency_intra = wire.latency_intra
    if collective in RING_COLLECTIVES:
        latency_intra = max(latency_intra, net_overhead(spec) * NCCL_NET_OVERHEAD_POSTS[protocol.name] - path)
    pace = min(wire.pace_inter, ll_pace(comm)) if protocol.name == "LL" else wire.pace_inter
    if latency_intra == wire.latency_intra and pace == wire.pace_inter:
        return protocol
    return Protocol(protocol.name, protocol.base, dataclasses.replace(wire, latency_intra=latency_intra, pace_inter=pace))


def ll_pace(comm: Comm) -> float:
    """Bytes of payload per second each of *comm*'s GPUs may send with LL across nodes (``inf`` on one node).

    NCCL caps LL's bus bandwidth across nodes (tuning.cc ``llMaxBws``, for rings and trees
    alike; by the hosts' CPU, :func:`ll_max_busbw`). A collective's bus bandwidth is the sum of
    its channels', and in channel c only local rank c of each node sends across (through NIC
    c), so each of those ranks is paced at the cap / channels: a ring, which moves at its
    slowest hop, then reaches exactly the capped bus bandwidth, and a tree's heads, sending to
    parents and children at once, share their pace among those edges.
    """
    m = len(node_members(comm))
    spec = comm.world.topology.spec
    if m == 1 or spec.inter is None:
        return math.inf
    return ll_max_busbw(spec, m) / channel_count(comm)


#: A call on LL across nodes whose bus bandwidth is at least this share of NCCL's cap runs at the pace.
PACED = 0.8


def ll_pace_note(comm: Comm, label: str, protocol: str, busbw: float) -> str | None:
    """Say that the call *label* ran at LL's pace across nodes, if it did (bus bandwidth *busbw*, bytes/s).

    Its NICs are then far below their rate, so link figures alone would blame latency or
    waiting; the note names the cap instead (a run's ``notes``).
    """
    nodes = len(node_members(comm))
    spec = comm.world.topology.spec
    if protocol != "LL" or nodes == 1 or spec.inter is None:
        return None
    cap = ll_max_busbw(spec, nodes)
    if busbw < PACED * cap:
        return None
    return (f"{label} runs at LL's pace across nodes: {busbw / 1e9:.4g} GB/s of bus bandwidth, {busbw / cap:.0%} of "
            f"the {cap / 1e9:.4g} GB/s NCCL allows LL across {nodes} nodes (llMaxBws: the proxy thread turns LL's "
            "buffers round no faster), its NICs far below their rate; LL128 and Simple have no such cap")


def tree_protocol(comm: Comm, protocol: Protocol) -> Protocol:
    """Return *protocol* as ``nccl_tree`` runs it on *comm*: LL across nodes paced as NCCL caps it (:func:`ll_pace`).

    NCCL's tuner also divides a tree's LL bandwidth by 3.8 (``busBw * 1.0 / 3.8``), an
    empirical factor with no mechanism named for a simulation to charge; it is left out.
    """
    if protocol.name != "LL":
        return protocol
    pace = min(protocol.wire.pace_inter, ll_pace(comm))
    if pace == protocol.wire.pace_inter:
        return protocol
    return Protocol(protocol.name, protocol.base, dataclasses.replace(protocol.wire, pace_inter=pace))


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
        costs = layouts[key] = _hop_costs(comm, hops, protocol.wire)
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
    return protocol.base + moving + reducing * block * comm.world.config.reduce_cost


def tree_links(comm: Comm, channel: int = 0) -> list[list[tuple[int | None, list[int]]]]:
    """Return ``links[t][r] = (parent, children)`` of comm rank r in channel *channel*'s tree t (t = 0, 1).

    NCCL's trees (``src/graph/trees.cc``, ``connect.cc``): inside a node the ranks form a chain
    (each rank's parent is the previous one; the first is the node's head); the heads of the
    nodes form the double binary tree of :func:`double_binary_tree`, node by node. A head's
    children are the next rank of its chain and the heads of its child nodes. In channel c
    every chain starts at local rank c, so the channel's cross-node traffic leaves and enters
    every node through NIC c, and the channels together use every rail.
    """
    chains = [members[channel:] + members[:channel] for members in node_members(comm)]
    m = len(chains)
    links: list[list[tuple[int | None, list[int]]]] = [[(None, [])] * comm.size for _ in range(2)]
    for i, chain in enumerate(chains):
        node_trees = double_binary_tree(m, i)
        for t in (0, 1):
            node_parent, node_children = node_trees[t]
            for j, r in enumerate(chain):
                below = [chain[j + 1]] if j + 1 < len(chain) else []
                if j > 0:
                    links[t][r] = (chain[j - 1], below)
                else:
                    parent = None if node_parent is None else chains[node_parent][0]
                    links[t][r] = (parent, below + [chains[c][0] for c in node_children])
    return links


def predict_tree(comm: Comm, protocol: Protocol, nbytes: int) -> float:
    """Predicted time of ``nccl_tree``: base + the pipelined trees of every channel (see _tree_time).

    Each of the 2 x channels trees carries its share of the vector, n / (2 x channels) bytes.
    """
    if comm.size == 1:
        return 0.0
    channels = channel_count(comm)
    return protocol.base + _tree_time(comm, lambda: [tree for c in range(channels) for tree in tree_links(comm, c)],
                                      nbytes / (2 * channels), protocol.wire, "nccl_tree")


def _tree_time(comm: Comm, build: Callable[[], list[list[tuple[int | None, list[int]]]]], share: float, wire: Wire,
               trees: str) -> float:
    """Time of pipelined tree allreduces running at once, each over *share* bytes in segments.

    ``build()`` returns the trees' links (only the first call per layout and wire needs them).

    Each tree carries *share* bytes in k segments of s bytes (at most DBT_SEGMENT). The first
    segment climbs from the deepest leaf to the root (reduced at every level) and comes back
    down the same path at each hop's own speed; the trees whose edges cross one link go
    through it one after another (one connection per peer), so the last of L trees in line
    starts (L-1) segment transfers late. Every later segment follows one period behind: the
    busiest link's L segments, or a credit round (2 x latency + s x seconds per byte) over
    the NCCL_STEPS segments a connection keeps in flight, whichever is longer.
    """
    paths, costs = _tree_hop_costs(comm, build, wire, trees)
    s = min(DBT_SEGMENT, share)
    k = max(1, math.ceil(share / DBT_SEGMENT))
    gamma = comm.world.config.reduce_cost
    first = 0.0
    for hops in paths:
        path = 0.0
        for up, down in hops:
            path += up[0] + s * (up[1] + gamma) + down[0] + s * down[1]
        first = max(first, path)
    # Over the distinct (latency alone, seconds per byte alone, shared) of the hops: the same
    # maxima as over every hop.
    queued = max(s * (per_byte - alone_per_byte) for _, alone_per_byte, per_byte in costs)
    if k == 1:
        return first + queued
    period = max(max(s * per_byte, (2 * latency + s * alone_per_byte) / NCCL_STEPS)
                 for latency, alone_per_byte, per_byte in costs)
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


def predict_nvls(comm: Comm, protocol: Protocol, nbytes: int) -> float:
    """Predicted time of ``nvls``: the in-node exchanges, and between nodes a pipelined tree per rail.

    In a node of q ranks: two exchanges of q-1 blocks of n/q bytes (a rank's port carries its
    q-1 blocks: at once on the ``fairshare`` network, in turn on the analytic one) and q-1
    reductions. Across m nodes, each rank's reduced block of n/q bytes
    is allreduced with its counterparts on the other nodes over a double binary tree (see
    :func:`predict_tree`, whose closed form it shares).
    """
    p = comm.size
    if p == 1:
        return 0.0
    groups = nvls_groups(comm) or [list(range(p))]
    members = groups[0]
    q = len(members)
    block = nbytes / q
    costs = _hop_costs_unshared(comm, [(members[0], j) for j in members[1:]], protocol.wire)
    phase = max(lat + (q - 1) * block * per_byte for lat, per_byte in costs)
    intra = protocol.base + 2 * phase + (q - 1) * block * comm.world.config.reduce_cost
    if len(groups) == 1:
        return intra
    simple = protocols(comm.world.topology.spec)["Simple"]
    return intra + _tree_time(comm, lambda: [tree for j in range(q) for tree in _rail_trees(groups, j, comm.size)],
                              block / 2, simple.wire, "nvls")


def _rail_trees(groups: Sequence[Sequence[int]], j: int, size: int) -> list[list[tuple[int | None, list[int]]]]:
    """Return the double binary trees joining local rank *j* of every node, as ``links[t][r]`` (see tree_links)."""
    rail = [members[j] for members in groups]
    links: list[list[tuple[int | None, list[int]]]] = [[(None, [])] * size for _ in range(2)]
    for i, r in enumerate(rail):
        for t, (parent, children) in enumerate(double_binary_tree(len(rail), i)):
            links[t][r] = (None if parent is None else rail[parent], [rail[c] for c in children])
    return links


_PREDICTORS = {"nccl_ring": predict_ring, "nccl_tree": predict_tree, "nvls": predict_nvls}
#: Predictors of other collectives' NCCL-style algorithms, by (collective, algorithm): the
#: modules that define them register them here (register_predictor).
_COLLECTIVE_PREDICTORS: dict[tuple[str, str], Callable[[Comm, Protocol, int], float]] = {}
#: How other collectives' algorithms report their shape (see call_shape), by (collective, algorithm).
_SHAPES: dict[tuple[str, str], Callable[[Comm, int], dict[str, object]]] = {}


def register_predictor(collective: str, algorithm: str, predict: Callable[[Comm, Protocol, int], float]) -> None:
    """Let :func:`tune` time *algorithm* of *collective* with *predict(comm, protocol, nbytes)*."""
    _COLLECTIVE_PREDICTORS[(collective, algorithm)] = predict


def register_shape(collective: str, algorithm: str, shape: Callable[[Comm, int], dict[str, object]]) -> None:
    """Let :func:`call_shape` describe *algorithm* of *collective* with *shape(comm, nbytes)*."""
    _SHAPES[(collective, algorithm)] = shape


@dataclass(frozen=True)
class Choice:
    """What the tuner picked for one call: algorithm, protocol, and the predicted time (s)."""

    algorithm: str
    protocol: Protocol
    predicted: float


#: Tuner decisions per world, keyed by (communicator context, collective, algorithm, bytes), and
#: the best algorithm's by ("best", context, collective, bytes): every rank of a call asks, and
#: they must all get the same answer without recomputing it p times.
_CHOICES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def tune(comm: Comm, algorithm: str, nbytes: int, collective: str = "allreduce") -> Choice:
    """Return *algorithm*'s protocol for a *collective* call of *nbytes* on *comm*: the least predicted time.

    *nbytes* follows nccl-tests (the whole array for allgather and reduce_scatter). Ties go to
    the protocol listed first in PROTOCOLS. ``nvls`` has one protocol (see :func:`nvls_wire`).
    """
    cache = world_table(_CHOICES, comm.world)
    key = (comm.context, collective, algorithm, nbytes)
    choice = cache.get(key)
    if choice is None:
        if algorithm == "nvls":
            options = [nvls_wire(comm)]
        else:
            spec = comm.world.topology.spec
            table = protocols(spec)
            options = [table[name] for name in PROTOCOLS if name != "LL128" or ll128_enabled(spec)]
            if algorithm == "nccl_ring":
                options = [ring_protocol(comm, proto, collective) for proto in options]
            elif algorithm == "nccl_tree":
                options = [tree_protocol(comm, proto) for proto in options]
        predictor = _COLLECTIVE_PREDICTORS.get((collective, algorithm))
        if predictor is not None:
            timed = [(predictor(comm, proto, nbytes), i, proto) for i, proto in enumerate(options)]
        elif algorithm == "nccl_ring":
            timed = [(predict_ring(comm, proto, nbytes, collective), i, proto) for i, proto in enumerate(options)]
        else:
            timed = [(_PREDICTORS[algorithm](comm, proto, nbytes), i, proto) for i, proto in enumerate(options)]
        best = min(timed, key=lambda t: (t[0], t[1]))
        choice = cache[key] = Choice(algorithm, best[2], best[0])
    return choice


def candidates(comm: Comm, collective: str = "allreduce") -> list[str]:
    """Return the algorithms NCCL would consider for *collective* on *comm*.

    Allreduce: ring, tree and, where the switch reduces, nvls; allgather and reduce_scatter:
    the ring.
    """
    if collective != "allreduce":
        return ["nccl_ring"]
    return [name for name in ALGORITHMS if name != "nvls" or in_switch_reduction(comm)]


def best(comm: Comm, nbytes: int, collective: str = "allreduce") -> Choice:
    """Return the (algorithm, protocol) with the least predicted time, as NCCL's tuner picks them."""
    cache = world_table(_CHOICES, comm.world)
    key = ("best", comm.context, collective, nbytes)  # every rank of a call asks, as for tune
    choice = cache.get(key)
    if choice is None:
        timed = [tune(comm, name, nbytes, collective) for name in candidates(comm, collective)]
        choice = cache[key] = min(timed, key=lambda c: (c.predicted, ALGORITHMS.index(c.algorithm)))
    return choice


def call_shape(comm: Comm, algorithm: str, nbytes: int, collective: str = "allreduce") -> dict[str, object]:
    """Return how a call of *algorithm* moves *nbytes* (nccl-tests' size) on *comm*: protocol, channels, chunk.

    ``chunk_bytes`` is the payload of one message: a ring step's block per channel, a tree's
    segment, or NVLS's per-rank block inside a node. These are the numbers a user needs to see
    why a time is what it is (a protocol switch, a channel count, a pipeline's segment).
    """
    shape = _SHAPES.get((collective, algorithm))
    if shape is not None:
        return shape(comm, nbytes)
    choice = tune(comm, algorithm, nbytes, collective)
    p = comm.size
    if algorithm == "nvls":
        groups = nvls_groups(comm) or [list(range(p))]
        channels, chunk = len(groups[0]) if len(groups) > 1 else 1, nbytes // len(groups[0])
    elif algorithm == "nccl_tree":
        channels = channel_count(comm)
        chunk = min(DBT_SEGMENT, nbytes // (2 * channels))
    else:
        channels = len(ring_orders(comm))
        chunk = nbytes // (channels * p)
    return {"protocol": choice.protocol.name, "channels": channels, "chunk_bytes": chunk}


# ---------------------------------------------------------------------------------------- collective fidelity


class _FluidCall:
    """One ``nccl_ring`` call run as pipelined flows: the ranks that have arrived, and their wake-ups."""

    __slots__ = ("arrived", "events", "pending", "t_flow", "t_start")

    def __init__(self) -> None:
        self.arrived = 0
        self.events: list = []
        self.pending = 0
        self.t_start = 0.0
        self.t_flow: list[float] = []


#: Calls in progress per world, keyed by (communicator context, call number).
_FLUID: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def fluid_ring(comm: Comm, wire: Wire, rings: list[list[int]], block: float, steps: int, reducing: int) -> Proc[None]:
    """Time a ring collective as one pipelined flow per hop (``fidelity: collective``).

    NCCL moves a ring's data as a pipeline of chunks in which every hop is busy at once, so
    instead of 2(p-1) whole-block messages per hop this starts, when the last rank has
    joined, one flow per hop of every channel carrying all that hop's bytes (*steps* blocks
    of *block* bytes, as the protocol puts them on the wire). The flows share the links with
    each other and with everything else in flight, on either network model. The call then
    ends after the longer of

    * the bandwidth bound: the slowest hop's flow, plus one step's protocol latency;
    * the latency bound: *steps* times the mean hop latency (protocol + route), plus the mean
      hop's flow time -- NCCL's own model (tuning.cc: a latency per step, and the bytes);

    plus *reducing* blocks' reductions. These are the message path's two regimes: with
    every block in flight at once the bytes hide the latencies, with small blocks the
    latencies add up step by step. tests/validation/test_gpu_fidelity.py checks the two paths
    within 1 % on the shipped GPU measurements (one node, and C7 across three) and from
    256 MiB across nodes. At mid sizes across nodes the message path is faster (16 MiB on 2 x
    dgx-h100: 111 us against 161 us), because channels queued on one link hide each other's
    latencies there while this charges NCCL's per-step latency; no published multi-node row
    at those sizes says which is nearer. No message is matched or recorded; the links' byte
    counters are exact.
    """
    call, event, last = join_call(comm, _FLUID, _FluidCall)
    if last:
        _start_fluid(comm, call, wire, rings, block, steps, reducing)
    yield event


def _start_fluid(comm: Comm, call: _FluidCall, wire: Wire, rings: list[list[int]], block: float, steps: int,
                 reducing: int) -> None:
    world, env = comm.world, comm.env
    topology = world.topology
    hops = [(comm.group[ring[i]], comm.group[ring[(i + 1) % len(ring)]]) for ring in rings for i in range(len(ring))]
    kinds = [topology.path_kind(a, b) for a, b in hops]
    protocol_latency = [wire.latency(kind) for kind in kinds]
    route_latency = [topology.route(a, b).latency for a, b in hops]
    call.t_start = env.now
    call.t_flow = [0.0] * len(hops)
    call.pending = len(hops)

    def finished(i: int) -> None:
        call.t_flow[i] = env.now - call.t_start
        call.pending -= 1
        if call.pending == 0:
            n = len(hops)
            bandwidth_bound = max(t + lat for t, lat in zip(call.t_flow, protocol_latency, strict=True))
            latency_bound = (steps * sum(p + r for p, r in zip(protocol_latency, route_latency, strict=True)) / n
                             + sum(t - r for t, r in zip(call.t_flow, route_latency, strict=True)) / n)
            end = call.t_start + max(bandwidth_bound, latency_bound) + reducing * block * world.config.reduce_cost
            for event in call.events:
                Call(env, lambda ev: ev.succeed(), event, max(0.0, end - env.now))

    for i, ((a, b), kind) in enumerate(zip(hops, kinds, strict=True)):
        nbytes = steps * wire.wire_bytes(max(1, math.ceil(block)), kind)
        if world._post(a, b, nbytes, finished, i, None, route=world.wire_route(a, b, wire, kind)):
            finished(i)


def _fluid(comm: Comm, buf: Payload) -> bool:
    """True if this call runs at collective fidelity: the world asks for it and the data is size-only.

    Real data always takes the message path, so results stay bit-identical to it.
    """
    return comm.world.fidelity == "collective" and isinstance(buf, SizePayload)


# ---------------------------------------------------------------------------------------- algorithms


def launch(comm: Comm, choice: Choice) -> Proc[None]:
    """Charge the call's base latency (kernel launch and set-up) as local work on this rank."""
    yield from comm.compute(choice.protocol.base, _launch_label(choice))


def _launch_label(choice: Choice) -> str:
    return f"{choice.algorithm} launch ({choice.protocol.name})"


def ring_allreduce_on(comm: Comm, buf: Payload, op: Op, ring: list[int], tag: int) -> Proc[Payload]:
    """Ring allreduce of *buf* around *ring* (a cyclic order of comm ranks), its messages tagged *tag*.

    The ring's position i plays rank i of the textbook ring: reduce-scatter, then allgather.
    """
    p = len(ring)
    i = ring.index(comm.rank)
    right, left = ring[(i + 1) % p], ring[(i - 1) % p]
    blocks = buf.split(p)
    # Reduce-scatter. After step k, blocks[(i - k - 1) % p] holds k + 2 contributions.
    for k in range(p - 1):
        send_i, recv_i = (i - k) % p, (i - k - 1) % p
        incoming = yield from comm.sendrecv(blocks[send_i], dest=right, sendtag=tag, source=left, recvtag=tag)
        blocks[recv_i] = yield from comm.reduce_local(op, incoming, blocks[recv_i])
    # Allgather. Position i starts out owning the finished block (i + 1) % p.
    for k in range(p - 1):
        send_i, recv_i = (i + 1 - k) % p, (i - k) % p
        blocks[recv_i] = yield from comm.sendrecv(blocks[send_i], dest=right, sendtag=tag, source=left, recvtag=tag)
    return type(buf).concat(blocks)


@algorithm("allreduce", "nccl_ring", requires={"commutative"},
           reference="NCCL src/device/all_reduce.h (runRing), src/graph/tuning.cc; Patarasuk & Yuan 2009")
def nccl_ring_allreduce(comm: Comm, buf: Payload, op: Op) -> Proc[Payload]:
    """NCCL ring allreduce: one ring per channel, with the protocol the tuner picks for this size.

    The vector is split between the channels (one per NIC when the ranks span several nodes,
    see ring_orders); each channel runs the ring allreduce -- p-1 reduce-scatter steps and
    p-1 allgather steps -- around its own ring, all channels at once. Every message rides the
    chosen protocol (LL, LL128 or Simple), which sets its latency and its share of each link's
    bandwidth; the call starts with the protocol's base latency.

    Cost (one channel, one kind of hop): base + 2(p-1)(h + α + (n/p)β/e) + ((p-1)/p)nγ, with h
    and e the protocol's latency and bandwidth share (see predict_ring for channels).
    """
    if comm.size == 1:
        return buf
    choice = tune(comm, "nccl_ring", buf.nbytes)
    yield from launch(comm, choice)
    # The channels' blocks to one neighbour share its link in first-come order (see World,
    # "Connections"): whole-block steps would otherwise fall into phase and expose latencies
    # that NCCL's chunk pipeline hides.
    wired = comm.with_wire(choice.protocol.wire, shared=True)
    rings = ring_orders(comm)
    if _fluid(comm, buf):
        p = comm.size
        yield from fluid_ring(comm, choice.protocol.wire, rings, buf.nbytes / (len(rings) * p), 2 * (p - 1), p - 1)
        return buf
    if len(rings) == 1:
        return (yield from ring_allreduce_on(wired, buf, op, rings[0], 0))
    parts = buf.split(len(rings))
    procs = [comm.env.process(ring_allreduce_on(wired, parts[c], op, ring, c)) for c, ring in enumerate(rings)]
    yield comm.env.all_of(procs)
    return type(buf).concat([proc.value for proc in procs])


@algorithm("allreduce", "nccl_tree", requires={"commutative"},
           reference="NCCL 2.4 double binary trees (src/graph/trees.cc), src/graph/tuning.cc; Sanders, Speck & Träff 2009")
def nccl_tree_allreduce(comm: Comm, buf: Payload, op: Op) -> Proc[Payload]:
    """NCCL tree allreduce: chains inside nodes, a double binary tree between nodes, the tuner's protocol.

    The vector is split between the channels (one per NIC across nodes, see channel_count).
    In each channel, inside each node the ranks form a chain from the node's head (local rank
    c in channel c, so each channel crosses the network through its own NIC); the heads form
    NCCL's double binary tree (see tree_links). Each of the two trees reduces half of the vector up to
    its root and broadcasts it back down, in pipelined segments (as double_binary_tree
    allreduce does, but with NCCL_STEPS segments in flight per connection and one connection
    per peer), and every message rides the chosen protocol. On many nodes it crosses the
    network 2 lg(nodes) times in sequence where the ring does 2(nodes - 1).

    Cost: base + 2D(α + sβ + sγ) + (k-1) max(L sβ, (2α + sβ)/NCCL_STEPS), D = (ranks per node
    - 1) + ceil(lg nodes), k segments of s bytes per half, L trees' edges on the busiest link
    (see predict_tree). At ``fidelity: collective`` with
    size-only data the trees run as one flow per edge (:mod:`~mpisim.collectives.fluid_tree`).
    """
    p = comm.size
    if p == 1:
        return buf
    choice = tune(comm, "nccl_tree", buf.nbytes)
    channels = channel_count(comm)
    if _fluid(comm, buf):
        # The launch is charged inside the call: the rank waits once, for the call's end.
        yield from fluid_trees(comm, lambda: _channel_trees(comm, buf, channels, choice.protocol.wire),
                               ("nccl_tree", buf.count, buf.dtype.str, choice.protocol.name, channels),
                               choice.protocol.base, _launch_label(choice) if comm.world.tracer.record_spans else "")
        return buf
    yield from launch(comm, choice)
    # One connection per peer, as NCCL's tree has: a sender's segments to one peer go out one
    # after the other (in flight at once they would share the link and all land at the end).
    wired = comm.with_wire(choice.protocol.wire, shared=True)
    parts = buf.split(channels)
    streams = []
    for c in range(channels):
        trees = [tree[comm.rank] for tree in tree_links(comm, c)]
        halves = parts[c].split(2)
        streams += [comm.env.process(tree_allreduce(wired, halves[t], op, *trees[t], 2 * c + t, NCCL_STEPS))
                    for t in (0, 1)]
    yield comm.env.all_of(streams)
    return type(buf).concat([stream.value for stream in streams])


def _channel_trees(comm: Comm, buf: Payload, channels: int, wire: Wire) -> list[Tree]:
    """The trees of an ``nccl_tree`` call: two per channel, each over half of the channel's part."""
    trees = []
    for c, part in enumerate(buf.split(channels)):
        links = tree_links(comm, c)
        trees += [Tree.over(links[t], wire, half, c) for t, half in enumerate(part.split(2))]
    return trees


def _rail_trees_of(comm: Comm, buf: Payload, groups: Sequence[Sequence[int]]) -> list[Tree]:
    """The trees of an ``nvls`` call across nodes: two per rail j, each over half of block j."""
    simple = protocols(comm.world.topology.spec)["Simple"].wire
    trees = []
    for j, block in enumerate(buf.split(len(groups[0]))):
        links = _rail_trees(groups, j, comm.size)
        trees += [Tree.over(links[t], simple, half, j) for t, half in enumerate(block.split(2))]
    return trees


@algorithm("allreduce", "nvls", requires={"commutative", "in_switch_reduction"},
           reference="NCCL 2.17+ NVLS (NVLink SHARP: multimem.ld_reduce / multimem.st); NVIDIA NVSwitch gen 3")
def nvls_allreduce(comm: Comm, buf: Payload, op: Op) -> Proc[Payload]:
    """In-switch (NVLS) allreduce: blocks reduced on their way through the switch, results multicast.

    Rank r sends block j of its vector to rank j, for every j != r, and adds the p-1 blocks it
    receives into its own block r; then it sends the reduced block r to every rank. On an
    NVSwitch with in_switch_reduction these messages ride the NVLS protocol, which charges each
    GPU port the n(p+1)/p bytes the switch's reduction and multicast leave on it; elsewhere
    they are plain Simple-protocol messages (the module docstring says why). A scenario naming
    ``nvls`` on a topology without in_switch_reduction is refused before it runs (the
    ``in_switch_reduction`` requirement, :meth:`~mpisim.collectives.registry.Algorithm.why_not_on`).

    Cost: base + 2(h + α + (p-1)(n/p)β/e) + ((p-1)/p)nγ on a switch whose ports the p-1 blocks
    share (see predict_nvls). At ``fidelity: collective`` with size-only data the rail trees
    across nodes run as one flow per edge (:mod:`~mpisim.collectives.fluid_tree`); the in-node
    exchanges, 2(q-1) messages a rank, stay messages.
    """
    p = comm.size
    if p == 1:
        return buf
    choice = tune(comm, "nvls", buf.nbytes)
    yield from launch(comm, choice)
    wired = comm.with_wire(choice.protocol.wire)
    groups = nvls_groups(comm) or [list(range(p))]
    members = next(group for group in groups if comm.rank in group)
    j = members.index(comm.rank)
    blocks = buf.split(len(members))
    peers = [(i, r) for i, r in enumerate(members) if r != comm.rank]
    # Reduce-scatter through the switch: block i of every rank of the node goes to its rank i.
    sends = [wired.isend(blocks[i], dest=r, tag=0) for i, r in peers]
    incoming = yield from wired.waitall([wired.irecv(source=r, tag=0) for _, r in peers])
    mine = blocks[j]
    for part in incoming:
        mine = yield from comm.reduce_local(op, part, mine)
    yield from wired.waitall(sends)
    if len(groups) > 1 and _fluid(comm, buf):
        # At collective fidelity the rail trees run as flows (the in-node exchanges stay messages).
        yield from fluid_trees(comm, lambda: _rail_trees_of(comm, buf, groups), ("nvls", buf.count, buf.dtype.str))
    elif len(groups) > 1:
        # Between nodes: local rank j of every node allreduces block j over rail j (NVLS + tree).
        simple = comm.with_wire(protocols(comm.world.topology.spec)["Simple"].wire, shared=True)
        trees = [tree[comm.rank] for tree in _rail_trees(groups, j, p)]
        halves = mine.split(2)
        streams = [comm.env.process(tree_allreduce(simple, halves[t], op, *trees[t], t, NCCL_STEPS)) for t in (0, 1)]
        yield comm.env.all_of(streams)
        mine = type(buf).concat([stream.value for stream in streams])
    # Multicast: the reduced block j reaches every rank of the node.
    sends = [wired.isend(mine, dest=r, tag=1) for _, r in peers]
    received = yield from wired.waitall([wired.irecv(source=r, tag=1) for _, r in peers])
    yield from wired.waitall(sends)
    for (i, _), block in zip(peers, received, strict=True):
        blocks[i] = block
    blocks[j] = mine
    return type(buf).concat(blocks)


def _channel_parts(blocks: list[Payload], channels: int) -> list[list[Payload]]:
    """Return ``parts[c][i]``: channel c's share of block i (every block split the same way)."""
    split = [block.split(channels) for block in blocks]
    return [[pieces[c] for pieces in split] for c in range(channels)]


def _ring_allgather_on(comm: Comm, blocks: list[Payload], ring: list[int], tag: int) -> Proc[list[Payload]]:
    """Pass every rank's block once round *ring* (blocks indexed by comm rank; only ours is real)."""
    p = len(ring)
    i = ring.index(comm.rank)
    right, left = ring[(i + 1) % p], ring[(i - 1) % p]
    # After step k, this rank holds the blocks of the ring positions i-k-1 .. i.
    for k in range(p - 1):
        send, recv = ring[(i - k) % p], ring[(i - k - 1) % p]
        blocks[recv] = yield from comm.sendrecv(blocks[send], dest=right, sendtag=tag, source=left, recvtag=tag)
    return blocks


@algorithm("allgather", "nccl_ring",
           reference="NCCL src/device/all_gather.h (runRing), src/graph/tuning.cc")
def nccl_ring_allgather(comm: Comm, buf: Payload) -> Proc[Payload]:
    """NCCL ring allgather: p-1 steps per channel ring, with the protocol the tuner picks.

    Every rank's buffer is split between the channels (one ring per NIC across nodes, see
    ring_orders); in each channel the pieces travel once round that channel's ring, each step
    passing on the piece received in the step before. Every message rides the chosen
    protocol; the call starts with its base latency.

    Cost (one channel): base + (p-1)(h + α + (n/p)β/e), n = the whole gathered array.
    """
    p = comm.size
    if p == 1:
        return buf
    choice = tune(comm, "nccl_ring", buf.nbytes * p, "allgather")
    yield from launch(comm, choice)
    wired = comm.with_wire(choice.protocol.wire, shared=True)
    rings = ring_orders(comm)
    if _fluid(comm, buf):
        yield from fluid_ring(comm, choice.protocol.wire, rings, buf.nbytes / len(rings), p - 1, 0)
        return buf.repeat(p)
    mine = buf.split(len(rings))
    procs = []
    for c, ring in enumerate(rings):
        blocks = [mine[c]] * p  # only blocks[rank] is real until the ring fills the others
        procs.append(comm.env.process(_ring_allgather_on(wired, blocks, ring, c)))
    yield comm.env.all_of(procs)
    gathered = [proc.value for proc in procs]
    return type(buf).concat([gathered[c][r] for r in range(p) for c in range(len(rings))])


def _ring_reduce_scatter_on(comm: Comm, blocks: list[Payload], op: Op, ring: list[int], tag: int) -> Proc[Payload]:
    """Reduce-scatter *blocks* (indexed by comm rank) round *ring*; return this rank's reduced block."""
    p = len(ring)
    i = ring.index(comm.rank)
    right, left = ring[(i + 1) % p], ring[(i - 1) % p]
    # After step k, the block of position i-k-2 here holds the contributions of positions i-k-1 .. i.
    for k in range(p - 1):
        send, recv = ring[(i - k - 1) % p], ring[(i - k - 2) % p]
        incoming = yield from comm.sendrecv(blocks[send], dest=right, sendtag=tag, source=left, recvtag=tag)
        blocks[recv] = yield from comm.reduce_local(op, incoming, blocks[recv])
    return blocks[comm.rank]


@algorithm("reduce_scatter", "nccl_ring", requires={"commutative"},
           reference="NCCL src/device/reduce_scatter.h (runRing), src/graph/tuning.cc")
def nccl_ring_reduce_scatter(comm: Comm, buf: Payload, op: Op) -> Proc[Payload]:
    """NCCL ring reduce-scatter: p-1 reducing steps per channel ring, with the tuner's protocol.

    The buffer is cut into p blocks (block r ends up at rank r), and each block is split
    between the channels; in each channel, the partial sum of a block travels once round the
    ring, every rank adding its own contribution, and arrives complete at the block's owner.
    Every message rides the chosen protocol; the call starts with its base latency.

    Cost (one channel): base + (p-1)(h + α + (n/p)β/e) + ((p-1)/p)nγ.
    """
    p = comm.size
    if p == 1:
        return buf
    choice = tune(comm, "nccl_ring", buf.nbytes, "reduce_scatter")
    yield from launch(comm, choice)
    wired = comm.with_wire(choice.protocol.wire, shared=True)
    rings = ring_orders(comm)
    if _fluid(comm, buf):
        yield from fluid_ring(comm, choice.protocol.wire, rings, buf.nbytes / (p * len(rings)), p - 1, p - 1)
        return buf.split_block(p, comm.rank)
    parts = _channel_parts(buf.split(p), len(rings))
    procs = [comm.env.process(_ring_reduce_scatter_on(wired, list(parts[c]), op, ring, c))
             for c, ring in enumerate(rings)]
    yield comm.env.all_of(procs)
    return type(buf).concat([proc.value for proc in procs])
