"""How a datatype was made: MPI's combiners, envelopes and contents, and mpi4py's ``decode``.

MPI remembers the call that built each derived datatype so a program (or a library that
pickles datatypes, as mpi4py does) can take it apart again (MPI-4 section 5.1.13):

* the *envelope* ``(ni, na, nc, nd, combiner)`` says which constructor it was (``COMBINER_VECTOR``)
  and how many integers, addresses, large counts and datatypes its arguments were;
* the *contents* are those arguments: ``Create_vector(2, 3, 4)`` of ``DOUBLE`` is
  ``([], [], [2, 3, 4], [DOUBLE])``.

mpi4py builds every type with MPI-4's large-count constructors (``MPI_Type_vector_c``), so
MPICH stores their counts, block lengths, strides and displacements as *counts*, and only what
stays an ``int`` (a subarray's dimension count and order, a darray's process grid) as integers;
:class:`Recipe` keeps them in MPICH's order. :func:`decode` turns a recipe back into
mpi4py's ``(base type, combiner name, keyword arguments)``, with which the same constructor
builds the same type again -- how mpi4py pickles a derived datatype.

A named type (``MPI.DOUBLE``) has no recipe: its combiner is ``COMBINER_NAMED``. The Fortran-90
types (``Create_f90_real(p, r)``) have one but are predefined: MPI makes each once and returns
it again, as :func:`f90_base` finds their basic type the way MPICH's tables do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mpisim.errors import MPIError
from mpisim.mpi.constants import ERR_ARG, ERR_OTHER

# MPICH's combiner values (mpi.h)
NAMED, DUP, CONTIGUOUS, VECTOR, HVECTOR, INDEXED, HINDEXED, INDEXED_BLOCK = 1, 2, 3, 4, 6, 7, 9, 10
STRUCT, SUBARRAY, DARRAY, F90_REAL, F90_COMPLEX, F90_INTEGER, RESIZED = 12, 13, 14, 15, 16, 17, 18
HINDEXED_BLOCK, VALUE_INDEX = 19, 20

#: Combiner value -> mpi4py's name for it (``decode``'s second item, ``Create_<name>`` rebuilds).
NAMES = {NAMED: "NAMED", DUP: "DUP", CONTIGUOUS: "CONTIGUOUS", VECTOR: "VECTOR", HVECTOR: "HVECTOR",
         INDEXED: "INDEXED", HINDEXED: "HINDEXED", INDEXED_BLOCK: "INDEXED_BLOCK",
         HINDEXED_BLOCK: "HINDEXED_BLOCK", STRUCT: "STRUCT", SUBARRAY: "SUBARRAY", DARRAY: "DARRAY",
         RESIZED: "RESIZED", VALUE_INDEX: "VALUE_INDEX", F90_INTEGER: "F90_INTEGER", F90_REAL: "F90_REAL",
         F90_COMPLEX: "F90_COMPLEX"}

#: Combiners whose types MPI counts as predefined (``is_predefined``) though they are not named.
PREDEFINED = {NAMED, VALUE_INDEX, F90_INTEGER, F90_REAL, F90_COMPLEX}

# MPICH's type classes (MPI.TYPECLASS_*), for Match_size
TYPECLASS_REAL, TYPECLASS_INTEGER, TYPECLASS_COMPLEX, TYPECLASS_LOGICAL = 1, 2, 3, 4


@dataclass(frozen=True)
class Recipe:
    """A constructor call as MPI keeps it: its combiner and its arguments, by kind, in MPICH's order."""

    combiner: int
    integers: tuple[int, ...] = ()
    addresses: tuple[int, ...] = ()
    counts: tuple[int, ...] = ()
    types: tuple[Any, ...] = ()  # the old type(s): Datatype objects

    @property
    def envelope(self) -> tuple[int, int, int, int, int]:
        return len(self.integers), len(self.addresses), len(self.counts), len(self.types), self.combiner


