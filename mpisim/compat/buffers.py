"""mpi4py's buffer arguments, read as numpy views of the caller's own memory.

mpi4py's uppercase calls take a *buffer specification*: any object with the buffer protocol
(a numpy array, ``bytearray``, ``array.array``, ``mmap``, ``bytes`` to send), optionally in a
list with a count, a displacement and a datatype::

    comm.Send(a, dest=1)                          # the whole array, datatype from a.dtype
    comm.Send([a, MPI.DOUBLE], dest=1)            # ... named explicitly
    comm.Recv([b, 10, MPI.BYTE], source=0)        # the first 10 bytes of b
    comm.Scatterv([a, counts, displs, MPI.INT], b, root=0)

Every form becomes a one-dimensional numpy array that *is* the caller's memory (a view,
never a copy), typed by the datatype, so a receive writes straight into the program's buffer
and a send reads from it, as MPI does. Objects exposing ``__cuda_array_interface__`` or DLPack
(CuPy, PyTorch) are read through ``numpy.from_dlpack`` when they live in host memory.

:class:`Datatype` is MPI's named type: a numpy dtype with MPI's name and size.

A buffer mpi4py refuses is refused with mpi4py's exception and words
(:class:`BufferSpecError` carries which): a non-contiguous array (``A[:, 0]``) or a read-only
receive buffer is a BufferError, a buffer that does not hold whole elements of the datatype
named for it (``[np.zeros(3), MPI.DOUBLE_INT]``) a ValueError, anything that is not a buffer a
TypeError.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mpisim.compat.unsupported import Strict, unsupported


class Datatype(metaclass=Strict):
    """A named MPI datatype (``MPI.DOUBLE``): MPI's name over a numpy dtype.

    The derived-datatype constructors (``Create_vector``, ``Create_struct``, ...) and other
    names mpisim does not simulate are an UnsupportedCall naming them, on an instance as on the
    class (``MPI.Datatype.Create_struct``).
    """

    __slots__ = ("dtype", "name")

    def __init__(self, name: str, dtype: Any) -> None:
        self.name = name
        self.dtype = np.dtype(dtype)

    # mpi4py's methods, as programs call them
    def Get_size(self) -> int:
        """Bytes of data in one element (``MPI_Type_size``): a pair type's padding is not data (DOUBLE_INT: 12)."""
        return _data_size(self.dtype)

    @property
    def size(self) -> int:
        """Bytes of data in one element."""
        return _data_size(self.dtype)

    def Get_extent(self) -> tuple[int, int]:
        """``(lower bound, extent)``: a named type is contiguous, so ``(0, size)``."""
        return 0, self.dtype.itemsize

    @property
    def extent(self) -> int:
        """Extent in bytes: the size, and for a pair type its padding too (DOUBLE_INT: 16)."""
        return self.dtype.itemsize

    def Get_name(self) -> str:
        """MPI's name for the type, e.g. ``MPI_DOUBLE``."""
        return self.name

    def Create_contiguous(self, count: int) -> Datatype:
        """*count* consecutive elements as one element (``MPI_Type_contiguous``)."""
        return Datatype(f"{self.name}x{count}", np.dtype((self.dtype, (int(count),))) if count != 1 else self.dtype)

    def Commit(self) -> Datatype:
        """Return the type itself: nothing to commit in a simulation."""
        return self

    def Free(self) -> None:
        """Nothing to free."""

    def Dup(self) -> Datatype:
        """Return a copy of the type."""
        return Datatype(self.name, self.dtype)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Datatype) and other.dtype == self.dtype and other.name == self.name

    def __hash__(self) -> int:
        return hash((self.name, self.dtype))

    def __repr__(self) -> str:
        return f"<mpi4py.MPI.Datatype {self.name}>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in Datatype.__slots__:
            raise AttributeError(name)
        raise unsupported(f"Datatype.{name}")


