"""Reduce-scatter: reduce p vectors element-wise and leave block r of the result on rank r.

Every rank passes a whole vector of the same count; the vector is cut into p blocks with
``np.array_split`` sizes (the first ``count % p`` blocks one element longer), and rank r
returns block r of ``x0 op x1 op ... op x(p-1)``. It is the first half of Rabenseifner's
and of the ring allreduce.

* **ring** -- p-1 steps; each passes a partly reduced block to the right neighbour, which
  adds its own contribution. Commutative ops only (a block's sum starts at a different rank).
* **recursive halving** -- lg p steps; in each a rank sends the half of its current range
  that its partner keeps and reduces the half it keeps, halving the range. MPICH folds
  p not a power of two onto the nearest power of two first. Commutative ops only.
* **pairwise** -- p-1 steps; in step i rank r sends the block of rank r+i to it and
  receives its own block's contribution from rank r-i. Commutative ops only.

* **reduce_then_scatter** -- a binomial reduce to rank 0 followed by a binomial scatter of
  the result: about lg p times the data of the others, but it keeps rank order, so it is
  the one that serves non-commutative ops (MPICH's pre-2005 algorithm; MPICH now uses a
  recursive-doubling variant for those).

*n* is the bytes of each rank's whole vector. The data moved into each rank,
((p-1)/p)*n bytes, and the data reduced, ((p-1)/p)*n bytes, are the minimum; the algorithms
differ in the number of messages.
"""

from __future__ import annotations

from mpisim.collectives import registry
from mpisim.collectives.costmodel import ceil_lg, floor_lg, pof2_at_most
from mpisim.collectives.fluid.mpi_ring import RING_REDUCE_SCATTER
from mpisim.collectives.reduce import binomial_reduce
from mpisim.collectives.registry import algorithm
from mpisim.collectives.scatter import binomial_scatter
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.ops import Op
from mpisim.mpi.payload import Payload, split_offsets


def ring_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """(p-1)α + ((p-1)/p)nβ + ((p-1)/p)nγ."""
    return (p - 1) * alpha + (p - 1) / p * n * (beta + gamma)


pairwise_cost = ring_cost


def recursive_halving_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """lg p·α + ((p-1)/p)n(β+γ) for p a power of two; an estimate with the fold-in otherwise.

    For p not a power of two (p' = largest power of two below p): the fold costs
    α + n(β+γ), the recursive halving on p' ranks about lg p'·α + ((p'-1)/p')n(β+γ)
    (its blocks are uneven, two ranks' worth for the first rem new ranks) and the unfold
    α + (n/p)β. Ranks that did not fold start early, so the sum is only an estimate: the
    analytic model gives 0.73 to 1.1 times it for p up to 31.
    """
    pof2 = pof2_at_most(p)
    halving = floor_lg(p) * alpha + (pof2 - 1) / pof2 * n * (beta + gamma)
    if pof2 == p:
        return halving
    return halving + 2 * alpha + n * (beta + gamma) + n / p * beta


@algorithm("reduce_scatter", "ring", cost=ring_cost, requires={"commutative"},
           reference="Patarasuk & Yuan 2009; Chan et al. 2007", fluid=RING_REDUCE_SCATTER)
def ring_reduce_scatter(comm: Comm, buf: Payload, op: Op) -> Proc[Payload]:
    """Ring reduce-scatter: p-1 steps, each adding one block into the one arriving from the left.

    The vector is cut into p blocks. In step k rank r sends its partial sum of block
    r-k-1 to rank r+1 and adds its own contribution to the partial sum of block r-k-2
    arriving from rank r-1. The sum of block r starts at rank r+1 and travels once around
    the ring, ending complete at rank r.

    Cost: (p-1)α + ((p-1)/p)nβ + ((p-1)/p)nγ; exact for every p.
    """
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    blocks = buf.split(p)

    # After step k, blocks[(r - k - 2) % p] holds the contributions of ranks r-k-1 .. r.
    for k in range(p - 1):
        send_i, recv_i = (r - k - 1) % p, (r - k - 2) % p
        incoming = yield from comm.sendrecv(blocks[send_i], dest=right, source=left)
        blocks[recv_i] = yield from comm.reduce_local(op, incoming, blocks[recv_i])
    return blocks[r]


@algorithm("reduce_scatter", "recursive_halving", cost=recursive_halving_cost, requires={"commutative"},
           exact=registry.power_of_two,
           reference="Thakur, Rabenseifner & Gropp 2005; MPICH reduce_scatter_intra_recursive_halving.c")
