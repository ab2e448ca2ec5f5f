"""``MPI.Info``: key-value hints passed to window, communicator and file calls (``MPI.INFO_NULL``, ``Info.Create``).

Hints never change what a correct program computes; MPICH may use some to pick a faster
path. mpisim keeps them, so a program can set and read them back, and uses none.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mpisim.compat.unsupported import Strict


class Info(metaclass=Strict):
    """An info object: string keys to string values (``Set``, ``Get``, ``Delete``, ``Dup``, the dict protocol)."""

    def __init__(self, info: Info | None = None) -> None:
        self._items: dict[str, str] | None = None if info is None else info._items

    @classmethod
    def Create(cls, items: Any = None) -> Info:
        """A new, empty info object (or one holding *items*: a mapping or key-value pairs)."""
        info = cls()
        info._items = {}
        for key, value in dict(items or {}).items():
            info.Set(key, value)
        return info

    def Free(self) -> None:
        self._items = None

    def Dup(self) -> Info:
        return Info.Create(self._live())

    def _live(self) -> dict[str, str]:
        if self._items is None:
            raise ValueError("MPI.INFO_NULL holds no keys (MPI_ERR_INFO)")
        return self._items

    def Set(self, key: str, value: str) -> None:
        self._live()[str(key)] = str(value)

    def Get(self, key: str) -> str | None:
        return self._live().get(str(key))

    def Delete(self, key: str) -> None:
        try:
            del self._live()[str(key)]
        except KeyError:
            raise KeyError(key) from None

    def Get_nkeys(self) -> int:
        return len(self._live())

    def Get_nthkey(self, n: int) -> str:
        return list(self._live())[n]

    def __bool__(self) -> bool:
        return self._items is not None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Info) and (self._items is other._items or (self._items is not None
                                                                             and self._items == other._items))

    def __hash__(self) -> int:
        return id(self._items)

    def __len__(self) -> int:
        return 0 if self._items is None else len(self._items)

    def __contains__(self, key: object) -> bool:
        return self._items is not None and key in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._items or {}))

    def __getitem__(self, key: str) -> str:
        return self._live()[key]

    def __setitem__(self, key: str, value: str) -> None:
        self.Set(key, value)

    def __delitem__(self, key: str) -> None:
        self.Delete(key)

    def get(self, key: str, default: Any = None) -> Any:
        return (self._items or {}).get(key, default)

    def keys(self) -> list[str]:
        return list(self._items or {})

    def values(self) -> list[str]:
        return list((self._items or {}).values())

    def items(self) -> list[tuple[str, str]]:
        return list((self._items or {}).items())

    def __repr__(self) -> str:
        return "<mpi4py.MPI.Info>"


INFO_NULL = Info()


def Get_hw_resource_info() -> Info:
    """The hardware resources MPI knows of, as hints (``MPI_Get_hw_resource_info``, MPI 4.1).

    A new ``MPI.Info`` each call; MPICH 5.0.2, the library mpisim follows, reports no keys,
    so neither does mpisim.
    """
    return Info.Create()
