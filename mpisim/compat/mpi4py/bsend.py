"""Buffered sends (``MPI.Attach_buffer``, ``Bsend``, ``Ibsend``, ``MPI.Detach_buffer``): sends that never wait for their receiver.

A buffered send copies its message into the buffer the program attached and returns at once,
however large the message and whether or not the receive is posted; the library sends it from
there. The attached buffer must hold every message still in flight, each with
``MPI.BSEND_OVERHEAD`` bytes of bookkeeping; a send that does not fit is an error, with
MPICH's words. ``Detach_buffer`` waits until every buffered message has left, and returns the
buffer. Each buffered message travels as an ordinary nonblocking send of a copy of the data.

MPI 4.1 adds a buffer per communicator (``comm.Attach_buffer``), used by that communicator's
buffered sends before the process's, ``MPI.BUFFER_AUTOMATIC`` (the library allocates what each
message needs: never full) and ``Flush_buffer``/``Iflush_buffer`` (wait until the buffered
messages have left, keeping the buffer attached).
"""

from __future__ import annotations

import math
import weakref
from typing import Any

import numpy as np

from mpisim.compat.buffers import memory_of
from mpisim.compat.mpi4py import memory as _memory
from mpisim.compat.mpi4py.environment import here
from mpisim.compat.mpi4py.nbc import CollectiveRequest
from mpisim.compat.mpi4py.request import Request
from mpisim.compat.ranks import RankContext
from mpisim.engine.events import AllDone
from mpisim.errors import MPIError
from mpisim.mpi.constants import BSEND_OVERHEAD, ERR_BUFFER


class BufferAutomaticType:
    """``MPI.BUFFER_AUTOMATIC``: attach it and MPI allocates each buffered message's room itself (MPI 4.1)."""

    def __bool__(self) -> bool:
        return True

    def __int__(self) -> int:
        return -2  # MPICH's MPI_BUFFER_AUTOMATIC, ((void *) -2)

    def __hash__(self) -> int:
        return -2

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BufferAutomaticType):
            return True
        return int(other) == -2 if isinstance(other, int) else NotImplemented

    def __repr__(self) -> str:
        return "BUFFER_AUTOMATIC"

    def __reduce__(self) -> str:
        return "BUFFER_AUTOMATIC"


BUFFER_AUTOMATIC = BufferAutomaticType()


def _pool(ctx: RankContext, comm: Any = None) -> dict[str, Any]:
    """The rank's process buffer (*comm* None) or *comm*'s own (a simulated communicator)."""
    if comm is None:
        return ctx.cache.setdefault("bsend", {"buffer": None, "size": 0, "pending": []})
    pools = ctx.cache.setdefault("bsend comm", weakref.WeakKeyDictionary())
    pool = pools.get(comm)
    if pool is None:
        pool = pools[comm] = {"buffer": None, "size": 0, "pending": []}
    return pool


def attach(ctx: RankContext, buf: Any, comm: Any = None, call: str = "MPI.Attach_buffer") -> None:
    """Attach *buf* (bytes of any buffer; an int is a size; None or ``BUFFER_AUTOMATIC``: automatic)."""
    pool = _pool(ctx, comm)
    if pool["buffer"] is not None:
        raise MPIError(f"rank {ctx.rank}: {call}: a buffer is already attached", error_class=ERR_BUFFER)
    if buf is None or isinstance(buf, BufferAutomaticType):
        pool["buffer"], pool["size"] = BUFFER_AUTOMATIC, math.inf
        return
    size = int(buf) if isinstance(buf, int) else memory_of(buf).nbytes
    pool["buffer"], pool["size"] = buf, size


def pending(ctx: RankContext, comm: Any = None) -> list[Any]:
    """The requests of the pool's buffered messages that have not left yet."""
    pool = _pool(ctx, comm)
    pool["pending"] = [(req, n) for req, n in pool["pending"] if not req.triggered]
    return [req for req, _ in pool["pending"]]


def flush(ctx: RankContext, comm: Any = None) -> None:
    """Wait until the pool's buffered messages have left; the buffer stays attached (``MPI_Buffer_flush``)."""
    waiting = pending(ctx, comm)
    if waiting:
        ctx.block(ctx.comm.waitall(waiting))


def detach(ctx: RankContext, comm: Any = None) -> Any:
    """Wait until the pool's buffered messages have left; detach and return its buffer."""
    flush(ctx, comm)
    pool = _pool(ctx, comm)
    buf = pool["buffer"]
    pool["buffer"], pool["size"], pool["pending"] = None, 0, []
    return buf


def Attach_buffer(buf: Any) -> None:
    """Give MPI *buf* (bytes of any buffer; an int is a size) for buffered sends (``MPI_Buffer_attach``)."""
    attach(here("Attach_buffer"), buf)


def Detach_buffer() -> Any:
    """Wait until every buffered message has left; return the buffer (``MPI_Buffer_detach``)."""
    return detach(here("Detach_buffer"))


def Flush_buffer() -> None:
    """Wait until the process's buffered messages have left (``MPI_Buffer_flush``, MPI 4.1)."""
    flush(here("Flush_buffer"))


def iflush(ctx: RankContext, comm: Any = None, call: str = "iflush_buffer()") -> Request:
    """Start a flush: a request that completes when the pool's buffered messages have left (``MPI_Buffer_iflush``)."""
    waiting = pending(ctx, comm)
    done = CollectiveRequest(ctx.env, comm if comm is not None else ctx.comm, call)
    if waiting:
        AllDone(ctx.env, waiting).callbacks.append(lambda _: done.succeed(None))  # type: ignore[union-attr]
    else:
        done.succeed(None)
    return Request(done)


def Iflush_buffer() -> Request:
    """Start flushing the process's buffered messages; the request completes when they have left (MPI 4.1)."""
    return iflush(here("Iflush_buffer"))


def send(ctx: RankContext, comm: Any, data: np.ndarray, dest: int, tag: int, call: str) -> Any:
    """Copy *data* into the attached buffer and start sending it; the simulated request (nobody need wait for it).

    The communicator's own buffer if one is attached, else the process's (MPI 4.1).
    """
    own = _pool(ctx, comm)
    state = own if own["buffer"] is not None else _pool(ctx)
    state["pending"] = [(req, n) for req, n in state["pending"] if not req.triggered]
    used = sum(n + BSEND_OVERHEAD for _, n in state["pending"])
    need = data.nbytes + BSEND_OVERHEAD
    if used + need > state["size"]:
        raise MPIError(f"rank {ctx.rank}: {call}: Insufficient space in Bsend buffer; requested {data.nbytes}; "
                       f"total buffer size is {state['size']} ({used} B in use; each message needs "
                       f"MPI.BSEND_OVERHEAD = {BSEND_OVERHEAD} B more)", error_class=ERR_BUFFER)
    request = comm.isend(data.copy(), dest, tag)
    state["pending"].append((request, data.nbytes))
    return request


def Alloc_mem(size: int, info: Any = None) -> _memory.buffer:
    """Memory for the program (``MPI_Alloc_mem``): plain bytes here, as MPI's is to a program (buffers, windows)."""
    here("Alloc_mem")
    return _memory.allocate(size)


def Free_mem(mem: Any) -> None:
    """Give back memory from :func:`Alloc_mem` (nothing to do)."""
    here("Free_mem")
