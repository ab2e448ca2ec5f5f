"""The ring's two loops, shared by every ring allreduce: reduce-scatter steps, then allgather steps.

p ranks in a cycle (position i sends to position i+1 and receives from i-1), the vector cut
into p blocks. In the **reduce-scatter** loop's step k, position i sends block i-k and adds
the incoming block i-k-1 into its own copy; after p-1 steps position i holds block (i+1) mod p
with all p contributions. In the **allgather** loop's step k, position i passes on block
i+1-k and receives block i-k; after p-1 steps every position holds every finished block.
Each loop moves ((p-1)/p)n bytes per rank in p-1 messages (Patarasuk & Yuan 2009): the ring
allreduce's 2(p-1)α + 2((p-1)/p)nβ + ((p-1)/p)nγ.

``ring`` is the cycle as comm ranks (None: 0, 1, ..., p-1, position = rank), so NCCL's
channels (:mod:`mpisim.collectives.nccl.ring`) and MPI's node and rail rings
(``hierarchical`` allreduce) run the same loop; ``tag`` keeps concurrent rings apart (None:
MPI's defaults, send tag 0 and any receive tag).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.ops import Op
from mpisim.mpi.payload import Payload


def _neighbours(comm: Comm, ring: Sequence[int] | None) -> tuple[int, int, int, int]:
    """(p, this rank's position, right neighbour, left neighbour) on *ring*."""
    if ring is None:
        p, i = comm.size, comm.rank
        return p, i, (i + 1) % p, (i - 1) % p
    p = len(ring)
    i = ring.index(comm.rank)
    return p, i, ring[(i + 1) % p], ring[(i - 1) % p]


def _tags(tag: int | None) -> dict[str, Any]:
    return {} if tag is None else {"sendtag": tag, "recvtag": tag}


def reduce_scatter_steps(comm: Comm, blocks: list[Payload], op: Op, ring: Sequence[int] | None = None,
                         tag: int | None = None) -> Proc[None]:
    """The reduce-scatter loop, in place: position i ends with block (i+1) mod p reduced."""
    p, i, right, left = _neighbours(comm, ring)
    tags = _tags(tag)
    # After step k, blocks[(i - k - 1) % p] holds k + 2 contributions.
    for k in range(p - 1):
        send_i, recv_i = (i - k) % p, (i - k - 1) % p
        incoming = yield from comm.sendrecv(blocks[send_i], dest=right, source=left, **tags)
        blocks[recv_i] = yield from comm.reduce_local(op, incoming, blocks[recv_i])


def allgather_steps(comm: Comm, blocks: list[Payload], ring: Sequence[int] | None = None,
                    tag: int | None = None) -> Proc[None]:
    """The allgather loop, in place: position i starts out owning block (i+1) mod p; ends owning all."""
    p, i, right, left = _neighbours(comm, ring)
    tags = _tags(tag)
    for k in range(p - 1):
        send_i, recv_i = (i + 1 - k) % p, (i - k) % p
        blocks[recv_i] = yield from comm.sendrecv(blocks[send_i], dest=right, source=left, **tags)
