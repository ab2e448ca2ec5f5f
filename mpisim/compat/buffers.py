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
and a send reads from it, as MPI does. Objects exposing DLPack or ``__cuda_array_interface__``
(PyTorch, CuPy, Numba) are read as the host memory their pointer names (:mod:`.devicebuf`).

:class:`Datatype` is MPI's named type: a numpy dtype with MPI's name and size.

A buffer mpi4py refuses is refused with mpi4py's exception and words
(:class:`BufferSpecError` carries which): a non-contiguous array (``A[:, 0]``) or a read-only
receive buffer is a BufferError, a buffer that does not hold whole elements of the datatype
named for it (``[np.zeros(3), MPI.DOUBLE_INT]``) a ValueError, anything that is not a buffer a
TypeError.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from mpisim.compat import devicebuf as _device
from mpisim.compat import typemap as _typemap
from mpisim.compat.unsupported import Strict, unsupported


class Datatype(metaclass=Strict):
    """An MPI datatype: a named one (``MPI.DOUBLE``: MPI's name over a numpy dtype) or a derived one.

    A derived type (``Create_vector``, ``Create_struct``, ``Create_subarray``, ``Create_resized``,
    ...) carries its type map (:mod:`mpisim.compat.typemap`): a message of it moves exactly the
    bytes the map covers, packed, and the network is charged for those. One whose bytes are
    dense (``Create_contiguous`` of a named type) is also a numpy dtype, read in place as named
    types are. Names mpisim does not simulate are an UnsupportedCall naming them, on an
    instance as on the class (``MPI.Datatype.Create_darray``).
    """

    __slots__ = ("dtype", "name", "tmap")

    def __init__(self, name: str, dtype: Any, tmap: _typemap.TypeMap | None = None) -> None:
        self.name = name
        self.dtype = np.dtype(dtype)
        self.tmap = tmap  # None: named (or dense), read in place as self.dtype

    @property
    def _map(self) -> _typemap.TypeMap:
        return self.tmap if self.tmap is not None else _typemap.named(self.dtype)

    # mpi4py's methods, as programs call them
    @classmethod
    def fromcode(cls, code: str) -> Datatype:
        """The named type of a numpy/struct type code (``'i'``, ``'f8'``, ``'d'``, ...), as ``MPI._typedict`` has it."""
        try:
            return TYPEDICT[code]
        except (KeyError, TypeError):
            raise ValueError(f"cannot map code {code!r} to MPI datatype") from None

    def Get_size(self) -> int:
        """Bytes of data in one element (``MPI_Type_size``): a pair type's padding is not data (DOUBLE_INT: 12)."""
        return self.tmap.size if self.tmap is not None else _data_size(self.dtype)

    size = property(Get_size)

    def Get_extent(self) -> tuple[int, int]:
        """``(lower bound, extent)``: a named type's is ``(0, size)`` (a pair type's includes its padding)."""
        if self.tmap is None:
            return 0, self.dtype.itemsize
        return self.tmap.lb, self.tmap.extent

    @property
    def extent(self) -> int:
        """Extent in bytes: the stride of consecutive elements (DOUBLE_INT: 16)."""
        return self.Get_extent()[1]

    @property
    def lb(self) -> int:
        return self.Get_extent()[0]

    @property
    def ub(self) -> int:
        lb, extent = self.Get_extent()
        return lb + extent

    def Get_true_extent(self) -> tuple[int, int]:
        """``(true lb, true extent)``: the span of the bytes the type covers, its bounds aside."""
        return self._map.true_extent() if self.tmap is not None else (0, self.dtype.itemsize)

    true_lb = property(lambda self: self.Get_true_extent()[0])
    true_extent = property(lambda self: self.Get_true_extent()[1])
    true_ub = property(lambda self: sum(self.Get_true_extent()))

    def Get_name(self) -> str:
        """MPI's name for the type, e.g. ``MPI_DOUBLE`` ('' for a derived type, as in MPICH)."""
        return self.name

    def Set_name(self, name: str) -> None:
        self.name = str(name)

    is_named = property(lambda self: self.tmap is None and self.name.startswith("MPI"))
    is_predefined = is_named

    # ---- derived datatypes (MPI-4 section 5.1; the type maps in mpisim.compat.typemap)

    def Create_contiguous(self, count: int) -> Datatype:
        """*count* consecutive elements as one element (``MPI_Type_contiguous``)."""
        return _derived(_typemap.contiguous(int(count), self._map))

    def Create_vector(self, count: int, blocklength: int, stride: int) -> Datatype:
        """*count* blocks of *blocklength* elements, their starts *stride* elements apart (``MPI_Type_vector``)."""
        return _derived(_typemap.vector(int(count), int(blocklength), int(stride), self._map))

    def Create_hvector(self, count: int, blocklength: int, stride: int) -> Datatype:
        """:meth:`Create_vector` with the stride in bytes (``MPI_Type_create_hvector``)."""
        return _derived(_typemap.hvector(int(count), int(blocklength), int(stride), self._map))

    def Create_indexed(self, blocklengths: Any, displacements: Any) -> Datatype:
        """Blocks of ``blocklengths[i]`` elements at ``displacements[i]`` elements (``MPI_Type_indexed``)."""
        return _derived(_typemap.indexed(_ints(blocklengths), _ints(displacements), self._map))

    def Create_hindexed(self, blocklengths: Any, displacements: Any) -> Datatype:
        """:meth:`Create_indexed` with displacements in bytes (``MPI_Type_create_hindexed``)."""
        return _derived(_typemap.hindexed(_ints(blocklengths), _ints(displacements), self._map))

    def Create_indexed_block(self, blocklength: int, displacements: Any) -> Datatype:
        """Blocks of one length at ``displacements[i]`` elements (``MPI_Type_create_indexed_block``)."""
        displs = _ints(displacements)
        return _derived(_typemap.indexed([int(blocklength)] * len(displs), displs, self._map))

    def Create_hindexed_block(self, blocklength: int, displacements: Any) -> Datatype:
        displs = _ints(displacements)
        return _derived(_typemap.hindexed([int(blocklength)] * len(displs), displs, self._map))

    @classmethod
    def Create_struct(cls, blocklengths: Any, displacements: Any, datatypes: Any) -> Datatype:
        """Blocks of ``blocklengths[i]`` elements of ``datatypes[i]`` at ``displacements[i]`` bytes (``MPI_Type_create_struct``)."""
        return _derived(_typemap.struct(_ints(blocklengths), _ints(displacements), [t._map for t in datatypes]))

    def Create_subarray(self, sizes: Any, subsizes: Any, starts: Any, order: int = _typemap.ORDER_C) -> Datatype:
        """The box ``starts .. starts + subsizes`` of an array of shape *sizes* (``MPI_Type_create_subarray``)."""
        return _derived(_typemap.subarray(_ints(sizes), _ints(subsizes), _ints(starts), int(order), self._map))

    def Create_resized(self, lb: int, extent: int) -> Datatype:
        """The same bytes with lower bound *lb* and extent *extent* (``MPI_Type_create_resized``)."""
        return _derived(_typemap.resized(int(lb), int(extent), self._map))

    def Commit(self) -> Datatype:
        """Return the type itself: the type map is ready to use as built."""
        return self

    def Free(self) -> None:
        """Nothing to free."""

    def Dup(self) -> Datatype:
        """Return a copy of the type."""
        return Datatype(self.name, self.dtype, self.tmap)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Datatype) and other.dtype == self.dtype and other.name == self.name and \
            other.tmap is self.tmap

    def __hash__(self) -> int:
        return hash((self.name, self.dtype))

    def __repr__(self) -> str:
        return f"<mpi4py.MPI.Datatype {self.name}>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in Datatype.__slots__:
            raise AttributeError(name)
        raise unsupported(f"Datatype.{name}")


