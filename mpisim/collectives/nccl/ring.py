"""NCCL's ring algorithms: allreduce, allgather and reduce-scatter on one ring per channel.

Each channel's ring (:func:`~mpisim.collectives.nccl.topology.ring_orders`) carries its share
of the vector; every message rides the protocol the tuner picked
(:func:`~mpisim.collectives.nccl.tuner.tune`), and the call starts with its base latency. The
ring loops themselves are the textbook ones (Patarasuk & Yuan 2009).
"""

from __future__ import annotations

from mpisim.collectives.fluid import nccl_ring as twins
from mpisim.collectives.nccl.topology import ring_orders
from mpisim.collectives.nccl.tuner import Choice, launch, planner
from mpisim.collectives.registry import algorithm
from mpisim.collectives.ring import allgather_steps, reduce_scatter_steps
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.ops import Op
from mpisim.mpi.payload import Payload


def ring_allreduce_on(comm: Comm, buf: Payload, op: Op, ring: list[int], tag: int) -> Proc[Payload]:
    """Ring allreduce of *buf* around *ring* (a cyclic order of comm ranks), its messages tagged *tag*.

    The ring's position i plays rank i of the textbook ring: reduce-scatter, then allgather
    (:mod:`mpisim.collectives.ring`).
    """
    blocks = buf.split(len(ring))
    yield from reduce_scatter_steps(comm, blocks, op, ring, tag)
    yield from allgather_steps(comm, blocks, ring, tag)
    return type(buf).concat(blocks)


@algorithm("allreduce", "nccl_ring", requires={"commutative"},
           reference="NCCL src/device/all_reduce.h (runRing), src/graph/tuning.cc; Patarasuk & Yuan 2009",
           plan=planner("nccl_ring", "allreduce"), fluid=twins.RING_ALLREDUCE)
def nccl_ring_allreduce(comm: Comm, buf: Payload, op: Op, choice: Choice) -> Proc[Payload]:
    """NCCL ring allreduce: one ring per channel, with the protocol the tuner picks for this size.

    The vector is split between the channels (one per NIC when the ranks span several nodes,
    see ring_orders); each channel runs the ring allreduce -- p-1 reduce-scatter steps and
    p-1 allgather steps -- around its own ring, all channels at once. Every message rides the
    chosen protocol (LL, LL128 or Simple), which sets its latency and its share of each link's
    bandwidth; the call starts with the protocol's base latency.

    Cost (one channel, one kind of hop): base + 2(p-1)(h + α + (n/p)β/e) + ((p-1)/p)nγ, with h
    and e the protocol's latency and bandwidth share (see predict_ring for channels).
    """
    if comm.size == 1:
        return buf
    yield from launch(comm, choice)
    # The channels' blocks to one neighbour share its link in first-come order (see World,
    # "Connections"): whole-block steps would otherwise fall into phase and expose latencies
    # that NCCL's chunk pipeline hides.
    wired = comm.with_wire(choice.protocol.wire, shared=True)
    rings = ring_orders(comm)
    if len(rings) == 1:
        return (yield from ring_allreduce_on(wired, buf, op, rings[0], 0))
    parts = buf.split(len(rings))
    procs = [comm.env.process(ring_allreduce_on(wired, parts[c], op, ring, c)) for c, ring in enumerate(rings)]
    yield comm.env.all_of(procs)
    return type(buf).concat([proc.value for proc in procs])



def _channel_parts(blocks: list[Payload], channels: int) -> list[list[Payload]]:
    """Return ``parts[c][i]``: channel c's share of block i (every block split the same way)."""
    split = [block.split(channels) for block in blocks]
    return [[pieces[c] for pieces in split] for c in range(channels)]


def _ring_allgather_on(comm: Comm, blocks: list[Payload], ring: list[int], tag: int) -> Proc[list[Payload]]:
    """Pass every rank's block once round *ring* (blocks indexed by comm rank; only ours is real)."""
    p = len(ring)
    i = ring.index(comm.rank)
    right, left = ring[(i + 1) % p], ring[(i - 1) % p]
    # After step k, this rank holds the blocks of the ring positions i-k-1 .. i.
    for k in range(p - 1):
        send, recv = ring[(i - k) % p], ring[(i - k - 1) % p]
        blocks[recv] = yield from comm.sendrecv(blocks[send], dest=right, sendtag=tag, source=left, recvtag=tag)
    return blocks


