"""OSU ``osu_mbw_mr``: several sender/receiver pairs stream windows of messages at once.

Ranks ``0 .. pairs-1`` send and ranks ``pairs .. 2*pairs-1`` receive: rank i streams to rank
``i + pairs``. With two ranks per node and block placement, the senders share one node (and
its NIC) and the receivers the other, as in the benchmark's usual two-node run. Each iteration
a sender posts a window of non-blocking sends and waits for them, then receives a 4-byte ack;
its receiver posts the window of receives, waits, and sends the ack (OSU's ``osu_mbw_mr.c``).
The aggregate bandwidth is ``pairs x size x window x iterations / elapsed``, timed by rank 0
between a synchronised start and its last ack.

Arguments (``args:``): ``size`` (default 8 MiB), ``pairs`` (default: half the ranks),
``window`` (64), ``iterations`` (1), ``warmup`` (1). Messages are size-only stand-ins: the
benchmark's buffers carry no data worth checking, and 2 x 64 x 8 MiB would need 1 GiB.
"""

import numpy as np

from mpisim.engine.units import parse_size
from mpisim.mpi.payload import SizePayload

ACK_BYTES = 4


def main(comm, args=None):
    """Run osu_mbw_mr; rank 0 returns the aggregate bandwidth."""
    args = args or {}
    size = parse_size(args.get("size", "8 MiB"))
    pairs = int(args.get("pairs", comm.size // 2))
    window = int(args.get("window", 64))
    iterations = int(args.get("iterations", 1))
    warmup = int(args.get("warmup", 1))
    yield from comm.world.synchronize(comm.world_rank)
    if comm.rank >= 2 * pairs:
        return None
    sender = comm.rank < pairs
    peer = comm.rank + pairs if sender else comm.rank - pairs
    buf = SizePayload(size, np.uint8)
    ack = np.zeros(ACK_BYTES, np.uint8)
    t_start = comm.now
    for i in range(warmup + iterations):
        if i == warmup:
            t_start = comm.now
        if sender:
            yield from comm.waitall([comm.isend(buf, dest=peer, tag=1) for _ in range(window)])
            yield from comm.recv(source=peer, tag=2)
        else:
            yield from comm.waitall([comm.irecv(source=peer, tag=1) for _ in range(window)])
            yield from comm.send(ack, dest=peer, tag=2)
    elapsed = comm.now - t_start
    return {"size": size, "pairs": pairs, "bandwidth_Bps": pairs * size * window * iterations / elapsed}
