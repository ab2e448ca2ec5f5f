"""Values a program passes that MPI accepts but that are probably not what the student meant.

* **A user op declared commutative that is not.** ``MPI.Op.Create(f, commute=True)`` lets the
  library combine the ranks' values in any order: a tree reduction pairs them differently from
  a ring, and a real MPI picks the algorithm by message size and rank count, so the result
  changes with the size of the run. Under the checker every application of such an op on the
  actual data is evaluated both ways, ``f(a, b)`` and ``f(b, a)``; if they differ, the op is
  not commutative on this data.
* **-1 landing on PROC_NULL.** In MPICH (and mpi4py built on it) ``MPI.PROC_NULL`` is -1, so
  ``comm.Send(buf, dest=rank - 1)`` on rank 0 is silently a send to nobody; under Open MPI,
  where ``PROC_NULL`` is -2, the same line is an invalid-rank error. When a peer of -1 reaches
  a point-to-point call and neither the call's line nor an assignment of the names it uses
  mentions ``PROC_NULL``, the value was computed, not meant: the checker says so.
"""

from __future__ import annotations

import ast
import linecache
import re
from typing import Any

import numpy as np

from mpisim.compat.check.findings import Finding, site_of

#: mpisim's (MPICH's) MPI_PROC_NULL.
PROC_NULL = -1


class ValueChecks:
    """The op and the peer checks (see the module docstring); each reports a line of the program once (its first rank)."""

    def __init__(self, findings: list[Finding]) -> None:
        self.findings = findings
        self.seen: set[tuple[str, str, int]] = set()
        self._assignments: dict[str, dict[str, list[str]]] = {}  # file -> name -> source of its assignments

    def _once(self, kind: str, ctx: Any) -> tuple[str, int] | None:
        file, line = site_of(ctx)
        key = (kind, file, line)
        if key in self.seen:
            return None
        self.seen.add(key)
        return file, line

    # ---- user ops

    def op_applied(self, ctx: Any, name: str, a: Any, b: Any, ab: Any, ba: Any) -> None:
        """A commutative user op *name* gave *ab* = a op b and *ba* = b op a on the same operands."""
        if _same(ab, ba):
            return
        site = self._once("op", ctx)
        if site is None:
            return
        self.findings.append(Finding(
            "op-not-commutative", ctx.rank, site[0], site[1], ctx.env.now,
            f"the user op {name} was created with commute=True, but on this data op(a, b) = {_short(ab)} and "
            f"op(b, a) = {_short(ba)} (a = {_short(a)}, b = {_short(b)}): the library may combine the ranks' "
            "values in any order, so the result depends on the algorithm MPI picks (rank count, message size). "
            "Create it with commute=False."))

    # ---- peers

    def peer(self, ctx: Any, call: str, name: str, value: int) -> None:
        """A point-to-point *call* got ``name=value``; report -1 that does not look meant as PROC_NULL."""
        if value != PROC_NULL:
            return
        frame = ctx.runner.site
        origin = ctx.runner.origin()
        if origin is None or self._meant(origin[0], origin[1], frame):
            return
        site = self._once("peer", ctx)
        if site is None:
            return
        self.findings.append(Finding(
            "peer-is-proc-null", ctx.rank, site[0], site[1], ctx.env.now,
            f"{call}({name}=-1): -1 is MPI.PROC_NULL under MPICH, so this call silently does nothing "
            "(under Open MPI, where PROC_NULL is -2, it is an invalid rank); the value was computed (e.g. rank - 1 "
            "on rank 0), not written as PROC_NULL. If the rank has no neighbour there, write MPI.PROC_NULL; if the "
            "ranks form a ring, use (rank - 1) % size."))

    def _meant(self, file: str, line: int, frame: Any) -> bool:
        """True if the call's statement, or an assignment of a name it uses, mentions PROC_NULL."""
        text = _statement(file, line)
        if "PROC_NULL" in text:
            return True
        names = self._names_assigned(file)
        return any("PROC_NULL" in source for word in set(re.findall(r"[A-Za-z_]\w*", text))
                   for source in names.get(word, ()))

    def _names_assigned(self, file: str) -> dict[str, list[str]]:
        if file not in self._assignments:
            table: dict[str, list[str]] = {}
            try:
                source = "".join(linecache.getlines(file))
                tree = ast.parse(source)
            except (SyntaxError, ValueError):
                tree = None
            for node in ast.walk(tree) if tree is not None else ():
                if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    text = ast.get_source_segment(source, node.value) or ""
                    for target in targets:
                        for leaf in ast.walk(target):
                            if isinstance(leaf, ast.Name):
                                table.setdefault(leaf.id, []).append(text)
            self._assignments[file] = table
        return self._assignments[file]


def _statement(file: str, line: int) -> str:
    """The source of the statement starting at *line* (continued while its brackets are open)."""
    text, depth = "", 0
    for n in range(line, line + 10):
        piece = linecache.getline(file, n)
        if not piece:
            break
        text += piece
        depth += piece.count("(") + piece.count("[") - piece.count(")") - piece.count("]")
        if depth <= 0:
            break
    return text


def _same(x: Any, y: Any) -> bool:
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        x, y = np.asarray(x), np.asarray(y)
        return x.shape == y.shape and bool(np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"))
    try:
        return bool(x == y)
    except Exception:  # an object whose == is not a truth value: compare what it shows
        return repr(x) == repr(y)


def _short(x: Any) -> str:
    """A value as a student reads it: an array's first three elements, six significant digits."""
    if isinstance(x, np.ndarray):
        flat = x.ravel()
        shown = ", ".join(f"{v:.6g}" if isinstance(v, float) else repr(v) for v in flat[:3].tolist())
        return f"[{shown}{', ...' if flat.size > 3 else ''}]"
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."