def _data_size(dtype: np.dtype) -> int:
    """Bytes of *dtype* that are data, not padding (C's struct padding of the MAXLOC/MINLOC pair types)."""
    if dtype.subdtype is not None:
        base, shape = dtype.subdtype
        return _data_size(base) * int(np.prod(shape))
    if dtype.fields:
        return sum(_data_size(field[0]) for field in dtype.fields.values())
    return dtype.itemsize


def _pair(value: str) -> np.dtype:
    """``struct {value; int}``, laid out as C lays it out (MAXLOC/MINLOC pair types)."""
    return np.dtype([("value", value), ("index", "i4")], align=True)


#: MPI's named datatypes, by mpi4py's attribute name: (MPICH's name for it, its numpy type). Aliases
#: (``SIGNED_INT`` and ``INT``, ``F_FLOAT`` and ``REAL``) carry the one name MPICH gives both.
_NAMED: dict[str, tuple[str, Any]] = {
    "BYTE": ("MPI_BYTE", np.uint8), "PACKED": ("MPI_PACKED", np.uint8), "CHAR": ("MPI_CHAR", np.int8),
    "CHARACTER": ("MPI_CHARACTER", np.int8), "SIGNED_CHAR": ("MPI_SIGNED_CHAR", np.int8),
    "UNSIGNED_CHAR": ("MPI_UNSIGNED_CHAR", np.uint8), "WCHAR": ("MPI_WCHAR", np.uint32),
    "SHORT": ("MPI_SHORT", np.int16), "SIGNED_SHORT": ("MPI_SHORT", np.int16),
    "UNSIGNED_SHORT": ("MPI_UNSIGNED_SHORT", np.uint16), "INT": ("MPI_INT", np.int32),
    "SIGNED_INT": ("MPI_INT", np.int32), "UNSIGNED": ("MPI_UNSIGNED", np.uint32),
    "UNSIGNED_INT": ("MPI_UNSIGNED", np.uint32), "LONG": ("MPI_LONG", np.int64), "SIGNED_LONG": ("MPI_LONG", np.int64),
    "UNSIGNED_LONG": ("MPI_UNSIGNED_LONG", np.uint64), "LONG_LONG": ("MPI_LONG_LONG_INT", np.int64),
    "SIGNED_LONG_LONG": ("MPI_LONG_LONG_INT", np.int64), "UNSIGNED_LONG_LONG": ("MPI_UNSIGNED_LONG_LONG", np.uint64),
    "FLOAT": ("MPI_FLOAT", np.float32), "DOUBLE": ("MPI_DOUBLE", np.float64),
    "LONG_DOUBLE": ("MPI_LONG_DOUBLE", np.longdouble), "FLOAT16_T": ("MPIX_C_FLOAT16", np.float16),
    "FLOAT32_T": ("MPI_FLOAT", np.float32), "FLOAT64_T": ("MPI_DOUBLE", np.float64),
    "BOOL": ("MPI_C_BOOL", np.bool_), "C_BOOL": ("MPI_C_BOOL", np.bool_), "CXX_BOOL": ("MPI_CXX_BOOL", np.bool_),
    "INT8_T": ("MPI_INT8_T", np.int8), "INT16_T": ("MPI_INT16_T", np.int16), "INT32_T": ("MPI_INT32_T", np.int32),
    "INT64_T": ("MPI_INT64_T", np.int64), "SINT8_T": ("MPI_INT8_T", np.int8), "SINT16_T": ("MPI_INT16_T", np.int16),
    "SINT32_T": ("MPI_INT32_T", np.int32), "SINT64_T": ("MPI_INT64_T", np.int64),
    "UINT8_T": ("MPI_UINT8_T", np.uint8), "UINT16_T": ("MPI_UINT16_T", np.uint16),
    "UINT32_T": ("MPI_UINT32_T", np.uint32), "UINT64_T": ("MPI_UINT64_T", np.uint64),
    "C_COMPLEX": ("MPI_C_COMPLEX", np.complex64), "C_FLOAT_COMPLEX": ("MPI_C_COMPLEX", np.complex64),
    "C_DOUBLE_COMPLEX": ("MPI_C_DOUBLE_COMPLEX", np.complex128),
    "C_LONG_DOUBLE_COMPLEX": ("MPI_C_LONG_DOUBLE_COMPLEX", np.clongdouble),
    "CXX_FLOAT_COMPLEX": ("MPI_CXX_FLOAT_COMPLEX", np.complex64),
    "CXX_DOUBLE_COMPLEX": ("MPI_CXX_DOUBLE_COMPLEX", np.complex128),
    "CXX_LONG_DOUBLE_COMPLEX": ("MPI_CXX_LONG_DOUBLE_COMPLEX", np.clongdouble),
    "COMPLEX": ("MPI_COMPLEX", np.complex64), "DOUBLE_COMPLEX": ("MPI_DOUBLE_COMPLEX", np.complex128),
    "AINT": ("MPI_AINT", np.int64), "OFFSET": ("MPI_OFFSET", np.int64), "COUNT": ("MPI_COUNT", np.int64),
    # Fortran's types, as a C program sees them (MPICH built with gfortran)
    "INTEGER": ("MPI_INTEGER", np.int32), "F_INT": ("MPI_INTEGER", np.int32), "INTEGER1": ("MPI_INTEGER1", np.int8),
    "INTEGER2": ("MPI_INTEGER2", np.int16), "INTEGER4": ("MPI_INTEGER4", np.int32),
    "INTEGER8": ("MPI_INTEGER8", np.int64), "REAL": ("MPI_REAL", np.float32), "F_FLOAT": ("MPI_REAL", np.float32),
    "REAL4": ("MPI_REAL4", np.float32), "REAL8": ("MPI_REAL8", np.float64),
    "DOUBLE_PRECISION": ("MPI_DOUBLE_PRECISION", np.float64), "F_DOUBLE": ("MPI_DOUBLE_PRECISION", np.float64),
    "F_COMPLEX": ("MPI_COMPLEX", np.complex64), "F_FLOAT_COMPLEX": ("MPI_COMPLEX", np.complex64),
    "F_DOUBLE_COMPLEX": ("MPI_DOUBLE_COMPLEX", np.complex128), "COMPLEX8": ("MPI_COMPLEX8", np.complex64),
    "COMPLEX16": ("MPI_COMPLEX16", np.complex128), "LOGICAL": ("MPI_LOGICAL", np.int32),
    "F_BOOL": ("MPI_LOGICAL", np.int32),
    # MAXLOC/MINLOC's pairs
    "TWOINT": ("MPI_2INT", _pair("i4")), "SHORT_INT": ("MPI_SHORT_INT", _pair("i2")),
    "LONG_INT": ("MPI_LONG_INT", _pair("i8")), "FLOAT_INT": ("MPI_FLOAT_INT", _pair("f4")),
    "DOUBLE_INT": ("MPI_DOUBLE_INT", _pair("f8")), "LONG_DOUBLE_INT": ("MPI_LONG_DOUBLE_INT", _pair("g")),
}
DATATYPES: dict[str, Datatype] = {attr: Datatype(name, dtype) for attr, (name, dtype) in _NAMED.items()}
DATATYPES["INT_INT"] = DATATYPES["TWOINT"]

