"""``MPI.Status``: what a receive learned about its message (source, tag, size), as mpi4py shows it.

The simulated MPI's status (:class:`mpisim.mpi.request.Status`) with mpi4py's names: counts in
elements of an ``MPI.Datatype``, ``Get_error`` and ``Is_cancelled``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mpisim.compat.buffers import Datatype
from mpisim.compat.unsupported import Strict, unsupported
from mpisim.mpi.constants import SUCCESS, UNDEFINED
from mpisim.mpi.request import Status as _SimStatus


class Status(_SimStatus, metaclass=Strict):
    """``MPI_Status``: ``Get_source``, ``Get_tag``, ``Get_count(datatype=MPI.BYTE)``, ``Get_error``, and their setters.

    A program may fill one itself (``status.source = 2``, ``Set_elements(MPI.INT, 3)``,
    ``Set_cancelled(True)``), as generalized requests and mpi4py's own tests do;
    ``Status(other)`` copies one.
    """

    __slots__ = ("_cancelled", "_mem")

    def __init__(self, status: Status | None = None) -> None:
        # MPICH's MPI_Status, five C ints: count_lo, count_hi_and_cancelled, MPI_SOURCE, MPI_TAG,
        # MPI_ERROR; source, tag and error live in it, so tomemory() writes reach them.
        self._mem = np.zeros(5, np.int32)
        super().__init__()
        self._error, self._cancelled = SUCCESS, False
        if status is not None:
            if not isinstance(status, Status):
                raise TypeError(f"expected a Status, got {type(status).__name__}")
            copy_status(self, status)
            self._error, self._cancelled = status._error, status._cancelled

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Status):
            return NotImplemented
        return (self.source, self.tag, self.nbytes, self._error, self._cancelled) == \
            (other.source, other.tag, other.nbytes, other._error, other._cancelled)

    __hash__ = None  # type: ignore[assignment]  # mutable, as mpi4py's

    def Get_count(self, datatype: Any = None) -> int:  # type: ignore[override]
        """The message's size in elements of *datatype* (bytes by default, as in mpi4py)."""
        if isinstance(datatype, Datatype) and datatype.tmap is not None:  # a derived type: its size in bytes
            size = datatype.Get_size()
            if not size:
                return 0
            return self.nbytes // size if self.nbytes % size == 0 else UNDEFINED
        return super().Get_count(datatype.dtype if isinstance(datatype, Datatype) else datatype)

    def Get_elements(self, datatype: Any) -> int:
        """The same as :meth:`Get_count` for these named types."""
        return self.Get_count(datatype)

    def Set_elements(self, datatype: Any, count: int) -> None:
        """Say the message held *count* elements of *datatype* (``MPI_Status_set_elements``)."""
        size = datatype.dtype.itemsize if isinstance(datatype, Datatype) else 1
        self.nbytes, self.count = int(count) * size, int(count)

    def Set_source(self, source: int) -> None:
        self.source = int(source)

    def Set_tag(self, tag: int) -> None:
        self.tag = int(tag)

    source = property(lambda self: int(self._mem[2]), lambda self, value: self._mem.__setitem__(2, value))
    tag = property(lambda self: int(self._mem[3]), lambda self, value: self._mem.__setitem__(3, value))
    _error = property(lambda self: int(self._mem[4]), lambda self, value: self._mem.__setitem__(4, value))

    def tomemory(self) -> memoryview:
        """The status as MPICH lays it out, five C ints, writable: a write to the source, tag or error word
        changes the status (mpi4py's ``Status.tomemory``). The count words hold the byte count when called."""
        self._mem[0], self._mem[1] = self.nbytes & 0x7FFFFFFF, ((self.nbytes >> 31) << 1) | int(self._cancelled)
        return memoryview(self._mem)

    def Get_error(self) -> int:
        """``MPI.SUCCESS`` unless set: a failed call raises instead."""
        return self._error

    def Set_error(self, error: int) -> None:
        self._error = int(error)

    error = property(Get_error, Set_error)

    def Is_cancelled(self) -> bool:
        """False unless set: cancelling a message is not simulated."""
        return self._cancelled

    def Set_cancelled(self, flag: bool) -> None:
        self._cancelled = bool(flag)

    cancelled = property(Is_cancelled, Set_cancelled)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in ("source", "tag", "count", "nbytes"):
            raise AttributeError(name)
        raise unsupported(f"Status.{name}")


def copy_status(into: Status | None, source: Any) -> None:
    if into is not None and source is not None:
        into.source, into.tag, into.count, into.nbytes = source.source, source.tag, source.count, source.nbytes
        into._cancelled = getattr(source, "_cancelled", False)

