"""Collective calls of ``MPI.Comm``: objects (``bcast, allreduce, ...``), buffers (``Bcast, Gatherv, ...``), nonblocking (``Ibcast, ...``).

A mixin of :class:`~mpisim.compat.mpi4py.comm.Comm`. Each collective is written once, as a
generator over the calling rank's simulated communicator (the ``_bcast``-style bodies below);
the blocking call runs it to the end in the rank's greenlet, the nonblocking ``I`` call starts
it beside the rank's program (:mod:`~mpisim.compat.mpi4py.nbc`) and returns a Request, so both
run the same algorithm with the same messages and costs.

The generator Comm's uppercase forms do the work (IN_PLACE, filling the receive buffer) with
the registry's algorithms, as every other mpisim workload does; here the program's buffer
specifications become numpy views and mpi4py's ops mpisim's. The lowercase forms move pickles
with MPICH's algorithms for objects (:mod:`mpisim.compat.collectives`).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import inspect
import re
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any

import numpy as np

from mpisim.compat import collectives as _coll
from mpisim.compat import typemap as _typemap
from mpisim.compat.mpi4py import commlock as _commlock
from mpisim.compat.mpi4py import nbc
from mpisim.compat.mpi4py.environment import here
from mpisim.compat.mpi4py.msgbuffer import (
    BOTTOM,
    IN_PLACE,
    buffer_spec,
    elements,
    nothing,
    receiving,
    recv_array,
    send_array,
)
from mpisim.compat.mpi4py.op import SUM, Op, as_op
from mpisim.compat.mpi4py.request import Request
from mpisim.compat.ranks import RankContext
from mpisim.errors import CollectiveMismatchError
from mpisim.mpi import payload as _payload
from mpisim.mpi.payload import in_place, split_counts

Proc = Generator[Any, Any, Any]
Body = Callable[..., Proc]


def _blocking(name: str, body: Body) -> Callable[..., Any]:
    """``comm.<name>(...)``: run *body* on the calling rank's communicator to its end; return its value."""
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        ctx = here(f"Comm.{name}")
        c = self._on(ctx)
        if any(a is None for a in args) or any(v is None for v in kwargs.values()):
            args, kwargs = _none_in_place(body, c, ctx, args, kwargs)
        if locked:
            _commlock.lock_of(c, name)  # mpi4py runs the call under the communicator's lock of its name
        return ctx.block(body(c, ctx, *args, **kwargs))

    locked = name in _commlock.LOCKED
    call.__name__ = call.__qualname__ = name
    call.__doc__ = body.__doc__
    return call


def _nonblocking(name: str, body: Body) -> Callable[..., Request]:
    """``comm.I<name>(...)``: start *body* beside the rank's program; return its Request at once."""
    def call(self: Any, *args: Any, **kwargs: Any) -> Request:
        ctx = here(f"Comm.{name}")
        ctx.enter()
        if any(a is None for a in args) or any(v is None for v in kwargs.values()):
            args, kwargs = _none_in_place(body, self._on(ctx), ctx, args, kwargs)
        request = Request(nbc.start(ctx, self._on(ctx), f"{name.lower()}()", lambda c: body(c, ctx, *args, **kwargs)))
        if ctx.runner.checker is not None:  # --check: it must be completed too
            ctx.runner.checker.requests.started(ctx, request, f"{name}()")
        return request

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"Start ``{name[1:]}`` and return its Request at once (``MPI_{name}``): " + (body.__doc__ or "")
    return call


@functools.cache
def _signature(body: Body) -> inspect.Signature:
    """*body*'s signature, read once (a test suite's loops make hundreds of thousands of calls)."""
    return inspect.signature(body)


