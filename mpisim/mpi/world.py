"""The simulated MPI library: ranks, their mailboxes, communicator contexts and message matching.

One :class:`World` exists per simulation. It owns, for every rank, a mailbox with MPI's two
matching queues (posted receives, unexpected messages) and what the rank is doing (for
deadlock reports), allocates communicator contexts, and offers every arriving message to
matching. Its other jobs live in their own modules, as parts (mixins) of the one class, so
``world.post_send``, ``world.direct_costs`` and ``world.where_ranks_are`` keep working:

* :mod:`mpisim.mpi.protocols` -- eager, rendezvous and a GPU library's wire, each a chain of
  steps that moves a message through the network model up to its arrival here;
* :mod:`mpisim.mpi.direct` -- the collective-fidelity direct path and the costs it charges;
* :mod:`mpisim.mpi.diagnose` -- the deadlock report: where ranks are, the cycle of waits.

**Matching** follows the MPI standard: a receive matches a message with the same context
(communicator), and the same source and tag unless it uses ``ANY_SOURCE``/``ANY_TAG``.
Messages between one pair of ranks are *non-overtaking*: they are offered to matching in the
order they were sent, even if a later small message physically arrives before an earlier
large one (an arrival that is ahead of its turn is held back).

**Per-world memo.** What models above the MPI layer work out once per world and share (call
shapes, plans, tuner choices) lives in :attr:`World.memo` (:class:`~mpisim.engine.memo.Memo`),
so two worlds in one process never share it and it is freed with its world.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import simpy

from mpisim.engine.memo import Memo
from mpisim.engine.records import MessageRecord, SpanRecord
from mpisim.engine.sim import call_later, run_until_idle, soon_caller, succeed_now
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
from mpisim.mpi.diagnose import Diagnosis
from mpisim.mpi.direct import DirectPath
from mpisim.mpi.matchqueue import PostedQueue, UnexpectedQueue
from mpisim.mpi.ops import Op
from mpisim.mpi.payload import as_payload
from mpisim.mpi.protocols import Message, Protocols
from mpisim.mpi.proxy import ProxyThread
from mpisim.mpi.request import Request, Status

if TYPE_CHECKING:
    from mpisim.engine.sim import Proc, Simulation
    from mpisim.mpi.comm import Comm
    from mpisim.network.base import NetworkModel
    from mpisim.network.topology import Topology


class Mailbox:
    """One rank's matching state: posted receives, unexpected messages, pending probes."""

    __slots__ = ("held", "next_seq", "posted", "probes", "unexpected")

    def __init__(self) -> None:
        self.posted = PostedQueue()
        self.unexpected = UnexpectedQueue()
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


def _matches(req: Request, context: int, src_rank: int, tag: int) -> bool:
    return (
        req.comm.context == context
        and (req.peer == ANY_SOURCE or req.peer == src_rank)
        and (req.tag == ANY_TAG or req.tag == tag)
    )


