"""Collective calls of ``MPI.Comm``: objects (``bcast, gather, allreduce, scan, ...``) and buffers (``Bcast, Allreduce, Gatherv, ...``).

A mixin of :class:`~mpisim.compat.mpi4py.comm.Comm`. The generator Comm's uppercase forms do
the work (IN_PLACE, filling the receive buffer) with the registry's algorithms, as every other
mpisim workload does; here the program's buffer specifications become numpy views and mpi4py's
ops mpisim's. The lowercase forms move pickles with MPICH's algorithms for objects
(:mod:`mpisim.compat.collectives`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mpisim.compat import collectives as _coll
from mpisim.compat.mpi4py.environment import here
from mpisim.compat.mpi4py.msgbuffer import IN_PLACE, buffer_spec, elements, recv_array, send_array
from mpisim.compat.mpi4py.op import SUM, Op, as_op
from mpisim.compat.ranks import RankContext
from mpisim.mpi import payload as _payload
from mpisim.mpi.payload import in_place, split_counts


class Collectives:
    """``barrier``/``Barrier``, ``bcast``/``Bcast`` and the rest: the collective half of a communicator."""

    _c: Any  # the calling rank's simulated communicator (Comm)

    # ---- collectives, objects

    def barrier(self) -> None:
        """Wait until every rank has entered (``MPI_Barrier``)."""
        here("Comm.barrier").block(self._c.barrier())

    Barrier = barrier

    def bcast(self, obj: Any, root: int = 0) -> Any:
        """Return root's object on every rank."""
        return here("Comm.bcast").block(_coll.bcast_obj(self._c, obj, root))

    def gather(self, sendobj: Any, root: int = 0) -> list[Any] | None:
        """Return every rank's object, in rank order, at root (``None`` elsewhere)."""
        return here("Comm.gather").block(_coll.gather_obj(self._c, sendobj, root))

    def scatter(self, sendobj: Any, root: int = 0) -> Any:
        """Return item *rank* of root's sequence."""
        return here("Comm.scatter").block(_coll.scatter_obj(self._c, sendobj, root))

    def allgather(self, sendobj: Any) -> list[Any]:
        """Return every rank's object, in rank order, on every rank."""
        return here("Comm.allgather").block(_coll.allgather_obj(self._c, sendobj))

    def alltoall(self, sendobj: Sequence[Any]) -> list[Any]:
        """Send item j to rank j; return the items received, in rank order."""
        return here("Comm.alltoall").block(_coll.alltoall_obj(self._c, sendobj))

    def reduce(self, sendobj: Any, op: Op = SUM, root: int = 0) -> Any:
        """Reduce every rank's object with *op* (in rank order) at root."""
        op = as_op(op)
        return here("Comm.reduce").block(_coll.reduce_obj(self._c, sendobj, op, op.commute, root))

    def allreduce(self, sendobj: Any, op: Op = SUM) -> Any:
        """Reduce every rank's object with *op*; every rank gets the result (reduce, then bcast)."""
        ctx = here("Comm.allreduce")
        op = as_op(op)
        result = ctx.block(_coll.reduce_obj(self._c, sendobj, op, op.commute, 0))
        return ctx.block(_coll.bcast_obj(self._c, result, 0))

    def scan(self, sendobj: Any, op: Op = SUM) -> Any:
        """Return the reduction of ranks 0..rank's objects with *op*, in rank order (``MPI_Scan``)."""
        return here("Comm.scan").block(_coll.scan_obj(self._c, sendobj, as_op(op), exclusive=False))

    def exscan(self, sendobj: Any, op: Op = SUM) -> Any:
        """Return the reduction of ranks 0..rank-1's objects with *op* (``MPI_Exscan``); None on rank 0."""
        return here("Comm.exscan").block(_coll.scan_obj(self._c, sendobj, as_op(op), exclusive=True))

    # ---- collectives, buffers

    # The generator Comm's uppercase forms do the work (IN_PLACE, filling the receive buffer);
    # here the program's buffer specifications become numpy views and mpi4py's ops mpisim's.

    def Bcast(self, buf: Any, root: int = 0) -> None:
        """Broadcast root's buffer into every rank's (``MPI_Bcast``)."""
        here("Comm.Bcast").block(self._c.Bcast(recv_array(buf, "Bcast"), root))

    def Reduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, root: int = 0) -> None:
        """Reduce every rank's buffer into root's *recvbuf* (``MPI_Reduce``; ``IN_PLACE`` at root)."""
        ctx = here("Comm.Reduce")
        c = self._c
        into = recv_array(recvbuf, "Reduce") if c.rank == root else None
        ctx.block(c.Reduce(send_array(sendbuf, "Reduce"), into, as_op(op).sim("Reduce"), root))

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> None:
        """Reduce every rank's buffer into every rank's *recvbuf* (``MPI_Allreduce``; ``IN_PLACE``)."""
        ctx = here("Comm.Allreduce")
        ctx.block(self._c.Allreduce(send_array(sendbuf, "Allreduce"), recv_array(recvbuf, "Allreduce"),
                                    as_op(op).sim("Allreduce")))

    def Reduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> None:
        """Reduce, then rank r keeps block r (equal blocks; ``MPI_Reduce_scatter_block``)."""
        ctx = here("Comm.Reduce_scatter_block")
        ctx.block(self._c.Reduce_scatter_block(send_array(sendbuf, "Reduce_scatter_block"),
                                               recv_array(recvbuf, "Reduce_scatter_block"),
                                               as_op(op).sim("Reduce_scatter_block")))

    def Reduce_scatter(self, sendbuf: Any, recvbuf: Any, recvcounts: Sequence[int] | None = None, op: Op = SUM) -> None:
        """Reduce, then rank r keeps ``recvcounts[r]`` elements (``MPI_Reduce_scatter``).

        Blocks of ``np.array_split`` sizes run the registry's reduce_scatter; other counts are a
        reduce to rank 0 followed by a scatterv.
        """
        ctx = here("Comm.Reduce_scatter")
        c = self._c
        if sendbuf is IN_PLACE:
            whole = recv_array(recvbuf, "Reduce_scatter")
            send = whole.copy()
        else:
            send = elements(sendbuf, "Reduce_scatter")
            whole = None
        counts = [int(x) for x in recvcounts] if recvcounts is not None else split_counts(send.size, c.size)
        into = whole[:counts[c.rank]] if whole is not None else recv_array(recvbuf, "Reduce_scatter")
        op_ = as_op(op).sim("Reduce_scatter")
        if counts == split_counts(send.size, c.size):
            _payload.fill(in_place(into), ctx.block(c.reduce_scatter(send, op_)))
            return
        total = ctx.block(c.reduce(send, op_, 0))
        full = np.asarray(total).reshape(-1) if c.rank == 0 else None
        ctx.block(_coll.collective(c, "scatterv", "scatterv(root=0)", into.nbytes,
                                   _coll.scatterv(c, full, counts, _coll.offsets(counts), into, 0)))

    def Scan(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> None:
        """Rank r's *recvbuf* gets the reduction of ranks 0..r's buffers (``MPI_Scan``; ``IN_PLACE``)."""
        _scan(here("Comm.Scan"), self._c, "Scan", sendbuf, recvbuf, op, exclusive=False)

    def Exscan(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> None:
        """Rank r's *recvbuf* gets the reduction of ranks 0..r-1's buffers (``MPI_Exscan``; ``IN_PLACE``).

        Rank 0's *recvbuf* is left as it was (MPI leaves it undefined; MPICH does not touch it).
        """
        _scan(here("Comm.Exscan"), self._c, "Exscan", sendbuf, recvbuf, op, exclusive=True)

    def Gather(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        """Gather equal blocks into root's *recvbuf* in rank order (``MPI_Gather``)."""
        ctx = here("Comm.Gather")
        c = self._c
        into = recv_array(recvbuf, "Gather") if c.rank == root else None
        ctx.block(c.Gather(send_array(sendbuf, "Gather"), into, root))

    def Scatter(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        """Scatter equal blocks of root's *sendbuf*, block r to rank r (``MPI_Scatter``)."""
        ctx = here("Comm.Scatter")
        c = self._c
        send = elements(sendbuf, "Scatter") if c.rank == root else None
        into = IN_PLACE if recvbuf is IN_PLACE else recv_array(recvbuf, "Scatter")
        ctx.block(c.Scatter(send, into, root))

    def Allgather(self, sendbuf: Any, recvbuf: Any) -> None:
        """Gather equal blocks into every rank's *recvbuf* (``MPI_Allgather``)."""
        ctx = here("Comm.Allgather")
        ctx.block(self._c.Allgather(send_array(sendbuf, "Allgather"), recv_array(recvbuf, "Allgather")))

    def Alltoall(self, sendbuf: Any, recvbuf: Any) -> None:
        """Block j of *sendbuf* to rank j, block i of *recvbuf* from rank i (``MPI_Alltoall``)."""
        ctx = here("Comm.Alltoall")
        ctx.block(self._c.Alltoall(send_array(sendbuf, "Alltoall"), recv_array(recvbuf, "Alltoall")))

    def Gatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        """Gather blocks of per-rank counts into root's ``[buf, counts, displs, type]`` (``MPI_Gatherv``)."""
        ctx = here("Comm.Gatherv")
        c = self._c
        recv = buffer_spec(recvbuf, "Gatherv", vector=True) if c.rank == root else None
        if recv is not None and recv.counts is None:
            raise TypeError(f"rank {ctx.rank}: Gatherv: the root's recvbuf needs counts: [buf, counts, displs, type]")
        if sendbuf is IN_PLACE:
            send = None
        else:
            send = elements(sendbuf, "Gatherv")
        nbytes = send.nbytes if send is not None else 0
        ctx.block(_coll.collective(c, "gatherv", f"gatherv(root={root})", nbytes, _coll.gatherv(
            c, send, recv.array if recv else None, recv.counts if recv else None, recv.displs if recv else None, root)))

    def Scatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        """Scatter blocks of per-rank counts from root's ``[buf, counts, displs, type]`` (``MPI_Scatterv``)."""
        ctx = here("Comm.Scatterv")
        c = self._c
        send = buffer_spec(sendbuf, "Scatterv", vector=True) if c.rank == root else None
        if send is not None and send.counts is None:
            raise TypeError(f"rank {ctx.rank}: Scatterv: the root's sendbuf needs counts: [buf, counts, displs, type]")
        into = None if recvbuf is IN_PLACE else recv_array(recvbuf, "Scatterv")
        nbytes = into.nbytes if into is not None else 0
        ctx.block(_coll.collective(c, "scatterv", f"scatterv(root={root})", nbytes, _coll.scatterv(
            c, send.array if send else None, send.counts if send else None, send.displs if send else None, into, root)))

    def Allgatherv(self, sendbuf: Any, recvbuf: Any) -> None:
        """Gather blocks of per-rank counts into every rank's ``[buf, counts, displs, type]`` (``MPI_Allgatherv``)."""
        ctx = here("Comm.Allgatherv")
        c = self._c
        recv = buffer_spec(recvbuf, "Allgatherv", vector=True)
        if recv.counts is None:
            raise TypeError(f"rank {ctx.rank}: Allgatherv: recvbuf needs counts: [buf, counts, displs, type]")
        send = None if sendbuf is IN_PLACE else elements(sendbuf, "Allgatherv")
        ctx.block(_coll.collective(c, "allgatherv", "allgatherv()", recv.array.nbytes,
                                   _coll.allgatherv(c, send, recv.array, recv.counts, recv.displs)))

    def Alltoallv(self, sendbuf: Any, recvbuf: Any) -> None:
        """Per-pair counts: ``[buf, counts, displs, type]`` on both sides (``MPI_Alltoallv``)."""
        ctx = here("Comm.Alltoallv")
        c = self._c
        recv = buffer_spec(recvbuf, "Alltoallv", vector=True)
        send = recv if sendbuf is IN_PLACE else buffer_spec(sendbuf, "Alltoallv", vector=True)
        if recv.counts is None or send.counts is None:
            raise TypeError(f"rank {ctx.rank}: Alltoallv: buffers need counts: [buf, counts, displs, type]")
        source = send.array.copy() if sendbuf is IN_PLACE else send.array
        ctx.block(_coll.collective(c, "alltoallv", "alltoallv()", source.nbytes, _coll.alltoallv(
            c, source, send.counts, send.displs, recv.array, recv.counts, recv.displs)))


def _scan(ctx: RankContext, c: Any, call: str, sendbuf: Any, recvbuf: Any, op: Any, exclusive: bool) -> None:
    """``Scan``/``Exscan``: MPICH's recursive doubling (:func:`mpisim.compat.collectives.scan_buffers`)."""
    recv = recv_array(recvbuf, call)
    send = recv if sendbuf is IN_PLACE else elements(sendbuf, call)
    if send.size != recv.size:  # mpi4py's check, before any message
        raise ValueError(f"rank {ctx.rank}: {call}: mismatch in send count {send.size} and receive count {recv.size}")
    ctx.block(_coll.scan_buffers(c, send, recv, as_op(op).sim(call), exclusive))
