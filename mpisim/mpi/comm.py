"""Communicators: the API a simulated rank programs against, in mpi4py's names and with mpi4py's semantics.

Every call that can block is a SimPy generator used with ``yield from``; its result is the
return value, as in mpi4py's lowercase API ("the received object is simply the return
value")::

    yield from comm.send(buf, dest=1, tag=7)
    buf = yield from comm.recv(source=ANY_SOURCE, tag=ANY_TAG, status=status)
    req = comm.irecv(source=1, tag=7)        # a Request is a SimPy event ...
    buf = yield req                          # ... so waiting for it is a plain yield
    out = yield from comm.allreduce(buf, op=SUM, algorithm="ring")
    yield from comm.compute(1e-3)            # one millisecond of modelled computation

mpi4py's uppercase, buffer-based names are here too, with mpi4py's signatures: they fill the
caller's arrays and return nothing (``yield from comm.Recv(buf, source=0)``,
``yield from comm.Allreduce(IN_PLACE, x)``), and requests wait under mpi4py's names
(``yield from req.Wait()``, ``yield from Request.Waitall(reqs)``). One model serves both
APIs: a program written for mpi4py reads the same with ``yield from`` before each blocking
call, and the constants (``ANY_SOURCE``, ``PROC_NULL``, ``TAG_UB``, ...) are MPICH's.

A communicator is a group of world ranks plus two matching *contexts*: one for
point-to-point messages and one for collectives, so a collective never matches a user's
receive. ``split`` and ``dup`` make new communicators with new contexts; both are
collectives, as in MPI, and both block: ``new = yield from comm.dup()``. Each rank holds its
own :class:`Comm` object (``comm.rank`` differs between them). A user's program gets a
:class:`~mpisim.mpi.usercomm.UserComm`, which reports a blocking call written without
``yield from`` instead of letting it silently do nothing.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mpisim.engine.events import AllDone
from mpisim.errors import InvalidCommunicatorError, MPIError
from mpisim.mpi.constants import UNDEFINED, attribute
from mpisim.mpi.ops import SUM, Op
from mpisim.mpi.payload import IN_PLACE, DataPayload, Payload, SizePayload, as_payload, fill, in_place
from mpisim.mpi.request import ANY_SOURCE, ANY_TAG, Request, Status
from mpisim.mpi.wire import Wire

if TYPE_CHECKING:
    from mpisim.engine.sim import Proc
    from mpisim.mpi.world import World


#: Runs a collective: ``runner(comm, collective, algorithm, **arguments)``. Installed by
#: :mod:`mpisim.collectives` so this lower layer never imports the algorithm registry.
CollectiveRunner = Callable[..., "Proc[Any]"]


class Comm:
    """One rank's handle on a communicator."""

    _collective_runner: CollectiveRunner | None = None
    #: The GPU collective protocol this handle's messages travel with (:meth:`with_wire`);
    #: None for MPI's eager and rendezvous protocols.
    wire: Wire | None = None
    #: With a wire: True if all of this handle's messages to one peer share one connection,
    #: in order, whatever their tags (:meth:`with_wire`); False: one connection per tag.
    wire_shared: bool = False
    #: True on a communicator's collective-context handle (:attr:`coll`) and on the
    #: communicators an algorithm derives from one (:meth:`sub`): their messages are an
    #: algorithm's, inside a collective call (at ``fidelity: collective`` they take the direct
    #: path, see mpisim.mpi.direct).
    internal: bool = False

    def __init__(self, world: World, group: tuple[int, ...], rank: int, context: int,
                 *, parent: Comm | None = None) -> None:
        self.world = world
        self.group = group  # world rank of each communicator rank
        self._rank = rank
        self.context = context  # point-to-point context; collectives use context + 1
        self.coll_context = context + 1 if parent is None else context
        self._parent = parent  # set on the collective-context view of a communicator
        self._coll: Comm | None = None
        self._collective_calls = 0
        self._derived = 0  # how many dup/split calls this rank made on this communicator
        self._created: dict[tuple, int] = {}  # create_group calls per (members, tag)
        self._subs: dict[tuple, Comm | None] = parent._subs if parent is not None else {}

    # ------------------------------------------------------------------ identity

    @property
    def rank(self) -> int:
        """This rank's number in the communicator."""
        return self._rank

    @property
    def size(self) -> int:
        """Number of ranks in the communicator."""
        return len(self.group)

    @property
    def world_rank(self) -> int:
        """This rank's number in ``COMM_WORLD``."""
        return self.group[self._rank]

    @property
    def COMM_WORLD(self) -> Comm:
        """This rank's handle on ``COMM_WORLD``."""
        return self.world.comm_world(self.world_rank)

    def Get_rank(self) -> int:
        """Return :attr:`rank`."""
        return self._rank

    def Get_size(self) -> int:
        """Return :attr:`size`."""
        return self.size

    @property
    def env(self):
        """The SimPy environment (for ``env.now``, ``env.all_of``)."""
        return self.world.env

    @property
    def now(self) -> float:
        """Current simulated time in seconds."""
        return self.world.env.now

    def node_of(self, rank: int) -> int:
        """Return the node that communicator rank *rank* runs on."""
        return self.world.topology.node_of(self.group[rank])

    def __repr__(self) -> str:
        return f"Comm(rank={self._rank}, size={self.size}, context={self.context})"

    # ------------------------------------------------------------------ point-to-point

    def isend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """Start a send and return its request (``MPI_Isend``)."""
        return self.world.post_send(self, buf, dest, tag)

    def issend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """Start a synchronous send, complete only once matched (``MPI_Issend``)."""
        return self.world.post_send(self, buf, dest, tag, synchronous=True)

    def irecv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> Request:
        """Post a receive and return its request; its value is the received buffer (``MPI_Irecv``).

        *buf*, if given, sets the largest message accepted (a longer one is a truncation error).
        """
        return self.world.post_recv(self, source, tag, buf, status)

    # Blocking calls hand World.block their name as (function, arguments): the string is only
    # built for a deadlock report or a span label, not on every call.

    def send(self, buf: Any, dest: int, tag: int = 0) -> Proc[None]:
        """Send *buf* to *dest*; return when the protocol lets the buffer be reused (``MPI_Send``)."""
        req = self.world.post_send(self, buf, dest, tag)
        if not req.triggered:
            yield from self.world.block(self.world_rank, req, (Request.describe, req), (req,), "send",
                                        self._peer(dest), req.nbytes)

    def ssend(self, buf: Any, dest: int, tag: int = 0) -> Proc[None]:
        """Send *buf* to *dest*; return only once the receive has matched it (``MPI_Ssend``)."""
        req = self.world.post_send(self, buf, dest, tag, synchronous=True)
        yield from self.world.block(self.world_rank, req, (_ssend_name, req), (req,), "send", self._peer(dest), req.nbytes)

    def recv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> Proc[Any]:
        """Receive a message and return it (``MPI_Recv``)."""
        req = self.world.post_recv(self, source, tag, buf, status)
        if req.triggered:
            return req.outcome()
        return (yield from self.world.block(self.world_rank, req, (Request.describe, req), (req,), "recv",
                                            self._peer(source)))

    def sendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
                 source: int = ANY_SOURCE, recvtag: int = ANY_TAG, status: Status | None = None) -> Proc[Any]:
        """Send to *dest* and receive from *source* at once, without deadlock (``MPI_Sendrecv``)."""
        world = self.world
        if recvbuf is not None and getattr(recvbuf, "writable", False) and _overlap(sendbuf, recvbuf):
            sendbuf = sendbuf.copy()  # see sendrecv_reduce
        sreq = world.post_send(self, sendbuf, dest, sendtag)
        rreq = world.post_recv(self, source, recvtag, recvbuf, status)
        if sreq.triggered and rreq.triggered:
            sreq.outcome()
            return rreq.outcome()
        # NOTE: World.block for the two requests, inlined: one generator less per step.
        state = world.states[self.group[self._rank]]
        both = (sreq, rreq)
        state.call, state.waiting_on = (_sendrecv_name, dest, source), both
        t0 = world.env.now
        yield AllDone(world.env, both)
        state.call, state.waiting_on = "", ()
        if world.tracer.record_spans:
            world._span(self.world_rank, "recv", t0, _sendrecv_name(dest, source), self._peer(source), sreq.nbytes)
        return rreq.value

    def wait(self, request: Request, status: Status | None = None) -> Proc[Any]:
        """Wait for *request* and return its value (``MPI_Wait``)."""
        if request.triggered:
            value = request.outcome()
        else:
            value = yield from self.world.block(self.world_rank, request, (_wait_name, request), (request,), "wait")
        if status is not None and request.status is not None:
            status.source, status.tag = request.status.source, request.status.tag
            status.count, status.nbytes = request.status.count, request.status.nbytes
        return value

    def waitall(self, requests: Sequence[Request]) -> Proc[list[Any]]:
        """Wait for every request; return their values in order (``MPI_Waitall``)."""
        pending = [r for r in requests if not r.triggered]
        if pending:
            call = f"waitall({len(requests)} requests)"
            yield from self.world.block(self.world_rank, AllDone(self.world.env, pending), call, pending, "wait")
        return [r.outcome() for r in requests]

    def waitany(self, requests: Sequence[Request]) -> Proc[tuple[int, Any]]:
        """Wait for the first request to finish; return ``(index, value)`` (``MPI_Waitany``)."""
        for i, r in enumerate(requests):
            if r.triggered:
                return i, r.outcome()
        call = f"waitany({len(requests)} requests)"
        yield from self.world.block(self.world_rank, self.env.any_of(list(requests)), call, list(requests), "wait")
        for i, r in enumerate(requests):
            if r.triggered:
                return i, r.outcome()
        raise AssertionError("waitany woke with no finished request")  # pragma: no cover

    @staticmethod
    def test(request: Request) -> tuple[bool, Any]:
        """Return ``(done, value)`` without waiting (``MPI_Test``)."""
        return request.test()

    def probe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> Proc[Status]:
        """Wait until a matching message has arrived, without receiving it (``MPI_Probe``)."""
        event, msg = self.world.probe_event(self, source, tag)
        if msg is None:
            msg = yield from self.world.block(self.world_rank, event, f"probe(source={source}, tag={tag})", [event], "wait")
        return self._fill_status(msg, status)

    def iprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> bool:
        """Return True if a matching message has arrived, without receiving it (``MPI_Iprobe``)."""
        msg = self.world.find_unexpected(self, source, tag)
        if msg is not None:
            self._fill_status(msg, status)
        return msg is not None

    # ------------------------------------------------------------------ buffer forms
    #
    # Which calls allocate: the lowercase receives (recv, irecv, sendrecv) return the message
    # as a new array, as mpi4py's lowercase (pickle-based) calls return a new object; a
    # ``buf`` given to them only sets the largest message accepted. The uppercase forms,
    # mpi4py's buffer-based names with mpi4py's signatures, write the message into the
    # caller's array and return nothing, like ``MPI_Recv``; that is also how real data is
    # received without a copy. Where the two forms mean the same (sends, probes, barrier),
    # the uppercase name is the lowercase method itself.

    Send = send
    Isend = isend
    Ssend = ssend
    Issend = issend
    Probe = probe
    Iprobe = iprobe

    def Recv(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> Proc[None]:
        """Receive into the caller's array *buf* (contiguous, writeable numpy; ``MPI_Recv``).

        A message longer than *buf* raises TruncationError; a shorter one fills its first
        elements (``status.count`` says how many). A size-only payload is accepted and stays
        size-only.
        """
        req = self.world.post_recv(self, source, tag, in_place(buf), status)
        if req.triggered:
            req.outcome()
            return
        yield from self.world.block(self.world_rank, req, (Request.describe, req), (req,), "recv", self._peer(source))

    def Irecv(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> Request:
        """Post a receive into the caller's array *buf* (``MPI_Irecv``); it is filled when the request completes.

        The request keeps a :class:`Status` (*status* or its own), so a later
        ``Request.Waitall(requests, statuses)`` can say who sent each message, as in mpi4py.
        """
        return self.world.post_recv(self, source, tag, in_place(buf), status if status is not None else Status())

    def Sendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None, source: int = ANY_SOURCE,
                 recvtag: int = ANY_TAG, status: Status | None = None) -> Proc[None]:
        """Send *sendbuf* and receive into the caller's array *recvbuf* at once (``MPI_Sendrecv``)."""
        if recvbuf is None:
            raise TypeError(f"rank {self.world_rank}: Sendrecv needs a recvbuf to fill (sendrecv returns a new array)")
        yield from self.sendrecv(sendbuf, dest, sendtag, in_place(recvbuf), source, recvtag, status)

    def Sendrecv_replace(self, buf: Any, dest: int, sendtag: int = 0, source: int = ANY_SOURCE, recvtag: int = ANY_TAG,
                         status: Status | None = None) -> Proc[None]:
        """Send *buf* and receive into it, at once (``MPI_Sendrecv_replace``)."""
        yield from self.sendrecv(np.array(buf, copy=True), dest, sendtag, in_place(buf), source, recvtag, status)

    def Get_attr(self, keyval: int) -> int | None:
        """A predefined attribute (``comm.Get_attr(TAG_UB)``: the largest tag), with MPICH's values."""
        return attribute(keyval)

    # ------------------------------------------------------------------ concurrency

    def start(self, activity: Proc[Any]) -> Any:
        """Run *activity* (a generator, e.g. ``comm.allreduce(g)``) concurrently on this rank; return its handle.

        The rank goes on at once; ``result = yield handle`` waits for the activity and returns
        its value. This is how a program overlaps a blocking call with other work: start the
        gradient allreduce, compute the next layer, then wait (see scenarios/programs/overlap.py).
        """
        return self.env.process(iter(activity))  # iter(): a user's pending call hands over its generator

    @staticmethod
    def _fill_status(msg: Any, status: Status | None) -> Status:
        status = status if status is not None else Status()
        status.source, status.tag, status.count, status.nbytes = msg.src_rank, msg.tag, msg.payload.count, msg.nbytes
        return status

    def _peer(self, rank: int) -> int:
        return self.group[rank] if 0 <= rank < self.size else -1

    # ------------------------------------------------------------------ local work

    def compute(self, seconds: float, label: str = "compute") -> Proc[None]:
        """Spend *seconds* of modelled computation on this rank."""
        if seconds > 0:
            t0 = self.env.now
            yield self.env.timeout(seconds)
            self.world._span(self.world_rank, "compute", t0, label)

    def reduce_local(self, op: Op, inbuf: Payload, inoutbuf: Payload) -> Proc[Payload]:
        """Return ``inbuf op inoutbuf``, charging ``reduce_cost`` seconds per byte (``MPI_Reduce_local``).

        An owned (writable, see :func:`~mpisim.mpi.payload.in_place`) *inoutbuf* receives the
        result in its own memory and is returned; otherwise the result is a new payload.
        """
        result = inoutbuf.accumulate(inbuf, op)
        if self.world.config.reduce_cost:
            yield from self._charge_reduce(op, inoutbuf.nbytes)
        return result

    def sendrecv_reduce(self, sendbuf: Payload, dest: int, inoutbuf: Payload, source: int, op: Op = SUM,
                        sendtag: int = 0, recvtag: int = ANY_TAG) -> Proc[Payload]:
        """``sendrecv`` then ``reduce_local(op, received, inoutbuf)``, in one call; return the reduction.

        The same messages, the same times and the same numbers as the two calls. The point of
        one call is memory: when *inoutbuf* is owned (writable), the received block is reduced
        into it the moment it arrives, so it is never copied or kept. (A *sendbuf* sharing
        memory with an owned *inoutbuf* is copied first: MPI forbids receiving into a buffer
        that is being sent, and mpisim keeps that case correct instead.)
        """
        if inoutbuf.writable and _overlap(sendbuf, inoutbuf):
            sendbuf = sendbuf.copy()
        world = self.world
        sreq = world.post_send(self, sendbuf, dest, sendtag)
        rreq = world.post_recv(self, source, recvtag, inoutbuf, None, op)
        if not (sreq.triggered and rreq.triggered):
            # NOTE: World.block for the two requests, inlined: one generator less per step.
            state = world.states[self.group[self._rank]]
            state.call, state.waiting_on = (_sendrecv_name, dest, source), (sreq, rreq)
            t0 = world.env.now
            yield AllDone(world.env, (sreq, rreq))
            state.call, state.waiting_on = "", ()
            if world.tracer.record_spans:
                world._span(self.world_rank, "recv", t0, _sendrecv_name(dest, source), self._peer(source),
                            sreq.nbytes)
        received = rreq.outcome()
        result = received if inoutbuf.writable else inoutbuf.accumulate(received, op)
        if world.config.reduce_cost:
            yield from self._charge_reduce(op, inoutbuf.nbytes)
        return result

    def _charge_reduce(self, op: Op, nbytes: int) -> Proc[None]:
        cost = self.world.config.reduce_cost * nbytes
        if cost > 0:
            t0 = self.env.now
            yield self.env.timeout(cost)
            self.world._span(self.world_rank, "reduce", t0, f"reduce {op.name}", -1, nbytes)

    # ------------------------------------------------------------------ new communicators

    def dup(self) -> Proc[Comm]:
        """Return a copy of this communicator with new matching contexts (``MPI_Comm_dup``).

        A collective, as in MPI, used like :meth:`split`: ``new = yield from comm.dup()``.
        Every member calls it, in the same order relative to its other ``dup`` and ``split``
        calls; the members agree on the new context with one exchange of a small row each
        (ceil(lg p) rounds of messages, what MPICH's allreduce of its context-id mask costs).
        """
        return (yield from self._derive("dup", 0, 0))

    def split(self, color: int = 0, key: int = 0) -> Proc[Comm | None]:
        """Partition the communicator by *color*, ordering each part by *key* (``MPI_Comm_split``).

        A collective: every member exchanges its (color, key) with the others through a
        dissemination allgather on the collective context, which costs ceil(lg p) rounds of
        messages. Returns ``None`` for ``color=UNDEFINED`` (mpi4py's ``COMM_NULL``).
        """
        return (yield from self._derive("split", color, key))

    Dup = dup
    Clone = dup
    Split = split

    def Free(self) -> None:
        """Release this handle (``MPI_Comm_free``); any later use of it is an error naming the call.

        Local, as in MPI implementations: nothing is sent. ``COMM_WORLD`` cannot be freed.
        """
        if self.context == 0:
            raise InvalidCommunicatorError(f"rank {self.world_rank}: COMM_WORLD cannot be freed")
        self.__class__ = _FreedComm  # type: ignore[assignment]

    def _derive(self, how: str, color: int, key: int) -> Proc[Comm | None]:
        """The new communicator of a ``dup`` or ``split`` call, after the members' exchange of (call, color, key)."""
        self._derived += 1
        seq = self._derived
        kind = _DERIVE_KINDS.index(how)
        mine = np.array([self._rank, seq, kind, color, key], dtype=np.int64)
        table = (yield from self._allgather_small(mine)).reshape(-1, 5)
        disagree = table[(table[:, 1] != seq) | (table[:, 2] != kind)]
        if len(disagree):
            other = disagree[0]
            raise MPIError(f"rank {self.world_rank}: {how} is this rank's call #{seq} deriving a communicator, but "
                           f"rank {self.group[int(other[0])]}'s is {_DERIVE_KINDS[int(other[2])]} (call "
                           f"#{int(other[1])}): every member must make the same dup/split calls in the same order")
        if how == "dup":
            ctx = self.world.context_for((self.context, "dup", seq))
            return type(self)(self.world, self.group, self._rank, ctx)
        if color == UNDEFINED:
            return None
        members = sorted((int(k), int(r)) for r, _, _, c, k in table if c == color)
        group = tuple(self.group[r] for _, r in members)
        new_rank = [r for _, r in members].index(self._rank)
        ctx = self.world.context_for((self.context, "split", seq, int(color)))
        return type(self)(self.world, group, new_rank, ctx)

    def create_group(self, members: Sequence[int], tag: int = 0) -> Proc[Comm]:
        """A communicator of *members* (world ranks of this communicator, in that order) (``MPI_Comm_create_group``).

        Collective over the members only, who each pass the same members and *tag*; the others
        take no part. The members agree on the new context with one exchange of a small row
        each among themselves (ceil(lg m) rounds of messages), as for :meth:`dup`.
        """
        members = tuple(int(m) for m in members)
        me = self.group[self._rank]
        outside = [m for m in members if m not in self.group]
        if me not in members or outside:
            what = f"rank {outside[0]} is not in the communicator" if outside else "the caller is not in the group"
            raise MPIError(f"rank {me}: create_group: {what}: only the group's members call it")
        key = (members, tag)
        self._created[key] = count = self._created.get(key, 0) + 1
        ctx = self.world.context_for((self.context, "create_group", members, tag, count))
        comm = type(self)(self.world, members, members.index(me), ctx)
        comm.internal = self.internal
        table = (yield from comm._allgather_small(np.array([comm._rank, tag, count], dtype=np.int64))).reshape(-1, 3)
        other = table[(table[:, 1] != tag) | (table[:, 2] != count)]
        if len(other):
            raise MPIError(f"rank {me}: create_group(tag={tag}) is this rank's call #{count} with this group, but rank "
                           f"{members[int(other[0][0])]}'s is create_group(tag={int(other[0][1])}) #{int(other[0][2])}: "
                           "every member must make the same calls in the same order")
        return comm

    def sub(self, ranks: Sequence[int], label: str = "") -> Comm | None:
        """Return the communicator of the given ranks of this one (``None`` if this rank is not in it).

        A simulator convenience for algorithms that know their groups from the topology
        (hierarchical allreduce's node and leader groups), like ``MPI_Comm_create_group``
        with a group every member computes alike: it sends no messages and is cached.
        """
        members = tuple(ranks)
        key = (label, members)
        if key in self._subs:
            return self._subs[key]
        comm = None
        if self._rank in members:
            ctx = self.world.context_for((self.context, "sub", *key))
            group = self.world.shared_group(ctx, lambda: tuple(self.group[r] for r in members))
            comm = Comm(self.world, group, members.index(self._rank), ctx)
            comm.internal = self.internal
        self._subs[key] = comm
        return comm

    def _allgather_small(self, mine: np.ndarray) -> Proc[np.ndarray]:
        """Dissemination allgather of one small int64 row per rank, in rank order."""
        p, r = self.size, self._rank
        rows = {r: mine}
        k = 1
        while k < p:
            payload = DataPayload(np.concatenate([rows[i] for i in sorted(rows)]))
            got = yield from self._coll_sendrecv(payload, (r + k) % p, (r - k) % p, tag=k)
            for row in got.array.reshape(-1, mine.size):
                rows[int(row[0])] = row
            k *= 2
        return np.concatenate([rows[i] for i in range(p)])

    # ------------------------------------------------------------------ collective plumbing

    def _coll_sendrecv(self, payload: Payload, dest: int, source: int, tag: int = 0) -> Proc[Payload]:
        """sendrecv on the collective context, so the exchange never matches user messages."""
        return (yield from self.coll.sendrecv(payload, dest, tag, None, source, tag))

    def with_wire(self, wire: Wire | None, *, shared: bool = False) -> Comm:
        """Return a handle on the same communicator and context whose messages use GPU protocol *wire*.

        Messages sent through it skip MPI's eager/rendezvous protocols and CPU overheads and pay
        the protocol's latency and bandwidth share instead (:mod:`mpisim.mpi.wire`); matching is
        unchanged, so they meet receives posted through any handle of the communicator. Each
        (peer, tag) is a connection whose messages move in order; with *shared*, all of this
        handle's messages to one peer share one connection (mpisim.mpi.protocols, "Connections").
        """
        view = Comm(self.world, self.group, self._rank, self.context, parent=self._parent or self)
        view.coll_context = self.coll_context
        view.wire = wire
        view.wire_shared = shared
        view.internal = self.internal
        return view

    @property
    def coll(self) -> Comm:
        """This communicator's collective context as a communicator (algorithms talk on it)."""
        if self._parent is not None:
            return self
        if self._coll is None:
            self._coll = Comm(self.world, self.group, self._rank, self.coll_context, parent=self)
            self._coll.internal = True
        return self._coll

    def next_collective(self, signature: str) -> int:
        """Number this rank's next collective call and check it matches the other members'."""
        parent = self._parent or self
        call = parent._collective_calls
        parent._collective_calls += 1
        self.world.check_collective(parent, call, signature)
        return call

    def _collective(self, collective: str, algorithm: str | None, **kwargs: Any) -> Proc[Any]:
        runner = Comm._collective_runner
        if runner is None:
            raise RuntimeError("collectives are not loaded: import mpisim.collectives")
        return (yield from runner(self, collective, algorithm, **kwargs))

    # ------------------------------------------------------------------ collectives (mpi4py-like)

    def barrier(self, algorithm: str | None = None) -> Proc[None]:
        """Block until every member has entered the barrier."""
        yield from self._collective("barrier", algorithm)

    def bcast(self, buf: Any, root: int = 0, algorithm: str | None = None) -> Proc[Any]:
        """Return root's *buf* on every rank (every rank passes a buffer of the same count).

        With ``in_place(buf)`` the result is also left in *buf* on every rank.
        """
        result = yield from self._collective("bcast", algorithm, buf=buf, root=root)
        return _settle_in_place(buf, result)

    def reduce(self, sendbuf: Any, op: Op = SUM, root: int = 0, algorithm: str | None = None) -> Proc[Any]:
        """Return the element-wise reduction of all ranks' *sendbuf* at *root* (``None`` elsewhere).

        With ``in_place(sendbuf)`` the root's result is also left in its *sendbuf*.
        """
        result = yield from self._collective("reduce", algorithm, buf=sendbuf, op=op, root=root)
        return _settle_in_place(sendbuf, result)

    def allreduce(self, sendbuf: Any, op: Op = SUM, algorithm: str | None = None) -> Proc[Any]:
        """Return the element-wise reduction of all ranks' *sendbuf* on every rank.

        With ``in_place(sendbuf)`` (``MPI_IN_PLACE``) the result is left in *sendbuf* itself
        and returned as that payload; no second buffer of its size is allocated by algorithms
        that work in place (ring), and any other algorithm's result is copied into it.
        """
        result = yield from self._collective("allreduce", algorithm, buf=sendbuf, op=op)
        return _settle_in_place(sendbuf, result)

    def allgather(self, sendbuf: Any, algorithm: str | None = None) -> Proc[Any]:
        """Return all ranks' *sendbuf* (equal counts) concatenated in rank order, on every rank."""
        return (yield from self._collective("allgather", algorithm, buf=sendbuf))

    def reduce_scatter(self, sendbuf: Any, op: Op = SUM, algorithm: str | None = None) -> Proc[Any]:
        """Reduce all ranks' *sendbuf* and return block *rank* of the result (``np.array_split`` blocks)."""
        return (yield from self._collective("reduce_scatter", algorithm, buf=sendbuf, op=op))

    def alltoall(self, sendbuf: Any, algorithm: str | None = None) -> Proc[Any]:
        """Send block j of *sendbuf* to rank j; return the blocks received, in rank order."""
        return (yield from self._collective("alltoall", algorithm, buf=sendbuf))

    def gather(self, sendbuf: Any, root: int = 0, algorithm: str | None = None) -> Proc[Any]:
        """Return all ranks' *sendbuf* concatenated at *root* (``None`` elsewhere)."""
        return (yield from self._collective("gather", algorithm, buf=sendbuf, root=root))

    def scatter(self, sendbuf: Any, root: int = 0, algorithm: str | None = None) -> Proc[Any]:
        """Return block *rank* of root's *sendbuf* (every rank passes a buffer of the same count)."""
        return (yield from self._collective("scatter", algorithm, buf=sendbuf, root=root))

    # ------------------------------------------------------------------ collectives, mpi4py's buffer forms
    #
    # mpi4py's signatures: the result goes into the caller's *recvbuf* (a numpy array, or a
    # payload), nothing is returned, and ``IN_PLACE`` as *sendbuf* means the input is in
    # *recvbuf* already. They run the same algorithms as the lowercase forms (``algorithm=``
    # chooses one); the mpi4py module of ``mpisim exec`` runs its uppercase calls through them.

    Barrier = barrier

    def Bcast(self, buf: Any, root: int = 0, algorithm: str | None = None) -> Proc[None]:
        """Broadcast root's *buf* into every rank's *buf* (``MPI_Bcast``)."""
        yield from self.bcast(self._into(buf, "Bcast"), root, algorithm)

    def Reduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, root: int = 0,
               algorithm: str | None = None) -> Proc[None]:
        """Reduce every rank's *sendbuf* into root's *recvbuf* (``MPI_Reduce``; ``IN_PLACE`` at the root).

        *recvbuf* matters at the root only (others may pass None).
        """
        if sendbuf is IN_PLACE:
            yield from self.reduce(self._into(recvbuf, "Reduce"), op, root, algorithm)
            return
        result = yield from self.reduce(sendbuf, op, root, algorithm)
        if self._rank == root:
            fill(self._into(recvbuf, "Reduce"), result)

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, algorithm: str | None = None) -> Proc[None]:
        """Reduce every rank's *sendbuf* into every rank's *recvbuf* (``MPI_Allreduce``; ``IN_PLACE``)."""
        into = self._into(recvbuf, "Allreduce")
        if sendbuf is IN_PLACE:
            yield from self.allreduce(into, op, algorithm)
            return
        fill(into, (yield from self.allreduce(sendbuf, op, algorithm)))

    def Reduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: Op = SUM,
                             algorithm: str | None = None) -> Proc[None]:
        """Reduce, then rank r's *recvbuf* gets block r of p equal blocks (``MPI_Reduce_scatter_block``).

        With ``IN_PLACE`` the input is the whole *recvbuf* and the result its first block.
        """
        into = self._into(recvbuf, "Reduce_scatter_block")
        send = as_payload(sendbuf) if sendbuf is not IN_PLACE else into.copy()
        if send.count % self.size:
            raise MPIError(f"rank {self.world_rank}: Reduce_scatter_block: {send.count} elements do not split into "
                           f"{self.size} equal blocks")
        fill(into, (yield from self.reduce_scatter(send, op, algorithm)))

    def Gather(self, sendbuf: Any, recvbuf: Any, root: int = 0, algorithm: str | None = None) -> Proc[None]:
        """Gather equal blocks into root's *recvbuf*, in rank order (``MPI_Gather``; ``IN_PLACE`` at the root)."""
        into = self._into(recvbuf, "Gather") if self._rank == root else None
        send = self._own_block(into) if sendbuf is IN_PLACE else sendbuf
        result = yield from self.gather(send, root, algorithm)
        if into is not None:
            fill(into, result)

    def Scatter(self, sendbuf: Any, recvbuf: Any, root: int = 0, algorithm: str | None = None) -> Proc[None]:
        """Block r of root's *sendbuf* into rank r's *recvbuf* (``MPI_Scatter``; ``IN_PLACE`` at the root).

        *sendbuf* matters at the root only (others may pass None).
        """
        into = None if recvbuf is IN_PLACE else self._into(recvbuf, "Scatter")
        if self._rank == root:
            send = sendbuf
        else:  # only the root's data travels; the others name the size of the whole
            send = SizePayload(into.count * self.size, into.dtype)  # type: ignore[union-attr]
        result = yield from self.scatter(send, root, algorithm)
        if into is not None:
            fill(into, result)

    def Allgather(self, sendbuf: Any, recvbuf: Any, algorithm: str | None = None) -> Proc[None]:
        """Every rank's equal block into every rank's *recvbuf*, in rank order (``MPI_Allgather``; ``IN_PLACE``)."""
        into = self._into(recvbuf, "Allgather")
        send = self._own_block(into) if sendbuf is IN_PLACE else sendbuf
        fill(into, (yield from self.allgather(send, algorithm)))

    def Alltoall(self, sendbuf: Any, recvbuf: Any, algorithm: str | None = None) -> Proc[None]:
        """Block j of *sendbuf* to rank j; block i of *recvbuf* from rank i (``MPI_Alltoall``; ``IN_PLACE``)."""
        into = self._into(recvbuf, "Alltoall")
        send = into.copy() if sendbuf is IN_PLACE else sendbuf
        fill(into, (yield from self.alltoall(send, algorithm)))

    def _into(self, buf: Any, call: str) -> Payload:
        """The caller's receive buffer as an owned payload (see :func:`in_place`), or a clear error."""
        try:
            return in_place(buf)
        except (ValueError, AttributeError) as err:
            raise TypeError(f"rank {self.world_rank}: {call}: the receive buffer: {err}") from None

    def _own_block(self, whole: Payload | None) -> Payload:
        """A copy of this rank's equal block of *whole* (the send data of an ``IN_PLACE`` gather)."""
        if whole is None:
            raise MPIError(f"rank {self.world_rank}: Gather: IN_PLACE is the root's send buffer only "
                           "(the other ranks send their own block)")
        n = whole.count // self.size
        return whole.slice(self._rank * n, (self._rank + 1) * n).copy()


