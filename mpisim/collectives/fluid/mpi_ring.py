"""MPI rings at collective fidelity: a ring's steps as a recurrence, its bytes as one flow per hop.

A ring algorithm (ring allreduce, allgather, reduce-scatter, and the rings inside the
hierarchical allreduce) runs p-1 or 2(p-1) steps; in each, every rank sends one block to its
right neighbour and receives one from its left (``MPI_Sendrecv``), then maybe reduces it. On
the message path that is p messages per step, each with its requests, matching and flows:
about two million messages for a 1024-rank allreduce. At ``fidelity: collective``
(:func:`fluid_mpi_ring`) the call instead, once its last rank has joined,

1. replays the **step program** as a max-plus recurrence over the ranks, vectorised with numpy
   (:func:`replay`), from the instant each rank joined: rank r starts step k+1 when its send
   and its receive of step k are complete and its reduction is done, each message timed as
   the MPI layer's direct path times it (:meth:`~mpisim.mpi.world.World.direct_costs`: send
   and receive overheads, the eager copy, the rendezvous handshake waiting for the receive to
   be posted, the bytes at the route's rate -- shared with the ring's own hops that cross the
   same link, since they move in step);
2. posts **one flow per hop** carrying all the bytes the hop's messages would carry, through
   the World, so the flows share the links with each other and with everything else in flight
   and every link's byte counter is exact. A flow that lands later than the ring's own sharing
   lets it was slowed by other traffic, and the two ranks at its ends leave that much later.

Each rank returns at its own finish time; a rank that joined late starts late in the
recurrence, and its neighbours wait for it, as on the message path.

**Where it is the message path, and where not** (tests/collectives/test_fluid_mpi_ring.py;
``reports/validation.md``, "Fidelity"). Where each hop has its links to itself (``full``, a star,
a fat tree, rails, one DGX's NVLink and its NICs) or shares them only with the ring's own hops,
every rank leaves when it does on the message path, to rounding, on both network models --
also with fast shared-memory hops and slow network hops in one ring, above the eager limit.
Three approximations remain. (a) Below the eager limit, ranks before a slow hop run ahead and
queue messages on it; here they go through one after the other, as one connection delivers
them, while the message path shares the hop between them at once, so there the call ends up
to 8 % sooner. (b) Traffic from outside the ring slows a hop by the flow's average loss over
the whole call, not step by step. (c) On ``analytic``, transfers that reach a link at
different instants are served in turn, which lets some ranks start their next step early;
the recurrence shares the link evenly (up to 7 % slower where four hops share a NIC).

A steady ring moves every rank by the same period each step: once two steps in a row have
done so and the blocks are all alike, the remaining steps are added as that period (exact for
a max-plus recurrence), so a 1024-rank ring costs a few steps, not 2046.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mpisim.collectives.calls import join_call, world_table
from mpisim.collectives.costmodel import ceil_lg
from mpisim.collectives.registry import FluidTwin
from mpisim.engine.events import Call
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.ops import Op
from mpisim.mpi.payload import Payload, SizePayload, split_offsets

__all__ = ["BARRIER", "RING_ALLGATHER", "RING_ALLREDUCE", "RING_REDUCE_SCATTER", "RingPhase", "bulk_mpi_ring",
           "ceil_blocks", "even_blocks", "fluid", "fluid_mpi_ring", "listed_blocks", "replay", "size_only"]


@dataclass(frozen=True)
class RingPhase:
    """One phase of a ring program: *steps* steps in which rank r sends, at step k, block
    ``(r - k - send_shift) mod p`` to rank r + *distance*, receives from rank r - *distance*,
    and then (unless *reduces* is False) reduces the block it received (the same size as the
    one its left neighbour sent). A ring has distance 1; a dissemination barrier is one step
    at each distance 1, 2, 4, ... with empty blocks."""

    steps: int
    send_shift: int
    reduces: bool
    distance: int = 1


def size_only(comm: Comm, buf: Payload | None = None) -> bool:
    """True if a ring call on *comm* may be timed as a step program: the data (if any) is
    size-only and the messages are MPI's (not a GPU library's).

    Real data always takes the message path, so results stay bit-identical to it.
    """
    return comm.wire is None and (buf is None or isinstance(buf, SizePayload))


def fluid(comm: Comm, buf: Payload | None = None) -> bool:
    """True if a ring inside an algorithm runs at collective fidelity: the world asks for it and
    :func:`size_only` holds (hierarchical allreduce's rings on its node and rail communicators)."""
    return comm.world.fidelity == "collective" and size_only(comm, buf)


def ceil_blocks(buf: Payload, parts: int) -> np.ndarray:
    """Bytes of the blocks of ``buf.split_ceil(parts)`` (MPICH's ring cut), without making them."""
    size = -(-buf.count // parts)
    counts = np.clip(buf.count - size * np.arange(parts, dtype=np.int64), 0, size)
    return counts * buf.dtype.itemsize


def even_blocks(buf: Payload, parts: int) -> np.ndarray:
    """Bytes of the blocks of ``buf.split(parts)`` (``np.array_split``'s cut), without making them."""
    base, extra = divmod(buf.count, parts)
    return (base + (np.arange(parts) < extra)).astype(np.int64) * buf.dtype.itemsize


def listed_blocks(blocks: Sequence[Payload]) -> Callable[[], np.ndarray]:
    """``blocks()`` for blocks already cut."""
    return lambda: np.array([b.nbytes for b in blocks], dtype=np.int64)


class _Call:
    """One ring call in progress: who has joined, when, and their wake-up events."""

    __slots__ = ("arrived", "events", "joined", "ranks")

    def __init__(self) -> None:
        self.arrived = 0
        self.events: list = []
        self.ranks: list[int] = []
        self.joined: list[float] = []


#: Calls in progress per world, keyed by (communicator context, call number).
_CALLS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def fluid_mpi_ring(comm: Comm, blocks: Callable[[], np.ndarray] | None, phases: Sequence[RingPhase]) -> Proc[None]:
    """Time a ring program over *comm* (rank r's right neighbour is r+1) at collective fidelity.

    ``blocks()`` returns the bytes of each of the p blocks the ring moves (every rank cuts its
    buffer the same way; see :func:`ceil_blocks`, :func:`even_blocks`), called once per call and
    not by every rank, so a ring over 131072 ranks never holds p blocks per rank; None for
    zero-byte messages. *phases* is its program. Every rank of *comm* calls it; it returns at
    that rank's finish time.
    """
    call, event, last = join_call(comm, _CALLS, _Call)
    call.ranks.append(comm.rank)
    call.joined.append(comm.env.now)
    if last:
        sizes = np.zeros(comm.size, dtype=np.int64) if blocks is None else blocks()
        start = np.empty(comm.size)
        start[call.ranks] = call.joined
        events = dict(zip(call.ranks, call.events, strict=True))
        _start(comm, start, sizes, tuple(phases), _succeed, events)
    yield event


def _succeed(event) -> None:
    event.succeed()


def bulk_mpi_ring(comm: Comm, blocks: Callable[[], np.ndarray] | None, phases: Sequence[RingPhase],
                  leave: Callable[[int], None]) -> None:
    """Start a ring program that every rank of *comm* enters now, as one batch: no process per rank.

    The same timing as :func:`fluid_mpi_ring` when all ranks join at this instant (one replay,
    one flow per hop), but instead of waking each rank's process it calls ``leave(rank)`` at the
    instant that rank's call returns, in the order the per-rank path would wake them.
    """
    sizes = np.zeros(comm.size, dtype=np.int64) if blocks is None else blocks()
    _start(comm, np.full(comm.size, comm.env.now), sizes, tuple(phases), leave, range(comm.size))


@dataclass(frozen=True)
class _Hops:
    """The per-hop costs of a ring (hop r: rank r to rank r+1), as arrays over r.

    ``beta`` is seconds per byte with the hop's links shared by the ring's own hops: a hop
    whose busiest link also carries k-1 other hops of the ring (which move in step with it)
    gets 1/k of that link.
    """

    latency: np.ndarray
    beta: np.ndarray
    eager_limit: np.ndarray
    rts: np.ndarray
    cts: np.ndarray
    rendezvous_overhead: np.ndarray


#: Hop costs per world, keyed by (the communicator's ranks, distance, whether bytes move).
_HOPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _hops(comm: Comm, distance: int, moves_bytes: bool) -> _Hops:
    """The costs of the hops r -> r + distance; with *moves_bytes*, their rates shared between
    them (without, every message is empty, hence eager, and needs no handshake costs)."""
    cache = world_table(_HOPS, comm.world)
    key = (tuple(comm.group), distance, moves_bytes)
    hops = cache.get(key)
    if hops is None:
        world, p = comm.world, comm.size
        pairs = [(comm.group[r], comm.group[(r + distance) % p]) for r in range(p)]
        if moves_bytes:  # the hops' routes, which their flows take: their costs are the forward paths'
            routes = [world.topology.route(a, b) for a, b in pairs]
            costs = [world.direct_costs(a, b, True, (route.latency, route.beta) if route.links else (0.0, 0.0))
                     for (a, b), route in zip(pairs, routes, strict=True)]
        else:
            costs = [world.direct_costs(a, b, False) for a, b in pairs]
        hops = _Hops(*(np.array(column) for column in zip(*costs, strict=True)))
        if moves_bytes:  # only then do the routes' links matter
            sharing: dict[int, int] = {}
            for route in routes:
                for i in route.ids:
                    sharing[i] = sharing.get(i, 0) + 1
            shared = [max((sharing[link.index] / link.effective_bandwidth for link in route.links), default=0.0)
                      for route in routes]
            hops = _with_beta(hops, np.maximum(hops.beta, shared))
        cache[key] = hops
    return hops


def hop_bytes(blocks: np.ndarray, phases: Sequence[RingPhase]) -> np.ndarray:
    """Bytes each hop carries over the whole program (hop r: rank r to r+1).

    In a phase of s steps hop r sends blocks (r - shift - k) mod p for k < s: a window of s
    blocks ending at (r - shift) mod p, summed from a cumulative sum over two laps of the ring.
    """
    p = len(blocks)
    laps = np.concatenate([[0], np.cumsum(np.concatenate([blocks, blocks]))])
    total = np.zeros(p, dtype=np.int64)
    for phase in phases:
        last = (np.arange(p) - phase.send_shift) % p + p  # the window's last block, in the second lap
        total += laps[last + 1] - laps[last + 1 - phase.steps]
    return total


def _start(comm: Comm, start: np.ndarray, blocks: np.ndarray, phases: tuple[RingPhase, ...],
           wake: Callable[[Any], None], wakes: Mapping[int, Any] | Sequence[Any]) -> None:
    """Replay the program from each rank's *start*, post its flows, and call ``wake(wakes[rank])``
    when rank leaves (its replayed finish, later if one of its flows was slowed by other traffic)."""
    world, env = comm.world, comm.env
    cfg = world.config
    p = comm.size
    distances = sorted({phase.distance for phase in phases})
    carried = {d: hop_bytes(blocks, [phase for phase in phases if phase.distance == d]) for d in distances}
    hops = {d: _hops(comm, d, bool(carried[d].any())) for d in distances}
    finish = replay(start, blocks, phases, hops, cfg.send_overhead, cfg.recv_overhead, 1.0 / cfg.copy_bandwidth,
                    cfg.reduce_cost)
    t_post = env.now
    world.tracer.count_messages(p * sum(phase.steps for phase in phases), int(sum(c.sum() for c in carried.values())))
    # A flow that lands later than the ring's own sharing of its links lets it was slowed by
    # other traffic: the ranks at its two ends are held back by as much. A rank whose replayed
    # finish comes before one of its flows could have landed leaves without it (the flows all
    # start at the last join, while the rank's own messages went earlier).
    flows = [(d, r) for d in distances for r in range(p) if carried[d][r]]
    expected = {(d, r): t_post + hops[d].latency[r] + carried[d][r] * hops[d].beta[r] for d, r in flows}
    extra: dict[tuple[int, int], float] = {}  # flow -> how much later than expected it landed
    held: dict[tuple[int, int], list[int]] = {}  # flow -> ranks waiting for it (late)

    def own(rank: int) -> list[tuple[int, int]]:
        """The flows of its sends and its receives."""
        return [hop for d in distances for hop in ((d, rank), (d, (rank - d) % p)) if hop in expected]

    def leave(rank: int) -> float | None:
        """The delay after which *rank* leaves, or None if it waits for a late flow."""
        mine = own(rank)
        late = [hop for hop in mine if hop not in extra and env.now > expected[hop]]
        if late:
            held.setdefault(late[0], []).append(rank)  # wait for that flow, then look again
            return None
        end = float(finish[rank]) + max((extra[hop] for hop in mine if hop in extra), default=0.0)
        return max(0.0, end - env.now)

    def release(ranks: Sequence[int]) -> None:
        """Let *ranks* leave, in this order: one queue entry wakes all those due at one instant."""
        _at_instants(env, wake_all, [(delay, wakes[rank]) for rank in ranks
                                     if (delay := leave(rank)) is not None])

    def wake_all(woken: list[Any]) -> None:
        for w in woken:
            wake(w)

    def landed(hop: tuple[int, int]) -> None:
        extra[hop] = max(0.0, env.now - float(expected[hop]))
        release(held.pop(hop, ()))

    # Each rank looks at its flows at its replayed finish, the ranks due at one instant in rank order.
    _at_instants(env, release, [(max(0.0, float(finish[rank]) - t_post), rank) for rank in range(p)])
    for d, r in flows:
        if world._post(comm.group[r], comm.group[(r + d) % p], int(carried[d][r]), landed, (d, r)):
            landed((d, r))


def _at_instants(env, fn: Callable[[list[Any]], None], timed: Sequence[tuple[float, Any]]) -> None:
    """Call ``fn(items)`` once per instant ``now + delay`` of the (delay, item) pairs *timed*, with that
    instant's items in their order here.

    The same order of work as one queue entry per item scheduled in this order (SimPy takes
    entries due at one instant in the order they were scheduled, and nothing else is scheduled
    between these), with one entry per instant instead: a million ranks leaving a call are not
    a million queue entries.
    """
    now = env.now
    due: dict[float, tuple[float, list[Any]]] = {}
    for delay, item in timed:
        at = now + delay  # the instant SimPy would schedule it at (now + delay, the same float)
        entry = due.get(at)
        if entry is None:
            due[at] = (delay, [item])
        else:
            entry[1].append(item)
    for delay, items in due.values():
        Call(env, fn, items, delay)


def _with_beta(hops: _Hops, beta: np.ndarray) -> _Hops:
    return _Hops(hops.latency, beta, hops.eager_limit, hops.rts, hops.cts, hops.rendezvous_overhead)


#: Rank-steps (p times the program's steps) up to which blocks of unequal sizes are replayed
#: step by step; above it they are all taken as large as the largest (see replay).
EXACT_WORK = 2**22


def replay(start: np.ndarray, blocks: np.ndarray, phases: Sequence[RingPhase], hops: Mapping[int, _Hops],
           send_overhead: float, recv_overhead: float, copy_beta: float, reduce_cost: float) -> np.ndarray:
    """Each rank's finish time of the ring program, from each rank's *start* time.

    The message path's dependencies as a max-plus recurrence (see World.direct_costs for one
    message's timing): at step k rank r posts its send to r+1 and its receive from r-1 at
    ``S[r]``; its step ends when both are complete, and its next step starts after the
    reduction of the received block, if the phase reduces. *hops* holds the hop costs of each
    phase's distance; *copy_beta* is seconds per byte of a memory copy (0 for none).
    """
    p = len(blocks)
    ranks = np.arange(p)
    s = start.astype(float).copy()
    uniform = bool(np.all(blocks == blocks[0]))
    if not uniform and p * sum(phase.steps for phase in phases) > EXACT_WORK:
        # Too long a program to replay step by step: every block as large as the largest, whose
        # steps set the ring's pace (a few blocks are a little short when p does not divide the
        # count), so the steady state can be found and skipped.
        blocks, uniform = np.full(p, blocks.max()), True
    # When the last message on each hop lands: an eager sender may run ahead of a slow hop,
    # and its messages then go through the hop's links one after the other.
    last = {d: np.full(p, -np.inf) for d in hops}
    for phase in phases:
        d, h = phase.distance, hops[phase.distance]
        k = 0
        previous_move = None
        while k < phase.steps:
            n = blocks[(ranks - k - phase.send_shift) % p]  # bytes on hop r: rank r -> r + d
            s_dst = np.roll(s, -d)  # when the receiver of hop r posts its receive
            wire = h.latency + n * h.beta
            copy = n * copy_beta
            # Eager: the sender copies and injects; the receiver matches on arrival, or copies
            # the message out of the unexpected queue if it arrived before the receive.
            inject = s + send_overhead + copy
            arrival = np.maximum(inject + wire, last[d] + n * h.beta)
            eager_recv = np.where(arrival >= s_dst, arrival + recv_overhead, s_dst + recv_overhead + copy)
            # Rendezvous: the request waits for the receive; data after the clear to send.
            matched = np.maximum(s + send_overhead + h.rts, s_dst)
            landed = matched + h.cts + h.rendezvous_overhead + wire
            eager = n <= h.eager_limit
            send_done = np.where(eager, inject, landed)
            last[d] = np.where(eager, arrival, landed)
            recv_done = np.roll(np.where(eager, eager_recv, landed + recv_overhead), d)  # rank r hears hop r - d
            done = np.maximum(send_done, recv_done)
            if phase.reduces:
                done = done + np.roll(n, d) * reduce_cost
            move = done - s
            s = done
            k += 1
            # Steady state: with every block alike, a step that moved every rank by the same
            # period as the step before will be repeated by every later step of the phase.
            if uniform and previous_move is not None and k < phase.steps:
                period = move[0]
                if np.all(np.abs(move - period) <= 1e-12 * abs(period)) and \
                        np.all(np.abs(previous_move - period) <= 1e-12 * abs(period)):
                    s = s + (phase.steps - k) * period
                    last[d] = last[d] + (phase.steps - k) * period
                    k = phase.steps
            previous_move = move
    return s


# ---------------------------------------------------------------------------------------- the twins


@functools.lru_cache(maxsize=64)
def _allreduce_phases(p: int) -> tuple[RingPhase, ...]:
    """The ring allreduce's program on *p* ranks (one tuple for every rank of a call, not one each)."""
    return RingPhase(p - 1, 1, True), RingPhase(p - 1, 0, False)


def _allreduce_program(comm: Comm, buf: Payload) -> tuple[Callable[[], np.ndarray], tuple[RingPhase, ...]]:
    """MPICH's ring allreduce (ceil-cut blocks): p-1 reducing steps, then p-1 plain ones."""
    p = comm.size
    return functools.partial(ceil_blocks, buf, p), _allreduce_phases(p)


def _allgather_program(comm: Comm, buf: Payload) -> tuple[Callable[[], np.ndarray], tuple[RingPhase, ...]]:
    """The ring allgather: p-1 plain steps of one rank's buffer each."""
    p = comm.size
    return lambda: np.full(p, buf.nbytes, dtype=np.int64), (RingPhase(p - 1, 0, False),)


def _reduce_scatter_program(comm: Comm, buf: Payload) -> tuple[Callable[[], np.ndarray], tuple[RingPhase, ...]]:
    """The ring reduce-scatter (np.array_split blocks): p-1 reducing steps."""
    p = comm.size
    return lambda: even_blocks(buf, p), (RingPhase(p - 1, 1, True),)


def _barrier_program(comm: Comm, buf: None = None) -> tuple[None, tuple[RingPhase, ...]]:
    """The dissemination barrier: ceil(lg p) rounds of zero-byte messages to the rank 2^k to the right."""
    return None, tuple(RingPhase(1, 0, False, distance=1 << k) for k in range(ceil_lg(comm.size)))


def _ring_allreduce(comm: Comm, buf: Payload, op: Op) -> Proc[Payload]:
    yield from fluid_mpi_ring(comm, *_allreduce_program(comm, buf))
    return buf


def _ring_allgather(comm: Comm, buf: Payload) -> Proc[Payload]:
    yield from fluid_mpi_ring(comm, *_allgather_program(comm, buf))
    return buf.like(buf.count * comm.size)


def _ring_reduce_scatter(comm: Comm, buf: Payload, op: Op) -> Proc[Payload]:
    p, r = comm.size, comm.rank
    yield from fluid_mpi_ring(comm, *_reduce_scatter_program(comm, buf))
    return buf.slice(*split_offsets(buf.count, p)[r:r + 2])


def _dissemination_barrier(comm: Comm) -> Proc[None]:
    yield from fluid_mpi_ring(comm, *_barrier_program(comm))


def _bulk(program: Callable[[Comm, Payload | None], tuple]) -> Callable[[Comm, Payload | None, Callable[[int], None]], None]:
    """The twin's batch form: every rank of the call enters now (see :func:`bulk_mpi_ring`)."""
    return lambda comm, buf, leave: bulk_mpi_ring(comm, *program(comm, buf), leave)


#: The twins of MPI's ring algorithms and the dissemination barrier (registered with them).
RING_ALLREDUCE = FluidTwin(_ring_allreduce, size_only, bulk=_bulk(_allreduce_program))
RING_ALLGATHER = FluidTwin(_ring_allgather, size_only, bulk=_bulk(_allgather_program))
RING_REDUCE_SCATTER = FluidTwin(_ring_reduce_scatter, size_only, bulk=_bulk(_reduce_scatter_program))
BARRIER = FluidTwin(_dissemination_barrier, size_only, bulk=_bulk(_barrier_program))
