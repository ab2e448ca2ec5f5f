"""``MPI.Message``: a matched probe's handle (``Comm.Mprobe``/``Improbe``, then ``Message.Recv``/``recv``).

A matched probe finds a message *and takes it*: no other receive can match it any more, and
only the returned handle receives it (:mod:`mpisim.mpi.matched`). That is how a program learns
a message's size before allocating its buffer without a race::

    status = MPI.Status()
    msg = comm.Mprobe(source=MPI.ANY_SOURCE, tag=7, status=status)
    buf = np.empty(status.Get_count(MPI.DOUBLE))
    msg.Recv(buf)                                  # exactly the probed message

The lowercase forms (``comm.mprobe``, ``msg.recv``, ``msg.irecv``) carry pickled objects, as
mpi4py's. A received handle becomes ``MPI.MESSAGE_NULL``; probing ``PROC_NULL`` gives
``MPI.MESSAGE_NO_PROC``, whose receive completes at once, empty.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mpisim.compat.mpi4py.environment import here
from mpisim.compat.mpi4py.msgbuffer import receiving, unpickled
from mpisim.compat.mpi4py.request import Request
from mpisim.compat.mpi4py.status import Status
from mpisim.compat.unsupported import Strict
from mpisim.errors import MPIError
from mpisim.mpi import matched
from mpisim.mpi.constants import ANY_SOURCE, ANY_TAG
from mpisim.mpi.payload import DataPayload

_NO_PROC = object()  # the handle of a probe of PROC_NULL


class Message(metaclass=Strict):
    """A probed, dequeued message waiting for its receive: ``Recv``, ``Irecv``, ``recv``, ``irecv``."""

    def __init__(self, message: Any = None) -> None:
        if isinstance(message, Message):
            self._sim, self._comm = message._sim, message._comm
        else:
            self._sim, self._comm = None, None

    @classmethod
    def _of(cls, sim: Any, comm: Any) -> Message:
        message = cls()
        message._sim, message._comm = (_NO_PROC if sim is None else sim), comm
        return message

    def __bool__(self) -> bool:
        return self._sim is not None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Message) and other._sim is self._sim

    def __hash__(self) -> int:
        return id(self._sim)

    def __repr__(self) -> str:
        return "<mpi4py.MPI.Message>"

    def __reduce__(self) -> Any:
        """The predefined handles pickle as themselves, copies of them as copies; a live message cannot be pickled."""
        for name, predefined in (("MESSAGE_NULL", MESSAGE_NULL), ("MESSAGE_NO_PROC", MESSAGE_NO_PROC)):
            if self is predefined:
                return _predefined, (name,)
            if self == predefined:
                return Message, (predefined,)
        raise ValueError("cannot serialize 'mpi4py.MPI.Message' instance")

    # ---- probing (also as Comm.Mprobe / Comm.Improbe)

    @classmethod
    def probe(cls, comm: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> Message:
        """Wait for a matching message and take it (``MPI_Mprobe``)."""
        ctx = here("Message.probe")
        c = comm._on(ctx)
        return cls._of(ctx.block(matched.mprobe(c, source, tag, status)), c)

    @classmethod
    def iprobe(cls, comm: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG,
               status: Status | None = None) -> Message | None:
        """Take a matching message if one has arrived, else None (``MPI_Improbe``)."""
        ctx = here("Message.iprobe")
        ctx.enter()
        c = comm._on(ctx)
        found, sim = matched.improbe(c, source, tag, status)
        if not found:
            ctx.poll()
            return None
        return cls._of(sim, c)

    Probe = probe
    Iprobe = iprobe

    # ---- receiving

    def _start(self, call: str, buf: Any, status: Status | None) -> Any:
        if self._sim is None:
            raise MPIError(f"rank {here(call).rank}: {call}: the message is MPI.MESSAGE_NULL (already received?)")
        sim, comm = self._sim, self._comm
        if comm is None:  # MPI.MESSAGE_NO_PROC itself: received on the caller's world, as an empty message
            comm = here(call).comm
        if self is not MESSAGE_NO_PROC:  # a received handle becomes MESSAGE_NULL; the predefined one stays, as in mpi4py
            self._sim = None
        return matched.mrecv(comm, None if sim is _NO_PROC else sim, buf, status)

    def Recv(self, buf: Any, status: Status | None = None) -> None:
        """Receive the message into the program's buffer (``MPI_Mrecv``)."""
        ctx = here("Message.Recv")
        into, finish = receiving(buf, "Message.Recv")
        req = self._start("Message.Recv", DataPayload(into.view(np.uint8), writable=True), status)
        ctx.block(ctx.comm.wait(req))
        finish()

    def Irecv(self, buf: Any) -> Request:
        """Start receiving the message into the program's buffer (``MPI_Imrecv``)."""
        ctx = here("Message.Irecv")
        ctx.enter()
        into, finish = receiving(buf, "Message.Irecv")
        req = self._start("Message.Irecv", DataPayload(into.view(np.uint8), writable=True), Status())
        return Request(req, after=finish)

    def recv(self, status: Status | None = None) -> Any:
        """Receive the message's object (``MPI_Mrecv`` of its pickle)."""
        ctx = here("Message.recv")
        no_proc = self._sim is _NO_PROC
        value = ctx.block(ctx.comm.wait(self._start("Message.recv", None, status)))
        return None if no_proc else unpickled(value)

    def irecv(self) -> Request:
        """Start receiving the message's object; ``req.wait()`` returns it."""
        ctx = here("Message.irecv")
        ctx.enter()
        no_proc = self._sim is _NO_PROC
        return Request(self._start("Message.irecv", None, Status()), decode=None if no_proc else unpickled)


def _predefined(name: str) -> Message:
    """``MPI.MESSAGE_NULL`` or ``MPI.MESSAGE_NO_PROC`` by name (unpickling one)."""
    return {"MESSAGE_NULL": MESSAGE_NULL, "MESSAGE_NO_PROC": MESSAGE_NO_PROC}[name]


MESSAGE_NULL = Message()
MESSAGE_NO_PROC = Message._of(None, None)
