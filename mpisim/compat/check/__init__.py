"""``mpisim exec --check``: the mistakes a real MPI hides, found deterministically on the simulated run.

A real MPI forgives a lot. A request nobody waits for, a send buffer overwritten too early,
a receive from ``ANY_SOURCE`` that only works when the messages arrive in one order, a user op
declared commutative that is not, ``rank - 1`` on rank 0 landing on ``PROC_NULL``: each of
these runs "fine" on the student's laptop and fails, or computes something else, on the
cluster. Tools such as MUST and Intel's correctness checker watch the program's MPI calls to
find them; this package does the same inside the simulation, where every run repeats exactly
and the timeline of each finding can be looked at:

* :mod:`.requests` -- requests never completed, send buffers modified before completion;
* :mod:`.values` -- user ops not commutative on the actual data, -1 used as a rank;
* :mod:`.wildcards` and :mod:`.explore` -- ANY_SOURCE receives whose outcome depends on the
  arrival order, found by re-running the program with tied and near-tied messages taken in
  another order (a bounded number of runs) and comparing each rank's output.

Each finding names the rank, the line of the program and the simulated time
(:class:`~.findings.Finding`). The MPI module calls the hooks through :func:`checker_of`,
which is None unless the run checks, so an unchecked run pays one attribute read per call.
"""

from __future__ import annotations

from typing import Any

from mpisim.compat.check.findings import Finding
from mpisim.compat.check.requests import RequestWatch
from mpisim.compat.check.values import ValueChecks

__all__ = ["Checker", "Finding", "checker_of"]


class Checker:
    """The checks of one run of the program (one world): its findings, in the order they were made."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.requests = RequestWatch(self.findings)
        self.values = ValueChecks(self.findings)

    def finish(self) -> None:
        """The program ended normally: what is still open is a finding."""
        self.requests.never_completed()


def checker_of(ctx: Any) -> Checker | None:
    """The checker of the rank's run, or None when the run does not check."""
    return ctx.runner.checker if ctx is not None else None
