"""What the checker found: one finding per mistake, with the rank, the program's line and the simulated time.

A correctness checker is only as useful as its pointer into the program. Every finding names
the rank that made the mistake, the line of the student's own file where the MPI call was
made (never a line of mpisim or of numpy) and the simulated time of that call, so it can be
found on the run's timeline. Findings print in the order the run met them, which is the same
on every run: the simulation is deterministic.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from greenlet import getcurrent

from mpisim.compat.tracebacks import is_user_file
from mpisim.engine.units import pretty_time


@dataclass(frozen=True)
class Finding:
    """One mistake: *kind* (a short key, e.g. ``request-never-completed``), where, when and what."""

    kind: str
    rank: int
    file: str  # the program's file name (no folder): what a student recognises
    line: int
    time_s: float
    text: str

    def where(self) -> str:
        """``rank 0, ring.py:12, t = 3.05 us``."""
        place = f"{self.file}:{self.line}" if self.line else self.file or "?"
        return f"rank {self.rank}, {place}, t = {pretty_time(self.time_s)}"

    def __str__(self) -> str:
        return f"check [{self.kind}] {self.where()}: {self.text}"


def site_of(ctx: Any) -> tuple[str, int]:
    """``(file name, line)`` of the program's MPI call the rank *ctx* is making ('', 0 if none).

    In the rank's own greenlet that is the innermost frame of the program's files on the
    stack; while the engine runs the rank's call for it (a collective combining values), the
    line where the rank is suspended.
    """
    frame = sys._getframe(1) if getcurrent() is ctx.greenlet else ctx.greenlet.gr_frame
    while frame is not None:
        if is_user_file(frame.f_code.co_filename, ctx.runner.folder):
            return Path(frame.f_code.co_filename).name, frame.f_lineno
        frame = frame.f_back
    return "", 0


def running(runner: Any) -> Any:
    """The context of the rank whose simulated call the engine is running now (its SimPy process), or None."""
    active = runner.world.env.active_process
    for rank, process in enumerate(runner.world._processes):
        if process is active:
            return runner.contexts[rank]
    return None
