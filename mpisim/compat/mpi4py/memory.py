"""``MPI.buffer``: raw memory as mpi4py hands it out (``MPI.Alloc_mem``, ``Win.tomemory``, ``Win.Shared_query``).

mpi4py's ``buffer`` is a byte buffer that a program indexes by byte, fills with ``mem[:] = 0``,
reads with ``np.frombuffer(mem, dtype=...)`` and asks for its ``address``. Here it is a numpy
view of bytes (so it aliases the window's memory and exports the buffer protocol) with
mpi4py's truth value (non-empty) and attributes.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from mpisim.compat import buffers as _buffers


class buffer(np.ndarray):
    """Bytes of memory: ``len``, indexing by byte, ``mem[:] = 0``, ``address``, ``nbytes``, ``readonly``, ``tobytes``."""

    def __bool__(self) -> bool:
        return self.size > 0

    def __eq__(self, other: object) -> Any:  # a buffer compares as its bytes, not element-wise
        try:
            return bytes(memoryview(self)) == bytes(memoryview(other))  # type: ignore[arg-type]
        except TypeError:
            return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __setitem__(self, key: Any, value: Any) -> None:
        """``mem[i] = byte``; ``mem[a:b] = obj`` copies *obj*'s bytes (any buffer of that many bytes), as mpi4py does."""
        # A typed view of the bytes (``mem.view(np.float64)``, as RMA lands data) assigns as numpy does.
        if self.dtype == np.uint8 and isinstance(key, slice) and not isinstance(value, int | np.integer):
            with contextlib.suppress(TypeError):  # not a buffer: numpy's own assignment decides
                value = np.frombuffer(memoryview(value).cast("B"), np.uint8)
        super().__setitem__(key, value)

    @property
    def address(self) -> int:
        return int(self.ctypes.data) if self.size else 0

    format = "B"

    @property
    def readonly(self) -> bool:
        return not self.flags.writeable

    def tomemory(self) -> memoryview:
        return memoryview(self)

    def cast(self, typecode: str, shape: Any = None) -> memoryview:
        return memoryview(self).cast(typecode) if shape is None else memoryview(self).cast(typecode, shape)


def of(array: np.ndarray) -> buffer:
    """*array*'s bytes as a :class:`buffer` (a view: writes go to *array*)."""
    return array.reshape(-1).view(np.uint8).view(buffer)


def allocate(nbytes: int) -> buffer:
    return of(np.zeros(int(nbytes), np.uint8))


def Get_address(location: Any) -> int:
    """The address of *location*'s memory (``MPI_Get_address``): for displacements in derived types and windows."""
    if isinstance(location, buffer) and not location.nbytes:  # mpi4py's empty memory has no base address
        return 0
    if isinstance(location, np.ndarray):
        return int(location.ctypes.data)
    if location is None:  # MPI.BOTTOM
        return 0
    try:
        view = memoryview(location)
    except TypeError:  # a DLPack or CUDA-array-interface buffer: the address its pointer names
        array = _buffers.parse(location).array
        return int(array.ctypes.data) if array.nbytes else 0
    return int(np.frombuffer(view.cast("B"), np.uint8).ctypes.data) if view.nbytes else 0


def Aint_add(base: int, disp: int) -> int:
    return int(base) + int(disp)


def Aint_diff(addr1: int, addr2: int) -> int:
    return int(addr1) - int(addr2)
