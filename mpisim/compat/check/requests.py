"""Nonblocking requests the program must complete, and send buffers it must leave alone until then.

``MPI_Isend`` hands the library a buffer and returns at once; the library may read it at any
moment until the request is completed by ``Wait``, ``Test`` or one of their many-request
forms. Two mistakes follow, and a real MPI hides both:

* **a request never completed.** The message may well arrive (an eager send is copied out at
  once), so the program seems to work; but MPI requires the completion call, the library's
  resources leak, and with a large message (rendezvous) the data never moves at all;
* **a send buffer modified before its request completed.** Whether the receiver gets the old
  values, the new ones or a mix depends on the protocol, the message size and the timing: a
  small message was copied out at the ``Isend`` (old values), a large one is read when the
  receiver is ready (often new values). mpisim sends the values of the ``Isend``, so the bug
  would vanish here; under the checker each buffer is copied at the ``Isend`` and compared
  with the program's array when the request completes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mpisim.compat.check.findings import Finding, site_of
from mpisim.engine.units import pretty_time


@dataclass
class Started:
    """A nonblocking call in progress: what it was, where and when, and the send buffer it must not change."""

    call: str  # e.g. "Isend(dest=1, tag=0)"
    rank: int
    file: str
    line: int
    time_s: float
    live: np.ndarray | None = None  # the program's own elements (a view)
    copy: np.ndarray | None = None  # their values at the call


class RequestWatch:
    """Every nonblocking point-to-point request from its start to its completion (see the module docstring)."""

    def __init__(self, findings: list[Finding]) -> None:
        self.findings = findings
        self.open: dict[int, tuple[Any, Started]] = {}  # id(request) -> (request, what started it)

    def started(self, ctx: Any, request: Any, call: str, elements: np.ndarray | None = None) -> None:
        """The program started *call* (e.g. ``Isend(dest=1, tag=0)``) and holds *request*."""
        file, line = site_of(ctx)
        start = Started(call, ctx.rank, file, line, ctx.env.now)
        if elements is not None and elements.size:
            start.live, start.copy = elements, elements.copy()
        self.open[id(request)] = (request, start)

    def completed(self, ctx: Any, request: Any) -> None:
        """A completion call returned *request*: its send buffer may be reused from now on."""
        entry = self.open.pop(id(request), None)
        if entry is None or entry[1].live is None:
            return
        start = entry[1]
        changed = np.flatnonzero(start.live != start.copy)
        if not changed.size:
            return
        i = int(changed[0])
        file, line = site_of(ctx) if ctx is not None else ("", 0)
        when = f" (completed at {file}:{line}, t = {pretty_time(ctx.env.now)})" if ctx is not None and line else ""
        self.findings.append(Finding(
            "send-buffer-modified", start.rank, start.file, start.line, start.time_s,
            f"the send buffer of {start.call} was modified before its request completed{when}: "
            f"{len(changed)} of {start.live.size} elements changed, the first is element {i} "
            f"({_value(start.copy[i])} at the call, {_value(start.live[i])} now). mpisim sent the values of the "
            f"call; a real MPI may send the old values, the new ones or a mix (a large message is read when the "
            f"receiver is ready). Do not touch the buffer until Wait returns."))

    def forgotten(self, request: Any) -> None:
        """``Request.Free``: the program gave the request up (MPI allows it; nothing more to check)."""
        self.open.pop(id(request), None)

    def never_completed(self) -> None:
        """At the program's end: every request no completion call returned is a finding."""
        for request, start in sorted(self.open.values(), key=lambda e: (e[1].rank, e[1].time_s)):
            done = getattr(getattr(request, "_sim", None), "triggered", False)
            state = ("the operation itself finished, but MPI requires the completion call (the library keeps the "
                     "request's resources until then)") if done else \
                "the operation never finished either (its message was never matched or moved)"
            self.findings.append(Finding(
                "request-never-completed", start.rank, start.file, start.line, start.time_s,
                f"the request of {start.call} was never completed: no Wait, Test, Waitall or Testall returned it "
                f"before the rank ended; {state}. Keep the request and call req.Wait() (or MPI.Request.Waitall)."))
        self.open.clear()


def _value(x: Any) -> str:
    return repr(x.item()) if hasattr(x, "item") else repr(x)