def recursive_halving_reduce_scatter(comm: Comm, buf: Payload, op: Op) -> Proc[Payload]:
    """Recursive-halving reduce-scatter: lg p steps, each halving the range a rank reduces.

    Fold (p not a power of two, MPICH): with rem = p - p', p' the largest power of two
    <= p, each even rank r < 2·rem sends its vector to rank r+1 and drops out; the
    p' remaining ranks are renumbered 0..p'-1, new rank i < rem owning the two blocks of
    ranks 2i and 2i+1. Halving: with distance d = p'/2, p'/4, ..., 1 a rank swaps with the
    new rank d away: it sends the half of its current range its partner keeps and reduces
    the half it keeps. Unfold: each odd rank r < 2·rem sends block r-1 to rank r-1.

    Cost: lg p·α + ((p-1)/p)nβ + ((p-1)/p)nγ for p a power of two (exact); otherwise about
    (⌊lg p⌋+2)α + n(1 + (p'-1)/p' + 1/p)β + n(1 + (p'-1)/p')γ, see recursive_halving_cost.
    """
    p, r = comm.size, comm.rank
    pof2 = pof2_at_most(p)
    rem = p - pof2
    if r < 2 * rem:
        if r % 2 == 0:
            yield from comm.send(buf, dest=r + 1)
            return (yield from comm.recv(source=r + 1))
        incoming = yield from comm.recv(source=r - 1)
        buf = yield from comm.reduce_local(op, incoming, buf)
    new_rank = r // 2 if r < 2 * rem else r - rem
    real = [2 * i + 1 if i < rem else i + rem for i in range(pof2)]  # new rank -> rank
    offset = split_offsets(buf.count, p)
    start = [offset[2 * i if i < rem else i + rem] for i in range(pof2)] + [buf.count]  # new rank -> element

    lo, hi, acc = 0, pof2, buf
    # acc = this rank's partial reduction of elements start[lo] .. start[hi] (new ranks lo..hi-1).
    while hi - lo > 1:
        mid = (lo + hi) // 2
        cut = start[mid] - start[lo]
        lower, upper = acc.slice(0, cut), acc.slice(cut, acc.count)
        keep, give = (lower, upper) if new_rank < mid else (upper, lower)
        peer = real[new_rank ^ (mid - lo)]
        incoming = yield from comm.sendrecv(give, dest=peer, source=peer)
        acc = yield from comm.reduce_local(op, incoming, keep)
        lo, hi = (lo, mid) if new_rank < mid else (mid, hi)

    if r < 2 * rem:  # acc holds blocks r-1 and r: hand block r-1 back to the rank that folded in
        cut = offset[r] - offset[r - 1]
        yield from comm.send(acc.slice(0, cut), dest=r - 1)
        acc = acc.slice(cut, acc.count)
    return acc


@algorithm("reduce_scatter", "pairwise", cost=pairwise_cost, requires={"commutative"},
           reference="Thakur, Rabenseifner & Gropp 2005; MPICH reduce_scatter_intra_pairwise.c")
def pairwise_reduce_scatter(comm: Comm, buf: Payload, op: Op) -> Proc[Payload]:
    """Pairwise-exchange reduce-scatter: p-1 steps, each sending one block straight to its owner.

    In step i (i = 1..p-1) rank r sends block r+i of its vector to rank r+i, receives
    rank r-i's contribution to block r and reduces it into its result. Contributions
    arrive in the cyclic order r-1, ..., 0, p-1, ..., r+1, so the op must be commutative
    (putting them back in rank order would need a second partial result and one more
    reduction at the end, on the critical path).

    Cost: (p-1)α + ((p-1)/p)nβ + ((p-1)/p)nγ; exact for every p.
    """
    p, r = comm.size, comm.rank
    blocks = buf.split(p)
    acc = blocks[r]
    # After step i, acc = x(r-i) op ... op x(r) (indices mod p).
    for i in range(1, p):
        dest, source = (r + i) % p, (r - i) % p
        incoming = yield from comm.sendrecv(blocks[dest], dest=dest, source=source)
        acc = yield from comm.reduce_local(op, incoming, acc)
    return acc


def reduce_then_scatter_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """⌈lg p⌉(α + nβ + nγ) + ⌈lg p⌉α + ((p-1)/p)nβ: binomial reduce, then binomial scatter (exact for p a power of two)."""
    return ceil_lg(p) * (2 * alpha + n * (beta + gamma)) + (p - 1) / p * n * beta


@algorithm("reduce_scatter", "reduce_then_scatter", cost=reduce_then_scatter_cost, exact=registry.power_of_two,
           reference="MPICH reduce_scatter (before 2005): MPI_Reduce followed by MPI_Scatterv")
def reduce_then_scatter_reduce_scatter(comm: Comm, buf: Payload, op: Op) -> Proc[Payload]:
    """Reduce to rank 0 along a binomial tree, then scatter the result's blocks along a binomial tree.

    The binomial reduce keeps lower ranks' partial results on the left, so the result is
    x0 op x1 op ... op x(p-1) for any associative op, commutative or not. The price is data:
    every round of the reduce moves the whole vector, where the other algorithms move
    shrinking blocks.

    Cost: ⌈lg p⌉(α + nβ + nγ) + ⌈lg p⌉α + ((p-1)/p)nβ
    """
    total = yield from binomial_reduce(comm, buf, op, 0)
    # Non-root ranks pass a same-sized stand-in: the scatter reads only the root's buffer.
    return (yield from binomial_scatter(comm, total if total is not None else buf, 0))
