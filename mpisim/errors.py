"""Exceptions shared by every layer of mpisim.

Two families matter to users, and the CLI maps them to exit codes:

* :class:`ConfigError` -- bad input (YAML, schema, units, impossible topology, unknown
  algorithm). It carries the dotted path to the offending field so the one-line message
  can say exactly where the problem is. Exit code 2.
* :class:`MPIError` -- the simulated program did something MPI forbids (deadlock,
  truncation, invalid rank, mismatched collectives). Exit code 1.

An MPIError is also what mpi4py calls ``MPI.Exception`` (a RuntimeError carrying an MPI
error class), so a program under ``mpisim exec`` can catch it and ask which error it was.
"""

from __future__ import annotations

#: MPICH's string for each MPI error class (``MPI_Error_string``), by MPICH's value of the class
#: (``mpisim.mpi.constants`` names them: ``ERR_RANK`` is 6, ...). ``tests/compat`` checks both
#: against the real MPICH.
ERROR_STRINGS: dict[int, str] = {
    0: "No MPI error", 1: "Invalid buffer pointer", 2: "Invalid count", 3: "Invalid datatype", 4: "Invalid tag",
    5: "Invalid communicator", 6: "Invalid rank", 7: "Invalid root", 8: "Invalid group", 9: "Invalid MPI_Op",
    10: "Invalid topology", 11: "Invalid dimension argument", 12: "Invalid argument",
    13: "Unknown error.  Please file a bug report.", 14: "Message truncated", 15: "Other MPI error",
    16: "Internal MPI error!", 17: "See the MPI_ERROR field in MPI_Status for the error code",
    18: "Pending request (no error)", 19: "Invalid MPI_Request", 20: "Access denied to file",
    21: "Invalid amode value in MPI_File_open ", 22: "Invalid file name",
    23: "An error occurred in a user-defined data conversion function",
    24: "The requested datarep name has already been specified to MPI_REGISTER_DATAREP", 25: "File exists",
    26: "File in use by some process", 27: "Invalid MPI_File", 28: "Invalid MPI_Info", 29: "Invalid key for MPI_Info ",
    30: "Invalid MPI_Info value ", 31: "MPI_Info key is not defined ", 32: "Other I/O error ",
    33: "Invalid service name (see MPI_Publish_name)", 34: "Unable to allocate memory for MPI_Alloc_mem",
    35: "Inconsistent arguments to collective routine ", 36: "Not enough space for file ",
    37: "File does not exist", 38: "Invalid port", 39: "Quota exceeded for files",
    40: "Read-only file or filesystem name", 41: "Attempt to lookup an unknown service name ",
    42: "Error in spawn call", 43: "Unsupported datarep passed to MPI_File_set_view ",
    44: "Unsupported file operation ", 45: "Invalid MPI_Win", 46: "Invalid base address",
    47: "Invalid locktype argument", 48: "Invalid keyval", 49: "Conflicting accesses to window ",
    50: "Wrong synchronization of RMA calls ", 51: "Invalid size argument in RMA call",
    52: "Invalid displacement argument in RMA call ", 53: "Invalid assert argument",
    55: "Target memory is not contained within the window", 56: "Memory cannot be attached",
    57: "Memory cannot be shared", 58: "Incorrect window flavor", 75: "Invalid MPI_Session handle",
    76: "Process was aborted", 77: "Value is too large to store", 80: "Invalid errhandler",
}


def error_class_of(code: int) -> int:
    """The error class of an error code: the code itself for mpisim's codes; MPICH keeps it in the low 7 bits."""
    return code if 0 <= code < 128 else code & 0x7F


def error_string(code: int) -> str:
    """MPICH's string for error *code* (``MPI_Error_string``)."""
    return ERROR_STRINGS.get(error_class_of(code), "Unknown error class")


class MpisimError(Exception):
    """Base class of every error mpisim raises on purpose."""


