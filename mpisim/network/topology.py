"""Cluster topology: nodes, the ranks placed on them, the links between them, and routes.

A cluster is ``nodes`` machines with ``ranks_per_node`` ranks each (CPU cores, or GPUs).
Two fabrics carry messages:

* the **intra-node** fabric joins the ranks of one node (``shm``, ``pcie`` or ``nvswitch``);
* the **inter-node** fabric joins the nodes' NICs (``full``, ``star``, ``fat_tree``, ``rail``
  or ``ring``), with ``nics`` NICs per node; local rank ``j`` uses NIC ``j % nics``.

A message between two ranks of one node uses only the intra-node fabric; a message between
nodes uses only the inter-node fabric. Each fabric is described by a :class:`FabricSpec` with
a nominal bandwidth (the spec sheet's line rate, per port), an efficiency (the fraction of it
a long transfer achieves) and an end-to-end latency; see :mod:`mpisim.network.builders` for
how each kind lays out its links and routes.

**Placement** decides which node hosts which rank: ``block`` fills node 0 first (rank r on
node ``r // ranks_per_node``), ``round_robin`` deals ranks out like cards (node ``r % nodes``).
It matters: a ring allreduce over block-placed ranks crosses the network twice per node,
over round-robin ranks on every step.

A :class:`TopologySpec` is the validated description (SI numbers, frozen, comparable);
:func:`build_topology` turns it into a :class:`Topology`, which creates the links and answers
``route(src, dst)`` on demand, caching each answer. Nothing is precomputed for all pairs, so a
16384-rank cluster costs only its links.

YAML form, as read by :meth:`TopologySpec.from_dict` (units are parsed here, once)::

    nodes: 16
    ranks_per_node: 8
    device: gpu
    placement: block
    intra: {kind: nvswitch, bandwidth: 300 GB/s, latency: 0.7 us, efficiency: 0.78}
    inter: {kind: rail, nics: 8, bandwidth: 200 Gbps, latency: 1.4 us, efficiency: 0.96}

**GPU collective protocols** (optional, for ``device: gpu``). A GPU collective library such
as NCCL moves data with one of a few protocols, each with its own per-hop latency and its own
share of the link's bandwidth (NCCL: LL, LL128, Simple; NVLS where the NVSwitch reduces in
the switch). A fabric may give them per link type, and the topology a fixed cost per call::

    base_latency: {LL: 6.6 us, LL128: 14 us, Simple: 8.4 us}
    intra:
      kind: nvswitch
      in_switch_reduction: true          # the switch can reduce and multicast (NVLS)
      protocols:
        LL: {latency: 0.6 us, efficiency: 0.5}    # added per message; share of bandwidth x efficiency

Protocols not given here take the GPU collective library's defaults
(:mod:`mpisim.collectives.nccl`); nothing here affects MPI point-to-point messages.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mpisim.engine.reader import (
    Block,
    Custom,
    Flag,
    MapOf,
    Spec,
    Text,
    Unit,
    Whole,
    located,  # noqa: F401  (re-exported: network modules place errors with it)
)
from mpisim.engine.units import (
    format_bandwidth,
    parse_bandwidth,
    parse_flops,
    parse_size,
    parse_time,
    parse_whole,
)
from mpisim.errors import ConfigError, TopologyError
from mpisim.network.builders import INTER_FABRICS, INTRA_FABRICS, ROUTINGS, InterFabric, IntraFabric
from mpisim.network.gpuprotocols import (
    ALLOWED_FIELD,
    COSTS_FIELD,
    GPU_PROTOCOLS,
    ProtocolSpec,
    parse_fraction,
    parse_number,
    validate_protocols,
)
from mpisim.network.links import Link, Route
from mpisim.network.routing import MULTIPATH_KINDS, extended, lanes_between, validate_routing

PLACEMENTS = ("block", "round_robin")
DEVICES = ("cpu", "gpu")
#: Host processors a topology may name (``host_cpu``): GPU collective libraries tune some costs
#: by the host's CPU vendor (NCCL's network post overhead and LL's pace across nodes).
HOST_CPUS = ("intel", "amd", "arm")
#: The least bandwidth a link, a host or a memory may have: 1 kB/s (8 kbps), slower than a
#: 9600-baud serial line. Nothing MPI has run over is slower; a value below it is a slip of units
#: (``1e-300 GB/s`` once ran and reported transfers of 1e300 us), so it is refused.
MIN_BANDWIDTH = 1e3
MIN_BANDWIDTH_TEXT = "1 kB/s (8 kbps, slower than a 9600-baud serial line)"


def too_slow(bandwidth: float, field: str) -> str:
    """Return why a non-zero *bandwidth* of *field* is below :data:`MIN_BANDWIDTH` ('' if it is not)."""
    if 0 < bandwidth < MIN_BANDWIDTH:
        return f"{field} must be at least {MIN_BANDWIDTH_TEXT}, got {format_bandwidth(bandwidth)}"
    return ""


_FABRIC_KEYS = ("kind", "bandwidth", "latency", "efficiency", "protocols")
#: Number formats a device's peak may be given for (``device_flops: {bf16: 989 TFLOPS}``).
FLOP_FORMATS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "fp4")


@dataclass(frozen=True)
class FabricSpec:
    """One fabric, intra-node or inter-node, in SI units.

    kind
        intra: ``shm`` | ``pcie`` | ``nvswitch``; inter: ``full`` | ``star`` | ``fat_tree`` |
        ``rail`` | ``ring``.
    bandwidth
        Nominal bytes/s per port: per rank (shm), per device (pcie), per GPU (nvswitch), per
        NIC (inter-node fabrics).
    latency
        End-to-end one-way latency (s) between two endpoints on the shortest path.
    efficiency
        Achievable fraction of the nominal bandwidth, in (0, 1].
    nics
        Inter-node only: NICs per node.
    oversubscription
        ``fat_tree`` and ``rail``: a leaf's downlink capacity over its uplink capacity (>= 1).
    leaf_size
        ``fat_tree`` and ``rail``: nodes per leaf switch; 0 picks it automatically (see
        :mod:`mpisim.network.builders`).
    hop_latency
        ``fat_tree`` and ``rail``: extra latency (s) on each leaf-spine link, so a cross-leaf
        path costs ``latency + 2 * hop_latency``. 0 means the spine adds nothing.
    protocols
        GPU collective protocols on this fabric (:class:`ProtocolSpec`, sorted by name); the
        ones not listed take the library's defaults.
    allowed_protocols
        The protocols NCCL may choose on this cluster (NCCL_PROTO's names, in its order; empty:
        all), e.g. ``(Simple,)`` on EFA without 128-byte ordering (:mod:`~mpisim.network.gpuprotocols`).
    in_switch_reduction, switch_chips, switch_reduce_rate
        Intra-node ``nvswitch`` only: the switch reduces and multicasts (NVLink SHARP, NVLS); over how
        many chips a GPU's links spread and each chip's FP32 adds/s (0: no bound; nccl/switchalu.py).
    in_network_reduction
        Inter-node only: the network's switches reduce (InfiniBand SHARP, NCCL's CollNet), so
        NVLS may span nodes: each GPU's in-switch-reduced block goes up to the fabric once and
        comes back reduced once. Off unless the fabric declares it.
    host_bandwidth
        Inter-node only: bytes/s the host's network stack moves through one NIC, *sent and
        received together* (0: no such cap). The cable is full duplex, but a kernel TCP stack
        in a VM handles both directions on the same cores, so ``osu_bibw`` reaches what
        ``osu_bw`` does and no more (published.md C4b). Every message leaving or entering the
        NIC crosses this one shared resource.
    routing, qps_per_connection, pod_size
        ``fat_tree`` and ``rail`` (:mod:`mpisim.network.routing`): ``adaptive`` (default) spreads
        a connection over the equal-cost uplinks, ``ecmp`` hashes each of its
        ``qps_per_connection`` queue pairs onto one spine; ``pod_size`` nodes share a pod under
        a core level (0: automatic, two levels while the spines reach every leaf).
    """

    kind: str
    bandwidth: float
    latency: float
    efficiency: float = 1.0
    nics: int = 1
    oversubscription: float = 1.0
    leaf_size: int = 0
    hop_latency: float = 0.0
    protocols: tuple[ProtocolSpec, ...] = ()
    allowed_protocols: tuple[str, ...] = ()
    in_switch_reduction: bool = False
    switch_chips: int = 0
    switch_reduce_rate: float = 0.0
    in_network_reduction: bool = False
    host_bandwidth: float = 0.0
    routing: str = "adaptive"
    qps_per_connection: int = 1
    pod_size: int = 0

    def protocol(self, name: str) -> ProtocolSpec | None:
        """Return the protocol *name* as this fabric gives it, or None if it is not listed."""
        for spec in self.protocols:
            if spec.name == name:
                return spec
        return None

    @classmethod
    def from_dict(cls, raw: Any, *, inter: bool) -> FabricSpec:
        """Parse one fabric mapping with unit strings (paths in errors are relative to it).

        Raises ConfigError for unknown or missing keys and values that do not parse.
        """
        return cls(**(INTER_FABRIC if inter else INTRA_FABRIC).read(raw, ""))

    def to_dict(self, *, inter: bool) -> dict[str, Any]:
        """Return the fabric as a mapping of SI numbers that :meth:`from_dict` reads back."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "bandwidth": self.bandwidth,
            "latency": self.latency,
            "efficiency": self.efficiency,
        }
        if inter:
            out.update(
                nics=self.nics,
                oversubscription=self.oversubscription,
                leaf_size=self.leaf_size,
                hop_latency=self.hop_latency,
            )
            if self.host_bandwidth:
                out["host_bandwidth"] = self.host_bandwidth
            if self.in_network_reduction:
                out["in_network_reduction"] = True
            if self.kind in MULTIPATH_KINDS:
                out["routing"] = self.routing
                if self.routing == "ecmp":
                    out["qps_per_connection"] = self.qps_per_connection
                if self.pod_size:
                    out["pod_size"] = self.pod_size
        elif self.in_switch_reduction:
            out["in_switch_reduction"] = True
            if self.switch_chips and self.switch_reduce_rate:
                out.update(switch_chips=self.switch_chips, switch_reduce_rate=self.switch_reduce_rate)
        if self.protocols:
            out["protocols"] = {p.name: {"latency": p.latency, "efficiency": p.efficiency} for p in self.protocols}
        if self.allowed_protocols:
            out["allowed_protocols"] = list(self.allowed_protocols)
        return out


