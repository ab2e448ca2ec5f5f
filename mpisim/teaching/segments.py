"""Pipelined algorithms in an explanation: segments of a few elements, so the pipeline shows.

A pipelined algorithm cuts its buffer into segments of hundreds of KiB, so the few elements
of an explanation would travel as one segment; explain runs it with segments of a few
elements (:func:`segment_size`), so the pipeline shows.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from mpisim.collectives import allreduce as allreduce_module
from mpisim.collectives import bcast as bcast_module


@dataclass(frozen=True)
class Segmented:
    """An algorithm that cuts its buffer into segments of a module-level size.

    ``constant`` names the size (bytes) in ``module``; ``pieces`` is how many segments explain
    aims for; ``k_and_s`` gives (k, s) of its cost formula for a call of n bytes and segments
    of *seg* bytes, as its cost function computes them.
    """

    module: Any
    constant: str
    pieces: int
    k_and_s: Any


SEGMENTED = {
    ("bcast", "pipelined_chain"): Segmented(bcast_module, "CHAIN_SEGMENT", 4,
                                            lambda n, seg: (max(1, math.ceil(n / seg)), seg)),
    ("allreduce", "parameter_server"): Segmented(allreduce_module, "PS_SEGMENT", 4,
                                                 lambda n, seg: (max(1, math.ceil(n / seg)), min(seg, n))),
    ("allreduce", "double_binary_tree"): Segmented(allreduce_module, "DBT_SEGMENT", 2,
                                                   lambda n, seg: (max(1, math.ceil(n / 2 / seg)), min(seg, n / 2))),
}


@contextmanager
def segment_size(collective: str, algorithm: str, nbytes: int | None) -> Iterator[None]:
    """Run the block with *algorithm*'s segment size set to *nbytes* (None: unchanged), then restore it.

    Segment sizes are library constants of hundreds of KiB, far beyond the few elements an
    explanation shows, so a pipelined algorithm would run as one segment and never pipeline.
    The algorithm and its cost function read the constant when called, so setting it for the
    duration of one explanation shows the pipeline without changing the algorithm.
    """
    seg = SEGMENTED.get((collective, algorithm))
    if seg is None or nbytes is None:
        yield
        return
    module = seg.module
    saved = getattr(module, seg.constant)
    setattr(module, seg.constant, nbytes)
    try:
        yield
    finally:
        setattr(module, seg.constant, saved)


def chosen_segment(collective: str, algorithm: str, count: int, itemsize: int = 8) -> int | None:
    """The segment size (bytes, whole elements) that cuts *count* elements into the algorithm's
    ``pieces`` segments (per tree for the double binary tree); None for an unsegmented algorithm."""
    seg = SEGMENTED.get((collective, algorithm))
    if seg is None or count < 2:
        return None
    per = count / 2 if algorithm == "double_binary_tree" else count
    return max(1, math.ceil(per / seg.pieces)) * itemsize
