"""Gather: collect every rank's buffer at the root, concatenated in rank order.

Every rank passes a buffer of the same count; the root returns all p buffers joined in rank
order and the other ranks return ``None``.

* **linear** -- every rank sends straight to the root. Simple, but the root's port
  receives p-1 messages one after another on a real (single-port) network.
* **binomial** -- a binomial tree: in round k the ranks whose (root-relative) number has
  bit k set send everything they have collected to the rank 2^k below and drop out, so
  the root receives ceil(lg p) messages of doubling size.

*n* is the bytes of the gathered array (p times each rank's buffer). Both move
((p-1)/p)*n bytes into the root, the minimum; they differ in the number of messages the root
waits for.
"""

from __future__ import annotations

from mpisim.collectives import registry
from mpisim.collectives.costmodel import ceil_lg
from mpisim.collectives.registry import algorithm
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.payload import Payload


def linear_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """(p-1)α + ((p-1)/p)nβ: the single-port estimate (the root receives one message after another)."""
    return (p - 1) * alpha + (p - 1) / p * n * beta


def binomial_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """⌈lg p⌉α + ((p-1)/p)nβ (exact for p a power of two)."""
    return ceil_lg(p) * alpha + (p - 1) / p * n * beta


@algorithm("gather", "linear", cost=linear_cost, exact=registry.never, reference="MPICH gather (linear, short comms)")
def linear_gather(comm: Comm, buf: Payload, root: int) -> Proc[Payload | None]:
    """Linear gather: every rank sends its buffer straight to the root.

    The root posts a receive for every other rank and waits for all of them.

    Cost: (p-1)α + ((p-1)/p)nβ if the root can take only one message at a time (the
    textbook single-port estimate); on a multi-port contention-free network the messages
    overlap and it takes α + (n/p)β.
    """
    p, r = comm.size, comm.rank
    if r != root:
        yield from comm.send(buf, dest=root)
        return None
    blocks = [buf] * p
    sources = [source for source in range(p) if source != root]
    got = yield from comm.waitall([comm.irecv(source=source) for source in sources])
    for source, block in zip(sources, got, strict=True):
        blocks[source] = block
    return type(buf).concat(blocks)


@algorithm("gather", "binomial", cost=binomial_cost, exact=registry.power_of_two,
           reference="Thakur, Rabenseifner & Gropp 2005; MPICH gather_intra_binomial.c")
def binomial_gather(comm: Comm, buf: Payload, root: int) -> Proc[Payload | None]:
    """Binomial-tree gather: ceil(lg p) rounds of messages that double in size towards the root.

    Ranks are numbered relative to the root, vr = (r - root) mod p. In round k
    (mask = 2^k) a rank with bit k of vr set sends everything it holds to vr - mask and is
    done; the others receive the run of blocks of vr + mask (if it exists) and append it.
    The root ends with the blocks of root, root+1, ..., root-1 and rotates them into rank
    order.

    Cost: ⌈lg p⌉α + ((p-1)/p)nβ; exact for p a power of two. For other p the subtrees are
    uneven and finish earlier, so the formula is an upper estimate.
    """
    p, r, c = comm.size, comm.rank, buf.count
    vr = (r - root) % p
    held = buf
    mask = 1
    # held = the blocks of relative ranks vr .. min(vr + mask, p) - 1.
    while mask < p:
        if vr & mask:
            yield from comm.send(held, dest=(vr - mask + root) % p)
            return None
        if vr + mask < p:
            incoming = yield from comm.recv(source=(vr + mask + root) % p)
            held = type(buf).concat([held, incoming])
        mask <<= 1
    split_at = (p - root) * c  # the blocks of ranks 0 .. root-1 sit at the end
    return type(buf).concat([held.slice(split_at, p * c), held.slice(0, split_at)])
