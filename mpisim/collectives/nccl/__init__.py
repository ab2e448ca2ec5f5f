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
  LL, 0.92 for LL128, 1 for Simple by default);
* across nodes, the **proxy**: one CPU thread per GPU posts every network step of every
  channel, one post after another (NCCL's network post overhead each; see
  :mod:`~mpisim.collectives.nccl.protocols`), so a ring's steps queue on their GPUs' proxies.

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
    (:func:`~mpisim.collectives.trees.double_binary_tree`) between the nodes' heads, so
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
    NCCL's NVLSTree (below) -- unless the network's switches reduce (``inter.in_network_reduction``,
    SHARP: NCCL's NVLS + CollNet), where each head's part goes up to the fabric once and comes
    back reduced once, streamed the same way. NCCL's tuner offers ``nvls`` across nodes only
    with in-network reduction.
``nvls_tree``
    NCCL's NVLSTree (:mod:`.nvlstree`): the in-switch reduce-scatter streaming into a double
    binary tree per head (one GPU per NIC, at most 32) across nodes and the trees into the
    in-switch multicast, at most NCCL's bandwidth per head; what NCCL's tuner offers across
    nodes without in-network reduction, and never on one node. Without ``in_switch_reduction`` the same direct exchange runs over all
    ranks as Simple-protocol messages, with no switch help (the ``nccl`` selector never picks
    it there, and a scenario that names it there is refused: NVLS is not what such hardware runs).

Broadcast runs NCCL's pipelined ring (:mod:`~mpisim.collectives.nccl.bcast`) and alltoall
NCCL's grouped send/recv, across nodes through the destination's rail (PXN,
:mod:`~mpisim.collectives.nccl.p2p`, which also has NCCL's point-to-point send and recv).

The package, one concept per module: :mod:`.protocols` (the protocol model and NCCL's
tables), :mod:`.topology` (channels, rings, trees, NVLS groups of a communicator),
:mod:`.tuner` (the cost predictors and the choice), and the algorithms :mod:`.ring`,
:mod:`.tree`, :mod:`.nvls` (with :mod:`.nvlstree`, its streams across nodes), :mod:`.bcast`, :mod:`.p2p`. Their collective-fidelity twin
(the ring as pipelined flows) is :mod:`mpisim.collectives.fluid.nccl_ring`.
"""

from mpisim.collectives.nccl import bcast, nvls, p2p, ring, tree  # noqa: F401  (importing registers the algorithms)
from mpisim.collectives.nccl.nvlstree import predict_nvls, predict_nvls_tree
from mpisim.collectives.nccl.protocols import (
    NCCL_BASE_LATENCY,
    NCCL_EFFICIENCY,
    NCCL_HOP_LATENCY,
    NCCL_LL_MAX_BUSBW,
    NCCL_NET_OVERHEAD,
    NCCL_NET_OVERHEAD_POSTS,
    NCCL_TREE_BASE_LATENCY,
    NCCL_TREE_HOP_LATENCY,
    PROTOCOLS,
    Protocol,
    enabled_protocols,
    ll128_enabled,
    ll_max_busbw,
    ll_pace,
    ll_pace_note,
    net_overhead,
    nvls_wire,
    protocols,
    ring_protocol,
    tree_protocol,
)
from mpisim.collectives.nccl.switchalu import alu_time, switch_note
from mpisim.collectives.nccl.topology import (
    MAX_CHANNELS,
    channel_count,
    in_network_reduction,
    in_switch_reduction,
    node_members,
    node_order,
    nvls_groups,
    ring_orders,
    tree_links,
)
from mpisim.collectives.nccl.tuner import (
    ALGORITHMS,
    GPU_ALGORITHMS,
    Choice,
    best,
    call_shape,
    candidates,
    link_loads,
    predict_ring,
    predict_tree,
    tune,
)

__all__ = [
    "ALGORITHMS", "GPU_ALGORITHMS", "MAX_CHANNELS", "NCCL_BASE_LATENCY", "NCCL_EFFICIENCY", "NCCL_HOP_LATENCY",
    "NCCL_LL_MAX_BUSBW", "NCCL_NET_OVERHEAD", "NCCL_NET_OVERHEAD_POSTS", "NCCL_TREE_BASE_LATENCY",
    "NCCL_TREE_HOP_LATENCY", "PROTOCOLS", "Choice", "Protocol", "alu_time", "best",
    "call_shape", "candidates", "channel_count", "enabled_protocols", "in_network_reduction", "in_switch_reduction",
    "link_loads", "ll128_enabled",
    "ll_max_busbw", "ll_pace", "ll_pace_note", "net_overhead", "node_members", "node_order", "nvls_groups",
    "nvls_wire", "predict_nvls", "predict_nvls_tree", "predict_ring", "predict_tree", "protocols", "ring_orders", "ring_protocol",
    "switch_note", "tree_links", "tree_protocol", "tune",
]
