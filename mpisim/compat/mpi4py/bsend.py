"""Buffered sends (``MPI.Attach_buffer``, ``Bsend``, ``Ibsend``, ``MPI.Detach_buffer``): sends that never wait for their receiver.

A buffered send copies its message into the buffer the program attached and returns at once,
however large the message and whether or not the receive is posted; the library sends it from
there. The attached buffer must hold every message still in flight, each with
``MPI.BSEND_OVERHEAD`` bytes of bookkeeping; a send that does not fit is an error, with
MPICH's words. ``Detach_buffer`` waits until every buffered message has left, and returns the
buffer. Each buffered message travels as an ordinary nonblocking send of a copy of the data.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mpisim.compat.buffers import memory_of
from mpisim.compat.mpi4py import memory as _memory
from mpisim.compat.mpi4py.environment import here
from mpisim.compat.ranks import RankContext
from mpisim.errors import MPIError
from mpisim.mpi.constants import BSEND_OVERHEAD, ERR_BUFFER


def _state(ctx: RankContext) -> dict[str, Any]:
    return ctx.cache.setdefault("bsend", {"buffer": None, "size": 0, "pending": []})


def Attach_buffer(buf: Any) -> None:
    """Give MPI *buf* (bytes of any buffer; an int is a size) for buffered sends (``MPI_Buffer_attach``)."""
    ctx = here("Attach_buffer")
    state = _state(ctx)
    if state["buffer"] is not None:
        raise MPIError(f"rank {ctx.rank}: MPI.Attach_buffer: a buffer is already attached", error_class=ERR_BUFFER)
    size = int(buf) if isinstance(buf, int) else memory_of(buf).nbytes
    state["buffer"], state["size"] = buf, size


def Detach_buffer() -> Any:
    """Wait until every buffered message has left; return the buffer (``MPI_Buffer_detach``)."""
    ctx = here("Detach_buffer")
    state = _state(ctx)
    pending = [req for req, _ in state["pending"] if not req.triggered]
    if pending:
        ctx.block(ctx.comm.waitall(pending))
    buf = state["buffer"]
    state["buffer"], state["size"], state["pending"] = None, 0, []
    return buf


def send(ctx: RankContext, comm: Any, data: np.ndarray, dest: int, tag: int, call: str) -> Any:
    """Copy *data* into the attached buffer and start sending it; the simulated request (nobody need wait for it)."""
    state = _state(ctx)
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