def _none_in_place(body: Body, c: Any, ctx: RankContext, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """mpi4py 4 reads ``None`` as ``MPI.IN_PLACE`` where MPI allows it: the send buffer of every
    rank in the all-to-all and reduction calls, the root's send buffer of ``Gather(v)`` and
    ``Reduce``, the root's receive buffer of ``Scatter(v)``."""
    bound = _signature(body).bind(c, ctx, *args, **kwargs)
    bound.apply_defaults()
    given = bound.arguments
    at_root = c.rank == given.get("root", -1)
    if body in _ROOT_RECV:
        if at_root and given["recvbuf"] is None:
            given["recvbuf"] = IN_PLACE
    elif given.get("sendbuf", 0) is None and (body in _ALL_IN_PLACE or (body in _ROOT_SEND and at_root)):
        given["sendbuf"] = IN_PLACE
    return bound.args[2:], bound.kwargs


# ---- objects (pickled, as mpi4py moves them)


def _barrier(c: Any, ctx: RankContext) -> Proc:
    """Wait until every rank has entered (``MPI_Barrier``)."""
    yield from c.barrier()


def _bcast(c: Any, ctx: RankContext, obj: Any, root: int = 0) -> Proc:
    """Return root's object on every rank."""
    return (yield from _coll.bcast_obj(c, obj, root))


def _gather(c: Any, ctx: RankContext, sendobj: Any, root: int = 0) -> Proc:
    """Return every rank's object, in rank order, at root (``None`` elsewhere)."""
    return (yield from _coll.gather_obj(c, sendobj, root))


def _scatter(c: Any, ctx: RankContext, sendobj: Any, root: int = 0) -> Proc:
    """Return item *rank* of root's sequence."""
    return (yield from _coll.scatter_obj(c, sendobj, root))


def _allgather(c: Any, ctx: RankContext, sendobj: Any) -> Proc:
    """Return every rank's object, in rank order, on every rank."""
    return (yield from _coll.allgather_obj(c, sendobj))


def _alltoall(c: Any, ctx: RankContext, sendobj: Sequence[Any]) -> Proc:
    """Send item j to rank j; return the items received, in rank order."""
    return (yield from _coll.alltoall_obj(c, sendobj))


def _reduce(c: Any, ctx: RankContext, sendobj: Any, op: Op = SUM, root: int = 0) -> Proc:
    """Reduce every rank's object with *op* (in rank order) at root."""
    op = as_op(op)
    return (yield from _coll.reduce_obj(c, sendobj, op, op.commute, root))


def _allreduce(c: Any, ctx: RankContext, sendobj: Any, op: Op = SUM) -> Proc:
    """Reduce every rank's object with *op*; every rank gets the result (reduce, then bcast)."""
    op = as_op(op)

    def reduce_then_bcast() -> Proc:
        result = yield from _coll.reduce_obj(c, sendobj, op, op.commute, 0)
        return (yield from _coll.bcast_obj(c, result, 0))

    # One call for the program (a deadlock or a mismatch names allreduce, not the reduce inside it).
    return (yield from _coll.collective(c, "allreduce", "allreduce(object)", 0, reduce_then_bcast()))


def _scan(c: Any, ctx: RankContext, sendobj: Any, op: Op = SUM) -> Proc:
    """Return the reduction of ranks 0..rank's objects with *op*, in rank order (``MPI_Scan``)."""
    return (yield from _coll.scan_obj(c, sendobj, as_op(op), exclusive=False))


def _exscan(c: Any, ctx: RankContext, sendobj: Any, op: Op = SUM) -> Proc:
    """Return the reduction of ranks 0..rank-1's objects with *op* (``MPI_Exscan``); None on rank 0."""
    return (yield from _coll.scan_obj(c, sendobj, as_op(op), exclusive=True))


# ---- buffers: the generator Comm's uppercase forms do the work (IN_PLACE, filling the receive
# buffer); here the program's buffer specifications become numpy views and mpi4py's ops mpisim's.


@contextlib.contextmanager
def _counts_in_elements(array: Any) -> Iterator[None]:
    """Say a count mismatch in the program's terms: elements of its type per rank, not bytes.

    The simulated MPI compares the calls' signatures in bytes (``allreduce(24 B, ...)``); a
    student wrote a count of elements. Every rank passes the same type to these calls, so the
    bytes of the other rank's call are read back as elements of this rank's type.
    """
    try:
        yield
    except CollectiveMismatchError as err:
        if array is None or array is IN_PLACE or not hasattr(array, "dtype") or "B," not in str(err):
            raise
        size, kind = array.dtype.itemsize, array.dtype.name
        ranks = re.findall(r"rank (\d+) called \w+\((\d+) B", str(err))
        if len(ranks) != 2 or any(int(nbytes) % size for _, nbytes in ranks):
            raise
        counts = ", ".join(f"rank {rank} passes {int(nbytes) // size} {kind} elements" for rank, nbytes in ranks)
        raise CollectiveMismatchError(f"{err}\n  in the program's terms: {counts} (per rank); every rank must pass "
                                      "the same count") from None


def _Bcast(c: Any, ctx: RankContext, buf: Any, root: int = 0) -> Proc:
    """Broadcast root's buffer into every rank's (``MPI_Bcast``)."""
    into, finish = receiving(buf, "Bcast")
    with _counts_in_elements(into):
        yield from c.Bcast(into, root)
    finish()


def _Reduce(c: Any, ctx: RankContext, sendbuf: Any, recvbuf: Any, op: Op = SUM, root: int = 0) -> Proc:
    """Reduce every rank's buffer into root's *recvbuf* (``MPI_Reduce``; ``IN_PLACE`` at root)."""
    into, finish = receiving(recvbuf, "Reduce") if c.rank == root else (None, nothing)
    send = send_array(sendbuf, "Reduce")
    with _counts_in_elements(into if send is IN_PLACE else send):
        yield from c.Reduce(send, into, as_op(op).sim("Reduce"), root)
    finish()


def _Allreduce(c: Any, ctx: RankContext, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> Proc:
    """Reduce every rank's buffer into every rank's *recvbuf* (``MPI_Allreduce``; ``IN_PLACE``)."""
    into, finish = receiving(recvbuf, "Allreduce")
    with _counts_in_elements(into):
        yield from c.Allreduce(send_array(sendbuf, "Allreduce"), into, as_op(op).sim("Allreduce"))
    finish()


def _Reduce_scatter_block(c: Any, ctx: RankContext, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> Proc:
    """Reduce, then rank r keeps block r (equal blocks; ``MPI_Reduce_scatter_block``)."""
    yield from c.Reduce_scatter_block(send_array(sendbuf, "Reduce_scatter_block"),
                                      recv_array(recvbuf, "Reduce_scatter_block"), as_op(op).sim("Reduce_scatter_block"))


def _Reduce_scatter(c: Any, ctx: RankContext, sendbuf: Any, recvbuf: Any, recvcounts: Sequence[int] | None = None,
                    op: Op = SUM) -> Proc:
    """Reduce, then rank r keeps ``recvcounts[r]`` elements (``MPI_Reduce_scatter``).

    Without *recvcounts*, mpi4py first allgathers each rank's receive count (one ``MPI_Count``
    each), so ranks may keep blocks of any sizes. Blocks of ``np.array_split`` sizes run the
    registry's reduce_scatter; other counts are a reduce to rank 0 followed by a scatterv.
    """
    if sendbuf is IN_PLACE:
        if recvcounts is None:
            raise TypeError(f"rank {ctx.rank}: Reduce_scatter: IN_PLACE needs recvcounts")
        whole = recv_array(recvbuf, "Reduce_scatter")
        send = whole.copy()
    else:
        send = elements(sendbuf, "Reduce_scatter")
        whole = None
    if recvcounts is None:
        mine = recv_array(recvbuf, "Reduce_scatter")
        everyone = np.zeros(c.size, np.int64)
        yield from c.Allgather(np.array([mine.size], np.int64), everyone)
        recvcounts = everyone
    counts = [int(x) for x in recvcounts]
    if len(counts) != c.size:
        raise ValueError(f"rank {ctx.rank}: Reduce_scatter: expecting {c.size} items, got {len(counts)}")
    into = whole[:counts[c.rank]] if whole is not None else recv_array(recvbuf, "Reduce_scatter")
    if whole is not None and whole.size != sum(counts):
        raise ValueError(f"rank {ctx.rank}: Reduce_scatter: mismatch in receive count {whole.size} "
                         f"and sum(counts) {sum(counts)}")
    if whole is None and send.size != sum(counts):  # mpi4py's checks, before any reduction message
        raise ValueError(f"rank {ctx.rank}: Reduce_scatter: mismatch in send count {send.size} "
                         f"and sum(counts) {sum(counts)}")
    if whole is None and into.size != counts[c.rank]:
        raise ValueError(f"rank {ctx.rank}: Reduce_scatter: mismatch in receive count {into.size} "
                         f"and counts[{c.rank}] {counts[c.rank]}")
    op_ = as_op(op).sim("Reduce_scatter")
    if counts == split_counts(send.size, c.size):
        _payload.fill(in_place(into), (yield from c.reduce_scatter(send, op_)))
        return
    total = yield from c.reduce(send, op_, 0)
    full = np.asarray(total).reshape(-1) if c.rank == 0 else None
    yield from _coll.collective(c, "scatterv", "scatterv(root=0)", into.nbytes,
                                _coll.scatterv(c, full, counts, _coll.offsets(counts), into, 0))


def _scan_buffers(c: Any, ctx: RankContext, call: str, sendbuf: Any, recvbuf: Any, op: Any, exclusive: bool) -> Proc:
    """``Scan``/``Exscan``: MPICH's recursive doubling (:func:`mpisim.compat.collectives.scan_buffers`)."""
    recv = recv_array(recvbuf, call)
    send = recv if sendbuf is IN_PLACE else elements(sendbuf, call)
    if send.size != recv.size:  # mpi4py's check, before any message
        raise ValueError(f"rank {ctx.rank}: {call}: mismatch in send count {send.size} and receive count {recv.size}")
    yield from _coll.scan_buffers(c, send, recv, as_op(op).sim(call), exclusive)


def _Scan(c: Any, ctx: RankContext, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> Proc:
    """Rank r's *recvbuf* gets the reduction of ranks 0..r's buffers (``MPI_Scan``; ``IN_PLACE``)."""
    yield from _scan_buffers(c, ctx, "Scan", sendbuf, recvbuf, op, exclusive=False)


def _Exscan(c: Any, ctx: RankContext, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> Proc:
    """Rank r's *recvbuf* gets the reduction of ranks 0..r-1's buffers (``MPI_Exscan``; ``IN_PLACE``).

    Rank 0's *recvbuf* is left as it was (MPI leaves it undefined; MPICH does not touch it).
    """
    yield from _scan_buffers(c, ctx, "Exscan", sendbuf, recvbuf, op, exclusive=True)


def _Gather(c: Any, ctx: RankContext, sendbuf: Any, recvbuf: Any, root: int = 0) -> Proc:
    """Gather equal blocks into root's *recvbuf* in rank order (``MPI_Gather``)."""
    into, finish = receiving(recvbuf, "Gather", blocks=c.size) if c.rank == root else (None, nothing)
    yield from c.Gather(send_array(sendbuf, "Gather"), into, root)
    finish()


def _Scatter(c: Any, ctx: RankContext, sendbuf: Any, recvbuf: Any, root: int = 0) -> Proc:
    """Scatter equal blocks of root's *sendbuf*, block r to rank r (``MPI_Scatter``)."""
    send = elements(sendbuf, "Scatter", blocks=c.size) if c.rank == root else None
    into, finish = (IN_PLACE, nothing) if recvbuf is IN_PLACE else receiving(recvbuf, "Scatter")
    yield from c.Scatter(send, into, root)
    finish()


def _Allgather(c: Any, ctx: RankContext, sendbuf: Any, recvbuf: Any) -> Proc:
    """Gather equal blocks into every rank's *recvbuf* (``MPI_Allgather``)."""
    into, finish = receiving(recvbuf, "Allgather", blocks=c.size)
    yield from c.Allgather(send_array(sendbuf, "Allgather"), into)
    finish()


def _Alltoall(c: Any, ctx: RankContext, sendbuf: Any, recvbuf: Any) -> Proc:
    """Block j of *sendbuf* to rank j, block i of *recvbuf* from rank i (``MPI_Alltoall``)."""
    into, finish = receiving(recvbuf, "Alltoall", blocks=c.size)
    yield from c.Alltoall(send_array(sendbuf, "Alltoall", blocks=c.size), into)
    finish()


def _Gatherv(c: Any, ctx: RankContext, sendbuf: Any, recvbuf: Any, root: int = 0) -> Proc:
    """Gather blocks of per-rank counts into root's ``[buf, counts, displs, type]`` (``MPI_Gatherv``)."""
    recv = buffer_spec(recvbuf, "Gatherv", vector=True, blocks=c.size) if c.rank == root else None
    if recv is not None and recv.counts is None:
        raise TypeError(f"rank {ctx.rank}: Gatherv: the root's recvbuf needs counts: [buf, counts, displs, type]")
    send = None if sendbuf is IN_PLACE else elements(sendbuf, "Gatherv")
    nbytes = send.nbytes if send is not None else 0
    yield from _coll.collective(c, "gatherv", f"gatherv(root={root})", nbytes, _coll.gatherv(
        c, send, recv.array if recv else None, recv.counts if recv else None, recv.displs if recv else None, root))
    if recv is not None:
        recv.finish()


def _Scatterv(c: Any, ctx: RankContext, sendbuf: Any, recvbuf: Any, root: int = 0) -> Proc:
    """Scatter blocks of per-rank counts from root's ``[buf, counts, displs, type]`` (``MPI_Scatterv``)."""
    send = buffer_spec(sendbuf, "Scatterv", vector=True, blocks=c.size) if c.rank == root else None
    if send is not None and send.counts is None:
        raise TypeError(f"rank {ctx.rank}: Scatterv: the root's sendbuf needs counts: [buf, counts, displs, type]")
    into, finish = (None, nothing) if recvbuf is IN_PLACE else receiving(recvbuf, "Scatterv")
    nbytes = into.nbytes if into is not None else 0
    yield from _coll.collective(c, "scatterv", f"scatterv(root={root})", nbytes, _coll.scatterv(
        c, send.array if send else None, send.counts if send else None, send.displs if send else None, into, root))
    finish()


def _Allgatherv(c: Any, ctx: RankContext, sendbuf: Any, recvbuf: Any) -> Proc:
    """Gather blocks of per-rank counts into every rank's ``[buf, counts, displs, type]`` (``MPI_Allgatherv``)."""
    recv = buffer_spec(recvbuf, "Allgatherv", vector=True, blocks=c.size)
    if recv.counts is None:
        raise TypeError(f"rank {ctx.rank}: Allgatherv: recvbuf needs counts: [buf, counts, displs, type]")
    send = None if sendbuf is IN_PLACE else elements(sendbuf, "Allgatherv")
    yield from _coll.collective(c, "allgatherv", "allgatherv()", recv.array.nbytes,
                                _coll.allgatherv(c, send, recv.array, recv.counts, recv.displs))
    recv.finish()


def _Alltoallv(c: Any, ctx: RankContext, sendbuf: Any, recvbuf: Any) -> Proc:
    """Per-pair counts: ``[buf, counts, displs, type]`` on both sides (``MPI_Alltoallv``)."""
    recv = buffer_spec(recvbuf, "Alltoallv", vector=True, blocks=c.size)
    send = recv if sendbuf is IN_PLACE else buffer_spec(sendbuf, "Alltoallv", vector=True, blocks=c.size)
    if recv.counts is None or send.counts is None:
        raise TypeError(f"rank {ctx.rank}: Alltoallv: buffers need counts: [buf, counts, displs, type]")
    source = send.array.copy() if sendbuf is IN_PLACE else send.array
    yield from _coll.collective(c, "alltoallv", "alltoallv()", source.nbytes, _coll.alltoallv(
        c, source, send.counts, send.displs, recv.array, recv.counts, recv.displs))
    recv.finish()


def _Alltoallw(c: Any, ctx: RankContext, sendbuf: Any, recvbuf: Any) -> Proc:
    """Per-pair counts, byte displacements and datatypes: ``[buf, counts, displs, types]`` on both sides (``MPI_Alltoallw``).

    Blocks of derived types travel packed, as MPICH packs them: exactly the bytes each type map
    covers, written back through the receive side's type map when they land.
    """
    recv_memory, rcounts, rdispls, rmaps = _wspec(recvbuf, c.size, ctx, writable=True)
    if sendbuf is IN_PLACE:
        send_memory, scounts, sdispls, smaps = recv_memory.copy(), rcounts, rdispls, rmaps
    else:
        send_memory, scounts, sdispls, smaps = _wspec(sendbuf, c.size, ctx, writable=False)
    send_bytes = np.concatenate([send_memory[i] for i in _block_bytes(smaps, sdispls)] or [np.zeros(0, np.uint8)])
    rindex = _block_bytes(rmaps, rdispls)
    recv_bytes = np.zeros(sum(i.size for i in rindex), np.uint8)
    yield from _coll.collective(c, "alltoallw", "alltoallw()", int(sum(scounts)), _coll.alltoallv(
        c, send_bytes, scounts, _starts(scounts), recv_bytes, rcounts, _starts(rcounts)))
    if rindex:
        recv_memory[np.concatenate(rindex)] = recv_bytes


def _starts(counts: list[int]) -> list[int]:
    return [int(x) for x in np.concatenate([[0], np.cumsum(counts)[:-1]])] if counts else []


def _block_bytes(maps: list[tuple[Any, int]], displs: list[int]) -> list[np.ndarray]:
    """Per peer, the byte indices of its block in the buffer, in the order they travel."""
    return [_typemap.indices(tmap, count) + displ for (tmap, count), displ in zip(maps, displs, strict=True)]


def _wspec(spec: Any, size: int, ctx: RankContext, writable: bool,
           call: str = "Alltoallw") -> tuple[np.ndarray, list[int], list[int], list]:
    """An alltoallw buffer ``[buf, counts, displs, types]``: its bytes, each block's byte count, byte displacement
    and (type map, count).

    MPI_Alltoallw's displacements are in bytes (not elements), one datatype per peer.
    """
    # mpi4py's forms: [buf, counts, displs, types], [buf, (counts, displs), types], and [buf, types]
    # (one element of each peer's type, every block at byte 0)
    try:
        if len(spec) == 2:
            buf, types = spec
            counts, displs = [1] * size, [0] * size
        elif len(spec) == 3:
            buf, (counts, displs), types = spec
        else:
            buf, counts, displs, types = spec
    except (TypeError, ValueError):
        raise TypeError(f"rank {ctx.rank}: {call}: a buffer is [buf, counts, displs, datatypes]") from None
    if not isinstance(types, list | tuple):  # one datatype for every peer
        types = [types] * size
    if not (len(counts) == len(displs) == len(types) == size):
        raise ValueError(f"rank {ctx.rank}: {call}: counts, displs and datatypes need one entry per peer ({size})")
    maps = [(datatype.tmap if datatype.tmap is not None else _typemap.named(datatype.dtype), int(count))
            for count, datatype in zip(counts, types, strict=True)]
    nbytes = [tmap.size * count for tmap, count in maps]
    displs = [int(d) for d in displs]
    if buf is BOTTOM:
        memory, displs = _absolute(maps, displs, ctx, call)
    else:
        memory = buffer_spec(buf, call).array.reshape(-1).view(np.uint8)
    if writable and not memory.flags.writeable:
        raise BufferError(f"rank {ctx.rank}: {call}: the receive buffer is not writable")
    for (tmap, count), displ in zip(maps, displs, strict=True):
        if count and (displ + tmap.true_extent()[0] < 0 or displ + _typemap.reach(tmap, count) > memory.size):
            raise ValueError(f"rank {ctx.rank}: {call}: a block at byte {displ} reaches past the buffer's "
                             f"{memory.size} B")
    return memory, nbytes, displs, maps


#: The most bytes the blocks of an ``MPI.BOTTOM`` buffer may span (a guard: the span is read as one stretch of memory).
_BOTTOM_SPAN = 64 << 20


def _absolute(maps: list[tuple[Any, int]], displs: list[int], ctx: RankContext,
              call: str = "Alltoallw") -> tuple[np.ndarray, list[int]]:
    """``MPI.BOTTOM``: the datatypes' displacements are addresses (``MPI.Get_address``).

    The memory is the process's own, as under MPI (a simulated rank runs in this process): the
    bytes from the lowest to the highest address the blocks cover, and the displacements made
    relative to the lowest.
    """
    spans = [(displ + tmap.true_extent()[0], displ + _typemap.reach(tmap, count))
             for (tmap, count), displ in zip(maps, displs, strict=True) if count and tmap.runs]
    if not spans:
        return np.zeros(0, np.uint8), displs
    low, high = min(lo for lo, _ in spans), max(hi for _, hi in spans)
    if low <= 0 or high - low > _BOTTOM_SPAN:
        raise ValueError(f"rank {ctx.rank}: {call}: MPI.BOTTOM blocks need addresses (MPI.Get_address) within "
                         f"{_BOTTOM_SPAN >> 20} MiB of each other")
    memory = np.frombuffer((ctypes.c_char * (high - low)).from_address(low), np.uint8)
    return memory, [displ - low for displ in displs]


_ALL_IN_PLACE = {_Allreduce, _Reduce_scatter_block, _Reduce_scatter, _Scan, _Exscan, _Allgather, _Alltoall,
                 _Allgatherv, _Alltoallv, _Alltoallw}
_ROOT_SEND = {_Reduce, _Gather, _Gatherv}
_ROOT_RECV = {_Scatter, _Scatterv}


class Collectives:
    """``barrier``/``Barrier``, ``bcast``/``Bcast``, ``Ibcast`` and the rest: the collective half of a communicator."""

    _c: Any  # the calling rank's simulated communicator (Comm)
    _on: Callable[[Any], Any]  # the same, for a caller that holds its rank's context (Comm)

    barrier = Barrier = _blocking("barrier", _barrier)
    bcast = _blocking("bcast", _bcast)
    gather = _blocking("gather", _gather)
    scatter = _blocking("scatter", _scatter)
    allgather = _blocking("allgather", _allgather)
    alltoall = _blocking("alltoall", _alltoall)
    reduce = _blocking("reduce", _reduce)
    allreduce = _blocking("allreduce", _allreduce)
    scan = _blocking("scan", _scan)
    exscan = _blocking("exscan", _exscan)

    Bcast = _blocking("Bcast", _Bcast)
    Reduce = _blocking("Reduce", _Reduce)
    Allreduce = _blocking("Allreduce", _Allreduce)
    Reduce_scatter_block = _blocking("Reduce_scatter_block", _Reduce_scatter_block)
    Reduce_scatter = _blocking("Reduce_scatter", _Reduce_scatter)
    Scan = _blocking("Scan", _Scan)
    Exscan = _blocking("Exscan", _Exscan)
    Gather = _blocking("Gather", _Gather)
    Scatter = _blocking("Scatter", _Scatter)
    Allgather = _blocking("Allgather", _Allgather)
    Alltoall = _blocking("Alltoall", _Alltoall)
    Gatherv = _blocking("Gatherv", _Gatherv)
    Scatterv = _blocking("Scatterv", _Scatterv)
    Allgatherv = _blocking("Allgatherv", _Allgatherv)
    Alltoallv = _blocking("Alltoallv", _Alltoallv)
    Alltoallw = _blocking("Alltoallw", _Alltoallw)

    # ---- nonblocking (MPI-3): the same bodies, started beside the program (mpisim.compat.mpi4py.nbc)

    Ibarrier = _nonblocking("Ibarrier", _barrier)
    Ibcast = _nonblocking("Ibcast", _Bcast)
    Ireduce = _nonblocking("Ireduce", _Reduce)
    Iallreduce = _nonblocking("Iallreduce", _Allreduce)
    Ireduce_scatter_block = _nonblocking("Ireduce_scatter_block", _Reduce_scatter_block)
    Ireduce_scatter = _nonblocking("Ireduce_scatter", _Reduce_scatter)
    Iscan = _nonblocking("Iscan", _Scan)
    Iexscan = _nonblocking("Iexscan", _Exscan)
    Igather = _nonblocking("Igather", _Gather)
    Iscatter = _nonblocking("Iscatter", _Scatter)
    Iallgather = _nonblocking("Iallgather", _Allgather)
    Ialltoall = _nonblocking("Ialltoall", _Alltoall)
    Igatherv = _nonblocking("Igatherv", _Gatherv)
    Iscatterv = _nonblocking("Iscatterv", _Scatterv)
    Iallgatherv = _nonblocking("Iallgatherv", _Allgatherv)
    Ialltoallv = _nonblocking("Ialltoallv", _Alltoallv)
    Ialltoallw = _nonblocking("Ialltoallw", _Alltoallw)
