"""Reduce: combine every rank's vector element-wise and leave the result at the root.

Rank r contributes x_r; the root returns ``x0 op x1 op ... op x(p-1)`` and the other ranks
return ``None``. Three algorithms:

* **linear** -- every rank sends its vector to the root, which combines them in rank order.
  The only one here that needs nothing of the op but associativity, at the price of p-1
  messages of n bytes into one rank.
* **binomial** -- combine up a binomial tree: ⌈lg p⌉ rounds of n bytes, best for short
  vectors. It keeps rank order (lower ranks' partial results on the left), so with the
  tree rooted at rank 0 it is right for non-commutative ops too (MPICH's rule, see below).
* **Rabenseifner** -- reduce-scatter by recursive halving, then a binomial gather of the
  reduced blocks to the root: about 2n bytes per rank instead of n·lg p, best for long
  vectors; it reorders operands, so the op must be commutative.

``recursive_halving`` (the reduce-scatter of Rabenseifner's algorithm) is shared with
Rabenseifner's allreduce.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from itertools import pairwise

from mpisim.collectives import registry
from mpisim.collectives.costmodel import ceil_lg, floor_lg, lg, pof2_at_most
from mpisim.collectives.registry import algorithm
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.ops import Op
from mpisim.mpi.payload import Payload


def linear_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """(p-1)(α + nβ + nγ): the single-port estimate (the root receives one message after another)."""
    return (p - 1) * (alpha + n * beta + n * gamma)


def binomial_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """⌈lg p⌉(α + nβ + nγ) (exact for p a power of two)."""
    return ceil_lg(p) * (alpha + n * beta + n * gamma)


def rabenseifner_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """2 lg p·α + 2((p-1)/p)nβ + ((p-1)/p)nγ for p a power of two.

    Otherwise (p' = largest power of two below p): (2⌊lg p⌋ + 1)α + (2((p'-1)/p') + 1)nβ +
    (1 + (p'-1)/p')nγ. MPICH's comment writes (p-1)/p where the blocks are really n/p' long.
    For p' dividing the count this is exact when the root's gather tree waits for a rank that
    folded at every step (root 0 does), and an upper bound otherwise: the ranks that did not
    fold start halving one fold earlier. A root that folded costs nothing extra -- it gets
    block 0 from participant 0 while the first gather message is on its way.
    """
    if p & (p - 1) == 0:
        return 2 * lg(p) * alpha + 2 * (p - 1) / p * n * beta + (p - 1) / p * n * gamma
    q = pof2_at_most(p)
    return (2 * floor_lg(p) + 1) * alpha + (2 * (q - 1) / q + 1) * n * beta + (1 + (q - 1) / q) * n * gamma


@algorithm("reduce", "linear", cost=linear_cost, exact=registry.never, reference="MPI standard (reference implementation)")
def linear_reduce(comm: Comm, buf: Payload, op: Op, root: int) -> Proc[Payload | None]:
    """Linear reduce: every rank sends its vector to the root, which combines them in rank order.

    The root posts all p-1 receives at once and folds the vectors in as they become due,
    acc = ((x0 op x1) op x2) op ..., so any associative op works.

    Cost: (p-1)(α + nβ + nγ) if the root can receive only one message at a time (the
    textbook single-port estimate); on a multi-port contention-free network the messages
    overlap and it takes α + nβ + (p-1)nγ.
    """
    p, r = comm.size, comm.rank
    if r != root:
        yield from comm.send(buf, dest=root)
        return None
    requests = {i: comm.irecv(source=i) for i in range(p) if i != root}
    acc = None
    # acc = x0 op x1 op ... op x(i-1) before rank i is folded in.
    for i in range(p):
        x = buf if i == root else (yield from comm.wait(requests[i]))
        acc = x if acc is None else (yield from comm.reduce_local(op, acc, x))
    return acc


@algorithm("reduce", "binomial", cost=binomial_cost, exact=registry.power_of_two,
           reference="Thakur, Rabenseifner & Gropp 2005; MPICH reduce_intra_binomial.c")
def binomial_reduce(comm: Comm, buf: Payload, op: Op, root: int) -> Proc[Payload | None]:
    """Binomial-tree reduce: partial results flow up a binomial tree to the root.

    Ranks are numbered relative to the tree's root (v = r - lroot mod p). Rank v receives
    from v + 1, v + 2, v + 4, ... (while that bit of v is clear and the partner exists),
    combining each into its partial result, then sends the result to v - lowbit(v) and is
    done. The partner always holds the ranks just above v's, so ``acc op incoming`` keeps
    rank order. As MPICH does, a commutative op is combined as ``incoming op acc`` (so float
    results carry MPICH's rounding), and a non-commutative op roots the tree at rank 0 --
    where relative and real rank order agree -- and rank 0 then sends the result to the root.

    Cost: ⌈lg p⌉(α + nβ + nγ), plus α + nβ for a non-commutative op with root != 0. Exact
    for p a power of two; otherwise the tree is shallower than ⌈lg p⌉ rounds.
    """
    p, r = comm.size, comm.rank
    lroot = root if op.commutative else 0
    v = (r - lroot) % p
    acc = buf
    mask = 1
    # acc = the reduction of relative ranks v .. v + mask - 1 (those below p), in rank order.
    while mask < p:
        if v & mask:
            yield from comm.send(acc, dest=(r - mask) % p)
            break
        if v + mask < p:
            incoming = yield from comm.recv(source=(r + mask) % p)
            a, b = (incoming, acc) if op.commutative else (acc, incoming)
            acc = yield from comm.reduce_local(op, a, b)
        mask <<= 1
    if lroot != root:
        if r == lroot:
            yield from comm.send(acc, dest=root)
        elif r == root:
            acc = yield from comm.recv(source=lroot)
    return acc if r == root else None


def recursive_halving(comm: Comm, blocks: list[Payload], op: Op, q: int, rank_of: Callable[[int], int]) -> Proc[None]:
    """Reduce-scatter *blocks* by recursive halving among the p' = len(blocks) participants.

    *q* is this rank's participant number and ``rank_of(x)`` the communicator rank of
    participant x. In the step at distance mask (1, 2, 4, ...) participants q and q XOR mask
    split the range of blocks they both hold: the one with that bit clear keeps the lower
    half, the other the upper half (see ``halving_ranges``). Each sends the half it gives up
    and combines the half it receives into the half it keeps, ``incoming op mine`` as in
    MPICH, writing the result back into *blocks*. At the end participant q holds block
    bitreverse(q) of the full reduction. Needs a commutative op.
    """
    mask = 1
    # Before the step at distance mask, blocks[lo:hi] hold the reduction over the mask participants
    # that agree with q in every bit from mask upwards.
    for (lo, hi), (klo, khi) in pairwise(halving_ranges(q, len(blocks))):
        glo, ghi = (lo, klo) if klo > lo else (khi, hi)
        peer = rank_of(q ^ mask)
        incoming = yield from comm.sendrecv(Payload.concat(blocks[glo:ghi]), dest=peer, source=peer)
        reduced = yield from comm.reduce_local(op, incoming, Payload.concat(blocks[klo:khi]))
        blocks[klo:khi] = reduced.split(khi - klo)
        mask <<= 1


def halving_ranges(q: int, pof2: int) -> list[tuple[int, int]]:
    """Return the block range participant q holds before each recursive-halving step, and after the last.

    The range halves at every step: with the bit of the step's distance clear in q, q keeps
    the lower half, else the upper half.
    """
    lo, hi, mask, ranges = 0, pof2, 1, [(0, pof2)]
    while mask < pof2:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if q & mask else (lo, mid)
        ranges.append((lo, hi))
        mask <<= 1
    return ranges


def binomial_gather_halves(comm: Comm, blocks: list[Payload], q: int, root_q: int,
                           rank_of: Callable[[int], int]) -> Proc[Payload | None]:
    """Gather the blocks left by ``recursive_halving`` at participant *root_q*; return them there, else None.

    The halving steps are undone in reverse order (distance p'/2, p'/4, ..., 1): at each,
    of the partners q and q XOR mask the one whose half of the tree contains *root_q*
    receives the other's range of blocks, and the other sends it and stops -- a binomial
    tree rooted at *root_q*.
    """
    ranges = halving_ranges(q, len(blocks))
    mask = len(blocks) // 2
    # Before the step at distance mask, q holds the fully reduced blocks of ranges[step + 1].
    for step in reversed(range(len(ranges) - 1)):
        (lo, hi), (klo, khi) = ranges[step], ranges[step + 1]
        peer = q ^ mask
        if peer & -mask == root_q & -mask:
            yield from comm.send(Payload.concat(blocks[klo:khi]), dest=rank_of(peer))
            return None
        olo, ohi = (lo, klo) if klo > lo else (khi, hi)
        blocks[olo:ohi] = (yield from comm.recv(source=rank_of(peer))).split(ohi - olo)
        mask >>= 1
    return Payload.concat(blocks)


def participant(r: int, rem: int, odd_folds: bool) -> int:
    """Return rank r's participant number among the largest power of two of ranks (-1: folded away).

    Of each pair (2i, 2i+1) below 2·rem one rank folds its vector into the other and sits
    out: the odd one in MPICH's reduce (so rank 0 takes part), the even one in its allreduce.
    """
    if r >= 2 * rem:
        return r - rem
    return -1 if (r % 2 == 1) == odd_folds else r // 2


def participant_rank(x: int, rem: int, odd_folds: bool) -> int:
    """Return the communicator rank of participant *x* (the inverse of :func:`participant`)."""
    if x >= rem:
        return x + rem
    return 2 * x if odd_folds else 2 * x + 1


@algorithm("reduce", "rabenseifner", cost=rabenseifner_cost, requires={"commutative"}, exact=registry.power_of_two,
           reference="Rabenseifner 2004; Thakur, Rabenseifner & Gropp 2005; MPICH reduce_intra_reduce_scatter_gather.c")
def rabenseifner_reduce(comm: Comm, buf: Payload, op: Op, root: int) -> Proc[Payload | None]:
    """Rabenseifner's reduce: reduce-scatter by recursive halving, then a binomial gather to the root.

    Fold (when p is not a power of two; p' = the largest power of two below p, rem = p - p'):
    each odd rank below 2·rem sends its vector to its left neighbour and sits out, leaving
    p' participants. Recursive halving leaves one fully reduced block on each participant,
    and a binomial gather collects them at the root. If the root sat out, participant 0
    hands it block 0 and the root takes participant 0's place in the gather.

    Cost: 2 lg p·α + 2((p-1)/p)nβ + ((p-1)/p)nγ for p a power of two, plus at most the fold
    (α + nβ + nγ) otherwise (see rabenseifner_cost).
    """
    p, r = comm.size, comm.rank
    pof2 = pof2_at_most(p)
    rem = p - pof2
    q = participant(r, rem, odd_folds=True)
    if q < 0:
        yield from comm.send(buf, dest=r - 1)
    elif r < 2 * rem:
        incoming = yield from comm.recv(source=r + 1)
        buf = yield from comm.reduce_local(op, incoming, buf)
    blocks = buf.split(pof2)
    if q >= 0:
        yield from recursive_halving(comm, blocks, op, q, partial(participant_rank, rem=rem, odd_folds=True))
    root_q = participant(root, rem, odd_folds=True)

    def rank_of(x: int) -> int:  # a root that sat out stands in for participant 0
        return root if x == 0 and root_q < 0 else participant_rank(x, rem, odd_folds=True)

    if root_q < 0:
        if q == 0:
            yield from comm.send(blocks[0], dest=root)
            q = -1
        elif r == root:
            blocks[0], q = (yield from comm.recv(source=0)), 0
    if q < 0:
        return None
    return (yield from binomial_gather_halves(comm, blocks, q, max(root_q, 0), rank_of))
