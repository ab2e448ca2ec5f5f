"""Derived datatypes' type maps: which bytes of a buffer one element of a derived type covers.

MPI describes a derived datatype by its *type map*: the basic elements it is made of and
their byte displacements, ``{(double, 0), (double, 32), ...}``, with a lower bound ``lb`` and
an ``extent`` (``ub - lb``), the stride between consecutive elements of the type in a buffer.
A message of ``count`` elements of it carries exactly the bytes its type map covers --
``count * size`` bytes, packed -- whatever lies between them (the other columns of a
matrix, the padding of a struct) stays where it is on both sides.

:class:`TypeMap` keeps the bytes one element covers as *runs* -- maximal stretches of
consecutive bytes, ``(start, length)``, in type-map order, so packing follows it -- and the
bounds. A column of a matrix is one run per row, a 2 GiB contiguous type one run: size,
extent and packing cost O(runs), never O(bytes), as MPICH's dataloops do. The constructors
build them as MPI-4 defines them (section 5.1):

=================  ==========================================================================
contiguous(n)      n copies of the old type, one extent apart
vector(n, b, s)    n blocks of b old elements, block starts s old extents apart (hvector: s bytes)
indexed(bs, ds)    block i of bs[i] old elements at ds[i] old extents (hindexed: bytes)
struct(bs, ds, ts) block i of bs[i] elements of ts[i] at ds[i] bytes; the extent rounded up to
                   the largest alignment of its basic types, as C pads a struct (MPICH does)
subarray(...)      a box of a C- or Fortran-ordered array; the extent is the whole array's
resized(lb, ext)   the same bytes with new bounds (to interleave elements: scatter a matrix's blocks)
=================  ==========================================================================

Blocks of zero elements add nothing, not even bounds (but a vector's bounds are its first and
last blocks', empty or not); a type of no elements has ``lb = ub = 0``, and a type without
bytes a true extent of 0 (a vector's: its bounds) -- MPICH's values, checked against it in the
tests.

:func:`pack` gathers ``count`` elements' bytes from a buffer into one contiguous array (what a
send moves, and what the network model is charged for); :func:`unpack` puts received bytes
back at the same places. Long runs are copied as slices, short ones through one index array.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from mpisim.errors import MPIError
from mpisim.mpi.constants import ERR_OTHER

ORDER_C, ORDER_FORTRAN = 56, 57  # MPICH's values of MPI.ORDER_C and MPI.ORDER_FORTRAN (ORDER_F)

#: The most runs one derived type may have (16 B of bookkeeping each): a type of more separate
#: stretches of bytes is refused before it exhausts the memory. Its size in bytes is not limited.
MAX_RUNS = 1 << 22

_EMPTY = np.zeros(0, np.int64)


@dataclass(frozen=True)
class TypeMap:
    """The bytes one element covers, as runs ``(starts[i], lengths[i])`` from the element's start, and its bounds.

    *basic* is the one basic numpy type every byte belongs to, when there is one (a vector of
    doubles): packed data then keeps that type, so a reduction can run on it; None for a mix
    (a struct of a double and an int), whose packed data is bytes.
    """

    starts: np.ndarray  # int64 byte offsets of the runs, in type-map order
    lengths: np.ndarray  # int64 bytes of each run (all > 0)
    lb: int
    ub: int
    basic: np.dtype | None
    align: int  # the largest alignment of its basic types (a struct's extent is a multiple)
    hollow: tuple[int, int] = (0, 0)  # (true lb, true extent) of a map without bytes (MPICH: a vector's are its bounds)

    size: int = field(init=False)  # bytes of data: the runs' total

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", int(self.lengths.sum()))

    @property
    def extent(self) -> int:
        return self.ub - self.lb

    @property
    def runs(self) -> int:
        return int(self.starts.size)

    @property
    def dense(self) -> bool:
        """One run from the lower bound to the upper one: the bytes of consecutive elements follow each other."""
        return self.runs == 1 and int(self.starts[0]) == self.lb and int(self.lengths[0]) == self.extent

    def true_extent(self) -> tuple[int, int]:
        """``(true lb, true extent)``: the span of the bytes themselves, bounds aside."""
        if not self.runs:
            return self.hollow
        low = int(self.starts.min())
        return low, int((self.starts + self.lengths).max()) - low

    @property
    def offsets(self) -> np.ndarray:
        """Every byte offset one element covers, in type-map order (O(bytes): for small types and tests)."""
        return _expand(self.starts, self.lengths)


def _expand(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, np.int64)
    firsts = np.cumsum(lengths) - lengths  # where each run begins in the packed order
    return np.repeat(starts - firsts, lengths) + np.arange(total, dtype=np.int64)


def _merge(starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop empty runs and join each run to the one before when it starts where that one ends."""
    keep = lengths > 0
    starts, lengths = starts[keep], lengths[keep]
    if starts.size < 2:
        return starts.astype(np.int64), lengths.astype(np.int64)
    joins = starts[1:] == starts[:-1] + lengths[:-1]
    if not joins.any():
        return starts, lengths
    heads = np.concatenate([[True], ~joins])  # runs that start a merged run
    return starts[heads], np.add.reduceat(lengths, np.flatnonzero(heads)).astype(np.int64)