@dataclass(frozen=True)
class TopologySpec:
    """A validated cluster description: node and rank counts, fabrics, placement (SI units)."""

    name: str
    nodes: int
    ranks_per_node: int = 1
    intra: FabricSpec | None = None
    inter: FabricSpec | None = None
    placement: str = "block"
    device: str = "cpu"
    description: str = ""
    #: GPU collectives: fixed cost (s) of one collective call per protocol, as (name, seconds)
    #: pairs sorted by name; protocols not listed take the library's defaults.
    base_latency: tuple[tuple[str, float], ...] = ()
    #: Peak dense FLOP/s of one device (rank) per number format, as (format, FLOP/s) pairs
    #: sorted by format; what the training workload's compute model divides FLOPs by.
    device_flops: tuple[tuple[str, float], ...] = ()
    #: Memory of one device in bytes (a GPU's HBM), or None if not given.
    device_memory: int | None = None
    #: Bandwidth of that memory (bytes/s): what element-wise kernels (norms, activations,
    #: softmax) are bound by, or None if not given.
    device_memory_bandwidth: float | None = None
    #: The nodes' host CPU (one of HOST_CPUS), or None if not given: what NCCL's tuner keys its
    #: network post overhead and LL's pace across nodes by (mpisim.collectives.nccl).
    host_cpu: str | None = None
    #: The GPU model (``h100-sxm``, ``a100-sxm4-80gb``, ...), or None: what the training workload's
    #: default compute model times GEMMs and kernels on (a preset's GPU is known by its name).
    gpu: str | None = None

    def peak_flops(self, fmt: str) -> float | None:
        """The device's peak FLOP/s for number format *fmt* (``bf16``), or None if not given."""
        return dict(self.device_flops).get(fmt)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], name: str = "inline") -> TopologySpec:
        """Parse a raw YAML topology mapping (values with unit strings) and validate it.

        A ``name`` key in *raw* takes precedence over the *name* argument. Error paths are
        relative (``inter.bandwidth``); the caller prefixes them (``topology``).

        Raises ConfigError for unknown keys (listing the allowed ones), missing keys and values
        that do not parse, and TopologyError for a cluster that cannot exist.
        """
        fields = TOPOLOGY.read(raw, "")
        spec = cls(**{"name": name, **fields})
        validate(spec)
        return spec

    def to_dict(self) -> dict[str, Any]:
        """Return the resolved spec as plain data (SI numbers) that :meth:`from_dict` reads back."""
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "nodes": self.nodes,
            "ranks_per_node": self.ranks_per_node,
            "device": self.device,
            "placement": self.placement,
        }
        if self.intra is not None:
            out["intra"] = self.intra.to_dict(inter=False)
        if self.inter is not None:
            out["inter"] = self.inter.to_dict(inter=True)
        if self.base_latency:
            out["base_latency"] = dict(self.base_latency)
        if self.device_flops:
            out["device_flops"] = dict(self.device_flops)
        if self.device_memory is not None:
            out["device_memory"] = self.device_memory
        if self.device_memory_bandwidth is not None:
            out["device_memory_bandwidth"] = self.device_memory_bandwidth
        if self.host_cpu is not None:
            out["host_cpu"] = self.host_cpu
        if self.gpu is not None:
            out["gpu"] = self.gpu
        return out

    @property
    def size(self) -> int:
        """Number of ranks: ``nodes * ranks_per_node``."""
        return self.nodes * self.ranks_per_node