def _ints(values: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def contiguous(count: int, old: Any) -> Recipe:
    return Recipe(CONTIGUOUS, counts=(count,), types=(old,))


def strided(combiner: int, count: int, blocklength: int, stride: int, old: Any) -> Recipe:
    """VECTOR (stride in elements) or HVECTOR (in bytes)."""
    return Recipe(combiner, counts=(count, blocklength, stride), types=(old,))


def indexed(combiner: int, blocklengths: Any, displacements: Any, old: Any) -> Recipe:
    """INDEXED or HINDEXED: the block count, the lengths, then the displacements."""
    return Recipe(combiner, counts=(len(blocklengths), *_ints(blocklengths), *_ints(displacements)), types=(old,))


def indexed_block(combiner: int, blocklength: int, displacements: Any, old: Any) -> Recipe:
    """INDEXED_BLOCK or HINDEXED_BLOCK: the block count, the one length, the displacements."""
    return Recipe(combiner, counts=(len(displacements), blocklength, *_ints(displacements)), types=(old,))


def struct(blocklengths: Any, displacements: Any, types: Any) -> Recipe:
    return Recipe(STRUCT, counts=(len(blocklengths), *_ints(blocklengths), *_ints(displacements)),
                  types=tuple(types))


def subarray(sizes: Any, subsizes: Any, starts: Any, order: int, old: Any) -> Recipe:
    return Recipe(SUBARRAY, integers=(len(sizes), order), counts=(*_ints(sizes), *_ints(subsizes), *_ints(starts)),
                  types=(old,))


def darray(size: int, rank: int, gsizes: Any, distribs: Any, dargs: Any, psizes: Any, order: int,
           old: Any) -> Recipe:
    integers = (size, rank, len(gsizes), *_ints(distribs), *_ints(dargs), *_ints(psizes), order)
    return Recipe(DARRAY, integers=integers, counts=_ints(gsizes), types=(old,))


def resized(lb: int, extent: int, old: Any) -> Recipe:
    return Recipe(RESIZED, counts=(lb, extent), types=(old,))


def decode(recipe: Recipe) -> tuple[str, dict[str, Any]]:
    """mpi4py's ``(combiner name, keyword arguments)`` of a recipe: ``Create_<name>(**kwargs)`` rebuilds the type."""
    i, c, kind = list(recipe.integers), list(recipe.counts), recipe.combiner
    params: dict[str, Any] = {}
    if kind == CONTIGUOUS:
        params = {"count": c[0]}
    elif kind in (VECTOR, HVECTOR):
        params = {"count": c[0], "blocklength": c[1], "stride": c[2]}
    elif kind in (INDEXED, HINDEXED, STRUCT):
        n = c[0]
        params = {"blocklengths": c[1:n + 1], "displacements": c[n + 1:2 * n + 1]}
        if kind == STRUCT:
            params["datatypes"] = list(recipe.types)
    elif kind in (INDEXED_BLOCK, HINDEXED_BLOCK):
        params = {"blocklength": c[1], "displacements": c[2:c[0] + 2]}
    elif kind == SUBARRAY:
        n = i[0]
        params = {"sizes": c[:n], "subsizes": c[n:2 * n], "starts": c[2 * n:3 * n], "order": i[1]}
    elif kind == DARRAY:
        n = i[2]
        params = {"size": i[0], "rank": i[1], "gsizes": c[:n], "distribs": i[3:3 + n], "dargs": i[3 + n:3 + 2 * n],
                  "psizes": i[3 + 2 * n:3 + 3 * n], "order": i[3 + 3 * n]}
    elif kind == RESIZED:
        params = {"lb": c[0], "extent": c[1]}
    elif kind == F90_INTEGER:
        params = {"r": i[0]}
    elif kind in (F90_REAL, F90_COMPLEX):
        params = {"p": i[0], "r": i[1]}
    return NAMES[kind], params


# ---- Fortran 90's parameterized types: MPICH's tables (x86-64, gfortran: 128-bit integers and reals exist)

#: (largest decimal range, bytes) of the integer kinds, smallest first
_F90_INTEGERS = ((2, 1), (4, 2), (9, 4), (18, 8), (38, 16))
#: (decimal digits of precision, decimal exponent range, bytes) of the real kinds, smallest first
_F90_REALS = ((3, 4, 2), (6, 37, 4), (15, 307, 8), (18, 4931, 16), (33, 4931, 16))
_REAL_DTYPES = {2: np.dtype(np.float16), 4: np.dtype(np.float32), 8: np.dtype(np.float64),
                16: np.dtype(np.longdouble)}
_COMPLEX_DTYPES = {4: np.dtype("V4"), 8: np.dtype(np.complex64), 16: np.dtype(np.complex128),
                   32: np.dtype(np.clongdouble)}


def f90_base(combiner: int, p: int, r: int) -> np.dtype:
    """The numpy type of ``Create_f90_integer(r)`` / ``_real(p, r)`` / ``_complex(p, r)``: the smallest kind that holds it.

    MPICH picks the first kind whose range (and precision) reach the request, and fails with
    ``ERR_OTHER`` when none does, as here.
    """
    if combiner == F90_INTEGER:
        for reach, size in _F90_INTEGERS:
            if reach >= r:
                return np.dtype(f"i{size}") if size <= 8 else np.dtype("V16")
        raise MPIError(f"No integer type with {r} digits of range is available", error_class=ERR_OTHER)
    for digits, exponent, size in _F90_REALS:
        if digits >= p and exponent >= r:
            return _REAL_DTYPES[size] if combiner == F90_REAL else _COMPLEX_DTYPES[2 * size]
    what = "real" if combiner == F90_REAL else "complex"
    raise MPIError(f"No {what} type with both {p} digits of precision and an exponent range of {r} is available",
                   error_class=ERR_OTHER)


#: ``Match_size``'s candidates per type class, MPICH's order (Fortran's sized types): (MPI name, numpy type)
_MATCH = {
    TYPECLASS_INTEGER: (("MPI_INTEGER1", "i1"), ("MPI_INTEGER2", "i2"), ("MPI_INTEGER4", "i4"),
                        ("MPI_INTEGER8", "i8"), ("MPI_INTEGER16", "V16")),
    TYPECLASS_REAL: (("MPI_REAL2", "f2"), ("MPI_REAL4", "f4"), ("MPI_REAL8", "f8"), ("MPI_REAL16", "g")),
    TYPECLASS_COMPLEX: (("MPI_COMPLEX4", "V4"), ("MPI_COMPLEX8", "c8"), ("MPI_COMPLEX16", "c16"),
                        ("MPI_COMPLEX32", "G")),
    TYPECLASS_LOGICAL: (("MPI_LOGICAL", "i4"),),  # MPICH 5 matches Fortran's default LOGICAL only
}


def match_size(typeclass: int, size: int) -> tuple[str, np.dtype]:
    """``(MPI name, numpy type)`` of the type of *typeclass* that is *size* bytes (``MPI_Type_match_size``)."""
    for name, code in _MATCH.get(typeclass, ()):
        if np.dtype(code).itemsize == size:
            return name, np.dtype(code)
    raise MPIError(f"No MPI datatype available for typeclass {typeclass} and size {size}", error_class=ERR_ARG)


# ---- mpi4py's type codes (tocode, typechar, typestr), as mpi4py 4.1 maps MPICH's named types on x86-64

#: MPI name -> mpi4py's character code (typechar) of the named types that have one
CHARS = {
    "MPI_BYTE": "B", "MPI_PACKED": "B", "MPI_AINT": "p", "MPI_OFFSET": "p", "MPI_COUNT": "p", "MPI_CHAR": "c",
    "MPI_CHARACTER": "c", "MPI_WCHAR": "U", "MPI_SIGNED_CHAR": "b", "MPI_SHORT": "h", "MPI_INT": "i",
    "MPI_LONG": "l", "MPI_LONG_LONG_INT": "q", "MPI_UNSIGNED_CHAR": "B", "MPI_UNSIGNED_SHORT": "H",
    "MPI_UNSIGNED": "I", "MPI_UNSIGNED_LONG": "L", "MPI_UNSIGNED_LONG_LONG": "Q", "MPI_FLOAT": "f",
    "MPI_DOUBLE": "d", "MPI_LONG_DOUBLE": "g", "MPIX_C_FLOAT16": "e", "MPI_C_BOOL": "?", "MPI_CXX_BOOL": "?",
    "MPI_INT8_T": "b", "MPI_INT16_T": "h", "MPI_INT32_T": "i", "MPI_INT64_T": "l", "MPI_UINT8_T": "B",
    "MPI_UINT16_T": "H", "MPI_UINT32_T": "I", "MPI_UINT64_T": "L", "MPI_C_COMPLEX": "F",
    "MPI_C_DOUBLE_COMPLEX": "D", "MPI_C_LONG_DOUBLE_COMPLEX": "G", "MPI_CXX_FLOAT_COMPLEX": "F",
    "MPI_CXX_DOUBLE_COMPLEX": "D", "MPI_CXX_LONG_DOUBLE_COMPLEX": "G", "MPI_LOGICAL": "i", "MPI_INTEGER": "i",
    "MPI_REAL": "f", "MPI_DOUBLE_PRECISION": "d", "MPI_COMPLEX": "F", "MPI_DOUBLE_COMPLEX": "D",
    "MPI_INTEGER1": "b", "MPI_INTEGER2": "h", "MPI_INTEGER4": "i", "MPI_INTEGER8": "l", "MPI_REAL4": "f",
    "MPI_REAL8": "d", "MPI_REAL16": "g", "MPI_COMPLEX8": "F", "MPI_COMPLEX16": "D", "MPI_COMPLEX32": "G",
}
#: character code -> numpy type string
STRS = {"?": "b1", "b": "i1", "h": "i2", "i": "i4", "l": "i8", "q": "i8", "p": "i8", "B": "u1", "H": "u2",
        "I": "u4", "L": "u8", "Q": "u8", "e": "f2", "f": "f4", "d": "f8", "g": "f16", "F": "c8", "D": "c16",
        "G": "c32", "c": "S1", "U": "U1"}
#: The sized types, whose code (``tocode``) is their type string (``'i4'``), not their character
SIZED = {"MPI_C_BOOL", "MPI_INT8_T", "MPI_INT16_T", "MPI_INT32_T", "MPI_INT64_T", "MPI_UINT8_T", "MPI_UINT16_T",
         "MPI_UINT32_T", "MPI_UINT64_T", "MPI_INTEGER1", "MPI_INTEGER2", "MPI_INTEGER4", "MPI_INTEGER8",
         "MPI_REAL4", "MPI_REAL8", "MPI_REAL16", "MPI_COMPLEX8", "MPI_COMPLEX16", "MPI_COMPLEX32"}


def f90_codes(combiner: int, size: int) -> tuple[str | None, str | None]:
    """``(typechar, typestr)`` of a Fortran-90 type of *size* bytes (mpi4py: from its kind and size)."""
    kind = {F90_INTEGER: "i", F90_REAL: "f", F90_COMPLEX: "c"}[combiner]
    chars = {"i": {1: "b", 2: "h", 4: "i", 8: "l"}, "f": {2: "e", 4: "f", 8: "d", 16: "g"},
             "c": {8: "F", 16: "D", 32: "G"}}[kind]
    return chars.get(size), f"{kind}{size}"
