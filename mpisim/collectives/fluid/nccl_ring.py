"""The collective-fidelity twins of NCCL's rings and trees: flows instead of messages.

NCCL's rings (allreduce, allgather, reduce-scatter) run as one pipelined flow per hop of
every channel (:func:`fluid_ring`); its trees as one flow per edge (:mod:`.tree`). Both
apply to size-only data (:func:`fluid`); real data always takes the message path.
"""

from __future__ import annotations

import math
import weakref

from mpisim.collectives.calls import join_call
from mpisim.collectives.fluid import validated
from mpisim.collectives.fluid.tree import Tree, fluid_trees
from mpisim.collectives.nccl.topology import ring_orders, tree_links
from mpisim.collectives.nccl.treechannel import tree_cut
from mpisim.collectives.nccl.tuner import Choice, launch, launch_label, proxy_extra, proxy_period
from mpisim.collectives.registry import FluidTwin
from mpisim.collectives.trees import NCCL_STEPS
from mpisim.engine.events import Call
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.ops import Op
from mpisim.mpi.payload import Payload, SizePayload
from mpisim.mpi.wire import Wire


class _FluidCall:
    """One ``nccl_ring`` call run as pipelined flows: the ranks that have arrived, and their wake-ups."""

    __slots__ = ("arrived", "events", "pending", "t_flow", "t_start")

    def __init__(self) -> None:
        self.arrived = 0
        self.events: list = []
        self.pending = 0
        self.t_start = 0.0
        self.t_flow: list[float] = []


#: Calls in progress per world, keyed by (communicator context, call number).
_FLUID: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def fluid_ring(comm: Comm, wire: Wire, rings: list[list[int]], block: float, steps: int, reducing: int) -> Proc[None]:
    """Time a ring collective as one pipelined flow per hop (``fidelity: collective``).

    NCCL moves a ring's data as a pipeline of chunks in which every hop is busy at once, so
    instead of 2(p-1) whole-block messages per hop this starts, when the last rank has
    joined, one flow per hop of every channel carrying all that hop's bytes (*steps* blocks
    of *block* bytes, as the protocol puts them on the wire). The flows share the links with
    each other and with everything else in flight, on either network model. The call then
    ends after the longer of

    * the bandwidth bound: the slowest hop's flow, plus one step's protocol latency;
    * the latency bound: *steps* times the mean hop latency (protocol + route), plus the mean
      hop's flow time -- NCCL's own model (tuning.cc: a latency per step, and the bytes);

    and, across nodes, the proxy bound: *steps* times the busiest proxy thread's work per step
    (:func:`~mpisim.collectives.nccl.tuner.proxy_period`) plus the last crossing (its latency and
    the other channels' posts, :func:`~mpisim.collectives.nccl.tuner.proxy_extra`); plus
    *reducing* blocks' reductions. These are the message path's two regimes: with
    every block in flight at once the bytes hide the latencies, with small blocks the
    latencies add up step by step, and where the proxies post faster than the steps' own
    costs allow, they pace the ring. tests/validation/test_gpu_fidelity.py checks the two paths
    within 1 % on the shipped GPU measurements (one node, and C7 across three) and from 256 MiB
    across nodes. At mid sizes on two nodes the message path is faster (16 MiB on 2 x dgx-h100:
    141.7 us against 166.5 us), because channels queued on one link hide each other's latencies
    there while this charges NCCL's per-step latency; from 4 nodes on the proxies pace both
    (8 x dgx-h100, 16 MiB: 523.2 against 525.4 us). No message is matched or recorded; the links' byte
    counters are exact.
    """
    call, event, last = join_call(comm, _FLUID, _FluidCall)
    if last:
        _start_fluid(comm, call, wire, rings, block, steps, reducing)
    yield event


def _start_fluid(comm: Comm, call: _FluidCall, wire: Wire, rings: list[list[int]], block: float, steps: int,
                 reducing: int) -> None:
    world, env = comm.world, comm.env
    topology = world.topology
    hops = [(comm.group[ring[i]], comm.group[ring[(i + 1) % len(ring)]]) for ring in rings for i in range(len(ring))]
    kinds = [topology.path_kind(a, b) for a, b in hops]
    protocol_latency = [wire.latency(kind) for kind in kinds]
    route_latency = [topology.route(a, b).latency for a, b in hops]
    # Across nodes the proxy threads post every step: the busiest one paces the call (tuner.proxy_period).
    proxy = steps * proxy_period(comm, wire, [(ring[i], ring[(i + 1) % len(ring)]) for ring in rings
                                              for i in range(len(ring))])
    call.t_start = env.now
    call.t_flow = [0.0] * len(hops)
    call.pending = len(hops)

    def finished(i: int) -> None:
        call.t_flow[i] = env.now - call.t_start
        call.pending -= 1
        if call.pending == 0:
            n = len(hops)
            bandwidth_bound = max(t + lat for t, lat in zip(call.t_flow, protocol_latency, strict=True))
            latency_bound = (steps * sum(p + r for p, r in zip(protocol_latency, route_latency, strict=True)) / n
                             + sum(t - r for t, r in zip(call.t_flow, route_latency, strict=True)) / n)
            crossing = max(p + r for p, r in zip(protocol_latency, route_latency, strict=True)) + proxy_extra(wire)
            proxy_bound = proxy + crossing if proxy else 0.0
            end = (call.t_start + max(bandwidth_bound, latency_bound, proxy_bound)
                   + reducing * block * world.config.reduce_cost)
            for event in call.events:
                Call(env, lambda ev: ev.succeed(), event, max(0.0, end - env.now))

    for i, ((a, b), kind) in enumerate(zip(hops, kinds, strict=True)):
        nbytes = steps * wire.wire_bytes(max(1, math.ceil(block)), kind)
        if world._post(a, b, nbytes, finished, i, None, route=world.wire_route(a, b, wire, kind)):
            finished(i)


