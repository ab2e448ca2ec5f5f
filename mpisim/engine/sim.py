"""The Simulation object: one SimPy environment plus everything a run needs, passed explicitly.

There is no module-level state, so two simulations can run side by side in one process
(SimPy's own "defense of design" names global state as what made SimPy 1 hard to
parallelise). A Simulation holds:

* ``env`` -- the :class:`simpy.Environment` that orders all events;
* ``scenario`` -- the resolved scenario that produced this run (or ``None`` in unit tests);
* ``rng`` -- a :class:`numpy.random.Generator` seeded from the scenario's seed, the only source
  of randomness, so the same scenario and seed give byte-identical results;
* ``tracer`` -- the :class:`~mpisim.engine.trace.Tracer` collecting result records.

This is also the only module outside SimPy that touches SimPy's private state (its queue
``_queue``, clock ``_now``, event counter ``_eid`` and an event's ``_ok`` / ``_value``): the
rest of mpisim calls the small helpers below (:func:`schedule_at`, :func:`succeed_now`,
:func:`soon_caller`, :func:`call_in_turn`, :func:`normal_next`, :func:`events_done`) and reads the clock as
``env.now``, so a SimPy upgrade that changes its internals is fixed here, in one place.
tests/unit/test_run_loop.py holds the custom run loop (:func:`run_until_idle`) to SimPy's own
``env.run()``: the same events, in the same order.
"""

from __future__ import annotations

import gc
import heapq
import math
from collections import deque
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from heapq import heappush
from operator import attrgetter
from typing import Any, TypeVar

import numpy as np
import simpy
from simpy.core import StopSimulation
from simpy.events import NORMAL, PENDING, URGENT

from mpisim.engine.events import AllDone, Call
from mpisim.engine.trace import Tracer

T = TypeVar("T")

#: A SimPy process generator that returns a value of type T (SimPy's ``ProcessGenerator``).
Proc = Generator[simpy.Event, Any, T]


class Environment(simpy.Environment):
    """SimPy's environment, with two first-in first-out lanes for events due now.

    Most events a simulation creates are due at the current instant: a request completes, a
    protocol step starts, a waiting rank is resumed. SimPy keeps them in its heap with every
    future event, and each goes in and out through about log2(pending) comparisons -- a
    measurable cost once a thousand ranks have events pending. An event due now always sorts
    as ``(now, priority, eid)`` with an ``eid`` larger than that of anything already scheduled,
    so events due now at one priority are already in order when appended to a deque:

    * ``call_soon(fn, arg)``: a call at URGENT priority, where the MPI layer starts a protocol
      step (SimPy would start a process there);
    * ``schedule(event)`` with no delay at NORMAL priority (``event.succeed()``, a zero
      timeout, a process ending) goes to the second lane.

    :meth:`step` (and :func:`run_until_idle`) take whichever of the two lane heads and the
    heap's head sorts first, so the order of events is exactly what SimPy's heap alone would
    give; only the heap operations are saved.

    Calls due at one later instant and made one after another (no other heap entry pushed in
    between) share one heap entry too (:func:`call_later`); ``_later`` is the open one, if any.
    So do calls due now made one after another (:func:`call_now`): ``_now_calls``.
    """

    #: The current simulated time: SimPy's ``now``, read through a C-level getter instead of a
    #: Python property (NOTE: the MPI layer and the networks read the clock several times per
    #: message; this costs an attribute read, not a Python call).
    now = property(attrgetter("_now"), doc="The current simulated time.")

    def __init__(self, initial_time: float = 0) -> None:
        super().__init__(initial_time)
        self._soon: deque[tuple[int, Callable[[Any], None], Any]] = deque()
        self._lane: deque[tuple[int, Any]] = deque()
        #: The calls of the last heap entry pushed, if call_later pushed it: (due time, calls).
        self._later: tuple[float, list] | None = None
        #: The lane entry of the last call_now calls and their list, while it is the lane's last entry.
        self._now_calls: tuple[Call, list] | None = None

    def call_soon(self, fn: Callable[[Any], None], arg: Any) -> None:
        """Call ``fn(arg)`` at the current instant, as an URGENT event scheduled now would be."""
        self._soon.append((next(self._eid), fn, arg))

    def schedule(self, event: Any, priority: int = NORMAL, delay: float = 0) -> None:
        """Schedule *event* (as SimPy does); one due now at NORMAL priority goes to the lane."""
        if delay == 0 and priority == NORMAL:
            self._lane.append((next(self._eid), event))
        else:
            self._later = None  # an entry in between: later calls need an entry of their own
            heapq.heappush(self._queue, (self._now + delay, priority, next(self._eid), event))

    def step(self) -> None:
        """Process the next event, from a lane or from the heap, in SimPy's order."""
        soon, lane, queue, now = self._soon, self._lane, self._queue, self._now
        if soon and _before_heap(queue, now, URGENT, soon[0][0]):
            _, fn, arg = soon.popleft()
            fn(arg)
        elif lane and _before_heap(queue, now, NORMAL, lane[0][0]):
            _process(self, lane.popleft()[1])
        else:
            super().step()

    def peek(self) -> float:
        """Time of the next event (now, while events due now are waiting in a lane)."""
        return self._now if self._soon or self._lane else super().peek()


