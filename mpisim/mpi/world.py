"""The simulated MPI library: message matching, eager and rendezvous protocols, deadlock detection.

One :class:`World` exists per simulation. It owns, for every rank, a mailbox with MPI's two
matching queues, and it moves messages through the network model with the protocol a real
MPI library would choose:

================  ==================================  =======================================
protocol          the send completes when             wire traffic
================  ==================================  =======================================
eager  (n <= L)   the local copy is done              data
rendezvous        the data has been delivered         RTS -> CTS -> data -> FIN
================  ==================================  =======================================

*L* is the eager limit of the path (shared memory and network limits differ). RTS, CTS and FIN
are control messages of ``header_bytes``. With the receive already posted and overheads zero,
on one link of latency alpha and seconds-per-byte beta, the time from posting the send to
the receive completing is ``alpha + n*beta`` (eager) and ``3*alpha + (n + 2h)*beta``
(rendezvous). An eager message that arrives before its receive is posted waits in the
*unexpected queue* and pays a memory copy when it is matched; a rendezvous sender simply
waits for the receiver. A message sent through ``comm.with_wire(wire)`` belongs to a GPU
collective library instead: no eager/rendezvous choice, no CPU overheads or copies, but its
protocol's latency and bandwidth share (:mod:`mpisim.mpi.wire`).

**Connections.** A GPU library's messages from one rank to another with one tag travel
through one connection, in order: a message's bytes start to move only when the previous
message's bytes have landed, as chunks go back to back through one queue pair or one NVLink
buffer. An algorithm may ask for one connection per peer whatever the tags
(``comm.with_wire(wire, shared=True)``): the ring's channels do, standing in for NCCL's chunk
pipeline (below). The sender does not wait (its send is
complete at once), so the next message's latency runs while the previous one's bytes are
still moving; only the bandwidth phases are serial, and the pair's link stays busy. Flags
(zero-byte messages: a pipeline's credits) do not queue behind chunks. Without
this, messages of one pair would share the link at once (processor sharing): each finishes
later than first-come order lets it, a sender running ahead of a slow NIC slows its own
earlier messages, and channels that fall into phase stop hiding each other's latency, so a
ring's time jumps with small changes of bandwidth (faster NICs could even make it slower).
Deep chunk pipelines such as NCCL's behave like the connection.

**Matching** follows the MPI standard: a receive matches a message with the same context
(communicator), and the same source and tag unless it uses ``ANY_SOURCE``/``ANY_TAG``.
Messages between one pair of ranks are *non-overtaking*: they are offered to matching in the
order they were sent, even if a later small message physically arrives before an earlier
large one (an arrival that is ahead of its turn is held back).

**Collective fidelity** (``fidelity: collective``): a size-only message that an algorithm sends
inside a collective call (on a communicator's collective context, or on one derived from it:
``Comm.internal``) takes the *direct path*; a user's own messages never do. Matching, the
non-overtaking order, the per-message CPU overheads and copies, and the data's one flow
through the network model (sharing links with everything else in flight) are the message
path's own; what goes is the wire traffic of the rendezvous handshake and the record. An
eager message is then exactly the message path's, without its record. A rendezvous message
sends no RTS, CTS or FIN flows: the RTS and the CTS become delays of what a lone header takes
on the route (latency + ``header_bytes`` / bottleneck bandwidth), so the data still waits for
the receive to be posted and for the round trip, and the FIN, which nobody waits for, is
dropped. That is the approximation: the control messages no longer load the links (a few
dozen bytes beside a message above the eager limit), nor do they wait behind other traffic.
It removes three of a rendezvous message's four flows, and the fair-share components that
FIN and RTS flows of consecutive steps chain across all ranks. Real data always takes the
message path, so results stay bit-identical. Algorithms whose steps repeat (the MPI rings)
go one level further and send no messages at all: they replay their steps as a recurrence
with the costs :meth:`World.direct_costs` states (mpisim.collectives.fluid_mpi_ring).

**Deadlock**: SimPy's event loop stops when nothing is scheduled. If ranks are still blocked
then, nothing can ever wake them: :meth:`World.run` raises :class:`DeadlockError` naming each
blocked rank, the call it is blocked in and the cycle of waits between ranks.
"""

from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import simpy
from simpy.events import PENDING

from mpisim.engine.events import URGENT, Call
from mpisim.engine.records import MessageRecord, SpanRecord
from mpisim.engine.sim import run_until_idle
from mpisim.errors import (
    CollectiveMismatchError,
    DeadlockError,
    InvalidRankError,
    InvalidTagError,
    LimitReached,
    TruncationError,
    UnstartedCallError,
)
from mpisim.mpi.config import MpiConfig
from mpisim.mpi.constants import ANY_SOURCE, ANY_TAG, MAX_TAG, PROC_NULL
from mpisim.mpi.cost import DirectCosts, MessageCost, message_cost
from mpisim.mpi.ops import Op
from mpisim.mpi.payload import DataPayload, Payload, SizePayload, as_payload
from mpisim.mpi.request import Request, Status
from mpisim.mpi.wire import Wire

if TYPE_CHECKING:
    from mpisim.engine.sim import Proc, Simulation
    from mpisim.mpi.comm import Comm
    from mpisim.network.base import NetworkModel
    from mpisim.network.links import Route
    from mpisim.network.topology import Topology


class Message:
    """A message in flight: its envelope (context, source, tag), payload and protocol state."""

    __slots__ = (
        "connection", "context", "direct", "dst", "nbytes", "payload", "protocol", "recv_req", "send_req", "seq",
        "src", "src_rank", "t_data", "t_match", "t_phase", "t_post", "tag", "unexpected", "user", "wire",
    )

    def __init__(self, src: int, dst: int, src_rank: int, context: int, tag: int,
                 payload: Payload, user: Any, protocol: str, send_req: Request, t_post: float) -> None:
        self.src = src  # world ranks
        self.dst = dst
        self.src_rank = src_rank  # sender's rank in the communicator
        self.context = context
        self.tag = tag
        self.payload = payload
        self.user = user  # what the receiver gets back (an array, or the payload itself)
        self.nbytes = payload.nbytes
        self.protocol = protocol
        self.send_req = send_req
        self.seq = 0
        self.t_post = t_post
        self.t_match = -1.0
        self.t_data = -1.0
        self.t_phase = -1.0  # start of the protocol phase in progress (for its span)
        self.unexpected = False
        self.wire: Wire | None = None  # a GPU collective protocol (see mpisim.mpi.wire), else MPI's
        self.recv_req: Request | None = None  # the receive it matched
        #: On the collective-fidelity direct path (see World, "Collective fidelity"): its
        #: handshake is timed, not sent, and it leaves no record.
        self.direct = False

    def describe(self) -> str:
        return f"message from rank {self.src} to rank {self.dst} (tag {self.tag}, {self.nbytes} B, {self.protocol})"


