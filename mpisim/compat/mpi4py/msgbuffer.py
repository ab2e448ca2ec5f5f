"""The arguments of buffer calls as mpi4py reads them: a buffer, ``[buf, MPI.DOUBLE]``, ``[buf, count, type]``, ``IN_PLACE``.

mpi4py's ``msgbuffer`` in a few helpers over :mod:`mpisim.compat.buffers`: each turns a
program's buffer specification into the numpy view the simulated MPI sends from or receives
into, and a specification mpi4py refuses into the error mpi4py raises (BufferError,
ValueError or TypeError), naming the rank and the call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from mpisim.compat import buffers as _buffers
from mpisim.compat import collectives as _coll
from mpisim.compat.ranks import current
from mpisim.mpi import payload as _payload

IN_PLACE = _payload.IN_PLACE  # the generator API's object: both APIs mean the same by it
BOTTOM = None


def unpickled(value: Any) -> Any:
    """The object of an object message: its bytes unpickled, as mpi4py does (an empty message is ``None``)."""
    if value is None or getattr(value, "nbytes", 1) == 0:
        return None
    return _coll.loads(value)


def refused(err: _buffers.BufferSpecError, call: str) -> Exception:
    """A buffer mpi4py refuses, as mpi4py refuses it (BufferError, ValueError or TypeError), naming the rank and the call."""
    ctx = current()
    return err.raises(f"rank {ctx.rank if ctx else '?'}: {call}: {err}")


def buffer_spec(buf: Any, call: str, **kw: Any) -> _buffers.Spec:
    try:
        return _buffers.parse(buf, **kw)
    except _buffers.BufferSpecError as err:
        raise refused(err, call) from None


def elements(buf: Any, call: str, blocks: int = 1) -> np.ndarray:
    """The elements of a (non-vector) buffer spec; a contiguous numpy array is taken as it is.

    *blocks*: a count in the spec counts each of that many blocks (:func:`mpisim.compat.buffers.parse`).
    """
    # NOTE: the common case first, without building a Spec: this runs for every Send.
    if buf.__class__ is np.ndarray and buf.flags.c_contiguous:
        return buf if buf.ndim == 1 else buf.reshape(-1)
    return buffer_spec(buf, call, blocks=blocks).array


def as_bytes(buf: Any, call: str) -> np.ndarray:
    """A point-to-point buffer as its bytes: MPI matches messages by bytes, whatever the types on each side."""
    return elements(buf, call).view(np.uint8)


def recv_array(buf: Any, call: str, **kw: Any) -> np.ndarray:
    """The writable elements a receive fills (*kw*: ``vector``, ``blocks``, as :func:`mpisim.compat.buffers.parse`)."""
    if buf.__class__ is np.ndarray and buf.flags.c_contiguous and buf.flags.writeable and not kw.get("vector"):
        return buf if buf.ndim == 1 else buf.reshape(-1)
    spec = buffer_spec(buf, call, **kw)
    try:
        return _buffers.writable(spec, call)
    except _buffers.BufferSpecError as err:
        raise refused(err, call) from None


def receiving(buf: Any, call: str, **kw: Any) -> tuple[np.ndarray, Callable[[], None]]:
    """:func:`recv_array` and what to run once the data is in: a derived type's bytes go back where its type map says."""
    if buf.__class__ is np.ndarray:
        return recv_array(buf, call, **kw), nothing
    spec = buffer_spec(buf, call, **kw)
    if spec.scattered is None:
        return recv_array(buf, call, **kw), nothing
    if not spec.scattered[0].flags.writeable:
        raise refused(_buffers.BufferSpecError("Object is not writable.", BufferError), call)
    return spec.array, spec.finish


def nothing() -> None:
    """What a receive into a buffer read in place does once the data is in: nothing."""
    return None


def send_array(buf: Any, call: str, blocks: int = 1) -> Any:
    """A send buffer specification as a numpy view, or ``IN_PLACE`` as it is."""
    return buf if buf is IN_PLACE else elements(buf, call, blocks)