#: ``MPI._typedict``: numpy's type codes to MPI datatypes, mpi4py's 57 keys (one-letter codes,
#: sized codes such as ``'f8'``, ``'i4'``, ``'c16'``, and the string and time codes).
TYPEDICT: dict[str, Datatype] = {code: DATATYPES[attr] for code, attr in {
    "?": "C_BOOL", "b": "SIGNED_CHAR", "h": "SHORT", "i": "INT", "l": "LONG", "q": "LONG_LONG",
    "B": "UNSIGNED_CHAR", "H": "UNSIGNED_SHORT", "I": "UNSIGNED", "L": "UNSIGNED_LONG", "Q": "UNSIGNED_LONG_LONG",
    "e": "FLOAT16_T", "f": "FLOAT", "d": "DOUBLE", "g": "LONG_DOUBLE", "Zf": "C_COMPLEX", "Zd": "C_DOUBLE_COMPLEX",
    "F": "C_COMPLEX", "D": "C_DOUBLE_COMPLEX", "Zg": "C_LONG_DOUBLE_COMPLEX", "G": "C_LONG_DOUBLE_COMPLEX",
    "i1": "INT8_T", "i2": "INT16_T", "i4": "INT32_T", "i8": "INT64_T", "f4": "FLOAT", "f8": "DOUBLE",
    "f16": "LONG_DOUBLE", "c8": "C_COMPLEX", "c16": "C_DOUBLE_COMPLEX", "c32": "C_LONG_DOUBLE_COMPLEX",
    "b1": "C_BOOL", "u1": "UINT8_T", "u2": "UINT16_T", "u4": "UINT32_T", "u8": "UINT64_T", "f2": "FLOAT16_T",
    "n": "COUNT", "N": "UNSIGNED_LONG", "p": "AINT", "P": "UNSIGNED_LONG", "c": "CHAR", "a": "CHAR", "S": "CHAR",
    "S1": "CHAR", "s": "CHAR", "1s": "CHAR", "U": "WCHAR", "U1": "WCHAR", "u": "UINT16_T", "1u": "UINT16_T",
    "w": "WCHAR", "1w": "WCHAR", "M": "INT64_T", "M8": "INT64_T", "m": "INT64_T", "m8": "INT64_T",
}.items()}


