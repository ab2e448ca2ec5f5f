"""MPI layer: communicators, point-to-point messages, matching, protocols, payloads and ops.

It knows nothing of collective algorithms (they live one layer up and are reached through
:attr:`Comm._collective_runner`) and talks to the network only through ``transfer``.
"""

from mpisim.mpi.comm import Comm
from mpisim.mpi.config import MpiConfig
from mpisim.mpi.constants import ANY_SOURCE, ANY_TAG, MAX_TAG, PROC_NULL, TAG_UB, UNDEFINED
from mpisim.mpi.ops import MAX, MIN, PROD, SUM, Op, get_op
from mpisim.mpi.payload import IN_PLACE, DataPayload, Payload, SizePayload, as_payload, in_place, make_payload
from mpisim.mpi.request import Request, Status
from mpisim.mpi.world import World

__all__ = [
    "ANY_SOURCE", "ANY_TAG", "IN_PLACE", "MAX", "MAX_TAG", "MIN", "PROC_NULL", "PROD", "SUM", "TAG_UB", "UNDEFINED",
    "Comm", "DataPayload", "MpiConfig", "Op", "Payload", "Request", "SizePayload", "Status", "World",
    "as_payload", "get_op", "in_place", "make_payload",
]