class Mailbox:
    """One rank's matching state: posted receives, unexpected messages, pending probes."""

    __slots__ = ("held", "next_seq", "posted", "probes", "unexpected")

    def __init__(self) -> None:
        self.posted: list[Request] = []
        self.unexpected: list[Message] = []
        self.probes: list[tuple[int, int, int, simpy.Event]] = []
        self.next_seq: dict[int, int] = {}  # source world rank -> next sequence number to match
        self.held: dict[tuple[int, int], Message] = {}  # (source, seq) arrived ahead of its turn


#: How a blocking call is named in deadlock reports and span labels: the name itself, or
#: ``(function, *arguments)`` that returns it, so the string is only built when it is read.
CallName = str | tuple


def call_name(call: CallName) -> str:
    """Return the name of a blocking call (see :data:`CallName`)."""
    return call if isinstance(call, str) else call[0](*call[1:])


class RankState:
    """What a rank is doing, for deadlock reports: the blocking call and the requests it waits on."""

    __slots__ = ("call", "collective", "finished", "opened", "waiting_on")

    def __init__(self) -> None:
        self.call: CallName = ""
        #: The user's collective call in progress: (communicator, call number, signature), or
        #: None. A deadlock inside a collective is reported as that call, not as the
        #: algorithm's internal sends and receives, which the user never wrote.
        self.collective: tuple[Any, int, str] | None = None
        self.waiting_on: Sequence[Request] = ()
        self.finished = False
        #: (span kind, start time, peer, bytes) of the blocking call in progress, so a deadlock
        #: can still draw the span of a call that never returns.
        self.opened: tuple[str, float, int, int] = ("wait", 0.0, -1, 0)

    @property
    def blocked_call(self) -> str:
        """The call the rank is blocked in, e.g. ``recv(source=3, tag=ANY_TAG)`` ('' if none)."""
        return call_name(self.call)


def _succeed(env: simpy.Environment, req: Request, value: Any) -> None:
    """``req.succeed(value)``: the same scheduling, one method call less (once per message)."""
    if req._value is not PENDING:
        raise RuntimeError(f"{req} has already been triggered")
    req._ok = True
    req._value = value
    # NOTE: mpisim's Environment.schedule(), inlined: due now, at NORMAL priority, in its lane.
    lane = getattr(env, "_lane", None)
    if lane is not None:
        lane.append((next(env._eid), req))
    else:
        env.schedule(req)


def _matches(req: Request, context: int, src_rank: int, tag: int) -> bool:
    return (
        req.comm.context == context
        and (req.peer == ANY_SOURCE or req.peer == src_rank)
        and (req.tag == ANY_TAG or req.tag == tag)
    )


