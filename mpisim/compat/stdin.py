"""stdin read once and replayed: every run of a program sees the same input.

``mpisim exec --check`` explores other arrival orders by running the program again on a fresh
world. A program that reads its input (``input()`` on rank 0, as under ``mpiexec``) must read
the same lines on every one of those runs, or the second run fails with ``EOFError`` and the
checker blames the arrival order for what is only an exhausted pipe. :class:`RecordedInput`
reads the real stream lazily -- no more than the first run asks for, so a program that never
reads a terminal does not wait for one -- and keeps what it read; each run reads through its
own :meth:`RecordedInput.replay` cursor, which takes what an earlier run already read from the
record and only goes to the real stream past its end.
"""

from __future__ import annotations

import io
from typing import TextIO


class RecordedInput:
    """A text stream read at most once, whose text every :meth:`replay` cursor reads from the start."""

    def __init__(self, target: TextIO) -> None:
        self.target = target
        self.text = ""
        self.ended = False  # the real stream is exhausted

    def replay(self) -> _Cursor:
        """A fresh reader positioned at the start of the input."""
        return _Cursor(self)

    def _more(self, size: int = -1) -> bool:
        """Read more of the real stream: a line (*size* < 0) or up to *size* characters; False at its end."""
        if self.ended:
            return False
        chunk = self.target.readline() if size < 0 else self.target.read(size)
        if not chunk:
            self.ended = True
            return False
        self.text += chunk
        return True

    def _rest(self) -> None:
        if not self.ended:
            self.text += self.target.read()
            self.ended = True


class _Cursor(io.TextIOBase):
    """One run's view of a :class:`RecordedInput` (iteration and ``readlines`` go through ``readline``)."""

    def __init__(self, record: RecordedInput) -> None:
        self.record, self.pos = record, 0

    def read(self, size: int | None = -1) -> str:
        rec = self.record
        if size is None or size < 0:
            rec._rest()
        else:
            while len(rec.text) - self.pos < size and rec._more(size - (len(rec.text) - self.pos)):
                pass
        end = len(rec.text) if size is None or size < 0 else min(len(rec.text), self.pos + size)
        out, self.pos = rec.text[self.pos:end], end
        return out

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        rec = self.record
        while rec.text.find("\n", self.pos) < 0 and rec._more():
            pass
        newline = rec.text.find("\n", self.pos)
        end = len(rec.text) if newline < 0 else newline + 1
        if size is not None and size >= 0:
            end = min(end, self.pos + size)
        out, self.pos = rec.text[self.pos:end], end
        return out

    def readable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False
