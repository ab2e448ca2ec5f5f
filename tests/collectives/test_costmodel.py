"""Simulated times against the closed forms, on the network the formulas describe.

On the ``analytic`` model over a ``full`` topology (every pair of ranks has its own
full-duplex link with the same alpha and beta, no contention), with eager messages, zero
overheads and a count that every block split divides evenly, each algorithm's simulated time
-- last rank's exit minus first rank's entry, all ranks entering at the same instant -- must
equal its registered cost function wherever the algorithm declares the formula exact. The
textbook formulas of Thakur, Rabenseifner & Gropp (2005) and Chan et al. (2007) are also
checked on their own, written out here rather than read from the registry. Finally, sharing
bandwidth can only slow things down: the ``fairshare`` model is never faster than ``analytic``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mpisim.collectives import registry
from mpisim.mpi import SizePayload
from tests.collectives.helpers import elapsed, run_collective

ALPHA, BANDWIDTH, GAMMA = 1.5e-6, 1e9, 2.5e-10
BETA = 1 / BANDWIDTH
EAGER = 2**62  # every message eager: the closed forms assume no rendezvous handshake
RANKS = (2, 3, 4, 5, 7, 8, 16, 32)
WHOLE_ARRAY = frozenset({"allgather", "gather"})  # nccl-tests size: count per rank x ranks


def algo_id(algo: registry.Algorithm) -> str:
    return f"{algo.collective}-{algo.name}"


def per_rank_count(p: int) -> int:
    """float32 elements per rank: p * 2^14, so blocks, halves and segments of it divide evenly."""
    return p * 2**14


def simulate(target: registry.Algorithm | str, p: int, model: str = "analytic") -> tuple[float, int]:
    """Return (collective time, bytes n in the cost functions' convention) of one size-only call."""
    collective = target.collective if isinstance(target, registry.Algorithm) else target.partition("/")[0]
    count = per_rank_count(p)
    inputs = None if collective == "barrier" else [SizePayload(count, np.float32) for _ in range(p)]
    _, world = run_collective(target, inputs, p, root=p - 1, alpha=ALPHA, bandwidth=BANDWIDTH, model=model,
                              reduce_cost=GAMMA, eager_limit_inter=EAGER, eager_limit_intra=EAGER)
    records = world.tracer.collectives
    assert sorted(r.rank for r in records) == list(range(p))
    nbytes = 0 if collective == "barrier" else count * 4
    n = nbytes * p if collective in WHOLE_ARRAY else nbytes
    assert {r.nbytes for r in records} == {n}
    return elapsed(world), n


EXACT_CASES = [
    (a, p) for a in registry.available() for p in RANKS if a.cost is not None and a.allows(p) and a.exact(p)
]


def test_every_collective_has_an_exact_case():
    """Each of the nine collectives has an algorithm held to its closed form (guards the case list)."""
    assert {a.collective for a, _ in EXACT_CASES} == set(registry.COLLECTIVES)


@pytest.mark.parametrize(("algo", "p"), EXACT_CASES,
                         ids=lambda v: algo_id(v) if isinstance(v, registry.Algorithm) else f"p{v}")
def test_simulation_equals_registered_cost(algo, p):
    t, n = simulate(algo, p)
    assert t == pytest.approx(algo.cost(p, n, ALPHA, BETA, GAMMA), rel=1e-9)


@pytest.mark.parametrize("algo", registry.available(), ids=algo_id)
def test_fairshare_is_never_faster_than_analytic(algo):
    """With the same alpha and beta per link, sharing bandwidth never speeds a collective up."""
    ran = 0
    for p in (4, 6, 8):
        if algo.allows(p):
            analytic, _ = simulate(algo, p, "analytic")
            fair, _ = simulate(algo, p, "fairshare")
            assert fair >= analytic * (1 - 1e-12), f"p={p}: fairshare {fair} < analytic {analytic}"
            ran += 1
    assert ran >= 2


# --- The textbook formulas, written out independently of the registry's cost functions.

def lg(p: int) -> float:
    return math.log2(p)


@pytest.mark.parametrize("p", [2, 3, 4, 5, 7, 8, 16])
def test_ring_allreduce_formula(p):
    t, n = simulate("allreduce/ring", p)
    assert t == pytest.approx(2 * (p - 1) * ALPHA + 2 * (p - 1) / p * n * BETA + (p - 1) / p * n * GAMMA, rel=1e-9)


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_recursive_doubling_allreduce_formula(p):
    t, n = simulate("allreduce/recursive_doubling", p)
    assert t == pytest.approx(lg(p) * (ALPHA + n * BETA + n * GAMMA), rel=1e-9)


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_rabenseifner_allreduce_formula(p):
    t, n = simulate("allreduce/rabenseifner", p)
    assert t == pytest.approx(2 * lg(p) * ALPHA + 2 * (p - 1) / p * n * BETA + (p - 1) / p * n * GAMMA, rel=1e-9)


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_binomial_bcast_formula(p):
    """⌈lg p⌉(α+nβ); held at powers of two, where the multi-port tree is as deep as the formula says."""
    t, n = simulate("bcast/binomial", p)
    assert t == pytest.approx(math.ceil(lg(p)) * (ALPHA + n * BETA), rel=1e-9)


@pytest.mark.parametrize("p", [2, 3, 4, 5, 7, 8, 16])
def test_ring_allgather_formula(p):
    """(p-1)α + ((p-1)/p)nβ with n the bytes gathered in total."""
    t, n = simulate("allgather/ring", p)
    assert n == p * per_rank_count(p) * 4
    assert t == pytest.approx((p - 1) * ALPHA + (p - 1) / p * n * BETA, rel=1e-9)
