"""Derived datatypes' type maps: which bytes of a buffer one element of a derived type covers.

MPI describes a derived datatype by its *type map*: the basic elements it is made of and
their byte displacements, ``{(double, 0), (double, 32), ...}``, with a lower bound ``lb`` and
an ``extent`` (``ub - lb``), the stride between consecutive elements of the type in a buffer.
A message of ``count`` elements of it carries exactly the bytes its type map covers --
``count * size`` bytes, packed -- whatever lies between them (the other columns of a
matrix, the padding of a struct) stays where it is on both sides.

:class:`TypeMap` keeps the byte offsets one element covers (in type-map order, so packing
follows it) and the bounds; the constructors build them as MPI-4 defines them (section 5.1):

=================  ==========================================================================
contiguous(n)      n copies of the old type, one extent apart
vector(n, b, s)    n blocks of b old elements, block starts s old extents apart (hvector: s bytes)
indexed(bs, ds)    block i of bs[i] old elements at ds[i] old extents (hindexed: bytes)
struct(bs, ds, ts) block i of bs[i] elements of ts[i] at ds[i] bytes; the extent rounded up to
                   the largest alignment of its basic types, as C pads a struct (MPICH does)
subarray(...)      a box of a C- or Fortran-ordered array; the extent is the whole array's
resized(lb, ext)   the same bytes with new bounds (to interleave elements: scatter a matrix's blocks)
=================  ==========================================================================

:func:`pack` gathers ``count`` elements' bytes from a buffer into one contiguous array (what a
send moves, and what the network model is charged for); :func:`unpack` puts received bytes
back at the same places.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mpisim.errors import MPIError
from mpisim.mpi.constants import ERR_OTHER

ORDER_C, ORDER_FORTRAN = 56, 57  # MPICH's values of MPI.ORDER_C and MPI.ORDER_FORTRAN (ORDER_F)


@dataclass(frozen=True)
class TypeMap:
    """The bytes one element covers (offsets from the element's start) and its bounds.

    *basic* is the one basic numpy type every byte belongs to, when there is one (a vector of
    doubles): packed data then keeps that type, so a reduction can run on it; None for a mix
    (a struct of a double and an int), whose packed data is bytes.
    """

    offsets: np.ndarray  # int64 byte offsets, in type-map order
    lb: int
    ub: int
    basic: np.dtype | None
    align: int  # the largest alignment of its basic types (a struct's extent is a multiple)

    @property
    def size(self) -> int:
        return int(self.offsets.size)

    @property
    def extent(self) -> int:
        return self.ub - self.lb

    def true_extent(self) -> tuple[int, int]:
        """``(true lb, true extent)``: the span of the bytes themselves, bounds aside."""
        if not self.offsets.size:
            return 0, 0
        low = int(self.offsets.min())
        return low, int(self.offsets.max()) + 1 - low


def named(dtype: np.dtype) -> TypeMap:
    """A named type's map: its own bytes, one itemsize apart."""
    return TypeMap(np.arange(dtype.itemsize, dtype=np.int64), 0, dtype.itemsize,
                   None if dtype.fields else dtype, min(dtype.alignment, 16) or 1)


def _copies(displacements: Sequence[int], old: TypeMap) -> TypeMap:
    """Copies of *old* at the given byte displacements, in order (the building block of every constructor)."""
    disps = np.asarray(displacements, dtype=np.int64)
    if not disps.size:
        return TypeMap(np.zeros(0, np.int64), 0, 0, old.basic, old.align)
    offsets = (disps[:, None] + old.offsets[None, :]).reshape(-1)
    return TypeMap(offsets, int(disps.min()) + old.lb, int(disps.max()) + old.ub, old.basic, old.align)


#: The most bytes one derived type may cover: its map is kept byte by byte (8 B of offset per byte),
#: so a larger type (mpi4py's tests build a 2 GiB one) is refused before it exhausts the memory.
MAX_TYPE_BYTES = 1 << 26


def _bounded(copies: int, old: TypeMap) -> None:
    if copies * old.size > MAX_TYPE_BYTES:
        raise MPIError(f"a derived datatype covering {copies * old.size} bytes: mpisim keeps type maps byte by byte "
                       f"and takes types of at most {MAX_TYPE_BYTES} bytes", error_class=ERR_OTHER)


def contiguous(count: int, old: TypeMap) -> TypeMap:
    _bounded(count, old)
    return _copies([i * old.extent for i in range(count)], old)


def hvector(count: int, blocklength: int, stride_bytes: int, old: TypeMap) -> TypeMap:
    _bounded(count * blocklength, old)
    return _copies([j * stride_bytes + i * old.extent for j in range(count) for i in range(blocklength)], old)


def vector(count: int, blocklength: int, stride: int, old: TypeMap) -> TypeMap:
    return hvector(count, blocklength, stride * old.extent, old)


def hindexed(blocklengths: Sequence[int], displacements_bytes: Sequence[int], old: TypeMap) -> TypeMap:
    _bounded(sum(int(b) for b in blocklengths), old)
    return _copies([d + i * old.extent for b, d in zip(blocklengths, displacements_bytes, strict=True)
                    for i in range(b)], old)


def indexed(blocklengths: Sequence[int], displacements: Sequence[int], old: TypeMap) -> TypeMap:
    return hindexed(blocklengths, [d * old.extent for d in displacements], old)


def struct(blocklengths: Sequence[int], displacements: Sequence[int], types: Sequence[TypeMap]) -> TypeMap:
    _bounded(sum(int(b) * t.size for b, t in zip(blocklengths, types, strict=True)), named(np.dtype("u1")))
    parts = [_copies([d + i * t.extent for i in range(b)], t)
             for b, d, t in zip(blocklengths, displacements, types, strict=True) if b > 0]
    if not parts:
        return TypeMap(np.zeros(0, np.int64), 0, 0, None, 1)
    basics = {p.basic for p in parts}
    align = max(p.align for p in parts)
    lb, ub = min(p.lb for p in parts), max(p.ub for p in parts)
    ub = lb + -(-(ub - lb) // align) * align  # C's padding: the extent is a multiple of the alignment
    basic = basics.pop() if len(basics) == 1 else None
    return TypeMap(np.concatenate([p.offsets for p in parts]), lb, ub, basic, align)


def subarray(sizes: Sequence[int], subsizes: Sequence[int], starts: Sequence[int], order: int,
             old: TypeMap) -> TypeMap:
    sizes, subsizes, starts = list(sizes), list(subsizes), list(starts)
    _bounded(int(np.prod(subsizes, dtype=np.int64)), old)
    if order == ORDER_FORTRAN:  # the first index fastest: the same box of the reversed shape
        sizes, subsizes, starts = sizes[::-1], subsizes[::-1], starts[::-1]
    index = np.ix_(*[np.arange(s, s + n) for s, n in zip(starts, subsizes, strict=True)])
    linear = np.ravel_multi_index(index, sizes).reshape(-1) if sizes else np.zeros(1, np.int64)
    box = _copies(list(linear * old.extent), old)
    return TypeMap(box.offsets, 0, int(np.prod(sizes)) * old.extent, old.basic, old.align)


def resized(lb: int, extent: int, old: TypeMap) -> TypeMap:
    return TypeMap(old.offsets, int(lb), int(lb) + int(extent), old.basic, old.align)


def indices(tmap: TypeMap, count: int, start: int = 0) -> np.ndarray:
    """The byte indices of *count* elements from element *start* of a buffer, in the order they travel."""
    first = (np.arange(start, start + count, dtype=np.int64) * tmap.extent)[:, None]
    return (first + tmap.offsets[None, :]).reshape(-1)


def pack(memory: np.ndarray, tmap: TypeMap, count: int, start: int = 0) -> np.ndarray:
    """The bytes *count* elements cover, packed (a copy), typed as their basic type when they share one."""
    packed = memory.view(np.uint8)[indices(tmap, count, start)]
    return packed.view(tmap.basic) if tmap.basic is not None else packed


def unpack(memory: np.ndarray, tmap: TypeMap, count: int, packed: np.ndarray, start: int = 0) -> None:
    """Write *packed* bytes back where *count* elements of *tmap* keep them in *memory*."""
    memory.view(np.uint8)[indices(tmap, count, start)] = np.ascontiguousarray(packed).view(np.uint8).reshape(-1)


def reach(tmap: TypeMap, count: int) -> int:
    """Bytes of buffer *count* elements need (the last covered byte, plus one)."""
    if not count or not tmap.offsets.size:
        return 0
    return (count - 1) * tmap.extent + int(tmap.offsets.max()) + 1
