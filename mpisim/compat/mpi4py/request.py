"""``MPI.Request``: a nonblocking operation in progress, and the calls that complete one or many.

A request wraps the simulated MPI's request (:class:`mpisim.mpi.request.Request`, a SimPy
event); ``Wait`` blocks the rank's greenlet in simulated time until it triggers, ``Test`` never
waits (it lets simulated time pass only as a polling loop's calls would). The lowercase forms
return the received object; a completed request becomes ``MPI.REQUEST_NULL``, as in mpi4py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mpisim.compat.mpi4py.environment import here
from mpisim.compat.mpi4py.nbc import CollectiveRequest
from mpisim.compat.mpi4py.status import Status, copy_status
from mpisim.compat.ranks import current
from mpisim.compat.unsupported import Strict, unsupported
from mpisim.mpi.constants import ANY_SOURCE, ANY_TAG, SUCCESS, UNDEFINED


class Request(metaclass=Strict):
    """A non-blocking operation: ``Wait, Test``, the class methods ``Waitall, Waitany, Testall``.

    The lowercase forms (``wait, test, waitall``) return the received object. A completed
    request becomes ``MPI.REQUEST_NULL``, as in mpi4py.
    """

    def __init__(self, request: Any = None, *, decode: Callable[[Any], Any] | None = None,
                 after: Callable[[], None] | None = None) -> None:
        #: The persistent request this is a plain handle to (``MPI.Request(prequest)``), if any.
        self._persistent = None
        if isinstance(request, Request):
            mine = request.__dict__
            self._persistent = mine["_handle"] if "_handle" in mine else mine.get("_persistent")
            request, decode, after = request._sim, request._decode, request._after
        self._sim, self._decode, self._after = request, decode, after

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Request) and other._sim is self._sim

    def __hash__(self) -> int:
        return id(self._sim)

    def __bool__(self) -> bool:
        return self._sim is not None

    def __reduce__(self) -> Any:
        """``REQUEST_NULL`` pickles as itself; an active request cannot be pickled (mpi4py's ValueError)."""
        if self._sim is None:
            return _request_null, ()
        raise ValueError(f"cannot serialize 'mpi4py.MPI.{type(self).__name__}' instance")

    def _done(self, value: Any) -> Any:
        self._sim = None
        ctx = current()
        if ctx is not None and ctx.runner.checker is not None:
            ctx.runner.checker.requests.completed(ctx, self)
        if self._after is not None:
            self._after()
        return self._decode(value) if self._decode is not None else value

    def Wait(self, status: Status | None = None) -> bool:
        """Wait for the operation to complete (``MPI_Wait``)."""
        self.wait(status)
        return True

    def wait(self, status: Status | None = None) -> Any:
        """Wait and return the received object (``None`` for a send)."""
        ctx = here("Request.Wait")
        if self._sim is None:
            _empty(status)
            return None
        sim = self._sim
        value = ctx.block(_wait(ctx, sim))
        copy_status(status, sim.status)
        return self._done(value)

    def Test(self, status: Status | None = None) -> bool:
        """True if the operation has completed (``MPI_Test``); never waits."""
        return self.test(status)[0]

    def test(self, status: Status | None = None) -> tuple[bool, Any]:
        """``(flag, object)``: the received object once complete."""
        ctx = here("Request.Test")
        ctx.enter()
        if self._sim is None:
            _empty(status)
            return True, None
        sim = self._sim
        done, value = sim.test()
        if not done:
            ctx.poll()
            return False, None
        copy_status(status, sim.status)
        return True, self._done(value)

    def Get_status(self, status: Status | None = None) -> bool:
        """True if complete, without completing it (``MPI_Request_get_status``; *status* filled once complete)."""
        if self._sim is None:
            _empty(status)
            return True
        if self._sim.triggered:
            copy_status(status, self._sim.status)
            return True
        ctx = here("Request.Get_status")
        ctx.poll()  # a loop on it waits for the simulation to progress, as one on Test does
        return False

    get_status = Get_status

    @classmethod
    def Get_status_all(cls, requests: Sequence[Request], statuses: list[Status] | None = None) -> bool:
        """True if every request is complete, completing none (``MPI_Request_get_status_all``)."""
        _fill(statuses, len(requests))
        flags = [r.Get_status(statuses[i] if statuses and i < len(statuses) else None) for i, r in enumerate(requests)]
        return all(flags)

    get_status_all = Get_status_all

    @classmethod
    def Get_status_any(cls, requests: Sequence[Request], status: Status | None = None) -> tuple[int, bool]:
        """``(index, True)`` of a complete active request, without completing it; ``(UNDEFINED, True)`` if none is active."""
        active = [(i, r) for i, r in enumerate(requests) if r]
        for i, r in active:
            if r._sim.triggered:
                copy_status(status, r._sim.status)
                return i, True
        if not active:
            _empty(status)
        return UNDEFINED, not active

    get_status_any = Get_status_any

    @classmethod
    def Get_status_some(cls, requests: Sequence[Request], statuses: list[Status] | None = None) -> list[int] | None:
        """The indices of the complete active requests, without completing them; None if none is active."""
        _fill(statuses, len(requests))
        active = [(i, r) for i, r in enumerate(requests) if r]
        if not active:
            return None
        done = [i for i, r in active if r._sim.triggered]
        for k, i in enumerate(done):
            if statuses is not None and k < len(statuses):
                copy_status(statuses[k], requests[i]._sim.status)
        return done

    get_status_some = Get_status_some

    def Free(self) -> None:
        """Forget the request (the operation still completes)."""
        ctx = current()
        if ctx is not None and ctx.runner.checker is not None:
            ctx.runner.checker.requests.forgotten(self)
        self._sim = None

    def Cancel(self) -> None:
        """Cancel a receive no message has matched yet (``MPI_Cancel``); a send goes on (MPI lets a cancel fail).

        A cancelled receive completes at once; its status says ``Is_cancelled()``.
        """
        ctx = here("Request.Cancel")
        sim = self._sim
        if sim is None or sim.triggered or getattr(sim, "kind", "") != "recv":
            return
        posted = ctx.comm.world.mailboxes[ctx.rank].posted
        if sim in posted:
            posted.remove(sim)
            sim.status = Status()
            sim.status.Set_cancelled(True)
            sim.succeed(None)
            self._decode = None  # nothing was received: no object to unpickle

    cancel = Cancel

    # ---- many requests at once

    @staticmethod
    def _wait_many(requests: Sequence[Request], statuses: list[Status] | None) -> list[Any]:
        ctx = here("Request.Waitall")
        _fill(statuses, len(requests))
        live = [r._sim for r in requests if r is not None and r._sim is not None]
        messages = [sim for sim in live if not isinstance(sim, CollectiveRequest)]
        if messages:
            ctx.block(ctx.comm.waitall(messages))
        for sim in live:
            if isinstance(sim, CollectiveRequest) and not sim.triggered:
                ctx.block(_wait(ctx, sim))
        values = []
        for i, req in enumerate(requests):
            if req is None or req._sim is None:
                if statuses is not None and i < len(statuses):
                    _empty(statuses[i])
                values.append(None)
                continue
            sim = req._sim
            if statuses is not None and i < len(statuses):
                copy_status(statuses[i], sim.status)
            values.append(req._done(sim.outcome()))
        return values

    @classmethod
    def Waitall(cls, requests: Sequence[Request], statuses: list[Status] | None = None) -> bool:
        """Wait for every request (``MPI_Waitall``)."""
        cls._wait_many(requests, statuses)
        return True

    @classmethod
    def waitall(cls, requests: Sequence[Request], statuses: list[Status] | None = None) -> list[Any]:
        """Wait for every request; return the received objects in order."""
        return cls._wait_many(requests, statuses)

    @classmethod
    def Waitany(cls, requests: Sequence[Request], status: Status | None = None) -> int:
        """Wait for one request to complete; return its index (``MPI.UNDEFINED`` if none is active)."""
        return cls.waitany(requests, status)[0]

    @classmethod
    def waitany(cls, requests: Sequence[Request], status: Status | None = None) -> tuple[int, Any]:
        """``(index, object)`` of the first request to complete."""
        ctx = here("Request.Waitany")
        active = [(i, r) for i, r in enumerate(requests) if r is not None and r._sim is not None]
        if not active:
            return UNDEFINED, None
        index, _ = ctx.block(ctx.comm.waitany([r._sim for _, r in active]))
        i, req = active[index]
        sim = req._sim
        copy_status(status, sim.status)
        return i, req._done(sim.outcome())

    @classmethod
    def Waitsome(cls, requests: Sequence[Request], statuses: list[Status] | None = None) -> list[int] | None:
        """Wait for at least one; return the indices of all that have completed (None if none is active)."""
        return cls.waitsome(requests, statuses)[0]

    @classmethod
    def waitsome(cls, requests: Sequence[Request], statuses: list[Status] | None = None) -> tuple[list[int] | None, list[Any] | None]:
        """``(indices, objects)`` of the requests complete once at least one is."""
        if not any(r for r in requests):
            return None, None
        first_status = Status()
        first, value = cls.waitany(requests, first_status)
        if isinstance(statuses, list) and not statuses:
            statuses.append(Status())
        copy_status(statuses[0] if statuses else None, first_status)
        return cls._some(requests, statuses, [first], [value])

    @classmethod
    def Testsome(cls, requests: Sequence[Request], statuses: list[Status] | None = None) -> list[int] | None:
        """The indices of the requests complete now, completed ([] if none; None if none is active); never waits."""
        return cls.testsome(requests, statuses)[0]

    @classmethod
    def testsome(cls, requests: Sequence[Request], statuses: list[Status] | None = None) -> tuple[list[int] | None, list[Any] | None]:
        ctx = here("Request.Testsome")
        ctx.enter()
        if not any(r for r in requests):
            return None, None
        indices, values = cls._some(requests, statuses, [], [])
        if not indices:
            ctx.poll()
        return indices, values

    @staticmethod
    def _some(requests: Sequence[Request], statuses: list[Status] | None, indices: list[int],
              values: list[Any]) -> tuple[list[int], list[Any]]:
        for i, req in enumerate(requests):
            if req and req._sim.triggered:
                if isinstance(statuses, list) and len(statuses) <= len(indices):
                    statuses.append(Status())  # one status per completed request, as mpi4py fills the list
                if statuses is not None and len(indices) < len(statuses):
                    copy_status(statuses[len(indices)], req._sim.status)
                indices.append(i)
                values.append(req._done(req._sim.outcome()))
        return indices, values

    @classmethod
    def Testall(cls, requests: Sequence[Request], statuses: list[Status] | None = None) -> bool:
        """True (and all completed) if every request has completed; never waits."""
        return cls.testall(requests, statuses)[0]

    @classmethod
    def testall(cls, requests: Sequence[Request], statuses: list[Status] | None = None) -> tuple[bool, list[Any] | None]:
        ctx = here("Request.Testall")
        ctx.enter()
        if all(r is None or r._sim is None or r._sim.triggered for r in requests):
            return True, cls._wait_many(requests, statuses)
        ctx.poll()
        return False, None

    @classmethod
    def Testany(cls, requests: Sequence[Request], status: Status | None = None) -> tuple[int, bool]:
        """``(index, flag)``: a completed request's index, if any."""
        ctx = here("Request.Testany")
        ctx.enter()
        for i, req in enumerate(requests):
            if req is not None and req._sim is not None and req._sim.triggered:
                copy_status(status, req._sim.status)
                req._done(req._sim.outcome())
                return i, True
        idle = not any(r is not None and r._sim is not None for r in requests)
        if not idle:
            ctx.poll()
        return UNDEFINED, idle

    @classmethod
    def testany(cls, requests: Sequence[Request], status: Status | None = None) -> tuple[int, bool, Any]:
        """``(index, flag, object)``: :meth:`Testany` with the received object."""
        ctx = here("Request.Testany")
        ctx.enter()
        for i, req in enumerate(requests):
            if req and req._sim.triggered:
                copy_status(status, req._sim.status)
                return i, True, req._done(req._sim.outcome())
        idle = not any(r for r in requests)
        if not idle:
            ctx.poll()
        return UNDEFINED, idle, None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise unsupported(f"Request.{name}")


REQUEST_NULL = Request()


def _wait(ctx: Any, sim: Any) -> Any:
    """Wait for one simulated request (a generator for ``ctx.block``).

    A nonblocking collective's request waits for no one message in particular: the rank is
    recorded as waiting in the collective's name, not for a peer, for the deadlock report.
    """
    if isinstance(sim, CollectiveRequest):
        if sim.triggered:
            return _done_already(sim)
        return ctx.comm.world.block(ctx.rank, sim, f"wait({sim.describe()})", (), "wait")
    return ctx.comm.wait(sim)


def _fill(statuses: list[Status] | None, n: int) -> None:
    """A list of statuses shorter than the requests gets one per request, as mpi4py extends it."""
    if isinstance(statuses, list):
        statuses.extend(Status() for _ in range(n - len(statuses)))


def _empty(status: Status | None) -> None:
    """The status of a null or inactive request: MPI's empty status (any source, any tag, nothing received)."""
    if status is not None:
        status.source, status.tag, status.count, status.nbytes = ANY_SOURCE, ANY_TAG, 0, 0
        status.error = SUCCESS


def _done_already(sim: Any) -> Any:
    return sim.outcome()
    yield  # a generator: ctx.block runs it


def _request_null() -> Request:
    """``MPI.REQUEST_NULL`` (unpickling it)."""
    return REQUEST_NULL
