"""Neighbourhood collectives (``Neighbor_allgather``, ``Neighbor_alltoall``, their v- and w-forms, object and nonblocking forms).

On a communicator with a process topology each rank exchanges with its neighbours only: its
*in-neighbours* (sources) and *out-neighbours* (destinations), as the topology lists them
(``inoutedges``): on a Cartesian grid, for each dimension, the rank one step back and the
rank one step forward (``PROC_NULL`` off a non-periodic edge: nothing is sent or received
there); on a graph, the rank's edges; on a distributed graph, its sources and destinations
in the order the graph gave them (``Get_dist_neighbors``). Block k of the receive buffer
comes from in-neighbour k, block k of the send buffer (alltoall) goes to out-neighbour k; a
count in ``[buf, count, type]`` counts each block, as in mpi4py.

MPICH runs them as one round of nonblocking sends and receives (a receive from each
in-neighbour, a send to each out-neighbour, then wait for all), on the communicator's
collective context; so does this. Receives are posted in neighbour order and messages between
a pair match in order, so a neighbour listed twice (a periodic dimension of size 2) gets its
blocks in the order MPI defines.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import numpy as np

from mpisim.compat import collectives as _coll
from mpisim.compat.mpi4py import commlock as _commlock
from mpisim.compat.mpi4py import nbc
from mpisim.compat.mpi4py.collective import _block_bytes, _wspec
from mpisim.compat.mpi4py.environment import here
from mpisim.compat.mpi4py.msgbuffer import buffer_spec, elements, receiving
from mpisim.compat.mpi4py.request import Request
from mpisim.compat.ranks import RankContext
from mpisim.mpi.constants import PROC_NULL
from mpisim.mpi.payload import DataPayload

Proc = Generator[Any, Any, Any]
_TAG = 1 << 20  # the collective context's tags for neighbourhood exchanges (one per direction on a grid)


def _exchange(c: Any, name: str, sources: list[int], dests: list[int], send: list[Any], recv: list[Any]) -> Proc:
    """One round: receive ``recv[k]`` from ``sources[k]``, send ``send[k]`` to ``dests[k]``; the received values.

    On a Cartesian grid (neighbour lists of :class:`_Facing`) block k goes in direction k (dimension k // 2, back or
    forward), and arrives as the block the receiver expects from the opposite direction, as
    MPI-4 defines and MPICH does, even when both neighbours are the same rank (a periodic
    dimension of size 2). Graphs match blocks by order.
    """
    coll = c.coll
    facing = isinstance(dests, _Facing)

    def sent(k: int) -> int:
        return _TAG + k if facing else _TAG

    def expected(k: int) -> int:
        return _TAG + (k ^ 1) if facing else _TAG
    nbytes = sum(int(np.asarray(block).nbytes) for block, dst in zip(send, dests, strict=True) if dst != PROC_NULL)

    def body() -> Proc:
        incoming = [coll.irecv(into, src, expected(k)) if src != PROC_NULL else None
                    for k, (into, src) in enumerate(zip(recv, sources, strict=True))]
        outgoing = [coll.isend(block.view(np.uint8), dst, sent(k))  # bytes, as MPI matches them
                    for k, (block, dst) in enumerate(zip(send, dests, strict=True)) if dst != PROC_NULL]
        live = [r for r in incoming if r is not None] + outgoing
        if live:
            yield from coll.waitall(live)
        return [r.outcome() if r is not None else None for r in incoming]

    return (yield from _coll.collective(c, name, f"{name}()", nbytes, body()))


class _Facing(list):
    """A Cartesian grid's neighbour list: its blocks face their directions (:func:`_exchange`)."""


def _blocks(array: np.ndarray, n: int) -> list[np.ndarray]:
    size = array.size // n if n else 0
    return [array[k * size:(k + 1) * size] for k in range(n)]


def _writable(blocks: list[np.ndarray]) -> list[DataPayload]:
    return [DataPayload(b.view(np.uint8), writable=True) for b in blocks]


def _vblocks(spec: Any, n: int, call: str, rank: int) -> list[np.ndarray]:
    if spec.counts is None or len(spec.counts) != n:
        raise TypeError(f"rank {rank}: {call}: the buffer needs one count per neighbour ({n}): "
                        "[buf, counts, displs, type]")
    return [spec.array[d:d + k] for k, d in zip(spec.counts, spec.displs, strict=True)]


