"""Process topologies: a Cartesian grid (``Cartcomm``), graphs (``Graphcomm``, ``Distgraphcomm``) and ``MPI.Compute_dims``.

:class:`CartGrid` holds what a :class:`~mpisim.compat.mpi4py.comm.Cartcomm` adds to a
communicator: its dimensions and periods, a rank's coordinates (row-major, the last dimension
fastest, as MPI numbers them) and ``Shift``; :class:`GraphTopology` and
:class:`DistGraphTopology` what a graph adds. A topology is a numbering: it sends nothing, the
ranks keep their order (``reorder`` changes nothing here, as in MPICH by default), and each
says who a rank's neighbours are (``neighbors()``: in- and out-neighbours), which the
neighbourhood collectives (:mod:`~mpisim.compat.mpi4py.neighbors`) exchange with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mpisim.compat.mpi4py.environment import alive, here
from mpisim.errors import InvalidArgumentError, MPIError
from mpisim.mpi.constants import CART, DIST_GRAPH, ERR_DIMS, GRAPH, PROC_NULL


class CartGrid:
    """A communicator with a Cartesian grid: ``Shift``, ``Get_coords``, ``Get_cart_rank``.

    Its topology is ``MPI.CART``; periods are 0 and 1, as mpi4py shows MPI's logicals.
    """

    _dims: list[int]
    _periods: list[int]
    is_topo = True

    Get_rank: Any  # the communicator's (Comm)

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

    def neighbors(self) -> tuple[list[int], list[int]]:
        """In- and out-neighbours: for each dimension, one step back, then one step forward (MPI's order)."""
        ranks = [r for d in range(len(self._dims)) for r in self.Shift(d, 1)]
        return ranks, list(ranks)

    @property
    def indegree(self) -> int:
        return 2 * len(self._dims)

    outdegree = indegree


class GraphTopology:
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
        start = self._index[rank - 1] if rank > 0 else 0
        return list(self._edges[start:self._index[rank]])

    def neighbors(self) -> tuple[list[int], list[int]]:
        mine = self.Get_neighbors(self.Get_rank())
        return mine, list(mine)

    inoutedges = property(neighbors)
    inedges = property(lambda self: self.neighbors()[0])
    outedges = property(lambda self: self.neighbors()[1])
    indegree = outdegree = property(lambda self: len(self.neighbors()[0]))


class DistGraphTopology:
    """What a ``Distgraphcomm`` adds: each rank knows only its own sources and destinations."""

    _sources: list[int]
    _dests: list[int]
    is_topo = True

    def Get_topology(self) -> int:
        """``MPI.DIST_GRAPH``."""
        alive("Distgraphcomm.Get_topology")
        return DIST_GRAPH

    def Get_dist_neighbors_count(self) -> tuple[int, int, bool]:
        """``(indegree, outdegree, weighted)``."""
        return len(self._sources), len(self._dests), False

    def Get_dist_neighbors(self) -> tuple[list[int], list[int], None]:
        """``(sources, destinations, weights)``; unweighted, as mpisim runs them."""
        return list(self._sources), list(self._dests), None

    def neighbors(self) -> tuple[list[int], list[int]]:
        return list(self._sources), list(self._dests)

    indegree = property(lambda self: len(self._sources))
    outdegree = property(lambda self: len(self._dests))


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
