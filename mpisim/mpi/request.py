"""Requests and statuses: the handles of non-blocking operations.

``isend``/``irecv`` return a :class:`Request`, which *is* a SimPy event: a rank waits for it
with ``value = yield req`` (the value is the received buffer for a receive, ``None`` for a
send), and ``env.all_of``/``env.any_of`` combine them -- that is all ``waitall`` and
``waitany`` are. A :class:`Status` tells a receiver who sent what (``source``, ``tag``,
``count``), as ``MPI_Status`` does.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import simpy

# Wildcards and the null process, with MPICH's values; UNDEFINED is also what
# ``Status.Get_count`` returns when the message is not a whole number of elements.
from mpisim.mpi.constants import ANY_SOURCE, ANY_TAG, UNDEFINED
from mpisim.mpi.pending import PendingCall

if TYPE_CHECKING:
    from mpisim.mpi.comm import Comm
    from mpisim.mpi.ops import Op
    from mpisim.mpi.payload import Payload

Proc = Generator[Any, Any, Any]


class Status:
    """Who sent a received message, with which tag, and how many elements (``MPI_Status``)."""

    __slots__ = ("count", "nbytes", "source", "tag")

    def __init__(self) -> None:
        self.source = ANY_SOURCE
        self.tag = ANY_TAG
        self.count = 0
        self.nbytes = 0

    def Get_source(self) -> int:
        """Return the sender's rank in the communicator."""
        return self.source

    def Get_tag(self) -> int:
        """Return the message tag."""
        return self.tag

    def Get_count(self, datatype: Any = None) -> int:
        """Return the size of the message in units of *datatype*: bytes by default, as in mpi4py.

        mpi4py's ``Status.Get_count()`` counts bytes (its default datatype is ``MPI.BYTE``);
        ``Get_count(np.float64)`` counts float64 elements, like ``Get_count(MPI.DOUBLE)``.
        The ``count`` attribute holds the elements of the message's own dtype.
        """
        if datatype is None:
            return self.nbytes
        itemsize = np.dtype(datatype).itemsize
        return self.nbytes // itemsize if self.nbytes % itemsize == 0 else UNDEFINED

    def __repr__(self) -> str:
        return f"Status(source={self.source}, tag={self.tag}, count={self.count})"


def _user_facing(name: str, comm_of: Callable[..., Comm | None]) -> Callable[[Callable[..., Proc[Any]]], Callable[..., Any]]:
    """Make a blocking method return a :class:`~mpisim.mpi.pending.PendingCall`: one made without ``yield from`` is reported.

    These are names only programs use (collective algorithms call ``comm.wait``), so they are
    always checked. *comm_of* finds the calling rank's communicator among the arguments.
    """
    def decorate(method: Callable[..., Proc[Any]]) -> Callable[..., Any]:
        @functools.wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            gen = method(*args, **kwargs)
            comm = comm_of(*args, **kwargs)
            if comm is None:
                return gen  # no requests: nothing to wait for, nothing to lose
            caller = sys._getframe(1)
            return PendingCall(gen, comm.world, comm.world_rank, name, caller.f_code.co_filename, caller.f_lineno)
        return call
    return decorate


def _first_comm(requests: Sequence[Request], *_: Any, **__: Any) -> Comm | None:
    return requests[0].comm if requests else None


