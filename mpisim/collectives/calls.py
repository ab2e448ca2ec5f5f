"""Collective-fidelity calls: the ranks of one collective call meeting before it is timed as a whole.

The collective-fidelity paths (``fluid_trees``, ``fluid_ring``, ``fluid_mpi_ring``) time a call
once, when its last rank has joined; until then each rank waits on its own event.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from mpisim.mpi.comm import Comm

__all__ = ["join_call"]


def join_call(comm: Comm, calls_by_world: weakref.WeakKeyDictionary, new_call: Callable[[], Any]) -> tuple[Any, Any, bool]:
    """Join this rank to its communicator's next collective-fidelity call: (call, wake-up event, last to join).

    Every rank's n-th call on a communicator is the same call (collectives are called in the
    same order by all ranks), kept in *calls_by_world* until its last rank has joined; *new_call*
    makes the call's record (with ``arrived`` and ``events``) when the first rank joins.
    """
    calls = calls_by_world.setdefault(comm.world, {})
    seq_key = ("seq", comm.context, comm.rank)
    number = calls.get(seq_key, 0)
    calls[seq_key] = number + 1
    key = (comm.context, number)
    call = calls.get(key)
    if call is None:
        call = calls[key] = new_call()
    event = comm.env.event()
    call.events.append(event)
    call.arrived += 1
    last = call.arrived == comm.size
    if last:
        del calls[key]
    return call, event, last
