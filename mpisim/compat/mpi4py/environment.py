"""The environment of a rank's MPI: its lifecycle (``Init``, ``Finalize``, ``Is_initialized``), its clock and its errors.

**Lifecycle, per rank, as mpi4py and MPICH have it.** ``from mpi4py import MPI`` initializes
the rank's MPI (unless ``mpi4py.rc.initialize`` is False: then ``MPI.Init()`` or
``MPI.Init_thread()`` does); ``MPI.Finalize()`` ends it, and ``Is_initialized()`` and
``Is_finalized()`` say where the rank is. A second ``Init`` raises ``MPI.Exception``
(``ERR_OTHER``); an MPI call before ``Init`` or after ``Finalize`` ends the rank with status 1,
as MPICH does, with one line naming the rank, the call and its line.

Every call of the MPI module starts here: :func:`here` finds the calling rank's context (and
checks the rank's MPI is running), :func:`alive` only checks.

**Errors.** ``MPI.Exception`` is :class:`~mpisim.errors.MPIError`, a RuntimeError, so
``except MPI.Exception`` catches what mpisim raises (truncation, invalid rank, tag, root,
communicator), and ``Get_error_class()`` says which, with MPICH's ``MPI.ERR_*`` values.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from greenlet import getcurrent

from mpisim import __version__
from mpisim.compat.package import Rc
from mpisim.compat.ranks import RankContext, current, require
from mpisim.compat.tracebacks import suspended_at
from mpisim.errors import MPIError, error_class_of, error_string
from mpisim.mpi.constants import (
    ERR_OTHER,
    SUBVERSION,
    THREAD_FUNNELED,
    THREAD_MULTIPLE,
    THREAD_SERIALIZED,
    THREAD_SINGLE,
    VERSION,
)


def here(call: str) -> RankContext:
    """The calling rank's context; remembers the caller's frame, the line its messages were sent from.

    A call before ``MPI.Init`` or after ``MPI.Finalize`` ends the rank there (:func:`check_alive`).
    """
    ctx = getattr(getcurrent(), "ctx", None)
    if ctx is None:
        return require(f"MPI.{call}")
    if ctx.cache.get("mpi") != _RUNNING:
        check_alive(ctx, call)
    ctx.runner.site = sys._getframe(2)
    return ctx


def alive(call: str) -> None:
    """For calls that need no context otherwise: MPI must be initialized and not finalized on the calling rank."""
    ctx = getattr(getcurrent(), "ctx", None)
    if ctx is not None and ctx.cache.get("mpi") != _RUNNING:
        check_alive(ctx, call)


# ------------------------------------------------------------------ clock, node, versions, errors


def Wtime() -> float:
    """The simulated clock of the calling rank, in seconds (``MPI_Wtime``)."""
    ctx = here("Wtime")
    ctx.enter()
    return float(ctx.env.now)


def Wtick() -> float:
    """The resolution of :func:`Wtime`: the simulated clock is exact to the nanosecond in these reports."""
    alive("Wtick")
    return 1e-9


def Get_processor_name() -> str:
    """The name of the simulated node the calling rank runs on."""
    ctx = here("Get_processor_name")
    topology = ctx.comm.world.topology
    return f"{topology.spec.name}-node{topology.node_of(ctx.rank)}"


def Is_initialized() -> bool:
    """True once the rank's MPI is initialized: at the import, or at ``Init()`` with ``mpi4py.rc.initialize = False``.

    It stays True after ``Finalize()``, as in MPI.
    """
    ctx = current()
    return ctx is None or _state(ctx) != _UNINITIALIZED


def Is_finalized() -> bool:
    """True once the rank has called ``Finalize()``."""
    ctx = current()
    return ctx is not None and _state(ctx) == _FINALIZED


def Init() -> None:
    """Initialize the rank's MPI: needed only with ``mpi4py.rc.initialize = False``; a second call raises (``ERR_OTHER``)."""
    _init("Init", THREAD_SINGLE)


def Init_thread(required: int = THREAD_MULTIPLE) -> int:
    """:func:`Init`, asking for thread level *required*; returns the level provided (at most ``THREAD_SERIALIZED``)."""
    return _init("Init_thread", int(required))


def Finalize() -> None:
    """End the rank's MPI: ``Is_finalized()`` is then True and any further MPI call ends the rank, as under MPICH."""
    ctx = here_any("Finalize")
    check_alive(ctx, "Finalize")
    ctx.cache["mpi"] = _FINALIZED


