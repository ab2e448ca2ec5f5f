"""Process topologies: a Cartesian grid over a communicator (``Cartcomm``) and ``MPI.Compute_dims``.

:class:`CartGrid` holds what a :class:`~mpisim.compat.mpi4py.comm.Cartcomm` adds to a
communicator: its dimensions and periods, a rank's coordinates (row-major, the last dimension
fastest, as MPI numbers them) and ``Shift``. A grid is a numbering: it sends nothing, and the
ranks keep their order (``reorder`` changes nothing here, as in MPICH by default).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mpisim.compat.mpi4py.environment import alive, here
from mpisim.errors import InvalidArgumentError, MPIError
from mpisim.mpi.constants import CART, ERR_DIMS, PROC_NULL


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
