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

from collections.abc import Generator
from typing import Any, TypeVar

import numpy as np
import simpy

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
        self.env.run(until=until)