class Request(simpy.Event):
    """A pending send or receive; trigger value is the received buffer (receives) or None.

    Besides being an event, a request remembers what it is waiting for (kind, peer, tag,
    size, protocol), which is what a deadlock report prints.
    """

    #: Where in the user's program the send was made, ``(file, line)``, when a runner records it.
    origin: tuple[str, int] | None = None
    # Set on the requests that have them; NOTE: class-level defaults, not stored per request
    # (one request per message, two per sendrecv).
    #: The receiver's status, filled when the receive matches.
    status: Status | None = None
    #: A receive's buffer size in bytes, if it gave one.
    capacity: int | None = None
    #: A receive's own (writable) buffer, where the data lands ...
    into: Payload | None = None
    #: ... reduced into it with this op instead of copied.
    op: Op | None = None

    def __init__(
        self,
        env: simpy.Environment,
        kind: str,
        comm: Comm,
        peer: int,
        tag: int,
        nbytes: int = -1,
        protocol: str = "",
    ) -> None:
        # NOTE: inlined from Event.__init__() (one request per message, two per sendrecv).
        self.env = env
        self.callbacks = []
        self.kind = kind  # "send" | "recv"
        self.comm = comm
        self.peer = peer  # communicator rank (ANY_SOURCE allowed for receives)
        self.tag = tag
        self.nbytes = nbytes  # -1: unknown (a receive before it matches)
        self.protocol = protocol

    def describe(self) -> str:
        """Return the MPI call this request stands for, e.g. ``send(dest=1, tag=0, 1048576 B, rendezvous)``."""
        if self.kind == "send":
            return f"send(dest={self.peer}, tag={self.tag}, {self.nbytes} B, {self.protocol})"
        source = "ANY_SOURCE" if self.peer == ANY_SOURCE else str(self.peer)
        tag = "ANY_TAG" if self.tag == ANY_TAG else str(self.tag)
        return f"recv(source={source}, tag={tag})"

    def outcome(self) -> Any:
        """Return a finished request's value, or raise its error, as MPI returns it from any completion call.

        A receive that matched a longer message has failed with a TruncationError
        (``MPI_ERR_TRUNCATE``): whether the receive was posted first (the waiting rank wakes
        with the error) or the message was already waiting (the request failed the moment it
        was posted), ``recv``, ``wait``, ``waitall``, ``waitany`` and ``test`` raise it. The
        error is marked handled here, so the event loop does not raise it a second time.
        """
        if not self._ok:
            self.defused = True
            raise self._value
        return self._value

    def test(self) -> tuple[bool, Any]:
        """Return ``(done, value)`` without waiting (``MPI_Test``); a failed request raises its error."""
        if self.triggered:
            return True, self.outcome()
        return False, None

    # mpi4py's names. The waits block, so in a generator program they are used with
    # ``yield from`` (``yield from req.Wait()``, ``yield from Request.Waitall(reqs)``); the
    # uppercase forms return what mpi4py's return (True, an index), the lowercase ones the
    # received values.

    def Test(self, status: Status | None = None) -> bool:
        """True if the operation has completed (``MPI_Test``); never waits."""
        done = self.test()[0]
        if done:
            _copy_status(status, self.status)
        return done

    def Get_status(self, status: Status | None = None) -> bool:
        """True if the operation has completed, without completing it (``MPI_Request_get_status``)."""
        if self.triggered:
            _copy_status(status, self.status)
        return self.triggered

    @_user_facing("req.wait", lambda self, *_, **__: self.comm)
    def wait(self, status: Status | None = None) -> Proc[Any]:
        """Wait for the operation and return its value (``MPI_Wait``): the received buffer, or None."""
        return (yield from self.comm.wait(self, status))

    @_user_facing("req.Wait", lambda self, *_, **__: self.comm)
    def Wait(self, status: Status | None = None) -> Proc[bool]:
        """Wait for the operation to complete (``MPI_Wait``); return True, as mpi4py does."""
        yield from self.comm.wait(self, status)
        return True

    @staticmethod
    @_user_facing("Request.waitall", _first_comm)
    def waitall(requests: Sequence[Request], statuses: list[Status] | None = None) -> Proc[list[Any]]:
        """Wait for every request; return their values in order (``MPI_Waitall``)."""
        if not requests:
            return []
        values = yield from requests[0].comm.waitall(requests)
        for request, status in zip(requests, statuses or (), strict=False):
            _copy_status(status, request.status)
        return values

    @staticmethod
    @_user_facing("Request.Waitall", _first_comm)
    def Waitall(requests: Sequence[Request], statuses: list[Status] | None = None) -> Proc[bool]:
        """Wait for every request (``MPI_Waitall``); return True."""
        yield from iter(Request.waitall(requests, statuses))
        return True

    @staticmethod
    @_user_facing("Request.waitany", _first_comm)
    def waitany(requests: Sequence[Request], status: Status | None = None) -> Proc[tuple[int, Any]]:
        """Wait for the first request to finish; return ``(index, value)`` (``MPI_Waitany``).

        With no requests, ``(UNDEFINED, None)`` at once, as MPI says.
        """
        if not requests:
            return UNDEFINED, None
        index, value = yield from requests[0].comm.waitany(requests)
        _copy_status(status, requests[index].status)
        return index, value

    @staticmethod
    @_user_facing("Request.Waitany", _first_comm)
    def Waitany(requests: Sequence[Request], status: Status | None = None) -> Proc[int]:
        """Wait for the first request to finish; return its index (``MPI_Waitany``)."""
        return (yield from iter(Request.waitany(requests, status)))[0]

    @staticmethod
    def testall(requests: Sequence[Request], statuses: list[Status] | None = None) -> tuple[bool, list[Any] | None]:
        """``(True, values)`` if every request has completed, else ``(False, None)``; never waits."""
        if not all(r.triggered for r in requests):
            return False, None
        for request, status in zip(requests, statuses or (), strict=False):
            _copy_status(status, request.status)
        return True, [r.outcome() for r in requests]

    @staticmethod
    def Testall(requests: Sequence[Request], statuses: list[Status] | None = None) -> bool:
        """True if every request has completed (``MPI_Testall``); never waits."""
        return Request.testall(requests, statuses)[0]


def _copy_status(into: Status | None, source: Status | None) -> None:
    if into is not None and source is not None and into is not source:
        into.source, into.tag, into.count, into.nbytes = source.source, source.tag, source.count, source.nbytes
