"""``MPI.Datatype``: MPI's named datatypes and the derived ones built from them, as mpi4py shows them.

A *named* type (``MPI.DOUBLE``) is a numpy dtype with MPI's name. A *derived* type
(``Create_vector``, ``Create_struct``, ``Create_subarray``, ``Create_darray``, ...) carries its
type map (:mod:`mpisim.compat.typemap`): a message of it moves exactly the bytes the map
covers, packed, and the network is charged for those (one whose bytes are dense, as
``Create_contiguous`` of a named type, is read in place). Every derived type also keeps the call that made it (:mod:`mpisim.compat.envelope`), so
``Get_envelope``, ``Get_contents``, ``decode`` and pickling work as in mpi4py.

**Handles.** As an MPI handle, ``MPI.Datatype(t)`` is the same type as ``t`` (equal, not
identical); ``Free`` makes the object it is called on ``DATATYPE_NULL`` and nothing else: a type
built from ``t`` keeps its own reference, as MPI's reference counts do. Named types compare by
MPI name (``MPI.FLOAT32_T`` is ``MPI.FLOAT``), derived ones by handle.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mpisim.compat import darray as _darray
from mpisim.compat import envelope as _env
from mpisim.compat import typemap as _typemap
from mpisim.compat.unsupported import Strict, unsupported
from mpisim.errors import MPIError
from mpisim.mpi.constants import ERR_ARG, ERR_COUNT, ERR_TYPE

#: numpy's void types stop below 2 GiB: a larger derived type is never read in place (its map packs it)
_VOID_MAX = (1 << 31) - 1


class Datatype(metaclass=Strict):
    """An MPI datatype: a named one (``MPI.DOUBLE``: MPI's name over a numpy dtype) or a derived one.

    ``Datatype(name, dtype, tmap, recipe)`` is mpisim's own constructor; a program's
    ``MPI.Datatype()`` is ``DATATYPE_NULL`` and ``MPI.Datatype(t)`` a new handle of *t*. Names
    mpisim does not simulate are an UnsupportedCall naming them, on an instance as on the class.
    """

    __slots__ = ("_id", "_recipe", "dtype", "name", "tmap")

    def __init__(self, datatype: Any = None, dtype: Any = None, tmap: _typemap.TypeMap | None = None,
                 recipe: _env.Recipe | None = None) -> None:
        if isinstance(datatype, str) and dtype is not None:
            self.name = datatype
            self.dtype = np.dtype(dtype)
            self.tmap = tmap  # None: named (or dense), read in place as self.dtype
            self._recipe = recipe  # None: a named type
            self._id = object() if recipe is not None else None  # a derived type's handle
            return
        if datatype is None:
            datatype = DATATYPE_NULL
        if not isinstance(datatype, Datatype):
            raise TypeError(f"Argument 'datatype' has incorrect type (expected mpi4py.MPI.Datatype, got "
                            f"{type(datatype).__name__})")
        self._become(datatype)

    def _become(self, other: Datatype) -> None:
        self.name, self.dtype, self.tmap, self._recipe, self._id = \
            other.name, other.dtype, other.tmap, other._recipe, other._id

    @property
    def _map(self) -> _typemap.TypeMap:
        return self.tmap if self.tmap is not None else _typemap.named(self.dtype)

    def _is_null(self) -> bool:
        return self._id is None and self.name == "MPI_DATATYPE_NULL"

    def _valid(self, call: str) -> Datatype:
        if self._is_null():
            raise MPIError(f"Invalid datatype: {call}(MPI_DATATYPE_NULL): Datatype for argument datatype is a "
                           "null datatype", error_class=ERR_TYPE)
        return self

    def __bool__(self) -> bool:
        return not self._is_null()

    # ---- mpi4py's methods, as programs call them

    @classmethod
    def fromcode(cls, code: str) -> Datatype:
        """The named type of a numpy/struct type code (``'i'``, ``'f8'``, ``'d'``, ...), as ``MPI._typedict`` has it."""
        try:
            return TYPEDICT[code]
        except (KeyError, TypeError):
            raise ValueError(f"cannot map code {code!r} to MPI datatype") from None

    def Get_size(self) -> int:
        """Bytes of data in one element (``MPI_Type_size``): a pair type's padding is not data (DOUBLE_INT: 12)."""
        self._valid("MPI_Type_size")
        return self.tmap.size if self.tmap is not None else _data_size(self.dtype)

    size = property(Get_size)

    def Get_extent(self) -> tuple[int, int]:
        """``(lower bound, extent)``: a named type's is ``(0, size)`` (a pair type's includes its padding)."""
        self._valid("MPI_Type_get_extent")
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
        self._valid("MPI_Type_get_true_extent")
        return self._map.true_extent()  # a pair type's: its fields' span (DOUBLE_INT: 12 B of its 16)

    true_lb = property(lambda self: self.Get_true_extent()[0])
    true_extent = property(lambda self: self.Get_true_extent()[1])
    true_ub = property(lambda self: sum(self.Get_true_extent()))

    def Get_name(self) -> str:
        """MPI's name for the type, e.g. ``MPI_DOUBLE`` ('' for a derived type, as in MPICH)."""
        return self.name

    def Set_name(self, name: str) -> None:
        self.name = str(name)

    # ---- decoding (MPI-4 section 5.1.13; the recipes in mpisim.compat.envelope)

    def Get_envelope(self) -> tuple[int, int, int, int, int]:
        """``(ni, na, nc, nd, combiner)``: how many arguments of each kind the constructor took, and which it was."""
        self._valid("MPI_Type_get_envelope")
        return self._recipe.envelope if self._recipe is not None else (0, 0, 0, 0, _env.NAMED)

    envelope = property(Get_envelope)
    combiner = property(lambda self: self.Get_envelope()[-1])

    def Get_contents(self) -> tuple[list[int], list[int], list[int], list[Datatype]]:
        """The constructor's arguments: ``(integers, addresses, counts, datatypes)`` (``MPI_Type_get_contents``)."""
        self._valid("MPI_Type_get_contents")
        if self._recipe is None:
            raise MPIError("Invalid datatype: MPI_Type_get_contents of a named datatype", error_class=ERR_TYPE)
        r = self._recipe
        return list(r.integers), list(r.addresses), list(r.counts), [Datatype(t) for t in r.types]

    contents = property(Get_contents)

    def decode(self) -> tuple[Datatype, str, dict[str, Any]]:
        """``(base type, combiner name, arguments)``: ``base.Create_<name>(**arguments)`` makes the type again."""
        self._valid("MPI_Type_get_envelope")
        if self._recipe is None:
            return self, "NAMED", {}
        name, params = _env.decode(self._recipe)
        if "datatypes" in params:
            params["datatypes"] = [Datatype(t) for t in params["datatypes"]]
        types = self._recipe.types
        return (Datatype(types[0]) if len(types) == 1 else DATATYPE_NULL), name, params

    @property
    def is_named(self) -> bool:
        return self.combiner == _env.NAMED

    @property
    def is_predefined(self) -> bool:
        return self._is_null() or self.combiner in _env.PREDEFINED

    def __reduce__(self) -> Any:
        """Pickled as mpi4py pickles it: a named type by name, a derived one as its base and constructor call."""
        if self._recipe is None:
            constant = _BY_NAME.get(self.name)
            if constant is None:
                raise ValueError(f"cannot serialize the unnamed datatype {self.name!r}")
            return (_constant, (constant[0],)) if constant[1] is self else (Datatype, (constant[1],))
        base, name, params = self.decode()
        return _create, (base, name, params)

    # ---- Python/NumPy interoperability: mpi4py's codes

    def _codes(self) -> tuple[str, str, str] | None:
        """``(code, typechar, typestr)`` when the type has them (named basic types, their dups, Fortran-90 types)."""
        if self._is_null():
            return None
        if self._recipe is None:
            char = _env.CHARS.get(self.name)
            if char is None:
                return None
            typestr = _env.STRS[char]
            return (typestr if self.name in _env.SIZED else char), char, typestr
        kind = self._recipe.combiner
        if kind == _env.DUP:
            return self._recipe.types[0]._codes()
        if kind in (_env.F90_INTEGER, _env.F90_REAL, _env.F90_COMPLEX):
            char, typestr = _env.f90_codes(kind, self.Get_size())
            return typestr, char or "V", typestr
        return None

    def tocode(self) -> str:
        """The numpy type code of a predefined type (``'d'``, ``'i4'``); ValueError for the others."""
        codes = self._codes()
        if codes is None:
            raise ValueError("cannot map to character code or type string")
        return codes[0]

    @property
    def typechar(self) -> str:
        codes = self._codes()
        return "" if self._is_null() else codes[1] if codes else "V"

    @property
    def typestr(self) -> str:
        codes = self._codes()
        return "" if self._is_null() else codes[2] if codes else f"V{self.extent}"

    # ---- derived datatypes (MPI-4 section 5.1; the type maps in mpisim.compat.typemap)

    def Dup(self) -> Datatype:
        """A new type with the same type map (``MPI_Type_dup``): combiner DUP, its base this type."""
        self._valid("MPI_Type_dup")
        return Datatype("", self.dtype, self.tmap, _env.Recipe(_env.DUP, types=(_kept(self),)))

    Create_dup = Dup

    def Create_contiguous(self, count: int) -> Datatype:
        """*count* consecutive elements as one element (``MPI_Type_contiguous``)."""
        count = _count(count)
        return _derived(_typemap.contiguous(count, self._old()), _env.contiguous(count, _kept(self)))

    def Create_vector(self, count: int, blocklength: int, stride: int) -> Datatype:
        """*count* blocks of *blocklength* elements, their starts *stride* elements apart (``MPI_Type_vector``)."""
        count, blocklength, stride = _count(count), _count(blocklength), int(stride)
        return _derived(_typemap.vector(count, blocklength, stride, self._old()),
                        _env.strided(_env.VECTOR, count, blocklength, stride, _kept(self)))

    def Create_hvector(self, count: int, blocklength: int, stride: int) -> Datatype:
        """:meth:`Create_vector` with the stride in bytes (``MPI_Type_create_hvector``)."""
        count, blocklength, stride = _count(count), _count(blocklength), int(stride)
        return _derived(_typemap.hvector(count, blocklength, stride, self._old()),
                        _env.strided(_env.HVECTOR, count, blocklength, stride, _kept(self)))

    def Create_indexed(self, blocklengths: Any, displacements: Any) -> Datatype:
        """Blocks of ``blocklengths[i]`` elements at ``displacements[i]`` elements (``MPI_Type_indexed``)."""
        lengths, displs = _counts(blocklengths), _same(displacements, blocklengths)
        return _derived(_typemap.indexed(lengths, displs, self._old()),
                        _env.indexed(_env.INDEXED, lengths, displs, _kept(self)))

    def Create_hindexed(self, blocklengths: Any, displacements: Any) -> Datatype:
        """:meth:`Create_indexed` with displacements in bytes (``MPI_Type_create_hindexed``)."""
        lengths, displs = _counts(blocklengths), _same(displacements, blocklengths)
        return _derived(_typemap.hindexed(lengths, displs, self._old()),
                        _env.indexed(_env.HINDEXED, lengths, displs, _kept(self)))

    def Create_indexed_block(self, blocklength: int, displacements: Any) -> Datatype:
        """Blocks of one length at ``displacements[i]`` elements (``MPI_Type_create_indexed_block``)."""
        blocklength, displs = _count(blocklength), _ints(displacements)
        return _derived(_typemap.indexed([blocklength] * len(displs), displs, self._old()),
                        _env.indexed_block(_env.INDEXED_BLOCK, blocklength, displs, _kept(self)))

    def Create_hindexed_block(self, blocklength: int, displacements: Any) -> Datatype:
        """Blocks of one length at ``displacements[i]`` bytes (``MPI_Type_create_hindexed_block``)."""
        blocklength, displs = _count(blocklength), _ints(displacements)
        return _derived(_typemap.hindexed([blocklength] * len(displs), displs, self._old()),
                        _env.indexed_block(_env.HINDEXED_BLOCK, blocklength, displs, _kept(self)))

    @classmethod
    def Create_struct(cls, blocklengths: Any, displacements: Any, datatypes: Any) -> Datatype:
        """Blocks of ``blocklengths[i]`` elements of ``datatypes[i]`` at ``displacements[i]`` bytes (``MPI_Type_create_struct``)."""
        lengths, displs = _counts(blocklengths), _same(displacements, blocklengths)
        types = list(datatypes)
        if len(types) != len(lengths):
            raise ValueError(f"expecting {len(lengths)} items, got {len(types)}")
        return _derived(_typemap.struct(lengths, displs, [t._old() for t in types]),
                        _env.struct(lengths, displs, [_kept(t) for t in types]))

    def Create_subarray(self, sizes: Any, subsizes: Any, starts: Any, order: int = _typemap.ORDER_C) -> Datatype:
        """The box ``starts .. starts + subsizes`` of an array of shape *sizes* (``MPI_Type_create_subarray``)."""
        sizes, subsizes, starts, order = _ints(sizes), _same(subsizes, sizes), _same(starts, sizes), int(order)
        if order not in (_typemap.ORDER_C, _typemap.ORDER_FORTRAN):
            raise MPIError(f"Invalid storage order ({order})", error_class=ERR_ARG)
        return _derived(_typemap.subarray(sizes, subsizes, starts, order, self._old()),
                        _env.subarray(sizes, subsizes, starts, order, _kept(self)))

    def Create_darray(self, size: int, rank: int, gsizes: Any, distribs: Any, dargs: Any, psizes: Any,
                      order: int = _typemap.ORDER_C) -> Datatype:
        """Process *rank*'s part of an array distributed over a process grid (``MPI_Type_create_darray``)."""
        gsizes = _ints(gsizes)
        distribs, dargs, psizes = _same(distribs, gsizes), _same(dargs, gsizes), _same(psizes, gsizes)
        size, rank, order = int(size), int(rank), int(order)
        tmap = _darray.darray(size, rank, gsizes, distribs, dargs, psizes, order, self._old())
        return _derived(tmap, _env.darray(size, rank, gsizes, distribs, dargs, psizes, order, _kept(self)))

    def Create_resized(self, lb: int, extent: int) -> Datatype:
        """The same bytes with lower bound *lb* and extent *extent* (``MPI_Type_create_resized``)."""
        lb, extent = int(lb), int(extent)
        return _derived(_typemap.resized(lb, extent, self._old()), _env.resized(lb, extent, _kept(self)))

    Resized = Create_resized

    @classmethod
    def Get_value_index(cls, value: Datatype, index: Datatype) -> Datatype:
        """The MAXLOC/MINLOC pair type of *value* and *index* (``MPI.DOUBLE, MPI.INT`` -> ``DOUBLE_INT``), else DATATYPE_NULL."""
        value._valid("MPI_Type_get_value_index")
        index._valid("MPI_Type_get_value_index")
        pair = _PAIRS.get(value.name) if index.name == "MPI_INT" else None
        return DATATYPES[pair] if pair is not None else Datatype()

    @classmethod
    def Create_f90_integer(cls, r: int) -> Datatype:
        """The integer type of at least *r* decimal digits of range (Fortran's ``selected_int_kind``)."""
        return _f90(_env.F90_INTEGER, (int(r),))

    @classmethod
    def Create_f90_real(cls, p: int, r: int) -> Datatype:
        """The real type of *p* digits of precision and exponent range *r* (``selected_real_kind``)."""
        return _f90(_env.F90_REAL, (int(p), int(r)))

    @classmethod
    def Create_f90_complex(cls, p: int, r: int) -> Datatype:
        """The complex type whose parts are ``Create_f90_real(p, r)``."""
        return _f90(_env.F90_COMPLEX, (int(p), int(r)))

    @classmethod
    def Match_size(cls, typeclass: int, size: int) -> Datatype:
        """The Fortran type of *typeclass* (``MPI.TYPECLASS_REAL``, ...) that is *size* bytes (``MPI_Type_match_size``)."""
        name, dtype = _env.match_size(int(typeclass), int(size))
        found = _BY_NAME.get(name)
        return found[1] if found is not None else Datatype(name, dtype)

    def _old(self) -> _typemap.TypeMap:
        """The type map, as the old type of a constructor."""
        return self._valid("MPI_Type_create")._map

    def Commit(self) -> Datatype:
        """Return the type itself: the type map is ready to use as built."""
        return self._valid("MPI_Type_commit")

    def Free(self) -> None:
        """Release this handle: the object becomes DATATYPE_NULL (a named type cannot be freed)."""
        self._valid("MPI_Type_free")
        if self._recipe is None:
            raise MPIError("Invalid datatype: MPI_Type_free: Cannot free permanent data type", error_class=ERR_TYPE)
        self._become(DATATYPE_NULL)

    def free(self) -> None:
        """:meth:`Free`, unless the type is null or predefined."""
        if not self.is_predefined:
            self.Free()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Datatype):
            return NotImplemented
        if self._id is not None or other._id is not None:
            return self._id is other._id
        return other.dtype == self.dtype and other.name == self.name

    def __hash__(self) -> int:
        return hash(self._id) if self._id is not None else hash((self.name, self.dtype))

    def __repr__(self) -> str:
        return f"<mpi4py.MPI.Datatype {self.name or self.typestr}>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in Datatype.__slots__:
            raise AttributeError(name)
        raise unsupported(f"Datatype.{name}")


