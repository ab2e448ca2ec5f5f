"""NCCL's broadcast: a pipelined chain from the root round each channel's ring.

NCCL broadcasts on its rings (``src/device/broadcast.h``, ``runRing``): in every channel the
root's share of the buffer flows along that channel's ring, starting at the root and ending
at the rank before it, in steps of one buffer slot; each rank copies a step into its output
and passes it to the next rank as soon as it has it, so all hops of the chain are busy at
once. Across nodes there is one channel per NIC (:func:`~mpisim.collectives.topology.ring_orders`:
channel c leaves every node through NIC c), so every NIC carries one channel's share.

The step is a connection's buffer slot, NCCL's buffer divided by ``NCCL_STEPS`` (8), counting
data bytes only (``src/include/device.h``): Simple 4 MiB / 8 = 512 KiB; LL128 4 915 200 / 8
bytes of which 15/16 are data, 576 000; LL 512 KiB / 8 of 16-byte lines carrying 8 data
bytes, 32 KiB. Each step is one message on the protocol the tuner picks (``tuning.cc`` times
Ring broadcast with nRanks steps of the per-step latency). Each channel has its own
connections, as NCCL's do, so channels whose chains pass the same NVLink pair share its
bandwidth at once (on the ``fairshare`` network).

**Cost** (one channel, p ranks, every hop alike; h and e the protocol's latency and bandwidth
share, s the step and n the buffer): base + (p-1)(h + α) + ((p-2)s + n)β/e -- the first step
takes p-1 hops to reach the last rank, and the remaining bytes follow it through the slowest
hop (:func:`predict_bcast`; exact on a contention-free network with whole steps of whole
wire bytes). Across nodes each NIC moves n/channels once each way: the wrap-around hop into
the root is the only one the chain does not use.
"""

from __future__ import annotations

from mpisim.collectives.bcast import segments
from mpisim.collectives.nccl import topology, tuner
from mpisim.collectives.nccl.protocols import Protocol
from mpisim.collectives.registry import algorithm
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.payload import Payload

#: Data bytes of one buffer slot (a pipeline step) per protocol, from NCCL's buffer sizes / NCCL_STEPS.
STEP_BYTES = {"LL": 32 * 1024, "LL128": 576_000, "Simple": 512 * 1024}


def chain_orders(comm: Comm, root: int) -> list[list[int]]:
    """Return each channel's chain: its ring (:func:`~mpisim.collectives.topology.ring_orders`) started at *root*."""
    chains = []
    for ring in topology.ring_orders(comm):
        i = ring.index(root)
        chains.append(ring[i:] + ring[:i])
    return chains


def predict_bcast(comm: Comm, protocol: Protocol, nbytes: int, root: int = 0) -> float:
    """Predicted time of ``nccl_ring`` broadcast: base + the first step down the chain + the rest through its slowest hop.

    In each channel's chain the first step of s bytes crosses the p-1 hops one after the
    other (each hop's latency plus s at its rate), and the channel's remaining bytes follow
    it through the slowest hop. A hop's rate is its bottleneck's, shared among all the
    channels' hops crossing the same link (at once on the ``fairshare`` network, in turn on the
    analytic one), and at most the protocol's pace between nodes. With every hop alike this is
    base + (p-1)(h + α) + ((p-2)s + n)β/e.
    """
    p = comm.size
    if p == 1:
        return 0.0
    world = comm.world
    topology = world.topology
    wire = protocol.wire
    chains = chain_orders(comm, root)
    hops = [[(comm.group[chain[i]], comm.group[chain[i + 1]]) for i in range(p - 1)] for chain in chains]
    links: dict[int, int] = {}
    for hop in (hop for chain in hops for hop in chain):
        for i in topology.route(*hop).ids:
            links[i] = links.get(i, 0) + 1
    share = nbytes / len(chains)
    step = min(STEP_BYTES[protocol.name], share)
    first, slowest = 0.0, 0.0
    for chain in hops:
        path = 0.0
        for a, b in chain:
            route, kind = topology.route(a, b), topology.path_kind(a, b)
            # The protocol's pace between nodes, if any, is a link of the hop's own (Topology.paced_route).
            rate = min(wire.wire_rate_cap(kind), *(link.effective_bandwidth / links[link.index] for link in route.links))
            per_byte = wire.wire_bytes(1 << 20, kind) / (1 << 20) / rate
            path += wire.latency(kind) + route.latency + step * per_byte
            slowest = max(slowest, per_byte)
        first = max(first, path)
    return protocol.base + first + (share - step) * slowest