def _bounded(runs: int) -> None:
    if runs > MAX_RUNS:
        raise MPIError(f"a derived datatype of {runs} separate blocks of bytes: mpisim takes types of at most "
                       f"{MAX_RUNS}", error_class=ERR_OTHER)


def _empty(basic: np.dtype | None, align: int) -> TypeMap:
    return TypeMap(_EMPTY, _EMPTY, 0, 0, basic, align)


@lru_cache(maxsize=256)
def named(dtype: np.dtype) -> TypeMap:
    """A named type's map: its own bytes (a pair type's fields, C's padding between them not data)."""
    if dtype.fields:
        fields = sorted((offset, sub.itemsize) for sub, offset, *_ in dtype.fields.values())
        starts, lengths = _merge(np.array([f[0] for f in fields], np.int64), np.array([f[1] for f in fields], np.int64))
        return TypeMap(starts, lengths, 0, dtype.itemsize, None, min(dtype.alignment, 16) or 1)
    basic = dtype.subdtype[0] if dtype.subdtype is not None else dtype  # a dense derived type: its elements' type
    return TypeMap(np.zeros(1, np.int64), np.full(1, dtype.itemsize, np.int64), 0, dtype.itemsize, basic,
                   min(dtype.alignment, 16) or 1)


def _copies(displacements: np.ndarray, old: TypeMap) -> TypeMap:
    """Copies of *old* at the given byte displacements, in order (the building block of every constructor)."""
    disps = np.asarray(displacements, dtype=np.int64).reshape(-1)
    if not disps.size or not old.size:
        return _empty(old.basic, old.align)
    _bounded(disps.size * old.runs)
    starts = (disps[:, None] + old.starts[None, :]).reshape(-1)
    lengths = np.broadcast_to(old.lengths, (disps.size, old.runs)).reshape(-1)
    starts, lengths = _merge(starts, lengths)
    return TypeMap(starts, lengths, int(disps.min()) + old.lb, int(disps.max()) + old.ub, old.basic, old.align)


def _repeat(count: int, step: int, old: TypeMap) -> TypeMap:
    """*count* copies of *old*, *step* bytes apart: one run when they touch, in O(1) whatever *count*."""
    if count <= 0 or not old.size:
        return _empty(old.basic, old.align)
    if count == 1:
        return old
    if old.runs == 1 and int(old.lengths[0]) == step and step > 0:
        low, high = 0, (count - 1) * step
        return TypeMap(old.starts.copy(), np.full(1, count * step, np.int64), low + old.lb, high + old.ub,
                       old.basic, old.align)
    _bounded(count * old.runs)
    return _copies(np.arange(count, dtype=np.int64) * step, old)


def contiguous(count: int, old: TypeMap) -> TypeMap:
    return _repeat(count, old.extent, old)


