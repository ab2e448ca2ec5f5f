"""Nonblocking collectives (``Ibarrier``, ``Ibcast``, ``Iallreduce``, ...): the collective's algorithm runs beside the rank's program.

MPI-3's nonblocking collectives start a collective and return a request at once; the rank
computes (or communicates) while the collective progresses, and ``Wait``/``Test`` complete it.
MPICH runs each one as a schedule of sends, receives and reductions that its progress engine
advances in the background. Here the collective's own generator -- the same algorithm, with
the same messages and the same cost, as the blocking call -- becomes a SimPy process of its
own (:func:`start`), so its messages share the network with whatever the rank does meanwhile,
and the request triggers when the algorithm's last step completes.

Two rules of MPI shape it:

* every member starts the same nonblocking collectives on a communicator in the same order,
  so the n-th one is the same call everywhere. MPICH gives each its own tag; here the n-th
  gets its own matching context (a communicator of the same group, agreed without messages,
  :meth:`~mpisim.mpi.comm.Comm.sub`), so two outstanding collectives never match each other's
  messages, and a mismatch (``Ibcast`` on one rank, ``Iallreduce`` on another) is still
  reported as mismatched collectives;
* the call itself is local: its first step (checking the arguments, posting the first
  messages) runs in the caller, so a bad argument raises at the call, as under MPICH, and the
  collectives a rank starts keep the order it started them in.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import simpy

from mpisim.compat.ranks import RankContext
from mpisim.mpi.request import Request as _SimRequest

Proc = Generator[Any, Any, Any]


class CollectiveRequest(_SimRequest):
    """The request of a nonblocking collective: triggers with the collective's value when its algorithm ends."""

    def __init__(self, env: simpy.Environment, comm: Any, call: str) -> None:
        super().__init__(env, "collective", comm, -1, -1)
        self.call = call

    def describe(self) -> str:
        return self.call


def start(ctx: RankContext, comm: Any, call: str, body: Callable[[Any], Proc]) -> CollectiveRequest:
    """Start the collective ``body(c)`` on its own context of *comm*; return its request at once (see the module docstring)."""
    counts = ctx.cache.setdefault("nbc", {})
    n = counts[comm.context] = counts.get(comm.context, 0) + 1
    own = comm.sub(list(range(comm.size)), label=f"nbc{n}")
    request = CollectiveRequest(ctx.env, own, call)
    gen = body(own)
    state = comm.world.states[ctx.rank]
    outer = state.collective
    try:
        event = gen.send(None)
    except StopIteration as stop:  # done at once (one rank, nothing to exchange)
        request.succeed(stop.value)
        return request
    finally:
        state.collective = outer  # the rank is not inside the collective: it goes on with its program
    process = ctx.env.process(_resume(gen, event))
    process.callbacks.append(lambda done: _settle(done, request))
    return request


def _resume(gen: Proc, event: Any) -> Proc:
    """Drive the started collective *gen* from its pending *event* to its end (a SimPy process)."""
    while True:
        try:
            value = yield event
        except BaseException as exc:  # a failed step (truncation, ...): the algorithm sees it
            try:
                event = gen.throw(exc)
            except StopIteration as stop:
                return stop.value
            continue
        try:
            event = gen.send(value)
        except StopIteration as stop:
            return stop.value


def _settle(process: simpy.Process, request: CollectiveRequest) -> None:
    """The collective ended: its request completes with the value, or fails with the error the wait raises."""
    if process.ok:
        request.succeed(process.value)
    else:
        process.defused = True
        request.fail(process.value)
