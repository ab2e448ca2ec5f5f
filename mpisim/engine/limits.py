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

import math
import time
from dataclasses import dataclass

from mpisim.engine.units import pretty_time
from mpisim.errors import LimitReached

__all__ = ["WALL_CHECK_EVENTS", "Budget", "Limits"]

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
