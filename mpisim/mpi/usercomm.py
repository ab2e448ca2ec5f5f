"""The communicator a user's generator program holds: a :class:`Comm` whose blocking calls catch a missing ``yield from``.

Every blocking method of :class:`~mpisim.mpi.comm.Comm` (those that are generators: ``send``,
``recv``, ``Allreduce``, ``split`` ...) is wrapped here to return a
:class:`~mpisim.mpi.pending.PendingCall` that remembers the caller's file and line, so a call
written without ``yield from`` is reported instead of silently doing nothing. Communicators
made from one (``dup``, ``split``) are ``UserComm`` too. The wrapping is per call, about a
microsecond, so it is kept off the hot path: collective algorithms run on the plain
collective-context communicator (:attr:`Comm.coll`), and benchmarks and workloads other than
``program`` use plain communicators.

``World.comm_class = UserComm`` hands them to every rank (the ``program`` workload does).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

from mpisim.mpi.comm import Comm
from mpisim.mpi.pending import PendingCall


class UserComm(Comm):
    """A :class:`Comm` for user programs: each blocking call returns a :class:`PendingCall` (see the module docstring)."""


def _checked(name: str, method: Callable[..., Any]) -> Callable[..., PendingCall]:
    def call(self: Comm, *args: Any, **kwargs: Any) -> PendingCall:
        caller = sys._getframe(1)
        return PendingCall(method(self, *args, **kwargs), self.world, self.group[self._rank], name,
                           caller.f_code.co_filename, caller.f_lineno)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = method.__doc__
    call.__wrapped__ = method  # type: ignore[attr-defined]
    return call


#: The names wrapped: every public generator method of Comm (so a new one is covered too).
BLOCKING = tuple(sorted(name for name, value in vars(Comm).items()
                        if not name.startswith("_") and inspect.isgeneratorfunction(value)))

for _name in BLOCKING:
    setattr(UserComm, _name, _checked(_name, getattr(Comm, _name)))