def _ints(values: Any) -> list[int]:
    return [int(v) for v in values]


def _same(values: Any, like: Any) -> list[int]:
    """*values* as integers, as many as *like* has (mpi4py's check)."""
    out = _ints(values)
    if len(out) != len(like):
        raise ValueError(f"expecting {len(like)} items, got {len(out)}")
    return out


def _count(value: Any) -> int:
    count = int(value)
    if count < 0:
        raise MPIError(f"Negative count, value is {count}", error_class=ERR_COUNT)
    return count


def _counts(values: Any) -> list[int]:
    return [_count(v) for v in values]


def _kept(datatype: Datatype) -> Datatype:
    """The old type as a constructor keeps it: a handle of its own, so freeing the caller's does not touch it."""
    return datatype if datatype._recipe is None else Datatype(datatype)


def _derived(tmap: _typemap.TypeMap, recipe: _env.Recipe) -> Datatype:
    """A derived type over *tmap* (a buffer of it is read through the map: in place when its bytes are dense)."""
    return Datatype("", np.dtype((np.void, min(max(tmap.size, 1), _VOID_MAX))), tmap, recipe)


#: The Fortran-90 types made so far: MPI makes each (combiner, p, r) once and returns it again
_F90: dict[tuple[int, tuple[int, ...]], Datatype] = {}