def _before_heap(queue: list, now: float, priority: int, eid: int) -> bool:
    """True if an event due now with *priority* and *eid* sorts before the head of *queue*."""
    if not queue:
        return True
    t, head_priority, head_eid = queue[0][0], queue[0][1], queue[0][2]
    return t != now or head_priority > priority or (head_priority == priority and head_eid > eid)


def _process(env: simpy.Environment, event: Any) -> None:
    """What ``simpy.Environment.step`` does with an event once it is taken off the queue."""
    if event.__class__ is Call:
        event.fn(event.arg)  # what its one callback would do; a Call never fails
        return
    callbacks, event.callbacks = event.callbacks, None
    try:
        for callback in callbacks:
            callback(event)
    except StopSimulation:
        event.callbacks = callbacks[callbacks.index(callback) + 1:]
        env.schedule(event, -1)
        raise
    if not event._ok and not hasattr(event, "_defused"):
        exc = type(event._value)(*event._value.args)
        exc.__cause__ = event._value
        raise exc


class Simulation:
    """A self-contained simulation: environment, resolved scenario, seeded rng and tracer."""

    def __init__(self, scenario: Any = None, *, seed: int = 0, tracer: Tracer | None = None) -> None:
        self.env = Environment()
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


def schedule_at(env: simpy.Environment, when: float, event: Any, priority: int = NORMAL) -> None:
    """Put the triggered *event* in *env*'s queue at time *when* (>= now), as ``env.schedule`` would.

    For light events that are not :class:`simpy.Event` (like :class:`~mpisim.engine.events.Call`,
    they carry only ``callbacks``, ``_ok`` and ``_value``): one heap entry, no method call.
    """
    env._later = None  # see call_later
    if when == env._now:
        env._now_calls = None  # see call_now
    heappush(env._queue, (when, priority, next(env._eid), event))


def call_later(env: simpy.Environment, fn: Callable[[Any], None], arg: Any, delay: float) -> None:
    """Call ``fn(arg)`` after *delay* (> 0), as ``Call(env, fn, arg, delay)`` would; calls for one instant share an entry.

    Ranks that move in step (a ring's) start their protocol steps' timed parts (a send's or a
    receive's CPU overhead) at one instant, and these end at one instant: a heap entry each
    costs a push and a pop among all pending events. Consecutive calls for the same due time,
    with no other heap entry pushed between them, are what SimPy would process one after
    another at that time (each (time, NORMAL, id) right after the previous one; nothing can be
    placed between them but the URGENT work each one starts, and events created later), so they
    share one entry whose callback makes them in order, with that URGENT work in between
    (:func:`call_in_turn`). Anything else pushed to the heap closes the entry
    (:meth:`Environment.schedule`, :func:`schedule_at`, :class:`~mpisim.engine.events.Call`).
    On a plain SimPy environment each call is a :class:`~mpisim.engine.events.Call` of its own.

    The calls still to come are not in the queue while one runs: a call made through here must
    not ask whether anything else is due now (:func:`normal_next`, the fair share's
    ``_alone_now``), nor must the URGENT work it starts.
    """
    later = getattr(env, "_later", False)
    if later is False or delay <= 0:
        Call(env, fn, arg, delay)
        return
    when = env._now + delay
    if later is not None and later[0] == when:
        later[1].append((fn, arg))
        return
    calls = [(fn, arg)]
    Call(env, _calls_in_turn, (env, calls), delay)
    env._later = (when, calls)