class NeighborCollectives:
    """The neighbourhood collectives of a communicator with a topology (its ``inoutedges`` say who)."""

    _on: Callable[[Any], Any]
    #: ``(sources, destinations)``: each topology communicator (cartesian, graph, dist graph) defines it.
    inoutedges: tuple[list[int], list[int]]

    def _run(self, name: str, body: Callable[..., Proc], args: tuple[Any, ...], start: bool) -> Any:
        ctx = here(f"Comm.{name}")
        sources, dests = self.inoutedges
        if getattr(self, "_dims", None) is not None:  # a grid: blocks face their directions (see _exchange)
            sources, dests = _Facing(sources), _Facing(dests)
        c = self._on(ctx)
        if not start:
            if name in _commlock.LOCKED:  # mpi4py runs the object calls under the communicator's lock
                _commlock.lock_of(c, name)
            return ctx.block(body(c, ctx, sources, dests, *args))
        ctx.enter()
        return Request(nbc.start(ctx, c, f"{name.lower()}()", lambda own: body(own, ctx, sources, dests, *args)))

    # ---- objects

    def neighbor_allgather(self, sendobj: Any) -> list[Any]:
        """Every in-neighbour's object, in neighbour order (None for ``PROC_NULL``)."""
        return self._run("neighbor_allgather", _allgather_obj, (sendobj,), False)

    def neighbor_alltoall(self, sendobj: list[Any]) -> list[Any]:
        """Item k to out-neighbour k; the objects from the in-neighbours, in order."""
        return self._run("neighbor_alltoall", _alltoall_obj, (sendobj,), False)

    # ---- buffers, blocking and nonblocking

    def Neighbor_allgather(self, sendbuf: Any, recvbuf: Any) -> None:
        """*sendbuf* to every out-neighbour; block k of *recvbuf* from in-neighbour k (``MPI_Neighbor_allgather``)."""
        self._run("Neighbor_allgather", _allgather, (sendbuf, recvbuf), False)

    def Neighbor_allgatherv(self, sendbuf: Any, recvbuf: Any) -> None:
        """:meth:`Neighbor_allgather` into ``[buf, counts, displs, type]`` (``MPI_Neighbor_allgatherv``)."""
        self._run("Neighbor_allgatherv", _allgatherv, (sendbuf, recvbuf), False)

    def Neighbor_alltoall(self, sendbuf: Any, recvbuf: Any) -> None:
        """Block k of *sendbuf* to out-neighbour k, block k of *recvbuf* from in-neighbour k (``MPI_Neighbor_alltoall``)."""
        self._run("Neighbor_alltoall", _alltoall, (sendbuf, recvbuf), False)

    def Neighbor_alltoallv(self, sendbuf: Any, recvbuf: Any) -> None:
        """:meth:`Neighbor_alltoall` with ``[buf, counts, displs, type]`` on both sides (``MPI_Neighbor_alltoallv``)."""
        self._run("Neighbor_alltoallv", _alltoallv, (sendbuf, recvbuf), False)

    def Ineighbor_allgather(self, sendbuf: Any, recvbuf: Any) -> Request:
        return self._run("Ineighbor_allgather", _allgather, (sendbuf, recvbuf), True)

    def Ineighbor_allgatherv(self, sendbuf: Any, recvbuf: Any) -> Request:
        return self._run("Ineighbor_allgatherv", _allgatherv, (sendbuf, recvbuf), True)

    def Ineighbor_alltoall(self, sendbuf: Any, recvbuf: Any) -> Request:
        return self._run("Ineighbor_alltoall", _alltoall, (sendbuf, recvbuf), True)

    def Neighbor_alltoallw(self, sendbuf: Any, recvbuf: Any) -> None:
        """Per-neighbour counts, byte displacements and datatypes: ``[buf, (counts, displs), types]`` (``MPI_Neighbor_alltoallw``)."""
        self._run("Neighbor_alltoallw", _alltoallw, (sendbuf, recvbuf), False)

    def Ineighbor_alltoallv(self, sendbuf: Any, recvbuf: Any) -> Request:
        return self._run("Ineighbor_alltoallv", _alltoallv, (sendbuf, recvbuf), True)

    def Ineighbor_alltoallw(self, sendbuf: Any, recvbuf: Any) -> Request:
        return self._run("Ineighbor_alltoallw", _alltoallw, (sendbuf, recvbuf), True)