def _f90(combiner: int, args: tuple[int, ...]) -> Datatype:
    made = _F90.get((combiner, args))
    if made is None:
        base = _env.f90_base(combiner, *((0, *args) if combiner == _env.F90_INTEGER else args))
        made = _F90[(combiner, args)] = Datatype("", base, None, _env.Recipe(combiner, integers=args))
    return Datatype(made)  # a handle of it: freeing it does not free MPI's own


def _constant(attr: str) -> Datatype:
    """The named type ``MPI.<attr>`` (how a pickled named type comes back as itself)."""
    return NAMED_TYPES[attr]


def _create(base: Datatype, combiner: str, params: dict[str, Any]) -> Datatype:
    """``base.Create_<combiner>(**params)``, committed: how a pickled derived type is made again (mpi4py's)."""
    return getattr(base, f"Create_{combiner.lower()}")(**params).Commit()


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

def _named_types() -> dict[str, Datatype]:
    """One object per MPI name: an alias (``FLOAT32_T``, ``SIGNED_INT``) is the same object, as in mpi4py."""
    made: dict[tuple[str, np.dtype], Datatype] = {}
    return {attr: made.setdefault((name, np.dtype(dtype)), Datatype(name, dtype)) for attr, (name, dtype) in _NAMED.items()}


