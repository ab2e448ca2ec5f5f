"""Directed links and routes: the capacities that bytes flow through.

A full-duplex cable is two independent :class:`Link` objects, one per direction, so traffic
one way never slows traffic the other way. Each link has a latency (seconds), a nominal
bandwidth (bytes/s, the spec sheet's line rate) and an efficiency factor: the achievable
fraction of nominal that a long transfer sees (protocol headers, encoding, flow control).
Network models use ``effective_bandwidth = bandwidth * efficiency``.

A :class:`Route` is the ordered tuple of links from one rank to another, with its total
latency and its bottleneck effective bandwidth precomputed, because the network models
read them on every message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: Link kinds. ``shm``: a rank's port to its node's shared memory; ``pcie``: a device's PCIe
#: lane bundle or a host bridge; ``nvlink``: a GPU's NVLink port to an NVSwitch; ``net``: a NIC
#: port or a switch-to-switch cable. ``pace``: no hardware -- a rank's cap on what it sends of
#: a GPU protocol across nodes (:mod:`mpisim.mpi.wire`), crossed by that rank's paced sends only
#: and left out of link statistics.
LINK_KINDS = ("shm", "pcie", "nvlink", "net", "pace")


@dataclass(eq=False, slots=True)
class Link:
    """One direction of one physical link.

    ``index`` is the link's position in its topology's ``links`` list, so models can keep
    per-link state in flat lists instead of dicts keyed by objects.
    """

    name: str
    latency: float
    bandwidth: float
    efficiency: float = 1.0
    kind: str = "net"
    index: int = -1
    effective_bandwidth: float = field(init=False)

    def __post_init__(self) -> None:
        self.effective_bandwidth = self.bandwidth * self.efficiency

    def __repr__(self) -> str:
        return f"Link({self.name!r})"


@dataclass(frozen=True, slots=True)
class Route:
    """The links from one rank to another, with total latency and bottleneck bandwidth.

    An empty route (a rank sending to itself) has zero latency and infinite bandwidth.

    ``lanes``, when not empty, are the sub-flows one connection is split into (static ECMP
    with several queue pairs, :mod:`mpisim.network.builders`): each lane is a route of its
    own carrying an equal share of every transfer's bytes, and the transfer is over when the
    last lane's bytes have arrived. ``links`` is then the first lane's, and every lane has the
    same latency and line rate, so ``latency`` and ``bottleneck`` hold for each.
    """

    links: tuple[Link, ...]
    latency: float
    bottleneck: float
    lanes: tuple[Route, ...] = field(default=(), compare=False)
    #: ``link.index`` of each link, in order (network models key their per-link state by it).
    ids: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ids", tuple(link.index for link in self.links))

    @classmethod
    def through(cls, links: tuple[Link, ...] | list[Link]) -> Route:
        """Build a route from its links, summing latencies and taking the slowest link."""
        links = tuple(links)
        latency = sum(link.latency for link in links)
        bottleneck = min((link.effective_bandwidth for link in links), default=math.inf)
        return cls(links, latency, bottleneck)

    @property
    def beta(self) -> float:
        """Seconds per byte along the route (1 / bottleneck), 0 for an empty route."""
        return 0.0 if math.isinf(self.bottleneck) else 1.0 / self.bottleneck