def call_now(env: simpy.Environment, fn: Callable[[Any], None], arg: Any) -> None:
    """Call ``fn(arg)`` now, as an ordinary (NORMAL) event would, as ``Call(env, fn, arg)`` does; consecutive ones share an entry.

    The same reasoning as :func:`call_later`, for the NORMAL lane: calls due now whose entries
    would follow one another in the lane (nothing appended to it between them, and nothing
    scheduled now in the heap) are processed back to back but for the URGENT work each one
    starts, so they share one lane entry. The same rule holds for what the calls may ask.
    """
    lane = getattr(env, "_lane", None)
    if lane is None:
        Call(env, fn, arg)
        return
    open_calls = env._now_calls
    if open_calls is not None and lane and lane[-1][1] is open_calls[0]:
        open_calls[1].append((fn, arg))
        return
    calls = [(fn, arg)]
    env._now_calls = (Call(env, _calls_in_turn, (env, calls)), calls)


def _calls_in_turn(entry: tuple[simpy.Environment, list]) -> None:
    """The callback of a shared entry (:func:`call_later`, :func:`call_now`): each call, with the URGENT work it starts in between."""
    env, calls = entry
    if len(calls) == 1:
        fn, arg = calls[0]
        fn(arg)  # alone: what its own entry would have done
        return
    queue = env._queue
    now = env._now
    soon = env._soon
    last = len(calls) - 1
    for k, (fn, arg) in enumerate(calls):
        fn(arg)
        if k == last:
            return  # the run loop takes over, as after any event
        # NOTE: call_in_turn's loop: the URGENT work this call started runs before the next.
        while True:
            if queue and queue[0][1] == URGENT and queue[0][0] == now:
                run_urgent_now(env)
                break
            if not soon:
                break
            _, urgent, urgent_arg = soon.popleft()
            urgent(urgent_arg)


def succeed_now(env: simpy.Environment, event: simpy.Event, value: Any) -> None:
    """``event.succeed(value)``: the same scheduling, one method call less (once per message).

    One exception saves an event: when the only waiter is an :class:`~mpisim.engine.events.AllDone`
    that still waits for others, the event is counted there and marked processed at once instead
    of going through the queue (the AllDone triggers at the same instant and place either way).
    """
    if event._value is not PENDING:
        raise RuntimeError(f"{event} has already been triggered")
    event._ok = True
    event._value = value
    callbacks = event.callbacks
    if len(callbacks) == 1:
        waiter = getattr(callbacks[0], "__self__", None)
        if waiter.__class__ is AllDone and waiter._left > 1:
            # Only an AllDone waits, and not for this event alone (a sendrecv's send while its
            # receive is pending): processing it would only count it. Counted now, it is
            # processed, and the AllDone triggers where it would have: events due now are
            # processed in the order they were triggered, so the last one triggered is the
            # last one processed, and that one still goes through the queue.
            waiter._left -= 1
            event.callbacks = None
            return
    # NOTE: Environment.schedule(), inlined: due now, at NORMAL priority, in its lane.
    lane = getattr(env, "_lane", None)
    if lane is not None:
        lane.append((next(env._eid), event))
    else:
        env.schedule(event)


def soon_caller(env: simpy.Environment) -> Callable[[Callable[[Any], None], Any], None]:
    """Return ``call_soon(fn, arg)``: call ``fn(arg)`` now at URGENT priority (where SimPy starts a process).

    mpisim's :class:`Environment` keeps such calls in a lane; on a plain SimPy environment
    each becomes an URGENT :class:`~mpisim.engine.events.Call`, which is processed in the same place.
    """
    call_soon = getattr(env, "call_soon", None)
    if call_soon is not None:
        return call_soon

    def urgent_call(fn: Callable[[Any], None], arg: Any) -> None:
        Call(env, fn, arg, priority=URGENT)

    return urgent_call


def call_in_turn(env: simpy.Environment, calls: list) -> None:
    """Call ``item.fn(item.arg)`` for each of *calls*, with the URGENT work each one starts run in between.

    For a callback of an ordinary (NORMAL) event that stands for one event per item: SimPy
    would process the URGENT events the first item's callback schedules (the start of a
    protocol step) before the next item's event, so they are run here, between the calls
    (see :func:`run_urgent_now`).
    """
    queue = env._queue
    now = env._now
    soon = getattr(env, "_soon", None)
    for item in calls:
        item.fn(item.arg)
        # NOTE: run_urgent_now's loop, inlined while only the URGENT lane has work (the
        # common case: a protocol step started by the call); it takes over otherwise.
        while True:
            if queue and queue[0][1] == URGENT and queue[0][0] == now:
                run_urgent_now(env)
                break
            if not soon:
                break
            _, fn, arg = soon.popleft()
            fn(arg)