# --------------------------------------------------------------------------------------------
# Validation


def validate(spec: TopologySpec) -> None:
    """Check that *spec* describes a cluster that can exist.

    Raises TopologyError, with the path of the offending field, for: fewer than one node or
    rank per node, an unknown placement or device, a missing fabric (intra-node when
    ``ranks_per_node > 1``, inter-node when ``nodes > 1``), and any fabric error listed in
    :func:`_validate_fabric`.
    """
    _at_least_one(spec.nodes, "nodes")
    _at_least_one(spec.ranks_per_node, "ranks_per_node")
    if spec.placement not in PLACEMENTS:
        raise TopologyError(
            f"unknown placement {spec.placement!r}; known: {', '.join(PLACEMENTS)}", "placement"
        )
    if spec.device not in DEVICES:
        raise TopologyError(f"unknown device {spec.device!r}; known: {', '.join(DEVICES)}", "device")
    if spec.device_memory_bandwidth is not None and too_slow(spec.device_memory_bandwidth, "device_memory_bandwidth"):
        raise TopologyError(too_slow(spec.device_memory_bandwidth, "device_memory_bandwidth"), "device_memory_bandwidth")
    if spec.host_cpu is not None and spec.host_cpu not in HOST_CPUS:
        raise TopologyError(f"unknown host_cpu {spec.host_cpu!r}; known: {', '.join(HOST_CPUS)}", "host_cpu")
    if spec.intra is None and spec.ranks_per_node > 1:
        raise TopologyError(
            f"an intra-node fabric is required when ranks_per_node > 1 (got {spec.ranks_per_node}), "
            "e.g. {kind: shm, bandwidth: 20 GB/s, latency: 0.2 us}",
            "intra",
        )
    if spec.inter is None and spec.nodes > 1:
        raise TopologyError(
            f"an inter-node fabric is required when nodes > 1 (got {spec.nodes}), "
            "e.g. {kind: star, bandwidth: 100 Gbps, latency: 1.5 us}",
            "inter",
        )
    if spec.intra is not None:
        _validate_fabric(spec.intra, "intra", INTRA_FABRICS)
        if spec.intra.in_switch_reduction and spec.intra.kind != "nvswitch":
            raise TopologyError(
                f"in-switch reduction needs an NVSwitch fabric, got kind {spec.intra.kind!r}",
                "intra.in_switch_reduction",
            )
        if bool(spec.intra.switch_chips) != bool(spec.intra.switch_reduce_rate) or (
                spec.intra.switch_chips and not spec.intra.in_switch_reduction):
            raise TopologyError("switch_chips and switch_reduce_rate go together, with in_switch_reduction: true",
                                "intra.switch_reduce_rate")
    for name, seconds in spec.base_latency:
        if name not in GPU_PROTOCOLS:
            raise TopologyError(f"unknown protocol {name!r}; known: {', '.join(GPU_PROTOCOLS)}", f"base_latency.{name}")
        if not (_is_number(seconds) and 0 <= seconds < math.inf):
            raise TopologyError(f"must be zero or positive, got {seconds!r}", f"base_latency.{name}")
    if spec.inter is not None:
        _validate_fabric(spec.inter, "inter", INTER_FABRICS)
        if spec.inter.in_network_reduction and not (spec.intra is not None and spec.intra.in_switch_reduction):
            raise TopologyError(
                "in-network reduction (NCCL's NVLS + CollNet) needs nodes whose NVSwitch reduces: "
                "set intra.in_switch_reduction too",
                "inter.in_network_reduction",
            )
        if spec.inter.kind == "rail" and spec.inter.nics != spec.ranks_per_node:
            raise TopologyError(
                f"a rail-optimized fabric needs one NIC per rank: nics must equal ranks_per_node "
                f"({spec.ranks_per_node}), got {spec.inter.nics}",
                "inter.nics",
            )


