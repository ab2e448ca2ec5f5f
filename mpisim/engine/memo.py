"""A per-world memo: what a simulation works out once and shares, owned by the simulation.

Models above the engine work some things out once per world and let every rank reuse them: a
collective call's shape and algorithm, a tree's plan, a tuner's choice, hop costs. Kept in
module-level dictionaries, such tables outlive the run unless keyed weakly, are shared by two
worlds in one process unless keyed by world, and are invisible to whoever wants to know what
a world holds. A :class:`Memo` is owned by its world instead (``world.memo``): it goes when
the world goes, and two worlds never see each other's entries.

Each user of the memo takes its own named table (by convention its module's name and what
it holds, ``"fluid_mpi_ring.hops"``), a plain dict it keys as it likes::

    hops = world.memo.table("fluid_mpi_ring.hops")
    cost = hops.get(key)
    if cost is None:
        cost = hops[key] = work_it_out()

A table is a dict, not a cache with eviction: what is put in stays for the world's life, so
only results that are bounded by the workload's shape (not by its length) belong here.
"""

from __future__ import annotations

from typing import Any


class Memo:
    """Named tables of one world's memoised results (see module docstring)."""

    __slots__ = ("_tables",)

    def __init__(self) -> None:
        self._tables: dict[str, dict[Any, Any]] = {}

    def table(self, name: str) -> dict[Any, Any]:
        """Return the table called *name*, made empty the first time it is asked for."""
        table = self._tables.get(name)
        if table is None:
            table = self._tables[name] = {}
        return table

    def names(self) -> list[str]:
        """The names of the tables made so far, sorted (for reports and tests)."""
        return sorted(self._tables)

    def entries(self) -> int:
        """How many entries all tables hold together."""
        return sum(len(table) for table in self._tables.values())

    def clear(self) -> None:
        """Drop every table (a world that is kept after its run can give the memory back)."""
        self._tables.clear()
