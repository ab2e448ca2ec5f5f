"""Every registered algorithm of every collective gives numpy's answer, on every rank.

The tests loop over the registry, so an algorithm is covered the moment it is registered.
Integer data makes the comparison exact: wrap-around int32 addition is associative, so every
reduction order gives the same bits. Algorithms that accept non-commutative ops are also run
with ops that expose any reordering: ``first`` and ``last`` (which pick the ends of the rank
order) and ``affine`` (composition of affine maps mod 2^16, which changes under any
reordering). Float32 results are held to numpy within p * eps.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from mpisim.collectives import registry
from mpisim.mpi import MAX, MIN, SUM, Op
from mpisim.network.topology import FabricSpec
from tests.collectives.helpers import (
    AFFINE,
    FIRST,
    LAST,
    REDUCING,
    ROOTED,
    as_array,
    reference,
    run_collective,
)
from tests.conftest import make_world, run_program

ALGORITHMS = registry.available()
DATA_ALGORITHMS = [a for a in ALGORITHMS if a.collective != "barrier"]
BARRIERS = registry.available("barrier")


def algo_id(algo: registry.Algorithm) -> str:
    return f"{algo.collective}-{algo.name}"


def rank_counts(algo: registry.Algorithm, hi: int = 17) -> list[int]:
    """The rank counts 1..hi the algorithm claims to handle."""
    return [p for p in range(1, hi + 1) if algo.allows(p)]


def ops_for(algo: registry.Algorithm) -> list[Op]:
    """The ops to try: built-ins, plus order-revealing ones where the algorithm allows them."""
    if algo.collective not in REDUCING:
        return [SUM]
    if "commutative" in algo.requires:
        return [SUM, MAX, MIN]
    return [SUM, MAX, MIN, FIRST, LAST, AFFINE]


def check_outputs(algo: registry.Algorithm, outputs: list, expected: list, context: str) -> None:
    assert len(outputs) == len(expected)
    for rank, (out, want) in enumerate(zip(outputs, expected, strict=True)):
        got = as_array(out)
        where = f"{algo_id(algo)} {context}, rank {rank}"
        if want is None:
            assert got is None, f"{where}: expected None, got {got!r}"
            continue
        assert got is not None, f"{where}: got None"
        assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != {want.dtype}"
        np.testing.assert_array_equal(got, want, err_msg=where)


def test_order_revealing_ops_are_associative_and_not_commutative():
    """The test ops must be able to fail: reversing the operands changes the answer."""
    rng = np.random.default_rng(1)
    x, y, z = (rng.integers(0, 2**32, 50, dtype=np.int64) for _ in range(3))
    for op in (FIRST, LAST, AFFINE):
        np.testing.assert_array_equal(op(op(x, y), z), op(x, op(y, z)))
        assert not np.array_equal(op(x, y), op(y, x))
    xs = [rng.integers(0, 2**32, 20, dtype=np.int64) for _ in range(5)]
    assert not np.array_equal(reference("allreduce", xs, AFFINE)[0], reference("allreduce", xs[::-1], AFFINE)[0])


@pytest.mark.parametrize("algo", DATA_ALGORITHMS, ids=algo_id)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_matches_numpy(algo, data):
    """Random p, count (0, 1, below p, not divisible by p), root and op: numpy's answer on every rank."""
    p = data.draw(st.sampled_from(rank_counts(algo, 12)), label="p")
    count = data.draw(st.integers(0, 3 * p + 4), label="count")
    root = data.draw(st.integers(0, p - 1), label="root") if algo.collective in ROOTED else 0
    op = data.draw(st.sampled_from(ops_for(algo)), label="op")
    dtype = np.int64 if op is AFFINE else np.int32
    elements = st.integers(0, 2**32 - 1) if op is AFFINE else None
    rows = data.draw(arrays(dtype, (p, count), elements=elements), label="inputs")
    inputs = [rows[r].copy() for r in range(p)]
    outputs, _ = run_collective(algo, inputs, p, op=op, root=root)
    check_outputs(algo, outputs, reference(algo.collective, inputs, op, root), f"p={p} count={count} root={root} op={op.name}")


