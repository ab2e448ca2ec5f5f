"""Barrier: no rank leaves before every rank has entered.

A barrier moves no data, only zero-byte messages whose arrival proves that someone has
entered. Two classic shapes:

* **dissemination** (Hensgen, Finkel & Manber 1988) -- ⌈lg p⌉ rounds; in round k every rank
  signals the rank 2^k to its right and waits for the one 2^k to its left. After round k a
  rank has heard, directly or through others, from the 2^(k+1) - 1 ranks before it, so after
  ⌈lg p⌉ rounds from all of them. MPICH's default (``k_dissemination`` with k = 2).
* **binomial** -- gather "I am here" up a binomial tree to rank 0 (fan-in), then release
  everyone down the same tree (fan-out): twice as many rounds, but only p-1 messages each way.
"""

from __future__ import annotations

from mpisim.collectives import registry
from mpisim.collectives.bcast import token
from mpisim.collectives.costmodel import ceil_lg
from mpisim.collectives.fluid.mpi_ring import BARRIER
from mpisim.collectives.registry import algorithm
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm


def dissemination_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """⌈lg p⌉α."""
    return ceil_lg(p) * alpha


def binomial_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """2⌈lg p⌉α (exact for p a power of two; on the single-port network, for every p)."""
    return 2 * ceil_lg(p) * alpha


@algorithm("barrier", "dissemination", cost=dissemination_cost,
           reference="Hensgen, Finkel & Manber 1988; MPICH barrier_intra_k_dissemination.c (k = 2)", fluid=BARRIER)
def dissemination_barrier(comm: Comm) -> Proc[None]:
    """Dissemination barrier: ⌈lg p⌉ rounds of "I am here" to the rank 2^k to the right.

    In round k rank r sends a zero-byte message to (r + 2^k) mod p and waits for the one
    from (r - 2^k) mod p. No rank can finish round k before the 2^k ranks to its left have
    started it, so nobody leaves before everybody has entered.

    Cost: ⌈lg p⌉α; exact for every p.
    """
    p, r = comm.size, comm.rank
    mask = 1
    # After the round with distance mask, rank r knows that ranks r - (2·mask - 1) .. r have entered.
    while mask < p:
        yield from comm.sendrecv(token(), dest=(r + mask) % p, source=(r - mask) % p)
        mask <<= 1


@algorithm("barrier", "binomial", cost=binomial_cost, exact=registry.power_of_two,
           reference="MPICH-1 barrier; Thakur, Rabenseifner & Gropp 2005 (binomial trees)")
def binomial_barrier(comm: Comm) -> Proc[None]:
    """Binomial barrier: fan in to rank 0 along a binomial tree, then fan out along the same tree.

    Fan-in: rank r waits for its children r + 1, r + 2, r + 4, ... (below its lowest set bit
    and below p), then reports to its parent r - lowbit(r). Rank 0 hears from everyone
    through the tree and fans out: every rank waits for its parent's release and passes it
    on to its children, largest subtree first.

    Cost: 2⌈lg p⌉α on the single-port network, for every p: rank 0 has ⌈lg p⌉ children and
    takes their tokens one after the other, then releases them one after the other. Where a
    rank may take several messages at once (more ports), the tree is only ⌊lg p⌋ messages
    deep at p not a power of two, so the barrier is faster.
    """
    p, r = comm.size, comm.rank
    mask = 1
    # Fan-in: when the loop ends, every rank of r's subtree (r .. r + mask - 1) has entered.
    while mask < p and not r & mask:
        if r + mask < p:
            yield from comm.recv(source=r + mask)
        mask <<= 1
    if r > 0:
        yield from comm.send(token(), dest=r - mask)
        yield from comm.recv(source=r - mask)
    # Fan-out: release the children, largest subtree first.
    mask >>= 1
    while mask > 0:
        if r + mask < p:
            yield from comm.send(token(), dest=r + mask)
        mask >>= 1
