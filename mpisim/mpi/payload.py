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
"""

from __future__ import annotations

from collections.abc import Sequence
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from mpisim.mpi.ops import Op


def split_counts(count: int, parts: int) -> list[int]:
    """Return the block sizes of ``np.array_split(range(count), parts)``: the first ``count % parts`` get one more."""
    base, extra = divmod(count, parts)
    return [base + 1 if i < extra else base for i in range(parts)]


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

    def to_user(self) -> Any:
        """Return what a user program should see: the array for data, the payload itself otherwise."""
        return self


class DataPayload(Payload):
    """Real data: a one-dimensional numpy array (views are kept, never copied needlessly)."""

    __slots__ = ("_array",)

    def __init__(self, array: np.ndarray) -> None:
        array = np.asarray(array)
        if array.ndim != 1:
            array = array.reshape(-1)
        self._array = array
        self.count = array.shape[0]
        self.dtype = array.dtype

    @property
    def array(self) -> np.ndarray:
        return self._array

    @property
    def has_data(self) -> bool:
        return True

    def slice(self, start: int, stop: int) -> DataPayload:
        return DataPayload(self._array[start:stop])

    def combine(self, other: Payload, op: Op) -> DataPayload:
        if other.count != self.count:
            raise ValueError(f"cannot combine payloads of {self.count} and {other.count} elements")
        return DataPayload(np.asarray(op(self._array, other.array), dtype=self.dtype))

    @classmethod
    def _concat(cls, parts: Sequence[Payload]) -> DataPayload:
        if len(parts) == 1:
            return parts[0]  # type: ignore[return-value]
        return DataPayload(np.concatenate([p.array for p in parts]))

    def copy(self) -> DataPayload:
        return DataPayload(self._array.copy())

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

    def combine(self, other: Payload, op: Op) -> SizePayload:
        if other.count != self.count:
            raise ValueError(f"cannot combine payloads of {self.count} and {other.count} elements")
        return self

    @classmethod
    def _concat(cls, parts: Sequence[Payload]) -> SizePayload:
        return SizePayload(sum(p.count for p in parts), parts[0].dtype)

    def copy(self) -> SizePayload:
        return self

    def like(self, count: int) -> SizePayload:
        return SizePayload(count, self.dtype)

    def __repr__(self) -> str:
        return f"SizePayload({self.count}, {self.dtype})"


def as_payload(buf: Any) -> Payload:
    """Wrap a user buffer: a Payload stays itself, anything array-like becomes a DataPayload."""
    if isinstance(buf, Payload):
        return buf
    return DataPayload(np.asarray(buf))


def is_payload(obj: Any) -> bool:
    """True if *obj* is already a Payload (user code may pass either arrays or payloads)."""
    return isinstance(obj, Payload)


def make_payload(count: int, dtype: Any, *, data: bool, fill: np.ndarray | None = None) -> Payload:
    """Create a payload of *count* elements: real data (*fill* or zeros) when *data*, else size-only."""
    if not data:
        return SizePayload(count, dtype)
    if fill is None:
        return DataPayload(np.zeros(count, dtype=dtype))
    return DataPayload(np.asarray(fill, dtype=dtype))
