"""The ``mpi4py`` package a program imports under ``mpisim exec``: ``MPI``, ``rc``, ``__version__``.

Each run gets a fresh package (:func:`mpi4py_package`), seen as ``mpi4py`` only while the
program runs. As in mpi4py:

* ``mpi4py.rc`` holds the runtime options a program sets *before* ``from mpi4py import MPI``:
  with ``rc.initialize = False`` the rank's MPI is not initialized until it calls
  ``MPI.Init()`` or ``MPI.Init_thread()``; ``rc.thread_level`` and ``rc.threads`` choose the
  thread level asked for; ``rc.finalize`` says whether the rank's end finalizes MPI (the
  lifecycle itself is in :mod:`mpisim.compat.mpi4py`, per rank). ``rc(initialize=False)``
  sets options too, and an unknown option is a TypeError;
* ``from mpi4py import MPI`` is where a rank's MPI is initialized, when ``rc.initialize`` says
  so: the package's ``MPI`` attribute tells the MPI module that the calling rank imported it;
* it is a package: ``import mpi4py.futures`` (or ``util``, ``run``, ``bench``, ``typing``)
  is a one-line error naming the submodule and the rank (:mod:`mpisim.compat.unsupported`),
  and so is any other name of the package mpisim does not have (``mpi4py.profile``).
"""

from __future__ import annotations

import types
from typing import Any

from mpisim.compat.ranks import UnsupportedCall, current
from mpisim.compat.unsupported import SUBMODULES

#: The mpi4py API level the MPI module follows.
MPI4PY_VERSION = "4.0.0"


class Rc:
    """mpi4py's runtime configuration (``mpi4py.rc``), with mpi4py's options and defaults."""

    initialize = True
    threads = True
    thread_level = "multiple"
    finalize: bool | None = None
    fast_reduce = True
    recv_mprobe = True
    irecv_bufsz = 32768
    errors = "exception"

    def __init__(self, **kwargs: Any) -> None:
        self(**kwargs)

    def __setattr__(self, name: str, value: Any) -> None:
        if not hasattr(self, name):
            raise TypeError(f"object has no attribute {name!r}")
        super().__setattr__(name, value)

    def __call__(self, **kwargs: Any) -> None:
        for key in kwargs:
            if not hasattr(self, key):
                raise TypeError(f"unexpected argument {key!r}")
        for key, value in kwargs.items():
            setattr(self, key, value)

    def __repr__(self) -> str:
        return "<mpi4py.rc>"


def mpi4py_package(mpi_module: types.ModuleType) -> types.ModuleType:
    """A fresh ``mpi4py`` package whose ``MPI`` is *mpi_module* (see the module docstring)."""
    package = types.ModuleType("mpi4py", "mpi4py as seen by a program under mpisim exec")
    package.__path__ = [str(SUBMODULES)]  # a package: its submodules other than MPI raise UnsupportedModule
    package.__version__ = MPI4PY_VERSION  # type: ignore[attr-defined]
    package.rc = Rc()  # type: ignore[attr-defined]
    package.get_config = dict  # type: ignore[attr-defined]

    def __getattr__(name: str) -> Any:  # PEP 562: MPI is looked up, so the import is seen
        if name == "MPI":
            imported = getattr(mpi_module, "_imported", None)
            if imported is not None:
                imported()
            return mpi_module
        if name.startswith("__"):
            raise AttributeError(f"module 'mpi4py' has no attribute {name!r}")
        ctx = current()
        who = f"rank {ctx.rank}: " if ctx is not None else ""
        raise UnsupportedCall(f"{who}mpi4py.{name} is not supported by mpisim exec (only mpi4py.MPI, rc and "
                              "__version__ are); the README lists what is")

    package.__getattr__ = __getattr__  # type: ignore[attr-defined]
    return package
