"""Scatter: cut the root's buffer into p blocks and give block r to rank r.

Every rank passes a buffer of the same count (only the root's contents matter); it is cut
with ``np.array_split`` sizes, so when p does not divide the count the first blocks are one
element longer.

* **linear** -- the root sends each block straight to its rank.
* **binomial** -- a binomial tree: the root sends half of the blocks to the rank p/2 away,
  then a quarter to the rank p/4 away, and so on, and every rank that receives a run of
  blocks forwards the halves the same way.

*n* is the bytes of the root's buffer. Both move ((p-1)/p)*n bytes out of the root; they
differ in the number of messages the root sends.
"""

from __future__ import annotations

from itertools import accumulate

from mpisim.collectives import registry
from mpisim.collectives.costmodel import ceil_lg
from mpisim.collectives.registry import algorithm
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.payload import Payload, split_offsets


def linear_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """(p-1)α + ((p-1)/p)nβ: the single-port estimate (the root sends one message after another)."""
    return (p - 1) * alpha + (p - 1) / p * n * beta


def binomial_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """⌈lg p⌉α + ((p-1)/p)nβ (exact for p a power of two)."""
    return ceil_lg(p) * alpha + (p - 1) / p * n * beta


@algorithm("scatter", "linear", cost=linear_cost, exact=registry.never, reference="MPICH scatter (linear, short comms)")
def linear_scatter(comm: Comm, buf: Payload, root: int) -> Proc[Payload]:
    """Linear scatter: the root sends block j straight to rank j.

    The root starts all p-1 sends at once and waits for them; every other rank receives
    one message.

    Cost: (p-1)α + ((p-1)/p)nβ if the root can send only one message at a time (the
    textbook single-port estimate); on a multi-port contention-free network the messages
    overlap and it takes α + (n/p)β.
    """
    p, r = comm.size, comm.rank
    if r != root:
        return (yield from comm.recv(source=root))
    blocks = buf.split(p)
    yield from comm.waitall([comm.isend(blocks[dest], dest=dest) for dest in range(p) if dest != root])
    return blocks[root]


@algorithm("scatter", "binomial", cost=binomial_cost, exact=registry.power_of_two,
           reference="Thakur, Rabenseifner & Gropp 2005; MPICH scatter_intra_binomial.c")
def binomial_scatter(comm: Comm, buf: Payload, root: int) -> Proc[Payload]:
    """Binomial-tree scatter: ceil(lg p) rounds of messages that halve in size away from the root.

    Ranks are numbered relative to the root, vr = (r - root) mod p, and the root lines its
    blocks up in that order. A rank whose lowest set bit of vr is 2^k receives the run of
    blocks of vr .. vr + 2^k - 1 from vr - 2^k (the root holds all of them). It then
    sends, for mask = 2^(k-1), ..., 2, 1, the upper part starting at vr + mask to that
    rank, keeping the lower part, until only its own block is left.

    Cost: ⌈lg p⌉α + ((p-1)/p)nβ; exact for p a power of two. For other p the tree is
    uneven and the formula is an upper estimate.
    """
    p, r = comm.size, comm.rank
    vr = (r - root) % p
    offset = split_offsets(buf.count, p)
    # Element offsets of the blocks in relative order: relative block i is block (i + root) mod p.
    size = [offset[(i + root) % p + 1] - offset[(i + root) % p] for i in range(p)]
    start = [0, *accumulate(size)]
    mask = 1
    while mask < p and not vr & mask:
        mask <<= 1
    if vr == 0:
        blocks = buf.split(p)
        held = type(buf).concat(blocks[root:] + blocks[:root])
    else:
        held = yield from comm.recv(source=(vr - mask + root) % p)
    # held = the blocks of relative ranks vr .. min(vr + mask, p) - 1.
    mask >>= 1
    while mask > 0:
        if vr + mask < p:
            cut = start[vr + mask] - start[vr]
            yield from comm.send(held.slice(cut, held.count), dest=(vr + mask + root) % p)
            held = held.slice(0, cut)
        mask >>= 1
    return held