class World(Protocols, DirectPath, Diagnosis):
    """All ranks of one simulation and the MPI library that connects them.

    Its sending protocols, direct path and deadlock diagnosis are its parts (see module
    docstring); this class holds the ranks' state and the matching.
    """

    def __init__(self, sim: Simulation, topology: Topology, network: NetworkModel,
                 config: MpiConfig | None = None, *, algorithms: dict[str, Any] | None = None,
                 selector: str = "mpich", fidelity: str = "message", validated_only: bool = False) -> None:
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
        #: direct path (mpisim.mpi.direct).
        self.fidelity = fidelity
        #: ``fidelity: auto``: a collective's twin runs only where it is validated against the
        #: message path (mpisim.collectives.fluid.validated), the message path elsewhere.
        self.validated_only = validated_only
        self.mailboxes = [Mailbox() for _ in range(self.size)]
        self.states = [RankState() for _ in range(self.size)]
        self._send_seq: dict[tuple[int, int], int] = {}
        #: GPU-library connections with bytes in flight: (src, dst, context[, tag]) -> messages
        #: waiting behind them, each with the instant its latency began (mpisim.mpi.protocols, "Connections").
        self._connections: dict[tuple[int, ...], list[tuple[Message, float]]] = {}
        #: Each rank's GPU-library proxy thread (mpisim.mpi.proxy), and per connection the
        #: number of messages posted through them (their order at one instant).
        self._proxies: dict[int, ProxyThread] = {}
        self._proxy_seq: dict[tuple[int, ...], int] = {}
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
        self._call_soon = soon_caller(self.env)
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
        #: Optional hook on matching (``posted``, ``arrived``, ``matched``): a correctness checker
        #: that records and permutes what ANY_SOURCE receives take (mpisim.compat.check.wildcards).
        self.wildcards: Any = None
        #: Start a transfer and call ``fn(arg)`` when it has arrived; True if it was over at once.
        self._post: Callable[..., bool] = getattr(network, "post", self._post_via_transfer)
        #: What models above the MPI layer work out once for this world (mpisim.engine.memo).
        self.memo = Memo()
        #: Optional ``scratch() -> World``: a fresh world of the same cluster and settings that
        #: records nothing, on which a model may time a call alone (``auto`` timing its
        #: candidates, mpisim.collectives.select.timed); set by whoever builds worlds.
        self.scratch: Callable[[], World] | None = None

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

    def launch_batch(self, driver: Proc[Any]) -> simpy.Process:
        """Start *driver*, one process that advances every rank at once (a batch of collective
        calls, :mod:`mpisim.collectives.bulk`); :meth:`run` reports a deadlock if it never ends."""
        proc = self.env.process(driver)
        self._processes.append(proc)
        return proc

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

    # ------------------------------------------------------------------ arrival and matching

    def _arrive(self, msg: Message) -> None:
        """Offer an arrived envelope to matching, in send order per (source, destination).

        A GPU library's message is offered as it lands: its connection already delivers one
        connection's messages in order (mpisim.mpi.protocols, "Connections"), and NCCL orders nothing across
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
        if self.wildcards is not None:
            self.wildcards.arrived(msg, self.env.now)
        req = box.posted.take(msg.context, msg.src_rank, msg.tag)  # None at once when none is posted
        if req is not None:
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
        if status is not None:
            req.status = status
        if source == ANY_SOURCE and self.wildcards is not None:
            self.wildcards.posted(req, self.env.now)
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
        msg = box.unexpected.take(comm.context, req.peer, tag)  # req.peer: a checker may force a wildcard's source
        if msg is not None:
            self._pair(msg, req)
            return req
        box.posted.append(req)
        return req

    def _pair(self, msg: Message, req: Request) -> None:
        """A message met its receive: check the size, then finish it by protocol."""
        msg.t_match = self.env.now
        if self.wildcards is not None:
            self.wildcards.matched(msg, req, self.mailboxes[msg.dst].unexpected, self.env.now)
        req.nbytes, req.protocol = msg.nbytes, msg.protocol
        if req.capacity is not None and msg.nbytes > req.capacity:
            req.fail(TruncationError(
                f"message truncated: rank {msg.dst} posted recv(source={req.peer}, tag={req.tag}) "
                f"with room for {req.capacity} B, but rank {msg.src} sent {msg.nbytes} B (tag {msg.tag})"
            ))
            # The receiver learns of it from its completion call (recv, wait, test...; see
            # Request.outcome), which may come later than this instant: not an unhandled error.
            req.defused = True
            if msg.protocol == "rendezvous" or msg.sync:
                msg.send_req.fail(TruncationError(f"rank {msg.src}: send to rank {msg.dst} was truncated by the receiver"))
                msg.send_req.defused = True
            return
        if req.status is not None:
            st = req.status
            st.source, st.tag, st.count, st.nbytes = msg.src_rank, msg.tag, msg.payload.count, msg.nbytes
        msg.recv_req = req
        if msg.protocol == "eager":
            if msg.sync and msg.src != msg.dst:  # to itself: complete with the receive (_finish_recv)
                self._call_soon(self._start_ack, msg)
            delay = self.config.recv_overhead if msg.wire is None else 0.0
            if msg.unexpected and msg.wire is None:
                delay += self.config.copy_time(msg.nbytes)  # copy out of the unexpected queue
            self._complete_recv(msg, delay)
        else:
            self._call_soon(self._start_cts, msg)

    def _complete_recv(self, msg: Message, delay: float) -> None:
        if delay > 0:
            call_later(self.env, self._finish_recv, msg, delay)  # ranks in step share an entry
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
                msg.t_post, msg.t_match, msg.t_data, self.env.now,
            ))
        else:
            tracer.count_message(msg.nbytes)
        succeed_now(self.env, msg.recv_req, msg.user)  # type: ignore[arg-type]
        if msg.sync and msg.src == msg.dst:  # MPICH's self path completes a synchronous send with its receive
            succeed_now(self.env, msg.send_req, None)

    # ------------------------------------------------------------------ probing

    def probe_event(self, comm: Comm, source: int, tag: int) -> tuple[simpy.Event, Message | None]:
        """Return an event that fires with the first matching unexpected message (``MPI_Probe``)."""
        box = self.mailboxes[comm.world_rank]
        probe = Request(self.env, "recv", comm, source, tag)
        msg = box.unexpected.first(comm.context, source, tag)
        if msg is not None:
            probe.succeed(msg)
            return probe, msg
        box.probes.append((comm.context, source, tag, probe))
        return probe, None

    def find_unexpected(self, comm: Comm, source: int, tag: int) -> Message | None:
        """Return the first matching unexpected message without removing it (``MPI_Iprobe``)."""
        return self.mailboxes[comm.world_rank].unexpected.first(comm.context, source, tag)

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
