"""Point-to-point calls of ``MPI.Comm``: objects (``send, recv, isend, ...``) and buffers (``Send, Recv, Isend, ...``).

A mixin of :class:`~mpisim.compat.mpi4py.comm.Comm` (``self._c`` is the calling rank's
simulated communicator). Lowercase calls send an object's pickle, as mpi4py does, so the
simulated message has mpi4py's size; uppercase calls send the buffer's bytes (MPI matches
messages by bytes, whatever the types on each side) and receive into the program's buffer.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from mpisim.compat import collectives as _coll
from mpisim.compat.buffers import memory_of
from mpisim.compat.mpi4py import bsend as _bsend
from mpisim.compat.mpi4py.environment import here
from mpisim.compat.mpi4py.message import Message
from mpisim.compat.mpi4py.msgbuffer import as_bytes, elements, nothing, receiving, unpickled
from mpisim.compat.mpi4py.request import Request
from mpisim.compat.mpi4py.status import Status
from mpisim.mpi.constants import ANY_SOURCE, ANY_TAG, PROC_NULL
from mpisim.mpi.payload import DataPayload, SizePayload
from mpisim.mpi.request import Request as SimRequest


def _room(buf: Any) -> int:
    """The bytes a lowercase receive's *buf* leaves for the pickle: an int itself, a buffer its length."""
    if isinstance(buf, int | np.integer):
        return int(buf)
    return int(memory_of(buf).nbytes)


