"""Payloads: one code path for real numpy data and for size-only stand-ins.

A payload is what a message carries and what a collective reduces. There are two kinds:

* :class:`DataPayload` wraps a numpy array and really adds, multiplies, splits and joins the
  numbers, in the order the algorithm asks, so float results carry the algorithm's own
  rounding and can be checked against numpy.
* :class:`SizePayload` holds only ``count`` and ``dtype``. It exists for runs too large to
  hold the data (1024 ranks x 1.2 GB) and does only the bookkeeping.

Algorithms never ask which kind they hold (no ``isinstance`` outside this module), and
simulated time depends on ``nbytes`` only, so a run with real data and a run with size-only
payloads produce identical timelines.

Payloads are treated as immutable values: ``split`` returns views (no copy of a 1 GB buffer
to cut it into blocks) and ``combine`` returns a new payload, so a message can carry a view
of the sender's data safely.

**Owned buffers (in place).** Immutability costs memory: a ring allreduce that never writes
into its input needs a second buffer of the same size for its result, and a reduction that
returns a new array allocates one per step. For 8 ranks x 1.2 GB that is the difference
between fitting in memory and not. So a caller may hand a buffer over with :func:`in_place`,
as ``MPI_IN_PLACE`` does: the payload is then *writable*, its slices are writable views of
the same memory, ``Comm.reduce_local`` reduces into it instead of allocating, a receive given
it as ``recvbuf`` gets the data copied into it, and :meth:`Payload.concat` of its blocks in
order is the buffer itself, not a copy. The value a message carries is still fixed when it is
sent: the MPI layer reads a writable payload at the moment its data leaves (an eager send
copies it at once, a rendezvous send when its data is delivered), so a later write into the
sender's buffer never changes what a receiver gets. Size-only payloads have nothing to write
and ignore all this; their timing is the same either way.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, MutableSequence, Sequence
from typing import Any

import numpy as np

from mpisim.mpi.ops import Op


def split_counts(count: int, parts: int) -> list[int]:
    """Return the block sizes of ``np.array_split(range(count), parts)``: the first ``count % parts`` get one more."""
    base, extra = divmod(count, parts)
    return [base + 1 if i < extra else base for i in range(parts)]


def ceil_split_counts(count: int, parts: int) -> list[int]:
    """Return MPICH's ring block sizes: ``ceil(count / parts)`` each until *count* runs out.

    MPICH's ring allreduce (``allreduce_intra_ring.c``) cuts the vector this way, so the last
    block is short and, when ``count < parts * ceil(count / parts)`` by a block or more, the
    trailing blocks are empty (count 3 on 5 ranks: 1, 1, 1, 0, 0). Matching the cut matters
    for real floats: it decides which elements are summed in which order.
    """
    size = -(-count // parts) if parts else 0
    counts = []
    left = count
    for _ in range(parts):
        counts.append(min(size, left))
        left -= counts[-1]
    return counts


def split_offsets(count: int, parts: int) -> list[int]:
    """Return the start offset of each block of :func:`split_counts` (length ``parts + 1``)."""
    offsets = [0]
    for size in split_counts(count, parts):
        offsets.append(offsets[-1] + size)
    return offsets


class Payload(ABC):
    """The common interface of :class:`DataPayload` and :class:`SizePayload`."""

    __slots__ = ("count", "dtype")

    count: int
    dtype: np.dtype
    #: True for an owned buffer that reductions and receives may write into (see :func:`in_place`).
    writable = False
    #: True for flow control (a pipeline's credit, :func:`~mpisim.collectives.bcast.credit`): a
    #: zero-byte message the textbooks' algorithms do not have, so on the single-port network
    #: (:mod:`mpisim.network.ports`) it holds no port. Any other message, a barrier's zero-byte
    #: token included, is a message of the algorithm and takes its round.
    flag = False

    @property
    def nbytes(self) -> int:
        """Size in bytes: ``count * itemsize``."""
        return self.count * self.dtype.itemsize

    @property
    def array(self) -> np.ndarray | None:
        """The numpy array for real data, ``None`` for a size-only payload."""
        return None

    @property
    def has_data(self) -> bool:
        """True when the payload carries real numbers."""
        return False

    def split(self, parts: int) -> list[Payload]:
        """Cut into *parts* blocks with ``np.array_split`` sizes (uneven allowed)."""
        offsets = split_offsets(self.count, parts)
        return [self.slice(offsets[i], offsets[i + 1]) for i in range(parts)]

    def split_block(self, parts: int, index: int) -> Payload:
        """Block *index* of :meth:`split` into *parts*, without the others."""
        return self.split(parts)[index]

    def repeat(self, times: int) -> Payload:
        """*times* copies end to end: ``concat([self] * times)``."""
        return self.concat([self] * times)

    def split_ceil(self, parts: int) -> list[Payload]:
        """Cut into *parts* blocks of MPICH's ring sizes (:func:`ceil_split_counts`)."""
        blocks, start = [], 0
        for size in ceil_split_counts(self.count, parts):
            blocks.append(self.slice(start, start + size))
            start += size
        return blocks

    @abstractmethod
    def slice(self, start: int, stop: int) -> Payload:
        """Return elements ``[start, stop)`` (a view for real data)."""
        ...

    @abstractmethod
    def combine(self, other: Payload, op: Op) -> Payload:
        """Return ``self op other`` element-wise; counts must agree."""
        ...

    @staticmethod
    def concat(parts: Sequence[Payload]) -> Payload:
        """Join payloads end to end (all of the same kind and dtype)."""
        if not parts:
            raise ValueError("concat needs at least one payload")
        return type(parts[0])._concat(parts)

    @classmethod
    @abstractmethod
    def _concat(cls, parts: Sequence[Payload]) -> Payload:
        ...

    @abstractmethod
    def copy(self) -> Payload:
        """Return an independent copy (real data is copied)."""
        ...

    @abstractmethod
    def like(self, count: int) -> Payload:
        """Return a zero-filled payload of the same kind and dtype with *count* elements."""
        ...

    def accumulate(self, inbuf: Payload, op: Op) -> Payload:
        """Return ``inbuf op self``, written into this payload's memory when it is writable.

        A read-only payload is left alone and the result is a new payload, as :meth:`combine`.
        """
        return inbuf.combine(self, op)

    def receive(self, incoming: Payload) -> Payload:
        """Take *incoming*'s elements into this payload's memory if it is writable; return the result.

        The result is this payload (or its first ``incoming.count`` elements); a read-only or
        size-only payload returns *incoming* itself.
        """
        return incoming

    def to_user(self) -> Any:
        """Return what a user program should see: the array for data, the payload itself otherwise."""
        return self


