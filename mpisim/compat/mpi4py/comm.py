"""``MPI.Comm``: a communicator, as mpi4py has it, over the calling rank's simulated communicator.

``MPI.COMM_WORLD`` is one object shared by the program's module code on every rank; each call
resolves it to the calling rank's communicator (:attr:`Comm._c`). Communicators made by
``Split``, ``Dup`` or ``Create_cart`` belong to the rank that made them.

The calls are grouped as mpi4py groups them: identity and new communicators here,
point-to-point in :mod:`~mpisim.compat.mpi4py.p2p`, collectives in
:mod:`~mpisim.compat.mpi4py.collective`, the Cartesian grid in
:mod:`~mpisim.compat.mpi4py.topology`.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from mpisim.compat.mpi4py import bsend as _bsend
from mpisim.compat.mpi4py import distgraph as _distgraph
from mpisim.compat.mpi4py import topology as _topology
from mpisim.compat.mpi4py.collective import Collectives
from mpisim.compat.mpi4py.environment import ERRORS_RETURN, Errhandler, alive, here
from mpisim.compat.mpi4py.group import Group
from mpisim.compat.mpi4py.info import Info
from mpisim.compat.mpi4py.nbc import CollectiveRequest
from mpisim.compat.mpi4py.neighbors import NeighborCollectives
from mpisim.compat.mpi4py.p2p import PointToPoint
from mpisim.compat.mpi4py.persistent import Persistent
from mpisim.compat.mpi4py.request import Request
from mpisim.compat.mpi4py.topology import CartGrid, DistGraphTopology, GraphTopology, graph_index_edges
from mpisim.compat.ranks import RankContext, require
from mpisim.compat.unsupported import Strict, unsupported
from mpisim.errors import InvalidArgumentError, InvalidCommunicatorError, MPIError
from mpisim.mpi.comm import Comm as _SimComm
from mpisim.mpi.constants import (
    CART,
    COMM_TYPE_HW_GUIDED,
    COMM_TYPE_HW_UNGUIDED,
    COMM_TYPE_RESOURCE_GUIDED,
    COMM_TYPE_SHARED,
    CONGRUENT,
    DIST_GRAPH,
    GRAPH,
    IDENT,
    UNDEFINED,
    UNEQUAL,
)
from mpisim.mpi.constants import attribute as _attribute


class Comm(PointToPoint, Persistent, Collectives, metaclass=Strict):
    """A communicator: mpi4py's ``Comm`` over the calling rank's simulated communicator.

    ``MPI.COMM_WORLD`` and ``MPI.COMM_SELF`` resolve to the calling rank's handle on each
    call; communicators made by ``Split``, ``Dup`` or ``Create_cart`` belong to the rank that
    made them. ``Intracomm(comm)`` (and a subclass of it) wraps the same communicator.
    """

    def __init__(self, comm: Any = None) -> None:
        if isinstance(comm, Comm):
            self._fixed, self._which = comm._fixed, comm._which
            for name in _TOPOLOGY:  # the topology is the communicator's: MPI.Intracomm(cart) keeps it
                if name in comm.__dict__:
                    self.__dict__[name] = comm.__dict__[name]
        elif comm is None or isinstance(comm, _SimComm):
            self._fixed, self._which = comm, None
        else:  # mpi4py's typed argument: MPI.Comm((1, 2, 3)) is a TypeError
            raise TypeError(f"Argument 'comm' has incorrect type (expected mpi4py.MPI.Comm, got {type(comm).__name__})")

    # ---- which simulated communicator

    @property
    def _c(self) -> Any:
        fixed = self._fixed
        if fixed is not None:
            return fixed
        ctx = require("MPI.Comm")
        if self._which == "world":
            return ctx.comm
        if self._which == "self":
            mine = ctx.cache.get("self")
            if mine is None:
                mine = ctx.cache["self"] = ctx.comm.sub([ctx.comm.rank], label="COMM_SELF")
            return mine
        raise InvalidCommunicatorError(f"rank {ctx.rank}: invalid communicator (MPI.COMM_NULL)")

    def _on(self, ctx: RankContext) -> Any:
        """:attr:`_c` for a caller that already holds its rank's context (the hot paths)."""
        fixed = self._fixed
        if fixed is not None:
            return fixed
        return ctx.comm if self._which == "world" else self._c

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Comm):
            return NotImplemented
        if (self._fixed is None and self._which is None) or (other._fixed is None and other._which is None):
            return (self._fixed is None and self._which is None) and (other._fixed is None and other._which is None)
        a, b = self._c, other._c
        return a.context == b.context and a.group == b.group

    def __hash__(self) -> int:
        return hash(self._which) if self._fixed is None else hash((self._fixed.context, self._fixed.group))

    def __bool__(self) -> bool:
        return not (self._fixed is None and self._which is None)

    def __repr__(self) -> str:
        return f"<mpi4py.MPI.{type(self).__name__} {self._which or ''}>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_fixed", "_which", *_TOPOLOGY):
            raise AttributeError(name)
        raise unsupported(f"Comm.{name}")

    # ---- identity

    def toint(self) -> int:
        """The communicator as an integer handle (MPICH's handles are ints, C and Fortran alike), kept per rank."""
        handles = here("Comm.toint").cache.setdefault("comm handles", [])
        for i, known in enumerate(handles):
            if known is self:
                return 0x44000000 + i
        handles.append(self)
        return 0x44000000 + len(handles) - 1

    @staticmethod
    def fromint(handle: int) -> Comm:
        """The communicator :meth:`toint` gave *handle* for on this rank."""
        ctx = here("Comm.fromint")
        handles = ctx.cache.get("comm handles", [])
        if not 0 <= int(handle) - 0x44000000 < len(handles):
            raise InvalidCommunicatorError(f"rank {ctx.rank}: Comm.fromint: {handle} is not a communicator handle")
        return handles[int(handle) - 0x44000000]

    py2f = toint
    f2py = fromint

    def Get_rank(self) -> int:
        """This rank's number in the communicator."""
        alive("Comm.Get_rank")
        return self._c.rank

    def Get_size(self) -> int:
        """Number of ranks in the communicator."""
        alive("Comm.Get_size")
        return self._c.size

    @property
    def rank(self) -> int:
        alive("Comm.rank")
        return self._c.rank

    @property
    def size(self) -> int:
        alive("Comm.size")
        return self._c.size

    def Get_name(self) -> str:
        """``MPI_COMM_WORLD``, ``MPI_COMM_SELF`` or the name given with ``Set_name``."""
        ctx = here("Comm.Get_name")
        if not self:
            return "MPI_COMM_NULL"
        names = ctx.cache.setdefault("names", {})
        return names.get(id(self._c), {"world": "MPI_COMM_WORLD", "self": "MPI_COMM_SELF"}.get(self._which or "", ""))

    def Set_name(self, name: str) -> None:
        here("Comm.Set_name").cache.setdefault("names", {})[id(self._c)] = str(name)

    name = property(lambda self: self.Get_name(), lambda self, name: self.Set_name(name))

    def Is_inter(self) -> bool:
        return False

    def Is_intra(self) -> bool:
        return True

    is_inter, is_intra = False, True
    #: True for a communicator with a topology (:class:`Cartcomm`).
    is_topo = False

    def Get_topology(self) -> int:
        """The communicator's topology: ``MPI.UNDEFINED`` (none), ``MPI.CART``, ``MPI.GRAPH``, ``MPI.DIST_GRAPH``."""
        alive("Comm.Get_topology")
        return _topology.kind(self)

    @property
    def topology(self) -> int:
        return self.Get_topology()

    def Get_errhandler(self) -> Errhandler:
        """The communicator's error handler (``ERRORS_RETURN`` unless set: errors raise ``MPI.Exception``)."""
        return here("Comm.Get_errhandler").cache.get("errhandlers", {}).get(self._key(), ERRORS_RETURN).handle()

    def Set_errhandler(self, errhandler: Errhandler) -> None:
        """Remember *errhandler* (:class:`~mpisim.compat.mpi4py.environment.Errhandler`: errors raise either way)."""
        here("Comm.Set_errhandler").cache.setdefault("errhandlers", {})[self._key()] = errhandler.handle()

    def _key(self) -> Any:
        c = self._c
        return c.context, tuple(c.group)

    def Get_attr(self, keyval: int) -> Any:
        """The communicator attributes MPI predefines (``TAG_UB``, ``IO``, ``WTIME_IS_GLOBAL``, ``APPNUM``, ...)."""
        alive("Comm.Get_attr")
        return _attribute(keyval)

    def Compare(self, other: Comm) -> int:
        """``IDENT`` for the same communicator, ``CONGRUENT`` for the same group, else ``UNEQUAL``."""
        a, b = self._c, other._c
        if a.context == b.context and a.group == b.group:
            return IDENT
        return CONGRUENT if a.group == b.group else UNEQUAL

    # ---- new communicators

    def Dup(self, info: Any = None) -> Intracomm:
        """A copy with its own matching context (``MPI_Comm_dup``); a topology communicator's copy has its topology."""
        new = here("Comm.Dup").block(self._c.dup())
        if _topology.kind(self) == UNDEFINED:
            return Intracomm(new)
        copy = type(self)(new)
        copy.__dict__.update({name: self.__dict__[name] for name in _TOPOLOGY if name in self.__dict__})
        return copy

    Clone = Dup

    def Split(self, color: int = 0, key: int = 0) -> Intracomm:
        """Partition by *color*, ordered by *key* (``MPI_Comm_split``); ``COMM_NULL`` for ``UNDEFINED``."""
        ctx = here("Comm.Split")
        new = ctx.block(self._c.split(int(color), int(key)))
        return Intracomm(new) if new is not None else COMM_NULL

    def Split_type(self, split_type: int, key: int = 0, info: Any = None) -> Intracomm:
        """The ranks that share a piece of hardware; the simulated node is the one level mpisim models.

        ``COMM_TYPE_SHARED``: the ranks on this rank's node. ``COMM_TYPE_HW_GUIDED`` and
        ``COMM_TYPE_RESOURCE_GUIDED`` with the info hint ``mpi_hw_resource_type`` =
        ``mpi_shared_memory``: the same; with another resource, ``COMM_NULL`` (as MPICH for a
        resource it does not know). ``COMM_TYPE_HW_UNGUIDED``: the node, when that is a smaller
        communicator than this one (its resource type set in *info*), else ``COMM_NULL``.
        """
        c = self._c
        node = c.node_of(c.rank)
        if split_type in (COMM_TYPE_HW_GUIDED, COMM_TYPE_RESOURCE_GUIDED):
            wanted = info.Get(_RESOURCE) if info else None
            return self.Split(node if wanted == "mpi_shared_memory" else UNDEFINED, key)
        if split_type == COMM_TYPE_HW_UNGUIDED:
            smaller = len({c.node_of(r) for r in range(c.size)}) > 1
            if smaller and info:
                info.Set(_RESOURCE, "mpi_shared_memory")
            return self.Split(node if smaller else UNDEFINED, key)
        if split_type not in (UNDEFINED, COMM_TYPE_SHARED):
            raise unsupported(f"Comm.Split_type({split_type})")
        return self.Split(node if split_type == COMM_TYPE_SHARED else UNDEFINED, key)

    def Dup_with_info(self, info: Any) -> Intracomm:
        """``Dup`` with hints for the copy (``MPI_Comm_dup_with_info``)."""
        new = self.Dup()
        new._info = info.Dup() if info else None
        return new

    def Idup(self, info: Any = None) -> tuple[Intracomm, Any]:
        """``(copy, request)`` (``MPI_Comm_idup``): the copy is made at once, the request already complete."""
        new = self.Dup_with_info(info) if info else self.Dup()
        done = CollectiveRequest(here("Comm.Idup").env, new._c, "Comm.Idup")
        done.succeed(None)
        return new, Request(done)

    def Idup_with_info(self, info: Any) -> tuple[Intracomm, Any]:
        return self.Idup(info)

    def Get_info(self) -> Any:
        """The hints set on the communicator (a copy, as an ``MPI.Info``; ``MPI_Comm_get_info``)."""
        mine = self.__dict__.get("_info")
        return mine.Dup() if mine else Info.Create()

    def Set_info(self, info: Any) -> None:
        self._info = info.Dup() if info else None

    info = property(Get_info, Set_info)

    def Attach_buffer(self, buf: Any) -> None:
        """A buffer for this communicator's ``Bsend``s, used before the process's (MPI 4.1; :mod:`.bsend`)."""
        ctx = here("Comm.Attach_buffer")
        _bsend.attach(ctx, buf, self._on(ctx), "Comm.Attach_buffer")

    def Detach_buffer(self) -> Any:
        """Wait until this communicator's buffered messages have left; detach and return its buffer."""
        ctx = here("Comm.Detach_buffer")
        return _bsend.detach(ctx, self._on(ctx))

    def Flush_buffer(self) -> None:
        """Wait until this communicator's buffered messages have left (``MPI_Comm_flush_buffer``)."""
        ctx = here("Comm.Flush_buffer")
        _bsend.flush(ctx, self._on(ctx))

    def Iflush_buffer(self) -> Request:
        """Start :meth:`Flush_buffer`; its request completes when the messages have left."""
        ctx = here("Comm.Iflush_buffer")
        return _bsend.iflush(ctx, self._on(ctx), "Comm.Iflush_buffer()")

    def __reduce__(self) -> Any:
        """``COMM_NULL``, ``COMM_SELF`` and ``COMM_WORLD`` pickle as themselves (a copy of one as an equal
        new handle); any other communicator cannot be pickled (mpi4py's ValueError)."""
        if self._fixed is None:
            for name in ("COMM_NULL", "COMM_SELF", "COMM_WORLD"):
                if self is globals()[name]:
                    return name
            return _predefined, (type(self), self._which)
        raise ValueError(f"cannot serialize 'mpi4py.MPI.{type(self).__name__}' instance")

    def Get_group(self) -> Group:
        """This communicator's group of processes (``MPI_Comm_group``)."""
        return Group(tuple(self._c.group))

    @property
    def group(self) -> Group:
        return self.Get_group()

    def Create(self, group: Group) -> Intracomm:
        """A communicator of *group*'s members, in the group's order (``MPI_Comm_create``).

        Collective over this communicator: every member calls it with the same group; those
        outside it get ``COMM_NULL``. It is a split: colour 0 inside the group, keyed by the
        position in it.
        """
        mine = self._c.group[self._c.rank]
        if any(member not in self._c.group for member in group._members):
            raise MPIError(f"rank {here('Comm.Create').rank}: Comm.Create: the group is not a subset of the "
                           "communicator's group")
        if mine not in group._members:
            return self.Split(UNDEFINED, 0)
        return self.Split(0, group._members.index(mine))

    def Create_group(self, group: Group, tag: int = 0) -> Intracomm:
        """A communicator of *group*'s members, called by them only (``MPI_Comm_create_group``)."""
        return Intracomm(here("Comm.Create_group").block(self._c.create_group(group._members, int(tag))))

    def Free(self) -> None:
        """Release the communicator; it becomes ``COMM_NULL``."""
        if self._which is not None:
            raise InvalidCommunicatorError(f"rank {here('Comm.Free').rank}: MPI.{self.Get_name()[4:]} cannot be freed")
        self._fixed = None

    def Create_cart(self, dims: Sequence[int], periods: Sequence[bool] | bool | None = None,
                    reorder: bool = False) -> Cartcomm:
        """A Cartesian grid over the first ``prod(dims)`` ranks (``MPI_Cart_create``; ranks keep their order).

        *periods* is one flag per dimension or one for all (``periods=True``), as in mpi4py.
        """
        ctx = here("Comm.Create_cart")
        dims = [int(d) for d in dims]
        if periods is None or isinstance(periods, bool | int | np.integer):
            periods = [bool(periods)] * len(dims)
        periods = [int(bool(p)) for p in periods]  # MPI's logicals: mpi4py shows them as 0 and 1
        if len(periods) != len(dims):  # mpi4py's chkarray
            raise ValueError(f"expecting {len(dims)} items, got {len(periods)}")
        c = self._c
        n = int(np.prod(dims)) if dims else 1
        if n > c.size:
            raise InvalidArgumentError(f"rank {ctx.rank}: Create_cart: the grid {dims} needs {n} ranks, "
                                       f"the communicator has {c.size}")
        count = ctx.cache["carts"] = ctx.cache.get("carts", 0) + 1
        # MPICH builds the grid with MPI_Comm_split; the members agree on it without messages here.
        new = c.sub(list(range(n)), label=f"cart{count}:{c.context}")
        if new is None:
            return Cartcomm()  # COMM_NULL, of the class asked for (as mpi4py returns it)
        return Cartcomm._made(new, _dims=dims, _periods=periods)

    def Create_graph(self, index: Sequence[int], edges: Sequence[int], reorder: bool = False) -> Graphcomm:
        """A graph over the first ``len(index)`` ranks: rank r's neighbours are ``edges[index[r-1]:index[r]]`` (``MPI_Graph_create``)."""
        ctx = here("Comm.Create_graph")
        c = self._c
        index, edges = graph_index_edges(index, edges, c.size, ctx.rank)
        new = self._topology_comm(ctx, c, len(index), "graph")
        if new is None:
            return Graphcomm()  # COMM_NULL, of the class asked for (as mpi4py returns it)
        return Graphcomm._made(new, _index=index, _edges=edges)

    def Create_dist_graph_adjacent(self, sources: Sequence[int] | None, destinations: Sequence[int] | None,
                                   sourceweights: Any = None, destweights: Any = None, info: Any = None,
                                   reorder: bool = False) -> Distgraphcomm:
        """A graph where each rank names its own in- and out-neighbours (``MPI_Dist_graph_create_adjacent``).

        *sources* or *destinations* None: no such neighbours; weights None or ``MPI.UNWEIGHTED``:
        none, ``MPI.WEIGHTS_EMPTY``: weighted without edges (:mod:`.distgraph`).
        """
        ctx = here("Comm.Create_dist_graph_adjacent")
        c = self._c
        src, dst, weights = _distgraph.adjacent(sources, destinations, sourceweights, destweights, c.size, ctx.rank)
        new = self._topology_comm(ctx, c, c.size, "distgraph")
        return Distgraphcomm._made(new, _sources=src, _dests=dst, _weights=weights)

    def Create_dist_graph(self, sources: Sequence[int], degrees: Sequence[int], destinations: Sequence[int],
                          weights: Any = None, info: Any = None, reorder: bool = False) -> Distgraphcomm:
        """A graph any rank may add edges to: ``degrees[i]`` edges out of ``sources[i]`` (``MPI_Dist_graph_create``).

        Collective: the ranks exchange the edges they named so each learns its own, as MPICH
        does it (:func:`.distgraph.assemble`).
        """
        ctx = here("Comm.Create_dist_graph")
        c = self._c
        edges, weighted = _distgraph.named_edges(sources, degrees, destinations, weights, c.size, ctx.rank)
        src, dst, mine = ctx.block(_distgraph.assemble(c, edges, weighted))
        new = self._topology_comm(ctx, c, c.size, "distgraph")
        return Distgraphcomm._made(new, _sources=src, _dests=dst, _weights=mine)

    def Cart_map(self, dims: Sequence[int], periods: Sequence[bool] | None = None) -> int:
        """This rank's place in a grid of *dims* without reordering: itself if the grid holds it, else ``UNDEFINED``."""
        here("Comm.Cart_map")
        return self._c.rank if self._c.rank < int(np.prod([int(d) for d in dims])) else UNDEFINED

    def Graph_map(self, index: Sequence[int], edges: Sequence[int]) -> int:
        """This rank's node in the graph ``(index, edges)`` without reordering: itself, or ``UNDEFINED`` past its nodes."""
        here("Comm.Graph_map")
        index = [int(i) for i in index]
        # MPICH checks only the node count here; mpi4py drops a leading 0 of CSR offsets, as in Create_graph.
        nodes = len(index) - 1 if index and index[0] == 0 and index[-1] == len(edges) else len(index)
        return self._c.rank if self._c.rank < nodes else UNDEFINED

    @staticmethod
    def _topology_comm(ctx: RankContext, c: Any, n: int, kind: str) -> Any:
        # MPICH builds it with MPI_Comm_split; the members agree on it without messages here.
        count = ctx.cache[kind] = ctx.cache.get(kind, 0) + 1
        return c.sub(list(range(n)), label=f"{kind}{count}:{c.context}")

    def Abort(self, errorcode: int = 0) -> None:
        """End every rank now; ``mpisim exec`` exits with *errorcode* (``MPI_Abort``)."""
        ctx = here("Comm.Abort")
        ctx.abort(int(errorcode), "")


