"""Collective-fidelity calls: the ranks of one collective call meeting before it is timed as a whole.

The collective-fidelity twins (:mod:`mpisim.collectives.fluid`: ``fluid_trees``, ``fluid_ring``,
``fluid_mpi_ring``) time a call once, when its last rank has joined; until then each rank waits
on its own event.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from mpisim.mpi.comm import Comm

__all__ = ["join_call", "world_table"]


def world_table(tables: weakref.WeakKeyDictionary, world: Any) -> dict:
    """Return *world*'s dict in *tables* (a per-world cache that dies with its world), made if new.

    NOTE: ``tables.setdefault(world, {})`` would build a weak reference with a callback and an
    empty dict on every call; a plain ``get`` reuses the world's one callback-free reference.
    These caches are read once per rank per call.
    """
    table = tables.get(world)
    if table is None:
        table = tables[world] = {}
    return table


def join_call(comm: Comm, calls_by_world: weakref.WeakKeyDictionary, new_call: Callable[[], Any]) -> tuple[Any, Any, bool]:
    """Join this rank to its communicator's next collective-fidelity call: (call, wake-up event, last to join).

    Every rank's n-th call on a communicator is the same call (collectives are called in the
    same order by all ranks), kept in *calls_by_world* until its last rank has joined; *new_call*
    makes the call's record (with ``arrived`` and ``events``) when the first rank joins.
    """
    calls = world_table(calls_by_world, comm.world)
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
