"""Broadcast: the root's buffer ends up on every rank.

Every rank passes a buffer of the same count; only the root's contents matter, and every rank
returns the root's data. The algorithms trade messages (alpha terms) against bytes (beta terms):

* **linear** -- the root sends the whole buffer to each rank in turn: p-1 messages of n bytes.
* **binomial** -- a binomial tree: every rank that has the data passes it on, so the number of
  ranks holding it doubles each round. ⌈lg p⌉ rounds of n bytes: best for short messages.
* **scatter + allgather** (van de Geijn) -- cut the buffer into p blocks, scatter them down a
  binomial tree, then let every rank collect the others with an allgather (recursive doubling
  or ring). Each rank receives about 2n bytes in total instead of n·lg p: best for long messages.
* **pipelined chain** -- cut the buffer into segments and pass them down the chain
  root -> root+1 -> ..., so that all links carry different segments at the same time.

Blocks are cut with ``np.array_split`` sizes (the first ``count % p`` one element longer). A
contiguous run of such blocks, joined, splits back into the same blocks with
``Payload.split(len(run))``, which is how the scatter and allgather phases below send and
receive runs of blocks.
"""

from __future__ import annotations

import math

import numpy as np

from mpisim.collectives import registry
from mpisim.collectives.costmodel import ceil_lg
from mpisim.collectives.registry import algorithm
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.payload import DataPayload, Payload

#: Segment size (bytes) of the pipelined chain. The chain's time is about
#: (p-1)(α + sβ) to fill the pipe plus n/s segments of (2α + sβ) (one α is the credit, see
#: ``pipelined_chain_bcast``): small segments fill the chain quickly, large ones waste fewer
#: alphas. 256 KiB sits between MPICH's 8 KiB pipeline chunks for short trees and NCCL's
#: 512 KiB slots, and keeps a 1 GB broadcast to a few thousand segments.
CHAIN_SEGMENT = 256 * 1024


