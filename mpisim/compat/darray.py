"""``Create_darray``: the part of a distributed array (HPF's BLOCK and CYCLIC layouts) one process owns.

A ``gsizes`` array is split over a ``psizes`` process grid, dimension by dimension:

* BLOCK: process ``p`` of ``n`` holds the ``p``-th block of ``ceil(g / n)`` indices (or ``darg``);
* CYCLIC(k): blocks of ``k`` indices (1 by default) dealt round-robin to the ``n`` processes;
* NONE: the dimension is not split.

The type map is built as MPICH builds it (``type_create_darray.c``): one vector per dimension,
the fastest-varying first, each resized to the whole extent of its dimension, then moved to the
process's first element and resized to the whole array. A process's rank maps to grid
coordinates in row-major order, as ``MPI_Cart_create`` maps them.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from mpisim.compat import typemap as tm
from mpisim.errors import MPIError
from mpisim.mpi.constants import ERR_ARG, ERR_RANK

# MPICH's values of MPI.DISTRIBUTE_*
BLOCK, CYCLIC, NONE, DFLT_DARG = 121, 122, 123, -49767


def _stride(gsizes: Sequence[int], dim: int, order: int) -> int:
    """Elements between consecutive indices of dimension *dim* of the whole array."""
    return prod(gsizes[:dim]) if order == tm.ORDER_FORTRAN else prod(gsizes[dim + 1:])


def _fastest(dim: int, ndims: int, order: int) -> bool:
    return dim == (0 if order == tm.ORDER_FORTRAN else ndims - 1)


def _block(gsizes: Sequence[int], dim: int, nprocs: int, rank: int, darg: int, order: int, extent: int,
           old: tm.TypeMap) -> tuple[tm.TypeMap, int]:
    size = gsizes[dim]
    if darg == DFLT_DARG:
        blksize = -(-size // nprocs)
    else:
        blksize = darg
        if blksize <= 0:
            raise MPIError(f"Create_darray: a block distribution's darg must be positive, got {blksize}",
                           error_class=ERR_ARG)
        if blksize * nprocs < size:
            raise MPIError(f"Create_darray: m * nprocs is {blksize * nprocs} but must equal the array size {size} "
                           f"and is not valid for block(m) distribution", error_class=ERR_ARG)
    mine = max(0, min(blksize, size - blksize * rank))
    if _fastest(dim, len(gsizes), order):
        new = tm.contiguous(mine, old)
    else:
        new = tm.hvector(mine, 1, extent * _stride(gsizes, dim, order), old)
    return tm.resized(0, size * old.extent, new), blksize * rank if mine else 0


def _cyclic(gsizes: Sequence[int], dim: int, nprocs: int, rank: int, darg: int, order: int, extent: int,
            old: tm.TypeMap) -> tuple[tm.TypeMap, int]:
    blksize = 1 if darg == DFLT_DARG else darg
    if blksize <= 0:
        raise MPIError(f"Create_darray: a cyclic distribution's darg must be positive, got {blksize}",
                       error_class=ERR_ARG)
    first, last = rank * blksize, gsizes[dim] - 1
    if last < first:
        local = 0
    else:
        span = last - first + 1
        local = (span // (nprocs * blksize)) * blksize + min(span % (nprocs * blksize), blksize)
    count, rem = divmod(local, blksize)
    stride = nprocs * blksize * extent * _stride(gsizes, dim, order)
    new = tm.hvector(count, blksize, stride, old)
    if rem:  # a last, shorter block
        new = tm.struct([1, rem], [0, count * stride], [new, old])
    offset = rank * blksize
    if _fastest(dim, len(gsizes), order):  # the first element's place is taken into the type here
        new = tm.resized(0, extent * gsizes[dim], tm.hindexed([1], [rank * blksize * extent], new))
        offset = 0
    return tm.resized(0, gsizes[dim] * old.extent, new), offset if local else 0


def darray(size: int, rank: int, gsizes: Sequence[int], distribs: Sequence[int], dargs: Sequence[int],
           psizes: Sequence[int], order: int, old: tm.TypeMap) -> tm.TypeMap:
    """The type map of process *rank*'s part of the distributed array (``MPI_Type_create_darray``)."""
    ndims = len(gsizes)
    if not 0 <= rank < size:
        raise MPIError(f"Create_darray: Argument rank has value {rank} but must be within [0,{size - 1}]",
                       error_class=ERR_RANK)
    if not (len(distribs) == len(dargs) == len(psizes) == ndims):
        raise ValueError(f"Create_darray: expecting {ndims} items in distribs, dargs and psizes")
    if prod(psizes) != size or min(psizes, default=1) <= 0:
        raise MPIError(f"Create_darray: the process grid {list(psizes)} does not hold {size} processes",
                       error_class=ERR_ARG)
    if order not in (tm.ORDER_C, tm.ORDER_FORTRAN) or any(d not in (BLOCK, CYCLIC, NONE) for d in distribs):
        raise MPIError(f"Create_darray: invalid order {order} or distributions {list(distribs)}", error_class=ERR_ARG)
    coords, procs, rest = [], size, rank
    for p in psizes:  # row-major, as a Cartesian communicator numbers its processes
        procs //= p
        coords.append(rest // procs)
        rest %= procs
    extent = old.extent
    offsets = [0] * ndims
    new = old
    dims = range(ndims) if order == tm.ORDER_FORTRAN else range(ndims - 1, -1, -1)
    for i in dims:
        if distribs[i] == CYCLIC:
            new, offsets[i] = _cyclic(gsizes, i, psizes[i], coords[i], dargs[i], order, extent, new)
        elif distribs[i] == BLOCK:
            new, offsets[i] = _block(gsizes, i, psizes[i], coords[i], dargs[i], order, extent, new)
        elif order == tm.ORDER_FORTRAN:  # NONE: a block distribution on one process
            new, offsets[i] = _block(gsizes, i, 1, 0, DFLT_DARG, order, extent, new)
        else:  # (MPICH passes the grid's own size and coordinate here in C order)
            new, offsets[i] = _block(gsizes, i, psizes[i], coords[i], DFLT_DARG, order, extent, new)
    first = sum(offsets[i] * _stride(gsizes, i, order) for i in range(ndims)) * extent
    return tm.resized(0, extent * prod(gsizes), tm.hindexed([1], [first], new))