def _validate_fabric(fabric: FabricSpec, where: str, known: Mapping[str, object]) -> None:
    """Reject an unknown kind, a bandwidth that is not positive and finite, a negative latency,
    an efficiency outside (0, 1], fewer than one NIC, an oversubscription below 1, a negative
    leaf size and a negative hop latency."""
    if fabric.kind not in known:
        raise TopologyError(
            f"unknown {where}-node fabric kind {fabric.kind!r}; known: {', '.join(sorted(known))}",
            f"{where}.kind",
        )
    if not (_is_number(fabric.bandwidth) and 0 < fabric.bandwidth < math.inf):
        raise TopologyError(
            f"bandwidth must be positive and finite, got {fabric.bandwidth!r}", f"{where}.bandwidth"
        )
    if too_slow(fabric.bandwidth, "bandwidth"):
        raise TopologyError(too_slow(fabric.bandwidth, "bandwidth"), f"{where}.bandwidth")
    if not (_is_number(fabric.latency) and 0 <= fabric.latency < math.inf):
        raise TopologyError(f"latency must be zero or positive, got {fabric.latency!r}", f"{where}.latency")
    if not (_is_number(fabric.efficiency) and 0 < fabric.efficiency <= 1):
        raise TopologyError(f"efficiency must be in (0, 1], got {fabric.efficiency!r}", f"{where}.efficiency")
    _at_least_one(fabric.nics, f"{where}.nics")
    if not (_is_number(fabric.oversubscription) and 1 <= fabric.oversubscription < math.inf):
        raise TopologyError(
            f"oversubscription must be at least 1 (1 = non-blocking), got {fabric.oversubscription!r}",
            f"{where}.oversubscription",
        )
    if not (_is_int(fabric.leaf_size) and fabric.leaf_size >= 0):
        raise TopologyError(
            f"leaf_size must be a whole number of nodes, 0 for automatic, got {fabric.leaf_size!r}",
            f"{where}.leaf_size",
        )
    if not (_is_number(fabric.hop_latency) and 0 <= fabric.hop_latency < math.inf):
        raise TopologyError(
            f"hop_latency must be zero or positive, got {fabric.hop_latency!r}", f"{where}.hop_latency"
        )
    if not (_is_number(fabric.host_bandwidth) and 0 <= fabric.host_bandwidth < math.inf):
        raise TopologyError(
            f"host_bandwidth must be positive and finite (0: no cap), got {fabric.host_bandwidth!r}",
            f"{where}.host_bandwidth",
        )
    validate_routing(fabric, where)
    if too_slow(fabric.host_bandwidth, "host_bandwidth"):
        raise TopologyError(too_slow(fabric.host_bandwidth, "host_bandwidth") + " (0: no cap)", f"{where}.host_bandwidth")
    validate_protocols(fabric, where)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _at_least_one(value: object, path: str) -> None:
    if not (_is_int(value) and value >= 1):  # type: ignore[operator]
        raise TopologyError(f"must be a whole number of at least 1, got {value!r}", path)


