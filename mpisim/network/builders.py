"""Fabric builders: how the links inside a node and between nodes are laid out and routed.

A cluster has two fabrics. The *intra-node* fabric joins the ranks (CPU cores or GPUs) of one
node: shared memory, PCIe through a host bridge, or NVLink through an NVSwitch. The
*inter-node* fabric joins the nodes' NICs: a full mesh, one switch (star), a two-level
leaf/spine fat tree, a rail-optimised fabric, or a ring. Each kind is one small class,
registered under its YAML name (``kind: fat_tree``) in :data:`INTRA_FABRICS` or
:data:`INTER_FABRICS`, the same way collective algorithms are registered by name: the
topology validator lists the known kinds from these tables, and a new fabric is one new class.

**Links.** Every link is one direction of one cable (:class:`~mpisim.network.links.Link`), named
``from->to`` after the two vertices it joins: ``rank5->node0.nvswitch``, ``node3.nic0->leaf0``,
``leaf0->spine2``. Switches and host bridges are not objects of their own; they exist only as
the names at the ends of links, because only links have capacities.

**Latency budget.** A fabric's ``latency`` is the end-to-end one-way latency between two
endpoints on the shortest path. When that path is "up to a switch, down again", each of the
two links carries half of it, so the route's latency is exactly the spec's. Longer paths add
``hop_latency`` per extra link (fat tree and rail spines) or a whole ``latency`` per hop (ring).

**Structural routing.** Each fabric knows its own shape, so it computes a route from the
endpoints' coordinates (which leaf, which rail, how far round the ring) in time proportional
to the path length: no graph search, no all-pairs table. Building a 16384-rank fat tree and
routing 16384 pairs takes a fraction of a second. :class:`~mpisim.network.topology.Topology`
caches the routes.

**NICs.** An inter-node fabric routes between NICs, given as (node, nic). Local rank ``j`` of a
node uses NIC ``j % nics``; a rank reaches its NIC through its host without a modelled link
(PCIe to the NIC is not the bottleneck these models are about). In the fabrics that keep the
NIC planes apart (full mesh and ring) a message rides the *sender's* plane and is handed to
the receiving rank inside the destination node.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar, Protocol

from mpisim.network.links import Link

if TYPE_CHECKING:
    from mpisim.network.topology import FabricSpec

#: A leaf switch's downlink ports when ``leaf_size`` is automatic: half of a radix-64 switch
#: (NVIDIA Quantum-2 NDR and 400 GbE switches have 64 ports), the other half going up to spines.
LEAF_DOWN_PORTS = 32
#: Ports of a spine switch (the same radix-64 model): a two-level tree joins at most this many
#: leaves; a larger fabric gets a third, core level above pods of ``SPINE_PORTS / 2`` leaves.
SPINE_PORTS = 64
#: How a multi-level fabric spreads a connection over its equal-cost paths (``routing:``).
ROUTINGS = ("adaptive", "ecmp")


class Layout(Protocol):
    """What a fabric builder needs to know about the topology it is building links for."""

    nodes: int
    ranks_per_node: int
    size: int

    def node_of(self, rank: int) -> int:
        """Return the node that hosts *rank*."""
        ...

    def add_link(self, name: str, latency: float, bandwidth: float, efficiency: float, kind: str) -> Link:
        """Create a link, append it to the topology's ``links`` and return it."""
        ...


# --------------------------------------------------------------------------------------------
# Registries


class IntraFabric(ABC):
    """A node's internal fabric: routes between two ranks of the same node."""

    kind: ClassVar[str]
    #: How summaries name the fabric ("NVSwitch").
    label: ClassVar[str]

    def __init__(self, spec: FabricSpec, layout: Layout) -> None:
        self.spec = spec
        self.layout = layout

    @abstractmethod
    def route(self, src: int, dst: int) -> list[Link]:
        """Return the links from rank *src* to rank *dst*, two distinct ranks of one node."""
        ...

    def describe(self, endpoint: str) -> str:
        """Return a short description for one-line summaries (*endpoint*: "GPU" or "rank")."""
        return f"{self.label} {format_bytes_per_s(self.spec.bandwidth)} per {endpoint}"


