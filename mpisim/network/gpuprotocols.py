"""GPU collective protocols as a fabric declares them: their costs (``protocols``) and which are allowed.

NCCL moves a collective's bytes with one of three protocols (LL, LL128, Simple; NVLS is the
NVSwitch's reduction, which moves Simple's buffers). A fabric may give a protocol's costs on it
(``protocols: {LL: {latency: 0.6 us, efficiency: 0.5}}``), and may allow only some of them
(``allowed_protocols: [Simple]``), as ``NCCL_PROTO=Simple`` does for a whole process.

Why a fabric forbids protocols: LL and LL128 need the receiver to see a flag only after the data
it guards (8 bytes for LL, a 128-byte line for LL128). A network that does not deliver bytes in
order within 128-byte lines breaks that, so its NCCL plugin forces Simple. AWS's EFA plugin
(aws/aws-ofi-nccl ``src/platform-aws.cpp``, ``platform_config_endpoint``) asks the EFA endpoint
for ``FI_OPT_EFA_{SENDRECV,WRITE}_IN_ORDER_ALIGNED_128_BYTES``; when it cannot be set, "force the
simple protocol as the LL/LL128 protocols can lead to data corruption without data delivery
ordering" (``nccl_net_ofi_configure_nccl_proto_simple``: ``NCCL_PROTO=simple``). The p4d and
p4de entries of its platform table use the send/recv protocol, whose 128-byte ordering their
first-generation EFA lacks (aws/aws-ofi-nccl issue #76: "EFA doesn't support LL and LL128
variants"; issue #715's p4d log: "Setting FI_OPT_EFA_SENDRECV_IN_ORDER_ALIGNED_128_BYTES not
supported ... Setting NCCL_PROTO to \"simple\""). P5's EFA reports the ordering (PR #280, then
commit ece41f0, which removed the P5 exemption as no longer needed), so P5 keeps LL and LL128.

The fabric's readers of an efficiency and a plain number live here too (:func:`parse_fraction`),
since a protocol's efficiency is read as the fabric's is.

``NCCL_PROTO`` restricts the collectives' tuner only: NCCL's point-to-point operations choose LL
or Simple by size whatever it says (src/enqueue.cc ``addP2pToPlan``), and so do mpisim's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mpisim.engine.reader import Block, Choice, Custom, ListOf, MapOf, Unit
from mpisim.engine.units import parse_percent, parse_time
from mpisim.errors import ConfigError, TopologyError

if TYPE_CHECKING:
    from mpisim.network.topology import FabricSpec

#: GPU collective protocols a fabric or ``base_latency`` may name (NCCL's LL, LL128, Simple;
#: NVLS: reduction and multicast inside an NVSwitch).
GPU_PROTOCOLS = ("LL", "LL128", "Simple", "NVLS")
#: The protocols ``allowed_protocols`` may list (NCCL_PROTO's names). Simple must be among them:
#: NCCL's NVLS, NVLSTree and broadcast pipelines, and every call too large for LL, move Simple's buffers.
ALLOWABLE = ("LL", "LL128", "Simple")


@dataclass(frozen=True)
class ProtocolSpec:
    """One GPU collective protocol on one fabric (SI units).

    ``latency`` is added to every message of the protocol on this fabric, on top of the path's
    own latency (the protocol's synchronisation: flag polling, memory fences). ``efficiency``
    is the share of the fabric's achievable bandwidth (``bandwidth x efficiency``) the protocol
    reaches, in (0, 1].
    """

    name: str
    latency: float
    efficiency: float


def parse_fraction(value: Any) -> float:
    """Read an efficiency: a number (0.94) or a percentage string ("94%" or "94 %")."""
    percent = parse_percent(value)
    if percent is not None:
        return percent
    return parse_number(value, "an efficiency such as 0.94 or 94%")


def parse_number(value: Any, what: str) -> float:
    """Read a plain number (a bool is not one); ConfigError naming *what* was expected."""
    if isinstance(value, bool):
        raise ConfigError(f"expected {what}, got {value!r}")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise ConfigError(f"expected {what}, got {value!r}")


_PROTOCOL = Block({
    "latency": Unit(parse_time, "0.6 us", required="this key is required",
                    description="Added to every message of the protocol on this fabric."),
    "efficiency": Unit(parse_fraction, "0.5", required="this key is required",
                       description="Share of the fabric's achievable bandwidth the protocol reaches, (0, 1]."),
}, expected="{latency: 0.6 us, efficiency: 0.5}", show=repr, suggest=False)
_COSTS = MapOf(GPU_PROTOCOLS, _PROTOCOL, what="protocol", example="{LL: {latency: 0.6 us, efficiency: 0.5}}")


def _read_protocols(raw: Any, path: str) -> tuple[ProtocolSpec, ...]:
    """Read ``{LL: {latency: 0.6 us, efficiency: 0.5}, ...}`` into ProtocolSpecs sorted by name."""
    return tuple(ProtocolSpec(name, entry["latency"], entry["efficiency"]) for name, entry in _COSTS.read(raw, path))


_ALLOWED = ListOf(Choice(ALLOWABLE, "expected one of {choices} (NCCL_PROTO's names), got {short}"),
                  "expected a list of protocols such as [Simple], got {short}",
                  empty="expected at least one protocol, such as [Simple]")


def _read_allowed(raw: Any, path: str) -> tuple[str, ...]:
    """Read ``[Simple]`` into the allowed protocols in NCCL's order; Simple must be one of them."""
    names = _ALLOWED.read(raw, path)
    if "Simple" not in names:
        raise ConfigError("must include Simple: NCCL's in-switch algorithms and large calls run only Simple", path)
    return tuple(name for name in ALLOWABLE if name in names)


COSTS_FIELD = Custom(_read_protocols, MapOf(GPU_PROTOCOLS, _PROTOCOL, what="protocol", example="").json(),
                     description="GPU collective protocols on this fabric: {LL: {latency, efficiency}}.")
ALLOWED_FIELD = Custom(_read_allowed, _ALLOWED.json(),
                       description="GPU collective protocols NCCL may choose on this cluster, e.g. [Simple] "
                                   "(as NCCL_PROTO; EFA without 128-byte ordering). All unless given.")


def validate_protocols(fabric: FabricSpec, where: str) -> None:
    """Reject a protocol's unknown name or bad costs, and an allowed list that is not NCCL_PROTO's names with Simple."""
    for protocol in fabric.protocols:
        at = f"{where}.protocols.{protocol.name}"
        if protocol.name not in GPU_PROTOCOLS:
            raise TopologyError(f"unknown protocol {protocol.name!r}; known: {', '.join(GPU_PROTOCOLS)}", at)
        if not (_is_number(protocol.latency) and 0 <= protocol.latency < math.inf):
            raise TopologyError(f"latency must be zero or positive, got {protocol.latency!r}", f"{at}.latency")
        if not (_is_number(protocol.efficiency) and 0 < protocol.efficiency <= 1):
            raise TopologyError(f"efficiency must be in (0, 1], got {protocol.efficiency!r}", f"{at}.efficiency")
    allowed = fabric.allowed_protocols
    if allowed and (any(name not in ALLOWABLE for name in allowed) or "Simple" not in allowed):
        raise TopologyError(f"allowed_protocols must list some of {', '.join(ALLOWABLE)} with Simple among them, "
                            f"got {list(allowed)!r}", f"{where}.allowed_protocols")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