def _allgather_obj(c: Any, ctx: RankContext, sources: list[int], dests: list[int], obj: Any) -> Proc:
    data = _coll.dumps(obj)
    got = yield from _exchange(c, "neighbor_allgather", sources, dests, [data] * len(dests), [None] * len(sources))
    return [_coll.loads(x) if x is not None else None for x in got]


def _alltoall_obj(c: Any, ctx: RankContext, sources: list[int], dests: list[int], objs: list[Any]) -> Proc:
    if len(objs) != len(dests):
        raise ValueError(f"rank {ctx.rank}: neighbor_alltoall: expected {len(dests)} items (one per out-neighbour), "
                         f"got {len(objs)}")
    got = yield from _exchange(c, "neighbor_alltoall", sources, dests, [_coll.dumps(o) for o in objs],
                               [None] * len(sources))
    return [_coll.loads(x) if x is not None else None for x in got]


def _allgather(c: Any, ctx: RankContext, sources: list[int], dests: list[int], sendbuf: Any, recvbuf: Any) -> Proc:
    send = elements(sendbuf, "Neighbor_allgather")
    into, finish = receiving(recvbuf, "Neighbor_allgather", blocks=len(sources))
    yield from _exchange(c, "neighbor_allgather", sources, dests, [send] * len(dests),
                         _writable(_blocks(into, len(sources))))
    finish()


def _allgatherv(c: Any, ctx: RankContext, sources: list[int], dests: list[int], sendbuf: Any, recvbuf: Any) -> Proc:
    send = elements(sendbuf, "Neighbor_allgatherv")
    recv = buffer_spec(recvbuf, "Neighbor_allgatherv", vector=True, blocks=len(sources))
    yield from _exchange(c, "neighbor_allgatherv", sources, dests, [send] * len(dests),
                         _writable(_vblocks(recv, len(sources), "Neighbor_allgatherv", ctx.rank)))
    recv.finish()


def _alltoall(c: Any, ctx: RankContext, sources: list[int], dests: list[int], sendbuf: Any, recvbuf: Any) -> Proc:
    send = elements(sendbuf, "Neighbor_alltoall", blocks=len(dests))
    into, finish = receiving(recvbuf, "Neighbor_alltoall", blocks=len(sources))
    yield from _exchange(c, "neighbor_alltoall", sources, dests, _blocks(send, len(dests)),
                         _writable(_blocks(into, len(sources))))
    finish()


def _alltoallv(c: Any, ctx: RankContext, sources: list[int], dests: list[int], sendbuf: Any, recvbuf: Any) -> Proc:
    send = buffer_spec(sendbuf, "Neighbor_alltoallv", vector=True, blocks=len(dests))
    recv = buffer_spec(recvbuf, "Neighbor_alltoallv", vector=True, blocks=len(sources))
    yield from _exchange(c, "neighbor_alltoallv", sources, dests,
                         _vblocks(send, len(dests), "Neighbor_alltoallv", ctx.rank),
                         _writable(_vblocks(recv, len(sources), "Neighbor_alltoallv", ctx.rank)))
    recv.finish()


def _alltoallw(c: Any, ctx: RankContext, sources: list[int], dests: list[int], sendbuf: Any, recvbuf: Any) -> Proc:
    """Blocks of per-neighbour datatypes at byte displacements (``MPI.BOTTOM``: at addresses), packed as they travel.

    Each block moves exactly the bytes its datatype's type map covers (as
    :func:`~mpisim.compat.mpi4py.collective._Alltoallw` does), and lands through the
    receive side's type map.
    """
    call = "Neighbor_alltoallw"
    send_memory, _, sdispls, smaps = _wspec(sendbuf, len(dests), ctx, writable=False, call=call)
    recv_memory, _, rdispls, rmaps = _wspec(recvbuf, len(sources), ctx, writable=True, call=call)
    sent = [send_memory[index] for index in _block_bytes(smaps, sdispls)]
    rindex = _block_bytes(rmaps, rdispls)
    landed = [np.zeros(index.size, np.uint8) for index in rindex]
    yield from _exchange(c, "neighbor_alltoallw", sources, dests, sent, _writable(landed))
    for index, block, source in zip(rindex, landed, sources, strict=True):
        if source != PROC_NULL:  # nothing came from off the grid's edge: those bytes stay as they were
            recv_memory[index] = block
