"""MPI library parameters: protocol thresholds and per-message costs.

These are the knobs a real MPI library has (Open MPI's ``btl_*_eager_limit``, MPICH's
``MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE``): the eager limit differs between shared memory and
the network, which is why there are two. Presets set them, and the scenario's ``mpi:`` block
overrides them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class MpiConfig:
    """Protocol thresholds and per-message costs of the simulated MPI library (SI units).

    eager_limit_intra / eager_limit_inter
        Largest message (bytes) sent eagerly between ranks of one node / of different nodes;
        larger messages use the rendezvous protocol (RTS, CTS, data, FIN).
    header_bytes
        Size of a rendezvous control message (RTS, CTS, FIN).
    send_overhead / recv_overhead
        CPU time (s) a rank spends per message sent / received (LogP's ``o``).
    copy_bandwidth
        Memory-copy bandwidth (B/s) for the eager sender's local copy and for an unexpected
        eager message copied out of the unexpected queue; ``inf`` makes copies free.
    reduce_cost
        Seconds per byte of a local reduction (the ``gamma`` of alpha-beta-gamma models).
    rendezvous_overhead
        Seconds a rendezvous message between nodes holds its *connection* after the CTS, before its data
        moves; 0 (the default) for none. A byte-stream transport (Open MPI's TCP BTL: one socket
        per pair of ranks) carries one message at a time in order, and each large message's
        protocol work (the pipeline's first fragment, the handshake's bookkeeping) sits on
        that socket. With it, messages between one pair go one after another, each holding the
        socket from its overhead until its data has arrived: a window of ``osu_bw`` sends gets
        about ``n / (overhead + latency + n / bandwidth)``, no more than a ping-pong's rate
        (published.md C4: 5.94 GB/s streaming against a 6.9 GB/s ping-pong slope).
    """

    eager_limit_intra: int = 64 * 1024
    eager_limit_inter: int = 64 * 1024
    header_bytes: int = 64
    send_overhead: float = 0.0
    recv_overhead: float = 0.0
    copy_bandwidth: float = math.inf
    reduce_cost: float = 0.0
    rendezvous_overhead: float = 0.0

    def eager_limit(self, path_kind: str) -> int:
        """Return the eager limit for a path of kind ``self``, ``intra`` or ``inter``."""
        return self.eager_limit_inter if path_kind == "inter" else self.eager_limit_intra

    def copy_time(self, nbytes: int) -> float:
        """Seconds to copy *nbytes* in memory."""
        return 0.0 if math.isinf(self.copy_bandwidth) else nbytes / self.copy_bandwidth
