"""``MPI.Group``: an ordered set of processes, what a communicator is made of (``Incl``, ``Excl``, ``Union``, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mpisim.compat.mpi4py.environment import here
from mpisim.errors import MPIError
from mpisim.mpi.constants import IDENT, PROC_NULL, SIMILAR, UNDEFINED, UNEQUAL


class Group:
    """An ordered set of processes (``MPI_Group``): what a communicator is made of, without its contexts.

    A group is a local object: making one (``Get_group``, ``Incl``, ``Excl``, ``Union``, ...)
    sends nothing. It lists world ranks in the group's order; a process's rank in the group is
    its position there (``UNDEFINED`` outside it).
    """

    def __init__(self, members: Sequence[int] | Group | None = None) -> None:
        if isinstance(members, Group):  # MPI.Group(group): the same group, a new handle
            members = members._members
        # None: MPI.Group() is MPI.GROUP_NULL, no group at all (GROUP_EMPTY is a group of none)
        self._members = None if members is None else tuple(int(m) for m in members)

    def __bool__(self) -> bool:
        return self._members is not None

    def __reduce__(self) -> Any:
        """Only the predefined groups pickle (as mpi4py: a group is a handle of one process's MPI)."""
        if self is GROUP_NULL or self is GROUP_EMPTY:  # predefined: itself again
            return "GROUP_NULL" if self is GROUP_NULL else "GROUP_EMPTY"
        if self._members:
            raise ValueError("cannot serialize 'mpi4py.MPI.Group' instance")
        return Group, (None if self._members is None else (),)

    def Dup(self) -> Group:
        """A copy of the group (``MPI_Group_dup``)."""
        return Group(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Group) and other._members == self._members

    def __hash__(self) -> int:
        return hash(self._members)

    def __repr__(self) -> str:
        return f"Group({list(self._members)})"

    def Get_size(self) -> int:
        return len(self._members)

    def Get_rank(self) -> int:
        """The calling process's rank in the group, or ``UNDEFINED``."""
        me = here("Group.Get_rank").rank
        return self._members.index(me) if me in self._members else UNDEFINED

    size = property(Get_size)
    rank = property(Get_rank)

    def _check(self, ranks: Sequence[int], call: str) -> list[int]:
        ranks = [int(r) for r in ranks]
        bad = [r for r in ranks if not 0 <= r < len(self._members)]
        if bad or len(set(ranks)) != len(ranks):
            what = f"rank {bad[0]} is not in a group of {len(self._members)}" if bad else "a rank is listed twice"
            raise MPIError(f"rank {here(call).rank}: Group.{call}: {what} (MPI_ERR_RANK)")
        return ranks

    def Incl(self, ranks: Sequence[int]) -> Group:
        """The group of the listed ranks of this one, in the order listed (``MPI_Group_incl``)."""
        return Group(self._members[r] for r in self._check(ranks, "Incl"))

    def Excl(self, ranks: Sequence[int]) -> Group:
        """This group without the listed ranks, in its order (``MPI_Group_excl``)."""
        gone = set(self._check(ranks, "Excl"))
        return Group(m for i, m in enumerate(self._members) if i not in gone)

    def Range_incl(self, ranges: Sequence[tuple[int, int, int]]) -> Group:
        """The ranks of each ``(first, last, stride)`` range, last included (``MPI_Group_range_incl``)."""
        return self.Incl(_ranges(ranges))

    def Range_excl(self, ranges: Sequence[tuple[int, int, int]]) -> Group:
        """This group without the ranks of each ``(first, last, stride)`` range (``MPI_Group_range_excl``)."""
        return self.Excl(_ranges(ranges))

    def Translate_ranks(self, ranks: Sequence[int] | None = None, group: Group | None = None) -> list[int]:
        """The ranks in *group* of this group's *ranks* (``UNDEFINED`` where absent; ``MPI_Group_translate_ranks``)."""
        if ranks is None:
            ranks = list(range(len(self._members)))
        else:  # PROC_NULL translates to itself
            ranks = [r if r == PROC_NULL else self._check([r], "Translate_ranks")[0] for r in map(int, ranks)]
        if group is None:
            return [PROC_NULL if r == PROC_NULL else self._members[r] for r in ranks]
        return [PROC_NULL if r == PROC_NULL else
                group._members.index(self._members[r]) if self._members[r] in group._members else UNDEFINED
                for r in ranks]

    def Compare(self, other: Group) -> int:
        """``IDENT`` (same members, same order), ``SIMILAR`` (same members) or ``UNEQUAL``."""
        if self._members == other._members:
            return IDENT
        return SIMILAR if set(self._members) == set(other._members) else UNEQUAL

    @classmethod
    def Union(cls, group1: Group, group2: Group) -> Group:
        """*group1*'s members, then *group2*'s not in *group1* (``MPI_Group_union``)."""
        return cls([*group1._members, *(m for m in group2._members if m not in group1._members)])

    @classmethod
    def Intersection(cls, group1: Group, group2: Group) -> Group:
        """*group1*'s members that are in *group2*, in *group1*'s order (``MPI_Group_intersection``)."""
        return cls(m for m in group1._members if m in group2._members)

    @classmethod
    def Difference(cls, group1: Group, group2: Group) -> Group:
        """*group1*'s members that are not in *group2* (``MPI_Group_difference``)."""
        return cls(m for m in group1._members if m not in group2._members)

    def Free(self) -> None:
        """Release the group: the handle becomes ``GROUP_NULL`` (the predefined groups stay)."""
        if self is not GROUP_NULL and self is not GROUP_EMPTY:
            self._members = None


def _ranges(ranges: Sequence[Sequence[Any]]) -> list[int]:
    """The ranks of ``(first, last, stride)`` triples, last included; numbers are taken as C ints, as mpi4py does
    (``(size - 1) / 1`` is rank ``size - 1``)."""
    ranks = []
    for first, last, stride in ranges:
        first, last, stride = int(first), int(last), int(stride)
        ranks.extend(range(first, last + (1 if stride > 0 else -1), stride))
    return ranks


GROUP_EMPTY = Group(())
GROUP_NULL = Group()