class ConfigError(MpisimError, ValueError):
    """Invalid user input, located by a dotted *path* (``topology.inter.bandwidth``).

    ``str(err)`` is the one-line message the CLI prints: ``path: message``, prefixed by
    the file name when :meth:`in_file` has been called.
    """

    def __init__(self, message: str, path: str = "", file: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.file = file

    def at(self, prefix: str) -> ConfigError:
        """Return the same error with *prefix* prepended to its field path."""
        path = f"{prefix}.{self.path}" if self.path and prefix else (prefix or self.path)
        return type(self)(self.message, path, self.file)

    def in_file(self, file: str) -> ConfigError:
        """Return the same error attributed to *file*."""
        return type(self)(self.message, self.path, file)

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        origin = f"{self.file}: " if self.file else ""
        return f"{origin}{where}{self.message}"


class UnitError(ConfigError):
    """A value with units could not be parsed (``'10 Gbsp' is not a bandwidth ...``)."""


class TopologyError(ConfigError):
    """A topology that cannot exist (0 nodes, negative bandwidth, NICs not matching rails)."""


class UnknownAlgorithm(ConfigError):
    """A (collective, algorithm) pair that is not in the registry."""


class MPIError(MpisimError, RuntimeError):
    """An error of the simulated MPI program, named as MPI names it.

    ``ranks`` and ``calls`` say which ranks it concerns and the call each was in, where known
    (a deadlock fills both); ``--json`` reports them with the message.

    It is mpi4py's ``MPI.Exception`` too: a RuntimeError with ``Get_error_class()``,
    ``Get_error_code()``, ``Get_error_string()`` and the ``error_class``, ``error_code``,
    ``error_string`` attributes. The class is the subclass's MPI error class
    (:attr:`mpi_class`: ``MPI_ERR_RANK`` for :class:`InvalidRankError`, ...), the
    ``error_class=`` argument's, or ``MPI_ERR_OTHER``; the code is the class. As in mpi4py,
    ``MPIError(code)`` (an int alone: ``MPI.Exception(MPI.ERR_RANK)``) is the exception of that
    code, whose ``str`` is MPI's string for it, and compares equal to the code.
    """

    ranks: list[int]
    calls: list[str]
    #: The MPI error class of this kind of error, MPICH's value (``MPI_ERR_OTHER``).
    mpi_class: int = 15

    def __init__(self, *args: object, error_class: int | None = None) -> None:
        if not args and type(self) is MPIError:
            args = (0,)  # MPI.Exception() is MPI.Exception(MPI.SUCCESS), as in mpi4py
        super().__init__(*args)
        self.ranks = []
        self.calls = []
        code = args[0] if len(args) == 1 and isinstance(args[0], int) and not isinstance(args[0], bool) else None
        self._code: int | None = code
        self._class = error_class if error_class is not None else (
            error_class_of(code) if code is not None else type(self).mpi_class)

    # ---- mpi4py's MPI.Exception

    @property
    def error_code(self) -> int:
        """The MPI error code (``MPI_ERR_*``; mpisim's codes are their classes)."""
        return self._code if self._code is not None else self._class

    @property
    def error_class(self) -> int:
        """The MPI error class, MPICH's value (``MPI.ERR_RANK`` ...)."""
        return self._class

    @property
    def error_string(self) -> str:
        """MPI's string for the class, then (for mpisim's errors) the message, as MPICH's error stack follows it."""
        text = error_string(self.error_code)
        return text if self._code is not None or not self.args else f"{text}, error stack:\n{self.args[0]}"

    def Get_error_code(self) -> int:
        return self.error_code

    def Get_error_class(self) -> int:
        return self.error_class

    def Get_error_string(self) -> str:
        return self.error_string

    def __str__(self) -> str:
        return error_string(self._code) if self._code is not None else super().__str__()

    def __repr__(self) -> str:
        return f"MPI.Exception({self._code})" if self._code is not None else super().__repr__()

    def __int__(self) -> int:
        return self.error_code

    def __bool__(self) -> bool:
        return self.error_code != 0

    def __hash__(self) -> int:
        return hash(self.error_code)

    def __eq__(self, other: object) -> bool:
        """Equal to its code (``err == MPI.ERR_RANK``), and an exception made from a code to one of the same code."""
        if isinstance(other, int):
            return self.error_code == other
        if isinstance(other, MPIError) and self._code is not None and other._code is not None:
            return self._code == other._code
        return self is other

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __lt__(self, other: int) -> bool:
        return self.error_code < int(other)

    def __le__(self, other: int) -> bool:
        return self.error_code <= int(other)

    def __gt__(self, other: int) -> bool:
        return self.error_code > int(other)

    def __ge__(self, other: int) -> bool:
        return self.error_code >= int(other)


class TruncationError(MPIError):
    """A message longer than the receive posted for it (MPI_ERR_TRUNCATE)."""

    mpi_class = 14  # MPI_ERR_TRUNCATE


class InvalidRankError(MPIError):
    """A destination or source outside the communicator (MPI_ERR_RANK)."""

    mpi_class = 6  # MPI_ERR_RANK


class InvalidTagError(MPIError):
    """A negative tag other than ANY_TAG (MPI_ERR_TAG)."""

    mpi_class = 4  # MPI_ERR_TAG


class InvalidRootError(MPIError):
    """A collective's root outside the communicator (MPI_ERR_ROOT)."""

    mpi_class = 7  # MPI_ERR_ROOT


class InvalidCommunicatorError(MPIError):
    """A call on ``COMM_NULL`` or a freed communicator, or freeing ``COMM_WORLD`` (MPI_ERR_COMM)."""

    mpi_class = 5  # MPI_ERR_COMM


class InvalidArgumentError(MPIError):
    """An argument MPI refuses that has no more precise class (MPI_ERR_ARG)."""

    mpi_class = 12  # MPI_ERR_ARG


class CollectiveMismatchError(MPIError):
    """Ranks of one communicator entered different collectives, roots or sizes."""


class DeadlockError(MPIError):
    """Ranks are still blocked and no event can make progress."""


class UnstartedCallError(MPIError):
    """A program made a blocking call without ``yield from``, so it never ran (see mpisim.mpi.pending)."""


class LimitReached(MPIError):
    """A run reached one of its limits (``limits: {simulated_time, events, wall_time}``) and was stopped.

    ``limit`` names the key; the message says where the run was and, from the MPI layer, where
    every unfinished rank was.
    """

    limit: str = ""


class WorkerLost(LimitReached):
    """A sweep's worker process died (killed by a signal or by the system's out-of-memory killer) before its point finished.

    Reported as a run that was stopped (one line, exit 1), naming the sweep point it was
    running; the points finished before it are kept for ``--resume``.
    """

    limit = "worker"


class ProgramError(MPIError):
    """A user's program raised an exception on one rank; the message shows that rank's frames in the user's files."""


_CONTROL = {code: f"\\x{code:02x}" for code in (*range(0x00, 0x09), *range(0x0b, 0x20), 0x7f)}


def printable(text: str) -> str:
    """*text* with control characters other than newline and tab shown as ``\\x1b``.

    What a program or a file says reaches the user's terminal: a raw ESC sequence there could
    recolour, retitle or clear it, or hide the lines around it.
    """
    return text.translate(_CONTROL)


def describe_exception(exc: BaseException) -> str:
    """``ValueError: bad value``, safe for a terminal, even for an exception whose ``__str__`` raises."""
    try:
        message = str(exc)
    except Exception as err:  # the user's __str__ may do anything
        message = f"<str() of this exception raised {type(err).__name__}>"
    return printable(f"{type(exc).__name__}: {message}")


def caused_by_memory_error(exc: BaseException | None) -> bool:
    """Whether *exc* is, or was caused while handling, a MemoryError.

    Running out of memory inside a simulated rank can surface as another error: SimPy's
    process machinery fails on the traceback-less MemoryError Python preallocates
    (``'NoneType' object has no attribute 'tb_next'``). The chain still holds the MemoryError.
    """
    # NOTE: nothing allocated here (no set of seen ids): the heap may be exhausted. A chain
    # longer than this is a cycle or not ours.
    for _ in range(64):
        if exc is None:
            return False
        if isinstance(exc, MemoryError):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def release_tracebacks(exc: BaseException | None) -> None:
    """Drop the tracebacks of *exc* and its chain: their frames hold the run that ran out of memory."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc.__traceback__ = None
        exc = exc.__cause__ or exc.__context__
