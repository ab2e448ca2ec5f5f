"""Pipeline schedules: the order in which one stage runs its forward and backward passes.

A pipeline of *P* stages trains on *m* micro-batches per iteration. Each stage runs, in a fixed
order, a forward pass ``F`` and a backward pass ``B`` of every micro-batch; a forward needs the
previous stage's forward of the same micro-batch, a backward the next stage's backward. The
order decides how long stages sit idle (the *bubble*) and how many micro-batches' activations
a stage holds at once. mpisim does not compute the bubble from a formula: each stage runs its
list, waits for its inputs as messages, and the idle time emerges (on an ideal network 1F1B's
bubble is ``(P - 1) / (m + P - 1)`` of the pipeline's time, which the tests check).

* ``gpipe`` (Huang et al. 2019): all forwards, then all backwards. Holds m micro-batches.
* ``1f1b`` (PipeDream-Flush, Narayanan et al. 2021): stage s runs ``P - s - 1`` warm-up
  forwards, then alternates one forward and one backward, then drains the backwards. Same
  bubble as GPipe, at most P micro-batches held.
* ``interleaved`` (Megatron-LM's interleaved 1F1B): each stage holds *v* model chunks (virtual
  stages ``k P + s``), which cuts the bubble by v at the cost of v times more pipeline
  messages. Micro-batches go through the chunks in groups of P, so m must be a multiple of P.

An :class:`Op` is ``(kind, micro_batch, chunk)``. :func:`schedule` returns a stage's list.

    >>> [f"{op.kind}{op.micro}" for op in schedule("1f1b", stage=0, stages=2, micro_batches=3)]
    ['F0', 'F1', 'B0', 'F2', 'B1', 'B2']
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["SCHEDULES", "Op", "schedule", "virtual_stage"]

SCHEDULES = ("gpipe", "1f1b", "interleaved")


class Op(NamedTuple):
    """One pass of a stage: ``kind`` F or B, of micro-batch ``micro``, through model chunk ``chunk``."""

    kind: str
    micro: int
    chunk: int


def virtual_stage(stage: int, chunk: int, stages: int) -> int:
    """The position in the whole pipeline of *chunk* on *stage*: chunk k of stage s is ``k P + s``."""
    return chunk * stages + stage


def schedule(name: str, stage: int, stages: int, micro_batches: int, chunks: int = 1) -> list[Op]:
    """Return the passes stage *stage* of *stages* runs, in order, for *micro_batches* micro-batches.

    Raises ValueError for an unknown schedule or an interleaved one whose micro-batch count is
    not a multiple of the stage count.
    """
    m, p = micro_batches, stages
    if name == "gpipe":
        return [Op("F", i, 0) for i in range(m)] + [Op("B", i, 0) for i in range(m)]
    if name == "1f1b":
        warmup = min(p - stage - 1, m)
        ops = [Op("F", i, 0) for i in range(warmup)]
        for i in range(m - warmup):
            ops += [Op("F", warmup + i, 0), Op("B", i, 0)]
        return ops + [Op("B", i, 0) for i in range(m - warmup, m)]
    if name == "interleaved":
        if m % p:
            raise ValueError(f"the interleaved schedule needs micro-batches ({m}) to be a multiple of stages ({p})")
        total = m * chunks

        def forward(i: int) -> Op:
            group, within = divmod(i, p * chunks)
            return Op("F", group * p + within % p, within // p)

        def backward(i: int) -> Op:
            group, within = divmod(i, p * chunks)
            return Op("B", group * p + within % p, chunks - 1 - within // p)

        warmup = total if m == p else min(total, (p - stage - 1) * 2 + (chunks - 1) * p)
        ops = [forward(i) for i in range(warmup)]
        for i in range(total - warmup):
            ops += [forward(warmup + i), backward(i)]
        return ops + [backward(i) for i in range(total - warmup, total)]
    raise ValueError(f"unknown schedule {name!r}; known: {', '.join(SCHEDULES)}")
