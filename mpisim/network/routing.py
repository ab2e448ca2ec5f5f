"""Routing over fabrics with several equal-cost paths: the ``routing`` keys and a connection's lanes.

A multi-level fabric (``fat_tree``, ``rail``) has several equal-cost paths between two leaves,
one per spine. How a connection uses them is the fabric's ``routing``
(:class:`mpisim.network.builders._LeafSpine` explains both): ``adaptive`` spreads it over all
of them, which the builders model as one pooled uplink bundle per leaf, so a connection stays
one route; ``ecmp`` hashes each of its ``qps_per_connection`` queue pairs onto one spine, so a
connection of several queue pairs is several *lanes* (:attr:`~mpisim.network.links.Route.lanes`),
each a route of its own carrying an equal share of the bytes.

This module holds what :mod:`mpisim.network.topology` needs for that: the checks on the keys,
the lanes of a rank-to-rank connection, and the rule that a route extended with more links
(a pace link, a PXN relay) extends each of its lanes the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mpisim.errors import TopologyError
from mpisim.network.builders import ROUTINGS
from mpisim.network.links import Link, Route

if TYPE_CHECKING:
    from mpisim.network.topology import FabricSpec, Topology

#: Inter-node fabrics with several equal-cost paths between two leaves, where ``routing`` matters.
MULTIPATH_KINDS = ("fat_tree", "rail")


def validate_routing(fabric: FabricSpec, where: str) -> None:
    """Reject an unknown routing, queue pairs without ECMP, routing keys on a one-path fabric and
    a negative pod size; *where* is the fabric's path (``inter``)."""
    if fabric.routing not in ROUTINGS:
        raise TopologyError(f"unknown routing {fabric.routing!r}; known: {', '.join(ROUTINGS)}", f"{where}.routing")
    qps = fabric.qps_per_connection
    if not (isinstance(qps, int) and not isinstance(qps, bool) and qps >= 1):
        raise TopologyError(f"must be a whole number of at least 1, got {qps!r}", f"{where}.qps_per_connection")
    if qps > 1 and fabric.routing != "ecmp":
        raise TopologyError(
            f"qps_per_connection ({qps}) is how static ECMP hashes a connection; it needs routing: ecmp "
            "(adaptive routing already spreads every connection over all paths)",
            f"{where}.qps_per_connection",
        )
    if fabric.kind not in MULTIPATH_KINDS and (fabric.routing != "adaptive" or fabric.pod_size):
        key = "routing" if fabric.routing != "adaptive" else "pod_size"
        raise TopologyError(
            f"{key} applies to fabrics with several levels of switches ({', '.join(MULTIPATH_KINDS)}), "
            f"not to kind {fabric.kind!r}", f"{where}.{key}",
        )
    if not (isinstance(fabric.pod_size, int) and fabric.pod_size >= 0):
        raise TopologyError(
            f"pod_size must be a whole number of nodes, 0 for automatic, got {fabric.pod_size!r}", f"{where}.pod_size"
        )


def lanes_between(topology: Topology, src: int, dst: int) -> list[Route]:
    """The lane routes of the connection from rank *src* to rank *dst*, or [] if it is one path."""
    inter = topology.inter
    if inter is None or topology.node_of(src) == topology.node_of(dst):
        return []
    nics = inter.nics
    src_node, src_nic = topology.node_of(src), topology.local_rank(src) % nics
    dst_node, dst_nic = topology.node_of(dst), topology.local_rank(dst) % nics
    lanes = inter.lanes(src_node, src_nic, dst_node, dst_nic)
    stacks = topology.host_stacks(src_node * nics + src_nic, dst_node * nics + dst_nic)
    return [Route.through([*stacks[:1], *lane, *stacks[1:]]) for lane in lanes]


def extended(route: Route, *, before: list[Link] | None = None, after: list[Link] | None = None) -> Route:
    """*route* with *before* and *after* added around it, and around each of its lanes."""
    before, after = before or [], after or []
    lanes = tuple(Route.through([*before, *lane.links, *after]) for lane in route.lanes)
    out = Route.through([*before, *route.links, *after])
    return Route(out.links, out.latency, out.bottleneck, lanes) if lanes else out
