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

:class:`~mpisim.compat.datatypes.Datatype` (named and derived datatypes) lives in
:mod:`mpisim.compat.datatypes`; its names are re-exported here for the buffer readers.

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
from mpisim.compat.datatypes import DATATYPES, TYPEDICT, Datatype, datatype_of  # noqa: F401 - re-exported


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
    if len(runs) == 1 and tmap.dense and tmap.basic is not None and runs[0][0] * tmap.extent + tmap.lb >= 0:
        # one stretch of bytes of one type (Create_contiguous of a named type): read in place, as a named type is
        first = runs[0][0] * tmap.extent + tmap.lb
        array = memory.reshape(-1).view(np.uint8)[first:first + runs[0][1] * tmap.extent].view(tmap.basic)
        spec = Spec(array, datatype)
    else:
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