def hvector(count: int, blocklength: int, stride_bytes: int, old: TypeMap) -> TypeMap:
    """*count* blocks of *blocklength* old elements, *stride_bytes* apart.

    The bounds are MPICH's: those of the first and last blocks, even when the blocks are empty
    (a vector of 2 blocks of 0 ints, 3 ints apart, has extent 12 B, and no data).
    """
    if count <= 0 or not old.size:
        return _empty(old.basic, old.align)
    data = _repeat(count, stride_bytes, _repeat(blocklength, old.extent, old))
    span = old.extent * (blocklength - 1)  # from the first element of a block to its last
    reach = stride_bytes * (count - 1)  # from the first block to the last
    lb = old.lb + (reach if stride_bytes < 0 else 0) + (span if old.extent < 0 else 0)
    ub = old.ub + (reach if stride_bytes >= 0 else 0) + (span if old.extent >= 0 else 0)
    return TypeMap(data.starts, data.lengths, lb, ub, old.basic, old.align, (lb, ub - lb))


def vector(count: int, blocklength: int, stride: int, old: TypeMap) -> TypeMap:
    return hvector(count, blocklength, stride * old.extent, old)


def _blocks(parts: list[TypeMap]) -> TypeMap | None:
    """The concatenation of non-empty parts, bounds from those parts only (None: no bytes at all)."""
    parts = [p for p in parts if p.size]
    if not parts:
        return None
    _bounded(sum(p.runs for p in parts))
    starts, lengths = _merge(np.concatenate([p.starts for p in parts]), np.concatenate([p.lengths for p in parts]))
    basics = {p.basic for p in parts}
    basic = basics.pop() if len(basics) == 1 else None
    return TypeMap(starts, lengths, min(p.lb for p in parts), max(p.ub for p in parts), basic,
                   max(p.align for p in parts))


def _shift(tmap: TypeMap, by: int) -> TypeMap:
    return TypeMap(tmap.starts + by, tmap.lengths, tmap.lb + by, tmap.ub + by, tmap.basic, tmap.align)


def hindexed(blocklengths: Sequence[int], displacements_bytes: Sequence[int], old: TypeMap) -> TypeMap:
    blocks = [_shift(_repeat(int(b), old.extent, old), int(d))
              for b, d in zip(blocklengths, displacements_bytes, strict=True) if int(b) > 0]
    return _blocks(blocks) or _empty(old.basic, old.align)


def indexed(blocklengths: Sequence[int], displacements: Sequence[int], old: TypeMap) -> TypeMap:
    return hindexed(blocklengths, [int(d) * old.extent for d in displacements], old)


