"""Process topologies: a Cartesian grid (``Cartcomm``), graphs (``Graphcomm``, ``Distgraphcomm``) and ``MPI.Compute_dims``.

:class:`CartGrid` holds what a :class:`~mpisim.compat.mpi4py.comm.Cartcomm` adds to a
communicator: its dimensions and periods, a rank's coordinates (row-major, the last dimension
fastest, as MPI numbers them) and ``Shift``; :class:`GraphTopology` and
:class:`DistGraphTopology` what a graph adds. A topology is a numbering: the ranks keep their
order (``reorder`` changes nothing here, as in MPICH by default), and each says who a rank's
neighbours are (:attr:`Edges.inoutedges`: in-neighbours, then out-neighbours), which the
neighbourhood collectives (:mod:`~mpisim.compat.mpi4py.neighbors`) exchange with. Only the
general distributed graph (``Create_dist_graph``) sends messages to be built, since there a
rank may name edges between other ranks (:mod:`~mpisim.compat.mpi4py.distgraph`).

The topology belongs to the communicator, not to the Python object: ``MPI.Intracomm(cart)``
still has it (``Get_topology()`` is ``MPI.CART``) and ``MPI.Cartcomm(MPI.Intracomm(cart))`` is
the grid again, while ``MPI.Cartcomm(graph)`` is mpi4py's TypeError (:func:`check_kind`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mpisim.compat.mpi4py.environment import alive, here
from mpisim.errors import InvalidArgumentError, InvalidRankError, MPIError
from mpisim.mpi.constants import CART, DIST_GRAPH, ERR_DIMS, GRAPH, PROC_NULL, UNDEFINED

#: The attributes a topology keeps on its communicator object (copied by ``MPI.Intracomm(cart)``, ``Dup``).
ATTRIBUTES = ("_dims", "_periods", "_index", "_edges", "_sources", "_dests", "_weights")

#: The kind of topology each attribute set means.
_KIND_OF = (("_dims", CART), ("_index", GRAPH), ("_sources", DIST_GRAPH))

#: What each topology class requires of the communicator it wraps, and mpi4py's TypeError when it is not.
_EXPECTED = {None: "a topology communicator", CART: "a Cartesian communicator",
             GRAPH: "a general graph communicator", DIST_GRAPH: "a distributed graph communicator"}


def kind(comm: Any) -> int:
    """``MPI.CART``, ``MPI.GRAPH``, ``MPI.DIST_GRAPH`` or ``MPI.UNDEFINED``: the topology *comm*'s object carries."""
    held = comm.__dict__
    for name, topology in _KIND_OF:
        if name in held:
            return topology
    return UNDEFINED


def check_kind(comm: Any, required: int | None) -> None:
    """mpi4py's TypeError when ``MPI.Cartcomm(comm)`` (and the others) wraps a communicator of another topology.

    *required*: the topology the class needs, None for ``Topocomm`` (any). As in mpi4py, a
    communicator without a topology is "expecting a topology communicator" whatever the class.
    """
    have = kind(comm)
    if have == UNDEFINED:
        raise TypeError(f"expecting {_EXPECTED[None]}")
    if required is not None and have != required:
        raise TypeError(f"expecting {_EXPECTED[required]}")


class Edges:
    """What every topology communicator answers (mpi4py's ``Topocomm``): its in- and out-neighbours, and how many.

    Each topology defines :attr:`inoutedges`; the rest follow from it.
    """

    inoutedges: Any  # (sources, destinations): each topology's own

    @property
    def inedges(self) -> list[int]:
        """The in-neighbours (the ranks block k of a neighbourhood receive comes from)."""
        return self.inoutedges[0]

    @property
    def outedges(self) -> list[int]:
        """The out-neighbours (the ranks block k of a neighbourhood send goes to)."""
        return self.inoutedges[1]

    @property
    def degrees(self) -> tuple[int, int]:
        """``(indegree, outdegree)``."""
        sources, dests = self.inoutedges
        return len(sources), len(dests)

    @property
    def indegree(self) -> int:
        return self.degrees[0]

    @property
    def outdegree(self) -> int:
        return self.degrees[1]


