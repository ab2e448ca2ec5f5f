"""Run limits: a run stops when its simulated time, its event count or its wall time reaches a bound.

A simulated program can run for ever (a loop around ``comm.barrier()``) and a scenario can ask
for more work than anyone meant to wait for; ``limits:`` turns both into a clean stop::

    limits: {simulated_time: 10 s, events: 50000000, wall_time: 300 s}

A :class:`Budget` holds the limits of one run (one sweep point): every world the run makes
draws on the same event count and wall clock, while simulated time is each world's own clock.
The event loop (:func:`mpisim.engine.sim.run_until_idle`) consults it with one comparison of
the event count per event and one of the next event's time where simulated time moves, and
reads the wall clock every :data:`WALL_CHECK_EVENTS` events, so a run without limits pays next
to nothing. A limit reached raises :class:`~mpisim.errors.LimitReached`; the
MPI layer adds where every rank was.
"""

from __future__ import annotations

import contextlib
import heapq
import math
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType

import simpy

from mpisim.engine.units import pretty_time
from mpisim.errors import LimitReached

__all__ = ["WALL_CHECK_EVENTS", "Budget", "Limits", "WallTimeReached", "wall_clock_watchdog"]

#: Heap events between two readings of the wall clock (a reading costs about 1 % of an event
#: at this spacing; events at the start of a huge world can take a millisecond each).
WALL_CHECK_EVENTS = 256


@dataclass(frozen=True)
class Limits:
    """Bounds of one run; None is no bound. Times in seconds."""

    simulated_time: float | None = None
    events: int | None = None
    wall_time: float | None = None

    @property
    def any(self) -> bool:
        """Whether any bound is set."""
        return any(v is not None for v in (self.simulated_time, self.events, self.wall_time))


class Budget:
    """What is left of a run's :class:`Limits`, shared by the worlds of the run."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        #: Events processed by worlds that finished their loop.
        self.events_done = 0
        self.started = time.perf_counter()
        self.time_limit = math.inf if limits.simulated_time is None else limits.simulated_time

    def next_check(self, processed: int) -> int:
        """The loop's event count (of *processed* so far) at which :meth:`check` must run next."""
        step = WALL_CHECK_EVENTS if self.limits.wall_time is not None else 1 << 62
        if self.limits.events is not None:
            step = min(step, max(1, self.limits.events - self.events_done - processed))
        return processed + step

    def check(self, processed: int, now: float) -> int:
        """Raise LimitReached if the event or wall-time limit is reached; else return the next check."""
        events = self.events_done + processed
        if self.limits.events is not None and events >= self.limits.events:
            raise self.reached("events", f"{self.limits.events:,} events", now, events)
        if self.limits.wall_time is not None:
            elapsed = time.perf_counter() - self.started
            if elapsed >= self.limits.wall_time:
                raise self.reached("wall_time", f"{pretty_time(self.limits.wall_time)} of wall time", now, events)
        return self.next_check(processed)

    def reached_time(self, next_event: float, processed: int, now: float) -> LimitReached:
        """The error for a next event due after the simulated-time limit."""
        return self.reached("simulated_time", f"{pretty_time(self.time_limit)} of simulated time", now,
                           self.events_done + processed, f"; the next event was due at {pretty_time(next_event)}")

    def reached(self, key: str, what: str, now: float, events: int, extra: str = "") -> LimitReached:
        """A LimitReached naming the limit *key* and the state of the run."""
        elapsed = time.perf_counter() - self.started
        error = LimitReached(f"stopped at the limit of {what} (limits.{key}): simulated time {pretty_time(now)}, "
                             f"{events:,} events, {elapsed:.1f} s of wall time{extra}")
        error.limit = key
        return error


def _running_process_env(frame: FrameType | None) -> simpy.Environment | None:
    """The environment of the SimPy process whose generator *frame* is running in, if any."""
    resume = simpy.events.Process._resume.__code__
    while frame is not None:
        if frame.f_code is resume:
            process = frame.f_locals.get("self")
            return getattr(process, "env", None)
        frame = frame.f_back
    return None


def _fail_next(env: simpy.Environment, error: BaseException) -> None:
    queue = getattr(env, "_queue", None)
    if not isinstance(queue, list):
        return
    event = simpy.Event(env)
    event._ok, event._value = False, error
    # Priority -1 sorts before SimPy's URGENT (0) and mpisim's own lanes, at the current time.
    heapq.heappush(queue, (env.now, -1, -1, event))


class WallTimeReached(LimitReached):
    """``limits.wall_time`` reached, raised by :func:`wall_clock_watchdog` wherever the run was."""

    limit = "wall_time"


#: After the first interruption, the watchdog interrupts again at this spacing until the run has
#: stopped: code that swallows one exception (a user's ``except Exception: pass``) cannot outlive it.
WATCHDOG_REPEAT_S = 0.25


#: When the innermost active :func:`wall_clock_watchdog` fires (``time.perf_counter``), inf if none.
_deadline = math.inf


@contextlib.contextmanager
def wall_clock_watchdog(wall_time: float | None) -> Iterator[None]:
    """Stop the code in this block when *wall_time* seconds have passed, whatever it is doing.

    The event loop checks the wall clock itself, but a run spends time elsewhere too: planning
    (a capacity plan's buckets), building a million-rank world, or a user's program looping or
    sleeping between two MPI calls. A timer signal (``SIGALRM``) interrupts any of them: its
    handler raises :class:`WallTimeReached` in the main thread at the next bytecode, and
    ``time.sleep`` returns early when a handler raises. Signals reach only the main thread, so
    elsewhere (a Dask worker thread) the event loop's own checks are the limit.

    Watchdogs nest: inside one that fires first, another is nothing, so the phases of one run
    (its estimate, planning, the event loop) share one clock rather than each starting its own.
    """
    global _deadline
    if wall_time is None or threading.current_thread() is not threading.main_thread() \
            or not hasattr(signal, "setitimer"):
        yield
        return
    started = time.perf_counter()
    if _deadline <= started + wall_time:  # an enclosing watchdog stops this block first
        yield
        return
    outer_deadline, _deadline = _deadline, started + wall_time

    def interrupt(signum: int, frame: FrameType | None) -> None:
        elapsed = time.perf_counter() - started
        error = WallTimeReached(f"stopped at the limit of {pretty_time(wall_time)} of wall time (limits.wall_time) "
                                f"after {elapsed:.1f} s of wall time")
        env = _running_process_env(frame)
        if env is not None and not queued:
            # Inside a simulated rank, SimPy would turn the exception into that rank's failure,
            # raised only when its turn comes, and the rank would lose where it was. A failed
            # event ahead of everything else in the queue stops the loop as soon as this rank
            # yields; a rank that never yields is interrupted at the next repeat.
            _fail_next(env, error)
            queued.append(env)
            return
        raise error

    queued: list[object] = []
    previous_handler = signal.signal(signal.SIGALRM, interrupt)
    previous_timer = signal.setitimer(signal.ITIMER_REAL, max(wall_time, 1e-6), WATCHDOG_REPEAT_S)
    try:
        yield
    finally:
        _deadline = outer_deadline
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        if previous_timer[0] > 0:  # someone else's timer (pytest-timeout): give back what is left of it
            left = max(previous_timer[0] - (time.perf_counter() - started), 1e-6)
            signal.setitimer(signal.ITIMER_REAL, left, previous_timer[1])