def bcast_shape(comm: Comm, protocol: Protocol, nbytes: int) -> tuple[int, int]:
    """Channels and step (the payload of one message) of an ``nccl_ring`` broadcast of *nbytes* with *protocol*."""
    channels = len(topology.ring_orders(comm))
    return channels, min(STEP_BYTES[protocol.name], nbytes // channels)


def _chain_bcast_on(comm: Comm, part: Payload, chain: list[int], step: int, tag: int) -> Proc[Payload]:
    """Receive *part* down *chain* (comm ranks, root first) in steps of *step* bytes, passing each on; return it."""
    i = chain.index(comm.rank)
    nxt = chain[i + 1] if i + 1 < len(chain) else None
    pieces = segments(part, step)
    sends = []
    for k in range(len(pieces)):
        # Steps arrive in order on the connection; each goes on as soon as it is here.
        pieces[k] = yield from comm.recv(source=chain[i - 1], tag=tag)
        if nxt is not None:
            sends.append(comm.isend(pieces[k], dest=nxt, tag=tag))
    yield from comm.waitall(sends)
    return type(part).concat(pieces)


@algorithm("bcast", "nccl_ring", reference="NCCL src/device/broadcast.h (runRing), src/graph/tuning.cc",
           plan=tuner.planner("nccl_ring", "bcast"))
def nccl_ring_bcast(comm: Comm, buf: Payload, root: int, choice: tuner.Choice) -> Proc[Payload]:
    """NCCL ring broadcast: a pipelined chain from the root round every channel's ring, with the tuner's protocol.

    The buffer is split between the channels (one per NIC across nodes); in each channel the
    root's share flows along the channel's ring from the root, one buffer slot (step) per
    message, every rank passing each step on as soon as it has it. Every message rides the
    chosen protocol; the call starts with its base latency.

    Cost (one channel): base + (p-1)(h + α) + ((p-2)s + n)β/e, s the protocol's step.
    """
    p = comm.size
    if p == 1:
        return buf
    yield from tuner.launch(comm, choice)
    wired = comm.with_wire(choice.protocol.wire)
    chains = chain_orders(comm, root)
    step = STEP_BYTES[choice.protocol.name]  # a buffer slot (choice.chunk_bytes: at most a channel's share)
    parts = buf.split(len(chains))
    if comm.rank == root:
        # Step k of every channel before step k+1 of any: the channels run side by side (one
        # thread block each in NCCL), so none waits for another's whole share at the root.
        pieces = [segments(part, step) for part in parts]
        sends = [wired.isend(pieces[c][k], dest=chain[1], tag=c)
                 for k in range(max(map(len, pieces))) for c, chain in enumerate(chains) if k < len(pieces[c])]
        yield from wired.waitall(sends)
        return buf
    if len(chains) == 1:
        return (yield from _chain_bcast_on(wired, parts[0], chains[0], step, 0))
    procs = [comm.env.process(_chain_bcast_on(wired, parts[c], chain, step, c)) for c, chain in enumerate(chains)]
    yield comm.env.all_of(procs)
    return type(buf).concat([proc.value for proc in procs])


tuner.register_predictor("bcast", "nccl_ring", lambda comm, protocol, nbytes: predict_bcast(comm, protocol, nbytes))
tuner.register_shape("bcast", "nccl_ring", bcast_shape)
