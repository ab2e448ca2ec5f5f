"""Exceptions shared by every layer of mpisim.

Two families matter to users, and the CLI maps them to exit codes:

* :class:`ConfigError` -- bad input (YAML, schema, units, impossible topology, unknown
  algorithm). It carries the dotted path to the offending field so the one-line message
  can say exactly where the problem is. Exit code 2.
* :class:`MPIError` -- the simulated program did something MPI forbids (deadlock,
  truncation, invalid rank, mismatched collectives). Exit code 1.
"""

from __future__ import annotations


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


class MPIError(MpisimError):
    """An error of the simulated MPI program, named as MPI names it.

    ``ranks`` and ``calls`` say which ranks it concerns and the call each was in, where known
    (a deadlock fills both); ``--json`` reports them with the message.
    """

    ranks: list[int]
    calls: list[str]

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self.ranks = []
        self.calls = []


class TruncationError(MPIError):
    """A message longer than the receive posted for it (MPI_ERR_TRUNCATE)."""


class InvalidRankError(MPIError):
    """A destination or source outside the communicator (MPI_ERR_RANK)."""


class InvalidTagError(MPIError):
    """A negative tag other than ANY_TAG (MPI_ERR_TAG)."""


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


class ProgramError(MPIError):
    """A user's program raised an exception on one rank; the message shows that rank's frames in the user's files."""
