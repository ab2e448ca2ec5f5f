"""What mpisim does not simulate of mpi4py: one error naming the call and the rank, never a raw AttributeError.

A program under ``mpisim exec`` may use a name of mpi4py that mpisim does not simulate:
``MPI.DOUBLE.Pack_external``, ``MPI.Comm.Get_parent()``, ``MPI.Op.Reduce_local``,
``from mpi4py.futures import MPIPoolExecutor``. Each gives a one-line error naming it and the
rank, as any other unsupported call does:

* names of the ``MPI`` module, of its objects and of its classes:
  :class:`~mpisim.compat.ranks.UnsupportedCall` (also an AttributeError, so
  ``hasattr(MPI.Datatype, "Pack_external")`` is False, as feature tests expect). Instances
  raise it from their ``__getattr__``; the classes from their metaclass, :class:`Strict`;
* submodules of the ``mpi4py`` package other than ``MPI`` (``futures``, ``util``, ``run``,
  ``bench``, ``typing``): :class:`UnsupportedModule` (also an ImportError, so a program's
  ``except ImportError`` fallback takes over). The package's ``__path__`` is the folder
  :data:`SUBMODULES`, whose modules raise it as they are imported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mpisim.compat.ranks import UnsupportedCall, current
from mpisim.errors import MPIError

#: The folder of the ``mpi4py`` package's submodules under ``mpisim exec``: each raises UnsupportedModule.
SUBMODULES = Path(__file__).with_name("mpi4py") / "submodules"


def _who() -> str:
    ctx = current()
    return f"rank {ctx.rank}: " if ctx is not None else ""


def unsupported(name: str) -> UnsupportedCall:
    """The error for ``MPI.<name>``, a name of mpi4py's MPI module mpisim does not simulate."""
    return UnsupportedCall(f"{_who()}MPI.{name} is not supported by mpisim exec (or is not an mpi4py name); "
                           "the README lists what is")


class UnsupportedModule(MPIError, ImportError):
    """A submodule of mpi4py other than ``MPI`` (``mpi4py.futures``, ``mpi4py.util``, ...), imported under ``mpisim exec``."""


def unsupported_module(name: str) -> UnsupportedModule:
    """The error for importing submodule *name* (``mpi4py.futures``) of the mpi4py package."""
    return UnsupportedModule(f"{_who()}{name} is not supported by mpisim exec (only mpi4py.MPI is); "
                             "the README lists what is")


class Strict(type):
    """The metaclass of the MPI module's classes: a name the class lacks is an UnsupportedCall naming it.

    ``MPI.Comm.Get_parent()`` and ``MPI.Datatype.Pack_external(...)`` are class attributes in
    mpi4py; without this they would be a raw AttributeError. A program's own subclasses
    (``class Mine(MPI.Intracomm)``) keep Python's usual error for their names.
    """

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("_") or not cls.__module__.startswith("mpisim."):
            raise AttributeError(f"type object {cls.__name__!r} has no attribute {name!r}")
        raise unsupported(f"{cls.__name__}.{name}")