class CartGrid(Edges):
    """A communicator with a Cartesian grid: ``Shift``, ``Get_coords``, ``Get_cart_rank``.

    Its topology is ``MPI.CART``; periods are 0 and 1, as mpi4py shows MPI's logicals.
    """

    _dims: list[int]
    _periods: list[int]
    is_topo = True

    Get_rank: Any  # the communicator's (Comm)
    _on: Any  # the calling rank's simulated communicator (Comm)
    _cart: Any  # a Cartcomm over a simulated communicator, with dims and periods (Cartcomm)
    _zero_dim: Any  # this rank's own grid of no dimensions (Cartcomm)

    def Get_topology(self) -> int:
        """``MPI.CART``."""
        alive("Cartcomm.Get_topology")
        return CART

    @property
    def dims(self) -> list[int]:
        return list(self._dims)

    @property
    def periods(self) -> list[int]:
        return list(self._periods)

    @property
    def ndim(self) -> int:
        return len(self._dims)

    @property
    def dim(self) -> int:
        """mpi4py's older name of ``ndim`` (still a ``Cartcomm`` property)."""
        return len(self._dims)

    def Get_dim(self) -> int:
        return len(self._dims)

    def Get_topo(self) -> tuple[list[int], list[int], list[int]]:
        """``(dims, periods, coords of this rank)``, periods as 0 and 1 (``([2, 2], [0, 1], [0, 0])``)."""
        return list(self._dims), list(self._periods), self.Get_coords(self.Get_rank())

    @property
    def topo(self) -> tuple[list[int], list[int], list[int]]:
        return self.Get_topo()

    @property
    def coords(self) -> list[int]:
        return self.Get_coords(self.Get_rank())

    def Get_coords(self, rank: int) -> list[int]:
        """The grid coordinates of *rank* (row-major, the last dimension fastest, as MPI numbers them)."""
        coords = []
        for d in reversed(self._dims):
            coords.append(rank % d)
            rank //= d
        return coords[::-1]

    def Get_cart_rank(self, coords: Sequence[int]) -> int:
        """The rank at *coords* (periodic dimensions wrap around)."""
        rank = 0
        for c, d, periodic in zip(coords, self._dims, self._periods, strict=True):
            if periodic:
                c %= d
            elif not 0 <= c < d:
                raise InvalidArgumentError(f"rank {here('Cartcomm.Get_cart_rank').rank}: coordinate {c} "
                                           f"outside 0..{d - 1}")
            rank = rank * d + c
        return rank

    def Shift(self, direction: int, disp: int) -> tuple[int, int]:
        """``(source, dest)``: the ranks *disp* steps back and forward along *direction* (``PROC_NULL`` off a non-periodic edge)."""
        me = self.Get_coords(self.Get_rank())

        def neighbour(step: int) -> int:
            coords = list(me)
            coords[direction] += step
            d = self._dims[direction]
            if not self._periods[direction] and not 0 <= coords[direction] < d:
                return PROC_NULL
            return self.Get_cart_rank(coords)

        return neighbour(-disp), neighbour(disp)

    @property
    def inoutedges(self) -> tuple[list[int], list[int]]:
        """In- and out-neighbours: for each dimension, one step back, then one step forward (MPI's order)."""
        alive("Cartcomm.inoutedges")
        ranks = [r for d in range(len(self._dims)) for r in self.Shift(d, 1)]
        return ranks, list(ranks)

    @property
    def degrees(self) -> tuple[int, int]:
        """``(2 ndim, 2 ndim)``: a grid counts both neighbours of each dimension, ``PROC_NULL`` ones too."""
        return 2 * len(self._dims), 2 * len(self._dims)

    def Sub(self, remain_dims: Sequence[bool]) -> Any:
        """The sub-grids keeping the dimensions *remain_dims* flags (``MPI_Cart_sub``); collective.

        As MPICH does it: a ``Split`` whose colour is the coordinates along the dropped
        dimensions and whose key is those along the kept ones (so a sub-grid numbers its
        ranks row-major again). Dropping every dimension gives each rank a grid of its own
        with no dimensions (MPI 2.1's 0-D grid).
        """
        ctx = here("Cartcomm.Sub")
        remain = [bool(flag) for flag in remain_dims]
        if len(remain) != len(self._dims):
            raise ValueError(f"expecting {len(self._dims)} items, got {len(remain)}")
        coords = self.Get_coords(self.Get_rank())
        if not any(remain):
            return self._zero_dim()  # MPICH: Cart_create(COMM_SELF, 0 dims) on every rank
        color = key = 0
        for keep, d, c in zip(remain, self._dims, coords, strict=True):
            if keep:
                key = key * d + c
            else:
                color = color * d + c
        new = ctx.block(self._on(ctx).split(color, key))
        return self._cart(new, [d for d, keep in zip(self._dims, remain, strict=True) if keep],
                          [p for p, keep in zip(self._periods, remain, strict=True) if keep])


