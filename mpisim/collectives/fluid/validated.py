"""Where each twin is the message path: the regions ``fidelity: auto`` may time at collective fidelity.

A twin is a model of its algorithm's message path, and a model holds where it was checked. The
fidelity grid (``python -m mpisim.validation.fidelity``, and ``--gpu`` for the GPU presets at
scale) runs every algorithm both ways; ``fidelity: auto`` takes a twin only inside the region
where the grid found the two within its tolerance (2 %), and keeps the message path outside,
so the default never trades correctness for speed. ``fidelity: collective`` takes the twin
everywhere it applies: the user asked for speed and knows the tables below.

* MPI's step programs (rings, the dissemination barrier) and the pipelined trees of
  ``double_binary_tree`` are the message path's own recurrence: every row of the grid
  (full, star, fat tree, rail with 8 and 64 ranks; 4 x dgx-h100) within 0.2 %. They are
  validated everywhere (the registry's default).
* ``nccl_ring`` (one pipelined flow per hop): within 1 % on one node at every size; across
  nodes, small calls whose steps are latency (up to 1 MiB) up to :data:`RING_LATENCY_NODES`
  nodes (8 nodes: +3.8 %) and large ones whose hops are busy at once up to
  :data:`RING_BANDWIDTH_NODES` (8 and 16 nodes, 1.2 GB: 0.0 %; 32 nodes: +6.4 %, where the flows
  meet the NIC/NVLink tie differently from the messages). "Large" is per node, not per call: a
  ring's steps carry the call's bytes / ranks / channels, and while that is under two of the
  protocol's slices per channel the message path's channels still stagger (dgx-h100, LL128:
  256 MiB on 8 nodes +9.3 %, 512 MiB on 16 nodes +9.6 %; Simple, whose slice is two 512 KiB
  steps (NCCL's ``ALLREDUCE_SLICESTEPS``), at 64 MiB per node: 128 MiB on 2 nodes +9.9 %,
  256 MiB on 4 +11.6 %, 512 MiB on 8 +12.4 %) where from :data:`RING_NODE_SHARE` per node the
  two agree (LL128 from 64 MiB per node: 0.0 %; Simple: 256 MiB on 2 nodes +0.6 %, 512 MiB
  on 4 +1.2 %, 1 GiB on 4 -0.0 % and on 8 +1.6 %). Across nodes on Hopper, LL128 rings
  run at NCCL's rate per channel (protocols.ring_ll128_pace), so from 256 MiB on 4 nodes the
  tuner takes Simple, and the share is Simple's. At mid sizes on two nodes the message path's channels hide
  each other's latencies (16 MiB: +17.5 %); from 4 nodes the proxies' posts pace both paths
  (8 nodes, 16 MiB: +0.4 %), which the grid has not yet swept.
* ``nccl_tree`` (one flow per tree edge): within 2 % on one node, and with one segment per
  tree on up to :data:`TREE_NODES` nodes (one 512 KiB segment per tree, 1 MiB on 2 to 32 nodes:
  0.0 %). Across nodes a tree's segments are NCCL's chunks (:mod:`~mpisim.collectives.nccl.treechannel`),
  LL128's as small as :data:`TREE_SEGMENT_FLOOR` bytes, so one segment per tree holds up to
  that many bytes per tree (288,000 on nodes of 8 NICs, 16 trees); with two or more the twin
  charges every edge's flow for the whole call where the message path's up and down sweeps
  cross a head's NIC (and LL's pace) at different moments (2 x dgx-h100, 1 MiB, LL in 32 KiB
  chunks: 66.7 against 59.2 us); once segments pipeline across nodes the message path's NICs
  idle while the twin charges the busiest link (1.2 GB: -17 % on 8 nodes, -16 % on 16).
* ``nvls`` and ``nvls_tree`` across nodes have no twin: their streams
  (:mod:`~mpisim.collectives.nccl.nvlstree`) post a handful of messages per head, the same at
  every fidelity.

Beyond the largest node count the grid has run (32 x dgx-h100, 256 GPUs; ``--gpu`` extends it to
1,024), nothing is validated and ``auto`` keeps the message path.
"""

from __future__ import annotations

import weakref

from mpisim.collectives.calls import world_table
from mpisim.collectives.nccl.topology import channel_count
from mpisim.mpi.comm import Comm

MiB = 2**20
#: Up to how many nodes ``nccl_ring``'s twin was found within tolerance at small sizes ...
RING_LATENCY_NODES = 4
#: ... and at large sizes.
RING_BANDWIDTH_NODES = 16
#: Up to how many nodes ``nccl_tree``'s twin was found within
#: tolerance with one segment per tree.
TREE_NODES = 32
#: The smallest chunk an ``nccl_tree`` call across nodes cuts (LL128's, src/enqueue.cc
#: ``calcCollChunking``; :data:`mpisim.collectives.nccl.treechannel.LL128_FLOOR`): a tree carrying
#: no more has one segment.
TREE_SEGMENT_FLOOR = 18_000
#: Trees of a call across nodes of 8 NICs (two per NIC), for the estimate, which has no communicator.
TREE_TREES = 16
#: The largest call that is latency-bound everywhere in the grid (one segment per tree).
LATENCY_BOUND = MiB
#: The smallest call whose ring hops are all busy at once everywhere in the grid ...
BANDWIDTH_BOUND = 256 * MiB
#: ... and the share of it each node must hold: 8 GPUs x 8 channels x two of Simple's 1 MiB slices.
RING_NODE_SHARE = 128 * MiB

_NODES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def nodes_spanned(comm: Comm) -> int:
    """How many nodes *comm*'s ranks live on (worked out once per communicator, not per rank)."""
    table = world_table(_NODES, comm.world)
    nodes = table.get(comm.context)
    if nodes is None:
        node_of = comm.world.topology.node_of
        nodes = table[comm.context] = len({node_of(rank) for rank in comm.group})
    return nodes


def ring_region(nodes: int, size: int) -> bool:
    """True where ``nccl_ring``'s twin is the message path within tolerance on *nodes* nodes (module docstring)."""
    return (nodes == 1 or (nodes <= RING_LATENCY_NODES and size <= LATENCY_BOUND)
            or (nodes <= RING_BANDWIDTH_NODES and size >= max(BANDWIDTH_BOUND, nodes * RING_NODE_SHARE)))


def tree_region(nodes: int, size: int, trees: int = TREE_TREES) -> bool:
    """True where ``nccl_tree``'s twin is the message path within tolerance on *nodes* nodes: one node,
    or one segment per tree of the call's *trees*."""
    return nodes == 1 or (nodes <= TREE_NODES and size <= trees * TREE_SEGMENT_FLOOR)


def nccl_ring(comm: Comm, size: int) -> bool:
    """:func:`ring_region` for a call on *comm* (a FluidTwin's ``validated``)."""
    return ring_region(nodes_spanned(comm), size)


def nccl_tree(comm: Comm, size: int) -> bool:
    """:func:`tree_region` for a call on *comm* (a FluidTwin's ``validated``): two trees per channel."""
    return tree_region(nodes_spanned(comm), size, 2 * channel_count(comm))


#: Per algorithm name, its region on (nodes, size): what the estimate reads without a world.
REGIONS = {"nccl_ring": ring_region, "nccl_tree": tree_region}
