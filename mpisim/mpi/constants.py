"""MPI's predefined constants, with MPICH's values: what a program sees under ``mpiexec``.

A program may print a constant, store it in a message, compare a ``Status`` field with it
or branch on its sign, so the simulated MPI uses the very numbers MPICH's ``mpi.h`` defines
(and mpi4py shows as ``MPI.ANY_SOURCE`` ...), for both APIs: the generator ``Comm`` and the
``MPI`` module of unchanged mpi4py programs. Note the two that trip people up: in MPICH
``PROC_NULL`` is -1 and ``ANY_SOURCE`` is -2, while ``ANY_TAG`` is also -1 (a source and a
tag never share a field, so the values may coincide).

Attribute keys (``TAG_UB``, ``IO``, ...) are keys, as in MPI: ``comm.Get_attr(TAG_UB)``
returns the largest tag, MPICH's 2**29 - 1 (:data:`MAX_TAG`). A tag outside ``0..MAX_TAG``
is ``MPI_ERR_TAG``, as under MPICH.

``tests/compat/test_constants.py`` prints every name here under the real mpi4py and MPICH and
under mpisim, and compares.
"""

from __future__ import annotations

# ------------------------------------------------------------------ ranks, tags, wildcards

#: A receive from any source (``MPI_ANY_SOURCE``).
ANY_SOURCE = -2
#: A receive with any tag (``MPI_ANY_TAG``).
ANY_TAG = -1
#: The null process: a send to it or a receive from it completes at once and moves nothing.
PROC_NULL = -1
#: The root group's own rank in an inter-communicator collective (not simulated; the value is MPICH's).
ROOT = -3
#: "No value": ``split``'s color that leaves a rank out, ``Get_count`` of a partial element.
UNDEFINED = -32766
#: The largest tag MPICH accepts (the value of the ``TAG_UB`` attribute).
MAX_TAG = 2**29 - 1

# ------------------------------------------------------------------ attribute keys (comm.Get_attr)

TAG_UB = 0x64400001
IO = 0x64400005
WTIME_IS_GLOBAL = 0x64400007
UNIVERSE_SIZE = 0x64400009
LASTUSEDCODE = 0x6440000B
APPNUM = 0x6440000D
KEYVAL_INVALID = 0x24000000


def attribute(keyval: int) -> int | None:
    """The value of predefined attribute *keyval* on any communicator, as MPICH gives it under ``mpiexec``.

    ``IO`` is ``ANY_SOURCE`` (every rank may do I/O); ``WTIME_IS_GLOBAL`` is 1 because every
    simulated rank reads the one simulated clock (MPICH says 0 for real, unsynchronized
    clocks); ``UNIVERSE_SIZE`` is unset (None), as ``mpiexec`` leaves it.
    """
    return {TAG_UB: MAX_TAG, IO: ANY_SOURCE, WTIME_IS_GLOBAL: 1, APPNUM: 0, LASTUSEDCODE: ERR_LASTCODE}.get(keyval)


# ------------------------------------------------------------------ error classes (MPI_ERR_*)

# MPICH's values (mpi.h); mpisim.errors.ERROR_STRINGS holds MPICH's string for each. The
# errors mpisim raises carry theirs (InvalidRankError: ERR_RANK, TruncationError: ERR_TRUNCATE...).
SUCCESS = 0
ERR_BUFFER, ERR_COUNT, ERR_TYPE, ERR_TAG, ERR_COMM, ERR_RANK, ERR_ROOT, ERR_GROUP = 1, 2, 3, 4, 5, 6, 7, 8
ERR_OP, ERR_TOPOLOGY, ERR_DIMS, ERR_ARG, ERR_UNKNOWN, ERR_TRUNCATE, ERR_OTHER, ERR_INTERN = 9, 10, 11, 12, 13, 14, 15, 16
ERR_IN_STATUS, ERR_PENDING, ERR_REQUEST, ERR_ACCESS, ERR_AMODE, ERR_BAD_FILE = 17, 18, 19, 20, 21, 22
ERR_CONVERSION, ERR_DUP_DATAREP, ERR_FILE_EXISTS, ERR_FILE_IN_USE, ERR_FILE, ERR_INFO = 23, 24, 25, 26, 27, 28
ERR_INFO_KEY, ERR_INFO_VALUE, ERR_INFO_NOKEY, ERR_IO, ERR_NAME, ERR_NO_MEM = 29, 30, 31, 32, 33, 34
ERR_NOT_SAME, ERR_NO_SPACE, ERR_NO_SUCH_FILE, ERR_PORT, ERR_QUOTA, ERR_READ_ONLY = 35, 36, 37, 38, 39, 40
ERR_SERVICE, ERR_SPAWN, ERR_UNSUPPORTED_DATAREP, ERR_UNSUPPORTED_OPERATION, ERR_WIN = 41, 42, 43, 44, 45
ERR_BASE, ERR_LOCKTYPE, ERR_KEYVAL, ERR_RMA_CONFLICT, ERR_RMA_SYNC, ERR_SIZE, ERR_DISP = 46, 47, 48, 49, 50, 51, 52
ERR_ASSERT, ERR_RMA_RANGE, ERR_RMA_ATTACH, ERR_RMA_SHARED, ERR_RMA_FLAVOR = 53, 55, 56, 57, 58
ERR_SESSION, ERR_PROC_ABORTED, ERR_VALUE_TOO_LARGE, ERR_ERRHANDLER = 75, 76, 77, 80
ERR_LASTCODE = 0x3FFFFFFF
#: Classes MPICH does not have: mpi4py gives them ERR_UNKNOWN's or ERR_LASTCODE's value, as here.
ERR_REVOKED = ERR_PROC_FAILED = ERR_PROC_FAILED_PENDING = ERR_UNKNOWN
ERR_ABI = ERR_LASTCODE

# ------------------------------------------------------------------ comparisons, threads, topologies

IDENT, CONGRUENT, SIMILAR, UNEQUAL = 0, 1, 2, 3
THREAD_SINGLE, THREAD_FUNNELED, THREAD_SERIALIZED, THREAD_MULTIPLE = 0, 1, 2, 3
GRAPH, CART, DIST_GRAPH = 1, 2, 3
COMM_TYPE_SHARED = 1
COMM_TYPE_HW_GUIDED, COMM_TYPE_HW_UNGUIDED, COMM_TYPE_RESOURCE_GUIDED = 2, 3, 4  # MPI 4 (MPICH's values)

# ------------------------------------------------------------------ the library

#: The MPI standard version the constants follow (MPI 4.1, as MPICH 4.2 and later declare).
VERSION, SUBVERSION = 4, 1
BSEND_OVERHEAD = 96
MAX_PROCESSOR_NAME = 128
MAX_ERROR_STRING = 512

__all__ = [name for name in globals() if name.isupper()] + ["attribute"]
