"""``MPI.Status``: what a receive learned about its message (source, tag, size), as mpi4py shows it.

The simulated MPI's status (:class:`mpisim.mpi.request.Status`) with mpi4py's names: counts in
elements of an ``MPI.Datatype``, ``Get_error`` and ``Is_cancelled``.
"""

from __future__ import annotations

from typing import Any

from mpisim.compat.buffers import Datatype
from mpisim.compat.unsupported import Strict, unsupported
from mpisim.mpi.constants import SUCCESS
from mpisim.mpi.request import Status as _SimStatus


class Status(_SimStatus, metaclass=Strict):
    """``MPI_Status``: ``Get_source``, ``Get_tag``, ``Get_count(datatype=MPI.BYTE)``, ``Get_error``."""

    __slots__ = ()

    def Get_count(self, datatype: Any = None) -> int:  # type: ignore[override]
        """The message's size in elements of *datatype* (bytes by default, as in mpi4py)."""
        return super().Get_count(datatype.dtype if isinstance(datatype, Datatype) else datatype)

    def Get_elements(self, datatype: Any) -> int:
        """The same as :meth:`Get_count` for these named types."""
        return self.Get_count(datatype)

    def Get_error(self) -> int:
        """Always ``MPI.SUCCESS``: a failed call raises instead."""
        return SUCCESS

    @property
    def error(self) -> int:
        return SUCCESS

    def Is_cancelled(self) -> bool:
        """Never: cancelling is not simulated."""
        return False

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in ("source", "tag", "count", "nbytes"):
            raise AttributeError(name)
        raise unsupported(f"Status.{name}")


def copy_status(into: Status | None, source: Any) -> None:
    if into is not None and source is not None:
        into.source, into.tag, into.count, into.nbytes = source.source, source.tag, source.count, source.nbytes