class Intracomm(Comm):
    """An intra-communicator (every communicator mpisim makes but ``Create_intercomm``'s); programs may subclass it."""

    def Create_intercomm(self, local_leader: int, peer_comm: Comm, remote_leader: int, tag: int = 0) -> Any:
        """An intercommunicator between this group and another (``MPI_Intercomm_create``; :mod:`.intercomm`)."""
        from mpisim.compat.mpi4py import intercomm  # it builds on this module's classes
        return intercomm.create(self, local_leader, peer_comm, remote_leader, tag)

    @classmethod
    def Create_from_group(cls, group: Group, stringtag: str = "org.mpi4py", info: Any = None,
                          errhandler: Any = None) -> Intracomm:
        """A communicator of *group*'s members, called by them only, told apart by *stringtag* (MPI 4 sessions)."""
        ctx = here("Intracomm.Create_from_group")
        tag = zlib.crc32(str(stringtag).encode()) & 0x7FFF  # the members agree on it without messages
        return cls(ctx.block(ctx.comm.create_group(group._members, tag)))



class Topocomm(NeighborCollectives, Intracomm):
    """A communicator with a process topology: its neighbours and the neighbourhood collectives.

    ``MPI.Topocomm(comm)`` and its subclasses' constructors check the topology *comm* has, as
    mpi4py does (:func:`~mpisim.compat.mpi4py.topology.check_kind`): a TypeError otherwise.
    """

    is_topo = True
    #: The topology this class wraps (None: any).
    _kind: int | None = None

    def __init__(self, comm: Any = None) -> None:
        super().__init__(comm)
        if isinstance(comm, Comm) and self:
            _topology.check_kind(self, self._kind)

    @classmethod
    def _made(cls, c: Any, **topology: Any) -> Any:
        """A new communicator of this class over the simulated communicator *c*, with its topology's data."""
        new = cls(c)
        new.__dict__.update(topology)
        return new