class InterFabric(ABC):
    """The network between nodes: routes between NIC ``i`` of one node and NIC ``j`` of another."""

    kind: ClassVar[str]

    def __init__(self, spec: FabricSpec, layout: Layout) -> None:
        self.spec = spec
        self.layout = layout
        self.nics = spec.nics

    @abstractmethod
    def route(self, src_node: int, src_nic: int, dst_node: int, dst_nic: int) -> list[Link]:
        """Return the links from NIC *src_nic* of *src_node* to NIC *dst_nic* of *dst_node*.

        The two nodes are distinct.
        """
        ...

    @abstractmethod
    def describe(self) -> str:
        """Return a short description for one-line summaries."""
        ...

    def lanes(self, src_node: int, src_nic: int, dst_node: int, dst_nic: int) -> list[list[Link]]:
        """Return each sub-flow's links when a connection is split over several paths, else [].

        Only static ECMP with several queue pairs per connection splits one (see
        :class:`_LeafSpine`); every other fabric carries a connection on one path.
        """
        return []

    def _nic_ports(self) -> str:
        return f"{self.nics} x {format_bits_per_s(self.spec.bandwidth)} NIC{'s' if self.nics > 1 else ''} per node"

    def _add(self, name: str, latency: float, bandwidth: float | None = None) -> Link:
        bandwidth = self.spec.bandwidth if bandwidth is None else bandwidth
        return self.layout.add_link(name, latency, bandwidth, self.spec.efficiency, "net")


INTRA_FABRICS: dict[str, type[IntraFabric]] = {}
INTER_FABRICS: dict[str, type[InterFabric]] = {}


def register_intra(cls: type[IntraFabric]) -> type[IntraFabric]:
    """Register an intra-node fabric class under its ``kind``."""
    if cls.kind in INTRA_FABRICS:
        raise ValueError(f"duplicate intra-node fabric kind {cls.kind!r}")
    INTRA_FABRICS[cls.kind] = cls
    return cls


def register_inter(cls: type[InterFabric]) -> type[InterFabric]:
    """Register an inter-node fabric class under its ``kind``."""
    if cls.kind in INTER_FABRICS:
        raise ValueError(f"duplicate inter-node fabric kind {cls.kind!r}")
    INTER_FABRICS[cls.kind] = cls
    return cls


def format_bytes_per_s(bandwidth: float) -> str:
    """Format a bandwidth in GB/s (10^9 bytes per second): ``300 GB/s``."""
    return f"{bandwidth / 1e9:.4g} GB/s"


def format_bits_per_s(bandwidth: float) -> str:
    """Format a network bandwidth the way NICs are sold, in Gb/s, with GB/s alongside."""
    return f"{bandwidth * 8 / 1e9:.4g} Gb/s ({format_bytes_per_s(bandwidth)})"


# --------------------------------------------------------------------------------------------
# Intra-node fabrics: every rank has one port (an up and a down link) to a hub of its node.


class _PortStar(IntraFabric):
    """Each rank has a port to one hub of its node: an up link and a down link, latency/2 each.

    A rank-to-rank path is up from the sender and down to the receiver, so it has exactly the
    spec's latency and bandwidth, and two messages into one rank share its down link.
    """

    hub: ClassVar[str]
    link_kind: ClassVar[str]

    def __init__(self, spec: FabricSpec, layout: Layout) -> None:
        super().__init__(spec, layout)
        half = spec.latency / 2
        self._up: list[Link] = []
        self._down: list[Link] = []
        for rank in range(layout.size):
            hub = f"node{layout.node_of(rank)}.{self.hub}"
            add = layout.add_link
            self._up.append(add(f"rank{rank}->{hub}", half, spec.bandwidth, spec.efficiency, self.link_kind))
            self._down.append(
                add(f"{hub}->rank{rank}", half, spec.bandwidth, spec.efficiency, self.link_kind)
            )

    def route(self, src: int, dst: int) -> list[Link]:
        return [self._up[src], self._down[dst]]


