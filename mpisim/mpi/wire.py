"""GPU collective protocols on the wire: how a GPU library (NCCL-like) moves one message.

MPI point-to-point messages use the eager or rendezvous protocol, with CPU overheads per
message (:mod:`mpisim.mpi.protocols`). A GPU collective library moves data differently: a GPU
kernel writes straight into a buffer the peer registered in advance and raises a flag there;
there is no handshake, no CPU on the path and no host copy. Its protocols differ in how much
latency each message carries and in how much of a link's bandwidth the data reaches (NCCL,
``src/device/prims_*.h``):

==========  ===========================================================  =====================
protocol    how the data moves                                           cost per message
==========  ===========================================================  =====================
``LL``      8-byte stores, each carrying its own flag                    least latency, at most half the bandwidth
``LL128``   128-byte lines: 120 bytes of data and 8 bytes of flags        little latency, ~94 % of the bandwidth
``Simple``  whole chunks, then a memory fence and one flag               most latency, all the bandwidth
``NVLS``    the NVSwitch reduces what GPUs load and multicasts stores    see :mod:`mpisim.collectives.nccl`
==========  ===========================================================  =====================

A :class:`Wire` is one protocol's cost on the two kinds of path of a cluster: within a node
(``intra``) and between nodes (``inter``). An algorithm sends on ``comm.with_wire(wire)``, and
the World charges every message sent through that view

    time = wire.latency(path) + route latency + wire.wire_bytes(n, path) / route bandwidth

with no CPU overheads, no eager/rendezvous handshake and no copies. The protocol's latency
passes before the data moves (the link is free meanwhile), and its share *e* of the bandwidth
is modelled as bytes on the wire: the message puts ``n / e`` bytes on its links, so both
network models (contention included) charge the protocol's real cost. Message records keep
the payload's size and name the protocol.

A protocol may also have a **pace** between nodes: a rank sends at most ``pace_inter`` bytes of
payload per second across nodes, whatever the links could carry. That is not bytes on a link
but the speed of whatever turns the protocol's buffers round: NCCL's LL across nodes goes no
faster than the proxy thread recycles the LL buffers (tuning.cc ``llMaxBws``; see
:func:`mpisim.collectives.nccl.ll_pace`). The World routes such messages through their
sender's *pace link* of that rate (:meth:`mpisim.network.topology.Topology.paced_route`), so on
either network model they move at the lesser of their share of the links and of the pace.

A protocol may also pass through a **proxy** between nodes. A GPU does not drive its NIC itself:
one CPU thread per GPU (NCCL's proxy progress thread, ``src/proxy.cc``) posts every network send
and receive of every channel that crosses the network through that GPU, one after another
(``src/transport/net.cc``, ``sendProxyProgress`` / ``recvProxyProgress``). A message across nodes
keeps its sender's proxy busy ``proxy_send`` seconds and its receiver's ``proxy_recv`` seconds;
it stands for ``proxy_channels`` of the library's channels, whose posts it carries in turn, and
the protocol's latency already holds one channel's share. So a message waits while its proxy
is busy with earlier posts (the World keeps each rank's proxy as a queue served in an order
that does not depend on the simulator's order of same-instant events, :mod:`mpisim.mpi.proxy`),
and pays the other channels' posts: ``proxy x (channels - 1) / channels`` on each side.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Wire:
    """One GPU collective protocol's latency and bandwidth share on intra- and inter-node paths.

    ``efficiency_*`` is the fraction of the path's achievable bandwidth the protocol's data
    reaches (> 0; above 1 only where the switch does part of the work, as NVLS does).
    With ``pxn``, a message to another node leaves through the NIC of the destination's rail,
    relayed over the node's fabric by the GPU attached to that NIC (NCCL's PXN, used by its
    point-to-point operations: :meth:`~mpisim.network.topology.Topology.pxn_route`).
    ``pace_inter`` (bytes of payload per second, ``inf`` for none) caps what one rank sends
    across nodes; ``proxy_send`` and ``proxy_recv`` (seconds) are what one message across nodes
    costs its sender's and its receiver's proxy thread, standing for ``proxy_channels`` channels
    (see the module docstring).
    """

    name: str
    latency_intra: float = 0.0
    latency_inter: float = 0.0
    efficiency_intra: float = 1.0
    efficiency_inter: float = 1.0
    pxn: bool = False
    pace_inter: float = math.inf
    proxy_send: float = 0.0
    proxy_recv: float = 0.0
    proxy_channels: int = 1

    def latency(self, path_kind: str) -> float:
        """Seconds the protocol adds to a message on a path of kind ``intra``, ``inter`` or ``self``."""
        if path_kind == "self":
            return 0.0
        return self.latency_inter if path_kind == "inter" else self.latency_intra

    def wire_bytes(self, nbytes: int, path_kind: str) -> int:
        """Bytes a message of *nbytes* payload puts on the links of a path of kind *path_kind*."""
        efficiency = self.efficiency_inter if path_kind == "inter" else self.efficiency_intra
        if efficiency == 1.0 or nbytes == 0:
            return nbytes
        return math.ceil(nbytes / efficiency)

    def proxied(self, path_kind: str) -> bool:
        """True if a message on a path of kind *path_kind* goes through the ends' proxy threads."""
        return path_kind == "inter" and (self.proxy_send > 0.0 or self.proxy_recv > 0.0)

    def proxy_extra(self) -> float:
        """Seconds a lone message across nodes waits for the other channels' posts at both ends."""
        return (self.proxy_send + self.proxy_recv) * (self.proxy_channels - 1) / self.proxy_channels

    def lone_latency(self, path_kind: str) -> float:
        """:meth:`latency`, plus through the proxies the other channels' posts: what a lone message pays.

        A flag (a pipeline's credit) pays it too without queueing on the threads: NCCL's credit
        across nodes is the receiver's posted receive, which its thread posts for every channel.
        """
        latency = self.latency(path_kind)
        return latency + self.proxy_extra() if self.proxied(path_kind) else latency

    def wire_rate_cap(self, path_kind: str) -> float:
        """Wire bytes per second a rank may send on paths of kind *path_kind* (``inf``: no pace)."""
        if path_kind != "inter" or self.pace_inter == math.inf:
            return math.inf
        return self.pace_inter / self.efficiency_inter