def datatype_of(dtype: np.dtype) -> Datatype:
    """The MPI datatype of numpy *dtype* (an unnamed one for dtypes MPI has no name for)."""
    found = TYPEDICT.get(dtype.char)
    if found is not None and found.dtype == dtype:
        return found
    for named in DATATYPES.values():
        if named.dtype == dtype:
            return named
    return Datatype(f"numpy {dtype}", dtype)


class BufferSpecError(TypeError):
    """A buffer argument mpi4py would refuse (not a buffer, wrong datatype size, too short).

    ``raises`` is the exception mpi4py raises for it: the builtin BufferError (not contiguous,
    not writable), ValueError (not whole elements of the datatype) or TypeError (the rest).
    """

    def __init__(self, message: str, raises: type[Exception] = TypeError) -> None:
        super().__init__(message)
        self.raises = raises


@dataclass
class Spec:
    """A resolved buffer specification: the elements as a numpy view, and per-rank counts for v-calls."""

    array: np.ndarray
    datatype: Datatype
    counts: list[int] | None = None
    displs: list[int] | None = None


def _memory(obj: Any) -> np.ndarray:
    """*obj*'s memory as a one-dimensional numpy array of its own element type (a view)."""
    if isinstance(obj, np.ndarray):
        if not (obj.flags.c_contiguous or obj.flags.f_contiguous):
            raise BufferSpecError("dlpack: buffer is not contiguous (MPI needs one block of memory; "
                                  "pass a copy: np.ascontiguousarray)", BufferError)
        return obj.reshape(-1, order="A")
    if hasattr(obj, "__dlpack__") and not isinstance(obj, bytes | bytearray | memoryview):
        try:
            return _memory(np.from_dlpack(obj))
        except (TypeError, RuntimeError, BufferError, ValueError):  # BufferError: the builtin (not contiguous)
            pass  # a device array numpy cannot read in place: fall back to its buffer, if any
    try:
        view = memoryview(obj)
    except TypeError:
        raise BufferSpecError(f"expected a buffer (numpy array, bytearray, array.array, mmap), got "
                              f"{type(obj).__name__}") from None
    if view.format in ("B", "b", "c") or view.itemsize == 1:
        return np.frombuffer(view, dtype=np.uint8) if view.nbytes else np.zeros(0, np.uint8)
    return np.frombuffer(view, dtype=np.dtype(view.format)).reshape(-1) if view.nbytes else np.zeros(0)


