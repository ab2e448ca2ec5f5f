"""Persistent requests (``Send_init``, ``Recv_init``, ``Start``, ``Startall``): one communication set up once, started many times.

MPI's persistent requests bind the arguments of a send or receive once; each ``Start`` begins
one operation with them, reading the send buffer as it is *then*, and ``Wait``/``Test``
complete it, leaving the request inactive -- not ``MPI.REQUEST_NULL`` -- ready to start again,
until ``Free``. Each started operation is an ordinary nonblocking send or receive of the
simulated MPI, with its protocol and cost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mpisim.compat.mpi4py import bsend as _bsend
from mpisim.compat.mpi4py.environment import here
from mpisim.compat.mpi4py.msgbuffer import as_bytes, receiving
from mpisim.compat.mpi4py.request import Request
from mpisim.compat.mpi4py.status import Status
from mpisim.errors import MPIError
from mpisim.mpi.constants import ANY_SOURCE, ANY_TAG, ERR_REQUEST
from mpisim.mpi.payload import DataPayload


class _Handle:
    """One persistent request's state, shared by every ``Prequest`` object that is a handle to it."""

    __slots__ = ("after", "decode", "sim", "start")

    def __init__(self, start: Any) -> None:
        self.start, self.sim, self.decode, self.after = start, None, None, None


def _shared(name: str) -> property:
    return property(lambda self: getattr(self._handle, name), lambda self, value: setattr(self._handle, name, value))


#: MPICH's first request handle (kind MPIR_REQUEST, a direct handle; a negative C int).
_REQUEST_HANDLE = 0xAC000000 - (1 << 32)


class Prequest(Request):
    """A persistent request: ``Start`` begins its operation again; completing it leaves it inactive, not null.

    ``MPI.Prequest(req)``, ``Prequest.fromhandle(req.handle)`` and ``Prequest.fromint(req.toint())``
    are new handles to the same request, as in mpi4py: equal to it, and starting or completing
    one is starting or completing it.
    """

    _start = _shared("start")
    _sim = _shared("sim")
    _decode = _shared("decode")
    _after = _shared("after")

    def __init__(self, start: Callable[[], tuple[Any, Callable[[], None] | None]] | Prequest | None = None) -> None:
        if isinstance(start, Prequest):
            self._handle = start._handle
            return
        if isinstance(start, Request):  # mpi4py's checks: MPI.Prequest(MPI.REQUEST_NULL) is a null one
            if start:
                raise TypeError(f"expected a persistent request, got {type(start).__name__}")
            start = None
        self._handle = _Handle(start)
        super().__init__(None)

    def __eq__(self, other: object) -> bool:
        if self._start is None:  # freed: it is MPI.REQUEST_NULL
            return isinstance(other, Request) and not other
        if isinstance(other, Prequest):
            return other._handle is self._handle
        return isinstance(other, Request) and other._persistent is self._handle  # MPI.Request(prequest)

    def __hash__(self) -> int:
        return id(self._handle)

    def toint(self) -> int:
        """The request's integer handle (MPICH's handles are ints, C and Fortran alike), kept per rank."""
        handles = here("Prequest.toint").cache.setdefault("request handles", [])
        for i, known in enumerate(handles):
            if known is self._handle:
                return _REQUEST_HANDLE + i
        handles.append(self._handle)
        return _REQUEST_HANDLE + len(handles) - 1

    py2f = toint
    handle = property(toint)

    @classmethod
    def fromint(cls, handle: int) -> Prequest:
        """A new handle to the persistent request :meth:`toint` gave *handle* for on this rank."""
        ctx = here("Prequest.fromint")
        handles = ctx.cache.get("request handles", [])
        if not 0 <= int(handle) - _REQUEST_HANDLE < len(handles):
            raise MPIError(f"rank {ctx.rank}: Prequest.fromint: {handle} is not a request handle",
                           error_class=ERR_REQUEST)
        request = cls.__new__(cls)
        request._handle = handles[int(handle) - _REQUEST_HANDLE]
        return request

    f2py = fromhandle = fromint

    def __bool__(self) -> bool:
        return self._start is not None  # inactive is still a request; freed is MPI.REQUEST_NULL

    def Start(self) -> None:
        """Begin the request's operation, with its buffer as it is now (``MPI_Start``)."""
        ctx = here("Prequest.Start")
        ctx.enter()
        if self._start is None:
            raise MPIError(f"rank {ctx.rank}: Prequest.Start: the request has been freed", error_class=ERR_REQUEST)
        if self._sim is not None:
            raise MPIError(f"rank {ctx.rank}: Prequest.Start: the request is still active: complete it first",
                           error_class=ERR_REQUEST)
        self._sim, self._after = self._start()

    @classmethod
    def Startall(cls, requests: Sequence[Prequest]) -> None:
        """:meth:`Start` each request, in order (``MPI_Startall``)."""
        for request in requests:
            request.Start()

    def Free(self) -> None:
        """Forget the request (an active operation still completes); it becomes ``MPI.REQUEST_NULL``."""
        self._sim = self._start = None


class Persistent:
    """``Send_init``, ``Recv_init`` and the other modes: the persistent half of a communicator's point-to-point."""

    _c: Any  # the calling rank's simulated communicator (Comm)

    def Send_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        """A persistent send of *buf* to *dest* (``MPI_Send_init``)."""
        return self._persistent_send("Send_init", buf, dest, tag, lambda c, data: c.isend(data, dest, tag))

    Rsend_init = Send_init

    def Ssend_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        """A persistent synchronous send: each completes once its receive has matched (``MPI_Ssend_init``)."""
        return self._persistent_send("Ssend_init", buf, dest, tag, lambda c, data: c.issend(data, dest, tag))

    def Bsend_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        """A persistent buffered send: each copies into the attached buffer (``MPI_Bsend_init``)."""
        def start(c: Any, data: np.ndarray) -> Any:
            return _bsend.send(here("Prequest.Start"), c, data, dest, tag, "Bsend_init")

        return self._persistent_send("Bsend_init", buf, dest, tag, start)

    def _persistent_send(self, call: str, buf: Any, dest: int, tag: int, begin: Callable[[Any, np.ndarray], Any]) -> Prequest:
        here(f"Comm.{call}")
        as_bytes(buf, call)  # refuse a bad buffer now, as MPI does; the data is read at each Start
        c = self._c
        return Prequest(lambda: (begin(c, as_bytes(buf, call)), None))

    def Recv_init(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Prequest:
        """A persistent receive into *buf* (``MPI_Recv_init``)."""
        here("Comm.Recv_init")
        receiving(buf, "Recv_init")
        c = self._c

        def start() -> tuple[Any, Callable[[], None]]:
            into, finish = receiving(buf, "Recv_init")
            return c.irecv(DataPayload(into.view(np.uint8), writable=True), source, tag, Status()), finish

        return Prequest(start)