@register_intra
class SharedMemory(_PortStar):
    """Shared memory: ranks copy through their node's memory; bandwidth is per rank."""

    kind = "shm"
    label = "shared memory"
    hub = "shm"
    link_kind = "shm"


@register_intra
class Pcie(_PortStar):
    """PCIe: each device's lanes go to a host bridge; bandwidth is per device (x16 link)."""

    kind = "pcie"
    label = "PCIe"
    hub = "pcie"
    link_kind = "pcie"


@register_intra
class NvSwitch(_PortStar):
    """NVLink through NVSwitch: each GPU's NVLink ports reach one switch; bandwidth per GPU.

    A DGX has several NVSwitch chips, but every GPU reaches all of them with the same total
    bandwidth, so they act as one non-blocking switch of per-GPU ports.
    """

    kind = "nvswitch"
    label = "NVSwitch"
    hub = "nvswitch"
    link_kind = "nvlink"


# --------------------------------------------------------------------------------------------
# Inter-node fabrics


def _nic(node: int, nic: int) -> str:
    return f"node{node}.nic{nic}"


@register_inter
class FullMesh(InterFabric):
    """A direct link between NIC ``i`` of every pair of nodes, one per direction.

    Links are created on first use: a full mesh of n nodes has n(n-1) links per NIC plane,
    too many to build up front for a large n.
    """

    kind = "full"

    def __init__(self, spec: FabricSpec, layout: Layout) -> None:
        super().__init__(spec, layout)
        self._links: dict[tuple[int, int, int], Link] = {}

    def route(self, src_node: int, src_nic: int, dst_node: int, dst_nic: int) -> list[Link]:
        key = (src_node, dst_node, src_nic)
        link = self._links.get(key)
        if link is None:
            name = f"{_nic(src_node, src_nic)}->{_nic(dst_node, src_nic)}"
            link = self._links[key] = self._add(name, self.spec.latency)
        return [link]

    def describe(self) -> str:
        return f"full mesh, {self._nic_ports()}"


@register_inter
class Star(InterFabric):
    """One switch: every NIC has an up and a down link to it, latency/2 each."""

    kind = "star"

    def __init__(self, spec: FabricSpec, layout: Layout) -> None:
        super().__init__(spec, layout)
        half = spec.latency / 2
        self._up: list[Link] = []
        self._down: list[Link] = []
        for node in range(layout.nodes):
            for nic in range(self.nics):
                self._up.append(self._add(f"{_nic(node, nic)}->switch", half))
                self._down.append(self._add(f"switch->{_nic(node, nic)}", half))

    def route(self, src_node: int, src_nic: int, dst_node: int, dst_nic: int) -> list[Link]:
        return [self._up[src_node * self.nics + src_nic], self._down[dst_node * self.nics + dst_nic]]

    def describe(self) -> str:
        return f"single switch, {self._nic_ports()}"


@register_inter
class Ring(InterFabric):
    """Nodes in a ring: NIC ``i`` of each node links to NIC ``i`` of its two neighbours.

    A message takes the shorter way round (clockwise, towards higher node numbers, on a tie)
    and every hop adds the spec's full latency. With two nodes both ways are the same single
    hop, so only the clockwise links exist.
    """

    kind = "ring"

    def __init__(self, spec: FabricSpec, layout: Layout) -> None:
        super().__init__(spec, layout)
        n = layout.nodes
        # _cw[node * nics + nic] goes to node + 1; _ccw[...] to node - 1.
        self._cw: list[Link] = []
        self._ccw: list[Link] = []
        if n < 2:
            return
        for node in range(n):
            for nic in range(self.nics):
                self._cw.append(self._add(f"{_nic(node, nic)}->{_nic((node + 1) % n, nic)}", spec.latency))
                if n > 2:
                    self._ccw.append(
                        self._add(f"{_nic(node, nic)}->{_nic((node - 1) % n, nic)}", spec.latency)
                    )

    def route(self, src_node: int, src_nic: int, dst_node: int, dst_nic: int) -> list[Link]:
        n, nics = self.layout.nodes, self.nics
        forward = (dst_node - src_node) % n
        backward = n - forward
        if forward <= backward:
            return [self._cw[((src_node + k) % n) * nics + src_nic] for k in range(forward)]
        return [self._ccw[((src_node - k) % n) * nics + src_nic] for k in range(backward)]

    def describe(self) -> str:
        return f"ring, {self._nic_ports()}"


