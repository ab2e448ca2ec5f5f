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

import operator
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from greenlet import getcurrent

from mpisim.compat import buffers as _buffers
from mpisim.compat import collectives as _coll
from mpisim.compat.buffers import DATATYPES as _DATATYPES
from mpisim.compat.buffers import TYPEDICT as _typedict  # noqa: F401 - mpi4py's name
from mpisim.compat.buffers import Datatype
from mpisim.compat.ranks import ProgramExit, RankContext, UnsupportedCall, current, require  # noqa: F401
from mpisim.compat.tracebacks import suspended_at
from mpisim.compat.unsupported import Strict, unsupported
from mpisim.errors import (
    InvalidArgumentError,
    InvalidCommunicatorError,
    MPIError,
    error_class_of,
    error_string,
)
from mpisim.mpi import constants as _constants
from mpisim.mpi import ops as _ops
from mpisim.mpi import payload as _payload
from mpisim.mpi.constants import (
    ANY_SOURCE,
    ANY_TAG,
    CART,
    COMM_TYPE_SHARED,
    CONGRUENT,
    ERR_DIMS,
    ERR_OTHER,
    IDENT,
    PROC_NULL,
    SIMILAR,
    SUBVERSION,
    SUCCESS,
    THREAD_FUNNELED,
    THREAD_MULTIPLE,
    THREAD_SERIALIZED,
    THREAD_SINGLE,
    UNDEFINED,
    UNEQUAL,
    VERSION,
)
from mpisim.mpi.constants import attribute as _attribute
from mpisim.mpi.payload import DataPayload, in_place, split_counts
from mpisim.mpi.request import Status as _SimStatus

# ------------------------------------------------------------------ constants (MPICH's values)

