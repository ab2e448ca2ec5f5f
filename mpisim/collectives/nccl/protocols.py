"""NCCL's protocols (LL, LL128, Simple, NVLS) on a cluster, and as a ring or tree of a communicator runs them.

A protocol has a base latency per call (the kernel launch and set-up), and per message a
latency per hop and a share of each link's bandwidth, by link type (NVLink, PCIe, network):
NCCL's own tables below (``src/graph/tuning.cc``, ../shared COSTS.md section 3), unless the
topology gives its own (``base_latency``, ``protocols.<P>`` of each fabric). The message costs
are a :class:`~mpisim.mpi.wire.Wire`, which the algorithms' messages ride.

Across nodes a hop costs the network's latency plus NCCL's per-step proxy cost, and Simple
pays the network's latency again for the GPUDirect RDMA flush (:func:`_fabric_costs`; NCCL
2.30 ``src/graph/tuning.cc``, ``ncclTopoTuneModel``)::

    interLat = hwLat[NET][algo][proto] + latencyInter  (+ latencyInter again for Simple)
    ring:  lat = baseLat + (nsteps - 2(nNodes-1)) * max(intraLat, netOverhead)
                         + 2(nNodes-1) * interLat,      netOverhead = 1 us (2 us AMD), x3 for Simple
    tree:  lat = baseLat + 2((ppn-1) * intraLat + log2(nNodes) * interLat)

NCCL's tables have a row (``baseLat``) and columns (``hwLat``) per algorithm: a ring's messages
take the Ring ones, a tree's the Tree ones (:func:`tree_protocol`; a tree's step across the
network costs 5.0 us with LL and 8.5 with LL128, a ring's 2.7 and 4.0).

Every message over the network here carries the path's latency once (the route) plus
``hwLat[NET]`` and, for Simple, the flush (the protocol's wire), in the message path and in
the fluid twin alike, since both read the same wire.

Across nodes NCCL's model also adds two terms to a ring (:func:`ring_protocol`), caps LL's pace
(:func:`ll_pace`) and an LL128 ring's rate per channel (:func:`ring_ll128_pace`); the functions that apply them take the communicator's layout from
:mod:`~mpisim.collectives.nccl.topology`.

What NCCL's model leaves to its constants, and mpisim charges as a mechanism: the proxy. One
CPU thread per GPU posts every network step of every channel through that GPU (src/proxy.cc;
src/transport/net.cc: an ``isend`` per step at the sender, an ``irecv`` per step at the receiver,
and an ``iflush`` for Simple over GPUDirect RDMA), each post costing the network post overhead.
NCCL runs two channels per NIC (:func:`nccl_channels`, fewer for small calls), and each of
mpisim's channels stands for its share of them: a ring's messages across nodes queue on their
ends' proxies (:func:`_proxied`, :mod:`mpisim.mpi.wire`), a tree's hops pay the other
channels' posts (:func:`tree_protocol`). On 5 nodes of 8 H100 with 4 NICs (40 ranks, row H4)
a 1 MiB ring, 78 steps, is paced by them: 323 us against 354.9 measured (NCCL's own tuning
model: about 195 us).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mpisim.collectives.calls import world_table
from mpisim.collectives.nccl.topology import (
    _LAYOUTS,
    MAX_CHANNELS,
    channel_count,
    node_members,
    nvls_groups,
    tree_links,
)
from mpisim.mpi.comm import Comm
from mpisim.mpi.wire import Wire

if TYPE_CHECKING:
    from mpisim.network.topology import FabricSpec, TopologySpec

US = 1e-6

#: Protocols of the ring and tree algorithms, in NCCL's order (ties go to the first).
PROTOCOLS = ("LL", "LL128", "Simple")

#: NCCL's base latency per call and protocol (tuning.cc ``baseLat``, Ring row; NVLS has none).
NCCL_BASE_LATENCY = {"LL": 6.6 * US, "LL128": 14.0 * US, "Simple": 8.4 * US, "NVLS": 0.0}
#: NCCL's latency per hop (tuning.cc ``hwLat``, Ring columns) by link type; NVLS by its own column.
NCCL_HOP_LATENCY = {
    "nvlink": {"LL": 0.6 * US, "LL128": 1.9 * US, "Simple": 3.4 * US, "NVLS": 25.0 * US},
    "pcie": {"LL": 1.0 * US, "LL128": 2.5 * US, "Simple": 5.7 * US, "NVLS": 0.0},
    "net": {"LL": 2.7 * US, "LL128": 4.0 * US, "Simple": 14.0 * US, "NVLS": 18.0 * US},
}
#: NCCL's base latency and latency per hop of its trees (tuning.cc ``baseLat`` and ``hwLat``, Tree
#: row and columns; NVLS has its own algorithms). A tree's step across the network costs NCCL more
#: than a ring's (LL 5.0 against 2.7 us, LL128 8.5 against 4.0), its NVLink step less with LL128.
NCCL_TREE_BASE_LATENCY = {"LL": 6.8 * US, "LL128": 14.0 * US, "Simple": 8.4 * US}
NCCL_TREE_HOP_LATENCY = {
    "nvlink": {"LL": 0.6 * US, "LL128": 1.25 * US, "Simple": 4.0 * US},
    "pcie": {"LL": 1.0 * US, "LL128": 1.9 * US, "Simple": 4.0 * US},
    "net": {"LL": 5.0 * US, "LL128": 8.5 * US, "Simple": 14.0 * US},
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
#: A tree's algorithm bandwidth per unit of NCCL's bus bandwidth (tuning.cc ``ratio *= .5`` for
#: every algorithm but the rings and NVLS): each byte of a tree's vector counts twice.
NCCL_TREE_ALGBW_RATIO = 0.5
#: Threads per channel and bytes per thread below which NCCL runs fewer channels, by protocol
#: (src/include/device.h ``NCCL_{LL,LL128,SIMPLE}_MAX_NTHREADS``, comm.h
#: ``NCCL_*_THREAD_THRESHOLD``; a ring's LL threshold is multiplied by the ranks, tuning.cc).
NCCL_THREADS = {"LL": 512, "LL128": 640, "Simple": 512}
NCCL_THREAD_THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}
#: Network posts per step by protocol, at the sending and at the receiving GPU's proxy (src/transport/net.cc:
#: ``sendProxyProgress`` posts one ``isend`` per step; ``recvProxyProgress`` one ``irecv`` and, for
#: Simple received by GPUDirect RDMA, one ``iflush`` -- tuning.cc's three posts of a Simple step).
NCCL_PROXY_POSTS = {"LL": (1, 1), "LL128": (1, 1), "Simple": (1, 2)}
#: NCCL's cap on the bus bandwidth of an LL128 ring per channel of its ring graph, in bytes/s, by GPU
#: generation (tuning.cc ``perChMaxRingLL128Bws``: Volta and Ampere 20 GB/s, Hopper 36.7, Blackwell 40, the
#: same on 1, 2 and 4+ nodes; applied as ``busBw = min(busBw * 0.92, graphs[RING]->nChannels *
#: perChMaxRingLL128Bw)``). The graph's channels are the rings its search found, one per NIC across nodes
#: (Hopper's search keeps 8 rings of 48 GB/s, search.cc ``ncclTopoDupChannels``: no duplication when
#: ``bwIntra < 50`` and more than 4 channels), which are mpisim's channels (topology.channel_count); the
#: copies NCCL runs of them (connect.cc, two per NIC) share that rate. See :func:`ring_ll128_pace`.
NCCL_RING_LL128_PER_CHANNEL_BW = {"volta": 20.0e9, "ampere": 20.0e9, "hopper": 36.7e9, "blackwell": 40.0e9}
#: GPU generations by a name in the topology's ``gpu`` or its preset's name (NCCL keys its tables by
#: compute capability: 7.x Volta, 8.x Ampere, 9.x Hopper, 10.x Blackwell). First match wins.
GPU_GENERATIONS = (("gb200", "blackwell"), ("b200", "blackwell"), ("b100", "blackwell"), ("b300", "blackwell"),
                   ("h100", "hopper"), ("h200", "hopper"), ("gh200", "hopper"), ("aws-p5", "hopper"),
                   ("a100", "ampere"), ("a800", "ampere"), ("v100", "volta"))
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


def gpu_generation(spec: TopologySpec) -> str | None:
    """NCCL's GPU generation of the cluster *spec* (``volta`` ... ``blackwell``), or None if its GPU is unknown.

    The topology's ``gpu`` names it; otherwise a shipped preset's name does (``dgx-a100``,
    ``aws-p5``), as the training workload finds a preset's GPU.
    """
    name = (spec.gpu or spec.name or "").lower()
    for token, generation in GPU_GENERATIONS:
        if token in name:
            return generation
    return None


def ring_ll128_pace(comm: Comm) -> float:
    """Bytes of payload per second each of *comm*'s GPUs may send with LL128 across nodes in a ring (``inf``: none).

    NCCL's LL128 ring moves at most ``perChMaxRingLL128Bw`` of bus bandwidth per ring of its
    graph (NCCL_RING_LL128_PER_CHANNEL_BW, tuning.cc), below what the NICs carry on Hopper
    (a 400 Gb/s NIC gives LL128 0.92 x 48 = 44 GB/s; the cap is 36.7). The cap is the rate of
    a channel's threads, not of a link (src/device/prims_ll128.h): every 128-byte line carries
    a flag in its last 8 bytes, stored by every eighth thread (``flagThread``); the receiving
    warps spin, reloading lines until every flag has come (``__any_sync(WARP_MASK,
    needReload)``), and every step to the network ends with a system-wide fence before the
    proxy is told (``postSend``: ``__threadfence_system()`` from sm_90). NCCL's table is the
    rate its developers measured for that loop per generation; one channel goes no faster,
    however fast the NIC.
    The cap is per channel, so the GPU that leaves a node in channel c (through NIC c) is paced
    at it, and a ring, which moves at its slowest hop, reaches ``channels x cap`` as NCCL's
    model does. Only across nodes: inside a node LL128 is far from it (16 channels of 36.7 GB/s
    against NVLink's 450). A GPU of unknown generation has no cap.
    """
    spec = comm.world.topology.spec
    generation = gpu_generation(spec)
    if generation is None or spec.inter is None or len(node_members(comm)) == 1:
        return math.inf
    return NCCL_RING_LL128_PER_CHANNEL_BW[generation]


@dataclass(frozen=True)
class Protocol:
    """One protocol on this cluster: its per-call base latency and its per-message wire costs."""

    name: str
    base: float
    wire: Wire


def _fabric_costs(fabric: FabricSpec | None, link_type: str, name: str,
                  hops: dict[str, dict[str, float]] = NCCL_HOP_LATENCY) -> tuple[float, float]:
    """Return (latency added per message, bandwidth share) of protocol *name* on *fabric*.

    Unlisted protocols take NCCL's values (*hops*: a ring's, or NCCL_TREE_HOP_LATENCY). Inside a node NCCL's ``hwLat`` is a hop's whole
    latency, and the path already carries the fabric's own latency, so the protocol adds only
    the rest (NVLS: NCCL's latency is for the whole call, which here is two messages in
    sequence). Across nodes ``hwLat[NET]`` is the proxy's software cost of a step, paid on top
    of the network's latency (tuning.cc ``interLat = hwLat[NET] + latencyInter``), and Simple
    pays the network's latency once more for the GPUDirect RDMA flush of what it received
    (``if (p == NCCL_PROTO_SIMPLE) interLat += latencyInter``): the path carries the network's
    latency once, the protocol adds ``hwLat[NET]`` and, for Simple, the flush. A network with a
    higher latency is then never faster.
    """
    given = fabric.protocol(name) if fabric is not None else None
    if given is not None:
        return given.latency, given.efficiency
    path = fabric.latency if fabric is not None else 0.0
    hop = hops[link_type][name]
    if name == "NVLS":
        added = max(0.0, hop / 2 - path)
    elif link_type == "net":
        added = hop + (path if name == "Simple" else 0.0)
    else:
        added = max(0.0, hop - path)
    return added, NCCL_EFFICIENCY[name]


@functools.lru_cache(maxsize=256)
def protocols(spec: TopologySpec, tree: bool = False) -> dict[str, Protocol]:
    """Return every protocol's costs on the cluster *spec*: the topology's values, else NCCL's defaults.

    *tree*: the costs of NCCL's trees, whose base and hop latencies are a row and columns of
    NCCL's tables of their own (NCCL_TREE_BASE_LATENCY, NCCL_TREE_HOP_LATENCY; no NVLS).
    """
    base = dict(spec.base_latency)
    intra_type = LINK_TYPE.get(spec.intra.kind, "pcie") if spec.intra is not None else "pcie"
    bases, hops = (NCCL_TREE_BASE_LATENCY, NCCL_TREE_HOP_LATENCY) if tree else (NCCL_BASE_LATENCY, NCCL_HOP_LATENCY)
    out = {}
    for name in bases:
        lat_intra, eff_intra = _fabric_costs(spec.intra, intra_type, name, hops)
        lat_inter, eff_inter = _fabric_costs(spec.inter, "net", name, hops)
        out[name] = Protocol(name, base.get(name, bases[name]), Wire(name, lat_intra, lat_inter, eff_intra, eff_inter))
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


def enabled_protocols(spec: TopologySpec, names: tuple[str, ...] = PROTOCOLS) -> tuple[str, ...]:
    """The protocols of *names* NCCL's tuner may choose for a ring or tree on the cluster *spec*, in their order.

    LL128 only where NCCL enables it (:func:`ll128_enabled`), and only those the fabrics allow
    (``allowed_protocols``, as ``NCCL_PROTO``: tuning.cc ``protoEnable``, which NCCL reads once per
    process, so a fabric's restriction holds for every communicator on the cluster): on AWS p4d
    and p4de the EFA plugin allows only Simple (:mod:`mpisim.network.gpuprotocols`).
    """
    enabled = [name for name in names if name != "LL128" or ll128_enabled(spec)]
    for fabric in (spec.intra, spec.inter):
        if fabric is not None and fabric.allowed_protocols:
            enabled = [name for name in enabled if name in fabric.allowed_protocols]
    return tuple(enabled)


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



def nccl_channels(comm: Comm, protocol: str, nbytes: int, ring: bool = True) -> int:
    """How many channels NCCL's ring (else tree) runs for a call of *nbytes* (nccl-tests' size) with *protocol*.

    A ring across nodes gets one channel per NIC from NCCL's graph search, and
    ``ncclTopoPostset`` duplicates every channel (src/graph/connect.cc: "Duplication should be
    complete now"), so the communicator has two per NIC (at most MAX_CHANNELS). A call then
    runs fewer when each channel's threads would have too little to do (src/enqueue.cc,
    ``topoGetAlgoInfo``: ``while (nBytes < nc * nt * threadThreshold) nc--``).
    """
    nc = min(2 * channel_count(comm), MAX_CHANNELS)
    work = NCCL_THREADS[protocol] * NCCL_THREAD_THRESHOLD[protocol] * (comm.size if ring and protocol == "LL" else 1)
    while nc > 1 and nbytes < nc * work:
        nc -= 1
    return nc


def _proxied(comm: Comm, wire: Wire, protocol: str, nbytes: int) -> Wire:
    """*wire* with the proxy threads' work of a ring across nodes (:mod:`mpisim.mpi.wire`, "proxy").

    Every network step of every channel is posted by the proxy thread of the GPU it leaves
    and completed by that of the GPU it enters (NCCL src/proxy.cc, one progress thread per GPU;
    src/transport/net.cc, NCCL_PROXY_POSTS). Each post costs the network post overhead (tuning.cc ``getNetOverhead``: 1 us, 2 us on AMD
    hosts; ``netOverhead *= 3`` for Simple: send, receive, flush). One of mpisim's channels
    stands for ``ceil(NCCL's channels / mpisim's)`` of NCCL's (:func:`nccl_channels`), whose
    steps the same two proxies post in turn.
    """
    spec = comm.world.topology.spec
    post = net_overhead(spec)
    send_posts, recv_posts = NCCL_PROXY_POSTS[protocol]
    channels = max(1, -(-nccl_channels(comm, protocol, nbytes) // channel_count(comm)))
    return dataclasses.replace(wire, proxy_send=channels * post * send_posts, proxy_recv=channels * post * recv_posts,
                               proxy_channels=channels)


def ring_protocol(comm: Comm, protocol: Protocol, collective: str = "allreduce", nbytes: int | None = None) -> Protocol:
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
      bandwidth. The NICs still carry LL's own bytes only (two per byte of data);
    * for every ring, LL128's bus bandwidth is at most ``perChMaxRingLL128Bw`` per channel
      (``busBw = min(busBw * 0.92, nChannels * perChMaxRingLL128Bw)``): the ring rank that leaves
      a node in a channel is paced at that rate (:func:`ring_ll128_pace`).
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
    pace = wire.pace_inter
    if protocol.name == "LL":
        pace = min(pace, ll_pace(comm))
    elif protocol.name == "LL128":
        pace = min(pace, ring_ll128_pace(comm))
    if collective in RING_COLLECTIVES and nbytes is not None and protocol.name in NCCL_THREADS:
        wire = _proxied(comm, wire, protocol.name, nbytes)
    if latency_intra == wire.latency_intra and pace == wire.pace_inter and wire == protocol.wire:
        return protocol
    return Protocol(protocol.name, protocol.base, dataclasses.replace(wire, latency_intra=latency_intra, pace_inter=pace))


def ll_pace(comm: Comm) -> float:
    """Bytes of payload per second each of *comm*'s GPUs may send with LL across nodes (``inf`` on one node).

    NCCL caps LL's bus bandwidth across nodes (tuning.cc ``llMaxBws``, for rings and trees
    alike; by the hosts' CPU, :func:`ll_max_busbw`). A collective's bus bandwidth is the sum of
    its channels', and in channel c only local rank c of each node sends across (through NIC
    c), so each of those ranks is paced at the cap / channels: a ring, which moves at its
    slowest hop, then reaches exactly the capped bus bandwidth, and a tree's heads, sending to
    parents and children at once, share their pace among those edges (:func:`tree_protocol`
    scales it so that a tree reaches the cap as a tree's bus bandwidth).
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


def tree_head_sends(comm: Comm) -> float:
    """The most bytes one rank sends across nodes in NCCL's two trees of a channel, per byte of the channel's part.

    Each tree carries half of the part; a rank sends it once to a parent on another node and
    once to each child on another node (:func:`~mpisim.collectives.nccl.topology.tree_links`;
    every channel's trees are copies of channel 0's on other ranks).
    """
    layouts = world_table(_LAYOUTS, comm.world)
    key = ("tree head sends", comm.context)
    sends = layouts.get(key)
    if sends is None:
        node = comm.node_of
        most = 0
        links = tree_links(comm, 0)
        for r in range(comm.size):
            count = 0
            for tree in links:
                parent, children = tree[r]
                count += (parent is not None and node(parent) != node(r)) + sum(node(c) != node(r) for c in children)
            most = max(most, count)
        sends = layouts[key] = most / 2
    return sends


def tree_protocol(comm: Comm, protocol: Protocol, nbytes: int | None = None) -> Protocol:
    """Return *protocol* as ``nccl_tree`` runs it on *comm*: LL across nodes paced as NCCL caps it (:func:`ll_pace`),
    and every hop across nodes carrying the proxy posts of the NCCL channels it stands for.

    NCCL caps a tree's LL bus bandwidth at ``llMaxBw`` as it caps a ring's, and a tree's bus
    bandwidth is twice its algorithm bandwidth (tuning.cc: ``busBw = std::min(busBw * 1.0 / 3.8,
    llMaxBw)``, then ``ratio *= .5`` for every algorithm but the rings and NVLS): a tree's LL
    moves at most ``llMaxBw / 2`` bytes of the vector per second. The head that sends the most
    across nodes sends :func:`tree_head_sends` bytes per byte of its channel's part (1 on two
    nodes, where every byte crosses once each way; 2 from four on, where a head inner to one
    tree sends up once and down twice), so each head is paced at ``llMaxBw x 0.5 x that /
    channels`` and the tree reaches NCCL's capped algorithm bandwidth, its nccl-tests bus
    bandwidth ``llMaxBw`` as a ring's does (on two nodes a head paced as a ring's rank would give
    twice that).

    A protocol of NCCL's defaults (:func:`protocols`) takes the trees' own base and hop
    latencies (tuning.cc, Tree row and columns: a step across the network costs a tree 5.0 us
    with LL and 8.5 with LL128, a ring 2.7 and 4.0), in the messages and the tuner alike.

    As in a ring (:func:`_proxied`), one of mpisim's tree channels stands for k of NCCL's
    (:func:`nccl_channels`, with the tree's thread thresholds), whose steps the same two proxy
    threads post in turn: a hop across nodes waits for the other k - 1 channels' posts at both
    ends, charged here as latency of the hop (the trees' few hops across nodes per step rarely
    find a proxy busy, so its queue is left out). NCCL's tuner also divides a tree's LL
    bandwidth by 3.8 (``busBw * 1.0 / 3.8``), an empirical factor with no mechanism named for a
    simulation to charge; it is left out.
    """
    spec = comm.world.topology.spec
    ring_table = protocols(spec)
    if protocol.name in NCCL_TREE_BASE_LATENCY and protocol == ring_table[protocol.name]:
        protocol = protocols(spec, tree=True)[protocol.name]
    wire = protocol.wire
    if protocol.name == "LL":
        pace = ll_pace(comm) * NCCL_TREE_ALGBW_RATIO * tree_head_sends(comm)
        wire = dataclasses.replace(wire, pace_inter=min(wire.pace_inter, pace))
    if nbytes is not None and protocol.name in NCCL_THREADS and spec.inter is not None and len(node_members(comm)) > 1:
        channels = max(1, -(-nccl_channels(comm, protocol.name, nbytes, ring=False) // channel_count(comm)))
        posts = sum(NCCL_PROXY_POSTS[protocol.name])
        wire = dataclasses.replace(wire, latency_inter=wire.latency_inter + (channels - 1) * posts * net_overhead(spec))
    if wire == protocol.wire:
        return protocol
    return Protocol(protocol.name, protocol.base, wire)