@pytest.mark.parametrize(
    ("algo", "p"), [(a, p) for a in DATA_ALGORITHMS for p in rank_counts(a)], ids=lambda v: algo_id(v) if isinstance(v, registry.Algorithm) else f"p{v}"
)
def test_every_rank_count_up_to_17(algo, p):
    """A fixed uneven count (23 elements) on every allowed p = 1..17, root p//2, every applicable op."""
    count, root = 23, p // 2
    rng = np.random.default_rng(p)
    for op in ops_for(algo):
        dtype = np.int64 if op is AFFINE else np.int32
        high = 2**32 if op is AFFINE else 2**31
        inputs = [rng.integers(-high if op is not AFFINE else 0, high, count, dtype=dtype) for _ in range(p)]
        outputs, _ = run_collective(algo, inputs, p, op=op, root=root)
        check_outputs(algo, outputs, reference(algo.collective, inputs, op, root), f"p={p} root={root} op={op.name}")


@pytest.mark.parametrize("algo", DATA_ALGORITHMS, ids=algo_id)
@pytest.mark.parametrize(("nodes", "ranks_per_node"), [(2, 4), (3, 2), (3, 3)])
def test_on_nodes_with_several_ranks(algo, nodes, ranks_per_node):
    """Topology-aware algorithms see real nodes here: the answer must not depend on placement."""
    p = nodes * ranks_per_node
    if not algo.allows(p):
        pytest.skip(f"{algo_id(algo)} does not run on {p} ranks")
    rng = np.random.default_rng(p)
    root = p - 2
    for op in ops_for(algo):
        dtype = np.int64 if op is AFFINE else np.int32
        inputs = [rng.integers(0, 2**31, 29).astype(dtype) for _ in range(p)]
        outputs, _ = run_collective(algo, inputs, p, op=op, root=root, ranks_per_node=ranks_per_node,
                                    intra=FabricSpec("shm", 20e9, 2e-7))
        check_outputs(algo, outputs, reference(algo.collective, inputs, op, root),
                      f"{nodes} nodes x {ranks_per_node} ranks, op={op.name}")


@pytest.mark.parametrize("algo", [a for a in DATA_ALGORITHMS if a.collective in REDUCING], ids=algo_id)
@pytest.mark.parametrize("p", [3, 5, 8, 13])
def test_float32_within_p_eps(algo, p):
    """Float32 sums carry the algorithm's own rounding: equal to numpy within p * eps, relative."""
    if not algo.allows(p):
        pytest.skip(f"{algo_id(algo)} does not run on {p} ranks")
    rng = np.random.default_rng(p)
    inputs = [rng.uniform(0.5, 1.5, 101).astype(np.float32) for _ in range(p)]
    outputs, _ = run_collective(algo, inputs, p, op=SUM, root=p - 1)
    expected = reference(algo.collective, [x.astype(np.float64) for x in inputs], SUM, p - 1)
    for rank, (out, want) in enumerate(zip(outputs, expected, strict=True)):
        if want is None:
            assert out is None
            continue
        assert as_array(out).dtype == np.float32
        np.testing.assert_allclose(as_array(out), want, rtol=p * np.finfo(np.float32).eps, err_msg=f"rank {rank}")


@pytest.mark.parametrize("algo", BARRIERS, ids=algo_id)
@pytest.mark.parametrize("p", [1, 2, 3, 5, 8, 13])
def test_barrier_releases_no_rank_before_the_last_arrives(algo, p):
    """Ranks arrive at scattered times; no rank leaves before the last one has entered."""
    if not algo.allows(p):
        pytest.skip(f"{algo_id(algo)} does not run on {p} ranks")
    delays = np.random.default_rng(p).permutation(p) * 3e-6

    def program(comm):
        yield from comm.compute(float(delays[comm.rank]))
        return (yield from comm.barrier(algorithm=algo.name))

    world = make_world(p)
    assert run_program(world, program) == [None] * p
    records = world.tracer.collectives
    assert sorted(r.rank for r in records) == list(range(p))
    assert min(r.t_exit for r in records) >= max(r.t_enter for r in records)