# --------------------------------------------------------------------------------------------
# The YAML form, declared once (mpisim.engine.reader): read here, published as JSON Schema


def _string(what: str, choices: tuple[str, ...] = ()) -> Spec:
    """A string field; *choices*, checked by :func:`validate`, are offered to editors."""
    return Custom(Text().read, {"enum": list(choices)} if choices else {"type": "string"}, description=what)


def _fabric_kind(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"expected a fabric kind name, got {value!r}", path)
    return value


def _fabric(kinds: Mapping[str, object], extra: Mapping[str, Spec]) -> Block:
    """The fields of one fabric: the common ones, then *extra* (inter-node or intra-node only)."""
    fields: dict[str, Spec] = {
        "kind": Custom(_fabric_kind, {"enum": sorted(kinds)}, required="this key is required",
                       description="How the fabric is laid out (see mpisim.network.builders)."),
        "bandwidth": Unit(parse_bandwidth, "100 Gbps", required="this key is required",
                          description="Nominal bytes/s per port."),
        "latency": Unit(parse_time, "1 us", required="this key is required",
                        description="One-way latency between two endpoints on the shortest path."),
        "efficiency": Unit(lambda value: parse_fraction(value), "0.94",
                           description="Achievable fraction of the nominal bandwidth, (0, 1]; 94% also reads."),
    }
    for key, spec in extra.items():
        fields[key] = spec
    fields["protocols"], fields["allowed_protocols"] = COSTS_FIELD, ALLOWED_FIELD
    order = [*_FABRIC_KEYS, *(key for key in fields if key not in _FABRIC_KEYS)]
    return Block({key: fields[key] for key in order if key in fields},
                 expected="a fabric mapping such as {kind: star, bandwidth: 100 Gbps, latency: 1 us}",
                 show=repr, suggest=False)