class _LeafSpine(InterFabric):
    """A folded Clos: NICs hang off leaf switches, leaves join through spines (and cores).

    Subclasses say which leaf (and which downlink port of it) each NIC plugs into. A leaf has
    ``ports`` downlinks at the NIC bandwidth and ``spines`` uplinks, one to each spine switch;
    the uplinks share ``ports x bandwidth / oversubscription`` equally, so an oversubscription
    of 2 halves what a full leaf can send across at once. With ``o`` the oversubscription
    there are ``ceil(ports / o)`` spines, so with ``o = 1`` every uplink is as fast as a NIC
    port, as in a real non-blocking fat tree built from one switch model.

    **Tiers.** A spine switch has :data:`SPINE_PORTS` ports, so two levels join at most that
    many leaves. Beyond, the leaves are grouped into *pods* of ``SPINE_PORTS / 2`` leaves
    (``pod_size`` nodes, automatic by default): each pod has its own spines, half of whose
    ports go down to the pod's leaves and half up to a core level that joins the pods, the
    three-level fat tree of DGX SuperPODs above 2,048 GPUs and of 10,000-100,000 GPU clusters.
    The core level is as fast as the pod's leaf uplinks (non-blocking above the leaves).

    **Latency.** Same leaf: NIC -> leaf -> NIC, latency/2 per link. Different leaves of one
    pod: NIC -> leaf -> spine -> leaf -> NIC, with ``hop_latency`` on each switch-to-switch
    link (0 by default: the spine adds no latency beyond the end-to-end figure unless the spec
    says so); different pods add the two pod-core links, two more ``hop_latency``.

    **Routing** (``routing:``) decides how a connection between two leaves uses the equal-cost
    uplinks:

    * ``adaptive`` (the default): the connection is spread over all of them. InfiniBand
      switches with adaptive routing send each packet out of the least-loaded equal-cost port
      (NCCL turns adaptive routing on for every InfiniBand port and sends bulk data as RDMA
      writes that tolerate reordering: ``net_ib/init.cc``, ``net_ib/p2p.cc``), and RoCE
      deployments spread a connection over several queue pairs whose UDP source ports hash
      apart (``NCCL_IB_QPS_PER_CONNECTION``, 1 by default, set to 4 or more on RoCE clouds) or
      over Ethernet switches that spray packets, so a leaf's uplinks act as one pooled bundle. The model is that bundle: one
      link per leaf and direction, ``leafX->spines`` and ``spines->leafX``, carrying the
      capacity of all its uplinks together (and ``podP.spines->core`` / ``core->podP.spines``
      between a pod and the core). It is exact, not an approximation, for a Clos with
      even splitting: when each connection puts ``1/spines`` of its bytes on every spine, the
      load on uplink ``leaf->s`` is the leaf's total over ``spines``, for every ``s``, so a
      set of rates fits the uplinks exactly when it fits the bundle, and the same holds at the
      spines' downlinks and the core. It is also what keeps the max-min solver cheap: one link
      per leaf instead of one per spine, and one flow per connection instead of one per path.
      On a non-blocking tree (``oversubscription: 1``) whose switch hops add no latency the
      bundles are not built at all: each carries at most what its leaf's NIC ports carry and
      has exactly their capacity, so it can never be the link that limits a flow.
    * ``ecmp``: static hashing, for studying collisions. Each queue pair of a connection
      (``qps_per_connection``, 1 by default) is hashed independently onto one spine (a mix of
      the two NICs and the queue pair's number, as switches hash the 5-tuple), over
      individual ``leafX->spineS`` cables. Two connections hashed onto one cable share it,
      and a fabric the preset calls non-blocking then runs some cables at half speed, as
      real ECMP fabrics do. A connection of several queue pairs is several sub-flows
      (:attr:`~mpisim.network.links.Route.lanes`), each with its share of the bytes. Between
      pods the core stage stays pooled (the collisions studied are those at the leaves).
    """

    #: Nodes attached to one leaf (after the automatic choice), downlink ports per leaf,
    #: number of leaves and of spines. Set by subclasses before ``_build``.
    leaf_size: int
    ports: int
    leaves: int
    spines: int
    #: Nodes per pod (all nodes when the fabric has two levels) and number of pods.
    pod_nodes: int
    pods: int

    def _build(self, leaf_names: list[str], leaves_per_group: int) -> None:
        spec = self.spec
        half = spec.latency / 2
        # NIC ports, indexed node * nics + nic.
        self._up: list[Link] = []
        self._down: list[Link] = []
        for node in range(self.layout.nodes):
            for nic in range(self.nics):
                leaf = leaf_names[self.leaf_of(node, nic)[0]]
                self._up.append(self._add(f"{_nic(node, nic)}->{leaf}", half))
                self._down.append(self._add(f"{leaf}->{_nic(node, nic)}", half))
        self.adaptive = spec.routing == "adaptive"
        self.qps = spec.qps_per_connection
        # Leaf-spine cables; none when one leaf holds everything.
        self.spines = math.ceil(self.ports / spec.oversubscription) if self.leaves > 1 else 0
        self.uplink_bandwidth = (
            self.ports * spec.bandwidth / spec.oversubscription / self.spines if self.spines else 0.0
        )
        # Pods: groups of whole leaf groups, so a node's NICs are all in one pod.
        self.pod_nodes = _pod_nodes(spec.pod_size, self.layout.nodes, self.leaves, self.leaf_size, leaves_per_group)
        self.pods = math.ceil(self.layout.nodes / self.pod_nodes)
        # adaptive: one bundle per leaf and direction, indexed by leaf; ecmp: one cable per
        # (leaf, spine), indexed leaf * spines + spine.
        self._uplinks: list[Link] = []
        self._downlinks: list[Link] = []
        # Adaptive routing on a non-blocking tree whose switch hops add no latency: a leaf's bundle
        # carries at most what its NIC ports do and has their capacity, so it never binds (a
        # redundant max-min constraint) and adds nothing to a route; it is not built at all, which
        # also keeps per-flow contention estimates (the collectives' fluid twins) on the NIC ports.
        self.pooled = self.adaptive and (spec.oversubscription > 1 or spec.hop_latency > 0)
        for leaf in leaf_names if self.spines and (self.pooled or not self.adaptive) else ():
            if self.adaptive:
                bundle = self.spines * self.uplink_bandwidth
                self._uplinks.append(self._add(f"{leaf}->spines", spec.hop_latency, bundle))
                self._downlinks.append(self._add(f"spines->{leaf}", spec.hop_latency, bundle))
                continue
            for spine in range(self.spines):
                self._uplinks.append(self._add(f"{leaf}->spine{spine}", spec.hop_latency, self.uplink_bandwidth))
                self._downlinks.append(self._add(f"spine{spine}->{leaf}", spec.hop_latency, self.uplink_bandwidth))
        # Pod-core bundles: as fast as the pod's leaves' uplinks together (non-blocking core).
        self._pod_up: list[Link] = []
        self._pod_down: list[Link] = []
        if self.pods > 1 and (self.pooled or not self.adaptive):
            leaf_uplinks = self.ports * spec.bandwidth / spec.oversubscription
            for pod in range(self.pods):
                nodes = min(self.pod_nodes, self.layout.nodes - pod * self.pod_nodes)
                capacity = math.ceil(nodes / self.leaf_size) * leaves_per_group * leaf_uplinks
                self._pod_up.append(self._add(f"pod{pod}.spines->core", spec.hop_latency, capacity))
                self._pod_down.append(self._add(f"core->pod{pod}.spines", spec.hop_latency, capacity))

    @abstractmethod
    def leaf_of(self, node: int, nic: int) -> tuple[int, int]:
        """Return (leaf index, downlink port on that leaf) for NIC *nic* of *node*."""
        ...

    def spine_for(self, src_node: int, src_nic: int, dst_node: int, dst_nic: int, qp: int = 0) -> int:
        """``ecmp``: return the spine that queue pair *qp* of this connection is hashed onto.

        A fixed integer mix of the two NICs and the queue pair (splitmix64's finaliser), the
        way a switch hashes a packet's 5-tuple: deterministic, and as likely to collide as a
        real hash, so two connections out of one leaf share a cable with probability
        ``1 / spines``.
        """
        key = ((((src_node * 1_000_003 + src_nic) * 1_000_003 + dst_node) * 1_000_003 + dst_nic) * 131 + qp)
        return _mix64(key) % self.spines

    def route(self, src_node: int, src_nic: int, dst_node: int, dst_nic: int) -> list[Link]:
        src_leaf, _ = self.leaf_of(src_node, src_nic)
        dst_leaf, _ = self.leaf_of(dst_node, dst_nic)
        up = self._up[src_node * self.nics + src_nic]
        down = self._down[dst_node * self.nics + dst_nic]
        if src_leaf == dst_leaf:
            return [up, down]
        if self.adaptive and not self.pooled:
            return [up, down]
        src_pod, dst_pod = src_node // self.pod_nodes, dst_node // self.pod_nodes
        core = [self._pod_up[src_pod], self._pod_down[dst_pod]] if src_pod != dst_pod else []
        if self.adaptive:
            return [up, self._uplinks[src_leaf], *core, self._downlinks[dst_leaf], down]
        spine = self.spine_for(src_node, src_nic, dst_node, dst_nic)
        return [
            up,
            self._uplinks[src_leaf * self.spines + spine],
            *core,
            self._downlinks[dst_leaf * self.spines + spine],
            down,
        ]

    def lanes(self, src_node: int, src_nic: int, dst_node: int, dst_nic: int) -> list[list[Link]]:
        """``ecmp`` with several queue pairs: the links of each queue pair's path, in QP order.

        Empty when the connection is one path (adaptive routing, one queue pair, one leaf).
        :meth:`route` is queue pair 0's path.
        """
        if self.adaptive or self.qps == 1:
            return []
        src_leaf, _ = self.leaf_of(src_node, src_nic)
        dst_leaf, _ = self.leaf_of(dst_node, dst_nic)
        if src_leaf == dst_leaf:
            return []
        first = self.route(src_node, src_nic, dst_node, dst_nic)
        out = [first]
        for qp in range(1, self.qps):
            spine = self.spine_for(src_node, src_nic, dst_node, dst_nic, qp)
            path = list(first)
            path[1] = self._uplinks[src_leaf * self.spines + spine]
            path[-2] = self._downlinks[dst_leaf * self.spines + spine]
            out.append(path)
        return out

    def _tree_shape(self) -> str:
        if not self.spines:
            return f"{self.leaf_size} nodes per leaf, 1 leaf"
        ratio = f", {self.spec.oversubscription:g}:1 oversubscribed" if self.spec.oversubscription > 1 else ""
        pods = f", {self.pods} pods of {self.pod_nodes} nodes under a core level" if self.pods > 1 else ""
        if self.adaptive:
            routing = "adaptive routing"
        else:
            routing = f"ECMP, {self.qps} QP{'s' if self.qps > 1 else ''} per connection"
        return f"{self.leaf_size} nodes per leaf, {self.leaves} leaves, {self.spines} spines{ratio}{pods}, {routing}"


