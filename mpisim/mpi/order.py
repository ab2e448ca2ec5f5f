"""Reduction orders: a payload that records which partial results an algorithm forms, and in what order.

Floating-point addition is not associative: ``(a + b) + c`` and ``a + (b + c)`` may differ in
the last bit, so a float allreduce gives the bits of *its own* order of pairwise steps. To check
a real-float result bit for bit, mpisim needs that order, for any algorithm, without asking
the algorithm. It runs the algorithm once more on an :class:`OrderPayload`: a third payload
kind, beside real data and size-only, whose elements are *names of expressions* instead of
numbers. Rank r's input holds the leaf ``x_r`` in every element; each pairwise reduction the
algorithm makes (``combine``, ``accumulate``) names a new expression ``op(left, right)``, kept
in an :class:`Expressions` table. Messages, splits and joins move names exactly as they move
numbers. At the end, element i of a rank's result names the expression tree that rank
evaluated for element i, e.g. ``(x1 + (x2 + x0))`` for one block of a 3-rank ring.

**Why names, not numbers of the nominal dtype.** An order payload reports the nominal dtype and
count, so ``nbytes`` -- and with it every protocol choice, chunk size, auto selection and
simulated time -- is that of the real run, and arrivals (which an ``ANY_SOURCE`` algorithm
reduces in) happen in the same order. Only the element storage is an int32 name.

**Hash-consing.** Names carry no element index: the leaf ``x_r`` stands for rank r's value at
whatever element it sits in, since reductions are element-wise. So every element of a block
that was reduced the same way shares one name, and the table grows with the number of
distinct partial results (about p^2 for a ring), not with the vector length.

:meth:`Expressions.evaluate` then replays the trees on real inputs with the op's own numpy
function, rounding to the dtype after every pairwise step exactly as
:class:`~mpisim.mpi.payload.DataPayload` does, so the replay has the algorithm's bits.
"""

from __future__ import annotations

import heapq
import itertools
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from mpisim.mpi.ops import Op
from mpisim.mpi.payload import Payload

#: Element type of expression names.
NAME = np.dtype(np.int32)