INTER_FABRIC = _fabric(INTER_FABRICS, {
    "nics": Whole(parse_whole, description="NICs per node; local rank j uses NIC j % nics."),
    "oversubscription": Unit(lambda value: _parse_ratio(value), "2:1",
                             description="fat_tree and rail: a leaf's downlink over uplink capacity (>= 1)."),
    "leaf_size": Whole(parse_whole, description="fat_tree and rail: nodes per leaf switch (0: automatic)."),
    "hop_latency": Unit(parse_time, "0.3 us", description="fat_tree and rail: extra latency per leaf-spine link."),
    "host_bandwidth": Unit(parse_bandwidth, "25 Gbps",
                           description="Bytes/s the host's network stack moves through one NIC, both ways together."),
    "routing": _string("fat_tree and rail: adaptive (a connection spread over every equal-cost path, the default) "
                       "or ecmp (each queue pair hashed onto one spine).", ROUTINGS),
    "qps_per_connection": Whole(parse_whole, description="routing: ecmp: queue pairs a connection is split over, "
                                                         "each hashed on its own."),
    "pod_size": Whole(parse_whole, description="fat_tree and rail: nodes per pod under a core level (0: automatic)."),
    "in_network_reduction": Flag(description="The switches reduce (InfiniBand SHARP, NCCL CollNet): NVLS may span "
                                             "nodes. Off unless declared."),
})
INTRA_FABRIC = _fabric(INTRA_FABRICS, {
    "in_switch_reduction": Flag(description="nvswitch only: the switch reduces and multicasts (NVLS)."),
    "switch_chips": Whole(parse_whole, description="in_switch_reduction: switch chips a GPU's links spread over."),
    "switch_reduce_rate": Unit(parse_flops, "400 GFLOPS", description="in_switch_reduction: FP32 adds/s of one chip."),
})

TOPOLOGY = Block({
    "name": _string("The cluster's name."),
    "description": _string("What the cluster is."),
    "nodes": Whole(parse_whole, required="this key is required", description="Machines in the cluster."),
    "ranks_per_node": Whole(parse_whole, description="Ranks (cores or GPUs) on each node."),
    "device": _string("What a rank is.", DEVICES),
    "placement": _string("block (fill node 0 first) or round_robin (deal ranks like cards).", PLACEMENTS),
    "base_latency": MapOf(GPU_PROTOCOLS, Unit(parse_time, "6.6 us"), what="protocol",
                          example="{LL: 6.6 us, Simple: 8.4 us}",
                          description="GPU collectives: fixed cost of one call per protocol."),
    "intra": Custom(lambda raw, path: FabricSpec(**INTRA_FABRIC.read(raw, path)), INTRA_FABRIC.json(),
                    description="The fabric inside a node (needed when ranks_per_node > 1)."),
    "inter": Custom(lambda raw, path: FabricSpec(**INTER_FABRIC.read(raw, path)), INTER_FABRIC.json(),
                    description="The fabric between nodes (needed when nodes > 1)."),
    "device_flops": MapOf(FLOP_FORMATS, Unit(parse_flops, "989 TFLOPS"), what="number format",
                          example="{bf16: 989 TFLOPS, fp8: 1979 TFLOPS}",
                          description="Peak dense FLOP/s of one device per number format."),
    "device_memory": Unit(parse_size, "80 GB", integer=True, description="Memory of one device."),
    "device_memory_bandwidth": Unit(parse_bandwidth, "3.35 TB/s", description="Bandwidth of that memory."),
    "host_cpu": _string("The nodes' host CPU (GPU libraries tune some costs by it).", HOST_CPUS),
    "gpu": _string("The GPU model, e.g. h100-sxm (training's compute model; presets name theirs)."),
}, expected="a topology mapping (nodes, ranks_per_node, intra, inter, ...)", show=repr, suggest=False)


def _parse_ratio(value: Any) -> float:
    """Read an oversubscription ratio: a number (2) or a ratio string ("2:1")."""
    if isinstance(value, str) and ":" in value:
        left, _, right = value.partition(":")
        what = "a ratio such as 2 or '2:1'"
        return parse_number(left, what) / parse_number(right, what)
    return parse_number(value, "a ratio such as 2 or '2:1'")


# --------------------------------------------------------------------------------------------
# The built topology