class GraphTopology(Edges):
    """What a ``Graphcomm`` adds: MPI-1's graph, every rank's edges listed everywhere (``index``, ``edges``)."""

    _index: list[int]
    _edges: list[int]
    is_topo = True
    Get_rank: Any  # the communicator's (Comm)

    def Get_topology(self) -> int:
        """``MPI.GRAPH``."""
        alive("Graphcomm.Get_topology")
        return GRAPH

    def Get_dims(self) -> tuple[int, int]:
        """``(nnodes, nedges)``."""
        return len(self._index), len(self._edges)

    dims = property(Get_dims)
    nnodes = property(lambda self: len(self._index))
    nedges = property(lambda self: len(self._edges))

    def Get_topo(self) -> tuple[list[int], list[int]]:
        """``(index, edges)``: rank r's neighbours are ``edges[index[r-1]:index[r]]``."""
        return list(self._index), list(self._edges)

    topo = property(Get_topo)
    index = property(lambda self: list(self._index))
    edges = property(lambda self: list(self._edges))

    def Get_neighbors_count(self, rank: int) -> int:
        return len(self.Get_neighbors(rank))

    def Get_neighbors(self, rank: int) -> list[int]:
        """Rank *rank*'s neighbours, in the order given."""
        alive("Graphcomm.Get_neighbors")
        rank = int(rank)
        if not 0 <= rank < len(self._index):
            raise InvalidRankError(f"rank {here('Graphcomm.Get_neighbors').rank}: Graphcomm.Get_neighbors({rank}): "
                                   f"not a node of the graph (0..{len(self._index) - 1})")
        start = self._index[rank - 1] if rank > 0 else 0
        return list(self._edges[start:self._index[rank]])

    @property
    def neighbors(self) -> list[int]:
        """This rank's neighbours (mpi4py's property: a list)."""
        return self.Get_neighbors(self.Get_rank())

    @property
    def nneighbors(self) -> int:
        return len(self.neighbors)

    @property
    def inoutedges(self) -> tuple[list[int], list[int]]:
        """A graph's edges go both ways: the neighbours are the in- and the out-neighbours."""
        mine = self.neighbors
        return mine, list(mine)


class DistGraphTopology(Edges):
    """What a ``Distgraphcomm`` adds: each rank knows only its own sources and destinations, and their weights.

    ``_weights`` is None for an unweighted graph (``MPI.UNWEIGHTED``, MPICH's
    ``is_weighted`` false) or ``(source weights, destination weights)``; a graph made with
    ``MPI.WEIGHTS_EMPTY`` and no edges is weighted with no weights, ``([], [])``, as MPICH says.
    The weights are kept and reported only: MPI leaves their meaning to the implementation,
    and MPICH (without reordering) does not use them.
    """

    _sources: list[int]
    _dests: list[int]
    _weights: tuple[list[int], list[int]] | None
    is_topo = True

    def Get_topology(self) -> int:
        """``MPI.DIST_GRAPH``."""
        alive("Distgraphcomm.Get_topology")
        return DIST_GRAPH

    def Get_dist_neighbors_count(self) -> tuple[int, int, bool]:
        """``(indegree, outdegree, weighted)``."""
        alive("Distgraphcomm.Get_dist_neighbors_count")
        return len(self._sources), len(self._dests), self._weights is not None

    def Get_dist_neighbors(self) -> tuple[list[int], list[int], tuple[list[int], list[int]] | None]:
        """``(sources, destinations, weights)``: weights ``(source weights, destination weights)``, None if unweighted."""
        alive("Distgraphcomm.Get_dist_neighbors")
        weights = None if self._weights is None else (list(self._weights[0]), list(self._weights[1]))
        return list(self._sources), list(self._dests), weights

    @property
    def inoutedges(self) -> tuple[list[int], list[int]]:
        return list(self._sources), list(self._dests)


def graph_index_edges(index: Sequence[int], edges: Sequence[int], size: int, rank: int) -> tuple[list[int], list[int]]:
    """``Create_graph``'s arguments, checked as MPICH checks them."""
    index, edges = [int(i) for i in index], [int(e) for e in edges]
    if index and index[0] == 0 and index[-1] == len(edges):
        # mpi4py also takes the "standard" adjacency form with a leading 0 (CSR offsets) and drops it.
        index = index[1:]
    if len(index) > size or any(b < a for a, b in zip([0, *index], index, strict=False)) or \
            (index and index[-1] != len(edges)) or any(not 0 <= e < len(index) for e in edges):
        raise InvalidArgumentError(f"rank {rank}: Create_graph: index {index} and edges {edges} are not a graph "
                                   f"of at most {size} nodes")
    return index, edges


def Compute_dims(nnodes: int, dims: int | Sequence[int]) -> list[int]:
    """Balanced grid dimensions for *nnodes* ranks, non-increasing (``MPI_Dims_create``)."""
    alive("Compute_dims")
    shape = [0] * dims if isinstance(dims, int) else [int(d) for d in dims]
    fixed = int(np.prod([d for d in shape if d > 0])) if any(d > 0 for d in shape) else 1
    free = [i for i, d in enumerate(shape) if d == 0]
    if nnodes % fixed:
        raise MPIError(f"Compute_dims: {nnodes} ranks do not divide by the fixed dimensions' product {fixed}",
                       error_class=ERR_DIMS)
    left = nnodes // fixed
    factors = []
    n, f = left, 2
    while f * f <= n:
        while n % f == 0:
            factors.append(f)
            n //= f
        f += 1
    if n > 1:
        factors.append(n)
    sizes = [1] * len(free)
    for factor in sorted(factors, reverse=True):  # the largest factor to the smallest dimension so far
        if not sizes:
            break
        sizes[sizes.index(min(sizes))] *= factor
    for i, size in zip(free, sorted(sizes, reverse=True), strict=True):
        shape[i] = size
    return shape
