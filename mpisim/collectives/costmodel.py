"""Closed-form alpha-beta-gamma costs: the model every algorithm's cost function speaks.

Notation (Thakur, Rabenseifner & Gropp 2005): *p* ranks, *n* bytes, ``alpha`` seconds per
message, ``beta`` seconds per byte on the wire, ``gamma`` seconds per byte reduced. *n*
follows nccl-tests: the whole gathered array for allgather and reduce_scatter (and gather),
each rank's buffer for the others (for alltoall: the bytes each rank sends in total).

The network these formulas describe is the one mpisim's ``analytic`` model builds on a
``full`` topology: every pair of ranks has its own full-duplex link with the same alpha and
beta, and nothing is shared. A rank can send and receive at the same time (a ring step costs
one alpha + block*beta, not two). Algorithms whose textbook formula assumes a *single port*
per rank -- a root that sends to p-1 ranks one after another -- are registered with
``exact=never``: on a contention-free multi-port network the simulation is faster than the
formula, and on a shared network (``fairshare``, a star) the root's link serialises them.

Each algorithm's cost function sits next to the algorithm in its module, so the formula can
be read against the code; this module holds the shared helpers and :func:`predict`.
"""

from __future__ import annotations

import math

from mpisim.collectives import registry


def lg(p: int) -> float:
    """Return log2(p)."""
    return math.log2(p)


def ceil_lg(p: int) -> int:
    """Return ceil(log2(p)), the number of rounds of a binomial tree over p ranks (0 for p = 1)."""
    return (p - 1).bit_length()


def floor_lg(p: int) -> int:
    """Return floor(log2(p))."""
    return p.bit_length() - 1


def pof2_at_most(p: int) -> int:
    """Return the largest power of two <= p."""
    return 1 << floor_lg(p)


def predict(collective: str, algorithm: str, p: int, n: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Return the closed-form time of (*collective*, *algorithm*) on *p* ranks and *n* bytes.

    Raises ValueError if the algorithm has no cost function.
    """
    algo = registry.get(collective, algorithm)
    if algo.cost is None:
        raise ValueError(f"{collective} algorithm {algorithm!r} has no closed-form cost")
    return algo.cost(p, n, alpha, beta, gamma)