class Topology:
    """A built cluster: rank placement, every link created so far, and cached routes.

    Build it with :func:`build_topology`, which validates the spec first. ``links[i].index == i``
    for every link, so network models can keep per-link state in flat lists. Links are created
    when the topology is built, except in a ``full`` mesh, whose links appear on first use, so
    ``links`` may grow while routes are being asked for.
    """

    def __init__(self, spec: TopologySpec) -> None:
        self.spec = spec
        self.nodes = spec.nodes
        self.ranks_per_node = spec.ranks_per_node
        self.size = spec.nodes * spec.ranks_per_node
        self.links: list[Link] = []
        self._routes: dict[tuple[int, int], Route] = {}
        self._pxn_routes: dict[tuple[int, int], Route] = {}
        self._paced_routes: dict[tuple[int, int, float], Route] = {}
        self._paces: dict[tuple[int, float], Link] = {}
        self._nics = spec.inter.nics if spec.inter is not None else 1
        # A fabric that can carry no traffic (intra with one rank per node, inter with one node)
        # is not built, so it adds no links.
        self.intra: IntraFabric | None = None
        self.inter: InterFabric | None = None
        if spec.intra is not None and spec.ranks_per_node > 1:
            self.intra = INTRA_FABRICS[spec.intra.kind](spec.intra, self)
        if spec.inter is not None and spec.nodes > 1:
            self.inter = INTER_FABRICS[spec.inter.kind](spec.inter, self)
        # One host-stack resource per NIC, shared by the bytes it sends and receives (see
        # FabricSpec.host_bandwidth); not directional, so it is named after the NIC alone.
        self._stacks: list[Link] = []
        if self.inter is not None and spec.inter is not None and spec.inter.host_bandwidth > 0:
            for node in range(self.nodes):
                for nic in range(self._nics):
                    self._stacks.append(self.add_link(f"node{node}.nic{nic}.stack", 0.0, spec.inter.host_bandwidth, 1.0, "net"))

    # -- placement ------------------------------------------------------------------------

    def node_of(self, rank: int) -> int:
        """Return the node that hosts *rank*."""
        if self.spec.placement == "block":
            return rank // self.ranks_per_node
        return rank % self.nodes

    def local_rank(self, rank: int) -> int:
        """Return *rank*'s index among the ranks of its node (0 .. ranks_per_node - 1)."""
        if self.spec.placement == "block":
            return rank % self.ranks_per_node
        return rank // self.nodes

    def ranks_on_node(self, node: int) -> list[int]:
        """Return the ranks hosted by *node*, in local-rank order."""
        if self.spec.placement == "block":
            first = node * self.ranks_per_node
            return list(range(first, first + self.ranks_per_node))
        return list(range(node, self.size, self.nodes))

    # -- links and routes -----------------------------------------------------------------

    def add_link(self, name: str, latency: float, bandwidth: float, efficiency: float, kind: str) -> Link:
        """Create a link, append it to :attr:`links` and return it (used by fabric builders)."""
        link = Link(name, latency, bandwidth, efficiency, kind, index=len(self.links))
        self.links.append(link)
        return link

    def route(self, src: int, dst: int) -> Route:
        """Return the route from rank *src* to rank *dst* (empty when ``src == dst``).

        Raises IndexError if either rank is outside ``0 .. size - 1``.
        """
        key = (src, dst)
        route = self._routes.get(key)
        if route is None:
            route = Route.through(self._links_between(src, dst))
            lanes = lanes_between(self, src, dst)
            if lanes:
                route = Route(route.links, route.latency, route.bottleneck, tuple(lanes))
            self._routes[key] = route
        return route

    def path_costs(self, src: int, dst: int) -> tuple[float, float]:
        """Return (latency, seconds per byte) of the route from *src* to *dst*, as :meth:`route`
        would, without building or keeping a Route (for one-off pairs of very large worlds)."""
        links = self._links_between(src, dst)
        if not links:
            return 0.0, 0.0
        bottleneck = min(link.effective_bandwidth for link in links)
        return sum(link.latency for link in links), 0.0 if math.isinf(bottleneck) else 1.0 / bottleneck

    def route_summary(self, src: int, dst: int) -> tuple[float, float, int]:
        """Return (latency, bottleneck, links) of :meth:`route` from *src* to *dst*, the same
        floats, without keeping a Route for a pair never routed (rank 0's paths to each of a
        million ranks, asked once to measure alpha and beta)."""
        route = self._routes.get((src, dst))
        if route is not None:
            return route.latency, route.bottleneck, len(route.links)
        links = self._links_between(src, dst)
        return (sum(link.latency for link in links),
                min((link.effective_bandwidth for link in links), default=math.inf), len(links))

    def _links_between(self, src: int, dst: int) -> list[Link]:
        for rank in (src, dst):
            if not 0 <= rank < self.size:
                raise IndexError(f"rank {rank} is outside this topology's ranks 0..{self.size - 1}")
        if src == dst:
            return []
        src_node, dst_node = self.node_of(src), self.node_of(dst)
        if src_node == dst_node:
            assert self.intra is not None  # validate() requires it when ranks_per_node > 1
            return self.intra.route(src, dst)
        assert self.inter is not None  # validate() requires it when nodes > 1
        nics = self._nics
        src_nic, dst_nic = self.local_rank(src) % nics, self.local_rank(dst) % nics
        links = self.inter.route(src_node, src_nic, dst_node, dst_nic)
        stacks = self.host_stacks(src_node * nics + src_nic, dst_node * nics + dst_nic)
        return [*stacks[:1], *links, *stacks[1:]] if stacks else links

    def host_stacks(self, src_port: int, dst_port: int) -> list[Link]:
        """The host-stack links of NIC ports *src_port* and *dst_port* (node * nics + nic), or []
        when the fabric has no ``host_bandwidth``."""
        return [self._stacks[src_port], self._stacks[dst_port]] if self._stacks else []

    def paced_route(self, src: int, dst: int, rate: float) -> Route:
        """Return :meth:`route` from *src* to *dst* through *src*'s *pace link* of *rate* bytes/s.

        A pace link (kind ``pace``) is no hardware: it stands for what limits a rank's sends of
        a GPU protocol beyond the links -- the CPU proxy thread that turns the protocol's
        buffers round (:mod:`mpisim.mpi.wire`). Every paced route from *src* at this *rate*
        crosses the same one, so together they move at most *rate*, each at the lesser of its
        share of the real links and of the pace, on either network model. Network models leave
        pace links out of their link statistics.
        """
        key = (src, dst, rate)
        route = self._paced_routes.get(key)
        if route is None:
            pace = self._paces.get((src, rate))
            if pace is None:
                pace = self._paces[src, rate] = self.add_link(f"pace of rank {src}", 0.0, rate, 1.0, "pace")
            route = self._paced_routes[key] = extended(self.route(src, dst), after=[pace])
        return route

    def pxn_route(self, src: int, dst: int) -> Route:
        """Return the route NCCL's PXN takes from rank *src* to rank *dst*: via the NIC of *dst*'s rail.

        PXN ("PCI x NVLink", NCCL 2.12+, ``PATH_PXN`` in NCCL's ``src/graph/topo.h``): a GPU
        that sends to a GPU of another node writes the data over its node's fabric into a
        buffer of the local GPU attached to the NIC the destination uses (NIC
        ``local_rank(dst) % nics``), and that NIC sends it, so the message stays on the
        destination's rail and never crosses rails in the network. The chunks are pipelined
        through the intermediate GPU's buffer, so the message is one transfer over both
        legs: the intra-node links to the intermediate GPU, then that GPU's NIC to *dst*.
        Within a node, or when *src* already sits on the right NIC, it is :meth:`route`.

        Raises IndexError if either rank is outside ``0 .. size - 1``.
        """
        key = (src, dst)
        route = self._pxn_routes.get(key)
        if route is None:
            via = self.pxn_proxy(src, dst)
            if via == src:
                route = self.route(src, dst)
            else:
                route = extended(self.route(via, dst), before=list(self.route(src, via).links))
            self._pxn_routes[key] = route
        return route

    def pxn_proxy(self, src: int, dst: int) -> int:
        """Return the rank on *src*'s node whose NIC carries PXN traffic from *src* to *dst* (*src* itself if none is needed)."""
        if self.node_of(src) == self.node_of(dst):
            return src
        nics = self._nics
        nic = self.local_rank(dst) % nics
        if self.local_rank(src) % nics == nic:
            return src
        # The first GPU of the node attached to that NIC (NCCL: the GPU local to the NIC).
        return self.ranks_on_node(self.node_of(src))[nic]

    def path_kind(self, src: int, dst: int) -> str:
        """Return ``"self"``, ``"intra"`` (same node) or ``"inter"`` (different nodes)."""
        if src == dst:
            return "self"
        return "intra" if self.node_of(src) == self.node_of(dst) else "inter"

    def summary(self) -> str:
        """Return a one-line description: counts, then each fabric that carries traffic.

        For example ``2 nodes x 8 GPUs, NVSwitch 300 GB/s per GPU, rail-optimized (...)``.
        """
        endpoint = "GPU" if self.spec.device == "gpu" else "rank"
        parts = [
            f"{self.nodes} node{'s' if self.nodes != 1 else ''} x "
            f"{self.ranks_per_node} {endpoint}{'s' if self.ranks_per_node != 1 else ''}"
        ]
        if self.intra is not None:
            parts.append(self.intra.describe(endpoint))
        if self.inter is not None:
            parts.append(self.inter.describe())
        return ", ".join(parts)

    def __repr__(self) -> str:
        return f"<Topology {self.spec.name!r}: {self.summary()}>"


def build_topology(spec: TopologySpec) -> Topology:
    """Validate *spec* and build its links.

    Raises TopologyError (with the offending field's path) if the spec describes a cluster
    that cannot exist.
    """
    validate(spec)
    return Topology(spec)