class Expressions:
    """A hash-consed table of reduction expressions over the inputs of *ranks* ranks.

    Names ``0 .. ranks-1`` are the leaves ``x_r``; name ``ranks`` is the constant zero that
    :meth:`OrderPayload.like` fills with; every later name is ``op(left, right)`` of two
    earlier ones, so a child's name is always smaller than its parent's.
    """

    def __init__(self, ranks: int) -> None:
        self.ranks = ranks
        self.zero = ranks
        self._ops: list[Op] = []
        # Node n is (op index, left, right); leaves have op index -1 (left = rank, or -1 for zero).
        self._op: list[int] = [-1] * (ranks + 1)
        self._left: list[int] = [*range(ranks), -1]
        self._right: list[int] = [-1] * (ranks + 1)
        self._known: dict[tuple[int, int, int], int] = {}

    def __len__(self) -> int:
        return len(self._op)

    def _op_index(self, op: Op) -> int:
        for i, known in enumerate(self._ops):
            if known is op:
                return i
        self._ops.append(op)
        return len(self._ops) - 1

    def _node(self, code: int, left: int, right: int) -> int:
        key = (code, left, right)
        name = self._known.get(key)
        if name is None:
            name = len(self._op)
            if name > np.iinfo(NAME).max:
                raise OverflowError(f"more than {np.iinfo(NAME).max} distinct partial results to name")
            self._known[key] = name
            self._op.append(code)
            self._left.append(left)
            self._right.append(right)
        return name

    def combine(self, op: Op, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Return the names of ``op(a[i], b[i])`` for every element i."""
        code = self._op_index(op)
        n = a.shape[0]
        if n == 0:
            return np.empty(0, NAME)
        # NOTE: a block reduced as one piece has one name throughout: skip the sort.
        if (a == a[0]).all() and (b == b[0]).all():
            return np.full(n, self._node(code, int(a[0]), int(b[0])), NAME)
        keys = a.astype(np.int64) << 32 | b.astype(np.int64)
        pairs, inverse = np.unique(keys, return_inverse=True)
        names = np.array([self._node(code, int(k) >> 32, int(k) & 0xFFFFFFFF) for k in pairs], NAME)
        return names[inverse.reshape(-1)]

    def format(self, name: int) -> str:
        """Return the expression *name* as text: ``((x0 + x1) + x2)``; ``max(x0, x1)`` for other ops."""
        code = self._op[name]
        if code < 0:
            return "0" if name == self.zero else f"x{self._left[name]}"
        op = self._ops[code]
        left, right = self.format(self._left[name]), self.format(self._right[name])
        symbol = {"sum": "+", "prod": "*"}.get(op.name)
        return f"({left} {symbol} {right})" if symbol else f"{op.name}({left}, {right})"

    def leaves(self, name: int) -> list[int]:
        """Return the ranks whose inputs expression *name* combines, left to right (zeros left out)."""
        if self._op[name] < 0:
            return [] if name == self.zero else [self._left[name]]
        return self.leaves(self._left[name]) + self.leaves(self._right[name])

    def evaluate(self, requests: Sequence[tuple[np.ndarray, np.ndarray]], inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Replay expressions on real data: one result per request ``(names, positions)``.

        Element j of a request's result is expression ``names[j]`` evaluated at element
        ``positions[j]`` of the *inputs* (one array per rank, all of one dtype), with each
        pairwise step computed by the op and rounded to the dtype, as a real-data run does.

        Every node is evaluated once, only at the positions where some requested tree uses
        it (its *need set*), and dropped once its parents are done: the work is about the
        number of pairwise steps the algorithm made per element, times the vector length.
        """
        dtype = inputs[0].dtype if inputs else np.dtype(np.float64)
        out = [np.empty(names.shape[0], dtype) for names, _ in requests]
        wanted: dict[int, list[tuple[int, slice | np.ndarray]]] = defaultdict(list)  # name -> (request, its indices)
        pending: dict[int, list[np.ndarray]] = defaultdict(list)  # name -> positions its users need (sorted)
        same: dict[int, int] = {}  # request -> an earlier identical one (every rank of an allreduce, usually)
        for i, (names, positions) in enumerate(requests):
            twin = next((j for j in range(i) if j not in same and _equal(requests[j], (names, positions))), None)
            if twin is not None:
                same[i] = twin
                continue
            if names.shape[0] == 0:
                continue
            for name, group in _groups(names):
                wanted[name].append((i, group))
                pending[name].append(positions[group])
        # Top-down: parents have larger names than children, so a max-heap visits every user
        # of a node before the node and its need set is complete when popped.
        need: dict[int, np.ndarray] = {}
        users: dict[int, int] = defaultdict(int)
        heap = [-name for name in pending]
        heapq.heapify(heap)
        while heap:
            name = -heapq.heappop(heap)
            if name in need:
                continue
            need[name] = _union(pending.pop(name))
            if self._op[name] >= 0:
                for child in (self._left[name], self._right[name]):
                    if child not in pending:
                        heapq.heappush(heap, -child)
                    pending[child].append(need[name])
                    users[child] += 1
        # Bottom-up: evaluate in name order, hand values to requests, free what nobody needs.
        values: dict[int, np.ndarray] = {}
        for name in sorted(need):
            where = need[name]
            code = self._op[name]
            if code < 0:
                rank = self._left[name]
                value = np.zeros(where.shape[0], dtype) if rank < 0 else inputs[rank][_locate(None, where)]
            else:
                children = (self._left[name], self._right[name])
                args = [values[child][_locate(need[child], where)] for child in children]
                for child in children:
                    users[child] -= 1
                    if users[child] == 0:
                        del values[child]
                value = np.asarray(self._ops[code](args[0], args[1]), dtype=dtype)
            for i, group in wanted.get(name, ()):
                out[i][group] = value[_locate(where, requests[i][1][group])]
            if users[name]:
                values[name] = value
        for i, twin in same.items():
            out[i] = out[twin].copy()
        return out


def _groups(names: np.ndarray) -> list[tuple[int, slice | np.ndarray]]:
    """Return (name, where it occurs) pairs: runs of one name as slices, or index arrays when names are scattered."""
    starts = np.flatnonzero(names[1:] != names[:-1]) + 1
    if starts.shape[0] < max(64, names.shape[0] // 64):
        bounds = [0, *starts.tolist(), names.shape[0]]
        return [(int(names[a]), slice(a, b)) for a, b in itertools.pairwise(bounds)]
    order = np.argsort(names, kind="stable")
    cuts = np.flatnonzero(np.diff(names[order])) + 1
    return [(int(names[group[0]]), group) for group in np.split(order, cuts)]


def _locate(have: np.ndarray | None, want: np.ndarray) -> slice | np.ndarray:
    """Return an index into an array laid out over sorted positions *have* (None: all positions 0, 1, ...) that picks *want*.

    *want* is sorted and a subset of *have*. Blocks are usually contiguous, so this is
    usually a slice (a view, no copy), and a search only when the positions are scattered.
    """
    start = 0 if have is None else int(have[0]) if have.shape[0] else 0
    contiguous_have = have is None or have.shape[0] == 0 or int(have[-1]) - start + 1 == have.shape[0]
    if have is not None and have.shape == want.shape:
        return slice(None)  # a subset of the same size is the whole set
    if contiguous_have:
        if want.shape[0] and int(want[-1]) - int(want[0]) + 1 == want.shape[0]:
            return slice(int(want[0]) - start, int(want[-1]) - start + 1)
        return want - start
    return np.searchsorted(have, want)


def _equal(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> bool:
    return all(x is y or (x.shape == y.shape and np.array_equal(x, y)) for x, y in zip(a, b, strict=True))


def _union(parts: list[np.ndarray]) -> np.ndarray:
    """Return the sorted union of sorted, duplicate-free position arrays (often the same array many times)."""
    distinct: list[np.ndarray] = []
    for part in parts:
        if not any(part is d or (part.shape == d.shape and np.array_equal(part, d)) for d in distinct):
            distinct.append(part)
    if len(distinct) == 1:
        return distinct[0]
    merged = np.sort(np.concatenate(distinct), kind="stable")
    keep = np.empty(merged.shape, bool)
    keep[:1] = True
    np.not_equal(merged[1:], merged[:-1], out=keep[1:])
    return merged[keep]


class OrderPayload(Payload):
    """A payload of expression names standing for *count* elements of *dtype* (see the module docstring).

    Immutable, like a read-only data payload: reductions return new payloads, and blocks are
    views that nobody writes into.
    """

    __slots__ = ("names", "table")

    def __init__(self, names: np.ndarray, dtype: np.dtype, table: Expressions) -> None:
        self.names = names
        self.count = names.shape[0]
        self.dtype = np.dtype(dtype)
        self.table = table

    @classmethod
    def leaf(cls, table: Expressions, rank: int, count: int, dtype: np.dtype) -> OrderPayload:
        """Return rank *rank*'s input: the leaf ``x_rank`` in each of *count* elements."""
        return cls(np.full(count, rank, NAME), dtype, table)

    def slice(self, start: int, stop: int) -> OrderPayload:
        return OrderPayload(self.names[start:stop], self.dtype, self.table)

    def combine(self, other: Payload, op: Op) -> OrderPayload:
        if other.count != self.count:
            raise ValueError(f"cannot combine payloads of {self.count} and {other.count} elements")
        return OrderPayload(self.table.combine(op, self.names, other.names), self.dtype, self.table)  # type: ignore[attr-defined]

    @classmethod
    def _concat(cls, parts: Sequence[Payload]) -> OrderPayload:
        first: OrderPayload = parts[0]  # type: ignore[assignment]
        if len(parts) == 1:
            return first
        names = np.concatenate([p.names for p in parts])  # type: ignore[attr-defined]
        return OrderPayload(names, first.dtype, first.table)

    def copy(self) -> OrderPayload:
        return self  # names are never written into, so a copy would be the same value

    def like(self, count: int) -> OrderPayload:
        return OrderPayload(np.full(count, self.table.zero, NAME), self.dtype, self.table)

    def __repr__(self) -> str:
        return f"OrderPayload({self.count} x {self.dtype}, {np.unique(self.names).size} expressions)"