class World:
    """All ranks of one simulation and the MPI library that connects them."""

    def __init__(self, sim: Simulation, topology: Topology, network: NetworkModel,
                 config: MpiConfig | None = None, *, algorithms: dict[str, Any] | None = None,
                 selector: str = "mpich", fidelity: str = "message") -> None:
        self.sim = sim
        self.env = sim.env
        self.tracer = sim.tracer
        self.topology = topology
        self.network = network
        self.config = config or MpiConfig()
        self.size = topology.size
        #: Default algorithm per collective (``{"allreduce": "ring"}``); missing means ``auto``.
        self.algorithms: dict[str, Any] = dict(algorithms or {})
        #: Rule set used by ``auto``: ``mpich`` or ``model``.
        self.selector = selector
        #: ``message``: every message simulated; ``collective``: NCCL rings run as pipelined
        #: flows (mpisim.collectives.nccl) and the MPI algorithms' size-only messages take the
        #: direct path (see "Collective fidelity" above).
        self.fidelity = fidelity
        self.mailboxes = [Mailbox() for _ in range(self.size)]
        self.states = [RankState() for _ in range(self.size)]
        self._send_seq: dict[tuple[int, int], int] = {}
        #: GPU-library connections with bytes in flight: (src, dst, context[, tag]) -> messages
        #: waiting behind them, each with the instant its latency began (see "Connections").
        self._connections: dict[tuple[int, ...], list[tuple[Message, float]]] = {}
        # With a rendezvous overhead: per (src, dst) MPI socket between nodes, the rendezvous
        # messages whose CTS has arrived, in order; the first holds it until its data has arrived.
        self._sockets: dict[tuple[int, int], deque[Message]] = {}
        self._contexts: dict[tuple, int] = {}
        self._groups: dict[int, tuple[int, ...]] = {}  # see shared_group
        self._next_context = 2  # 0 and 1 belong to COMM_WORLD (point-to-point, collectives)
        self._collective_calls: dict[tuple[int, int], tuple[str, int, int]] = {}
        self._sync_event = self.env.event()
        self._sync_count = 0
        self._processes: list[simpy.Process] = []
        self.unmatched: list[str] = []
        #: SimPy events processed by :meth:`run` (a benchmark figure: events per second).
        self.events_processed = 0
        self._node_of = [topology.node_of(rank) for rank in range(self.size)]  # read per message
        #: Start a protocol step now, at URGENT priority (where SimPy would start a process).
        self._call_soon: Callable[[Callable[[Any], None], Any], None] = getattr(
            self.env, "call_soon", self._urgent_call)
        self._world_comms: list[Comm] | None = None
        #: The class of the ranks' ``COMM_WORLD`` handles: :class:`Comm`, or a subclass such as
        #: :class:`~mpisim.mpi.usercomm.UserComm` for user programs (set before :meth:`launch`).
        self.comm_class: type[Comm] | None = None
        #: Blocking calls a program made without ``yield from`` (:mod:`mpisim.mpi.pending`), as
        #: (rank, report line): they lead a deadlock report, and fail a run that ends without one.
        self.lost_calls: list[tuple[int, str]] = []
        #: Optional ``locate(rank) -> str``: where in the user's source a rank is (``ring.py:14: ...``),
        #: set by runners of unchanged programs so reports can name the line.
        self.locate: Callable[[int], str] | None = None
        #: Optional ``origin() -> (file, line)``: the line of the user's source that is sending now,
        #: kept on the send request so a message nobody received can be listed with it.
        self.origin: Callable[[], tuple[str, int] | None] | None = None
        #: Start a transfer and call ``fn(arg)`` when it has arrived; True if it was over at once.
        self._post: Callable[..., bool] = getattr(network, "post", self._post_via_transfer)

    # ------------------------------------------------------------------ communicators

    def comm_world(self, rank: int) -> Comm:
        """Return rank *rank*'s handle on ``COMM_WORLD``."""
        from mpisim.mpi.comm import Comm  # same layer; comm imports world

        if self._world_comms is None:
            group = tuple(range(self.size))
            cls = self.comm_class or Comm
            self._world_comms = [cls(self, group, r, 0) for r in range(self.size)]
        return self._world_comms[rank]

    def shared_group(self, context: int, group: Callable[[], tuple[int, ...]]) -> tuple[int, ...]:
        """Return the world ranks of communicator *context*: one tuple that all its members share.

        *group* makes it the first time. Each member of a 1024-rank data-parallel group holding
        its own copy would be a million entries per group kind on 8192 ranks.
        """
        members = self._groups.get(context)
        if members is None:
            members = self._groups[context] = group()
        return members

    def context_for(self, key: tuple) -> int:
        """Return the context id of the communicator identified by *key*, allocating it once.

        Every member computes the same *key* (parent context, how it was made, the group), so
        all members agree on the id without exchanging messages. Ids come in pairs: even for
        point-to-point, odd for the communicator's collectives.
        """
        ctx = self._contexts.get(key)
        if ctx is None:
            ctx = self._contexts[key] = self._next_context
            self._next_context += 2
        return ctx

    # ------------------------------------------------------------------ running programs

    def launch(self, program: Callable[..., Proc[Any]], *args: Any, ranks: Iterable[int] | None = None) -> list[simpy.Process]:
        """Start ``program(comm, *args)`` as a SimPy process on every rank (or on *ranks*)."""
        procs = []
        for rank in ranks if ranks is not None else range(self.size):
            procs.append(self.env.process(self._rank_main(rank, program, args)))
        self._processes.extend(procs)
        return procs

    def _rank_main(self, rank: int, program: Callable[..., Proc[Any]], args: tuple) -> Proc[Any]:
        try:
            result = yield from program(self.comm_world(rank), *args)
        finally:
            self.states[rank].finished = True
        return result

    def run(self) -> None:
        """Run until every rank has finished; raise DeadlockError if some never can.

        Messages still in an unexpected queue at the end are listed in :attr:`unmatched`.
        """
        try:
            self.events_processed += run_until_idle(self.env)
        except LimitReached as error:
            # Say where every rank was when the run stopped, as a deadlock report does.
            unfinished = [r for r, st in enumerate(self.states) if not st.finished]
            lines = self.where_ranks_are()
            shown = lines[:32] + ([f"  ... and {len(lines) - 32} more ranks"] if len(lines) > 32 else [])
            finished = self.size - len(unfinished)
            error.args = ("\n".join([str(error), f"  {finished} of {self.size} ranks had finished", *shown]),)
            error.ranks = unfinished
            error.calls = [self._user_call(rank) or "running" for rank in unfinished]
            raise
        blocked = [r for r, st in enumerate(self.states) if not st.finished and st.call]
        if any(p.is_alive for p in self._processes):
            self._close_blocked_spans(blocked)
            error = DeadlockError("\n".join([*self._lost_report(), self._deadlock_report(blocked)]))
            error.ranks = blocked
            error.calls = [self._user_call(rank) for rank in blocked]
            raise error
        if self.lost_calls:
            raise UnstartedCallError("\n".join(self._lost_report()))
        for rank, box in enumerate(self.mailboxes):
            for msg in box.unexpected:
                origin = msg.send_req.origin
                sent_at = f", sent at {os.path.basename(origin[0])}:{origin[1]}" if origin else ""
                self.unmatched.append(f"rank {rank} never received the {msg.describe()}{sent_at}")

    def synchronize(self, rank: int) -> Proc[None]:
        """Release all ranks at the same instant, at no simulated cost (a measurement aid, not MPI).

        Benchmarks use it for a synchronised entry into a collective, so the collective's time
        (last exit minus first entry) is not polluted by a preceding barrier's skew.
        """
        event = self._sync_event
        self._sync_count += 1
        if self._sync_count == self.size:
            self._sync_count = 0
            self._sync_event = self.env.event()
            event.succeed()
            return
        state = self.states[rank]
        state.call = "synchronize()"
        yield event
        state.call = ""

    # ------------------------------------------------------------------ sending

    def message_cost(self, src: int, dst: int, nbytes: int) -> MessageCost:
        """The phases of an MPI message of *nbytes* from world rank *src* to *dst*, alone on its route.

        ``message_cost(src, dst, n).lone`` is the time from posting the send to the receive
        completing, with the receive posted first, as the protocols below give it
        (:mod:`mpisim.mpi.cost`, from :meth:`direct_costs`); models that replay an algorithm
        without its messages use it.
        """
        return message_cost(self.config, self.direct_costs(src, dst), nbytes)

    def post_send(self, comm: Comm, buf: Any, dest: int, tag: int, *, synchronous: bool = False) -> Request:
        """Start sending *buf* to communicator rank *dest*; return the send request."""
        if not 0 <= dest < len(comm.group):
            self._check_rank(comm, dest, "dest", "send")
        if not 0 <= tag <= MAX_TAG:
            raise InvalidTagError(f"rank {comm.world_rank}: send(dest={dest}, tag={tag}): tags must be in 0..{MAX_TAG} "
                                  "(MPI_TAG_UB)")
        if dest == PROC_NULL:
            req = Request(self.env, "send", comm, dest, tag, 0, "null")
            req.succeed()
            return req
        # A user's array is copied, as MPI's send semantics allow the sender to reuse it at once;
        # payloads from collectives are immutable values and travel by reference. An owned
        # (writable) payload is read when its data leaves: an eager send copies it now, a
        # rendezvous send when the data is delivered (_data_arrived).
        if buf.__class__ is SizePayload or buf.__class__ is DataPayload or isinstance(buf, Payload):
            payload, user = buf, buf
        else:
            array = np.array(buf, copy=True)
            payload = as_payload(array)
            user = array
        rank = comm._rank  # NOTE: the Comm.rank and Comm.world_rank properties, inlined
        src, dst = comm.group[rank], comm.group[dest]
        nbytes = payload.nbytes
        wire = None if synchronous else comm.wire
        # NOTE: Topology.path_kind and MpiConfig.eager_limit, inlined with a per-rank node table.
        node = self._node_of
        limit = self.config.eager_limit_inter if node[src] != node[dst] else self.config.eager_limit_intra
        # A GPU collective protocol writes into the peer's registered buffer: no rendezvous.
        protocol = "eager" if wire is not None else "rendezvous" if synchronous or nbytes > limit else "eager"
        if payload.writable and protocol == "eager":
            payload = user = payload.copy()
        env = self.env
        req = Request(env, "send", comm, dest, tag, nbytes, protocol)
        if self.origin is not None:
            req.origin = self.origin()
        msg = Message(src, dst, rank, comm.context, tag, payload, user, protocol, req, env._now)
        if self.fidelity == "collective" and comm.internal and wire is None and payload.__class__ is SizePayload:
            msg.direct = True  # see "Collective fidelity"
        cfg = self.config
        if wire is None:  # MPI's non-overtaking order (a GPU library's: see _arrive)
            pair = (src, dst)
            msg.seq = self._send_seq.get(pair, 0)
            self._send_seq[pair] = msg.seq + 1
        if wire is not None:
            # No CPU overhead and no copy: the send is complete at once, the protocol's latency
            # passes, then its bytes go on the wire (mpisim.mpi.wire).
            msg.wire = wire
            msg.connection = (src, dst, comm.context) if comm.wire_shared else (src, dst, comm.context, tag)
            req.succeed()
            Call(self.env, self._inject_wire, msg, wire.latency(self.topology.path_kind(src, dst)), URGENT)
        elif protocol == "eager" and cfg.send_overhead == 0.0 and cfg.copy_time(nbytes) == 0.0:
            # NOTE: the common case needs no sender step: the send is complete at once.
            req.succeed()
            self._call_soon(self._inject_eager, msg)
        elif cfg.send_overhead == 0.0:
            self._call_soon(self._send_after_overhead, msg)  # NOTE: _start_send with no overhead
        else:
            self._call_soon(self._start_send, msg)
        return req

    # The protocols are chains of steps: each step starts a transfer (or a delay) and names the
    # step that follows it. A step that starts on its own is called soon (URGENT, now), where
    # SimPy would have scheduled the initialisation of a process doing the same work.

    def _start_send(self, msg: Message) -> None:
        overhead = self.config.send_overhead
        if overhead:
            Call(self.env, self._send_after_overhead, msg, overhead)
        else:
            self._send_after_overhead(msg)

    def _send_after_overhead(self, msg: Message) -> None:
        if msg.protocol == "eager":
            copy = self.config.copy_time(msg.nbytes)
            if copy:
                msg.t_phase = self.env.now
                Call(self.env, self._eager_copied, msg, copy)
            else:
                msg.send_req.succeed()
                self._inject_eager(msg)
            return
        # Rendezvous: request to send, wait for clear to send, then the data.
        msg.t_phase = self.env._now
        if msg.direct:
            self._after_control(msg.src, msg.dst, self._arrive, msg)
            return
        # NOTE: with no span to record, the RTS's arrival is the envelope's arrival (one call less).
        then = self._rts_arrived if self.tracer.record_spans else self._arrive
        if self._post(msg.src, msg.dst, self.config.header_bytes, then, msg):
            then(msg)

    def _eager_copied(self, msg: Message) -> None:
        self._span(msg.src, "copy", msg.t_phase, "eager send copy", msg.dst, msg.nbytes)
        msg.send_req.succeed()
        self._inject_eager(msg)

    def _inject_eager(self, msg: Message) -> None:
        msg.t_data = self.env.now
        if self._post(msg.src, msg.dst, msg.nbytes, self._arrive, msg):
            self._arrive(msg)

    def _inject_wire(self, msg: Message) -> None:
        msg.t_data = self.env._now
        if msg.nbytes == 0:  # a flag (a pipeline credit): no chunk to queue behind
            if self._post(msg.src, msg.dst, 0, self._arrive, msg):
                self._arrive(msg)
            return
        key = msg.connection
        waiting = self._connections.get(key)
        if waiting is not None:
            waiting.append((msg, msg.t_data))  # bytes still moving on this connection: queue
            return
        self._connections[key] = []
        self._post_wire(msg, None)

    def _post_wire(self, msg: Message, latency: float | None) -> None:
        wire = msg.wire
        kind = self.topology.path_kind(msg.src, msg.dst)
        nbytes = wire.wire_bytes(msg.nbytes, kind)  # type: ignore[union-attr]
        route = self.wire_route(msg.src, msg.dst, wire, kind)  # type: ignore[arg-type]
        posted = self._post(msg.src, msg.dst, nbytes, self._wire_landed, msg, latency, route=route)
        if posted:
            self._wire_landed(msg)

    def wire_route(self, src: int, dst: int, wire: Wire, kind: str) -> Route | None:
        """The route a *wire* message from world rank *src* to *dst* takes, or None for the topology's own.

        Between nodes (*kind* ``inter``) a PXN wire goes through the NIC of the destination's
        rail and a paced one through its sender's pace link (:mod:`mpisim.mpi.wire`).
        """
        if kind != "inter":
            return None
        if wire.pxn:
            return self.topology.pxn_route(src, dst)
        rate = wire.wire_rate_cap(kind)
        return None if rate == math.inf else self.topology.paced_route(src, dst, rate)

    def _wire_route_latency(self, msg: Message) -> float:
        if msg.wire.pxn and self._node_of[msg.src] != self._node_of[msg.dst]:  # type: ignore[union-attr]
            return self.topology.pxn_route(msg.src, msg.dst).latency
        return self.topology.route(msg.src, msg.dst).latency

    def _wire_landed(self, msg: Message) -> None:
        key = msg.connection
        waiting = self._connections[key]
        if waiting:
            # The next message's latency began when it was injected; only what is left of it remains.
            nxt, t_ready = waiting.pop(0)
            remaining = t_ready + self._wire_route_latency(nxt) - self.env._now
            self._post_wire(nxt, max(0.0, remaining))
        else:
            del self._connections[key]
        self._arrive(msg)

    def _rts_arrived(self, msg: Message) -> None:
        if self.tracer.record_spans:
            self._span(msg.src, "rts", msg.t_phase, "RTS", msg.dst, self.config.header_bytes)
        self._arrive(msg)

    def _start_cts(self, msg: Message) -> None:
        msg.t_phase = self.env._now
        if msg.direct:
            self._after_control(msg.dst, msg.src, self._cts_arrived, msg)
            return
        if self._post(msg.dst, msg.src, self.config.header_bytes, self._cts_arrived, msg):
            self._cts_arrived(msg)

    def _after_control(self, src: int, dst: int, fn: Callable[[Message], None], msg: Message) -> None:
        """Call ``fn(msg)`` when a lone control message from *src* would have reached *dst* (direct path)."""
        delay = self._control_delay(src, dst)
        if delay > 0:
            Call(self.env, fn, msg, delay)
        else:
            fn(msg)

    def _control_delay(self, src: int, dst: int) -> float:
        """Seconds a lone control message (``header_bytes``) takes from *src* to *dst*."""
        route = self.topology.route(src, dst)
        return route.latency + self.config.header_bytes * route.beta if route.links else 0.0

    def direct_costs(self, src: int, dst: int, handshake: bool = True) -> DirectCosts:
        """What the direct path charges an MPI message from world rank *src* to *dst* (see "Collective fidelity").

        With *n* bytes, the send posted at *s* and the receive posted at *r* (and nothing else
        on the route), the direct path runs:

        * eager (``n <= eager_limit``): the send completes at ``s + send_overhead + copy(n)``,
          the data arrives ``latency + n * beta`` later, and the receive completes
          ``recv_overhead`` after the later of its arrival and *r* -- plus ``copy(n)`` out of the
          unexpected queue if it arrived first;
        * rendezvous: the request to send reaches the receiver at ``s + send_overhead + rts``, is
          matched at the later of that and *r*, the clear to send comes back ``cts`` later, the
          data leaves ``rendezvous_overhead`` after it and arrives ``latency + n * beta`` after
          that, completing the send; the receive completes ``recv_overhead`` later.

        Algorithms timed as step programs (mpisim.collectives.fluid_mpi_ring) use these, and
        tests/mpi/test_direct_costs.py holds them to the simulated messages. Without
        *handshake* (a program whose messages are all eager) ``rts`` and ``cts`` are left 0.
        """
        cfg = self.config
        # NOTE: Topology.path_costs, not route(): a barrier over 131072 ranks asks for 2.2 million
        # pairs once each, which the route cache would keep.
        latency, beta = self.topology.path_costs(src, dst)
        back_latency, back_beta = self.topology.path_costs(dst, src) if handshake else (0.0, 0.0)
        header = cfg.header_bytes
        between_nodes = self._node_of[src] != self._node_of[dst]
        return DirectCosts(
            latency=latency,
            beta=beta,
            eager_limit=cfg.eager_limit_inter if between_nodes else cfg.eager_limit_intra,
            rts=latency + header * beta if handshake else 0.0,
            cts=back_latency + header * back_beta,
            rendezvous_overhead=cfg.rendezvous_overhead if between_nodes else 0.0,
        )

    def _cts_arrived(self, msg: Message) -> None:
        if self.tracer.record_spans and not msg.direct:
            self._span(msg.dst, "cts", msg.t_phase, "CTS", msg.src, self.config.header_bytes)
        overhead = self.config.rendezvous_overhead
        if not overhead or self._node_of[msg.src] == self._node_of[msg.dst]:
            Call(self.env, self._send_data, msg)  # the sender learns of the CTS
            return
        queue = self._sockets.setdefault((msg.src, msg.dst), deque())
        queue.append(msg)
        if len(queue) == 1:  # the connection is free: this message's protocol work starts now
            Call(self.env, self._send_data, msg, overhead)

    def _release_socket(self, msg: Message) -> None:
        """The data of *msg* has arrived: the next rendezvous message on its socket may go."""
        queue = self._sockets[(msg.src, msg.dst)]
        queue.popleft()
        if queue:
            Call(self.env, self._send_data, queue[0], self.config.rendezvous_overhead)

    def _send_data(self, msg: Message) -> None:
        msg.t_data = self.env._now
        if self._post(msg.src, msg.dst, msg.nbytes, self._data_arrived, msg):
            self._data_arrived(msg)

    def _data_arrived(self, msg: Message) -> None:
        # The sender may write into its buffer as soon as it resumes: take the data now.
        if msg.recv_req.into is not None:  # type: ignore[union-attr]
            self._land(msg)
        elif msg.payload.writable:
            msg.payload = msg.user = msg.payload.copy()
        if self.tracer.record_spans and not msg.direct:
            self._span(msg.src, "data", msg.t_data, "data", msg.dst, msg.nbytes)
        _succeed(self.env, msg.send_req, None)
        self._complete_recv(msg, self.config.recv_overhead)
        if self.config.rendezvous_overhead and self._node_of[msg.src] != self._node_of[msg.dst]:
            self._release_socket(msg)
        if not msg.direct:
            self._call_soon(self._start_fin, msg)

    def _start_fin(self, msg: Message) -> None:
        msg.t_phase = self.env._now
        # Nobody waits for a FIN; its arrival matters only to the span it records.
        then = self._fin_arrived if self.tracer.record_spans else None
        if self._post(msg.dst, msg.src, self.config.header_bytes, then, msg):
            self._fin_arrived(msg)

    def _fin_arrived(self, msg: Message) -> None:
        self._span(msg.dst, "fin", msg.t_phase, "FIN", msg.src, self.config.header_bytes)

    def _urgent_call(self, fn: Callable[[Any], None], arg: Any) -> None:
        """``call_soon`` on an environment without one: an URGENT event now."""
        Call(self.env, fn, arg, priority=URGENT)

    def _post_via_transfer(self, src: int, dst: int, nbytes: int, fn: Callable[[Any], None] | None, arg: Any,
                           latency: float | None = None, route: Any = None) -> bool:
        """``post`` for a network model that only has the ``transfer`` generator (which pays its own latency).

        Raises TypeError for a relayed *route*: ``transfer`` knows only the topology's routes.
        """
        if route is not None:
            raise TypeError(f"network model {type(self.network).__name__} has no post(): it cannot carry relayed (PXN) routes")
        transfer = self.network.transfer(src, dst, nbytes)
        try:
            event = next(transfer)
        except StopIteration:
            return True
        self.env.process(self._drive(transfer, event, fn, arg))
        return False

    @staticmethod
    def _drive(transfer: Proc[None], event: simpy.Event, fn: Callable[[Any], None] | None, arg: Any) -> Proc[None]:
        while True:
            value = yield event
            try:
                event = transfer.send(value)
            except StopIteration:
                break
        if fn is not None:
            fn(arg)

    # ------------------------------------------------------------------ arrival and matching

    def _arrive(self, msg: Message) -> None:
        """Offer an arrived envelope to matching, in send order per (source, destination).

        A GPU library's message is offered as it lands: its connection already delivers one
        connection's messages in order (see "Connections"), and NCCL orders nothing across
        connections -- a flag (a pipeline's credit) is a write to the peer's memory that does
        not wait for the data another connection is still moving to that peer.
        """
        box = self.mailboxes[msg.dst]
        if msg.wire is not None:
            self._deliver(box, msg)
            return
        expected = box.next_seq.get(msg.src, 0)
        if msg.seq != expected:
            box.held[(msg.src, msg.seq)] = msg  # overtook an earlier message: wait for it
            return
        self._deliver(box, msg)
        expected += 1
        while box.held:
            nxt = box.held.pop((msg.src, expected), None)
            if nxt is None:
                break
            self._deliver(box, nxt)
            expected += 1
        box.next_seq[msg.src] = expected

    def _deliver(self, box: Mailbox, msg: Message) -> None:
        context, src_rank, tag = msg.context, msg.src_rank, msg.tag
        for i, req in enumerate(box.posted):
            # NOTE: _matches, inlined: this runs for every message.
            if (req.comm.context == context and (req.peer == src_rank or req.peer == ANY_SOURCE)
                    and (req.tag == tag or req.tag == ANY_TAG)):
                del box.posted[i]
                self._pair(msg, req)
                return
        msg.unexpected = True
        box.unexpected.append(msg)
        if box.probes:
            self._wake_probes(box, msg)

    def post_recv(self, comm: Comm, source: int, tag: int, buf: Any = None, status: Status | None = None,
                  op: Op | None = None) -> Request:
        """Post a receive on *comm*; return the request whose value is the received buffer.

        If *buf* is an owned (writable) payload the data lands in it and the value is *buf*
        (or its first elements); with *op* too, the data is reduced into it
        (``buf = received op buf``) instead. Otherwise *buf* only sets the largest message
        accepted, and the value is the message's own buffer.
        """
        if source != ANY_SOURCE and not 0 <= source < len(comm.group):
            self._check_rank(comm, source, "source", "recv")
        if not 0 <= tag <= MAX_TAG and tag != ANY_TAG:
            raise InvalidTagError(f"rank {comm.world_rank}: recv(source={source}, tag={tag}): tags must be in "
                                  f"0..{MAX_TAG} (MPI_TAG_UB) or ANY_TAG")
        req = Request(self.env, "recv", comm, source, tag)
        req.status = status
        if buf is not None:
            buf = as_payload(buf)
            req.capacity = buf.nbytes
            if buf.writable:
                req.into, req.op = buf, op
        if source == PROC_NULL:
            if status is not None:
                status.source, status.tag, status.count, status.nbytes = PROC_NULL, ANY_TAG, 0, 0
            req.succeed(None)
            return req
        box = self.mailboxes[comm.group[comm._rank]]  # NOTE: Comm.world_rank, inlined
        if box.unexpected:
            for i, msg in enumerate(box.unexpected):
                if _matches(req, msg.context, msg.src_rank, msg.tag):
                    del box.unexpected[i]
                    self._pair(msg, req)
                    return req
        box.posted.append(req)
        return req

    def _pair(self, msg: Message, req: Request) -> None:
        """A message met its receive: check the size, then finish it by protocol."""
        msg.t_match = self.env._now
        req.nbytes, req.protocol = msg.nbytes, msg.protocol
        if req.capacity is not None and msg.nbytes > req.capacity:
            req.fail(TruncationError(
                f"message truncated: rank {msg.dst} posted recv(source={req.peer}, tag={req.tag}) "
                f"with room for {req.capacity} B, but rank {msg.src} sent {msg.nbytes} B (tag {msg.tag})"
            ))
            # The receiver learns of it from its completion call (recv, wait, test...; see
            # Request.outcome), which may come later than this instant: not an unhandled error.
            req.defused = True
            if msg.protocol == "rendezvous":
                msg.send_req.fail(TruncationError(f"rank {msg.src}: send to rank {msg.dst} was truncated by the receiver"))
                msg.send_req.defused = True
            return
        if req.status is not None:
            st = req.status
            st.source, st.tag, st.count, st.nbytes = msg.src_rank, msg.tag, msg.payload.count, msg.nbytes
        msg.recv_req = req
        if msg.protocol == "eager":
            delay = self.config.recv_overhead if msg.wire is None else 0.0
            if msg.unexpected and msg.wire is None:
                delay += self.config.copy_time(msg.nbytes)  # copy out of the unexpected queue
            self._complete_recv(msg, delay)
        else:
            self._call_soon(self._start_cts, msg)

    def _complete_recv(self, msg: Message, delay: float) -> None:
        if delay > 0:
            Call(self.env, self._finish_recv, msg, delay)
        else:
            self._finish_recv(msg)

    def _land(self, msg: Message) -> None:
        """Put the data into the receive's own buffer: copied in, or reduced into it with its op."""
        req = msg.recv_req
        if req.op is None:  # type: ignore[union-attr]
            msg.user = req.into.receive(msg.payload)  # type: ignore[union-attr]
        else:
            msg.user = req.into.accumulate(msg.payload, req.op)  # type: ignore[union-attr]

    def _finish_recv(self, msg: Message) -> None:
        if msg.protocol == "eager" and msg.recv_req.into is not None:  # type: ignore[union-attr]
            self._land(msg)
        tracer = self.tracer
        if tracer.record_messages and not msg.direct:
            tracer.message(MessageRecord(
                msg.src, msg.dst, msg.tag, msg.context, msg.nbytes, msg.protocol if msg.wire is None else msg.wire.name,
                msg.t_post, msg.t_match, msg.t_data, self.env._now,
            ))
        else:
            tracer.count_message(msg.nbytes)
        _succeed(self.env, msg.recv_req, msg.user)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ probing

    def probe_event(self, comm: Comm, source: int, tag: int) -> tuple[simpy.Event, Message | None]:
        """Return an event that fires with the first matching unexpected message (``MPI_Probe``)."""
        box = self.mailboxes[comm.world_rank]
        probe = Request(self.env, "recv", comm, source, tag)
        for msg in box.unexpected:
            if _matches(probe, msg.context, msg.src_rank, msg.tag):
                probe.succeed(msg)
                return probe, msg
        box.probes.append((comm.context, source, tag, probe))
        return probe, None

    def find_unexpected(self, comm: Comm, source: int, tag: int) -> Message | None:
        """Return the first matching unexpected message without removing it (``MPI_Iprobe``)."""
        probe = Request(self.env, "recv", comm, source, tag)
        for msg in self.mailboxes[comm.world_rank].unexpected:
            if _matches(probe, msg.context, msg.src_rank, msg.tag):
                return msg
        return None

    def _wake_probes(self, box: Mailbox, msg: Message) -> None:
        still = []
        for context, source, tag, event in box.probes:
            if isinstance(event, Request) and _matches(event, msg.context, msg.src_rank, msg.tag):
                event.succeed(msg)
            else:
                still.append((context, source, tag, event))
        box.probes = still

    # ------------------------------------------------------------------ blocking and spans

    def block(self, rank: int, event: simpy.Event, call: CallName, requests: Sequence[Request], kind: str = "wait",
              peer: int = -1, nbytes: int = 0) -> Proc[Any]:
        """Wait for *event* on behalf of *rank*, remembering *call* for deadlock reports."""
        state = self.states[rank]
        state.call, state.waiting_on = call, requests
        t0 = self.env.now
        state.opened = (kind, t0, peer, nbytes)
        value = yield event
        state.call, state.waiting_on = "", ()
        if self.tracer.record_spans:
            self._span(rank, kind, t0, call_name(call), peer, nbytes)
        return value

    def _span(self, rank: int, kind: str, t_start: float, label: str, peer: int = -1, nbytes: int = 0) -> None:
        if self.tracer.record_spans:
            self.tracer.span(SpanRecord(rank, kind, t_start, self.env.now, label, peer, nbytes))

    # ------------------------------------------------------------------ collectives bookkeeping

    def check_collective(self, comm: Comm, call: int, signature: str) -> None:
        """Check that every member's *call*-th collective on *comm* has the same signature.

        Raises CollectiveMismatchError naming both ranks and both calls.
        """
        key = (comm.coll_context, call)
        seen = self._collective_calls.get(key)
        if seen is None:
            self._collective_calls[key] = (signature, comm.world_rank, 1)
            return
        first_sig, first_rank, count = seen
        if first_sig != signature:
            raise CollectiveMismatchError(
                f"mismatched collectives: rank {comm.world_rank} called {signature} as collective "
                f"#{call} on its communicator, but rank {first_rank} called {first_sig}"
            )
        if count + 1 == comm.size:
            del self._collective_calls[key]
        else:
            self._collective_calls[key] = (first_sig, first_rank, count + 1)

    # ------------------------------------------------------------------ errors

    def _check_rank(self, comm: Comm, rank: int, name: str, call: str) -> None:
        if rank == PROC_NULL:
            return
        if not 0 <= rank < comm.size:
            raise InvalidRankError(
                f"rank {comm.world_rank}: {call}({name}={rank}): invalid rank for a communicator of size {comm.size} "
                f"(valid: 0..{comm.size - 1})"
            )

    def _waits_for(self, rank: int) -> list[int]:
        """World ranks that *rank* is waiting for, each one of them (the edges of the wait-for graph).

        A receive from ``ANY_SOURCE`` waits for *some* rank, not for each: it gives no edge, so
        a cycle found is one where every rank waits for the next in particular.
        """
        state = self.states[rank]
        peers: list[int] = []
        if state.blocked_call == "synchronize()":
            return [r for r, st in enumerate(self.states) if st.blocked_call != "synchronize()" and r != rank]
        for req in state.waiting_on:
            if not req.triggered and req.peer >= 0:
                peers.append(req.comm.group[req.peer])
        return sorted(set(peers))

    def _waits_for_anyone(self, rank: int) -> bool:
        """True if *rank* is blocked in a receive (or probe) from ``ANY_SOURCE``."""
        return any(not req.triggered and req.peer == ANY_SOURCE for req in self.states[rank].waiting_on)

    def _close_blocked_spans(self, blocked: list[int]) -> None:
        """Record the span of every call the deadlock leaves blocked, up to now.

        Its label is the call and why it cannot return (``send(dest=1, ...) -- waiting for rank
        1 to receive ...``), so a timeline shows where and why each rank stopped.
        """
        for rank in blocked:
            state = self.states[rank]
            kind, t0, peer, nbytes = state.opened
            pending = [req for req in state.waiting_on if not req.triggered]
            why = "; ".join(self._why(req) for req in pending)
            self._span(rank, kind, t0, state.blocked_call + (f" -- {why}" if why else ""), peer, nbytes)

    def _lost_report(self, shown: int = 8) -> list[str]:
        """The calls made without ``yield from``, rank by rank, each rank's in the order it made them."""
        lost = sorted(self.lost_calls, key=lambda item: item[0])
        lines = [text for _, text in lost[:shown]]
        if len(lost) > shown:
            lines.append(f"... and {len(lost) - shown} more calls made without `yield from`")
        return lines

    def _deadlock_report(self, blocked: list[int]) -> str:
        lines = [f"deadlock: {len(blocked)} rank(s) blocked and nothing can progress"]
        for rank in blocked:
            state = self.states[rank]
            if state.collective is not None:
                lines.append(f"  rank {rank}: blocked in {self._collective_story(rank)}{self._at(rank)}")
                continue
            pending = [req for req in state.waiting_on if not req.triggered]
            detail = "; ".join(self._why(req) for req in pending) if pending else ""
            lines.append(f"  rank {rank}: blocked in {state.blocked_call}" + (f" -- {detail}" if detail else "")
                         + self._at(rank))
        cycle = self._find_cycle(blocked)
        if cycle and not any(self.states[r].collective for r in cycle):
            lines.append("  cycle of waits: " + " -> ".join(f"rank {r}" for r in cycle))
        elif any_source := [r for r in blocked if self._waits_for_anyone(r)]:
            who = "every blocked rank waits" if len(any_source) == len(blocked) else \
                f"rank{'s' if len(any_source) > 1 else ''} {', '.join(map(str, any_source))} wait{'' if len(any_source) > 1 else 's'}"
            lines.append(f"  {who} for a message from any rank, and no rank that could send one ever will (each is blocked or has finished)")
        return "\n".join(lines)

    def _at(self, rank: int) -> str:
        """``\\n      at ring.py:14: comm.send(...)`` when a runner can say where the rank is in its source."""
        where = self.locate(rank) if self.locate is not None else ""
        return f"\n      at {where}" if where else ""

    def _user_call(self, rank: int) -> str:
        """The call *rank* is blocked in, as the user wrote it (a collective, not its internal messages)."""
        state = self.states[rank]
        return state.collective[2] if state.collective is not None else state.blocked_call

    def where_ranks_are(self) -> list[str]:
        """One line per unfinished rank: the call it is in (for reports of a failed program)."""
        lines = []
        for rank, state in enumerate(self.states):
            if state.finished:
                continue
            if state.collective is not None:
                lines.append(f"  rank {rank}: in {state.collective[2]}{self._at(rank)}")
            elif state.call:
                lines.append(f"  rank {rank}: blocked in {state.blocked_call}{self._at(rank)}")
            else:
                lines.append(f"  rank {rank}: running{self._at(rank)}")
        return lines

    def _collective_story(self, rank: int) -> str:
        """``barrier() -- rank 0 has finished without calling it``: the user's call and who is missing."""
        comm, call, signature = self.states[rank].collective  # type: ignore[misc]
        missing = []
        for member in comm.group:
            other = self.states[member].collective
            if other is not None and other[0].coll_context == comm.coll_context and other[1] == call:
                continue
            st = self.states[member]
            if st.finished:
                missing.append(f"rank {member} has finished without calling it")
            elif other is not None:
                missing.append(f"rank {member} is in {other[2]} instead")
            elif st.call:
                missing.append(f"rank {member} is blocked in {st.blocked_call}")
            else:
                missing.append(f"rank {member} has not called it")
        detail = "; ".join(missing) if missing else "every member called it"
        return f"{signature} (collective #{call} on its communicator) -- {detail}"

    def _why(self, req: Request) -> str:
        if req.kind == "send":
            peer = req.comm.group[req.peer]
            state = "has finished" if self.states[peer].finished else "has not posted a matching receive"
            return f"waiting for rank {peer} to receive (rank {peer} {state})"
        if req.peer == ANY_SOURCE:
            why = "no matching message from any rank"
        else:
            peer = req.comm.group[req.peer]
            state = " (it has finished)" if self.states[peer].finished else ""
            why = f"waiting for a message from rank {peer}{state}"
        return why + self._unmatched_nearby(req)

    def _unmatched_nearby(self, req: Request) -> str:
        """Messages waiting unmatched at a blocked receiver that differ only in tag or source: the usual bug."""
        box = self.mailboxes[req.comm.group[req.comm._rank]]
        near = [m for m in box.unexpected if m.context == req.comm.context
                and (req.peer in (ANY_SOURCE, m.src_rank) or req.tag in (ANY_TAG, m.tag))]
        return "".join(f"; a message from rank {m.src_rank} with tag {m.tag} ({m.nbytes} B) is waiting unmatched"
                       for m in near[:3])

    def _find_cycle(self, blocked: list[int]) -> list[int]:
        """Return one cycle in the wait-for graph among blocked ranks, closed (first == last)."""
        blocked_set = set(blocked)
        graph = {r: [p for p in self._waits_for(r) if p in blocked_set] for r in blocked}
        for start in blocked:
            path, on_path = [start], {start: 0}
            stack = [iter(graph[start])]
            while stack:
                nxt = next(stack[-1], None)
                if nxt is None:
                    stack.pop()
                    on_path.pop(path.pop(), None)
                    continue
                if nxt in on_path:
                    return [*path[on_path[nxt]:], nxt]
                on_path[nxt] = len(path)
                path.append(nxt)
                stack.append(iter(graph[nxt]))
        return []