def _retype(array: np.ndarray, datatype: Datatype, counted: bool) -> np.ndarray:
    """View *array*'s bytes as elements of *datatype* (the memory is reinterpreted, as MPI does).

    Without a count (*counted* false) the buffer must hold whole elements, as mpi4py infers
    the count from it; with one, the whole elements it holds are enough.
    """
    if array.dtype == datatype.dtype:
        return array
    size = datatype.dtype.itemsize
    if array.nbytes % size:
        if not counted:
            raise BufferSpecError(f"message: cannot infer count, buffer length {array.nbytes} is not a multiple of "
                                  f"datatype extent {size} (lb:0, ub:{size})", ValueError)
        array = array.view(np.uint8)[:array.nbytes - array.nbytes % size]
    return array.view(np.uint8).view(datatype.dtype)


def _datatype(value: Any) -> Datatype | None:
    if isinstance(value, Datatype):
        return value
    if isinstance(value, str) and value in TYPEDICT:
        return TYPEDICT[value]
    return None


def parse(spec: Any, *, vector: bool = False, blocks: int = 1) -> Spec:
    """Resolve a buffer specification to a :class:`Spec` (see the module docstring).

    With *vector* (the v-collectives), the list form is ``[buf, counts, displs, datatype]``,
    ``[buf, (counts, displs), datatype]``, ``[buf, counts, datatype]`` or ``[buf, counts]``.
    With *blocks* (the buffer of a gather's root, a scatter's root, an allgather or alltoall:
    one block per rank), a count is the count of each block, as in mpi4py and MPI
    (``Gather(IN_PLACE, [buf, n, MPI.BYTE])`` receives n bytes from each rank).
    """
    if not isinstance(spec, list | tuple):
        array = _memory(spec)
        return Spec(array, datatype_of(array.dtype))
    if not spec:
        raise BufferSpecError("an empty buffer specification")
    items = list(spec)
    obj, rest = items[0], items[1:]
    datatype = None
    if rest and _datatype(rest[-1]) is not None:
        datatype = _datatype(rest.pop())
    memory = _memory(obj)
    array = _retype(memory, datatype, bool(rest)) if datatype is not None else memory
    datatype = datatype or datatype_of(array.dtype)
    if vector:
        counts: Any = None
        displs: Any = None
        if len(rest) == 1 and isinstance(rest[0], tuple) and len(rest[0]) == 2 and not np.isscalar(rest[0][0]):
            counts, displs = rest[0]
        elif len(rest) >= 1:
            counts = rest[0]
            displs = rest[1] if len(rest) > 1 else None
        if counts is None:
            return Spec(array, datatype)
        if np.isscalar(counts):
            raise BufferSpecError("a v-call needs a count per rank, got a single count")
        counts = [int(c) for c in counts]
        if displs is None:
            displs = list(np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int)) if counts else []
        displs = [int(d) for d in displs]
        end = max((d + c for d, c in zip(displs, counts, strict=False)), default=0)
        if end > array.size:
            raise BufferSpecError(f"counts and displacements reach element {end}, but the buffer holds {array.size}")
        return Spec(array, datatype, counts, displs)
    count, displ = None, 0
    if len(rest) == 1:
        count = rest[0]
        if isinstance(count, tuple):
            count, displ = count
    elif len(rest) == 2:
        count, displ = rest
    elif rest:
        raise BufferSpecError(f"expected [buf, count, datatype], got a list of {len(items)} items")
    if count is None:
        count = array.size - displ
    else:
        count = int(count) * blocks
    count, displ = int(count), int(displ)
    if displ + count > array.size:
        raise BufferSpecError(f"count {count} (from element {displ}) is more than the buffer's {array.size} "
                              f"elements of {datatype.name}")
    return Spec(array[displ:displ + count], datatype)


def writable(spec: Spec, call: str) -> np.ndarray:
    """The spec's elements, checked writeable (a receive writes into them)."""
    if not spec.array.flags.writeable:
        raise BufferSpecError("Object is not writable. (the receive buffer is read-only, bytes or a read-only "
                              "array: pass a bytearray or a writeable numpy array)", BufferError)
    return spec.array