@algorithm("allgather", "nccl_ring",
           reference="NCCL src/device/all_gather.h (runRing), src/graph/tuning.cc", plan=planner("nccl_ring", "allgather"),
           fluid=twins.RING_ALLGATHER)
def nccl_ring_allgather(comm: Comm, buf: Payload, choice: Choice) -> Proc[Payload]:
    """NCCL ring allgather: p-1 steps per channel ring, with the protocol the tuner picks.

    Every rank's buffer is split between the channels (one ring per NIC across nodes, see
    ring_orders); in each channel the pieces travel once round that channel's ring, each step
    passing on the piece received in the step before. Every message rides the chosen
    protocol; the call starts with its base latency.

    Cost (one channel): base + (p-1)(h + α + (n/p)β/e), n = the whole gathered array.
    """
    p = comm.size
    if p == 1:
        return buf
    yield from launch(comm, choice)
    wired = comm.with_wire(choice.protocol.wire, shared=True)
    rings = ring_orders(comm)
    mine = buf.split(len(rings))
    procs = []
    for c, ring in enumerate(rings):
        blocks = [mine[c]] * p  # only blocks[rank] is real until the ring fills the others
        procs.append(comm.env.process(_ring_allgather_on(wired, blocks, ring, c)))
    yield comm.env.all_of(procs)
    gathered = [proc.value for proc in procs]
    return type(buf).concat([gathered[c][r] for r in range(p) for c in range(len(rings))])


def _ring_reduce_scatter_on(comm: Comm, blocks: list[Payload], op: Op, ring: list[int], tag: int) -> Proc[Payload]:
    """Reduce-scatter *blocks* (indexed by comm rank) round *ring*; return this rank's reduced block."""
    p = len(ring)
    i = ring.index(comm.rank)
    right, left = ring[(i + 1) % p], ring[(i - 1) % p]
    # After step k, the block of position i-k-2 here holds the contributions of positions i-k-1 .. i.
    for k in range(p - 1):
        send, recv = ring[(i - k - 1) % p], ring[(i - k - 2) % p]
        incoming = yield from comm.sendrecv(blocks[send], dest=right, sendtag=tag, source=left, recvtag=tag)
        blocks[recv] = yield from comm.reduce_local(op, incoming, blocks[recv])
    return blocks[comm.rank]


@algorithm("reduce_scatter", "nccl_ring", requires={"commutative"},
           reference="NCCL src/device/reduce_scatter.h (runRing), src/graph/tuning.cc",
           plan=planner("nccl_ring", "reduce_scatter"), fluid=twins.RING_REDUCE_SCATTER)
def nccl_ring_reduce_scatter(comm: Comm, buf: Payload, op: Op, choice: Choice) -> Proc[Payload]:
    """NCCL ring reduce-scatter: p-1 reducing steps per channel ring, with the tuner's protocol.

    The buffer is cut into p blocks (block r ends up at rank r), and each block is split
    between the channels; in each channel, the partial sum of a block travels once round the
    ring, every rank adding its own contribution, and arrives complete at the block's owner.
    Every message rides the chosen protocol; the call starts with its base latency.

    Cost (one channel): base + (p-1)(h + α + (n/p)β/e) + ((p-1)/p)nγ.
    """
    p = comm.size
    if p == 1:
        return buf
    yield from launch(comm, choice)
    wired = comm.with_wire(choice.protocol.wire, shared=True)
    rings = ring_orders(comm)
    parts = _channel_parts(buf.split(p), len(rings))
    procs = [comm.env.process(_ring_reduce_scatter_on(wired, list(parts[c]), op, ring, c))
             for c, ring in enumerate(rings)]
    yield comm.env.all_of(procs)
    return type(buf).concat([proc.value for proc in procs])
