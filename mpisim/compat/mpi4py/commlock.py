"""mpi4py's communicator locks: ``MPI._comm_lock(comm, key)`` and ``MPI._comm_lock_table(comm)``.

mpi4py serialises its lowercase collectives on one communicator between a process's threads:
``comm.bcast(obj)`` sends the pickle's length, then the pickle, as two MPI calls, and a second
thread's ``bcast`` on the same communicator must not slip between them. Each communicator has a
table of ``threading.Lock`` objects, one per call name, made the first time that call runs
(an attribute of the communicator, dropped when it is freed). Under ``mpisim exec`` a rank's
program is one thread, so the locks are never contended; the table is kept so that a program
(or mpi4py's own tests) that looks at it finds what mpi4py would have made.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Hashable
from typing import Any

from mpisim.compat.mpi4py.environment import here

#: One table per simulated communicator (a rank's handle), gone with the handle.
_TABLES: weakref.WeakKeyDictionary[Any, dict[Hashable, Any]] = weakref.WeakKeyDictionary()
#: The lowercase calls mpi4py runs under the communicator's lock of their name.
LOCKED = frozenset({"bcast", "gather", "scatter", "allgather", "alltoall", "neighbor_allgather",
                    "neighbor_alltoall"})


def table_of(sim_comm: Any) -> dict[Hashable, Any]:
    """The lock table of one rank's simulated communicator (made empty the first time)."""
    table = _TABLES.get(sim_comm)
    if table is None:
        table = _TABLES[sim_comm] = {}
    return table


def lock_of(sim_comm: Any, key: Hashable) -> Any:
    """The lock *key* of *sim_comm*'s table, made on first use, as mpi4py's ``PyMPI_Lock``."""
    table = table_of(sim_comm)
    lock = table.get(key)
    if lock is None:
        lock = table[key] = threading.Lock()
    return lock


def _comm_lock(comm: Any, key: Hashable = None) -> Any:
    """Create or get the lock *key* of *comm* (mpi4py's ``MPI._comm_lock``)."""
    return lock_of(comm._on(here("_comm_lock")), key)


def _comm_lock_table(comm: Any) -> dict[Hashable, Any]:
    """*comm*'s lock table, call name -> ``threading.Lock`` (mpi4py's ``MPI._comm_lock_table``)."""
    return table_of(comm._on(here("_comm_lock_table")))