class DataPayload(Payload):
    """Real data: a one-dimensional numpy array (views are kept, never copied needlessly).

    With ``writable=True`` the payload is an owned buffer (see :func:`in_place`); the array
    must then be contiguous, so that the payload and the caller's array share memory.
    """

    __slots__ = ("_array", "writable")

    def __init__(self, array: np.ndarray, *, writable: bool = False) -> None:
        array = np.asarray(array)
        if array.ndim != 1:
            if writable and not array.flags.c_contiguous:
                raise ValueError("an in-place buffer must be a contiguous array (reshape would copy it)")
            array = array.reshape(-1)
        if writable and not array.flags.writeable:
            raise ValueError("an in-place buffer must be a writeable array")
        self._array = array
        self.count = array.shape[0]
        self.dtype = array.dtype
        self.writable = writable

    @classmethod
    def _view(cls, array: np.ndarray, writable: bool) -> DataPayload:
        # NOTE: __init__ without its checks, for slices of an array already checked.
        view = cls.__new__(cls)
        view._array = array
        view.count = array.shape[0]
        view.dtype = array.dtype
        view.writable = writable
        return view

    @property
    def array(self) -> np.ndarray:
        return self._array

    @property
    def has_data(self) -> bool:
        return True

    def slice(self, start: int, stop: int) -> DataPayload:
        return DataPayload._view(self._array[start:stop], self.writable)

    def combine(self, other: Payload, op: Op) -> DataPayload:
        if other.count != self.count:
            raise ValueError(f"cannot combine payloads of {self.count} and {other.count} elements")
        return DataPayload(np.asarray(op(self._array, other.array), dtype=self.dtype))

    def accumulate(self, inbuf: Payload, op: Op) -> DataPayload:
        if not self.writable:
            return inbuf.combine(self, op)  # type: ignore[return-value]
        if inbuf.count != self.count:
            raise ValueError(f"cannot combine payloads of {inbuf.count} and {self.count} elements")
        out = self._array
        if isinstance(op.func, np.ufunc):
            op.func(inbuf.array, out, out=out)  # the same numbers as op(inbuf, self), no new array
        else:
            out[...] = op(inbuf.array, out)
        return self

    def receive(self, incoming: Payload) -> Payload:
        if not self.writable or not incoming.has_data:
            return incoming
        n = incoming.count
        if n > self.count:
            raise ValueError(f"cannot receive {n} elements into a buffer of {self.count}")
        target = self if n == self.count else self.slice(0, n)
        np.copyto(target._array, incoming.array)
        return target

    @classmethod
    def _concat(cls, parts: Sequence[Payload]) -> DataPayload:
        if len(parts) == 1:
            return parts[0]  # type: ignore[return-value]
        whole = _adjacent_views(parts)
        if whole is not None:
            return DataPayload._view(whole, True)
        return DataPayload(np.concatenate([p.array for p in parts]))

    def copy(self) -> DataPayload:
        """Return a read-only copy (a value nobody will write into)."""
        return DataPayload._view(self._array.copy(), False)

    def like(self, count: int) -> DataPayload:
        return DataPayload(np.zeros(count, dtype=self.dtype))

    def to_user(self) -> np.ndarray:
        return self._array

    def __repr__(self) -> str:
        return f"DataPayload({self._array!r})"