def Query_thread() -> int:
    """The thread level the rank's MPI provides. Ranks run one at a time in their greenlets: at most serialized."""
    ctx = here_any("Query_thread")
    check_alive(ctx, "Query_thread")
    return int(ctx.cache.get("thread_level", THREAD_SERIALIZED))


def Is_thread_main() -> bool:
    alive("Is_thread_main")
    return True


def Get_version() -> tuple[int, int]:
    """The MPI standard version (callable at any time, as in MPI)."""
    return VERSION, SUBVERSION


def Get_abi_version() -> tuple[int, int]:
    """The MPI ABI version: ``(-1, -1)``, no standard ABI, as MPICH 5.0.2 built without it answers."""
    return -1, -1


def Get_library_version() -> str:
    return f"mpisim {__version__} (simulated MPI, mpi4py API)"


class Errhandler:
    """An error handler (``MPI.ERRORS_RETURN``, ``ERRORS_ARE_FATAL``, ``ERRORS_ABORT``): what an MPI error does.

    Under ``mpisim exec`` every MPI error raises ``MPI.Exception`` in the calling rank, which is
    what mpi4py's default (``ERRORS_RETURN``, errors as exceptions) does; an uncaught one ends the
    run with the rank's traceback. A program may still read and set handlers, as mpi4py's own
    tests do; setting one does not change what an error does.
    """

    def __init__(self, name: str = "MPI_ERRHANDLER_NULL") -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Errhandler) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __bool__(self) -> bool:
        return self.name != "MPI_ERRHANDLER_NULL"

    def __repr__(self) -> str:
        return f"<mpi4py.MPI.Errhandler {self.name}>"

    def Free(self) -> None:
        """Free this handle: it becomes ``ERRHANDLER_NULL`` (the module's constants stay what they are, as in mpi4py)."""
        if not any(self is known for known in _PREDEFINED):
            self.name = "MPI_ERRHANDLER_NULL"

    def handle(self) -> Errhandler:
        """A new handle to this handler, as ``Get_errhandler`` returns one (freeing it frees only the copy)."""
        return Errhandler(self.name)


ERRHANDLER_NULL = Errhandler()
ERRORS_RETURN = Errhandler("MPI_ERRORS_RETURN")
ERRORS_ARE_FATAL = Errhandler("MPI_ERRORS_ARE_FATAL")
ERRORS_ABORT = Errhandler("MPI_ERRORS_ABORT")
_PREDEFINED = [ERRHANDLER_NULL, ERRORS_RETURN, ERRORS_ARE_FATAL, ERRORS_ABORT]  # compared by identity below


def get_vendor() -> tuple[str, tuple[int, int, int]]:
    """The MPI library's name and version (mpi4py's ``MPI.get_vendor()``): MPICH 5.0.2, whose semantics mpisim follows.

    Programs (and mpi4py's own tests) branch on it to work around a library's known limits;
    mpisim's answers are MPICH's, so MPICH's branches are the right ones.
    """
    return "MPICH", (5, 0, 2)


def Get_error_class(errorcode: int) -> int:
    """The error class of an error code (``MPI_Error_class``): mpisim's codes are their classes."""
    return error_class_of(int(errorcode))


def Get_error_string(errorcode: int) -> str:
    """MPICH's string for an error code (``MPI_Error_string``): ``MPI.Get_error_string(MPI.ERR_RANK)`` is 'Invalid rank'."""
    return error_string(int(errorcode))



def Pcontrol(level: int) -> None:
    """Profiling control: nothing to do."""
    alive("Pcontrol")


# ------------------------------------------------------------------ lifecycle, per rank

# ctx.cache["mpi"]: where the rank's MPI is. "running" once initialized (at ``from mpi4py import
# MPI`` unless mpi4py.rc.initialize is False, else at Init/Init_thread); "finalized" after Finalize.
_RUNNING, _UNINITIALIZED, _FINALIZED = "running", "uninitialized", "finalized"
_THREAD_LEVELS = {"single": THREAD_SINGLE, "funneled": THREAD_FUNNELED, "serialized": THREAD_SERIALIZED,
                  "multiple": THREAD_MULTIPLE}