def fluid(comm: Comm, buf: Payload) -> bool:
    """True if an NCCL-style call may be timed as flows: the data is size-only.

    Real data always takes the message path, so results stay bit-identical to it.
    """
    return isinstance(buf, SizePayload)


# ---------------------------------------------------------------------------------------- the twins


def _ring_allreduce(comm: Comm, buf: Payload, op: Op, choice: Choice) -> Proc[Payload]:
    """``nccl_ring`` allreduce: the launch, then 2(p-1) blocks of n/(channels p) per hop, p-1 reduced."""
    p = comm.size
    if p == 1:
        return buf
    yield from launch(comm, choice)
    rings = ring_orders(comm)
    yield from fluid_ring(comm, choice.protocol.wire, rings, buf.nbytes / (len(rings) * p), 2 * (p - 1), p - 1)
    return buf


def _ring_allgather(comm: Comm, buf: Payload, choice: Choice) -> Proc[Payload]:
    """``nccl_ring`` allgather: the launch, then p-1 blocks of one rank's share per channel per hop."""
    p = comm.size
    if p == 1:
        return buf
    yield from launch(comm, choice)
    rings = ring_orders(comm)
    yield from fluid_ring(comm, choice.protocol.wire, rings, buf.nbytes / len(rings), p - 1, 0)
    return buf.repeat(p)


def _ring_reduce_scatter(comm: Comm, buf: Payload, op: Op, choice: Choice) -> Proc[Payload]:
    """``nccl_ring`` reduce-scatter: the launch, then p-1 reduced blocks of n/(channels p) per hop."""
    p = comm.size
    if p == 1:
        return buf
    yield from launch(comm, choice)
    rings = ring_orders(comm)
    yield from fluid_ring(comm, choice.protocol.wire, rings, buf.nbytes / (p * len(rings)), p - 1, p - 1)
    return buf.split_block(p, comm.rank)


def channel_trees(comm: Comm, buf: Payload, channels: int, wire: Wire, protocol: str) -> list[Tree]:
    """The trees of an ``nccl_tree`` call: two per channel, each over half of the channel's part, cut and
    paced as the message path cuts and paces them (:func:`~mpisim.collectives.nccl.treechannel.tree_cut`)."""
    cut = tree_cut(comm, protocol, buf.nbytes)
    trees = []
    for c, part in enumerate(buf.split(channels)):
        links = tree_links(comm, c)
        trees += [Tree.over(links[t], wire, half, c, NCCL_STEPS, cut.segment, cut.channel_pace)
                  for t, half in enumerate(part.split(2))]
    return trees


def _tree_allreduce(comm: Comm, buf: Payload, op: Op, choice: Choice) -> Proc[Payload]:
    """``nccl_tree`` allreduce: two trees per channel as one flow per edge, the launch charged inside the call."""
    if comm.size == 1:
        return buf
    channels = choice.channels
    # The launch is charged inside the call: the rank waits once, for the call's end.
    yield from fluid_trees(comm, lambda: channel_trees(comm, buf, channels, choice.protocol.wire, choice.protocol.name),
                           ("nccl_tree", buf.count, buf.dtype.str, choice.protocol.name, channels),
                           choice.protocol.base, launch_label(choice) if comm.world.tracer.record_spans else "")
    return buf


#: The twins of NCCL's ring and tree algorithms (registered with them).
RING_ALLREDUCE = FluidTwin(_ring_allreduce, fluid, validated.nccl_ring)
RING_ALLGATHER = FluidTwin(_ring_allgather, fluid, validated.nccl_ring)
RING_REDUCE_SCATTER = FluidTwin(_ring_reduce_scatter, fluid, validated.nccl_ring)
TREE_ALLREDUCE = FluidTwin(_tree_allreduce, fluid, validated.nccl_tree)
