"""What a message carries, decoded from a second run on encoded inputs, and numpy's reference.

Rank r's element i becomes ``i * 2^p + 2^r``. A sum of such values over a set S of ranks (each
counted once, as any correct reduction does) is ``|S| * i * 2^p + sum(2^r)``: its low p bits name
the ranks in S and the rest gives i. Data-movement collectives carry single values, which decode
the same way. Timing depends on byte counts only, so both runs send the same messages at the same
times, and the printed values come from the first run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mpisim.workloads.collective import REDUCING, expected_output, reduce_in_rank_order


def encode(p: int, count: int) -> list[np.ndarray]:
    """Return the encoded inputs: rank r's element i is ``i * 2^p + 2^r``."""
    return [np.arange(count, dtype=np.int64) * (1 << p) + (1 << r) for r in range(p)]


def decode(value: int, p: int, count: int | None = None) -> tuple[frozenset[int], int] | None:
    """Return (ranks summed into *value*, element index), or None if it is not such a sum.

    With *count*, an element index at or beyond it is not a sum of inputs either.
    """
    mask = int(value) & ((1 << p) - 1)
    ranks = frozenset(r for r in range(p) if mask >> r & 1)
    high = int(value) >> p
    if not ranks or high % len(ranks) or (count is not None and high // len(ranks) >= count):
        return None
    return ranks, high // len(ranks)


def ranks_text(ranks: frozenset[int]) -> str:
    """``{0,1,2,5}`` -> ``"0-2,5"``."""
    ordered = sorted(ranks)
    runs: list[list[int]] = []
    for r in ordered:
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    return ",".join(f"{run[0]}-{run[-1]}" if len(run) > 2 else ",".join(map(str, run)) for run in runs)


def indices_text(indices: Sequence[int], count: int | None = None) -> str:
    if count is not None and list(indices) == list(range(count)):
        return "all"
    runs: list[list[int]] = []
    for i in indices:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ",".join(f"{run[0]}..{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)


def describe_pieces(pieces: Sequence[tuple[frozenset[int], int] | None]) -> str:
    """Describe what a message carries: ``x0[0..1]``, ``(x0+x1)[2]``, ``Σx{0-3}[1]``, one run at a time."""
    parts: list[str] = []
    run: list[Any] = []

    def flush() -> None:
        if not run:
            return
        ranks, first, last = run
        if ranks is None:
            parts.append("?")
        else:
            if len(ranks) == 1:
                who = f"x{next(iter(ranks))}"
            elif len(ranks) <= 3:
                who = "(" + "+".join(f"x{r}" for r in sorted(ranks)) + ")"
            else:
                who = f"Σx{{{ranks_text(ranks)}}}"
            parts.append(f"{who}[{first}]" if first == last else f"{who}[{first}..{last}]")

    for piece in pieces:
        ranks, index = piece if piece is not None else (None, None)
        if run and ranks is not None and run[0] == ranks and index == run[2] + 1:
            run[2] = index
            continue
        flush()
        run[:] = [ranks, index, index]
    flush()
    return " ".join(parts) if parts else "nothing (a zero-byte message)"




def reference(collective: str, inputs: Sequence[np.ndarray], root: int = 0) -> list[np.ndarray | None]:
    """Return what each rank must get back (op = sum), computed with numpy; None where MPI returns nothing.

    The same definition the collective workload verifies its results against.
    """
    reduction = reduce_in_rank_order("sum", inputs) if collective in REDUCING else None
    return [expected_output(collective, "sum", root, rank, inputs, reduction) for rank in range(len(inputs))]