class PointToPoint:
    """``send``/``Send`` and the rest: the point-to-point half of a communicator."""

    _c: Any  # the calling rank's simulated communicator (Comm)
    _on: Callable[[Any], Any]  # the same, for a caller that holds its rank's context (Comm)

    # ---- point-to-point, objects

    def send(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Send a picklable object (``MPI_Send`` of its pickle)."""
        ctx = here("Comm.send")
        _peer(ctx, "send", "dest", dest)
        ctx.block(self._on(ctx).send(_coll.dumps(obj), dest, tag))

    def ssend(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Synchronous send: returns once the receive has matched."""
        here("Comm.ssend").block(self._c.ssend(_coll.dumps(obj), dest, tag))

    rsend = send

    def bsend(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Buffered send of an object's pickle (``MPI_Bsend``)."""
        ctx = here("Comm.bsend")
        ctx.enter()
        _bsend.send(ctx, self._on(ctx), _coll.dumps(obj), dest, tag, "bsend")

    def ibsend(self, obj: Any, dest: int, tag: int = 0) -> Request:
        ctx = here("Comm.ibsend")
        ctx.enter()
        _bsend.send(ctx, self._on(ctx), _coll.dumps(obj), dest, tag, "ibsend")
        return Request()

    def isend(self, obj: Any, dest: int, tag: int = 0) -> Request:
        """Start sending an object; returns a Request."""
        ctx = here("Comm.isend")
        ctx.enter()
        return _watch(ctx, Request(self._c.isend(_coll.dumps(obj), dest, tag)), "isend", "dest", dest, tag)

    def issend(self, obj: Any, dest: int, tag: int = 0) -> Request:
        ctx = here("Comm.issend")
        ctx.enter()
        return _watch(ctx, Request(self._c.issend(_coll.dumps(obj), dest, tag)), "issend", "dest", dest, tag)

    irsend = isend

    def recv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> Any:
        """Receive and return an object.

        A *buf* (a byte count, or a buffer whose length is the room) is mpi4py's deprecated form:
        a ``UserWarning``, then a pickle longer than the room is truncated (``MPI.ERR_TRUNCATE``).
        """
        ctx = here("Comm.recv")
        _peer(ctx, "recv", "source", source)
        room = None
        if buf is not None:
            warnings.warn("the 'buf' argument is deprecated", UserWarning, stacklevel=2)
            if source != PROC_NULL:
                room = SizePayload(_room(buf), np.uint8)
        value = ctx.block(self._on(ctx).recv(room, source, tag, status))
        return None if source == PROC_NULL else unpickled(value)

    def irecv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """Start receiving an object; ``req.wait()`` returns it."""
        ctx = here("Comm.irecv")
        ctx.enter()
        return _watch(ctx, Request(self._c.irecv(None, source, tag, Status()),
                                   decode=None if source == PROC_NULL else unpickled), "irecv", "source", source, tag)

    def sendrecv(self, sendobj: Any, dest: int, sendtag: int = 0, recvbuf: Any = None, source: int = ANY_SOURCE,
                 recvtag: int = ANY_TAG, status: Status | None = None) -> Any:
        """Send an object and receive one, at once."""
        ctx = here("Comm.sendrecv")
        _peer(ctx, "sendrecv", "dest", dest)
        _peer(ctx, "sendrecv", "source", source)
        value = ctx.block(self._c.sendrecv(_coll.dumps(sendobj), dest, sendtag, None, source, recvtag, status))
        return None if source == PROC_NULL else unpickled(value)

    def probe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> bool:
        """Wait until a matching message has arrived (``MPI_Probe``)."""
        here("Comm.probe").block(self._c.probe(source, tag, status))
        return True

    Probe = probe

    def iprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> bool:
        """True if a matching message has arrived."""
        ctx = here("Comm.iprobe")
        ctx.enter()
        found = self._c.iprobe(source, tag, status)
        if not found:
            ctx.poll()
        return found

    Iprobe = iprobe

    def Mprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> Message:
        """Wait for a matching message and take it: only the returned ``MPI.Message`` receives it (``MPI_Mprobe``)."""
        return Message.probe(self, source, tag, status)

    mprobe = Mprobe

    def Improbe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> Message | None:
        """Take a matching message if one has arrived: an ``MPI.Message``, else None (``MPI_Improbe``)."""
        return Message.iprobe(self, source, tag, status)

    improbe = Improbe

    # ---- point-to-point, buffers

    def Send(self, buf: Any, dest: int, tag: int = 0) -> None:
        """Send a buffer (``MPI_Send``)."""
        ctx = here("Comm.Send")
        _peer(ctx, "Send", "dest", dest)
        ctx.block(self._on(ctx).send(as_bytes(buf, "Send"), dest, tag))

    Rsend = Send

    def Bsend(self, buf: Any, dest: int, tag: int = 0) -> None:
        """Buffered send: copy into the attached buffer and return at once (``MPI_Bsend``; :mod:`.bsend`)."""
        ctx = here("Comm.Bsend")
        ctx.enter()
        _bsend.send(ctx, self._on(ctx), as_bytes(buf, "Bsend"), dest, tag, "Bsend")

    def Ibsend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """Nonblocking buffered send: complete as soon as the message is in the attached buffer (``MPI_Ibsend``)."""
        ctx = here("Comm.Ibsend")
        ctx.enter()
        _bsend.send(ctx, self._on(ctx), as_bytes(buf, "Ibsend"), dest, tag, "Ibsend")
        return Request()

    def Ssend(self, buf: Any, dest: int, tag: int = 0) -> None:
        """Synchronous send of a buffer (``MPI_Ssend``)."""
        here("Comm.Ssend").block(self._c.ssend(as_bytes(buf, "Ssend"), dest, tag))

    def Isend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """Start sending a buffer (``MPI_Isend``)."""
        ctx = here("Comm.Isend")
        ctx.enter()
        data = elements(buf, "Isend")
        return _watch(ctx, Request(self._on(ctx).isend(data.view(np.uint8), dest, tag)), "Isend", "dest", dest, tag,
                      data)

    Irsend = Isend

    def Issend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        ctx = here("Comm.Issend")
        ctx.enter()
        data = elements(buf, "Issend")
        return _watch(ctx, Request(self._c.issend(data.view(np.uint8), dest, tag)), "Issend", "dest", dest, tag, data)

    def Recv(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> None:
        """Receive into the program's buffer (``MPI_Recv``)."""
        ctx = here("Comm.Recv")
        _peer(ctx, "Recv", "source", source)
        into, finish = receiving(buf, "Recv")
        ctx.block(self._on(ctx).recv(DataPayload(into.view(np.uint8), writable=True), source, tag, status))
        finish()

    def Irecv(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """Start receiving into the program's buffer (``MPI_Irecv``)."""
        ctx = here("Comm.Irecv")
        ctx.enter()
        into, finish = receiving(buf, "Irecv")
        return _watch(ctx, Request(self._on(ctx).irecv(DataPayload(into.view(np.uint8), writable=True), source, tag,
                                                       Status()), after=None if finish is nothing else finish),
                      "Irecv", "source", source, tag)

    def Sendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None, source: int = ANY_SOURCE,
                 recvtag: int = ANY_TAG, status: Status | None = None) -> None:
        """Send a buffer and receive into another at once (``MPI_Sendrecv``)."""
        ctx = here("Comm.Sendrecv")
        _peer(ctx, "Sendrecv", "dest", dest)
        _peer(ctx, "Sendrecv", "source", source)
        into, finish = receiving(recvbuf, "Sendrecv")
        ctx.block(self._c.sendrecv(as_bytes(sendbuf, "Sendrecv"), dest, sendtag,
                                   DataPayload(into.view(np.uint8), writable=True), source, recvtag, status))
        finish()

    def Sendrecv_replace(self, buf: Any, dest: int, sendtag: int = 0, source: int = ANY_SOURCE,
                         recvtag: int = ANY_TAG, status: Status | None = None) -> None:
        """Send a buffer and receive into the same buffer (``MPI_Sendrecv_replace``)."""
        ctx = here("Comm.Sendrecv_replace")
        into, finish = receiving(buf, "Sendrecv_replace")
        array = into.view(np.uint8)
        ctx.block(self._c.sendrecv(array.copy(), dest, sendtag, DataPayload(array, writable=True), source, recvtag,
                                   status))
        finish()

    def Isendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None, source: int = ANY_SOURCE,
                  recvtag: int = ANY_TAG) -> Request:
        """Start a send and a receive as one request (``MPI_Isendrecv``, MPI 4): complete once both are."""
        ctx = here("Comm.Isendrecv")
        ctx.enter()
        into, finish = receiving(recvbuf, "Isendrecv")
        c = self._on(ctx)
        sreq = c.isend(as_bytes(sendbuf, "Isendrecv"), dest, sendtag)
        rreq = c.irecv(DataPayload(into.view(np.uint8), writable=True), source, recvtag, Status())
        return _watch(ctx, Request(_joined(c, sreq, rreq), after=None if finish is nothing else finish),
                      "Isendrecv", "source", source, recvtag)

    def Isendrecv_replace(self, buf: Any, dest: int, sendtag: int = 0, source: int = ANY_SOURCE,
                          recvtag: int = ANY_TAG) -> Request:
        """Start sending a buffer and receiving into it, as one request (``MPI_Isendrecv_replace``, MPI 4).

        The data sent is the buffer as it was at the call (MPI keeps it aside), so the receive may
        land in it at any time.
        """
        ctx = here("Comm.Isendrecv_replace")
        ctx.enter()
        into, finish = receiving(buf, "Isendrecv_replace")
        array = into.view(np.uint8)
        c = self._on(ctx)
        sreq = c.isend(array.copy(), dest, sendtag)
        rreq = c.irecv(DataPayload(array, writable=True), source, recvtag, Status())
        return _watch(ctx, Request(_joined(c, sreq, rreq), after=None if finish is nothing else finish),
                      "Isendrecv_replace", "source", source, recvtag)


def _joined(c: Any, sreq: SimRequest, rreq: SimRequest) -> SimRequest:
    """One request for a send and a receive: it completes, with the receive's value and status, once both have.

    A failed half (a truncated receive) fails it with that error.
    """
    joined = SimRequest(c.world.env, "recv", c, rreq.peer, rreq.tag)
    joined.status = rreq.status

    def settle(_: Any = None) -> None:
        if joined.triggered or not (sreq.triggered and rreq.triggered):
            return
        joined.status = rreq.status
        for half in (sreq, rreq):
            if not half.ok:
                half.defused = True
                joined.fail(half.value)
                return
        joined.succeed(rreq.value)

    for half in (sreq, rreq):
        if half.callbacks is not None:
            half.callbacks.append(settle)
    settle()
    return joined


def _watch(ctx: Any, request: Request, call: str, name: str, peer: int, tag: int, data: Any = None) -> Request:
    """Under ``--check``: the request is followed to its completion (:mod:`mpisim.compat.check`)."""
    checker = ctx.runner.checker
    if checker is not None:
        checker.values.peer(ctx, call, name, peer)
        checker.requests.started(ctx, request, f"{call}({name}={peer}, tag={tag})", data)
    return request


def _peer(ctx: Any, call: str, name: str, peer: int) -> None:
    """Under ``--check``: a peer of -1 that was computed, not written as PROC_NULL, is reported."""
    checker = ctx.runner.checker
    if checker is not None:
        checker.values.peer(ctx, call, name, peer)