#: What a row of :meth:`Comm._derive`'s exchange says the member is doing.
_DERIVE_KINDS = ("split", "dup")


class _FreedComm:
    """What a :class:`Comm` becomes after :meth:`Comm.Free`: every use is an MPI error naming it."""

    def __getattr__(self, name: str) -> Any:
        rank = self.__dict__["group"][self.__dict__["_rank"]]
        raise InvalidCommunicatorError(f"rank {rank}: comm.{name} on a freed communicator (after Free() it is "
                                       "MPI_COMM_NULL)")

    def __repr__(self) -> str:
        return "Comm(freed)"


def _overlap(a: Any, b: Payload) -> bool:
    """True if *a* (a payload or an array) and owned payload *b* share memory."""
    a = as_payload(a)
    return a.has_data and np.may_share_memory(a.array, b.array)


def _settle_in_place(buf: Any, result: Any) -> Any:
    """Leave an in-place collective's *result* in the caller's owned *buf* and return *buf*.

    An algorithm that works in place already returns *buf*'s own memory; any other result is
    copied into it, so ``in_place`` means the same for every algorithm.
    """
    if result is None or not getattr(buf, "writable", False) or not result.has_data:
        return result
    mine, theirs = buf.array, result.array
    if not (theirs.shape == mine.shape and theirs.__array_interface__["data"][0] == mine.__array_interface__["data"][0]):
        np.copyto(mine, theirs)
    return buf


def _ssend_name(req: Request) -> str:
    return "s" + req.describe()


def _sendrecv_name(dest: int, source: int) -> str:
    return f"sendrecv(dest={dest}, source={source if source != ANY_SOURCE else 'ANY_SOURCE'})"


def _wait_name(req: Request) -> str:
    return f"wait({req.describe()})"


__all__ = ["ANY_SOURCE", "ANY_TAG", "UNDEFINED", "Comm", "as_payload"]
