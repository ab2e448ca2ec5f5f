"""Light events for the simulator's own bookkeeping: a scheduled call, and "both requests done".

A SimPy *process* is a generator driven by events; every ``yield`` costs a resumption of the
generator, and starting one costs an ``Initialize`` event. That is the right tool for rank
programs, which users write as generators. The MPI library's own steps (inject a message,
answer a request-to-send with a clear-to-send, send a FIN) are simpler: each is "at this
instant, call this function with this message". :class:`Call` is exactly that: an entry in
SimPy's event queue, scheduled when it is created, whose only callback calls ``fn(arg)``. It
takes the place a process's event would have had in the queue (same time, same priority, same
order of creation), so replacing a process by a chain of calls changes no simulated time and
no order of events; it only skips the generator machinery. Passing the message as ``arg``
instead of binding it in a closure keeps it to one small allocation per step.

:class:`AllDone` is ``env.all_of([a, b])`` for requests: it triggers (with the event of the
last one) once every one of its events has been *processed*, exactly when SimPy's ``AllOf``
would, and fails as soon as one of them fails, but without building a ``ConditionValue``
that nobody reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from heapq import heappush
from typing import Any

import simpy
from simpy.events import NORMAL, PENDING, URGENT

__all__ = ["NORMAL", "URGENT", "AllDone", "Call"]


def _fire(event: Call) -> None:
    event.fn(event.arg)


_FIRE = (_fire,)


class Call:
    """An entry in SimPy's queue (after *delay*, with *priority*) that calls ``fn(arg)``.

    Not a :class:`simpy.Event`: nothing ever waits for it, so it carries only what SimPy's
    event loop reads (``callbacks`` and ``_ok``) and has no per-instance dict. It is
    processed by ``Environment.step`` like any triggered event.
    """

    __slots__ = ("arg", "callbacks", "fn")
    _ok = True
    _value = None

    def __init__(self, env: simpy.Environment, fn: Callable[[Any], None], arg: Any,
                 delay: float = 0, priority: int = NORMAL) -> None:
        self.callbacks = _FIRE  # NOTE: one shared tuple; step() replaces it with None
        self.fn = fn
        self.arg = arg
        if delay == 0 and priority == NORMAL:
            # Due now: mpisim's Environment keeps it out of the heap, in its NORMAL lane.
            # NOTE: Environment.schedule(), inlined; a plain SimPy environment has no lane.
            lane = getattr(env, "_lane", None)
            if lane is not None:
                lane.append((next(env._eid), self))
            else:
                env.schedule(self)
        else:
            # NOTE: inlined from Environment.schedule(): the same heap entry, one call less.
            env._later = None  # an entry in between (engine.sim.call_later)
            heappush(env._queue, (env._now + delay, priority, next(env._eid), self))


class AllDone:
    """Triggers once all *events* have been processed; fails with the first one that fails.

    A process may ``yield`` it like a SimPy event (``Process`` reads only ``callbacks``,
    ``_ok`` and ``_value``); it is not a :class:`simpy.Event` so that it needs no dict.
    """

    __slots__ = ("_defused", "_left", "_ok", "_value", "callbacks", "env")

    def __init__(self, env: simpy.Environment, events: Sequence[simpy.Event]) -> None:
        self.env = env
        self.callbacks: list | None = []
        self._value = PENDING
        self._ok = True
        self._left = len(events)
        for event in events:
            if event.callbacks is None:
                self._check(event)
            else:
                event.callbacks.append(self._check)
        if self._left == 0 and self._value is PENDING:
            self._trigger(True, None)

    @property
    def triggered(self) -> bool:
        """True once the event has been scheduled (as ``simpy.Event.triggered``)."""
        return self._value is not PENDING

    def _trigger(self, ok: bool, value: Any) -> None:
        self._ok = ok
        self._value = value
        self.env.schedule(self, NORMAL)  # what Event.succeed() and Event.fail() do

    def _check(self, event: simpy.Event) -> None:
        if self._value is not PENDING:
            return
        self._left -= 1
        if not event._ok:
            event._defused = True
            self._trigger(False, event._value)
        elif self._left == 0:
            # NOTE: _trigger(True, None) and Environment.schedule(), inlined: once per sendrecv.
            self._value = None
            env = self.env
            lane = getattr(env, "_lane", None)
            if lane is not None:
                lane.append((next(env._eid), self))
            else:
                env.schedule(self, NORMAL)
