"""Allgather: every rank contributes one buffer and every rank ends with all of them, in rank order.

Three classic ways to move the p - 1 missing blocks to every rank:

* **ring** -- p - 1 steps, each passing one block to the right neighbour. Latency grows
  linearly with p, but every step uses every link once: best for long messages.
* **recursive doubling** -- lg p steps; in step k a rank swaps everything it has (2^k blocks)
  with the rank whose number differs in bit k. Needs a power of two.
* **Bruck** -- ceil(lg p) steps for any p: in step k a rank sends the blocks it holds to the
  rank 2^k below it and receives from the rank 2^k above, then rotates its blocks into rank
  order at the end.

With *n* the size of the whole gathered array, all three move ((p-1)/p)*n bytes into each
rank, the least possible; they differ in the number of messages (alpha terms).
"""

from __future__ import annotations

from mpisim.collectives import registry
from mpisim.collectives.costmodel import ceil_lg, lg
from mpisim.collectives.fluid.mpi_ring import RING_ALLGATHER
from mpisim.collectives.registry import algorithm
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.payload import Payload


def ring_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """(p-1)α + ((p-1)/p)nβ, n = bytes gathered in total."""
    return (p - 1) * alpha + (p - 1) / p * n * beta


def recursive_doubling_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """lg p·α + ((p-1)/p)nβ (p a power of two)."""
    return lg(p) * alpha + (p - 1) / p * n * beta


def bruck_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """⌈lg p⌉α + ((p-1)/p)nβ."""
    return ceil_lg(p) * alpha + (p - 1) / p * n * beta


@algorithm("allgather", "ring", cost=ring_cost, reference="Thakur, Rabenseifner & Gropp 2005; MPICH allgather_intra_ring.c",
           fluid=RING_ALLGATHER)
def ring_allgather(comm: Comm, buf: Payload) -> Proc[Payload]:
    """Ring allgather: p-1 steps, each passing one block on to the right neighbour.

    Rank r starts with its own block. In step k it sends the block it received in the
    previous step (its own in step 0) to rank r+1 and receives block r-k-1 from rank r-1.
    After p-1 steps every block has travelled once around the ring.

    Cost: (p-1)α + ((p-1)/p)nβ, n = bytes gathered in total; exact for every p.
    """
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    blocks: list[Payload] = [buf] * p  # only blocks[r] is real until the ring fills the others

    # After step k, rank r holds the blocks of ranks r-k-1 .. r.
    for k in range(p - 1):
        send_i, recv_i = (r - k) % p, (r - k - 1) % p
        blocks[recv_i] = yield from comm.sendrecv(blocks[send_i], dest=right, source=left)
    return type(buf).concat(blocks)


@algorithm("allgather", "recursive_doubling", cost=recursive_doubling_cost, requires={"power_of_two"},
           exact=registry.power_of_two,
           reference="Thakur, Rabenseifner & Gropp 2005; MPICH allgather_intra_recursive_doubling.c")
def recursive_doubling_allgather(comm: Comm, buf: Payload) -> Proc[Payload]:
    """Recursive-doubling allgather: lg p exchanges with partners at distance 1, 2, 4, ...

    In step k rank r swaps everything it holds with rank r XOR 2^k. The data doubles at
    every step, so after lg p steps every rank has every block. MPICH handles p not a
    power of two with extra tree steps; here p must be a power of two (Bruck covers the rest).

    Cost: lg p·α + ((p-1)/p)nβ, n = bytes gathered in total.
    """
    r = comm.rank
    held = buf
    mask = 1
    # held = the blocks of ranks (r & ~(mask-1)) .. (r | (mask-1)), in rank order.
    while mask < comm.size:
        peer = r ^ mask
        incoming = yield from comm.sendrecv(held, dest=peer, source=peer)
        held = type(buf).concat([incoming, held] if peer < r else [held, incoming])
        mask <<= 1
    return held


@algorithm("allgather", "bruck", cost=bruck_cost, reference="Bruck et al. 1997; MPICH allgather_intra_brucks.c")
def bruck_allgather(comm: Comm, buf: Payload) -> Proc[Payload]:
    """Bruck allgather: ceil(lg p) steps for any p, then one local rotation.

    Rank r keeps its blocks in the order r, r+1, r+2, ... (mod p). In step k it sends the
    first min(2^k, p-2^k) blocks it holds to rank r-2^k and appends the ones arriving from
    rank r+2^k, so the run of consecutive blocks doubles. A final rotation by r blocks puts
    them in rank order.

    Cost: ⌈lg p⌉α + ((p-1)/p)nβ, n = bytes gathered in total; exact for every p.
    """
    p, r, c = comm.size, comm.rank, buf.count
    held = buf
    dist = 1
    # held = the blocks of ranks r, r+1, ..., r+dist-1 (mod p).
    while dist < p:
        part = held.slice(0, min(dist, p - dist) * c)
        incoming = yield from comm.sendrecv(part, dest=(r - dist) % p, source=(r + dist) % p)
        held = type(buf).concat([held, incoming])
        dist <<= 1
    # Rotate: the blocks of ranks 0 .. r-1 sit at the end.
    split_at = (p - r) * c
    return type(buf).concat([held.slice(split_at, p * c), held.slice(0, split_at)])
