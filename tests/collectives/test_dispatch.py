"""How a collective call reaches an algorithm: defaults, ``auto`` rule sets, and the errors on the way.

A call without ``algorithm=`` uses the world's default for that collective, then ``auto``;
``auto`` follows MPICH's default decision rules (``mpich``) or takes the cheapest closed form
(``model``); the CollectiveRecord names what ran. Unknown names, unmet requirements and
mismatched calls are MPI-style errors that say what is wrong, and collective messages never
match a user's wildcard receive.
"""

from __future__ import annotations

import numpy as np
import pytest

from mpisim.collectives import registry
from mpisim.collectives.dispatch import AlgorithmRequirementError
from mpisim.errors import CollectiveMismatchError, UnknownAlgorithm
from mpisim.mpi import ANY_SOURCE, ANY_TAG, SUM, Op, SizePayload, Status
from tests.collectives.helpers import FIRST, call_collective, reference, run_collective
from tests.conftest import make_world, run_program

ALPHA, BANDWIDTH = 1e-6, 1e9


def algo_id(algo: registry.Algorithm) -> str:
    return f"{algo.collective}-{algo.name}"


def chosen(target: str, p: int, nbytes: int, op: Op = SUM, **kwargs) -> str:
    """Run one size-only float32 call of *nbytes* per rank; return the algorithm its records name."""
    collective = target.partition("/")[0]
    inputs = None if collective == "barrier" else [SizePayload(nbytes // 4, np.float32) for _ in range(p)]
    _, world = run_collective(target, inputs, p, op=op, alpha=ALPHA, bandwidth=BANDWIDTH, **kwargs)
    names = {r.algorithm for r in world.tracer.collectives}
    assert len(names) == 1, names
    assert len(world.tracer.collectives) == p
    return names.pop()


def test_default_comes_from_the_world_then_auto():
    inputs = [np.arange(4, dtype=np.int32) + r for r in range(5)]
    _, world = run_collective("allgather", inputs, 5, algorithms={"allgather": "ring"})
    assert {r.algorithm for r in world.tracer.collectives} == {"ring"}
    # an explicit algorithm= wins over the world's default
    _, world = run_collective("allgather/bruck", inputs, 5, algorithms={"allgather": "ring"})
    assert {r.algorithm for r in world.tracer.collectives} == {"bruck"}
    # no default: auto (MPICH: p not a power of two, 80 B in total < 81920 B -> Bruck)
    outputs, world = run_collective("allgather", inputs, 5)
    assert {r.algorithm for r in world.tracer.collectives} == {"bruck"}
    np.testing.assert_array_equal(outputs[3], np.concatenate(inputs))


# (collective, p, bytes per rank, MPICH's choice) -- COSTS.md section 2 ("total" = nccl-tests size)
MPICH_CASES = [
    ("allgather", 4, 4096, "recursive_doubling"),
    ("allgather", 4, 131068, "recursive_doubling"),  # total 524272 B < 524288 B
    ("allgather", 4, 131072, "ring"),  # total 524288 B
    ("allgather", 5, 16380, "bruck"),  # total 81900 B < 81920 B
    ("allgather", 5, 16384, "ring"),
    ("reduce_scatter", 4, 524284, "recursive_halving"),
    ("reduce_scatter", 4, 524288, "pairwise"),
    ("alltoall", 4, 4 * 32768, "linear"),  # fewer than 8 ranks: <= 32768 B per peer -> scattered
    ("alltoall", 4, 4 * 32772, "pairwise"),
    ("alltoall", 8, 8 * 256, "bruck"),  # 8 ranks or more: <= 256 B per peer -> Bruck
    ("alltoall", 8, 8 * 260, "linear"),
    ("alltoall", 8, 8 * 32772, "pairwise"),
    ("bcast", 4, 1 << 20, "binomial"),  # fewer than 8 ranks
    ("bcast", 8, 12288, "binomial"),
    ("bcast", 8, 12292, "scatter_recursive_doubling_allgather"),
    ("bcast", 8, 524292, "scatter_ring_allgather"),
    ("bcast", 9, 12292, "scatter_ring_allgather"),
    ("allreduce", 8, 8, "recursive_doubling"),  # <= 8 B
    ("allreduce", 8, 16, "recursive_doubling"),  # 4 elements < pof2 = 8
    ("allreduce", 8, 64, "rabenseifner"),
    ("allreduce", 6, 64, "rabenseifner"),  # 16 elements >= pof2 = 4
    ("reduce", 8, 2048, "binomial"),
    ("reduce", 8, 2052, "rabenseifner"),
    ("gather", 6, 4096, "binomial"),
    ("scatter", 6, 4096, "binomial"),
    ("barrier", 6, 0, "dissemination"),
]


@pytest.mark.parametrize(("collective", "p", "nbytes", "expected"), MPICH_CASES)
def test_auto_follows_mpich_rules(collective, p, nbytes, expected):
    assert chosen(f"{collective}/auto", p, nbytes) == expected
    assert chosen(collective, p, nbytes) == expected  # no algorithm= and no default: auto


def test_auto_mpich_allreduce_with_a_user_op_uses_recursive_doubling():
    user_sum = Op.Create(np.add, commute=True, name="user_sum")
    assert chosen("allreduce/auto", 8, 1 << 16, op=user_sum) == "recursive_doubling"


def test_auto_runs_a_non_commutative_op_correctly_when_possible():
    """Whatever auto picks for a non-commutative op must honour rank order."""
    for collective in ("reduce", "allreduce", "reduce_scatter"):
        if not any(a.allows(5, commutative=False) for a in registry.available(collective)):
            continue
        inputs = [np.full(7, r, dtype=np.int32) for r in range(5)]
        outputs, world = run_collective(f"{collective}/auto", inputs, 5, op=FIRST, root=2)
        name = world.tracer.collectives[0].algorithm
        assert registry.get(collective, name).allows(5, commutative=False)
        for out, want in zip(outputs, reference(collective, inputs, FIRST, 2), strict=True):
            if want is None:
                assert out is None
            else:
                np.testing.assert_array_equal(out, want)


def cheapest(collective: str, p: int, n: int) -> str:
    """The name with the smallest closed form here (ties to an exact formula, then the name that sorts first)."""
    costed = [a for a in registry.available(collective) if a.allows(p) and a.cost is not None]
    return min(costed, key=lambda a: (a.cost(p, n, ALPHA, 1 / BANDWIDTH, 0.0), not a.exact(p), a.name)).name


@pytest.mark.parametrize(("collective", "p", "nbytes"), [
    ("allreduce", 8, 8), ("allreduce", 8, 1 << 22), ("allreduce", 6, 1 << 22),
    ("alltoall", 8, 64), ("alltoall", 8, 1 << 22), ("allgather", 6, 16), ("bcast", 16, 1 << 22),
    ("reduce_scatter", 8, 1 << 22), ("gather", 8, 64), ("scatter", 8, 64), ("reduce", 8, 1 << 20),
])
def test_auto_model_picks_the_cheapest_closed_form(collective, p, nbytes):
    n = nbytes * p if collective in ("allgather", "gather") else nbytes
    assert chosen(f"{collective}/auto", p, nbytes, selector="model") == cheapest(collective, p, n)


@pytest.mark.parametrize(("collective", "p"), [("allreduce", 8), ("allreduce", 6), ("alltoall", 8)])
def test_auto_model_picks_latency_optimal_small_and_bandwidth_optimal_large(collective, p):
    """A tiny message goes to the algorithm with the fewest alphas, a huge one to the fewest betas."""
    small, large = 8 * p, 1 << 24
    beta = 1 / BANDWIDTH
    candidates = [a for a in registry.available(collective) if a.allows(p) and a.cost is not None]
    alphas = {a.name: a.cost(p, 0, ALPHA, 0.0, 0.0) for a in candidates}
    betas = {a.name: a.cost(p, large, 0.0, beta, 0.0) for a in candidates}
    pick_small = chosen(f"{collective}/auto", p, small, selector="model")
    pick_large = chosen(f"{collective}/auto", p, large, selector="model")
    assert pick_small != pick_large
    assert alphas[pick_small] == pytest.approx(min(alphas.values()))
    assert betas[pick_large] == pytest.approx(min(betas.values()))
    if collective == "allreduce":
        assert pick_small == "recursive_doubling"
    if collective == "alltoall":
        assert pick_small == "bruck"


def test_unknown_algorithm_lists_the_known_names():
    inputs = [np.zeros(4, np.int32)] * 3
    with pytest.raises(UnknownAlgorithm, match="allgather has no algorithm 'rign'") as info:
        run_collective("allgather/rign", inputs, 3)
    for algo in registry.available("allgather"):
        assert algo.name in str(info.value)


@pytest.mark.parametrize("algo", [a for a in registry.available() if "commutative" in a.requires], ids=algo_id)
def test_non_commutative_op_is_refused_by_commutative_algorithms(algo):
    inputs = [np.arange(6, dtype=np.int32)] * 4
    with pytest.raises(AlgorithmRequirementError, match="commutative"):
        run_collective(algo, inputs, 4, op=FIRST)


def test_ring_refuses_a_non_commutative_op():
    inputs = [np.arange(6, dtype=np.int32)] * 4
    for target in ("allreduce/ring", "reduce_scatter/ring"):
        with pytest.raises(AlgorithmRequirementError, match=f"{target.partition('/')[0]} algorithm 'ring'.*commutative"):
            run_collective(target, inputs, 4, op=FIRST)


@pytest.mark.parametrize("algo", [a for a in registry.available() if "power_of_two" in a.requires], ids=algo_id)
def test_power_of_two_algorithms_refuse_other_rank_counts(algo):
    inputs = None if algo.collective == "barrier" else [np.arange(6, dtype=np.int32)] * 6
    with pytest.raises(AlgorithmRequirementError, match=r"power-of-two.*got 6"):
        run_collective(algo, inputs, 6)


def run_mismatched(call0, call1):
    """Rank 0 makes call0(comm), rank 1 makes call1(comm); return the error message."""
    def program(comm):
        return (yield from (call0 if comm.rank == 0 else call1)(comm))

    with pytest.raises(CollectiveMismatchError) as info:
        run_program(make_world(2), program)
    return str(info.value)


@pytest.mark.parametrize(("first", "second", "first_call", "second_call"), [
    ("bcast", "allreduce", "bcast(16 B, root=0, algorithm=", "allreduce(16 B, op=sum, algorithm="),
    ("alltoall", "allgather", "alltoall(16 B, algorithm=", "allgather(16 B, algorithm="),
])
def test_mismatched_collectives_name_both_ranks_and_calls(first, second, first_call, second_call):
    buf = np.zeros(4, np.float32)
    message = run_mismatched(lambda c: getattr(c, first)(buf), lambda c: getattr(c, second)(buf))
    assert "rank 0" in message and "rank 1" in message
    assert first_call in message and second_call in message


def test_mismatched_roots_and_counts_are_reported():
    buf = np.zeros(4, np.float32)
    message = run_mismatched(lambda c: c.gather(buf, root=0), lambda c: c.gather(buf, root=1))
    assert "root=0" in message and "root=1" in message and "rank 0" in message and "rank 1" in message
    message = run_mismatched(lambda c: c.allgather(buf), lambda c: c.allgather(np.zeros(5, np.float32)))
    assert "allgather(16 B," in message and "allgather(20 B," in message


@pytest.mark.parametrize("algo", registry.available(), ids=algo_id)
def test_wildcard_user_receive_does_not_steal_collective_messages(algo):
    """A user's irecv(ANY_SOURCE, ANY_TAG) posted before the collective gets the user's message only."""
    p = 4
    inputs = [np.arange(10, dtype=np.int32) * (r + 1) for r in range(p)]
    status = Status()

    def program(comm):
        req = comm.irecv(source=ANY_SOURCE, tag=ANY_TAG, status=status) if comm.rank == 1 else None
        buf = None if algo.collective == "barrier" else inputs[comm.rank]
        out = yield from call_collective(comm, algo, buf, SUM, root=2)
        if comm.rank == 3:
            yield from comm.send(np.array([42], np.int64), dest=1, tag=7)
        if comm.rank == 1:
            got = yield from comm.wait(req)
            return out, got
        return out, None

    world = make_world(p)
    results = run_program(world, program)
    got = results[1][1]
    np.testing.assert_array_equal(got, [42])
    assert (status.source, status.tag) == (3, 7)
    for (out, _), want in zip(results, reference(algo.collective, inputs, SUM, 2), strict=True):
        if want is None:
            assert out is None
        else:
            np.testing.assert_array_equal(out, want)
    assert world.unmatched == []


def test_auto_model_breaks_cost_ties_towards_an_exact_formula():
    """Pairwise and linear alltoall share a closed form; linear's is a single-port estimate, so pairwise wins."""
    pairwise, linear = registry.get("alltoall", "pairwise"), registry.get("alltoall", "linear")
    n = 1 << 22
    assert pairwise.cost(8, n, ALPHA, 1 / BANDWIDTH, 0.0) == pytest.approx(linear.cost(8, n, ALPHA, 1 / BANDWIDTH, 0.0))
    assert chosen("alltoall/auto", 8, n, selector="model") == "pairwise"