def _ints(values: Any) -> list[int]:
    return [int(v) for v in values]


def _derived(tmap: _typemap.TypeMap) -> Datatype:
    """A derived type over *tmap*; dense bytes of one basic type are also a numpy dtype, read in place."""
    dense = (tmap.basic is not None and tmap.lb == 0 and tmap.extent == tmap.size
             and np.array_equal(tmap.offsets, np.arange(tmap.size)))
    if dense:
        n = tmap.size // tmap.basic.itemsize
        return Datatype("", np.dtype((tmap.basic, (n,))) if n != 1 else tmap.basic)
    return Datatype("", np.dtype((np.void, max(tmap.size, 1))), tmap)


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
    #: A derived type's elements travel packed: *array* is their packed copy, and a receive's
    #: bytes go back into the buffer's memory at :meth:`finish`, as ``(memory, [(start, count), ...])``.
    scattered: tuple[np.ndarray, list[tuple[int, int]]] | None = None

    def finish(self) -> None:
        """After a receive into a derived type's packed copy: put the bytes where the type map says."""
        if self.scattered is None:
            return
        memory, runs = self.scattered
        tmap = self.datatype.tmap
        at = 0
        per = tmap.size // self.array.itemsize if self.array.itemsize else 0
        for start, count in runs:
            _typemap.unpack(memory, tmap, count, self.array[at:at + count * per], start)
            at += count * per