DATATYPES: dict[str, Datatype] = _named_types()
DATATYPES["INT_INT"] = DATATYPES["TWOINT"]
DATATYPE_NULL = Datatype("MPI_DATATYPE_NULL", np.uint8)

#: Every named type of the ``MPI`` module, by attribute: DATATYPES, plus the types MPICH (built with
#: gfortran on x86-64) has beyond them -- Fortran's 16-byte real and 32-byte complex -- and the names
#: mpi4py always defines but this MPICH does not, which are DATATYPE_NULL there too.
NAMED_TYPES: dict[str, Datatype] = {
    **DATATYPES, "DATATYPE_NULL": DATATYPE_NULL, "REAL16": Datatype("MPI_REAL16", np.longdouble),
    "COMPLEX32": Datatype("MPI_COMPLEX32", np.clongdouble),
    **dict.fromkeys(("BFLOAT16_T", "LOGICAL1", "LOGICAL2", "LOGICAL4", "LOGICAL8", "LOGICAL16", "REAL2", "COMPLEX4",
                     "INTEGER16"), DATATYPE_NULL),
}
#: MPI name -> (attribute, the object): how a named type pickles
_BY_NAME: dict[str, tuple[str, Datatype]] = {}
for _attr, _type in NAMED_TYPES.items():
    _BY_NAME.setdefault(_type.name, (_attr, _type))

#: ``Get_value_index``: the value type's MPI name -> the pair type with an ``int`` index (MPICH's six)
_PAIRS = {"MPI_FLOAT": "FLOAT_INT", "MPI_DOUBLE": "DOUBLE_INT", "MPI_LONG": "LONG_INT", "MPI_SHORT": "SHORT_INT",
          "MPI_INT": "TWOINT", "MPI_LONG_DOUBLE": "LONG_DOUBLE_INT"}

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


