"""NCCL's tree allreduce: chains inside nodes, a double binary tree between them, on every channel."""

from __future__ import annotations

from mpisim.collectives.allreduce import tree_allreduce
from mpisim.collectives.fluid.nccl_ring import TREE_ALLREDUCE
from mpisim.collectives.nccl.topology import tree_links
from mpisim.collectives.nccl.treechannel import tree_cut
from mpisim.collectives.nccl.tuner import Choice, launch, planner
from mpisim.collectives.registry import algorithm
from mpisim.collectives.trees import NCCL_STEPS
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.ops import Op
from mpisim.mpi.payload import Payload


@algorithm("allreduce", "nccl_tree", requires={"commutative"},
           reference="NCCL 2.4 double binary trees (src/graph/trees.cc), src/graph/tuning.cc; Sanders, Speck & Träff 2009",
           plan=planner("nccl_tree", "allreduce"), fluid=TREE_ALLREDUCE)
def nccl_tree_allreduce(comm: Comm, buf: Payload, op: Op, choice: Choice) -> Proc[Payload]:
    """NCCL tree allreduce: chains inside nodes, a double binary tree between nodes, the tuner's protocol.

    The vector is split between the channels (one per NIC across nodes, see channel_count).
    In each channel, inside each node the ranks form a chain from the node's head (local rank
    c in channel c, so each channel crosses the network through its own NIC); the heads form
    NCCL's double binary tree (see tree_links). Each of the two trees reduces half of the vector up to
    its root and broadcasts it back down, in pipelined segments (as double_binary_tree
    allreduce does, but with NCCL_STEPS segments in flight per connection and one connection
    per peer), and every message rides the chosen protocol. On many nodes it crosses the
    network 2 lg(nodes) times in sequence where the ring does 2(nodes - 1). The segments are
    NCCL's chunks for the protocol, and across nodes every rank's loops pass them on no faster
    than NCCL's thread block per channel does (:mod:`~mpisim.collectives.nccl.treechannel`).

    Cost: base + 2D(α + sβ + sγ) + sπ + (k-1) max(L sβ, (2α + sβ)/NCCL_STEPS, sπ), D = (ranks
    per node - 1) + ceil(lg nodes), k segments of s bytes per half, L trees' edges on the busiest
    link, π the thread block's seconds per byte (0 on one node and for Simple; see predict_tree). At ``fidelity: collective`` with
    size-only data its twin runs the trees as one flow per edge (:mod:`~mpisim.collectives.fluid.nccl_ring`).
    """
    p = comm.size
    if p == 1:
        return buf
    channels = choice.channels
    yield from launch(comm, choice)
    # One connection per peer, as NCCL's tree has: a sender's segments to one peer go out one
    # after the other (in flight at once they would share the link and all land at the end).
    wired = comm.with_wire(choice.protocol.wire, shared=True)
    cut = tree_cut(comm, choice.protocol.name, buf.nbytes)
    parts = buf.split(channels)
    streams = []
    for c in range(channels):
        trees = [tree[comm.rank] for tree in tree_links(comm, c)]
        halves = parts[c].split(2)
        streams += [comm.env.process(tree_allreduce(wired, halves[t], op, *trees[t], 2 * c + t, NCCL_STEPS,
                                                    cut.segment, cut.channel_pace))
                    for t in (0, 1)]
    yield comm.env.all_of(streams)
    return type(buf).concat([stream.value for stream in streams])

