"""The Simulation object: one SimPy environment plus everything a run needs, passed explicitly.

There is no module-level state, so two simulations can run side by side in one process
(SimPy's own "defense of design" names global state as what made SimPy 1 hard to
parallelise). A Simulation holds:

* ``env`` -- the :class:`simpy.Environment` that orders all events;
* ``scenario`` -- the resolved scenario that produced this run (or ``None`` in unit tests);
* ``rng`` -- a :class:`numpy.random.Generator` seeded from the scenario's seed, the only source
  of randomness, so the same scenario and seed give byte-identical results;
* ``tracer`` -- the :class:`~mpisim.engine.trace.Tracer` collecting result records.
"""

from __future__ import annotations

import gc
import heapq
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
import simpy
from simpy.events import URGENT

from mpisim.engine.trace import Tracer

T = TypeVar("T")

#: A SimPy process generator that returns a value of type T (SimPy's ``ProcessGenerator``).
Proc = Generator[simpy.Event, Any, T]


class Simulation:
    """A self-contained simulation: environment, resolved scenario, seeded rng and tracer."""

    def __init__(self, scenario: Any = None, *, seed: int = 0, tracer: Tracer | None = None) -> None:
        self.env = simpy.Environment()
        self.scenario = scenario
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.tracer = tracer if tracer is not None else Tracer()
        self.tracer._now = lambda: self.env.now

    @property
    def now(self) -> float:
        """Current simulated time in seconds."""
        return self.env.now

    def run(self, until: float | simpy.Event | None = None) -> None:
        """Run the event loop until *until* or until no events are left."""
        if until is None:
            run_until_idle(self.env)
        else:
            self.env.run(until=until)


def run_until_idle(env: simpy.Environment) -> int:
    """Process events until none are left (``env.run()``); return how many were processed.

    SimPy's ``step()`` is inlined: the same queue, the same order and the same failure
    handling, without a method call and an exception handler set up per event, which are a
    measurable share of the cost of a cheap event. Falls back to ``env.run()`` (returning -1)
    on a SimPy whose internals differ.
    """
    queue = getattr(env, "_queue", None)
    if not isinstance(queue, list) or not hasattr(env, "_now"):
        env.run()
        return -1
    pop = heapq.heappop
    processed = 0
    with gc_paused():
        while queue:
            # NOTE: inlined from simpy.Environment.step() for performance reasons.
            env._now, _, _, event = pop(queue)
            processed += 1
            callbacks, event.callbacks = event.callbacks, None
            for callback in callbacks:
                callback(event)
            if not event._ok and not hasattr(event, "_defused"):
                exc = type(event._value)(*event._value.args)
                exc.__cause__ = event._value
                raise exc
    return processed


def run_urgent_now(env: simpy.Environment) -> None:
    """Process the URGENT events due now, which SimPy's loop would process next.

    For a callback that does on behalf of several events what their separate processing
    would have done: between two of them SimPy runs the URGENT events the first one
    scheduled (process starts, and the protocol steps scheduled like them), before any
    ordinary event. Only call it from the callback of an ordinary (NORMAL) event: then every
    URGENT event due now was scheduled by that callback.
    """
    queue = env._queue
    now = env._now
    while queue and queue[0][1] == URGENT and queue[0][0] == now:
        event = heapq.heappop(queue)[3]
        callbacks, event.callbacks = event.callbacks, None
        for callback in callbacks:
            callback(event)
        if not event._ok and not hasattr(event, "_defused"):
            exc = type(event._value)(*event._value.args)
            exc.__cause__ = event._value
            raise exc


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the duration of an event loop.

    A big simulation keeps hundreds of thousands of objects alive (ranks, mailboxes, routes,
    flows) and allocates several per event; the collector's older generations then rescan all
    of them again and again, which took 40% of a 4096-rank barrier. The simulator's own
    objects form no reference cycles (messages, requests and events are freed by reference
    counting the moment they are done with), so there is nothing for the collector to find;
    it is switched back on, as it was, when the loop ends.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