def memory_of(obj: Any) -> np.ndarray:
    """*obj*'s memory as a one-dimensional numpy view (any buffer mpi4py accepts); BufferError or TypeError if none."""
    try:
        return _memory(obj)
    except BufferSpecError as err:
        raise err.raises(str(err)) from None


def _memory(obj: Any) -> np.ndarray:
    """*obj*'s memory as a one-dimensional numpy array of its own element type (a view)."""
    if obj is None:  # mpi4py's empty message: no memory, zero bytes (MPI.BOTTOM with no count)
        return np.zeros(0, np.uint8)
    if isinstance(obj, np.ndarray):
        if not (obj.flags.c_contiguous or obj.flags.f_contiguous):
            raise BufferSpecError("dlpack: buffer is not contiguous (MPI needs one block of memory; "
                                  "pass a copy: np.ascontiguousarray)", BufferError)
        return obj.reshape(-1, order="A")
    try:
        view = memoryview(obj)
    except TypeError:
        if _device.is_device(obj):  # mpi4py's order: the buffer protocol, then DLPack, then CUDA's interface
            try:
                return _device.host_view(obj)
            except _device.DeviceBufferError as err:
                raise BufferSpecError(str(err), BufferError) from None
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


def parse(spec: Any, *, vector: bool = False, blocks: int | None = None) -> Spec:
    """Resolve a buffer specification to a :class:`Spec` (see the module docstring).

    With *vector* (the v-collectives), the list form is ``[buf, counts, displs, datatype]``,
    ``[buf, (counts, displs), datatype]``, ``[buf, counts, datatype]`` or ``[buf, counts]``.
    With *blocks* (the buffer of a gather's root, a scatter's root, an allgather or alltoall:
    one block per rank), a count is the count of each block, as in mpi4py and MPI
    (``Gather(IN_PLACE, [buf, n, MPI.BYTE])`` receives n bytes from each rank).
    """
    if not isinstance(spec, list | tuple) and vector and blocks is not None:
        spec = [spec]  # a bare buffer of a v-call: counts and displacements derived as for [buf]
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
    if datatype is not None and datatype.tmap is not None:
        return _packed(memory, datatype, rest, vector, blocks or 1)
    array = _retype(memory, datatype, bool(rest)) if datatype is not None else memory
    datatype = datatype or datatype_of(array.dtype)
    if vector:
        counts: Any = None
        displs: Any = None
        if len(rest) == 1 and isinstance(rest[0], tuple) and len(rest[0]) == 2:
            counts, displs = rest[0]
        elif len(rest) >= 1:
            counts = rest[0]
            displs = rest[1] if len(rest) > 1 else None
        if counts is None:
            if blocks is None:  # a neighbourhood call's buffer: its counts come from the caller
                return Spec(array, datatype)
            # no counts: mpi4py splits the buffer into *blocks* runs, the first size % blocks one longer
            counts = [array.size // blocks + (array.size % blocks > i) for i in range(blocks)]
        if np.isscalar(counts):  # one count for every rank, as mpi4py reads it
            if blocks is None and int(counts):
                raise BufferSpecError("a v-call needs a count per rank, got a single count")
            counts = [int(counts)] * (blocks or 1)
        counts = [int(c) for c in counts]
        if displs is None:
            displs = [0, *itertools.accumulate(counts)][:-1]
        elif np.isscalar(displs):  # one displacement: a stride, block r starts at r * displs (mpi4py)
            displs = [int(displs) * r for r in range(len(counts))]
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
        count = int(count) * (blocks or 1)
    count, displ = int(count), int(displ)
    if displ + count > array.size:
        raise BufferSpecError(f"count {count} (from element {displ}) is more than the buffer's {array.size} "
                              f"elements of {datatype.name}", ValueError)  # mpi4py's count errors are ValueErrors
    return Spec(array[displ:displ + count], datatype)


def _packed(memory: np.ndarray, datatype: Datatype, rest: list[Any], vector: bool, blocks: int) -> Spec:
    """A buffer of a derived type: its elements' bytes packed (see :class:`Spec`), counts in elements of the type.

    ``[buf, count, type]``: *count* elements from the buffer's start (``(count, displ)``: from
    element *displ*, one extent each); without a count, as many whole extents as the buffer
    holds. ``[buf, counts, displs, type]`` (v-calls): block r is ``counts[r]`` elements from
    element ``displs[r]``; the packed blocks follow each other, so their counts and
    displacements become the packed array's.
    """
    tmap = datatype.tmap
    unit = tmap.basic.itemsize if tmap.basic is not None else 1
    per = tmap.size // unit  # packed array elements per element of the type
    if vector:
        if len(rest) == 1 and isinstance(rest[0], tuple):
            counts, displs = rest[0]
        else:
            counts, displs = (rest[0] if rest else None), (rest[1] if len(rest) > 1 else None)
        if counts is None or np.isscalar(counts):
            raise BufferSpecError("a v-call with a derived datatype needs a count per rank: [buf, counts, displs, type]")
        counts = [int(c) for c in counts]
        displs = [int(d) for d in displs] if displs is not None else [sum(counts[:i]) for i in range(len(counts))]
        runs = list(zip(displs, counts, strict=True))
    else:
        count, displ = (rest[0] if rest else None), (rest[1] if len(rest) == 2 else 0)
        if isinstance(count, tuple):
            count, displ = count
        if count is None:
            count = memory.nbytes // tmap.extent if tmap.extent > 0 else 0
        else:
            count = int(count) * blocks
        runs = [(int(displ), int(count))]
    for start, count in runs:
        if _typemap.reach(tmap, start + count) > memory.nbytes:
            raise BufferSpecError(f"{count} elements of a derived datatype (extent {tmap.extent} B) from element "
                                  f"{start} reach past the buffer's {memory.nbytes} bytes")
    parts = [_typemap.pack(memory, tmap, count, start) for start, count in runs]
    array = np.concatenate(parts) if parts else np.zeros(0, tmap.basic or np.uint8)
    if tmap.basic is None:
        array = array.view(np.uint8)
    spec = Spec(array, datatype, scattered=(memory, runs))
    if vector:
        packed_counts = [c * per for _, c in runs]
        spec.counts, spec.displs = packed_counts, [sum(packed_counts[:i]) for i in range(len(packed_counts))]
    return spec


def writable(spec: Spec, call: str) -> np.ndarray:
    """The spec's elements, checked writeable (a receive writes into them)."""
    if not spec.array.flags.writeable:
        raise BufferSpecError("Object is not writable. (the receive buffer is read-only, bytes or a read-only "
                              "array: pass a bytearray or a writeable numpy array)", BufferError)
    return spec.array
