"""mpi4py's ``MPI`` module, over the simulated MPI: what ``from mpi4py import MPI`` gives a program under ``mpisim exec``.

The names, signatures and semantics are mpi4py's, so a program written for mpi4py runs
unchanged::

    from mpi4py import MPI
    import numpy as np

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    if rank == 0:
        comm.Send([np.arange(10.0), MPI.DOUBLE], dest=1, tag=7)   # buffer-based, no pickling
    elif rank == 1:
        data = np.empty(10)
        comm.Recv(data, source=0, tag=7)                          # fills the program's array
    total = comm.allreduce(rank, op=MPI.SUM)                     # any picklable object

* lowercase calls (``send, recv, bcast, allreduce, scan, ...``) move Python objects, pickled as
  mpi4py pickles them, so the simulated messages have mpi4py's sizes;
* uppercase calls (``Send, Recv, Bcast, Allreduce, Gatherv, Scan, ...``) move the program's own
  buffers (numpy arrays, bytearray, array.array, mmap; ``[buf, count, MPI.BYTE]`` specs) and
  receive into them, through the same protocols and collective algorithms as every other
  mpisim workload (:mod:`mpisim.compat.buffers`);
* blocking calls block: each rank runs in its own greenlet (:mod:`mpisim.compat.ranks`);
* ``MPI.Wtime()`` is the simulated clock, ``Get_processor_name()`` the simulated node.

``MPI.COMM_WORLD`` is one object shared by the program's module code on every rank; each
call resolves it to the calling rank's communicator. A name mpisim does not simulate raises
:class:`~mpisim.compat.ranks.UnsupportedCall` naming the call and the rank.

One module per concept, as mpi4py's own sources: :mod:`.environment` (lifecycle, clock,
errors), :mod:`.comm` with :mod:`.p2p`, :mod:`.collective` and :mod:`.topology`,
:mod:`.request`, :mod:`.status`, :mod:`.op`, :mod:`.group`, :mod:`.datatype`; this module
gathers their names into one namespace, as ``mpi4py.MPI`` is one.

**Lifecycle, per rank, as mpi4py and MPICH have it.** ``from mpi4py import MPI`` initializes
the rank's MPI (unless ``mpi4py.rc.initialize`` is False: then ``MPI.Init()`` or
``MPI.Init_thread()`` does); ``MPI.Finalize()`` ends it, and ``Is_initialized()`` and
``Is_finalized()`` say where the rank is. A second ``Init`` raises ``MPI.Exception``
(``ERR_OTHER``); an MPI call before ``Init`` or after ``Finalize`` ends the rank with status 1,
as MPICH does, with one line naming the rank, the call and its line.

**Errors.** ``MPI.Exception`` is :class:`~mpisim.errors.MPIError`, a RuntimeError, so
``except MPI.Exception`` catches what mpisim raises (truncation, invalid rank, tag, root,
communicator), and ``Get_error_class()`` says which, with MPICH's ``MPI.ERR_*`` values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mpisim.compat import collectives as _coll
from mpisim.compat.mpi4py import datatype as _datatype
from mpisim.compat.mpi4py.bsend import (  # noqa: F401
    BUFFER_AUTOMATIC,
    Alloc_mem,
    Attach_buffer,
    Detach_buffer,
    Flush_buffer,
    Free_mem,
    Iflush_buffer,
)
from mpisim.compat.mpi4py.comm import (  # noqa: F401
    COMM_NULL,
    COMM_SELF,
    COMM_WORLD,
    Cartcomm,
    Comm,
    Distgraphcomm,
    Graphcomm,
    Intracomm,
    Topocomm,
)
from mpisim.compat.mpi4py.commlock import _comm_lock, _comm_lock_table  # noqa: F401
from mpisim.compat.mpi4py.datatype import DATATYPE_NULL, Datatype, _typedict  # noqa: F401
from mpisim.compat.mpi4py.distgraph import UNWEIGHTED, WEIGHTS_EMPTY  # noqa: F401
from mpisim.compat.mpi4py.environment import (  # noqa: F401
    ERRHANDLER_NULL,
    ERRORS_ABORT,
    ERRORS_ARE_FATAL,
    ERRORS_RETURN,
    Errhandler,
    Finalize,
    Get_abi_version,
    Get_error_class,
    Get_error_string,
    Get_library_version,
    Get_processor_name,
    Get_version,
    Init,
    Init_thread,
    Is_finalized,
    Is_initialized,
    Is_thread_main,
    Pcontrol,
    Query_thread,
    Wtick,
    Wtime,
    get_vendor,
    unfinalized_ranks,
)
from mpisim.compat.mpi4py.environment import imported as _imported  # noqa: F401 - the package calls it
from mpisim.compat.mpi4py.grequest import Grequest  # noqa: F401
from mpisim.compat.mpi4py.group import GROUP_EMPTY, GROUP_NULL, Group  # noqa: F401
from mpisim.compat.mpi4py.info import INFO_NULL, Get_hw_resource_info, Info  # noqa: F401
from mpisim.compat.mpi4py.intercomm import Intercomm  # noqa: F401
from mpisim.compat.mpi4py.memory import Aint_add, Aint_diff, Get_address, buffer  # noqa: F401
from mpisim.compat.mpi4py.message import MESSAGE_NO_PROC, MESSAGE_NULL, Message  # noqa: F401
from mpisim.compat.mpi4py.msgbuffer import BOTTOM, IN_PLACE  # noqa: F401
from mpisim.compat.mpi4py.op import (  # noqa: F401
    BAND,
    BOR,
    BXOR,
    LAND,
    LOR,
    LXOR,
    MAX,
    MAXLOC,
    MIN,
    MINLOC,
    NO_OP,
    OP_NULL,
    PROD,
    REPLACE,
    SUM,
    Op,
)
from mpisim.compat.mpi4py.persistent import Prequest  # noqa: F401
from mpisim.compat.mpi4py.request import REQUEST_NULL, Request  # noqa: F401
from mpisim.compat.mpi4py.status import Status  # noqa: F401
from mpisim.compat.mpi4py.topology import Compute_dims  # noqa: F401
from mpisim.compat.mpi4py.win import (  # noqa: F401
    LOCK_EXCLUSIVE,
    LOCK_SHARED,
    MODE_NOCHECK,
    MODE_NOPRECEDE,
    MODE_NOPUT,
    MODE_NOSTORE,
    MODE_NOSUCCEED,
    WIN_BASE,
    WIN_CREATE_FLAVOR,
    WIN_DISP_UNIT,
    WIN_FLAVOR_ALLOCATE,
    WIN_FLAVOR_CREATE,
    WIN_FLAVOR_DYNAMIC,
    WIN_FLAVOR_SHARED,
    WIN_MODEL,
    WIN_NULL,
    WIN_SEPARATE,
    WIN_SIZE,
    WIN_UNIFIED,
    Win,
)
from mpisim.compat.ranks import ProgramExit, RankContext, UnsupportedCall  # noqa: F401
from mpisim.compat.unsupported import unsupported as _unsupported
from mpisim.errors import MPIError
from mpisim.mpi import constants as _constants

# ------------------------------------------------------------------ constants (MPICH's values)

# One table for both APIs (mpisim.mpi.constants); these are the names mpi4py shows. (MAX_TAG,
# mpisim's name for the TAG_UB attribute's value, is not one of them.)
_CONSTANTS = (
    "ANY_SOURCE", "ANY_TAG", "APPNUM", "BSEND_OVERHEAD", "CART", "COMM_TYPE_SHARED", "COMM_TYPE_HW_GUIDED",
    "COMM_TYPE_HW_UNGUIDED", "COMM_TYPE_RESOURCE_GUIDED", "CONGRUENT", "DIST_GRAPH",
    "ERR_COMM", "ERR_IN_STATUS", "ERR_LASTCODE", "ERR_OTHER", "ERR_PENDING", "ERR_RANK", "ERR_TAG",
    "ERR_TRUNCATE", "GRAPH", "IDENT", "IO", "KEYVAL_INVALID", "LASTUSEDCODE", "MAX_ERROR_STRING",
    "MAX_PROCESSOR_NAME", "PROC_NULL", "ROOT", "SIMILAR", "SUBVERSION", "SUCCESS", "TAG_UB", "THREAD_FUNNELED",
    "THREAD_MULTIPLE", "THREAD_SERIALIZED", "THREAD_SINGLE", "UNDEFINED", "UNEQUAL", "UNIVERSE_SIZE", "VERSION",
    "WTIME_IS_GLOBAL",
)
globals().update({name: getattr(_constants, name) for name in _CONSTANTS})
# Every error class mpi4py has (ERR_ROOT, ERR_COUNT, ERR_ARG, ...), with MPICH's values.
globals().update({name: getattr(_constants, name) for name in dir(_constants) if name.startswith("ERR_")})

#: MPI's errors are mpisim's: ``except MPI.Exception`` catches truncation, invalid ranks, ...
#: (a RuntimeError, with ``Get_error_class()``, ``error_code``, ``error_string`` ... as in mpi4py;
#: ``MPI.Exception(MPI.ERR_RANK)`` is the exception of that code).
Exception = MPIError

globals().update(_datatype.NAMED)  # MPI.DOUBLE, MPI.INT, MPI.BYTE, ...
globals().update(_datatype.CONSTANTS)  # MPI.ORDER_C, MPI.COMBINER_VECTOR, ...


def __getattr__(name: str) -> Any:
    """Any other name: an error naming the call and the rank (PEP 562)."""
    if name.startswith("__"):
        raise AttributeError(name)
    raise _unsupported(name)


class _Pickle:
    """``MPI.pickle``: mpi4py's pickler settings (protocol 5, as used for every object message)."""

    PROTOCOL = _coll.PICKLE_PROTOCOL
    dumps = staticmethod(lambda obj: _coll.dumps(obj).tobytes())
    loads = staticmethod(lambda data: _coll.loads(np.frombuffer(data, np.uint8)))


pickle = _Pickle()

__all__ = [name for name in globals() if name[:1].isupper() and not name.startswith("_")]
__all__ += ["Exception", "ProgramExit", "get_vendor", "pickle"]