#: What MPICH prints as it ends a process that calls MPI before MPI_Init or after MPI_Finalize.
_MPICH_NOT_RUNNING = "Attempting to use an MPI routine before initializing or after finalizing MPICH"


def _rc(ctx: RankContext) -> Any:
    """The run's ``mpi4py.rc`` (mpi4py's defaults if the package has none)."""
    return getattr(getattr(ctx.runner, "package", None), "rc", None) or Rc()


def _state(ctx: RankContext) -> str:
    """Where the rank's MPI is; decided at its first use, from ``mpi4py.rc`` as the program left it before the import."""
    cache = ctx.cache
    state = cache.get("mpi")
    if state is None:
        rc = _rc(ctx)
        if rc.initialize:  # mpi4py calls MPI_Init_thread as the rank imports MPI
            state = _RUNNING
            level = _THREAD_LEVELS.get(str(rc.thread_level).lower(), THREAD_MULTIPLE) if rc.threads else THREAD_SINGLE
            cache["thread_level"] = min(level, THREAD_SERIALIZED)
            cache["initialized_by_mpi4py"] = True
        else:
            state = _UNINITIALIZED
        cache["mpi"] = state
    return state


def imported() -> None:
    """The calling rank looked up ``mpi4py.MPI`` (``from mpi4py import MPI``): mpi4py initializes MPI there."""
    ctx = current()
    if ctx is not None:
        _state(ctx)


def _where(ctx: RankContext) -> str:
    """`` (prog.py:7)``: the program's line making the call in progress ('' if none is the program's)."""
    where = suspended_at(sys._getframe(1), ctx.runner.folder)
    return f" ({where.split(': ', 1)[0]})" if where else ""


def _end_rank(ctx: RankContext, message: str, status: int) -> None:
    """End the rank with *status* as MPICH ends the process: one line on stderr, then the exit (no exception to catch)."""
    sys.stderr.write(f"rank {ctx.rank}: {message}\n")
    raise SystemExit(status)


def check_alive(ctx: RankContext, call: str) -> None:
    """Return if the rank's MPI is running; else end the rank, as MPICH does (status 1)."""
    state = _state(ctx)
    if state == _RUNNING:
        return
    when = "after MPI.Finalize()" if state == _FINALIZED else "before MPI.Init() (mpi4py.rc.initialize is False)"
    _end_rank(ctx, f"MPI.{call} {when}{_where(ctx)}: MPICH ends the program here with status 1: "
                   f"\"{_MPICH_NOT_RUNNING}\"", 1)


def _init(call: str, level: int) -> int:
    ctx = here_any(call)
    state = _state(ctx)
    if state == _RUNNING:
        raise MPIError(f"rank {ctx.rank}: MPI.{call}: Cannot call MPI_INIT or MPI_INIT_THREAD more than once")
    if state == _FINALIZED:  # MPICH's errors are fatal once finalized: it aborts with the error class
        _end_rank(ctx, f"MPI.{call} after MPI.Finalize(){_where(ctx)}: MPICH aborts the program here with "
                       f"status {ERR_OTHER}: \"Cannot call MPI_INIT or MPI_INIT_THREAD more than once\"", ERR_OTHER)
    provided = min(level, THREAD_SERIALIZED)
    ctx.cache["mpi"], ctx.cache["thread_level"] = _RUNNING, provided
    return provided


def here_any(call: str) -> RankContext:
    """The calling rank's context, whatever the state of its MPI (the lifecycle calls)."""
    ctx = getattr(getcurrent(), "ctx", None)
    return ctx if ctx is not None else require(f"MPI.{call}")


def unfinalized_ranks(contexts: Sequence[RankContext]) -> list[int]:
    """The ranks that ended with MPI initialized and not finalized: neither the program nor mpi4py finalized it.

    mpi4py finalizes at the rank's exit when ``mpi4py.rc.finalize`` is True, or None (the
    default) and mpi4py initialized MPI at the import. Under MPICH's ``mpiexec`` a rank that
    exits without ``MPI_Finalize`` ends the job: the ranks still running are killed.
    """
    ranks = []
    for ctx in contexts:
        if ctx.cache.get("mpi") != _RUNNING:
            continue
        finalize = _rc(ctx).finalize
        if not (finalize or (finalize is None and ctx.cache.get("initialized_by_mpi4py"))):
            ranks.append(ctx.rank)
    return ranks
