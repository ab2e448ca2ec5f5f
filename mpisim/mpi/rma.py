"""One-sided communication (RMA): what a ``Put``, ``Get``, ``Accumulate`` or lock costs on the network model.

In one-sided communication the *origin* rank alone names both ends of a transfer: it writes
into (``Put``), reads from (``Get``) or combines into (``Accumulate``) a *window*, memory that
the *target* rank exposed collectively beforehand; the target's program takes no part. What
the origin waits for is set by synchronization: a ``Fence`` (every operation of the epoch
complete at every rank, then a barrier), or a passive-target ``Lock``/``Unlock`` pair (the
operations on that target complete before ``Unlock`` returns).

MPICH implements each operation as a small protocol between the two processes (its ch4
active messages over shared memory or the NIC: a header with the data, handled by the
target's progress engine, then an acknowledgement). Here that is what moves over the network
model, sharing the links with everything else in flight:

* ``Put`` and ``Accumulate``: the origin's send overhead, a header plus the data origin ->
  target (where the bytes land, combined with the target's at ``reduce_cost`` per byte for an
  accumulate), then an acknowledgement header back; the operation is complete when that
  arrives (MPICH needs the ack for remote completion at ``Fence`` or ``Unlock``);
* ``Get`` (and the fetching atomics ``Get_accumulate``, ``Fetch_and_op``,
  ``Compare_and_swap``): a request header origin -> target, then a header plus the data back;
* ``Lock``: a request header to the target, granted (a header back) when the target's lock
  is free -- exclusive locks one at a time, shared ones together, waiting ones in arrival
  order; ``Unlock``: a release header and its acknowledgement.

Each function returns a SimPy event that triggers when the origin knows the operation is
complete; :func:`one_sided` runs *at_target* at the instant the request reaches the target
(reading or writing its memory then, as the target's progress engine would) and
*at_origin* with its result when the reply arrives.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import simpy

from mpisim.engine.events import Call

if TYPE_CHECKING:
    from mpisim.mpi.world import World


def one_sided(world: World, origin: int, target: int, out_bytes: int, back_bytes: int,
              at_target: Callable[[], Any], at_origin: Callable[[Any], None] | None = None,
              target_bytes_reduced: int = 0) -> simpy.Event:
    """One RMA operation between world ranks *origin* and *target*; the event of its completion at the origin.

    *out_bytes* of data go with the request header, *back_bytes* with the reply header (0:
    an acknowledgement). *target_bytes_reduced* bytes are combined at the target (an
    accumulate), at the configured ``reduce_cost`` per byte, before the reply leaves.
    """
    env, config = world.env, world.config
    done = env.event()
    header = config.header_bytes

    def replied(result: Any) -> None:
        if at_origin is not None:
            at_origin(result)
        world.tracer.count_message(out_bytes + back_bytes)
        done.succeed()

    def reply(result: Any) -> None:
        if world._post(target, origin, header + back_bytes, replied, result):
            replied(result)

    def arrived(_: Any) -> None:
        result = at_target()
        work = config.reduce_cost * target_bytes_reduced
        if work > 0:
            Call(env, reply, result, work)
        else:
            reply(result)

    def inject(_: Any) -> None:
        if world._post(origin, target, header + out_bytes, arrived, None):
            arrived(None)

    if config.send_overhead > 0:
        Call(env, inject, None, config.send_overhead)
    else:
        inject(None)
    return done


class TargetLock:
    """A window's lock at one target rank: one exclusive holder or any number of shared ones, waiters in order."""

    def __init__(self) -> None:
        self.exclusive = False
        self.shared = 0
        self.waiting: deque[tuple[bool, Callable[[], None]]] = deque()

    def _free_for(self, exclusive: bool) -> bool:
        return not self.exclusive and (self.shared == 0 if exclusive else True)

    def request(self, exclusive: bool, grant: Callable[[], None]) -> None:
        if not self.waiting and self._free_for(exclusive):
            self._take(exclusive)
            grant()
        else:
            self.waiting.append((exclusive, grant))

    def _take(self, exclusive: bool) -> None:
        if exclusive:
            self.exclusive = True
        else:
            self.shared += 1

    def release(self, exclusive: bool) -> None:
        if exclusive:
            self.exclusive = False
        else:
            self.shared -= 1
        while self.waiting and self._free_for(self.waiting[0][0]):
            exclusive, grant = self.waiting.popleft()
            self._take(exclusive)
            grant()


def lock(world: World, origin: int, target: int, state: TargetLock, exclusive: bool) -> simpy.Event:
    """Acquire *state* (the target's lock) for *origin*: a request header, a grant header back once free."""
    env, header = world.env, world.config.header_bytes
    granted = env.event()

    def grant_arrived(_: Any) -> None:
        granted.succeed()

    def grant() -> None:
        if world._post(target, origin, header, grant_arrived, None):
            grant_arrived(None)

    def arrived(_: Any) -> None:
        state.request(exclusive, grant)

    if world._post(origin, target, header, arrived, None):
        arrived(None)
    return granted


def unlock(world: World, origin: int, target: int, state: TargetLock, exclusive: bool) -> simpy.Event:
    """Release *origin*'s hold of *state*: a release header, acknowledged."""
    return one_sided(world, origin, target, 0, 0, lambda: state.release(exclusive))


def notify(world: World, origin: int, target: int, then: Callable[[], None]) -> None:
    """A synchronization header from *origin* to *target*, nobody waiting at the origin; *then* runs on arrival."""
    if world._post(origin, target, world.config.header_bytes, lambda _: then(), None):
        then()
