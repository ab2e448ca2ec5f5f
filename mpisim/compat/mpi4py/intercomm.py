"""``MPI.Intercomm``: two disjoint groups talking to each other (``Create_intercomm``, ``Merge``, and their collectives).

An *intercommunicator* joins a local group and a remote group: point-to-point ranks name the
*remote* group's members (rank 0 of ``intercomm.Send(buf, dest=0)`` is the other group's
first rank), and a collective moves data *between* the groups -- ``Allreduce`` gives each
group the reduction of the other's contributions, ``Bcast`` goes from one root
(``root=MPI.ROOT`` there, ``MPI.PROC_NULL`` at its group's other ranks) to every member of the
other group. ``Merge`` makes one intracommunicator of both, the group that passed
``high=False`` first.

``Create_intercomm(local_leader, peer_comm, remote_leader, tag)`` is collective over each
group's own communicator: the two leaders exchange their groups over *peer_comm* (a message
each way with *tag*), then each leader broadcasts the other group to its own, as MPICH does.

Underneath, the two groups share one simulated communicator of all their members (the
*bridge*, agreed without messages, the group whose leader has the lower world rank first):
a remote rank ``r`` is the bridge's rank ``offset + r``, translated on the way in and out.
The collectives are MPICH's intercommunicator algorithms: a reduction or gather inside each
group to its leader, the leaders' exchange over the bridge, a broadcast inside each group.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mpisim.compat import collectives as _coll
from mpisim.compat.mpi4py import collective as _c
from mpisim.compat.mpi4py.comm import Comm, Intracomm
from mpisim.compat.mpi4py.environment import here
from mpisim.compat.mpi4py.group import Group
from mpisim.compat.mpi4py.msgbuffer import elements, recv_array
from mpisim.compat.mpi4py.op import SUM, Op
from mpisim.compat.mpi4py.p2p import PointToPoint
from mpisim.compat.mpi4py.request import Request
from mpisim.compat.unsupported import unsupported
from mpisim.errors import InvalidArgumentError
from mpisim.mpi.constants import ANY_SOURCE, ANY_TAG, PROC_NULL, ROOT
from mpisim.mpi.payload import DataPayload

_TAG = 0  # the leaders' messages inside a collective travel on the bridge's own internal context


def create(local_comm: Comm, local_leader: int, peer_comm: Comm, remote_leader: int, tag: int) -> Intercomm:
    """``Intracomm.Create_intercomm`` (see the module docstring)."""
    ctx = here("Comm.Create_intercomm")
    local = local_comm._on(ctx)
    if not 0 <= int(local_leader) < local.size:
        raise InvalidArgumentError(f"rank {ctx.rank}: Create_intercomm: local_leader {local_leader} is not a rank "
                                   f"of the local communicator (size {local.size})")
    mine = (list(local.group), local.group[int(local_leader)])
    remote = None
    if local.rank == int(local_leader):
        peer = peer_comm._on(ctx)
        got = ctx.block(peer.sendrecv(_coll.dumps(mine), int(remote_leader), int(tag), None, int(remote_leader),
                                      int(tag)))
        remote = _coll.loads(got)
    remote_group, remote_leader_world = ctx.block(_coll.bcast_obj(local, remote, int(local_leader)))
    first = mine[1] < remote_leader_world
    union = (mine[0] + remote_group) if first else (remote_group + mine[0])
    counts = ctx.cache.setdefault("intercomms", {})
    key = (min(mine[1], remote_leader_world), max(mine[1], remote_leader_world), int(tag))
    n = counts[key] = counts.get(key, 0) + 1
    bridge = ctx.comm.sub(union, label=f"intercomm{n}:{key}")
    inter = Intercomm(local.sub(list(range(local.size)), label=f"intercomm{n}:{key}:local"))
    inter._bridge, inter._inner = bridge, bridge.sub(list(range(bridge.size)), label="collectives")
    inter._offset = len(remote_group) if not first else 0  # where my group starts in the bridge
    inter._remote_offset = 0 if not first else len(mine[0])
    inter._remote = tuple(remote_group)
    inter._first = first
    return inter


class _Bridge(PointToPoint):
    """The point-to-point calls, on the bridge (ranks already translated)."""

    def __init__(self, bridge: Any) -> None:
        self._bridge = bridge

    @property
    def _c(self) -> Any:
        return self._bridge

    def _on(self, ctx: Any) -> Any:
        return self._bridge


class Intercomm(Comm):
    """An intercommunicator: ``Get_rank``/``Get_size`` of the local group, ranks in calls of the remote one."""

    _bridge: Any
    _inner: Any
    _offset: int
    _remote_offset: int
    _remote: tuple[int, ...]
    _first: bool

    def Is_inter(self) -> bool:
        return True

    def Is_intra(self) -> bool:
        return False

    is_inter, is_intra = True, False

    def Get_remote_size(self) -> int:
        return len(self._remote)

    remote_size = property(Get_remote_size)

    def Get_remote_group(self) -> Group:
        return Group(self._remote)

    remote_group = property(Get_remote_group)

    def Merge(self, high: bool = False) -> Intracomm:
        """One intracommunicator of both groups, the ``high=False`` group's ranks first (``MPI_Intercomm_merge``)."""
        ctx = here("Intercomm.Merge")
        bridge = self._bridge
        # Both groups alike: the group first in the bridge breaks the tie.
        key = (2 if high else 0) + (0 if self._first else 1)
        return Intracomm(ctx.block(bridge.split(0, key * bridge.size + self._c.rank)))

    # ---- point-to-point: remote ranks <-> bridge ranks

    def _to(self, rank: int) -> int:
        return rank if rank in (PROC_NULL, ANY_SOURCE) else self._remote_offset + int(rank)

    def _fix(self, status: Any) -> None:
        if status is not None and status.source not in (PROC_NULL, ANY_SOURCE):
            status.source -= self._remote_offset

    def _fix_later(self, request: Request) -> Request:
        sim = request._sim
        if sim is not None and getattr(sim, "callbacks", None) is not None:
            sim.callbacks.append(lambda _: self._fix(sim.status))
        return request

    def send(self, obj: Any, dest: int, tag: int = 0) -> None:
        _Bridge(self._bridge).send(obj, self._to(dest), tag)

    def ssend(self, obj: Any, dest: int, tag: int = 0) -> None:
        _Bridge(self._bridge).ssend(obj, self._to(dest), tag)

    def isend(self, obj: Any, dest: int, tag: int = 0) -> Request:
        return _Bridge(self._bridge).isend(obj, self._to(dest), tag)

    def recv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Any = None) -> Any:
        value = _Bridge(self._bridge).recv(buf, self._to(source), tag, status)
        self._fix(status)
        return value

    def irecv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        return self._fix_later(_Bridge(self._bridge).irecv(buf, self._to(source), tag))

    def Send(self, buf: Any, dest: int, tag: int = 0) -> None:
        _Bridge(self._bridge).Send(buf, self._to(dest), tag)

    def Ssend(self, buf: Any, dest: int, tag: int = 0) -> None:
        _Bridge(self._bridge).Ssend(buf, self._to(dest), tag)

    def Isend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        return _Bridge(self._bridge).Isend(buf, self._to(dest), tag)

    def Recv(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Any = None) -> None:
        _Bridge(self._bridge).Recv(buf, self._to(source), tag, status)
        self._fix(status)

    def Irecv(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        return self._fix_later(_Bridge(self._bridge).Irecv(buf, self._to(source), tag))

    def sendrecv(self, sendobj: Any, dest: int, sendtag: int = 0, recvbuf: Any = None, source: int = ANY_SOURCE,
                 recvtag: int = ANY_TAG, status: Any = None) -> Any:
        value = _Bridge(self._bridge).sendrecv(sendobj, self._to(dest), sendtag, recvbuf, self._to(source), recvtag,
                                               status)
        self._fix(status)
        return value

    def Sendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None, source: int = ANY_SOURCE,
                 recvtag: int = ANY_TAG, status: Any = None) -> None:
        _Bridge(self._bridge).Sendrecv(sendbuf, self._to(dest), sendtag, recvbuf, self._to(source), recvtag, status)
        self._fix(status)

    # ---- collectives: inside each group, then the leaders across

    def Barrier(self) -> None:
        """Every member of both groups has entered (a barrier of the bridge)."""
        ctx = here("Intercomm.Barrier")
        ctx.block(self._inner.barrier())

    barrier = Barrier

    def _leaders_swap(self, ctx: Any, send: np.ndarray, into: np.ndarray) -> None:
        leader = self._remote_offset
        ctx.block(self._inner.sendrecv(send.view(np.uint8), leader, _TAG, DataPayload(into.view(np.uint8), writable=True),
                                       leader, _TAG))

    def _leaders_swap_obj(self, ctx: Any, obj: Any) -> Any:
        leader = self._remote_offset
        return _coll.loads(ctx.block(self._inner.sendrecv(_coll.dumps(obj), leader, _TAG, None, leader, _TAG)))

    def Bcast(self, buf: Any, root: int = 0) -> None:
        """From *root* of one group to every member of the other (``root=MPI.ROOT`` at the root, ``PROC_NULL`` beside it)."""
        ctx = here("Intercomm.Bcast")
        if root == PROC_NULL:
            return
        if root == ROOT:
            ctx.block(self._inner.send(elements(buf, "Bcast").view(np.uint8), self._remote_offset, _TAG))
            return
        into = recv_array(buf, "Bcast")
        if self._c.rank == 0:
            ctx.block(self._inner.recv(DataPayload(into.view(np.uint8), writable=True), self._to(root), _TAG))
        ctx.block(_c._Bcast(self._c, ctx, into, 0))

    def bcast(self, obj: Any = None, root: int = 0) -> Any:
        ctx = here("Intercomm.bcast")
        if root == PROC_NULL:
            return None
        if root == ROOT:
            ctx.block(self._inner.send(_coll.dumps(obj), self._remote_offset, _TAG))
            return None
        got = None
        if self._c.rank == 0:
            got = _coll.loads(ctx.block(self._inner.recv(None, self._to(root), _TAG)))
        return ctx.block(_coll.bcast_obj(self._c, got, 0))

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> None:
        """Each group gets the reduction of the *other* group's buffers (``MPI_Allreduce`` on an intercommunicator)."""
        ctx = here("Intercomm.Allreduce")
        data = elements(sendbuf, "Allreduce")
        into = recv_array(recvbuf, "Allreduce")
        mine = np.empty_like(data)
        ctx.block(_c._Reduce(self._c, ctx, data, mine, op, 0))
        if self._c.rank == 0:
            self._leaders_swap(ctx, mine, into)
        ctx.block(_c._Bcast(self._c, ctx, into, 0))

    def allreduce(self, sendobj: Any, op: Op = SUM) -> Any:
        ctx = here("Intercomm.allreduce")
        mine = ctx.block(_c._reduce(self._c, ctx, sendobj, op, 0))
        theirs = self._leaders_swap_obj(ctx, mine) if self._c.rank == 0 else None
        return ctx.block(_coll.bcast_obj(self._c, theirs, 0))

    def Allgather(self, sendbuf: Any, recvbuf: Any) -> None:
        """Each group gets the other group's blocks, in its rank order."""
        ctx = here("Intercomm.Allgather")
        data = elements(sendbuf, "Allgather")
        into = recv_array(recvbuf, "Allgather")
        mine = np.empty(data.size * self._c.size, dtype=data.dtype)
        ctx.block(_c._Gather(self._c, ctx, data, mine, 0))
        if self._c.rank == 0:
            self._leaders_swap(ctx, mine, into)
        ctx.block(_c._Bcast(self._c, ctx, into, 0))

    def allgather(self, sendobj: Any) -> list[Any]:
        ctx = here("Intercomm.allgather")
        mine = ctx.block(_c._gather(self._c, ctx, sendobj, 0))
        theirs = self._leaders_swap_obj(ctx, mine) if self._c.rank == 0 else None
        return ctx.block(_coll.bcast_obj(self._c, theirs, 0))

    # Rooted collectives: the root passes MPI.ROOT, its group's other ranks MPI.PROC_NULL, and the
    # other group the root's rank in it. MPICH's short-message algorithms: the other group meets
    # at its rank 0 (a local gather, reduce or, after the root's one message, scatter), and one
    # message crosses between that rank and the root.

    def _from_leader(self, ctx: Any, into: np.ndarray) -> None:
        ctx.block(self._inner.recv(DataPayload(into.view(np.uint8), writable=True), self._remote_offset, _TAG))

    def Reduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, root: int = 0) -> None:
        """The other group's buffers reduced with *op* into the root's *recvbuf* (``MPI_Reduce``)."""
        ctx = here("Intercomm.Reduce")
        if root == ROOT:
            self._from_leader(ctx, recv_array(recvbuf, "Reduce"))
        elif root != PROC_NULL:
            data = elements(sendbuf, "Reduce")
            mine = np.empty_like(data)
            ctx.block(_c._Reduce(self._c, ctx, data, mine, op, 0))
            if self._c.rank == 0:
                ctx.block(self._inner.send(mine.view(np.uint8), self._to(root), _TAG))

    def Gather(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        """The other group's blocks, in its rank order, into the root's *recvbuf* (``MPI_Gather``)."""
        ctx = here("Intercomm.Gather")
        if root == ROOT:
            self._from_leader(ctx, recv_array(recvbuf, "Gather", blocks=self.Get_remote_size()))
        elif root != PROC_NULL:
            data = elements(sendbuf, "Gather")
            mine = np.empty(data.size * self._c.size, dtype=data.dtype)
            ctx.block(_c._Gather(self._c, ctx, data, mine, 0))
            if self._c.rank == 0:
                ctx.block(self._inner.send(mine.view(np.uint8), self._to(root), _TAG))

    def Scatter(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        """Block r of the root's *sendbuf* to rank r of the other group (``MPI_Scatter``)."""
        ctx = here("Intercomm.Scatter")
        if root == ROOT:
            data = elements(sendbuf, "Scatter", blocks=self.Get_remote_size())
            ctx.block(self._inner.send(data.view(np.uint8), self._remote_offset, _TAG))
        elif root != PROC_NULL:
            into = recv_array(recvbuf, "Scatter")
            whole = np.empty(into.size * self._c.size, dtype=into.dtype) if self._c.rank == 0 else None
            if whole is not None:
                ctx.block(self._inner.recv(DataPayload(whole.view(np.uint8), writable=True), self._to(root), _TAG))
            ctx.block(_c._Scatter(self._c, ctx, whole, into, 0))

    def Alltoall(self, sendbuf: Any, recvbuf: Any) -> None:
        """Block j of each rank's *sendbuf* to rank j of the other group (MPICH's pairwise exchange)."""
        ctx = here("Intercomm.Alltoall")
        remote = self.Get_remote_size()
        data = elements(sendbuf, "Alltoall", blocks=remote)
        into = recv_array(recvbuf, "Alltoall", blocks=remote)
        send_n, recv_n = data.size // max(remote, 1), into.size // max(remote, 1)
        for dst, src in self._pairs(remote):
            send = data[dst * send_n:(dst + 1) * send_n].view(np.uint8) if dst is not None else None
            recv = into[src * recv_n:(src + 1) * recv_n].view(np.uint8) if src is not None else None
            self._exchange(ctx, send, dst, None if recv is None else DataPayload(recv, writable=True), src)

    def _pairs(self, remote: int) -> list[tuple[int | None, int | None]]:
        """Step i: send to remote rank + i, receive from rank - i, modulo the larger group (``None``: no one)."""
        top, me = max(self._c.size, remote), self._c.rank
        return [((me + i) % top if (me + i) % top < remote else None,
                 (me - i) % top if (me - i) % top < remote else None) for i in range(top)]

    def _exchange(self, ctx: Any, send: Any, dst: int | None, into: Any, src: int | None) -> Any:
        if dst is not None and src is not None:
            return ctx.block(self._inner.sendrecv(send, self._to(dst), _TAG, into, self._to(src), _TAG))
        if dst is not None:
            ctx.block(self._inner.send(send, self._to(dst), _TAG))
        elif src is not None:
            return ctx.block(self._inner.recv(into, self._to(src), _TAG))
        return None

    def reduce(self, sendobj: Any, op: Op = SUM, root: int = 0) -> Any:
        ctx = here("Intercomm.reduce")
        if root == ROOT:
            return _coll.loads(ctx.block(self._inner.recv(None, self._remote_offset, _TAG)))
        if root != PROC_NULL:
            mine = ctx.block(_c._reduce(self._c, ctx, sendobj, op, 0))
            if self._c.rank == 0:
                ctx.block(self._inner.send(_coll.dumps(mine), self._to(root), _TAG))
        return None

    def gather(self, sendobj: Any, root: int = 0) -> Any:
        ctx = here("Intercomm.gather")
        if root == ROOT:
            return _coll.loads(ctx.block(self._inner.recv(None, self._remote_offset, _TAG)))
        if root != PROC_NULL:
            mine = ctx.block(_c._gather(self._c, ctx, sendobj, 0))
            if self._c.rank == 0:
                ctx.block(self._inner.send(_coll.dumps(mine), self._to(root), _TAG))
        return None

    def scatter(self, sendobj: Any = None, root: int = 0) -> Any:
        ctx = here("Intercomm.scatter")
        if root == ROOT:
            ctx.block(self._inner.send(_coll.dumps(list(sendobj)), self._remote_offset, _TAG))
            return None
        if root == PROC_NULL:
            return None
        items = _coll.loads(ctx.block(self._inner.recv(None, self._to(root), _TAG))) if self._c.rank == 0 else None
        return ctx.block(_coll.scatter_obj(self._c, items, 0))

    def alltoall(self, sendobj: Any) -> list[Any]:
        ctx = here("Intercomm.alltoall")
        out: list[Any] = [None] * self.Get_remote_size()
        for dst, src in self._pairs(self.Get_remote_size()):
            got = self._exchange(ctx, None if dst is None else _coll.dumps(sendobj[dst]), dst, None, src)
            if src is not None:
                out[src] = _coll.loads(got)
        return out

    def Free(self) -> None:
        self._fixed = None


def _get_parent(cls: type) -> Intercomm:
    """A null intercommunicator: no mpisim process was started by ``Spawn`` (``MPI_Comm_get_parent``)."""
    return Intercomm()


Comm.Get_parent = classmethod(_get_parent)  # a Comm method whose result is of this module's type


def _refuse(name: str) -> Any:
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise unsupported(f"Intercomm.{name}")
    call.__name__ = name
    return call


# What an intracommunicator does and mpisim's intercommunicator does not: an error naming it,
# never the local group's intracommunicator call.
for _name in dir(Comm):
    if not _name.startswith("_") and _name not in Intercomm.__dict__ and callable(getattr(Comm, _name)) and \
            _name[0].isalpha() and _name not in ("Get_rank", "Get_size", "Get_group", "Get_name", "Set_name",
                                                 "Get_errhandler", "Set_errhandler", "Get_attr", "Abort", "Compare",
                                                 "Get_topology", "Dup", "Clone", "Get_parent"):
        setattr(Intercomm, _name, _refuse(_name))
