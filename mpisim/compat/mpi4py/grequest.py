"""Generalized requests (``MPI.Grequest``): a request the program itself completes.

``Grequest.Start(query_fn, free_fn, cancel_fn, args, kwargs)`` returns an active request that
no message completes: the program (an I/O library, a helper thread's work) calls
``greq.Complete()`` when its operation is done, and ``Wait``/``Test`` then complete it like any
request. *query_fn(status, \\*args, \\*\\*kwargs)* fills the status the completion call reports,
*free_fn(\\*args, \\*\\*kwargs)* runs once the request is freed by that call, *cancel_fn(completed,
\\*args, \\*\\*kwargs)* on ``Cancel``. A ``Wait`` before ``Complete`` on a one-threaded rank waits
for ever: the run's deadlock report names it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mpisim.compat.mpi4py.environment import here
from mpisim.compat.mpi4py.nbc import CollectiveRequest
from mpisim.compat.mpi4py.request import Request
from mpisim.compat.mpi4py.status import Status


class Grequest(Request):
    """A generalized request: active from ``Grequest.Start`` until the program calls ``Complete``."""

    def __init__(self, request: Any = None) -> None:
        if request is not None and not isinstance(request, Grequest) and (  # mpi4py's checks: a null one is fine
                not isinstance(request, Request) or request):
            raise TypeError(f"expected a Grequest, got {type(request).__name__}")
        super().__init__(request)
        self._callbacks = request._callbacks if isinstance(request, Grequest) else (None, None, None, (), {})

    @classmethod
    def Start(cls, query_fn: Callable[..., Any] | None = None, free_fn: Callable[..., Any] | None = None,
              cancel_fn: Callable[..., Any] | None = None, args: tuple[Any, ...] | None = None,
              kwargs: dict[str, Any] | None = None) -> Grequest:
        """Start a generalized request (``MPI_Grequest_start``); the program completes it with :meth:`Complete`."""
        ctx = here("Grequest.Start")
        args, kwargs = tuple(args or ()), dict(kwargs or {})
        sim = CollectiveRequest(ctx.env, ctx.comm, "a generalized request (Grequest.Complete not called)")
        sim.status = Status()
        greq = cls()
        greq._callbacks = (query_fn, free_fn, cancel_fn, args, kwargs)
        greq._sim = sim
        greq._after = lambda: free_fn(*args, **kwargs) if free_fn is not None else None
        return greq

    def Complete(self) -> None:
        """The operation is done (``MPI_Grequest_complete``): the query function fills the status now."""
        here("Grequest.Complete")
        sim = self._sim
        if sim is None or sim.triggered:
            return
        query_fn, _, _, args, kwargs = self._callbacks
        if query_fn is not None:
            query_fn(sim.status, *args, **kwargs)
        sim.succeed(None)

    complete = Complete

    def Cancel(self) -> None:
        """Ask the program's cancel function to cancel the operation (``MPI_Cancel``)."""
        here("Grequest.Cancel")
        _, _, cancel_fn, args, kwargs = self._callbacks
        if cancel_fn is not None and self._sim is not None:
            cancel_fn(self._sim.triggered, *args, **kwargs)
