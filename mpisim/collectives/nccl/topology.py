"""A communicator's layout as NCCL's algorithms see it: nodes, channels, rings, trees and NVLS groups.

NCCL's rings and trees follow the ranks node by node; across nodes it runs one channel per
NIC, each leaving every node through a different NIC (rail-optimized), so all NICs carry
traffic at once. Every rank of every call asks for these, so each is worked out once per
communicator and world (``_LAYOUTS``) and callers must not change what they get.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

from mpisim.collectives.calls import world_table
from mpisim.collectives.trees import double_binary_tree
from mpisim.mpi.comm import Comm

#: NCCL's MAXCHANNELS: at most this many channels, whatever the NICs (an NVL72 rack has 72).
MAX_CHANNELS = 32



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


def in_network_reduction(comm: Comm) -> bool:
    """True if the fabric between *comm*'s nodes reduces in its switches (SHARP: ``inter.in_network_reduction``).

    NCCL runs plain NVLS across nodes only then (NVLS + CollNet: the InfiniBand switches reduce
    each GPU's block); without it tuning.cc disables NVLS as soon as nNodes > 1 and NVLSTree
    takes its place (``collnetEnable == 0 && a == NVLS && nNodes > 1``).
    """
    inter = comm.world.topology.spec.inter
    return inter is not None and inter.in_network_reduction



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



def rail_trees(groups: Sequence[Sequence[int]], j: int, size: int) -> list[list[tuple[int | None, list[int]]]]:
    """Return the double binary trees joining local rank *j* of every node, as ``links[t][r]`` (see tree_links)."""
    rail = [members[j] for members in groups]
    links: list[list[tuple[int | None, list[int]]]] = [[(None, [])] * size for _ in range(2)]
    for i, r in enumerate(rail):
        for t, (parent, children) in enumerate(double_binary_tree(len(rail), i)):
            links[t][r] = (None if parent is None else rail[parent], [rail[c] for c in children])
    return links
