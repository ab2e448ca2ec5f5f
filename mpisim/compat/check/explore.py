"""Running a program under the checker, and again with other arrival orders for its ANY_SOURCE receives.

The first run is the program's own run (its output goes where it always does), with every
check on (:class:`~mpisim.compat.check.Checker`) and a :class:`~.wildcards.WildcardLog` in the
world's matching. Each wildcard receive that had a rival -- another rank's message it would
have accepted, arriving within the near-tie window -- is one other order worth trying: the
program is run again from the start, identical up to that receive, which now takes the
rival's message. The run's output (each rank's, compared rank by rank, so that the mere
interleaving of two ranks' prints does not count) and its end (normal, or the way it failed)
are compared with the first run's; the first order that changes them is reported. The
exploration is bounded (:data:`MAX_ORDERS` runs) and repeats exactly: the runs are deterministic.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from mpisim.compat.check import Checker
from mpisim.compat.check.findings import Finding
from mpisim.compat.check.wildcards import WildcardLog, WildcardReceive
from mpisim.engine.units import pretty_time
from mpisim.errors import MPIError

#: At most this many re-runs with another arrival order.
MAX_ORDERS = 16


class RankOutput(io.TextIOBase):
    """The program's stdout, passed on to *target* and kept rank by rank for comparison."""

    def __init__(self, target: TextIO) -> None:
        self.target = target
        self.runner: Any = None
        self.by_rank: dict[int, list[str]] = {}

    def write(self, text: str) -> int:
        ctx = self.runner.current if self.runner is not None else None
        self.by_rank.setdefault(ctx.rank if ctx is not None else -1, []).append(text)
        return self.target.write(text)

    def flush(self) -> None:
        self.target.flush()

    def writable(self) -> bool:
        return True

    def lines(self) -> dict[int, list[str]]:
        return {rank: "".join(parts).splitlines() for rank, parts in sorted(self.by_rank.items())}


@dataclass
class Outcome:
    """What a run of the program showed: each rank's output lines and how it ended."""

    lines: dict[int, list[str]] = field(default_factory=dict)
    ended: str = "completed"

    def difference(self, other: Outcome) -> str:
        """How *other* differs from this outcome, in a sentence ('' if it does not)."""
        if other.ended != self.ended:
            return f"the program then ends differently: {other.ended} (instead of {self.ended})"
        for rank in sorted(set(self.lines) | set(other.lines)):
            mine, theirs = self.lines.get(rank, []), other.lines.get(rank, [])
            for i in range(max(len(mine), len(theirs))):
                a = mine[i] if i < len(mine) else "(nothing)"
                b = theirs[i] if i < len(theirs) else "(nothing)"
                if a != b:
                    who = f"rank {rank}" if rank >= 0 else "the program"
                    return f"{who} then prints {b!r} instead of {a!r}"
        return ""


#: run_once(checker, wildcards, stdout) runs the program once; returns the runner (raises its MPIError).
RunOnce = Callable[[Checker, WildcardLog, TextIO], Any]


def checked_run(run_once: RunOnce) -> tuple[Any, list[Finding]]:
    """Run the program under the checker, explore other arrival orders; return (the first run's value, findings).

    An MPIError of the first run is raised as it would be without the checker.
    """
    checker = Checker()
    capture = RankOutput(sys.stdout)
    log = WildcardLog(lambda: _site(capture))
    with _redirect(capture):
        value = run_once(checker, log, capture)
    checker.finish()
    base = Outcome(capture.lines())
    race = _explore(run_once, log, base)
    if race is not None:
        checker.findings.append(race)
    return value, checker.findings


def _explore(run_once: RunOnce, log: WildcardLog, base: Outcome) -> Finding | None:
    for record, source in log.choices()[:MAX_ORDERS]:
        outcome = Outcome()
        capture = RankOutput(io.StringIO())
        quiet = Checker()  # the other orders' own findings are not the program's run: not reported
        with _redirect(capture), contextlib.redirect_stderr(io.StringIO()):
            try:
                run_once(quiet, WildcardLog(lambda c=capture: _site(c), {(record.rank, record.k): source}), capture)
            except MPIError as err:
                outcome.ended = f"{type(err).__name__}: {str(err).splitlines()[0]}"
        outcome.lines = capture.lines()
        change = base.difference(outcome)
        if change:
            return _race(record, source, change)
    return None


def _race(record: WildcardReceive, source: int, change: str) -> Finding:
    gap = record.rivals[source] - record.t_arrival
    when = "at the same time as" if gap == 0 else \
        f"{pretty_time(abs(gap))} {'after' if gap > 0 else 'before'}"
    return Finding(
        "any-source-race", record.rank, record.file, record.line, record.t_post,
        f"this receive from ANY_SOURCE (the rank's wildcard receive number {record.k + 1}) took rank "
        f"{record.source}'s message, but rank {source}'s arrived {when} it (a near tie a real network may "
        f"reorder); taken in the other order, {change}. The result depends on arrival order: receive from "
        "each source explicitly, or make the result independent of the order.")


def _site(capture: RankOutput) -> tuple[str, int]:
    runner = capture.runner
    origin = runner.origin() if runner is not None else None
    if origin is None:
        return "", 0
    return Path(origin[0]).name, origin[1]


@contextlib.contextmanager
def _redirect(stream: RankOutput) -> Any:
    saved = sys.stdout
    sys.stdout = stream
    try:
        yield
    finally:
        sys.stdout = saved
