"""Reduction operations (``MPI.Op``): the predefined ``SUM ... MINLOC`` and ``Op.Create`` for a program's own.

Each op carries two forms: the element-wise one the simulated MPI applies to buffers
(:mod:`mpisim.mpi.ops`, a numpy ufunc) and the Python one the lowercase calls apply to objects
(``comm.allreduce(x, op=MPI.MAX)``). MPI applies an op in rank order, ``x0 op x1 op ...``;
an op that is not commutative keeps that order in every algorithm that uses it.

mpi4py keeps a program's own ops in a registry of 32 slots per process (its C callbacks are 32
fixed trampolines), so a 33rd live ``Op.Create`` is a ``RuntimeError`` until one is freed; each
rank here has its own registry. Integer handles are MPICH's: ``0x58000001`` ... for the
predefined ops, ``0x98000000 + i`` for the i-th user op (a negative C ``int``).
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from mpisim.compat import buffers as _buffers
from mpisim.compat.check.findings import running
from mpisim.compat.mpi4py import memory as _memory
from mpisim.compat.mpi4py.msgbuffer import buffer_spec, refused
from mpisim.compat.ranks import current
from mpisim.compat.unsupported import Strict, unsupported
from mpisim.errors import MPIError
from mpisim.mpi import ops as _ops
from mpisim.mpi.constants import ERR_OP


class Op(metaclass=Strict):
    """A reduction operation: numpy's element-wise function for buffers, Python's for objects."""

    def __init__(self, name: Any = None, sim: _ops.Op | None = None, py: Callable[[Any, Any], Any] | None = None,
                 commute: bool = True) -> None:
        #: The program's function (a user op with a registry slot), its slot, and the MPI handle of a user op.
        self._function: tuple[Callable[..., Any], bool] | None = None
        self._slot, self._handle = 0, 0
        #: A user op applied with the operands' MPI datatype (``Reduce_local`` knows it: ``[buf, MPI.BYTE]``).
        self._typed: Callable[[np.ndarray, np.ndarray, Any], np.ndarray] | None = None
        if name is None or isinstance(name, Op):  # MPI.Op(): OP_NULL; MPI.Op(op): the same op, a new handle
            other = name if isinstance(name, Op) else None
            name, sim, py, commute = (other.name, other._sim, other._py, other.commute) if other else \
                ("MPI_OP_NULL", None, None, True)
            if other is not None:
                self._function, self._slot, self._handle = other._function, other._slot, other._handle
                self._typed = other._typed
        self.name, self._sim, self._py, self.commute = name, sim, py, commute

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Op) and other.name == self.name and other._sim is self._sim

    def __hash__(self) -> int:
        return hash(self.name)

    def __bool__(self) -> bool:
        return self.name != "MPI_OP_NULL"

    @property
    def is_predefined(self) -> bool:
        """True for MPI's own ops (``MPI.SUM``, ..., ``MPI.OP_NULL``), False for ``Op.Create``'s."""
        return not self._handle

    def __reduce__(self) -> Any:
        """Pickled by name (a predefined op is itself again) or by its function (a user op, made anew).

        A user op rebuilt from its integer handle (``Op.fromint``) has no function to pickle: a
        ``ValueError``, as in mpi4py.
        """
        if self._function is not None:
            return Op.Create, self._function
        if self._handle:
            raise ValueError("cannot pickle user-defined reduction operation")
        if self is _predefined(self.name):
            return self.name.removeprefix("MPI_")  # the module's own constant, MPI.MAX
        return Op, (_predefined(self.name),)

    @classmethod
    def Create(cls, function: Callable[..., Any], commute: bool = False) -> Op:
        """A user op: ``function(invec, inoutvec, datatype)`` writes ``invec op inoutvec`` into *inoutvec*.

        As in mpi4py, the buffers it gets are the operands' bytes as ``MPI.buffer`` objects (read
        them with ``np.frombuffer(invec, dtype=...)``, fill with ``inoutvec[:] = any_buffer``); for objects (lowercase calls) it is called as
        ``function(x, y, None)`` and returns the result.
        """
        def apply(a: np.ndarray, b: np.ndarray, datatype: Any = None) -> np.ndarray:
            out = np.array(b, copy=True)
            datatype = datatype if datatype is not None else _buffers.datatype_of(out.dtype)
            function(_memory.of(np.ascontiguousarray(a)), _memory.of(out), datatype)
            return out

        def call(x: Any, y: Any) -> Any:
            result = function(x, y, None)
            return y if result is None else result

        name = getattr(function, "__name__", "op")
        maker = current()
        runner = maker.runner if maker is not None and commute else None

        def on_arrays(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            return _checked(name, runner, apply, a, b)

        def on_objects(x: Any, y: Any) -> Any:
            return _checked(name, runner, call, x, y)

        def typed(a: np.ndarray, b: np.ndarray, datatype: Any) -> np.ndarray:
            return _checked(name, runner, lambda x, y: apply(x, y, datatype), a, b)

        function.__call__  # noqa: B018  - not callable: mpi4py's AttributeError, before a slot is taken
        registry = _registry()
        slot = next((i for i in range(1, len(registry)) if registry[i] is None), 0)
        if not slot:
            raise RuntimeError("cannot create too many user-defined reduction operations")
        op = cls("user", _ops.Op(f"user:{name}", on_arrays, bool(commute)),
                 on_objects, bool(commute))
        op._function, op._slot, op._typed = (function, bool(commute)), slot, typed
        op._handle = _USER_HANDLE + _serial(registry)
        registry[slot] = op
        return op

    def Is_commutative(self) -> bool:
        """True if the op may be applied in any order."""
        return self.commute

    @property
    def is_commutative(self) -> bool:
        return self.commute

    def Reduce_local(self, inbuf: Any, inoutbuf: Any) -> None:
        """*inoutbuf* = *inbuf* op *inoutbuf*, element by element, on this rank alone (``MPI_Reduce_local``).

        mpi4py's checks come first: both buffers must hold the same count of the same datatype.
        """
        out = buffer_spec(inoutbuf, "Op.Reduce_local")
        src = buffer_spec(inbuf, "Op.Reduce_local")
        if src.datatype.name != out.datatype.name:
            raise ValueError("mismatch in send and receive MPI datatypes")
        if src.array.size != out.array.size:
            raise ValueError(f"mismatch in send count {src.array.size} and receive count {out.array.size}")
        try:
            into = _buffers.writable(out, "Op.Reduce_local")
        except _buffers.BufferSpecError as err:
            raise refused(err, "Op.Reduce_local") from None
        if self._typed is not None:  # the program's function sees the datatype the call named
            into[...] = self._typed(src.array, into.copy(), src.datatype)
        else:
            into[...] = self.sim("Op.Reduce_local")(src.array, into.copy())
        out.finish()

    def Free(self) -> None:
        """Free a user op: this handle becomes ``OP_NULL`` and its registry slot is free again.

        Freeing a predefined op or ``OP_NULL`` is an MPI error (MPICH: "Cannot free permanent
        MPI_Op", "Null Op pointer"); other handles of the op (``MPI.Op(op)``) stay as they were.
        """
        if not self._handle:
            what = "Null Op pointer" if not self else "Cannot free permanent MPI_Op"
            raise MPIError(f"Op.Free: {what} ({self.name})", error_class=ERR_OP)
        registry = _registry()
        if self._slot and registry[self._slot] is not None and registry[self._slot]._handle == self._handle:
            registry[self._slot] = None
        self.name, self._sim, self._py, self.commute = "MPI_OP_NULL", None, None, True
        self._function, self._slot, self._handle, self._typed = None, 0, 0, None

    def toint(self) -> int:
        """The op's integer handle, MPICH's ``MPI_Op`` (C and Fortran alike)."""
        return self._handle or _PREDEFINED_HANDLES[self.name]

    py2f = toint

    @classmethod
    def fromint(cls, handle: int) -> Op:
        """The op of integer *handle*: a predefined op itself, a live user op of this rank as a new handle.

        Such a handle reduces as the op does but, like mpi4py's, has no Python function: it can
        be neither called on objects nor pickled.
        """
        handle = int(handle)
        for name, value in _PREDEFINED_HANDLES.items():
            if value == handle:
                return _predefined(name)
        for op in _registry():
            if op is not None and op._handle == handle:
                clone = cls(op.name, op._sim, None, op.commute)
                clone._handle, clone._typed = handle, op._typed
                return clone
        raise MPIError(f"Op.fromint: {handle} is not the handle of an op (MPI_ERR_OP)", error_class=ERR_OP)

    f2py = fromint

    def __call__(self, x: Any, y: Any) -> Any:
        if self._py is None:
            raise ValueError("cannot call user-defined operation")
        return self._py(x, y)

    def sim(self, call: str) -> _ops.Op:
        """The op as the simulated MPI applies it to arrays."""
        if self._sim is None:
            raise unsupported(f"{self.name} on buffers in {call}")
        return self._sim

    def __repr__(self) -> str:
        return f"<mpi4py.MPI.Op {self.name}>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise unsupported(f"Op.{name}")


def _checked(name: str, runner: Any, apply: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    """``apply(a, b)``; under ``--check``, a commutative op (*runner* set) is also applied as ``(b, a)`` and compared."""
    if runner is None or runner.checker is None:
        return apply(a, b)
    ctx = current() or running(runner)
    if ctx is None:
        return apply(a, b)
    a0, b0 = copy.deepcopy(a), copy.deepcopy(b)  # an op on objects may change its operands in place
    swapped = apply(copy.deepcopy(b), copy.deepcopy(a))
    result = apply(a, b)
    ctx.runner.checker.values.op_applied(ctx, name, a0, b0, result, swapped)
    return result


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
OP_NULL = Op()


#: MPICH's handles of the predefined ops (mpi.h), and the first of the user ops' (a direct handle, kind MPIR_OP).
_PREDEFINED_HANDLES = {"MPI_OP_NULL": 0x18000000, "MPI_MAX": 0x58000001, "MPI_MIN": 0x58000002,
                       "MPI_SUM": 0x58000003, "MPI_PROD": 0x58000004, "MPI_LAND": 0x58000005,
                       "MPI_BAND": 0x58000006, "MPI_LOR": 0x58000007, "MPI_BOR": 0x58000008,
                       "MPI_LXOR": 0x58000009, "MPI_BXOR": 0x5800000A, "MPI_MINLOC": 0x5800000B,
                       "MPI_MAXLOC": 0x5800000C, "MPI_REPLACE": 0x5800000D, "MPI_NO_OP": 0x5800000E}
_USER_HANDLE = 0x98000000 - (1 << 32)  # MPI_Op is a C int: the direct handles are negative
#: mpi4py's registry size: 32 slots (1..32) for the program's own ops, per process.
MAX_USER_OPS = 32
_OUTSIDE: list[Op | None] = [None] * (1 + MAX_USER_OPS)  # ops made outside any rank (a shared module's)


def _registry() -> list[Op | None]:
    """The calling rank's registry of live user ops (slot 0 unused, as in mpi4py)."""
    ctx = current()
    if ctx is None:
        return _OUTSIDE
    return ctx.cache.setdefault("op registry", [None] * (1 + MAX_USER_OPS))


def _serial(registry: list[Op | None]) -> int:
    """MPICH's index for a new op: the lowest not held by a live user op (its pool reuses freed entries)."""
    taken = {op._handle - _USER_HANDLE for op in registry if op is not None}
    return next(i for i in range(len(registry)) if i not in taken)


def as_op(op: Any) -> Op:
    if isinstance(op, Op):
        return op
    if callable(op):  # mpi4py accepts a plain function for lowercase reductions
        return Op("python", None, op, True)
    raise TypeError(f"expected an MPI.Op, got {op!r}")


def _predefined(name: str) -> Op:
    """The predefined op of MPI name *name* (unpickling one)."""
    return {op.name: op for op in (SUM, PROD, MAX, MIN, LAND, LOR, LXOR, BAND, BOR, BXOR, MAXLOC, MINLOC, REPLACE,
                                   NO_OP, OP_NULL)}[name]
