"""Alltoall: every rank sends a different block to every other rank (a transpose across ranks).

Each rank's buffer is cut into p blocks with ``np.array_split`` sizes; block j goes to rank j,
and every rank returns the blocks it received -- its own included -- in source-rank order.
All ranks pass the same count, so the blocks meant for rank j have the same size everywhere.

* **pairwise** -- p-1 steps; in step i rank r sends to r+i and receives from r-i. One
  message per step: the bandwidth-friendly choice for long messages.
* **Bruck** -- ceil(lg p) steps; in step k every block whose index has bit k set moves
  2^k ranks forward, packed into one message. Fewer messages, but every block travels
  several hops: the choice for short messages.
* **linear** ("scattered" in MPICH) -- post every receive and every send at once and wait
  for all of them; the network sorts out the order.

*n* is the bytes of each rank's buffer (what it sends in total, its own block included).
"""

from __future__ import annotations

from mpisim.collectives import registry
from mpisim.collectives.costmodel import ceil_lg
from mpisim.collectives.registry import algorithm
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.payload import Payload, split_counts


def pairwise_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """(p-1)α + ((p-1)/p)nβ (Thakur writes nβ, counting the block a rank keeps)."""
    return (p - 1) * alpha + (p - 1) / p * n * beta


def bruck_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """⌈lg p⌉α + (B(p)/p)nβ, B(p) = set bits in 0..p-1; = lg p·α + (n/2)lg p·β for p a power of two."""
    moved_blocks = sum(i.bit_count() for i in range(p))
    return ceil_lg(p) * alpha + moved_blocks / p * n * beta


def linear_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """(p-1)α + ((p-1)/p)nβ: the single-port estimate (one send after another)."""
    return (p - 1) * alpha + (p - 1) / p * n * beta


@algorithm("alltoall", "pairwise", cost=pairwise_cost,
           reference="Thakur, Rabenseifner & Gropp 2005; MPICH alltoall_intra_pairwise.c")
def pairwise_alltoall(comm: Comm, buf: Payload) -> Proc[Payload]:
    """Pairwise-exchange alltoall: p-1 steps, each one sendrecv with a different partner.

    In step i (i = 1..p-1) rank r sends block r+i to rank r+i and receives its block
    from rank r-i, so every ordered pair of ranks exchanges exactly once. (MPICH pairs
    ranks by XOR when p is a power of two; the shifts used here work for every p.)

    Cost: (p-1)α + ((p-1)/p)nβ; exact for every p. Thakur et al. write nβ for the
    bandwidth term.
    """
    p, r = comm.size, comm.rank
    blocks = buf.split(p)
    received = list(blocks)  # received[r] is the block a rank keeps for itself
    for i in range(1, p):
        dest, source = (r + i) % p, (r - i) % p
        received[source] = yield from comm.sendrecv(blocks[dest], dest=dest, source=source)
    return type(buf).concat(received)


@algorithm("alltoall", "bruck", cost=bruck_cost,
           reference="Bruck et al. 1997; Thakur, Rabenseifner & Gropp 2005; MPICH alltoall_intra_brucks.c")
def bruck_alltoall(comm: Comm, buf: Payload) -> Proc[Payload]:
    """Bruck alltoall: ceil(lg p) steps of packed blocks, with a local rotation before and after.

    Rotate: rank r lines its blocks up as r, r+1, ..., so the block at index i must travel
    i ranks forward. In step k every block at an index with bit k set moves 2^k ranks forward
    (all of them packed in one message to rank r+2^k, replaced by those from rank r-2^k).
    After the last step the block at index i on rank r came from rank r-i; a final
    rotation puts the blocks in source-rank order.

    Cost: ⌈lg p⌉α + (B(p)/p)nβ with B(p) the number of set bits in 0..p-1, exact for every
    p; for p a power of two it is Thakur's lg p·α + (n/2)lg p·β.
    """
    p, r = comm.size, comm.rank
    counts = split_counts(buf.count, p)  # counts[j]: elements of any block meant for rank j
    blocks = buf.split(p)
    held = [blocks[(r + i) % p] for i in range(p)]
    dist = 1
    # The block at index i has moved i & (dist-1) ranks: it is meant for rank r - (i & (dist-1)) + i.
    while dist < p:
        moving = [i for i in range(p) if i & dist]
        incoming = yield from comm.sendrecv(type(buf).concat([held[i] for i in moving]),
                                            dest=(r + dist) % p, source=(r - dist) % p)
        at = 0
        for i in moving:
            size = counts[(r - (i & (2 * dist - 1)) + i) % p]
            held[i], at = incoming.slice(at, at + size), at + size
        dist <<= 1
    return type(buf).concat([held[(r - source) % p] for source in range(p)])


@algorithm("alltoall", "linear", cost=linear_cost, exact=registry.never,
           reference="MPICH alltoall_intra_scattered.c")
def linear_alltoall(comm: Comm, buf: Payload) -> Proc[Payload]:
    """Linear ("scattered") alltoall: post every receive and send at once, then wait for all.

    Rank r posts receives from r+1, r+2, ... and sends to r-1, r-2, ... (MPICH's order,
    which spreads the first messages over different destinations), then waits for all
    2(p-1) requests. MPICH throttles to a window of requests; here all are in flight.

    Cost: (p-1)α + ((p-1)/p)nβ if a rank can only send one message at a time (the textbook
    single-port estimate). On a multi-port contention-free network all messages overlap,
    giving α + (n/p)β; on a shared network contention decides.
    """
    p, r = comm.size, comm.rank
    blocks = buf.split(p)
    sources = [(r + i) % p for i in range(1, p)]
    recvs = [comm.irecv(source=source) for source in sources]
    sends = [comm.isend(blocks[(r - i) % p], dest=(r - i) % p) for i in range(1, p)]
    got = yield from comm.waitall(recvs + sends)
    received = list(blocks)  # received[r] is the block a rank keeps for itself
    for source, block in zip(sources, got[: p - 1], strict=True):
        received[source] = block
    return type(buf).concat(received)