def _mix64(key: int) -> int:
    """splitmix64's finaliser: a fixed 64-bit integer mix whose low bits all depend on every input bit."""
    z = key & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return z ^ (z >> 31)


def _pod_nodes(requested: int, nodes: int, leaves: int, leaf_size: int, leaves_per_group: int) -> int:
    """Nodes per pod: as requested; else all nodes while the spines' :data:`SPINE_PORTS` ports
    reach every leaf (two levels), and beyond that pods of ``SPINE_PORTS / 2`` leaves."""
    if requested > 0:  # whole leaf groups, so that a leaf is never split between pods
        return min(math.ceil(requested / leaf_size) * leaf_size, nodes)
    if leaves <= SPINE_PORTS:
        return nodes
    groups_per_pod = max(1, (SPINE_PORTS // 2) // leaves_per_group)
    return min(groups_per_pod * leaf_size, nodes)


def _leaf_size(requested: int, nodes: int, ports_per_node: int) -> int:
    """Nodes per leaf: as requested, or as many as fill :data:`LEAF_DOWN_PORTS`; at most all nodes."""
    size = requested if requested > 0 else max(1, LEAF_DOWN_PORTS // ports_per_node)
    return min(size, nodes)


@register_inter
class FatTree(_LeafSpine):
    """Two-level leaf/spine fat tree: all NICs of a node on one leaf, ``leaf_size`` nodes per leaf.

    With ``leaf_size: 0`` (automatic) a leaf takes as many nodes as fit in
    :data:`LEAF_DOWN_PORTS` NIC ports (32 nodes with one NIC each, 4 with eight), or all
    nodes if there are fewer.
    """

    kind = "fat_tree"

    def __init__(self, spec: FabricSpec, layout: Layout) -> None:
        super().__init__(spec, layout)
        self.leaf_size = _leaf_size(spec.leaf_size, layout.nodes, self.nics)
        self.ports = self.leaf_size * self.nics
        self.leaves = math.ceil(layout.nodes / self.leaf_size)
        self._build([f"leaf{leaf}" for leaf in range(self.leaves)], 1)

    def leaf_of(self, node: int, nic: int) -> tuple[int, int]:
        return node // self.leaf_size, (node % self.leaf_size) * self.nics + nic

    def describe(self) -> str:
        return f"fat tree ({self._tree_shape()}), {self._nic_ports()}"


@register_inter
class Rail(_LeafSpine):
    """Rail-optimised fabric (DGX SuperPOD style): NIC ``j`` of every node is on rail ``j``.

    Each rail is its own switch plane: one leaf per ``leaf_size`` nodes (automatic: up to
    :data:`LEAF_DOWN_PORTS` nodes), so NIC ``j`` of two nodes in the same group meet at one
    hop. Rails meet at a shared spine level, so traffic from local rank ``i`` to local rank
    ``j != i`` of another node goes NIC i -> rail i leaf -> spine -> rail j leaf -> NIC j.
    (NCCL would instead move the data over NVLink first and stay on one rail; collective
    algorithms that want that behaviour choose their peers accordingly.) The topology
    validator ensures one NIC per rank (``nics == ranks_per_node``).
    """

    kind = "rail"

    def __init__(self, spec: FabricSpec, layout: Layout) -> None:
        super().__init__(spec, layout)
        self.leaf_size = _leaf_size(spec.leaf_size, layout.nodes, 1)
        self.ports = self.leaf_size
        self.groups = math.ceil(layout.nodes / self.leaf_size)
        self.leaves = self.nics * self.groups
        self._build([f"rail{rail}.leaf{group}" for rail in range(self.nics) for group in range(self.groups)], self.nics)

    def leaf_of(self, node: int, nic: int) -> tuple[int, int]:
        return nic * self.groups + node // self.leaf_size, node % self.leaf_size

    def describe(self) -> str:
        return f"rail-optimized ({self.nics} rails; {self._tree_shape()}), {self._nic_ports()}"
