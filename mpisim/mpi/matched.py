"""Matched probes (``MPI_Mprobe``, ``MPI_Improbe``, ``MPI_Mrecv``): probe a message and take it, so no other receive can.

``MPI_Probe`` then ``MPI_Recv`` has a race in a threaded or layered program: another receive
may match the probed message between the two calls. MPI-3's matched probe closes it: the probe
*dequeues* the message it finds (from the unexpected queue, where an arrived envelope waits for
its receive) and hands back a message handle; only ``MPI_Mrecv`` with that handle can receive
it. Here the handle is the simulated :class:`~mpisim.mpi.protocols.Message` itself: the probe
takes it out of the mailbox's unexpected queue, and the matched receive pairs it with a new
receive request exactly as a posted receive would have been paired (:meth:`World._pair`): the
same truncation check, the same eager copy out of the unexpected queue, the same rendezvous
handshake, which starts only now, when the receive exists.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mpisim.mpi.constants import ANY_TAG, PROC_NULL
from mpisim.mpi.payload import as_payload
from mpisim.mpi.request import Request, Status

if TYPE_CHECKING:
    from mpisim.engine.sim import Proc
    from mpisim.mpi.comm import Comm
    from mpisim.mpi.protocols import Message


def _take(comm: Comm, msg: Message, status: Status | None) -> Message:
    comm.world.mailboxes[comm.world_rank].unexpected.remove(msg)
    comm._fill_status(msg, status)
    return msg


def mprobe(comm: Comm, source: int, tag: int, status: Status | None = None) -> Proc[Message | None]:
    """Wait for a matching message and dequeue it (``MPI_Mprobe``); None for ``PROC_NULL`` (``MPI_MESSAGE_NO_PROC``)."""
    if source == PROC_NULL:
        _no_proc(status)
        return None
    world = comm.world
    unexpected = world.mailboxes[comm.world_rank].unexpected
    while True:
        event, msg = world.probe_event(comm, source, tag)
        if msg is None:
            msg = yield from world.block(comm.world_rank, event, f"mprobe(source={source}, tag={tag})", [event], "wait")
        if msg in unexpected:  # another matched probe woken by the same message may have taken it first
            return _take(comm, msg, status)


def improbe(comm: Comm, source: int, tag: int, status: Status | None = None) -> tuple[bool, Message | None]:
    """``(found, message)``: dequeue a matching message if one has arrived (``MPI_Improbe``)."""
    if source == PROC_NULL:
        _no_proc(status)
        return True, None
    msg = comm.world.find_unexpected(comm, source, tag)
    if msg is None:
        return False, None
    return True, _take(comm, msg, status)


def mrecv(comm: Comm, msg: Message | None, buf: Any = None, status: Status | None = None) -> Request:
    """Receive the dequeued *msg* (``MPI_Imrecv``): its request, whose value is the received buffer.

    *buf* is as for :meth:`World.post_recv`: a writable payload receives the data, anything
    else only bounds the size accepted. ``msg`` None (``MESSAGE_NO_PROC``) completes at once, empty.
    """
    world = comm.world
    if msg is None:
        req = Request(world.env, "recv", comm, PROC_NULL, ANY_TAG)
        _no_proc(status)
        req.succeed(None)
        return req
    req = Request(world.env, "recv", comm, msg.src_rank, msg.tag)
    req.status = status
    if buf is not None:
        buf = as_payload(buf)
        req.capacity = buf.nbytes
        if buf.writable:
            req.into = buf
    world._pair(msg, req)
    return req


def _no_proc(status: Status | None) -> None:
    if status is not None:
        status.source, status.tag, status.count, status.nbytes = PROC_NULL, ANY_TAG, 0, 0