def struct(blocklengths: Sequence[int], displacements: Sequence[int], types: Sequence[TypeMap]) -> TypeMap:
    parts = [_shift(_repeat(int(b), t.extent, t), int(d))
             for b, d, t in zip(blocklengths, displacements, types, strict=True) if int(b) > 0]
    joined = _blocks(parts)
    if joined is None:
        return _empty(None, 1)
    # C's padding: the extent is a multiple of the largest alignment (MPICH does the same)
    ub = joined.lb + -(-joined.extent // joined.align) * joined.align
    return TypeMap(joined.starts, joined.lengths, joined.lb, ub, joined.basic, joined.align)


def subarray(sizes: Sequence[int], subsizes: Sequence[int], starts: Sequence[int], order: int,
             old: TypeMap) -> TypeMap:
    """The box; its rows (the fastest dimension's runs of elements) are found without listing every element."""
    sizes, subsizes, starts = [int(s) for s in sizes], [int(s) for s in subsizes], [int(s) for s in starts]
    whole = int(np.prod(sizes, dtype=np.int64)) * old.extent
    if order == ORDER_FORTRAN:  # the first index fastest: the same box of the reversed shape
        sizes, subsizes, starts = sizes[::-1], subsizes[::-1], starts[::-1]
    if not sizes or 0 in subsizes:
        return TypeMap(_EMPTY, _EMPTY, 0, whole, old.basic, old.align)
    row = _repeat(subsizes[-1], old.extent, old)
    outer = np.ix_(*[np.arange(s, s + n) for s, n in zip(starts[:-1], subsizes[:-1], strict=True)])
    firsts = (np.ravel_multi_index(outer, sizes[:-1]).reshape(-1) if len(sizes) > 1 else np.zeros(1, np.int64))
    box = _copies((firsts * sizes[-1] + starts[-1]) * old.extent, row)
    return TypeMap(box.starts, box.lengths, 0, whole, old.basic, old.align)


def resized(lb: int, extent: int, old: TypeMap) -> TypeMap:
    return TypeMap(old.starts, old.lengths, int(lb), int(lb) + int(extent), old.basic, old.align, old.hollow)


def _element_runs(tmap: TypeMap, count: int, start: int) -> tuple[np.ndarray, np.ndarray]:
    """The runs of *count* consecutive elements from element *start*, merged, in the order their bytes travel."""
    if count <= 0 or not tmap.size:
        return _EMPTY, _EMPTY
    if tmap.dense:
        return np.array([start * tmap.extent + tmap.lb], np.int64), np.array([count * tmap.extent], np.int64)
    firsts = np.arange(start, start + count, dtype=np.int64) * tmap.extent
    return _merge((firsts[:, None] + tmap.starts[None, :]).reshape(-1),
                  np.broadcast_to(tmap.lengths, (count, tmap.runs)).reshape(-1))


def indices(tmap: TypeMap, count: int, start: int = 0) -> np.ndarray:
    """The byte indices of *count* elements from element *start* of a buffer, in the order they travel."""
    return _expand(*_element_runs(tmap, count, start))


#: Runs at least this long are copied as slices; shorter ones through one index array.
_SLICE = 1024


def _plan(tmap: TypeMap, count: int, start: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(starts, lengths, packed positions)`` of the runs *count* elements cover."""
    starts, lengths = _element_runs(tmap, count, start)
    return starts, lengths, np.cumsum(lengths) - lengths


def _short(starts: np.ndarray, lengths: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Buffer and packed byte indices of the short runs."""
    short = lengths < _SLICE
    return _expand(starts[short], lengths[short]), _expand(at[short], lengths[short])


def _long(starts: np.ndarray, lengths: np.ndarray, at: np.ndarray) -> zip:
    """``(buffer start, length, packed position)`` of each long run."""
    long = lengths >= _SLICE
    return zip(starts[long].tolist(), lengths[long].tolist(), at[long].tolist(), strict=True)


def pack(memory: np.ndarray, tmap: TypeMap, count: int, start: int = 0) -> np.ndarray:
    """The bytes *count* elements cover, packed (a copy), typed as their basic type when they share one."""
    source = memory.view(np.uint8).reshape(-1)
    starts, lengths, at = _plan(tmap, count, start)
    packed = np.empty(int(lengths.sum()), np.uint8)
    frm, to = _short(starts, lengths, at)
    packed[to] = source[frm]
    for s, n, a in _long(starts, lengths, at):
        packed[a:a + n] = source[s:s + n]
    return packed.view(tmap.basic) if tmap.basic is not None and packed.size % tmap.basic.itemsize == 0 else packed


def unpack(memory: np.ndarray, tmap: TypeMap, count: int, packed: np.ndarray, start: int = 0) -> None:
    """Write *packed* bytes back where *count* elements of *tmap* keep them in *memory*."""
    target = memory.view(np.uint8).reshape(-1)
    data = np.ascontiguousarray(packed).view(np.uint8).reshape(-1)
    starts, lengths, at = _plan(tmap, count, start)
    to, frm = _short(starts, lengths, at)
    target[to] = data[frm]
    for s, n, a in _long(starts, lengths, at):
        target[s:s + n] = data[a:a + n]


def reach(tmap: TypeMap, count: int) -> int:
    """Bytes of buffer *count* elements need (the last covered byte, plus one)."""
    if not count or not tmap.runs:
        return 0
    return (count - 1) * tmap.extent + int((tmap.starts + tmap.lengths).max())