class SizePayload(Payload):
    """A size-only stand-in: ``count`` elements of ``dtype``, no numbers."""

    __slots__ = ()

    def __init__(self, count: int, dtype: Any = np.float32) -> None:
        if count < 0:
            raise ValueError(f"count must not be negative, got {count}")
        self.count = int(count)
        self.dtype = np.dtype(dtype)

    def slice(self, start: int, stop: int) -> SizePayload:
        start, stop = max(0, start), min(self.count, stop)
        return SizePayload(max(0, stop - start), self.dtype)

    def split(self, parts: int) -> list[Payload]:
        # NOTE: size-only blocks are immutable and come in at most two sizes: a SizeBlocks
        # holds the two and says which is where, instead of a list of *parts* slots per rank
        # (Rabenseifner over 16,384 ranks: 2.3 GiB of slots; see SizeBlocks).
        return SizeBlocks(self.count, parts, self.dtype)  # type: ignore[return-value]

    def split_block(self, parts: int, index: int) -> SizePayload:
        # NOTE: a collective's every rank asks for its own block: O(1), not a list of *parts*.
        base, extra = divmod(self.count, parts)
        return SizePayload(base + (index < extra), self.dtype)

    def repeat(self, times: int) -> SizePayload:
        """*times* copies end to end (``concat([self] * times)``, without the list)."""
        return SizePayload(self.count * times, self.dtype)

    def split_ceil(self, parts: int) -> list[Payload]:
        # NOTE: as split: full blocks, then at most one short one, then empty ones, shared.
        size = -(-self.count // parts) if parts else 0
        full, rest = divmod(self.count, size) if size else (0, 0)
        blocks: list[Payload] = [SizePayload(size, self.dtype)] * full
        if rest:
            blocks.append(SizePayload(rest, self.dtype))
        return blocks + [SizePayload(0, self.dtype)] * (parts - len(blocks))

    def combine(self, other: Payload, op: Op) -> SizePayload:
        if other.count != self.count:
            raise ValueError(f"cannot combine payloads of {self.count} and {other.count} elements")
        return self

    @classmethod
    def _concat(cls, parts: Sequence[Payload]) -> SizePayload:
        if parts.__class__ is SizeBlocks:
            return SizePayload(parts.total(), parts.dtype)  # type: ignore[attr-defined]
        return SizePayload(sum(p.count for p in parts), parts[0].dtype)

    def copy(self) -> SizePayload:
        return self

    def like(self, count: int) -> SizePayload:
        return SizePayload(count, self.dtype)

    def __repr__(self) -> str:
        return f"SizePayload({self.count}, {self.dtype})"


def _adjacent_views(parts: Sequence[Payload]) -> np.ndarray | None:
    """Return one view spanning *parts* if they are writable, back-to-back views of one buffer, else None.

    Only owned (writable) blocks qualify: joining them in place is exactly what an in-place
    algorithm means by "the buffer now holds all blocks". Read-only blocks are values that
    other ranks may hold too, so their concatenation stays a new array.
    """
    first = parts[0]
    if not first.writable:
        return None
    base = first.array.base  # type: ignore[union-attr]
    itemsize = first.dtype.itemsize
    start = first.array.__array_interface__["data"][0]  # type: ignore[union-attr]
    expected = start
    total = 0
    for part in parts:
        array = part.array
        if (not part.writable or array.base is not base or array.dtype != first.dtype
                or (array.shape[0] > 1 and array.strides[0] != itemsize)):
            return None
        if array.shape[0] and array.__array_interface__["data"][0] != expected:
            return None
        expected += array.shape[0] * itemsize
        total += array.shape[0]
    if not isinstance(base, np.ndarray):
        return None
    # Every part lies inside *base*, back to back from *start*: one view covers them all.
    origin = base.__array_interface__["data"][0]
    flat = base.reshape(-1) if base.flags.c_contiguous else None
    if flat is None or flat.dtype != first.dtype:
        return None
    offset = (start - origin) // itemsize
    return flat[offset:offset + total]


class _InPlace:
    """``IN_PLACE`` (``MPI_IN_PLACE``), the send buffer of an uppercase collective whose data is in its receive buffer."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "IN_PLACE"

    def __reduce__(self) -> str:
        return "IN_PLACE"  # one object, also after pickling


#: ``comm.Allreduce(IN_PLACE, x)``: the input is in ``x`` and the result replaces it (``MPI_IN_PLACE``).
#: mpi4py's ``MPI.IN_PLACE`` is this object under ``mpisim exec``.
IN_PLACE = _InPlace()


def fill(into: Payload, result: Any) -> None:
    """Copy a collective's *result* (a payload or an array) into the caller's owned buffer *into*.

    A result of another dtype is copied as bytes (MPI moves bytes; the types are the
    program's business) and a shorter one fills the first elements. Nothing is copied when
    either side is size-only (``payload: size``) or when the algorithm already worked in
    the caller's memory.
    """
    if result is None or not into.has_data or result.__class__ is SizePayload:
        return
    mine = into.array
    data = result.array if isinstance(result, DataPayload) else np.asarray(result).reshape(-1)
    if data.__array_interface__["data"][0] == mine.__array_interface__["data"][0] and data.nbytes == mine.nbytes:
        return
    if data.dtype != mine.dtype and data.nbytes % mine.dtype.itemsize == 0:
        data = data.view(np.uint8).view(mine.dtype)
    mine[:data.size] = data[:mine.size]


def in_place(buf: Any) -> Payload:
    """Hand *buf* over as an owned buffer that collectives may write into (``MPI_IN_PLACE``).

    ``yield from comm.allreduce(in_place(x))`` leaves the result in ``x`` itself and returns
    it as a payload, allocating no second buffer of x's size; ``bcast`` and ``reduce`` (at the
    root) do the same. For other collectives ``x`` is working space whose contents afterwards
    are unspecified. *buf* is a contiguous numpy array, a :class:`DataPayload` or a
    :class:`SizePayload` (returned unchanged: size-only payloads have no memory).

    Raises ValueError for an array that is not contiguous or not writeable.
    """
    if isinstance(buf, SizePayload):
        return buf
    array = buf.array if isinstance(buf, DataPayload) else buf
    if not isinstance(array, np.ndarray):
        raise ValueError(f"in_place needs a numpy array, got {type(buf).__name__}")
    return DataPayload(array, writable=True)


def as_payload(buf: Any) -> Payload:
    """Wrap a user buffer: a Payload stays itself, anything array-like becomes a DataPayload."""
    # NOTE: the two concrete classes first: isinstance() against an ABC is slow, and this runs
    # for every receive.
    if buf.__class__ is SizePayload or buf.__class__ is DataPayload or isinstance(buf, Payload):
        return buf
    return DataPayload(np.asarray(buf))


def make_payload(count: int, dtype: Any, *, data: bool, fill: np.ndarray | None = None) -> Payload:
    """Create a payload of *count* elements: real data (*fill* or zeros) when *data*, else size-only."""
    if not data:
        return SizePayload(count, dtype)
    if fill is None:
        return DataPayload(np.zeros(count, dtype=dtype))
    return DataPayload(np.asarray(fill, dtype=dtype))


class SizeBlocks(MutableSequence):
    """The blocks of a size-only split, as a list that does not hold them.

    ``SizePayload(n).split(p)`` is p blocks of two sizes: the first ``n mod p`` one element
    longer. Algorithms that cut their buffer into one block per rank (rings, Rabenseifner,
    scatter-allgather) keep such a list on every rank, and p slots on each of p ranks is memory
    quadratic in the ranks; this holds the two blocks and a window ``[start, stop)`` of the
    original indices, so a rank's blocks cost a few dozen bytes whatever p is. It behaves as
    the list would: indexing, slices (a slice is a window, copied as a list slice is),
    assignment (a block of the natural size is the natural block again; any other is kept in
    ``overrides``), iteration and ``Payload.concat`` (its count in closed form). An operation
    that changes its length turns it into a plain list inside (``_list``): rare, and correct.
    """

    __slots__ = ("_base", "_big", "_extra", "_list", "_overrides", "_small", "_start", "_stop", "dtype")

    def __init__(self, count: int, parts: int, dtype: np.dtype, start: int = 0, stop: int | None = None) -> None:
        self.dtype = dtype
        self._base, self._extra = divmod(count, parts)
        self._start, self._stop = start, parts if stop is None else stop
        self._big = SizePayload(self._base + 1, dtype) if self._extra else None
        self._small = SizePayload(self._base, dtype)
        self._overrides: dict[int, Payload] | None = None
        self._list: list[Payload] | None = None

    def _natural(self, j: int) -> SizePayload:
        return self._big if j < self._extra else self._small  # type: ignore[return-value]

    def __len__(self) -> int:
        return len(self._list) if self._list is not None else self._stop - self._start

    def _index(self, i: int) -> int:
        n = self._stop - self._start
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("block index out of range")
        return self._start + i

    def __getitem__(self, i: Any) -> Any:
        if self._list is not None:
            return self._list[i]
        if isinstance(i, slice):
            lo, hi, step = i.indices(self._stop - self._start)
            if step != 1:
                return list(self)[i]
            window = SizeBlocks.__new__(SizeBlocks)
            window.dtype, window._base, window._extra = self.dtype, self._base, self._extra
            window._big, window._small, window._list = self._big, self._small, None
            window._start, window._stop = self._start + lo, self._start + max(lo, hi)
            window._overrides = None
            if self._overrides:
                kept = {j: b for j, b in self._overrides.items() if window._start <= j < window._stop}
                window._overrides = kept or None
            return window
        j = self._index(i)
        if self._overrides is not None and j in self._overrides:
            return self._overrides[j]
        return self._natural(j)

    def _set(self, j: int, block: Payload) -> None:
        natural = self._natural(j)
        if block.__class__ is SizePayload and block.count == natural.count and block.dtype == natural.dtype:
            if self._overrides is not None:
                self._overrides.pop(j, None)
            return
        if self._overrides is None:
            self._overrides = {}
        self._overrides[j] = block

    def __setitem__(self, i: Any, value: Any) -> None:
        if self._list is not None:
            self._list[i] = value
            return
        if isinstance(i, slice):
            lo, hi, step = i.indices(self._stop - self._start)
            values = list(value)
            if step == 1 and len(values) == max(0, hi - lo):
                for k, block in enumerate(values):
                    self._set(self._start + lo + k, block)
                return
            self._materialize()[i] = values
            return
        self._set(self._index(i), value)

    def __delitem__(self, i: Any) -> None:
        del self._materialize()[i]

    def insert(self, index: int, value: Any) -> None:
        self._materialize().insert(index, value)

    def _materialize(self) -> list[Payload]:
        if self._list is None:
            self._list = [self[k] for k in range(self._stop - self._start)]
        return self._list

    def __iter__(self) -> Iterator[Payload]:
        if self._list is not None:
            yield from self._list
            return
        for k in range(self._stop - self._start):
            yield self[k]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # mutable, as a list

    def __add__(self, other: Sequence[Payload]) -> list[Payload]:
        return list(self) + list(other)

    def __radd__(self, other: Sequence[Payload]) -> list[Payload]:
        return list(other) + list(self)

    def __repr__(self) -> str:
        return f"SizeBlocks({list(self)!r})"

    def total(self) -> int:
        """The elements of all blocks, in closed form (as ``sum(b.count for b in self)``)."""
        if self._list is not None:
            return sum(b.count for b in self._list)
        lo, hi = self._start, self._stop
        bigs = max(0, min(hi, self._extra) - lo)
        total = (hi - lo) * self._base + bigs
        for j, block in (self._overrides or {}).items():
            total += block.count - self._natural(j).count
        return total