def normal_next(env: simpy.Environment) -> bool:
    """True if an ordinary (NORMAL) event scheduled now on *env* would be the next one processed.

    Nothing waits in the lanes of mpisim's :class:`Environment`, and the queue holds nothing
    due now at URGENT or NORMAL priority. A callback may then do at once what such an event
    would do, one event fewer. Always False on a plain SimPy environment.
    """
    soon = getattr(env, "_soon", None)
    lane = getattr(env, "_lane", None)
    if soon is None or lane is None or soon or lane:
        return False
    queue = env._queue
    return not queue or queue[0][0] != env._now or queue[0][1] > NORMAL


def events_done(env: simpy.Environment) -> int:
    """Events processed so far by :func:`run_until_idle` on *env* (0 before it starts; read by progress displays)."""
    return getattr(env, "events_done", 0)


def run_until_idle(env: simpy.Environment) -> int:
    """Process events until none are left (``env.run()``); return how many were processed.

    SimPy's ``step()`` is inlined: the same queue, the same order and the same failure
    handling, without a method call and an exception handler set up per event, which are a
    measurable share of the cost of a cheap event. Falls back to ``env.run()`` (returning -1)
    on a SimPy whose internals differ. While it runs, ``env.events_done`` holds the count so
    far (updated whenever simulated time may move), for progress displays on another thread.
    """
    queue = getattr(env, "_queue", None)
    if not isinstance(queue, list) or not hasattr(env, "_now"):
        env.run()
        return -1
    pop = heapq.heappop
    soon = getattr(env, "_soon", ())  # NOTE: not `or ()`: an empty deque is falsy
    lane = getattr(env, "_lane", ())
    processed = 0
    # Run limits (mpisim.engine.limits); the simulated-time limit is checked where time moves.
    budget = getattr(env, "budget", None)
    time_limit = budget.time_limit if budget is not None else math.inf
    check_at = budget.next_check(0) if budget is not None else 1 << 62
    with gc_paused():
        while True:
            if processed >= check_at:  # the event and wall-time limits: one comparison per event
                check_at = budget.check(processed, env._now)
            # NOTE: Environment.step() and simpy.Environment.step(), inlined for performance.
            if soon:
                eid, fn, arg = soon[0]
                if not queue or queue[0][0] != env._now or queue[0][1] > URGENT or (
                        queue[0][1] == URGENT and queue[0][2] > eid):
                    soon.popleft()
                    processed += 1
                    fn(arg)
                    continue
            if lane:
                eid, event = lane[0]
                if not queue or queue[0][0] != env._now or queue[0][1] > NORMAL or (
                        queue[0][1] == NORMAL and queue[0][2] > eid):
                    lane.popleft()
                    processed += 1
                    if event.__class__ is Call:
                        event.fn(event.arg)  # NOTE: what _process does with a Call, inlined
                        continue
                    # NOTE: _process, inlined as for a heap event below (a request, a sendrecv's
                    # AllDone: two a message); no StopSimulation here, this loop has no `until`.
                    callbacks, event.callbacks = event.callbacks, None
                    for callback in callbacks:
                        callback(event)
                    if not event._ok and not hasattr(event, "_defused"):
                        exc = type(event._value)(*event._value.args)
                        exc.__cause__ = event._value
                        raise exc
                    continue
            if not queue:
                break
            if queue[0][0] > time_limit:
                raise budget.reached_time(queue[0][0], processed, env._now)
            env._now, _, _, event = pop(queue)
            processed += 1
            # NOTE: published once per heap event (simulated time moves only here), not per
            # event: a progress display on another thread reads it.
            env.events_done = processed
            if event.__class__ is Call:
                event.fn(event.arg)  # what its one callback would do; a Call never fails
                continue
            callbacks, event.callbacks = event.callbacks, None
            for callback in callbacks:
                callback(event)
            if not event._ok and not hasattr(event, "_defused"):
                exc = type(event._value)(*event._value.args)
                exc.__cause__ = event._value
                raise exc
    env.events_done = processed
    if budget is not None:
        budget.events_done += processed
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
    soon = getattr(env, "_soon", ())  # NOTE: not `or ()`: an empty deque is falsy
    while True:
        heap_ready = queue and queue[0][1] == URGENT and queue[0][0] == now
        if soon and (not heap_ready or queue[0][2] > soon[0][0]):
            _, fn, arg = soon.popleft()
            fn(arg)
            continue
        if not heap_ready:
            return
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