class Cartcomm(CartGrid, Topocomm):
    """A communicator with a Cartesian grid (:class:`~mpisim.compat.mpi4py.topology.CartGrid`): ``Shift``, ``Get_coords``, ..."""

    _kind = CART

    def _cart(self, c: Any, dims: list[int], periods: list[int]) -> Cartcomm:
        return Cartcomm._made(c, _dims=dims, _periods=periods)

    def _zero_dim(self) -> Cartcomm:
        return COMM_SELF.Create_cart([])


class Graphcomm(GraphTopology, Topocomm):
    """A communicator with an MPI-1 graph (:class:`~mpisim.compat.mpi4py.topology.GraphTopology`)."""

    _kind = GRAPH


class Distgraphcomm(DistGraphTopology, Topocomm):
    """A communicator with a distributed graph (:class:`~mpisim.compat.mpi4py.topology.DistGraphTopology`)."""

    _kind = DIST_GRAPH


_RESOURCE = "mpi_hw_resource_type"


def _predefined(cls: type, which: str | None) -> Comm:
    """A new handle to a predefined communicator (unpickling ``MPI.Intracomm(MPI.COMM_WORLD)``)."""
    comm = cls()
    comm._which = which
    return comm


_TOPOLOGY = _topology.ATTRIBUTES


def _special(which: str | None) -> Intracomm:
    comm = Intracomm()
    comm._which = which
    return comm


COMM_WORLD = _special("world")
COMM_SELF = _special("self")
COMM_NULL = Intracomm()