# One table for both APIs (mpisim.mpi.constants); these are the names mpi4py shows. (MAX_TAG,
# mpisim's name for the TAG_UB attribute's value, is not one of them.)
_CONSTANTS = (
    "ANY_SOURCE", "ANY_TAG", "APPNUM", "BSEND_OVERHEAD", "CART", "COMM_TYPE_SHARED", "CONGRUENT", "DIST_GRAPH",
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


IN_PLACE = _payload.IN_PLACE  # the generator API's object: both APIs mean the same by it
BOTTOM = None

globals().update(_DATATYPES)  # MPI.DOUBLE, MPI.INT, MPI.BYTE, ...
DATATYPE_NULL = Datatype("MPI_DATATYPE_NULL", np.uint8)


def _here(call: str) -> RankContext:
    """The calling rank's context; remembers the caller's frame, the line its messages were sent from.

    A call before ``MPI.Init`` or after ``MPI.Finalize`` ends the rank there (:func:`_check_alive`).
    """
    ctx = getattr(getcurrent(), "ctx", None)
    if ctx is None:
        return require(f"MPI.{call}")
    if ctx.cache.get("mpi") != _RUNNING:
        _check_alive(ctx, call)
    ctx.runner.site = sys._getframe(2)
    return ctx


def _alive(call: str) -> None:
    """For calls that need no context otherwise: MPI must be initialized and not finalized on the calling rank."""
    ctx = getattr(getcurrent(), "ctx", None)
    if ctx is not None and ctx.cache.get("mpi") != _RUNNING:
        _check_alive(ctx, call)


_unsupported = unsupported  # MPI.<name> that mpisim does not simulate: an UnsupportedCall naming it and the rank


# ------------------------------------------------------------------ reduction operations


class Op(metaclass=Strict):
    """A reduction operation: numpy's element-wise function for buffers, Python's for objects."""

    def __init__(self, name: str, sim: _ops.Op | None, py: Callable[[Any, Any], Any], commute: bool = True) -> None:
        self.name, self._sim, self._py, self.commute = name, sim, py, commute

    @classmethod
    def Create(cls, function: Callable[..., Any], commute: bool = False) -> Op:
        """A user op: ``function(invec, inoutvec, datatype)`` writes ``invec op inoutvec`` into *inoutvec*.

        As in mpi4py, the buffers it gets are the memory of the operands (read them with
        ``np.frombuffer(invec, dtype=...)``); for objects (lowercase calls) it is called as
        ``function(x, y, None)`` and returns the result.
        """
        def on_arrays(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            out = np.array(b, copy=True)
            function(memoryview(np.ascontiguousarray(a)).cast("B"), memoryview(out).cast("B"),
                     _buffers.datatype_of(out.dtype))
            return out

        def on_objects(x: Any, y: Any) -> Any:
            result = function(x, y, None)
            return y if result is None else result

        return cls("user", _ops.Op(f"user:{getattr(function, '__name__', 'op')}", on_arrays, bool(commute)),
                   on_objects, bool(commute))

    def Is_commutative(self) -> bool:
        """True if the op may be applied in any order."""
        return self.commute

    @property
    def is_commutative(self) -> bool:
        return self.commute

    def Free(self) -> None:
        """Nothing to free."""

    def __call__(self, x: Any, y: Any) -> Any:
        return self._py(x, y)

    def sim(self, call: str) -> _ops.Op:
        """The op as the simulated MPI applies it to arrays."""
        if self._sim is None:
            raise _unsupported(f"{self.name} on buffers in {call}")
        return self._sim

    def __repr__(self) -> str:
        return f"<mpi4py.MPI.Op {self.name}>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise _unsupported(f"Op.{name}")


def _logical(fn: Callable[[Any, Any], Any]) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    return lambda a, b: fn(a, b).astype(np.result_type(a, b))


def _loc(better: Callable[[Any, Any], Any]) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """MAXLOC/MINLOC on (value, index) pairs: the better value, the lower index on a tie."""
    def pick(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        value, index = a.dtype.names[0], a.dtype.names[1]
        take = better(b[value], a[value]) | ((b[value] == a[value]) & (b[index] < a[index]))
        out = a.copy()
        out[take] = b[take]
        return out
    return pick


def _pyloc(better: Callable[[Any, Any], bool]) -> Callable[[Any, Any], Any]:
    def pick(x: Any, y: Any) -> Any:
        (u, i), (v, j) = x, y
        if better(u, v):
            return u, i
        if better(v, u):
            return v, j
        return (v, j) if j < i else (u, i)
    return pick


SUM = Op("MPI_SUM", _ops.SUM, operator.add)
PROD = Op("MPI_PROD", _ops.PROD, operator.mul)
MAX = Op("MPI_MAX", _ops.MAX, lambda x, y: y if y > x else x)
MIN = Op("MPI_MIN", _ops.MIN, lambda x, y: y if y < x else x)
LAND = Op("MPI_LAND", _ops.Op("land", _logical(np.logical_and)), lambda x, y: x and y)
LOR = Op("MPI_LOR", _ops.Op("lor", _logical(np.logical_or)), lambda x, y: x or y)
LXOR = Op("MPI_LXOR", _ops.Op("lxor", _logical(np.logical_xor)), lambda x, y: bool(x) != bool(y))
BAND = Op("MPI_BAND", _ops.Op("band", np.bitwise_and), operator.and_)
BOR = Op("MPI_BOR", _ops.Op("bor", np.bitwise_or), operator.or_)
BXOR = Op("MPI_BXOR", _ops.Op("bxor", np.bitwise_xor), operator.xor)
MAXLOC = Op("MPI_MAXLOC", _ops.Op("maxloc", _loc(np.greater)), _pyloc(operator.gt))
MINLOC = Op("MPI_MINLOC", _ops.Op("minloc", _loc(np.less)), _pyloc(operator.lt))
REPLACE = Op("MPI_REPLACE", _ops.Op("replace", lambda a, b: np.array(a, copy=True), False), lambda x, y: y, False)
NO_OP = Op("MPI_NO_OP", _ops.Op("no_op", lambda a, b: np.array(b, copy=True), False), lambda x, y: x, False)
OP_NULL = Op("MPI_OP_NULL", None, lambda x, y: _unsupported("OP_NULL"), True)


# ------------------------------------------------------------------ status and requests


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
        raise _unsupported(f"Status.{name}")


def _copy_status(into: Status | None, source: Any) -> None:
    if into is not None and source is not None:
        into.source, into.tag, into.count, into.nbytes = source.source, source.tag, source.count, source.nbytes


class Request(metaclass=Strict):
    """A non-blocking operation: ``Wait, Test``, the class methods ``Waitall, Waitany, Testall``.

    The lowercase forms (``wait, test, waitall``) return the received object. A completed
    request becomes ``MPI.REQUEST_NULL``, as in mpi4py.
    """

    def __init__(self, request: Any = None, *, decode: Callable[[Any], Any] | None = None,
                 after: Callable[[], None] | None = None) -> None:
        if isinstance(request, Request):
            request, decode, after = request._sim, request._decode, request._after
        self._sim, self._decode, self._after = request, decode, after

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Request) and other._sim is self._sim

    def __hash__(self) -> int:
        return id(self._sim)

    def __bool__(self) -> bool:
        return self._sim is not None

    def _done(self, value: Any) -> Any:
        self._sim = None
        if self._after is not None:
            self._after()
        return self._decode(value) if self._decode is not None else value

    def Wait(self, status: Status | None = None) -> bool:
        """Wait for the operation to complete (``MPI_Wait``)."""
        self.wait(status)
        return True

    def wait(self, status: Status | None = None) -> Any:
        """Wait and return the received object (``None`` for a send)."""
        ctx = _here("Request.Wait")
        if self._sim is None:
            return None
        sim = self._sim
        value = ctx.block(ctx.comm.wait(sim))
        _copy_status(status, sim.status)
        return self._done(value)

    def Test(self, status: Status | None = None) -> bool:
        """True if the operation has completed (``MPI_Test``); never waits."""
        return self.test(status)[0]

    def test(self, status: Status | None = None) -> tuple[bool, Any]:
        """``(flag, object)``: the received object once complete."""
        ctx = _here("Request.Test")
        ctx.enter()
        if self._sim is None:
            return True, None
        sim = self._sim
        done, value = sim.test()
        if not done:
            ctx.poll()
            return False, None
        _copy_status(status, sim.status)
        return True, self._done(value)

    def Get_status(self, status: Status | None = None) -> bool:
        """True if complete, without completing it."""
        return self._sim is None or self._sim.triggered

    def Free(self) -> None:
        """Forget the request (the operation still completes)."""
        self._sim = None

    def Cancel(self) -> None:
        raise _unsupported("Request.Cancel")

    # ---- many requests at once

    @staticmethod
    def _wait_many(requests: Sequence[Request], statuses: list[Status] | None) -> list[Any]:
        ctx = _here("Request.Waitall")
        live = [r._sim for r in requests if r is not None and r._sim is not None]
        if live:
            ctx.block(ctx.comm.waitall(live))
        values = []
        for i, req in enumerate(requests):
            if req is None or req._sim is None:
                values.append(None)
                continue
            sim = req._sim
            if statuses is not None and i < len(statuses):
                _copy_status(statuses[i], sim.status)
            values.append(req._done(sim.outcome()))
        return values

    @classmethod
    def Waitall(cls, requests: Sequence[Request], statuses: list[Status] | None = None) -> bool:
        """Wait for every request (``MPI_Waitall``)."""
        cls._wait_many(requests, statuses)
        return True

    @classmethod
    def waitall(cls, requests: Sequence[Request], statuses: list[Status] | None = None) -> list[Any]:
        """Wait for every request; return the received objects in order."""
        return cls._wait_many(requests, statuses)

    @classmethod
    def Waitany(cls, requests: Sequence[Request], status: Status | None = None) -> int:
        """Wait for one request to complete; return its index (``MPI.UNDEFINED`` if none is active)."""
        return cls.waitany(requests, status)[0]

    @classmethod
    def waitany(cls, requests: Sequence[Request], status: Status | None = None) -> tuple[int, Any]:
        """``(index, object)`` of the first request to complete."""
        ctx = _here("Request.Waitany")
        active = [(i, r) for i, r in enumerate(requests) if r is not None and r._sim is not None]
        if not active:
            return UNDEFINED, None
        index, _ = ctx.block(ctx.comm.waitany([r._sim for _, r in active]))
        i, req = active[index]
        sim = req._sim
        _copy_status(status, sim.status)
        return i, req._done(sim.outcome())

    @classmethod
    def Waitsome(cls, requests: Sequence[Request], statuses: list[Status] | None = None) -> list[int] | None:
        """Wait for at least one; return the indices of all that have completed."""
        first = cls.Waitany(requests)
        if first == UNDEFINED:
            return None
        done = [first]
        for i, req in enumerate(requests):
            if req is not None and req._sim is not None and req._sim.triggered:
                req._done(req._sim.outcome())
                done.append(i)
        return sorted(done)

    @classmethod
    def Testall(cls, requests: Sequence[Request], statuses: list[Status] | None = None) -> bool:
        """True (and all completed) if every request has completed; never waits."""
        return cls.testall(requests, statuses)[0]

    @classmethod
    def testall(cls, requests: Sequence[Request], statuses: list[Status] | None = None) -> tuple[bool, list[Any] | None]:
        ctx = _here("Request.Testall")
        ctx.enter()
        if all(r is None or r._sim is None or r._sim.triggered for r in requests):
            return True, cls._wait_many(requests, statuses)
        ctx.poll()
        return False, None

    @classmethod
    def Testany(cls, requests: Sequence[Request], status: Status | None = None) -> tuple[int, bool]:
        """``(index, flag)``: a completed request's index, if any."""
        ctx = _here("Request.Testany")
        ctx.enter()
        for i, req in enumerate(requests):
            if req is not None and req._sim is not None and req._sim.triggered:
                _copy_status(status, req._sim.status)
                req._done(req._sim.outcome())
                return i, True
        idle = not any(r is not None and r._sim is not None for r in requests)
        if not idle:
            ctx.poll()
        return UNDEFINED, idle

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise _unsupported(f"Request.{name}")


REQUEST_NULL = Request()


# ------------------------------------------------------------------ communicators


def _obj(value: Any) -> Any:
    return _coll.loads(value)


def _refused(err: _buffers.BufferSpecError, call: str) -> Exception:
    """A buffer mpi4py refuses, as mpi4py refuses it (BufferError, ValueError or TypeError), naming the rank and the call."""
    ctx = current()
    return err.raises(f"rank {ctx.rank if ctx else '?'}: {call}: {err}")


def _spec(buf: Any, call: str, **kw: Any) -> _buffers.Spec:
    try:
        return _buffers.parse(buf, **kw)
    except _buffers.BufferSpecError as err:
        raise _refused(err, call) from None


def _array(buf: Any, call: str) -> np.ndarray:
    """The elements of a (non-vector) buffer spec; a contiguous numpy array is taken as it is."""
    # NOTE: the common case first, without building a Spec: this runs for every Send.
    if buf.__class__ is np.ndarray and buf.flags.c_contiguous:
        return buf if buf.ndim == 1 else buf.reshape(-1)
    return _spec(buf, call).array


def _bytes(buf: Any, call: str) -> np.ndarray:
    """A point-to-point buffer as its bytes: MPI matches messages by bytes, whatever the types on each side."""
    return _array(buf, call).view(np.uint8)


def _recv_array(buf: Any, call: str, **kw: Any) -> np.ndarray:
    if buf.__class__ is np.ndarray and buf.flags.c_contiguous and buf.flags.writeable and not kw:
        return buf if buf.ndim == 1 else buf.reshape(-1)
    spec = _spec(buf, call, **kw)
    try:
        return _buffers.writable(spec, call)
    except _buffers.BufferSpecError as err:
        raise _refused(err, call) from None


def _send_array(buf: Any, call: str) -> Any:
    """A send buffer specification as a numpy view, or ``IN_PLACE`` as it is."""
    return buf if buf is IN_PLACE else _array(buf, call)


class Comm(metaclass=Strict):
    """A communicator: mpi4py's ``Comm`` over the calling rank's simulated communicator.

    ``MPI.COMM_WORLD`` and ``MPI.COMM_SELF`` resolve to the calling rank's handle on each
    call; communicators made by ``Split``, ``Dup`` or ``Create_cart`` belong to the rank that
    made them. ``Intracomm(comm)`` (and a subclass of it) wraps the same communicator.
    """

    def __init__(self, comm: Any = None) -> None:
        if isinstance(comm, Comm):
            self._fixed, self._which = comm._fixed, comm._which
            if isinstance(comm, Cartcomm) and isinstance(self, Cartcomm):
                self._dims, self._periods = comm._dims, comm._periods
        else:
            self._fixed, self._which = comm, None

    # ---- which simulated communicator

    @property
    def _c(self) -> Any:
        fixed = self._fixed
        if fixed is not None:
            return fixed
        ctx = require("MPI.Comm")
        if self._which == "world":
            return ctx.comm
        if self._which == "self":
            mine = ctx.cache.get("self")
            if mine is None:
                mine = ctx.cache["self"] = ctx.comm.sub([ctx.comm.rank], label="COMM_SELF")
            return mine
        raise InvalidCommunicatorError(f"rank {ctx.rank}: invalid communicator (MPI.COMM_NULL)")

    def _on(self, ctx: RankContext) -> Any:
        """:attr:`_c` for a caller that already holds its rank's context (the hot paths)."""
        fixed = self._fixed
        if fixed is not None:
            return fixed
        return ctx.comm if self._which == "world" else self._c

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Comm):
            return NotImplemented
        if (self._fixed is None and self._which is None) or (other._fixed is None and other._which is None):
            return (self._fixed is None and self._which is None) and (other._fixed is None and other._which is None)
        a, b = self._c, other._c
        return a.context == b.context and a.group == b.group

    def __hash__(self) -> int:
        return hash(self._which) if self._fixed is None else hash((self._fixed.context, self._fixed.group))

    def __bool__(self) -> bool:
        return not (self._fixed is None and self._which is None)

    def __repr__(self) -> str:
        return f"<mpi4py.MPI.{type(self).__name__} {self._which or ''}>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_fixed", "_which", "_dims", "_periods"):
            raise AttributeError(name)
        raise _unsupported(f"Comm.{name}")

    # ---- identity

    def Get_rank(self) -> int:
        """This rank's number in the communicator."""
        _alive("Comm.Get_rank")
        return self._c.rank

    def Get_size(self) -> int:
        """Number of ranks in the communicator."""
        _alive("Comm.Get_size")
        return self._c.size

    @property
    def rank(self) -> int:
        _alive("Comm.rank")
        return self._c.rank

    @property
    def size(self) -> int:
        _alive("Comm.size")
        return self._c.size

    def Get_name(self) -> str:
        """``MPI_COMM_WORLD``, ``MPI_COMM_SELF`` or the name given with ``Set_name``."""
        ctx = _here("Comm.Get_name")
        names = ctx.cache.setdefault("names", {})
        return names.get(id(self._c), {"world": "MPI_COMM_WORLD", "self": "MPI_COMM_SELF"}.get(self._which or "", ""))

    def Set_name(self, name: str) -> None:
        _here("Comm.Set_name").cache.setdefault("names", {})[id(self._c)] = str(name)

    @property
    def name(self) -> str:
        return self.Get_name()

    def Is_inter(self) -> bool:
        return False

    def Is_intra(self) -> bool:
        return True

    is_inter, is_intra = False, True
    #: True for a communicator with a topology (:class:`Cartcomm`).
    is_topo = False

    def Get_topology(self) -> int:
        """The communicator's topology: ``MPI.UNDEFINED`` (none), ``MPI.CART`` for a :class:`Cartcomm`."""
        _alive("Comm.Get_topology")
        return UNDEFINED

    @property
    def topology(self) -> int:
        return self.Get_topology()

    def Get_attr(self, keyval: int) -> Any:
        """The communicator attributes MPI predefines (``TAG_UB``, ``IO``, ``WTIME_IS_GLOBAL``, ``APPNUM``, ...)."""
        _alive("Comm.Get_attr")
        return _attribute(keyval)

    def Compare(self, other: Comm) -> int:
        """``IDENT`` for the same communicator, ``CONGRUENT`` for the same group, else ``UNEQUAL``."""
        a, b = self._c, other._c
        if a.context == b.context and a.group == b.group:
            return IDENT
        return CONGRUENT if a.group == b.group else UNEQUAL

    # ---- new communicators

    def Dup(self, info: Any = None) -> Intracomm:
        """A copy with its own matching context (``MPI_Comm_dup``)."""
        return Intracomm(_here("Comm.Dup").block(self._c.dup()))

    Clone = Dup

    def Split(self, color: int = 0, key: int = 0) -> Intracomm:
        """Partition by *color*, ordered by *key* (``MPI_Comm_split``); ``COMM_NULL`` for ``UNDEFINED``."""
        ctx = _here("Comm.Split")
        new = ctx.block(self._c.split(int(color), int(key)))
        return Intracomm(new) if new is not None else COMM_NULL

    def Split_type(self, split_type: int, key: int = 0, info: Any = None) -> Intracomm:
        """``COMM_TYPE_SHARED``: the ranks on this rank's simulated node."""
        if split_type == UNDEFINED:
            return self.Split(UNDEFINED, key)
        if split_type != COMM_TYPE_SHARED:
            raise _unsupported(f"Comm.Split_type({split_type})")
        c = self._c
        return self.Split(c.node_of(c.rank), key)

    def Get_group(self) -> Group:
        """This communicator's group of processes (``MPI_Comm_group``)."""
        return Group(tuple(self._c.group))

    @property
    def group(self) -> Group:
        return self.Get_group()

    def Create(self, group: Group) -> Intracomm:
        """A communicator of *group*'s members, in the group's order (``MPI_Comm_create``).

        Collective over this communicator: every member calls it with the same group; those
        outside it get ``COMM_NULL``. It is a split: colour 0 inside the group, keyed by the
        position in it.
        """
        mine = self._c.group[self._c.rank]
        if any(member not in self._c.group for member in group._members):
            raise MPIError(f"rank {_here('Comm.Create').rank}: Comm.Create: the group is not a subset of the "
                           "communicator's group")
        if mine not in group._members:
            return self.Split(UNDEFINED, 0)
        return self.Split(0, group._members.index(mine))

    def Create_group(self, group: Group, tag: int = 0) -> Intracomm:
        """A communicator of *group*'s members, called by them only (``MPI_Comm_create_group``)."""
        return Intracomm(_here("Comm.Create_group").block(self._c.create_group(group._members, int(tag))))

    def Free(self) -> None:
        """Release the communicator; it becomes ``COMM_NULL``."""
        if self._which is not None:
            raise InvalidCommunicatorError(f"rank {_here('Comm.Free').rank}: MPI.{self.Get_name()[4:]} cannot be freed")
        self._fixed = None

    def Create_cart(self, dims: Sequence[int], periods: Sequence[bool] | bool | None = None,
                    reorder: bool = False) -> Cartcomm:
        """A Cartesian grid over the first ``prod(dims)`` ranks (``MPI_Cart_create``; ranks keep their order).

        *periods* is one flag per dimension or one for all (``periods=True``), as in mpi4py.
        """
        ctx = _here("Comm.Create_cart")
        dims = [int(d) for d in dims]
        if periods is None or isinstance(periods, bool | int | np.integer):
            periods = [bool(periods)] * len(dims)
        periods = [int(bool(p)) for p in periods]  # MPI's logicals: mpi4py shows them as 0 and 1
        if len(periods) != len(dims):
            raise InvalidArgumentError(f"rank {ctx.rank}: Create_cart: {len(dims)} dims but {len(periods)} periods")
        c = self._c
        n = int(np.prod(dims)) if dims else 1
        if n > c.size:
            raise InvalidArgumentError(f"rank {ctx.rank}: Create_cart: the grid {dims} needs {n} ranks, "
                                       f"the communicator has {c.size}")
        count = ctx.cache["carts"] = ctx.cache.get("carts", 0) + 1
        # MPICH builds the grid with MPI_Comm_split; the members agree on it without messages here.
        new = c.sub(list(range(n)), label=f"cart{count}:{c.context}")
        if new is None:
            return COMM_NULL  # type: ignore[return-value]
        cart = Cartcomm(new)
        cart._dims, cart._periods = dims, periods
        return cart

    def Abort(self, errorcode: int = 0) -> None:
        """End every rank now; ``mpisim exec`` exits with *errorcode* (``MPI_Abort``)."""
        ctx = _here("Comm.Abort")
        ctx.abort(int(errorcode), "")

    # ---- point-to-point, objects

    def send(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Send a picklable object (``MPI_Send`` of its pickle)."""
        ctx = _here("Comm.send")
        ctx.block(self._on(ctx).send(_coll.dumps(obj), dest, tag))

    def ssend(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Synchronous send: returns once the receive has matched."""
        _here("Comm.ssend").block(self._c.ssend(_coll.dumps(obj), dest, tag))

    bsend = rsend = send

    def isend(self, obj: Any, dest: int, tag: int = 0) -> Request:
        """Start sending an object; returns a Request."""
        ctx = _here("Comm.isend")
        ctx.enter()
        return Request(self._c.isend(_coll.dumps(obj), dest, tag))

    def issend(self, obj: Any, dest: int, tag: int = 0) -> Request:
        ctx = _here("Comm.issend")
        ctx.enter()
        return Request(self._c.issend(_coll.dumps(obj), dest, tag))

    ibsend = irsend = isend

    def recv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> Any:
        """Receive and return an object."""
        ctx = _here("Comm.recv")
        value = ctx.block(self._on(ctx).recv(None, source, tag, status))
        return None if source == PROC_NULL else _obj(value)

    def irecv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """Start receiving an object; ``req.wait()`` returns it."""
        ctx = _here("Comm.irecv")
        ctx.enter()
        return Request(self._c.irecv(None, source, tag, Status()), decode=None if source == PROC_NULL else _obj)

    def sendrecv(self, sendobj: Any, dest: int, sendtag: int = 0, recvbuf: Any = None, source: int = ANY_SOURCE,
                 recvtag: int = ANY_TAG, status: Status | None = None) -> Any:
        """Send an object and receive one, at once."""
        ctx = _here("Comm.sendrecv")
        value = ctx.block(self._c.sendrecv(_coll.dumps(sendobj), dest, sendtag, None, source, recvtag, status))
        return None if source == PROC_NULL else _obj(value)

    def probe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> bool:
        """Wait until a matching message has arrived (``MPI_Probe``)."""
        _here("Comm.probe").block(self._c.probe(source, tag, status))
        return True

    Probe = probe

    def iprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> bool:
        """True if a matching message has arrived."""
        ctx = _here("Comm.iprobe")
        ctx.enter()
        found = self._c.iprobe(source, tag, status)
        if not found:
            ctx.poll()
        return found

    Iprobe = iprobe

    # ---- point-to-point, buffers

    def Send(self, buf: Any, dest: int, tag: int = 0) -> None:
        """Send a buffer (``MPI_Send``)."""
        ctx = _here("Comm.Send")
        ctx.block(self._on(ctx).send(_bytes(buf, "Send"), dest, tag))

    Bsend = Rsend = Send

    def Ssend(self, buf: Any, dest: int, tag: int = 0) -> None:
        """Synchronous send of a buffer (``MPI_Ssend``)."""
        _here("Comm.Ssend").block(self._c.ssend(_bytes(buf, "Ssend"), dest, tag))

    def Isend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """Start sending a buffer (``MPI_Isend``)."""
        ctx = _here("Comm.Isend")
        ctx.enter()
        return Request(self._on(ctx).isend(_bytes(buf, "Isend"), dest, tag))

    Ibsend = Irsend = Isend

    def Issend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        ctx = _here("Comm.Issend")
        ctx.enter()
        return Request(self._c.issend(_bytes(buf, "Issend"), dest, tag))

    def Recv(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> None:
        """Receive into the program's buffer (``MPI_Recv``)."""
        ctx = _here("Comm.Recv")
        ctx.block(self._on(ctx).recv(DataPayload(_recv_array(buf, "Recv").view(np.uint8), writable=True), source, tag, status))

    def Irecv(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """Start receiving into the program's buffer (``MPI_Irecv``)."""
        ctx = _here("Comm.Irecv")
        ctx.enter()
        return Request(self._on(ctx).irecv(DataPayload(_recv_array(buf, "Irecv").view(np.uint8), writable=True), source, tag,
                                           Status()))

    def Sendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None, source: int = ANY_SOURCE,
                 recvtag: int = ANY_TAG, status: Status | None = None) -> None:
        """Send a buffer and receive into another at once (``MPI_Sendrecv``)."""
        ctx = _here("Comm.Sendrecv")
        ctx.block(self._c.sendrecv(_bytes(sendbuf, "Sendrecv"), dest, sendtag,
                                   DataPayload(_recv_array(recvbuf, "Sendrecv").view(np.uint8), writable=True), source, recvtag, status))

    def Sendrecv_replace(self, buf: Any, dest: int, sendtag: int = 0, source: int = ANY_SOURCE,
                         recvtag: int = ANY_TAG, status: Status | None = None) -> None:
        """Send a buffer and receive into the same buffer (``MPI_Sendrecv_replace``)."""
        ctx = _here("Comm.Sendrecv_replace")
        array = _recv_array(buf, "Sendrecv_replace").view(np.uint8)
        ctx.block(self._c.sendrecv(array.copy(), dest, sendtag, DataPayload(array, writable=True), source, recvtag,
                                   status))

    # ---- collectives, objects

    def barrier(self) -> None:
        """Wait until every rank has entered (``MPI_Barrier``)."""
        _here("Comm.barrier").block(self._c.barrier())

    Barrier = barrier

    def bcast(self, obj: Any, root: int = 0) -> Any:
        """Return root's object on every rank."""
        return _here("Comm.bcast").block(_coll.bcast_obj(self._c, obj, root))

    def gather(self, sendobj: Any, root: int = 0) -> list[Any] | None:
        """Return every rank's object, in rank order, at root (``None`` elsewhere)."""
        return _here("Comm.gather").block(_coll.gather_obj(self._c, sendobj, root))

    def scatter(self, sendobj: Any, root: int = 0) -> Any:
        """Return item *rank* of root's sequence."""
        return _here("Comm.scatter").block(_coll.scatter_obj(self._c, sendobj, root))

    def allgather(self, sendobj: Any) -> list[Any]:
        """Return every rank's object, in rank order, on every rank."""
        return _here("Comm.allgather").block(_coll.allgather_obj(self._c, sendobj))

    def alltoall(self, sendobj: Sequence[Any]) -> list[Any]:
        """Send item j to rank j; return the items received, in rank order."""
        return _here("Comm.alltoall").block(_coll.alltoall_obj(self._c, sendobj))

    def reduce(self, sendobj: Any, op: Op = SUM, root: int = 0) -> Any:
        """Reduce every rank's object with *op* (in rank order) at root."""
        op = _as_op(op)
        return _here("Comm.reduce").block(_coll.reduce_obj(self._c, sendobj, op, op.commute, root))

    def allreduce(self, sendobj: Any, op: Op = SUM) -> Any:
        """Reduce every rank's object with *op*; every rank gets the result (reduce, then bcast)."""
        ctx = _here("Comm.allreduce")
        op = _as_op(op)
        result = ctx.block(_coll.reduce_obj(self._c, sendobj, op, op.commute, 0))
        return ctx.block(_coll.bcast_obj(self._c, result, 0))

    def scan(self, sendobj: Any, op: Op = SUM) -> Any:
        """Return the reduction of ranks 0..rank's objects with *op*, in rank order (``MPI_Scan``)."""
        return _here("Comm.scan").block(_coll.scan_obj(self._c, sendobj, _as_op(op), exclusive=False))

    def exscan(self, sendobj: Any, op: Op = SUM) -> Any:
        """Return the reduction of ranks 0..rank-1's objects with *op* (``MPI_Exscan``); None on rank 0."""
        return _here("Comm.exscan").block(_coll.scan_obj(self._c, sendobj, _as_op(op), exclusive=True))

    # ---- collectives, buffers

    # The generator Comm's uppercase forms do the work (IN_PLACE, filling the receive buffer);
    # here the program's buffer specifications become numpy views and mpi4py's ops mpisim's.

    def Bcast(self, buf: Any, root: int = 0) -> None:
        """Broadcast root's buffer into every rank's (``MPI_Bcast``)."""
        _here("Comm.Bcast").block(self._c.Bcast(_recv_array(buf, "Bcast"), root))

    def Reduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, root: int = 0) -> None:
        """Reduce every rank's buffer into root's *recvbuf* (``MPI_Reduce``; ``IN_PLACE`` at root)."""
        ctx = _here("Comm.Reduce")
        c = self._c
        into = _recv_array(recvbuf, "Reduce") if c.rank == root else None
        ctx.block(c.Reduce(_send_array(sendbuf, "Reduce"), into, _as_op(op).sim("Reduce"), root))

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> None:
        """Reduce every rank's buffer into every rank's *recvbuf* (``MPI_Allreduce``; ``IN_PLACE``)."""
        ctx = _here("Comm.Allreduce")
        ctx.block(self._c.Allreduce(_send_array(sendbuf, "Allreduce"), _recv_array(recvbuf, "Allreduce"),
                                    _as_op(op).sim("Allreduce")))

    def Reduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> None:
        """Reduce, then rank r keeps block r (equal blocks; ``MPI_Reduce_scatter_block``)."""
        ctx = _here("Comm.Reduce_scatter_block")
        ctx.block(self._c.Reduce_scatter_block(_send_array(sendbuf, "Reduce_scatter_block"),
                                               _recv_array(recvbuf, "Reduce_scatter_block"),
                                               _as_op(op).sim("Reduce_scatter_block")))

    def Reduce_scatter(self, sendbuf: Any, recvbuf: Any, recvcounts: Sequence[int] | None = None, op: Op = SUM) -> None:
        """Reduce, then rank r keeps ``recvcounts[r]`` elements (``MPI_Reduce_scatter``).

        Blocks of ``np.array_split`` sizes run the registry's reduce_scatter; other counts are a
        reduce to rank 0 followed by a scatterv.
        """
        ctx = _here("Comm.Reduce_scatter")
        c = self._c
        if sendbuf is IN_PLACE:
            whole = _recv_array(recvbuf, "Reduce_scatter")
            send = whole.copy()
        else:
            send = _array(sendbuf, "Reduce_scatter")
            whole = None
        counts = [int(x) for x in recvcounts] if recvcounts is not None else split_counts(send.size, c.size)
        into = whole[:counts[c.rank]] if whole is not None else _recv_array(recvbuf, "Reduce_scatter")
        op_ = _as_op(op).sim("Reduce_scatter")
        if counts == split_counts(send.size, c.size):
            _payload.fill(in_place(into), ctx.block(c.reduce_scatter(send, op_)))
            return
        total = ctx.block(c.reduce(send, op_, 0))
        full = np.asarray(total).reshape(-1) if c.rank == 0 else None
        ctx.block(_coll.collective(c, "scatterv", "scatterv(root=0)", into.nbytes,
                                   _coll.scatterv(c, full, counts, _coll.offsets(counts), into, 0)))

    def Scan(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> None:
        """Rank r's *recvbuf* gets the reduction of ranks 0..r's buffers (``MPI_Scan``; ``IN_PLACE``)."""
        _scan(_here("Comm.Scan"), self._c, "Scan", sendbuf, recvbuf, op, exclusive=False)

    def Exscan(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> None:
        """Rank r's *recvbuf* gets the reduction of ranks 0..r-1's buffers (``MPI_Exscan``; ``IN_PLACE``).

        Rank 0's *recvbuf* is left as it was (MPI leaves it undefined; MPICH does not touch it).
        """
        _scan(_here("Comm.Exscan"), self._c, "Exscan", sendbuf, recvbuf, op, exclusive=True)

    def Gather(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        """Gather equal blocks into root's *recvbuf* in rank order (``MPI_Gather``)."""
        ctx = _here("Comm.Gather")
        c = self._c
        into = _recv_array(recvbuf, "Gather") if c.rank == root else None
        ctx.block(c.Gather(_send_array(sendbuf, "Gather"), into, root))

    def Scatter(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        """Scatter equal blocks of root's *sendbuf*, block r to rank r (``MPI_Scatter``)."""
        ctx = _here("Comm.Scatter")
        c = self._c
        send = _array(sendbuf, "Scatter") if c.rank == root else None
        into = IN_PLACE if recvbuf is IN_PLACE else _recv_array(recvbuf, "Scatter")
        ctx.block(c.Scatter(send, into, root))

    def Allgather(self, sendbuf: Any, recvbuf: Any) -> None:
        """Gather equal blocks into every rank's *recvbuf* (``MPI_Allgather``)."""
        ctx = _here("Comm.Allgather")
        ctx.block(self._c.Allgather(_send_array(sendbuf, "Allgather"), _recv_array(recvbuf, "Allgather")))

    def Alltoall(self, sendbuf: Any, recvbuf: Any) -> None:
        """Block j of *sendbuf* to rank j, block i of *recvbuf* from rank i (``MPI_Alltoall``)."""
        ctx = _here("Comm.Alltoall")
        ctx.block(self._c.Alltoall(_send_array(sendbuf, "Alltoall"), _recv_array(recvbuf, "Alltoall")))

    def Gatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        """Gather blocks of per-rank counts into root's ``[buf, counts, displs, type]`` (``MPI_Gatherv``)."""
        ctx = _here("Comm.Gatherv")
        c = self._c
        recv = _spec(recvbuf, "Gatherv", vector=True) if c.rank == root else None
        if recv is not None and recv.counts is None:
            raise TypeError(f"rank {ctx.rank}: Gatherv: the root's recvbuf needs counts: [buf, counts, displs, type]")
        if sendbuf is IN_PLACE:
            send = None
        else:
            send = _array(sendbuf, "Gatherv")
        nbytes = send.nbytes if send is not None else 0
        ctx.block(_coll.collective(c, "gatherv", f"gatherv(root={root})", nbytes, _coll.gatherv(
            c, send, recv.array if recv else None, recv.counts if recv else None, recv.displs if recv else None, root)))

    def Scatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        """Scatter blocks of per-rank counts from root's ``[buf, counts, displs, type]`` (``MPI_Scatterv``)."""
        ctx = _here("Comm.Scatterv")
        c = self._c
        send = _spec(sendbuf, "Scatterv", vector=True) if c.rank == root else None
        if send is not None and send.counts is None:
            raise TypeError(f"rank {ctx.rank}: Scatterv: the root's sendbuf needs counts: [buf, counts, displs, type]")
        into = None if recvbuf is IN_PLACE else _recv_array(recvbuf, "Scatterv")
        nbytes = into.nbytes if into is not None else 0
        ctx.block(_coll.collective(c, "scatterv", f"scatterv(root={root})", nbytes, _coll.scatterv(
            c, send.array if send else None, send.counts if send else None, send.displs if send else None, into, root)))

    def Allgatherv(self, sendbuf: Any, recvbuf: Any) -> None:
        """Gather blocks of per-rank counts into every rank's ``[buf, counts, displs, type]`` (``MPI_Allgatherv``)."""
        ctx = _here("Comm.Allgatherv")
        c = self._c
        recv = _spec(recvbuf, "Allgatherv", vector=True)
        if recv.counts is None:
            raise TypeError(f"rank {ctx.rank}: Allgatherv: recvbuf needs counts: [buf, counts, displs, type]")
        send = None if sendbuf is IN_PLACE else _array(sendbuf, "Allgatherv")
        ctx.block(_coll.collective(c, "allgatherv", "allgatherv()", recv.array.nbytes,
                                   _coll.allgatherv(c, send, recv.array, recv.counts, recv.displs)))

    def Alltoallv(self, sendbuf: Any, recvbuf: Any) -> None:
        """Per-pair counts: ``[buf, counts, displs, type]`` on both sides (``MPI_Alltoallv``)."""
        ctx = _here("Comm.Alltoallv")
        c = self._c
        recv = _spec(recvbuf, "Alltoallv", vector=True)
        send = recv if sendbuf is IN_PLACE else _spec(sendbuf, "Alltoallv", vector=True)
        if recv.counts is None or send.counts is None:
            raise TypeError(f"rank {ctx.rank}: Alltoallv: buffers need counts: [buf, counts, displs, type]")
        source = send.array.copy() if sendbuf is IN_PLACE else send.array
        ctx.block(_coll.collective(c, "alltoallv", "alltoallv()", source.nbytes, _coll.alltoallv(
            c, source, send.counts, send.displs, recv.array, recv.counts, recv.displs)))


def _scan(ctx: RankContext, c: Any, call: str, sendbuf: Any, recvbuf: Any, op: Any, exclusive: bool) -> None:
    """``Scan``/``Exscan``: MPICH's recursive doubling (:func:`mpisim.compat.collectives.scan_buffers`)."""
    recv = _recv_array(recvbuf, call)
    send = recv if sendbuf is IN_PLACE else _array(sendbuf, call)
    if send.size != recv.size:  # mpi4py's check, before any message
        raise ValueError(f"rank {ctx.rank}: {call}: mismatch in send count {send.size} and receive count {recv.size}")
    ctx.block(_coll.scan_buffers(c, send, recv, _as_op(op).sim(call), exclusive))
class Group:
    """An ordered set of processes (``MPI_Group``): what a communicator is made of, without its contexts.

    A group is a local object: making one (``Get_group``, ``Incl``, ``Excl``, ``Union``, ...)
    sends nothing. It lists world ranks in the group's order; a process's rank in the group is
    its position there (``UNDEFINED`` outside it).
    """

    def __init__(self, members: Sequence[int] = ()) -> None:
        self._members = tuple(int(m) for m in members)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Group) and other._members == self._members

    def __hash__(self) -> int:
        return hash(self._members)

    def __repr__(self) -> str:
        return f"Group({list(self._members)})"

    def Get_size(self) -> int:
        return len(self._members)

    def Get_rank(self) -> int:
        """The calling process's rank in the group, or ``UNDEFINED``."""
        me = _here("Group.Get_rank").rank
        return self._members.index(me) if me in self._members else UNDEFINED

    size = property(Get_size)
    rank = property(Get_rank)

    def _check(self, ranks: Sequence[int], call: str) -> list[int]:
        ranks = [int(r) for r in ranks]
        bad = [r for r in ranks if not 0 <= r < len(self._members)]
        if bad or len(set(ranks)) != len(ranks):
            what = f"rank {bad[0]} is not in a group of {len(self._members)}" if bad else "a rank is listed twice"
            raise MPIError(f"rank {_here(call).rank}: Group.{call}: {what} (MPI_ERR_RANK)")
        return ranks

    def Incl(self, ranks: Sequence[int]) -> Group:
        """The group of the listed ranks of this one, in the order listed (``MPI_Group_incl``)."""
        return Group(self._members[r] for r in self._check(ranks, "Incl"))

    def Excl(self, ranks: Sequence[int]) -> Group:
        """This group without the listed ranks, in its order (``MPI_Group_excl``)."""
        gone = set(self._check(ranks, "Excl"))
        return Group(m for i, m in enumerate(self._members) if i not in gone)

    def Range_incl(self, ranges: Sequence[tuple[int, int, int]]) -> Group:
        """The ranks of each ``(first, last, stride)`` range, last included (``MPI_Group_range_incl``)."""
        return self.Incl([r for first, last, stride in ranges for r in range(first, last + (1 if stride > 0 else -1), stride)])

    def Range_excl(self, ranges: Sequence[tuple[int, int, int]]) -> Group:
        """This group without the ranks of each ``(first, last, stride)`` range (``MPI_Group_range_excl``)."""
        return self.Excl([r for first, last, stride in ranges for r in range(first, last + (1 if stride > 0 else -1), stride)])

    def Translate_ranks(self, ranks: Sequence[int] | None = None, group: Group | None = None) -> list[int]:
        """The ranks in *group* of this group's *ranks* (``UNDEFINED`` where absent; ``MPI_Group_translate_ranks``)."""
        ranks = list(range(len(self._members))) if ranks is None else self._check(ranks, "Translate_ranks")
        if group is None:
            return [self._members[r] for r in ranks]
        return [group._members.index(self._members[r]) if self._members[r] in group._members else UNDEFINED
                for r in ranks]

    def Compare(self, other: Group) -> int:
        """``IDENT`` (same members, same order), ``SIMILAR`` (same members) or ``UNEQUAL``."""
        if self._members == other._members:
            return IDENT
        return SIMILAR if set(self._members) == set(other._members) else UNEQUAL

    @classmethod
    def Union(cls, group1: Group, group2: Group) -> Group:
        """*group1*'s members, then *group2*'s not in *group1* (``MPI_Group_union``)."""
        return cls([*group1._members, *(m for m in group2._members if m not in group1._members)])

    @classmethod
    def Intersection(cls, group1: Group, group2: Group) -> Group:
        """*group1*'s members that are in *group2*, in *group1*'s order (``MPI_Group_intersection``)."""
        return cls(m for m in group1._members if m in group2._members)

    @classmethod
    def Difference(cls, group1: Group, group2: Group) -> Group:
        """*group1*'s members that are not in *group2* (``MPI_Group_difference``)."""
        return cls(m for m in group1._members if m not in group2._members)

    def Free(self) -> None:
        """Release the group (nothing to release here)."""


GROUP_EMPTY = Group()


class Intracomm(Comm):
    """An intra-communicator (every communicator mpisim makes is one); programs may subclass it."""


class Cartcomm(Intracomm):
    """A communicator with a Cartesian grid: ``Shift``, ``Get_coords``, ``Get_cart_rank``.

    Its topology is ``MPI.CART``; periods are 0 and 1, as mpi4py shows MPI's logicals.
    """

    _dims: list[int]
    _periods: list[int]
    is_topo = True

    def Get_topology(self) -> int:
        """``MPI.CART``."""
        _alive("Cartcomm.Get_topology")
        return CART

    @property
    def dims(self) -> list[int]:
        return list(self._dims)

    @property
    def periods(self) -> list[int]:
        return list(self._periods)

    @property
    def ndim(self) -> int:
        return len(self._dims)

    def Get_dim(self) -> int:
        return len(self._dims)

    def Get_topo(self) -> tuple[list[int], list[int], list[int]]:
        """``(dims, periods, coords of this rank)``, periods as 0 and 1 (``([2, 2], [0, 1], [0, 0])``)."""
        return list(self._dims), list(self._periods), self.Get_coords(self.Get_rank())

    @property
    def topo(self) -> tuple[list[int], list[int], list[int]]:
        return self.Get_topo()

    @property
    def coords(self) -> list[int]:
        return self.Get_coords(self.Get_rank())

    def Get_coords(self, rank: int) -> list[int]:
        """The grid coordinates of *rank* (row-major, the last dimension fastest, as MPI numbers them)."""
        coords = []
        for d in reversed(self._dims):
            coords.append(rank % d)
            rank //= d
        return coords[::-1]

    def Get_cart_rank(self, coords: Sequence[int]) -> int:
        """The rank at *coords* (periodic dimensions wrap around)."""
        rank = 0
        for c, d, periodic in zip(coords, self._dims, self._periods, strict=True):
            if periodic:
                c %= d
            elif not 0 <= c < d:
                raise InvalidArgumentError(f"rank {_here('Cartcomm.Get_cart_rank').rank}: coordinate {c} "
                                           f"outside 0..{d - 1}")
            rank = rank * d + c
        return rank

    def Shift(self, direction: int, disp: int) -> tuple[int, int]:
        """``(source, dest)``: the ranks *disp* steps back and forward along *direction* (``PROC_NULL`` off a non-periodic edge)."""
        me = self.Get_coords(self.Get_rank())

        def neighbour(step: int) -> int:
            coords = list(me)
            coords[direction] += step
            d = self._dims[direction]
            if not self._periods[direction] and not 0 <= coords[direction] < d:
                return PROC_NULL
            return self.Get_cart_rank(coords)

        return neighbour(-disp), neighbour(disp)


def _special(which: str | None) -> Intracomm:
    comm = Intracomm()
    comm._which = which
    return comm


COMM_WORLD = _special("world")
COMM_SELF = _special("self")
COMM_NULL = Intracomm()


def _as_op(op: Any) -> Op:
    if isinstance(op, Op):
        return op
    if callable(op):  # mpi4py accepts a plain function for lowercase reductions
        return Op("python", None, op, True)
    raise TypeError(f"expected an MPI.Op, got {op!r}")


# ------------------------------------------------------------------ environment


def Wtime() -> float:
    """The simulated clock of the calling rank, in seconds (``MPI_Wtime``)."""
    ctx = _here("Wtime")
    ctx.enter()
    return float(ctx.env.now)


def Wtick() -> float:
    """The resolution of :func:`Wtime`: the simulated clock is exact to the nanosecond in these reports."""
    _alive("Wtick")
    return 1e-9


def Get_processor_name() -> str:
    """The name of the simulated node the calling rank runs on."""
    ctx = _here("Get_processor_name")
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
    ctx = _here_any("Finalize")
    _check_alive(ctx, "Finalize")
    ctx.cache["mpi"] = _FINALIZED


def Query_thread() -> int:
    """The thread level the rank's MPI provides. Ranks run one at a time in their greenlets: at most serialized."""
    ctx = _here_any("Query_thread")
    _check_alive(ctx, "Query_thread")
    return int(ctx.cache.get("thread_level", THREAD_SERIALIZED))


def Is_thread_main() -> bool:
    _alive("Is_thread_main")
    return True


def Get_version() -> tuple[int, int]:
    """The MPI standard version (callable at any time, as in MPI)."""
    return VERSION, SUBVERSION


def Get_library_version() -> str:
    from mpisim import __version__

    return f"mpisim {__version__} (simulated MPI, mpi4py API)"


def Get_error_class(errorcode: int) -> int:
    """The error class of an error code (``MPI_Error_class``): mpisim's codes are their classes."""
    return error_class_of(int(errorcode))


def Get_error_string(errorcode: int) -> str:
    """MPICH's string for an error code (``MPI_Error_string``): ``MPI.Get_error_string(MPI.ERR_RANK)`` is 'Invalid rank'."""
    return error_string(int(errorcode))


def Compute_dims(nnodes: int, dims: int | Sequence[int]) -> list[int]:
    """Balanced grid dimensions for *nnodes* ranks, non-increasing (``MPI_Dims_create``)."""
    _alive("Compute_dims")
    shape = [0] * dims if isinstance(dims, int) else [int(d) for d in dims]
    fixed = int(np.prod([d for d in shape if d > 0])) if any(d > 0 for d in shape) else 1
    free = [i for i, d in enumerate(shape) if d == 0]
    if nnodes % fixed:
        raise MPIError(f"Compute_dims: {nnodes} ranks do not divide by the fixed dimensions' product {fixed}",
                       error_class=ERR_DIMS)
    left = nnodes // fixed
    factors = []
    n, f = left, 2
    while f * f <= n:
        while n % f == 0:
            factors.append(f)
            n //= f
        f += 1
    if n > 1:
        factors.append(n)
    sizes = [1] * len(free)
    for factor in sorted(factors, reverse=True):  # the largest factor to the smallest dimension so far
        if not sizes:
            break
        sizes[sizes.index(min(sizes))] *= factor
    for i, size in zip(free, sorted(sizes, reverse=True), strict=True):
        shape[i] = size
    return shape


def Pcontrol(level: int) -> None:
    """Profiling control: nothing to do."""
    _alive("Pcontrol")


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
    from mpisim.compat.package import Rc

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


def _imported() -> None:
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


def _check_alive(ctx: RankContext, call: str) -> None:
    """Return if the rank's MPI is running; else end the rank, as MPICH does (status 1)."""
    state = _state(ctx)
    if state == _RUNNING:
        return
    when = "after MPI.Finalize()" if state == _FINALIZED else "before MPI.Init() (mpi4py.rc.initialize is False)"
    _end_rank(ctx, f"MPI.{call} {when}{_where(ctx)}: MPICH ends the program here with status 1: "
                   f"\"{_MPICH_NOT_RUNNING}\"", 1)


def _init(call: str, level: int) -> int:
    ctx = _here_any(call)
    state = _state(ctx)
    if state == _RUNNING:
        raise MPIError(f"rank {ctx.rank}: MPI.{call}: Cannot call MPI_INIT or MPI_INIT_THREAD more than once")
    if state == _FINALIZED:  # MPICH's errors are fatal once finalized: it aborts with the error class
        _end_rank(ctx, f"MPI.{call} after MPI.Finalize(){_where(ctx)}: MPICH aborts the program here with "
                       f"status {ERR_OTHER}: \"Cannot call MPI_INIT or MPI_INIT_THREAD more than once\"", ERR_OTHER)
    provided = min(level, THREAD_SERIALIZED)
    ctx.cache["mpi"], ctx.cache["thread_level"] = _RUNNING, provided
    return provided


def _here_any(call: str) -> RankContext:
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
__all__ += ["Exception", "ProgramExit", "pickle"]
