"""The MPI protocols: eager, rendezvous and a GPU library's wire, each a chain of steps.

A :class:`~mpisim.mpi.world.World` moves each message through the network model with the
protocol a real MPI library would choose (:meth:`Protocols.post_send` chooses it):

================  ==================================  =======================================
protocol          the send completes when             wire traffic
================  ==================================  =======================================
eager  (n <= L)   the local copy is done              data
eager, sync       the receiver's ack has come back    data -> ack
rendezvous        the data has been delivered         RTS -> CTS -> data -> FIN
================  ==================================  =======================================

*L* is the eager limit of the path (shared memory and network limits differ). RTS, CTS and FIN
are control messages of ``header_bytes``. With the receive already posted and overheads zero,
on one link of latency alpha and seconds-per-byte beta, the time from posting the send to
the receive completing is ``alpha + n*beta`` (eager) and ``3*alpha + (n + 2h)*beta``
(rendezvous). An eager message that arrives before its receive is posted waits in the
*unexpected queue* and pays a memory copy when it is matched; a rendezvous sender simply
waits for the receiver. A synchronous send (``MPI_Ssend``) of at most *L* bytes goes as MPICH
sends it: eagerly, flagged, and the receiver answers the match with an ack of ``header_bytes``
(MPICH's ``SSEND_ACK``), so the receive is complete before the sender learns of it; a larger
one is a rendezvous, which waits for the receiver anyway. A message sent through ``comm.with_wire(wire)`` belongs to a GPU
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

**Steps.** A protocol is a chain of steps: each step starts a transfer (or a delay) and names
the step that follows it. A step that starts on its own is called soon (URGENT, now), where
SimPy would have scheduled the initialisation of a process doing the same work. A message's
chain ends when it reaches matching (:meth:`~mpisim.mpi.world.World._arrive`).

:class:`Protocols` is one of :class:`~mpisim.mpi.world.World`'s parts: its methods run on the
world and read its state (configuration, topology, network, per-pair sequence numbers).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import simpy

from mpisim.engine.events import URGENT, Call
from mpisim.engine.sim import call_later, call_now, succeed_now
from mpisim.errors import InvalidTagError
from mpisim.mpi.constants import MAX_TAG, PROC_NULL
from mpisim.mpi.payload import DataPayload, Payload, SizePayload, as_payload
from mpisim.mpi.proxy import ProxyThread
from mpisim.mpi.request import Request
from mpisim.mpi.wire import Wire

if TYPE_CHECKING:
    from mpisim.engine.sim import Proc
    from mpisim.mpi.comm import Comm
    from mpisim.mpi.config import MpiConfig
    from mpisim.network.base import NetworkModel
    from mpisim.network.links import Route
    from mpisim.network.topology import Topology


#: States of a proxied message's receive (Message.t_proxy): posted (or no proxy), being posted, or
#: being posted with the message landed and waiting for it.
_PROXY_POSTED, _PROXY_POSTING, _PROXY_LANDED = 0.0, 1.0, 2.0


class Message:
    """A message in flight: its envelope (context, source, tag), payload and protocol state."""

    __slots__ = (
        "connection", "context", "direct", "dst", "nbytes", "payload", "protocol", "recv_req", "send_req", "seq",
        "src", "src_rank", "sync", "t_data", "t_match", "t_phase", "t_post", "t_proxy", "tag", "unexpected", "user",
        "wire",
    )

    def __init__(self, src: int, dst: int, src_rank: int, context: int, tag: int,
                 payload: Payload, user: Any, protocol: str, send_req: Request, t_post: float,
                 nbytes: int) -> None:
        self.src = src  # world ranks
        self.dst = dst
        self.src_rank = src_rank  # sender's rank in the communicator
        self.context = context
        self.tag = tag
        self.payload = payload
        self.user = user  # what the receiver gets back (an array, or the payload itself)
        self.nbytes = nbytes  # payload.nbytes, which its sender has computed
        self.protocol = protocol
        self.send_req = send_req
        self.seq = 0
        self.t_post = t_post
        self.t_match = -1.0
        self.t_data = -1.0
        self.t_phase = -1.0  # start of the protocol phase in progress (for its span)
        self.t_proxy = _PROXY_POSTED  # across nodes through a proxy: is the receive posted? (_post_proxied)
        self.unexpected = False
        self.wire: Wire | None = None  # a GPU collective protocol (see mpisim.mpi.wire), else MPI's
        self.recv_req: Request | None = None  # the receive it matched
        #: On the collective-fidelity direct path (mpisim.mpi.direct): its
        #: handshake is timed, not sent, and it leaves no record.
        self.direct = False
        #: A synchronous eager send: complete when the receiver's ack arrives (World._pair starts it).
        self.sync = False

    def describe(self) -> str:
        return f"message from rank {self.src} to rank {self.dst} (tag {self.tag}, {self.nbytes} B, {self.protocol})"


class Protocols:
    """The sending side of :class:`~mpisim.mpi.world.World`: protocol choice and the protocols' step chains."""

    # The world's state these steps read (set by World.__init__).
    env: simpy.Environment
    config: MpiConfig
    topology: Topology
    network: NetworkModel
    fidelity: str
    origin: Callable[[], tuple[str, int] | None] | None
    _node_of: list[int]
    _send_seq: dict[tuple[int, int], int]
    _connections: dict[tuple[int, ...], list[tuple[Message, float]]]
    _sockets: dict[tuple[int, int], deque[Message]]
    _call_soon: Callable[[Callable[[Any], None], Any], None]
    _post: Callable[..., bool]

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
        protocol = "eager" if wire is not None or nbytes <= limit else "rendezvous"
        if payload.writable and protocol == "eager":
            payload = user = payload.copy()
        env = self.env
        req = Request(env, "send", comm, dest, tag, nbytes, protocol)
        if self.origin is not None:
            req.origin = self.origin()
        msg = Message(src, dst, rank, comm.context, tag, payload, user, protocol, req, env.now, nbytes)
        if synchronous and protocol == "eager":
            msg.sync = True
        if self.fidelity == "collective" and comm.internal and wire is None and payload.__class__ is SizePayload:
            msg.direct = True  # see mpisim.mpi.direct
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
            kind = self.topology.path_kind(src, dst)
            if wire.proxied(kind) and not payload.flag:  # the ends' proxy threads post it (mpisim.mpi.wire, "proxy")
                self._post_proxied(msg)
            else:  # a credit across nodes waits for the other channels' posts, not in the threads' queues
                Call(self.env, self._inject_wire, msg, wire.lone_latency(kind), URGENT)
        elif protocol == "eager" and cfg.send_overhead == 0.0 and cfg.copy_time(nbytes) == 0.0:
            # NOTE: the common case needs no sender step: the send is complete at once.
            if not msg.sync:
                req.succeed()
            self._call_soon(self._inject_eager, msg)
        elif cfg.send_overhead == 0.0:
            self._call_soon(self._send_after_overhead, msg)  # NOTE: _start_send with no overhead
        else:
            self._call_soon(self._start_send, msg)
        return req

    def _start_send(self, msg: Message) -> None:
        overhead = self.config.send_overhead
        if overhead:
            call_later(self.env, self._send_after_overhead, msg, overhead)  # ranks in step share an entry
        else:
            self._send_after_overhead(msg)

    def _send_after_overhead(self, msg: Message) -> None:
        if msg.protocol == "eager":
            copy = self.config.copy_time(msg.nbytes)
            if copy:
                msg.t_phase = self.env.now
                Call(self.env, self._eager_copied, msg, copy)
            else:
                if not msg.sync:
                    msg.send_req.succeed()
                self._inject_eager(msg)
            return
        # Rendezvous: request to send, wait for clear to send, then the data.
        msg.t_phase = self.env.now
        if msg.direct:
            self._after_control(msg.src, msg.dst, self._arrive, msg)
            return
        # NOTE: with no span to record, the RTS's arrival is the envelope's arrival (one call less).
        then = self._rts_arrived if self.tracer.record_spans else self._arrive
        if self._post(msg.src, msg.dst, self.config.header_bytes, then, msg):
            then(msg)

    def _eager_copied(self, msg: Message) -> None:
        self._span(msg.src, "copy", msg.t_phase, "eager send copy", msg.dst, msg.nbytes)
        if not msg.sync:
            msg.send_req.succeed()
        self._inject_eager(msg)

    def _inject_eager(self, msg: Message) -> None:
        msg.t_data = self.env.now
        post = self._post_flag if msg.payload.flag else self._post
        if post(msg.src, msg.dst, msg.nbytes, self._arrive, msg):
            self._arrive(msg)

    def _post_flag(self, src: int, dst: int, nbytes: int, fn: Callable[[Any], None] | None, arg: Any) -> bool:
        """Post a flow-control flag (a pipeline's credit): on the single-port network it holds no port."""
        post_flag = getattr(self.network, "post_flag", None)
        return post_flag(src, dst, fn, arg) if post_flag is not None else self._post(src, dst, nbytes, fn, arg)

    def _inject_wire(self, msg: Message) -> None:
        msg.t_data = self.env.now
        # A flag (a pipeline credit): no chunk to queue behind, no port held. Through a proxy
        # (across nodes, mpisim.mpi.wire) an empty block of data is a posted step like any other.
        if msg.nbytes == 0 and (msg.payload.flag or not msg.wire.proxied(self.topology.path_kind(msg.src, msg.dst))):  # type: ignore[union-attr]
            if self._post_flag(msg.src, msg.dst, 0, self._arrive, msg):
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
            remaining = t_ready + self._wire_route_latency(nxt) - self.env.now
            self._post_wire(nxt, max(0.0, remaining))
        else:
            del self._connections[key]
        if msg.t_proxy == _PROXY_POSTING:  # the receiver's proxy has not posted its receive yet
            msg.t_proxy = _PROXY_LANDED
            return
        self._arrive(msg)

    def _post_proxied(self, msg: Message) -> None:
        """Hand a message across nodes to its ends' proxy threads (:mod:`mpisim.mpi.proxy`).

        The sender's thread posts the send's steps (``proxy_send`` seconds of its time, for the
        ``proxy_channels`` channels the message stands for); the hop's latency then runs, less
        the one channel's post it already holds (alone: ``proxy_send x (channels - 1) / channels``
        before the latency). The receiver's thread posts the receive at the same time (NCCL's
        proxies post receives ahead, up to NCCL_STEPS): the message is delivered once it has
        landed and the thread has done the receive's posts, so the network's latency and the
        receiver's posts overlap. Each thread serves its posts one at a time, those of one
        instant in the order of their keys (:class:`~mpisim.mpi.proxy.ProxyThread`), so the
        answer does not depend on the order in which the simulator processes them.
        """
        wire = msg.wire
        connection = msg.connection
        msg.seq = self._proxy_seq.get(connection, 0)  # its place among same-instant posts: no event order
        self._proxy_seq[connection] = msg.seq + 1
        if wire.proxy_send > 0.0:  # type: ignore[union-attr]
            self._proxy(msg.src).submit(wire.proxy_send, (0, connection, msg.seq), self._proxy_sent, msg)  # type: ignore[union-attr]
        else:
            self._proxy_sent(msg)
        if wire.proxy_recv > 0.0:  # type: ignore[union-attr]
            msg.t_proxy = _PROXY_POSTING
            self._proxy(msg.dst).submit(wire.proxy_recv, (1, connection, msg.seq), self._proxy_received, msg)  # type: ignore[union-attr]

    def _proxy(self, rank: int) -> ProxyThread:
        thread = self._proxies.get(rank)
        if thread is None:
            thread = self._proxies[rank] = ProxyThread(self.env)
        return thread

    def _proxy_sent(self, msg: Message) -> None:
        wire = msg.wire
        latency = wire.latency("inter") - wire.proxy_send / wire.proxy_channels  # type: ignore[union-attr]
        Call(self.env, self._inject_wire, msg, max(0.0, latency), URGENT)

    def _proxy_received(self, msg: Message) -> None:
        landed = msg.t_proxy == _PROXY_LANDED
        msg.t_proxy = _PROXY_POSTED
        if landed:
            self._arrive(msg)

    def _rts_arrived(self, msg: Message) -> None:
        if self.tracer.record_spans:
            self._span(msg.src, "rts", msg.t_phase, "RTS", msg.dst, self.config.header_bytes)
        self._arrive(msg)

    def _start_cts(self, msg: Message) -> None:
        msg.t_phase = self.env.now
        if msg.direct:
            self._after_control(msg.dst, msg.src, self._cts_arrived, msg)
            return
        if self._post(msg.dst, msg.src, self.config.header_bytes, self._cts_arrived, msg):
            self._cts_arrived(msg)

    def _cts_arrived(self, msg: Message) -> None:
        if self.tracer.record_spans and not msg.direct:
            self._span(msg.dst, "cts", msg.t_phase, "CTS", msg.src, self.config.header_bytes)
        overhead = self.config.rendezvous_overhead
        if not overhead or self._node_of[msg.src] == self._node_of[msg.dst]:
            call_now(self.env, self._send_data, msg)  # the sender learns of the CTS (an event; senders in step share it)
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
        msg.t_data = self.env.now
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
        succeed_now(self.env, msg.send_req, None)
        delay = self.config.recv_overhead
        # NOTE: World._complete_recv, inlined (once a message).
        if delay > 0:
            call_later(self.env, self._finish_recv, msg, delay)
        else:
            self._finish_recv(msg)
        if self.config.rendezvous_overhead and self._node_of[msg.src] != self._node_of[msg.dst]:
            self._release_socket(msg)
        if not msg.direct:
            self._call_soon(self._start_fin, msg)

    def _start_ack(self, msg: Message) -> None:
        """A synchronous eager message matched: the receiver tells the sender (MPICH's SSEND_ACK)."""
        msg.t_phase = self.env.now
        if self._post(msg.dst, msg.src, self.config.header_bytes, self._ack_arrived, msg):
            self._ack_arrived(msg)

    def _ack_arrived(self, msg: Message) -> None:
        if self.tracer.record_spans:
            # drawn as the protocol's closing control message, as a rendezvous's FIN is
            self._span(msg.dst, "fin", msg.t_phase, "ssend ack", msg.src, self.config.header_bytes)
        succeed_now(self.env, msg.send_req, None)

    def _start_fin(self, msg: Message) -> None:
        msg.t_phase = self.env.now
        # Nobody waits for a FIN; its arrival matters only to the span it records.
        then = self._fin_arrived if self.tracer.record_spans else None
        if self._post(msg.dst, msg.src, self.config.header_bytes, then, msg):
            self._fin_arrived(msg)

    def _fin_arrived(self, msg: Message) -> None:
        self._span(msg.dst, "fin", msg.t_phase, "FIN", msg.src, self.config.header_bytes)

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
