"""mpisim's collectives against real MPICH, bit for bit.

``golden.json`` holds what MPICH 5 returned on every rank for each case of
:mod:`tests.mpich.cases` (every algorithm that names an MPICH source; p in {3, 4, 5, 8};
float32 and float64; counts below p, divisible by p and not; every root), produced by
``python -m tests.mpich.generate``. Here mpisim runs the same cases with the same inputs
and must produce the same bytes on every rank: same summation order, same block cuts.
Cases MPICH refuses (it would silently run another algorithm) are skipped; cases mpisim's
algorithm does not allow at that p fail, because MPICH runs them.

When ``mpiexec`` and mpi4py are installed, one case set per collective is also re-run
against the live MPICH, so the golden file cannot drift from the library it claims to be.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from mpisim.collectives import registry
from tests.collectives.helpers import as_array, run_collective
from tests.mpich.cases import DTYPES, MPICH_NAMES, RANKS, case_key, counts_for, digest, rank_input, roots_for

GOLDEN = json.loads((Path(__file__).with_name("golden.json")).read_text())
CASES: dict[str, object] = GOLDEN["cases"]


def mpisim_digests(collective: str, algorithm: str, p: int, dtype: str, count: int, root: int) -> list:
    inputs = [rank_input(collective, p, r, count, dtype) for r in range(p)]
    out, _ = run_collective(f"{collective}/{algorithm}", inputs, p, root=root)
    results = [as_array(x) for x in out]
    if collective == "bcast":
        results = [np.asarray(x) for x in results]
    return [digest(None if x is None else np.asarray(x, dtype=dtype)) for x in results]


@pytest.mark.parametrize(("collective", "algorithm"), sorted(MPICH_NAMES), ids=[f"{c}/{a}" for c, a in sorted(MPICH_NAMES)])
@pytest.mark.parametrize("p", RANKS, ids=lambda p: f"p{p}")
def test_mpisim_equals_mpich_bit_for_bit(collective, algorithm, p):
    mine = {k: v for k, v in CASES.items() if k.startswith(f"{collective}/{algorithm}/p{p}/")}
    assert mine, "golden.json has no case for this algorithm: run python -m tests.mpich.generate"
    if all(v == "refused" for v in mine.values()):
        pytest.skip(f"MPICH does not run {collective}/{algorithm} on {p} ranks")
    assert registry.get(collective, algorithm).allows(p), f"MPICH runs {collective}/{algorithm} on {p} ranks"
    compared, mismatches = 0, []
    for dtype in DTYPES:
        for count in counts_for(collective, p):
            for root in roots_for(collective, p):
                key = case_key(collective, algorithm, p, dtype, count, root)
                expected = CASES[key]
                if expected == "refused":
                    continue
                got = mpisim_digests(collective, algorithm, p, dtype, count, root)
                compared += 1
                if got != expected:
                    ranks = [r for r in range(p) if got[r] != expected[r]]
                    mismatches.append(f"{key}: ranks {ranks} differ")
    assert not mismatches, "\n".join(mismatches)
    assert compared > 0


def test_golden_covers_every_algorithm_that_names_an_mpich_source():
    """A new algorithm citing an MPICH file must be added to the comparison (or listed as left out)."""
    left_out = {("gather", "linear"), ("scatter", "linear"), ("allreduce", "reduce_bcast"),
                ("reduce_scatter", "reduce_then_scatter"), ("barrier", "dissemination"), ("barrier", "binomial")}
    citing = {(a.collective, a.name) for a in registry.available() if "MPICH" in a.reference}
    assert citing - left_out == set(MPICH_NAMES)


def test_the_smallest_ring_case_is_mpichs():
    """The issue's example, spelled out: MPICH's ring allreduce gives [1, 0, 0] on every rank."""
    out, _ = run_collective("allreduce/ring", [np.ones(3), np.full(3, 1e16), np.full(3, -1e16)], 3)
    for x in out:
        np.testing.assert_array_equal(as_array(x), [1.0, 0.0, 0.0])


LIVE = [("allreduce", "ring", 5), ("allreduce", "rabenseifner", 5), ("reduce_scatter", "recursive_halving", 3),
        ("bcast", "scatter_recursive_doubling_allgather", 5)]


@pytest.mark.slow  # starts mpiexec for every case
@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec: pip install mpich mpi4py to compare live")
@pytest.mark.parametrize(("collective", "algorithm", "p"), LIVE, ids=[f"{c}/{a}/p{p}" for c, a, p in LIVE])
def test_golden_file_matches_the_installed_mpich(collective, algorithm, p):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    from tests.mpich.generate import run_case_set

    assert run_case_set(collective, algorithm, p) == {
        k: v for k, v in CASES.items() if k.startswith(f"{collective}/{algorithm}/p{p}/")}
