"""Blocking calls that know when a program forgot ``yield from``.

In a generator program every blocking call is a generator: ``comm.send(x, dest=1)`` only
*makes* the call, and ``yield from`` runs it. Written without ``yield from``, the call is made
and dropped, nothing is sent, and the program goes on as if it had been; the symptom shows
up elsewhere (the receiver deadlocks, and the report blames it). Python warns about a
coroutine that was never awaited, but says nothing about a generator that never ran.

So the calls a user's program makes return a :class:`PendingCall` instead of the bare
generator. ``yield from`` works on it unchanged (it hands over the generator, which then runs
at full speed), and ``comm.start(call)`` takes it too. A pending call that is dropped without
having run -- the moment its last reference goes, which for a bare statement is at once --
records who made it and where, and the run reports it::

    rank 0 called comm.send(...) at ring.py:4 without `yield from`: the call never ran
      (write: yield from comm.send(x, dest=1))

before the deadlock report that usually follows, or as the run's failure if nothing
deadlocked (:class:`~mpisim.errors.UnstartedCallError`). Using the pending call as if it
were the result (``new = comm.dup(); new.rank``) or yielding it with a plain ``yield`` is an
error naming the line as well.

Only the communicators handed to a user's program pay for this (one small object per call):
collective algorithms talk on plain communicators (:class:`~mpisim.mpi.usercomm.UserComm`).
"""

from __future__ import annotations

import io
import linecache
import os
import tokenize
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from mpisim.errors import MPIError

if TYPE_CHECKING:
    from mpisim.mpi.world import World


class PendingCall:
    """A blocking call made by a user's program and not yet run; ``yield from`` runs it, once."""

    __slots__ = ("_file", "_gen", "_line", "_name", "_rank", "_started", "_world")

    def __init__(self, gen: Generator[Any, Any, Any], world: World, rank: int, name: str, file: str,
                 line: int) -> None:
        self._gen, self._world, self._rank, self._name = gen, world, rank, name
        self._file, self._line = file, line
        self._started = False

    def __iter__(self) -> Generator[Any, Any, Any]:
        """Hand the call over to ``yield from`` (or ``comm.start``): from here on it is the plain generator."""
        if self._started:
            raise MPIError(f"rank {self._rank}: {self._call()} at {self._where()} has already run; "
                           "each call runs once: make the call again to repeat it")
        self._started = True
        return self._gen

    def __del__(self) -> None:
        if not self._started:
            hint = self._source()
            self._world.lost_calls.append((self._rank,
                f"rank {self._rank} called {self._call()} at {self._where()} without `yield from`: the call never ran"
                + (f"\n  (write: {hint})" if hint else "")))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        self._started = True  # reported here; not a second time when it is dropped
        if name == "callbacks":  # the engine looks at what a rank yields: ``yield call``
            raise MPIError(f"rank {self._rank}: {self._call()} at {self._where()} was yielded with `yield`; "
                           "a blocking call runs with `yield from`")
        raise MPIError(f"rank {self._rank}: .{name} of {self._call()} at {self._where()}, a call that has not run: "
                       f"write `result = yield from {self._call()}` to run it and get its result")

    def __repr__(self) -> str:
        return f"<{self._call()} from {self._where()}, not run yet: run it with `yield from`>"

    def _call(self) -> str:
        return f"comm.{self._name}(...)" if "." not in self._name else f"{self._name}(...)"

    def _where(self) -> str:
        return f"{os.path.basename(self._file)}:{self._line}"

    def _source(self) -> str:
        """The program's line with ``yield from`` where it belongs (``x = yield from comm.dup()``), or ''."""
        text = linecache.getline(self._file, self._line).strip()
        try:  # leave out a trailing comment (tokenize knows a '#' in a string is not one)
            comments = [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.COMMENT]
        except (tokenize.TokenError, SyntaxError):
            return ""
        if comments:
            text = text[:comments[0].start[1]].rstrip()
        at = text.find(f".{self._name.rsplit('.', 1)[-1]}(")
        if at < 0 or "yield" in text or text.count("(") != text.count(")"):
            return ""  # not found, or a call spread over lines: the name and line say enough
        start = at
        while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_.[]"):
            start -= 1
        return text[:start] + "yield from " + text[start:]