def segments(buf: Payload, nbytes: int) -> list[Payload]:
    """Cut *buf* into consecutive segments of *nbytes* (the last one shorter); one empty segment if it is empty."""
    per = max(1, nbytes // buf.dtype.itemsize)
    return [buf.slice(i, min(i + per, buf.count)) for i in range(0, max(buf.count, 1), per)]


class Credit(DataPayload):
    """A pipeline's zero-byte credit: flow control, which holds no port on the single-port network."""

    __slots__ = ()
    flag = True


def credit() -> Payload:
    """Return a pipeline credit ("send me the next segment"): a zero-byte flag (:attr:`Payload.flag`)."""
    return Credit(np.empty(0, np.int8))


def token() -> Payload:
    """Return a zero-byte message of the algorithm itself (a barrier's "I am here"): it takes a round."""
    return DataPayload(np.empty(0, np.int8))


# ---------------------------------------------------------------------------------------- costs


def linear_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """(p-1)(α + nβ): the single-port estimate (the root sends one message after another)."""
    return (p - 1) * (alpha + n * beta)


def binomial_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """⌈lg p⌉(α + nβ) (exact for p a power of two)."""
    return ceil_lg(p) * (alpha + n * beta)


def scatter_recursive_doubling_allgather_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """2⌈lg p⌉·α + 2((p-1)/p)nβ: exact for p a power of two, a lower bound otherwise (the fix-up adds steps)."""
    return 2 * ceil_lg(p) * alpha + 2 * (p - 1) / p * n * beta


def scatter_ring_allgather_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """(⌈lg p⌉ + p - 1)α + 2((p-1)/p)nβ (exact for p a power of two)."""
    return (ceil_lg(p) + p - 1) * alpha + 2 * (p - 1) / p * n * beta


def pipelined_chain_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """(p-1)T + (k-2)(T + α) + α + T_last for k >= 2 segments, (p-1)(α + nβ) for one.

    T = α + sβ for a full segment of s = CHAIN_SEGMENT bytes, T_last = α + s_last·β for the
    last one (s_last = n - (k-1)s). With equal segments this is the textbook
    (p-1+k-1)(α + sβ) plus one credit α per segment after the first.
    """
    if p == 1:
        return 0.0
    k = max(1, math.ceil(n / CHAIN_SEGMENT))
    if k == 1:
        return (p - 1) * (alpha + n * beta)
    seg, last = alpha + CHAIN_SEGMENT * beta, alpha + (n - (k - 1) * CHAIN_SEGMENT) * beta
    return (p - 1) * seg + (k - 2) * (seg + alpha) + alpha + last


# ---------------------------------------------------------------------------------------- algorithms


@algorithm("bcast", "linear", cost=linear_cost, exact=registry.never, reference="MPI standard (reference implementation)")
def linear_bcast(comm: Comm, buf: Payload, root: int) -> Proc[Payload]:
    """Linear broadcast: the root sends the whole buffer to every other rank.

    The root starts all p-1 sends at once and waits for them; every other rank receives one
    message.

    Cost: (p-1)(α + nβ) if the root can send only one message at a time (the textbook
    single-port estimate); on a multi-port contention-free network the messages overlap and
    it takes α + nβ, and on a shared network the root's link is the bottleneck.
    """
    p, r = comm.size, comm.rank
    if r != root:
        return (yield from comm.recv(source=root))
    yield from comm.waitall([comm.isend(buf, dest=dest) for dest in range(p) if dest != root])
    return buf


@algorithm("bcast", "binomial", cost=binomial_cost, exact=registry.power_of_two,
           reference="Thakur, Rabenseifner & Gropp 2005; MPICH bcast_intra_binomial.c")
def binomial_bcast(comm: Comm, buf: Payload, root: int) -> Proc[Payload]:
    """Binomial-tree broadcast: the set of ranks holding the data doubles every round.

    Ranks are numbered relative to the root (v = r - root mod p). Rank v receives from
    v - mask, where mask is the lowest set bit of v, and then sends to v + mask/2,
    v + mask/4, ..., 1 (those below p): the root first sends to the rank half-way round,
    and every subtree repeats the pattern.

    Cost: ⌈lg p⌉(α + nβ). Exact for p a power of two; otherwise, with sends that do not
    wait for each other (eager), the tree is only ⌊lg p⌋ messages deep and the simulation
    is faster.
    """
    p, r = comm.size, comm.rank
    v = (r - root) % p
    mask = 1
    # Find the parent: the lowest set bit of v (the root has none and runs mask up to >= p).
    while mask < p:
        if v & mask:
            buf = yield from comm.recv(source=(r - mask) % p)
            break
        mask <<= 1
    # Send to the children v + mask/2, v + mask/4, ..., largest subtree first.
    mask >>= 1
    while mask > 0:
        if v + mask < p:
            yield from comm.send(buf, dest=(r + mask) % p)
        mask >>= 1
    return buf


def scatter_for_bcast(comm: Comm, buf: Payload, root: int) -> Proc[list[Payload]]:
    """Binomial scatter of the root's p blocks: relative rank v gets block v (and passes on its subtree's).

    Relative rank v receives blocks v .. v+mask-1 (mask = lowest set bit of v) from v - mask,
    then hands the upper part of that run to each child v + mask/2, v + mask/4, ... As in
    MPICH's ``MPII_Scatter_for_bcast``, a run with no elements (count < p) is not sent at all.
    Returns all p blocks; only block v, and the ones this rank forwarded, are the root's data.
    """
    p, r = comm.size, comm.rank
    v = (r - root) % p
    blocks = buf.split(p)
    mask = 1
    while mask < p:
        if v & mask:
            hi = min(v + mask, p)
            if blocks[v].count:  # array_split blocks shrink along the run: an empty first block means all empty
                run = yield from comm.recv(source=(r - mask) % p)
                blocks[v:hi] = run.split(hi - v)
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        lo, hi = v + mask, min(v + 2 * mask, p)
        if lo < p and blocks[lo].count:
            yield from comm.send(type(buf).concat(blocks[lo:hi]), dest=(r + mask) % p)
        mask >>= 1
    return blocks


@algorithm("bcast", "scatter_recursive_doubling_allgather", cost=scatter_recursive_doubling_allgather_cost,
           exact=registry.power_of_two,
           reference="van de Geijn; Thakur, Rabenseifner & Gropp 2005; MPICH bcast_intra_scatter_recursive_doubling_allgather.c")
def scatter_recursive_doubling_allgather_bcast(comm: Comm, buf: Payload, root: int) -> Proc[Payload]:
    """Scatter + recursive-doubling allgather broadcast (van de Geijn), for any p.

    A binomial scatter leaves block v on relative rank v. Then, in step k, rank v swaps the
    blocks of its aligned group of 2^k ranks with the group of rank v XOR 2^k, so the blocks
    a rank holds double every step.

    When p is not a power of two, some ranks have no partner in a step (v XOR 2^k >= p) and
    miss the upper group's blocks. MPICH's fix-up (the same code as its recursive-doubling
    allgather) follows: inside the lower group, the ranks that did exchange pass those blocks
    down a binomial tree (halving the distance each round) to the ones that did not.

    Cost: 2⌈lg p⌉·α + 2((p-1)/p)nβ; exact for p a power of two (⌈lg p⌉α + ((p-1)/p)nβ
    for each phase); for other p the fix-up rounds come on top, so it is a lower bound.
    """
    p, r = comm.size, comm.rank
    v = (r - root) % p
    blocks = yield from scatter_for_bcast(comm, buf, root)

    def run(lo: int, hi: int) -> Payload:
        return type(buf).concat(blocks[lo:min(hi, p)]) if lo < p else buf.like(0)

    def place(lo: int, hi: int, incoming: Payload) -> None:
        hi = min(hi, p)
        if lo < hi:
            blocks[lo:hi] = incoming.split(hi - lo) if incoming.count else blocks[lo:hi]

    mask, level = 1, 0
    while mask < p:
        # The aligned groups of `mask` ranks containing v and its partner; each group's ranks
        # hold the blocks of every rank in their group (clipped at p).
        mine, theirs = v & ~(mask - 1), (v ^ mask) & ~(mask - 1)
        if v ^ mask < p:
            peer = (root + (v ^ mask)) % p
            place(theirs, theirs + mask,
                  (yield from comm.sendrecv(run(mine, mine + mask), dest=peer, source=peer)))
        if theirs + mask > p:
            # Fix-up (only for the lower group when the upper one is cut short by p): the
            # `done` lowest ranks of this group exchanged and hold the upper group's blocks;
            # they pass them on down a binomial tree to the others.
            done = p - mine - mask
            upper = mine + mask
            k, step = level, mask >> 1
            while step:
                other = v ^ step
                tree_root = (v >> k) << k
                if other > v and v < tree_root + done <= other:
                    yield from comm.send(run(upper, upper + mask), dest=(root + other) % p)
                elif other < v and other < tree_root + done <= v:
                    place(upper, upper + mask, (yield from comm.recv(source=(root + other) % p)))
                step >>= 1
                k -= 1
        mask <<= 1
        level += 1
    return type(buf).concat(blocks)


@algorithm("bcast", "scatter_ring_allgather", cost=scatter_ring_allgather_cost, exact=registry.power_of_two,
           reference="van de Geijn; Thakur, Rabenseifner & Gropp 2005; MPICH bcast_intra_scatter_ring_allgather.c")
def scatter_ring_allgather_bcast(comm: Comm, buf: Payload, root: int) -> Proc[Payload]:
    """Scatter + ring allgather broadcast (van de Geijn), for any p.

    A binomial scatter leaves block v on relative rank v. Then p-1 ring steps: in each, rank
    r sends the block it got last (its own first) to r+1 and receives the next one from r-1,
    so every block travels once around the ring.

    Cost: (⌈lg p⌉ + p - 1)α + 2((p-1)/p)nβ. Exact for p a power of two; otherwise the
    scatter tree is shallower and carries less than ((p-1)/p)n to its deepest rank.
    """
    p, r = comm.size, comm.rank
    left, right = (r - 1) % p, (r + 1) % p
    blocks = yield from scatter_for_bcast(comm, buf, root)
    j, jnext = r, left
    # After step k, rank r holds the blocks of ranks r-k-1 .. r (block of rank j is blocks[j - root]).
    for _ in range(p - 1):
        blocks[(jnext - root) % p] = yield from comm.sendrecv(blocks[(j - root) % p], dest=right, source=left)
        j, jnext = jnext, (jnext - 1) % p
    return type(buf).concat(blocks)


@algorithm("bcast", "pipelined_chain", cost=pipelined_chain_cost,
           reference="Pješivac-Grbović et al. 2007 (Open MPI tuned chain/pipeline bcast); NCCL ring broadcast")
def pipelined_chain_bcast(comm: Comm, buf: Payload, root: int) -> Proc[Payload]:
    """Pipelined chain broadcast: segments flow down root -> root+1 -> ... -> root-1.

    The buffer is cut into k segments of CHAIN_SEGMENT bytes (the last one shorter). Each rank
    receives segment j from its left neighbour and forwards it to its right neighbour, so
    once the pipe is full every link carries a different segment at the same time.

    Flow control: a rank sends segment j+1 to its right neighbour only after that neighbour
    has returned a zero-byte *credit* for it, which it does as soon as segment j has arrived
    (one buffer slot, as NCCL's connections have a fixed number of slots). Without it the
    root would release all k segments at once: on the contention-free ``analytic`` network
    they would all cross the first link together, and on the ``fairshare`` network they would
    share it and arrive together -- either way nothing would pipeline.

    Cost: (p-1)T + (k-2)(T + α) + α + T_last, T = α + sβ (see pipelined_chain_cost): the
    textbook (p-1+k-1)(α + sβ) plus one credit α per segment after the first. Exact with
    eager segments.
    """
    p, r = comm.size, comm.rank
    v = (r - root) % p
    left, right = (r - 1) % p, (r + 1) % p
    segs = segments(buf, CHAIN_SEGMENT)
    k, pending = len(segs), []
    # Data carries tag 2j, the credit for segment j tag 2j+1.
    for j in range(k):
        if v > 0:
            segs[j] = yield from comm.recv(source=left, tag=2 * j)
            if j + 1 < k:
                pending.append(comm.isend(credit(), dest=left, tag=2 * (j + 1) + 1))
        if v < p - 1:
            if j > 0:
                yield from comm.recv(source=right, tag=2 * j + 1)
            pending.append(comm.isend(segs[j], dest=right, tag=2 * j))
    yield from comm.waitall(pending)
    return type(buf).concat(segs)
