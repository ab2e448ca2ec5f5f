"""Real-float verification: every reducing algorithm gives the bits of its own order and stays within the bound.

``workload.values: random`` replays each algorithm on expression names (mpisim.mpi.order) and
checks the real float results against that replay bit for bit, and against the exact answer
within gamma_{p-1} * sum |x|. The tests loop over the registry, so a new reducing algorithm is
covered the moment it is registered; they also show that the checks can fail: another
algorithm's order gives other bits, and a result rounded too coarsely breaks the bound.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from mpisim.cli import main
from mpisim.collectives import registry
from mpisim.errors import ConfigError
from mpisim.mpi import SUM
from mpisim.mpi.order import Expressions, OrderPayload
from mpisim.network.topology import FabricSpec
from mpisim.scenario import load_dict, run_scenario
from mpisim.workloads import collective, fields, verify
from tests.collectives.helpers import run_collective
from tests.workloads import context

REDUCING = [a for a in registry.available() if a.collective in ("reduce", "allreduce", "reduce_scatter")]
SHM = FabricSpec("shm", 20e9, 2e-7)
#: (ranks, ranks per node): powers of two and not, one rank per node and several (hierarchical, NCCL trees).
WORLDS = [(2, 1), (3, 1), (5, 1), (8, 1), (6, 2), (8, 4)]
#: Allreduce algorithms whose ranks may legitimately end with different bits. None today: every
#: registered algorithm reduces each element along one tree and sends the finished value to every
#: rank, or has both partners of an exchange form the same ``lower + upper``.
RANKS_MAY_DISAGREE: set[str] = set()


def algo_id(algo: registry.Algorithm) -> str:
    return f"{algo.collective}-{algo.name}"


def run_random(algo: registry.Algorithm | str, p: int, dtype: str, *, count: int = 37, op: str = "sum",
               ranks_per_node: int = 1, algorithm: str | None = None, **extra):
    collective_name = algo.collective if isinstance(algo, registry.Algorithm) else algo
    name = algo.name if isinstance(algo, registry.Algorithm) else algorithm
    itemsize = fields.parse_dtype(dtype).itemsize
    raw = {"collective": collective_name, "sizes": [f"{count * itemsize} B"], "dtype": dtype, "op": op,
           "values": "random", "root": p - 1, **extra}
    if name:
        raw["algorithm"] = name
    world = {"ranks_per_node": ranks_per_node, "intra": SHM} if ranks_per_node > 1 else {}
    return collective.run(collective.parse(raw), context(p, seed=7, **world)).rows


@pytest.mark.parametrize("algo", REDUCING, ids=algo_id)
@pytest.mark.parametrize(("p", "ranks_per_node"), WORLDS, ids=lambda v: str(v))
def test_every_reducing_algorithm_gives_its_own_orders_bits_within_the_bound(algo, p, ranks_per_node):
    if not algo.allows(p):
        pytest.skip(f"{algo_id(algo)} does not run on {p} ranks")
    for dtype in ("float32", "float64", "bfloat16"):
        row, = run_random(algo, p, dtype, ranks_per_node=ranks_per_node)
        where = f"{algo_id(algo)} p={p} ({ranks_per_node} per node) {dtype}"
        assert row["verified_order"] is True, where
        assert 0 <= row["error_bound_ratio"] <= 1, where
        assert row["verified"] is True, where
        assert row["max_rel_error"] >= 0, where
        if algo.collective == "allreduce":
            assert row["ranks_agree"] is (algo.name not in RANKS_MAY_DISAGREE), where
        else:
            assert row["ranks_agree"] is None, where


@pytest.mark.parametrize("algo", [a for a in REDUCING if a.allows(8)], ids=algo_id)
def test_many_chunks_and_pipelined_segments_replay_too(algo):
    """300 KiB of float32 on 8 ranks: NCCL-style algorithms cut it into several chunks per channel."""
    row, = run_random(algo, 8, "float32", count=300 * 256, ranks_per_node=4)
    assert row["verified_order"] is True and row["verified"] is True
    assert row["error_bound_ratio"] <= 1


@pytest.mark.parametrize("op", ["prod", "max", "min"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "int32"])
def test_other_ops_and_dtypes(op, dtype):
    """Products are held to gamma_{p-1} |product|; max, min and integers must be exact."""
    for name in ("ring", "recursive_doubling"):
        row, = run_random("allreduce", 6, dtype, op=op, algorithm=name)
        assert row["verified"] is True and row["verified_order"] is True, (name, row)
        if op != "prod" or dtype == "int32":
            assert row["error_bound_ratio"] == 0.0 and row["max_rel_error"] == 0.0


def test_a_different_algorithms_order_gives_different_bits_and_fails_the_check():
    """The order check can fail: ring's floats are not recursive doubling's, and its trees do not replay them."""
    p, count = 5, 64
    rng = np.random.default_rng(3)
    inputs = [rng.uniform(-1, 1, count).astype(np.float32) for _ in range(p)]
    results, trees = {}, {}
    for name in ("ring", "recursive_doubling"):
        outputs, _ = run_collective(f"allreduce/{name}", inputs, p)
        results[name] = [np.asarray(out) for out in outputs]  # arrays in, arrays out
        table = Expressions(p)
        leaves = [OrderPayload.leaf(table, r, count, np.dtype(np.float32)) for r in range(p)]
        named, _ = run_collective(f"allreduce/{name}", leaves, p)
        trees[name] = (table, [out.names for out in named])
    assert not verify.same_bits(results["ring"][0], results["recursive_doubling"][0])
    positions = [np.arange(count)] * p
    for name, other in (("ring", "recursive_doubling"), ("recursive_doubling", "ring")):
        own = verify.check_reduction("sum", inputs, results[name], positions, *trees[name])
        assert own["verified"] is True and own["verified_order"] is True
        crossed = verify.check_reduction("sum", inputs, results[name], positions, *trees[other])
        assert crossed["verified_order"] is False and crossed["verified"] is False
        assert crossed["error_bound_ratio"] <= 1  # both orders are legitimate: only the bits differ


def test_a_result_outside_the_bound_fails():
    """A float32 sum that went through float16 on the way is far outside float32's bound."""
    p, count = 4, 50
    rng = np.random.default_rng(4)
    inputs = [rng.uniform(-1, 1, count).astype(np.float32) for _ in range(p)]
    table = Expressions(p)
    leaves = [OrderPayload.leaf(table, r, count, np.dtype(np.float32)) for r in range(p)]
    named, _ = run_collective("allreduce/ring", leaves, p)
    coarse = sum(x.astype(np.float16) for x in inputs).astype(np.float32)
    check = verify.check_reduction("sum", inputs, [coarse] * p, [np.arange(count)] * p, table,
                                   [out.names for out in named])
    assert check["error_bound_ratio"] > 1
    assert check["verified"] is False and check["verified_order"] is False
    assert check["max_rel_error"] > 1e-4


# ----------------------------------------------------------------------------- the expressions


def test_a_ring_names_the_textbook_order_of_each_block():
    """MPICH's ring on 3 ranks, 7 elements (blocks of 3, 3, 1): block b is finished on rank b - 1."""
    p, count = 3, 7
    table = Expressions(p)
    leaves = [OrderPayload.leaf(table, r, count, np.dtype(np.float32)) for r in range(p)]
    outputs, _ = run_collective("allreduce/ring", leaves, p)
    for out in outputs:
        assert [table.format(n) for n in out.names] == (
            ["((x1 + x2) + x0)"] * 3 + ["((x2 + x0) + x1)"] * 3 + ["((x0 + x1) + x2)"])
    # Hash-consing: the table holds the leaves, zero and the ring's p (p - 1) partial results, not one per element.
    assert len(table) == p + 1 + p * (p - 1)


def test_names_stay_few_on_long_vectors():
    p, count = 8, 100_000
    table = Expressions(p)
    leaves = [OrderPayload.leaf(table, r, count, np.dtype(np.float32)) for r in range(p)]
    outputs, _ = run_collective("allreduce/ring", leaves, p)
    assert len(table) == p + 1 + p * (p - 1)
    assert all(sorted(table.leaves(int(n))) == list(range(p)) for n in np.unique(outputs[0].names))


def test_evaluation_rounds_after_every_step_as_the_data_path_does():
    """bfloat16: ((x0 + x1) + x2) rounded per step, which a float32 accumulation would not give."""
    table = Expressions(3)
    a, b = np.zeros(1, np.int32), np.ones(1, np.int32)
    first = table.combine(SUM, a, b)
    tree = table.combine(SUM, first, np.full(1, 2, np.int32))
    inputs = [np.array([v], dtype=fields.parse_dtype("bfloat16")) for v in (1.0, 2.0**-8, 2.0**-8)]
    value, = table.evaluate([(tree, np.zeros(1, np.int64))], inputs)
    assert float(value[0]) == 1.0  # each 2^-8 is half an ulp of 1: ties to even, twice
    wide = sum(float(x[0]) for x in inputs)
    assert wide != 1.0


def test_a_zero_filled_buffer_is_the_constant_zero():
    table = Expressions(2)
    zeros = OrderPayload.leaf(table, 0, 4, np.dtype(np.float64)).like(4)
    total = zeros.combine(OrderPayload.leaf(table, 1, 4, np.dtype(np.float64)), SUM)
    assert table.format(int(total.names[0])) == "(0 + x1)"
    value, = table.evaluate([(total.names, np.arange(4))], [np.ones(4), np.arange(4.0)])
    np.testing.assert_array_equal(value, np.arange(4.0))


def test_order_payloads_keep_the_nominal_size():
    """Names are int32, but nbytes is the real run's, so protocol choices and times are the same."""
    payload = OrderPayload.leaf(Expressions(2), 0, 10, fields.parse_dtype("float64"))
    assert payload.nbytes == 80 and payload.split(3)[0].nbytes == 32


def test_the_bound_uses_the_double_rounding_of_narrow_types():
    assert verify.unit_roundoff(np.dtype(np.float64)) == 2.0**-53
    assert verify.unit_roundoff(np.dtype(np.float32)) == 2.0**-24
    assert verify.unit_roundoff(fields.parse_dtype("bfloat16")) == pytest.approx(2.0**-8 + 2.0**-24)
    assert verify.gamma(3, 2.0**-24) == pytest.approx(3 * 2.0**-24)
    assert verify.gamma(16, 2.0**-4) is None  # fp8 e4m3 on 17 ranks: no bound


def test_the_exact_reference_is_exact():
    """Double-double sums and products against Python's exact rationals."""
    from fractions import Fraction

    rng = np.random.default_rng(5)
    xs = [rng.uniform(-1, 1, 20) for _ in range(9)]
    hi, lo, _ = verify.exact_reduction("sum", xs)
    for i in range(20):
        exact = sum(Fraction(float(x[i])) for x in xs)
        assert abs(Fraction(float(hi[i])) + Fraction(float(lo[i])) - exact) <= abs(exact) * Fraction(1, 2**100)
    ys = [np.exp2(rng.uniform(-1, 1, 20)) for _ in range(9)]
    hi, lo, _ = verify.exact_reduction("prod", ys)
    for i in range(20):
        exact = Fraction(1)
        for y in ys:
            exact *= Fraction(float(y[i]))
        assert abs(Fraction(float(hi[i])) + Fraction(float(lo[i])) - exact) <= abs(exact) * Fraction(1, 2**98)


# ------------------------------------------------------------------------- the scenario contract


def test_values_parse_dump_and_errors():
    raw = {"collective": "allreduce", "sizes": ["64 B"], "values": "random"}
    params = collective.parse(raw)
    assert params.values == "random" and collective.dump(params)["values"] == "random"
    assert "values" not in collective.dump(collective.parse({"collective": "allreduce", "sizes": ["64 B"]}))
    with pytest.raises(ConfigError) as info:
        collective.parse({**raw, "values": "gaussian"})
    assert info.value.path == "values" and "integers, random" in info.value.message


def test_integer_rows_keep_their_columns_and_random_rows_are_deterministic():
    base = {"collective": "allreduce", "algorithm": "ring", "sizes": ["400 B"]}
    plain, = collective.run(collective.parse(base), context(3)).rows
    assert not set(verify.COLUMNS) & set(plain)
    first, = collective.run(collective.parse({**base, "values": "random"}), context(3, seed=1)).rows
    again, = collective.run(collective.parse({**base, "values": "random"}), context(3, seed=1)).rows
    assert first == again
    assert first["time_s"] == plain["time_s"]  # time depends on byte counts only
    sized, = collective.run(collective.parse({**base, "values": "random"}), context(3, payload="size")).rows
    assert all(sized[key] is None for key in ("verified", *verify.COLUMNS))


SCENARIO = {
    "topology": {"nodes": 2, "ranks_per_node": 4, "intra": {"kind": "nvswitch", "bandwidth": "300 GB/s", "latency": "1 us"},
                 "inter": {"kind": "star", "bandwidth": "25 GB/s", "latency": "2 us"}},
    "workload": {"kind": "collective", "collective": "allreduce", "algorithm": ["ring", "nccl_tree"],
                 "sizes": ["64 KiB"], "dtype": "bfloat16", "values": "random"},
    "expect": [{"verified": True}, {"metric": "error_bound_ratio", "max": 1}, {"metric": "ranks_agree", "equals": True}],
}


def test_a_scenario_gates_on_float_results(tmp_path, capsys):
    result = run_scenario(load_dict(SCENARIO))
    assert all(e["passed"] for e in result.expectations), result.expectations
    path = tmp_path / "floats.yaml"
    path.write_text(json.dumps(SCENARIO))
    assert main(["run", str(path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["results"]
    assert {row["algorithm"] for row in rows} == {"ring", "nccl_tree"}
    assert all(row["verified_order"] is True and row["error_bound_ratio"] <= 1 for row in rows)
    # A gate tighter than the rounding itself fails, naming the metric.
    assert main(["run", str(path), "--set", "expect=[{metric: error_bound_ratio, max: 0.001}]"]) == 1


def test_the_digest_pins_the_bits_and_changes_with_the_order():
    """Same floats, two legitimate orders: both verified, two digests; a rerun gives the same digest."""
    digests = {}
    for name in ("ring", "recursive_doubling", "ring"):
        row, = run_random("allreduce", 5, "float32", algorithm=name)
        assert row["verified"] is True
        assert row["result_digest"].startswith("sha256:") and len(row["result_digest"]) == 7 + 16
        digests.setdefault(name, set()).add(row["result_digest"])
    assert len(digests["ring"]) == 1  # deterministic
    assert digests["ring"] != digests["recursive_doubling"]
    # Collectives that only move data get a digest too (and no order columns).
    row, = run_random("allgather", 4, "bfloat16", algorithm="ring")
    assert row["verified"] is True and row["verified_order"] is None and row["result_digest"].startswith("sha256:")


def test_the_memory_check_counts_the_order_replay(monkeypatch):
    """A random-values point needs the replay's names and the check's float64 arrays on top of the data."""
    from mpisim.collectives import memory

    raw = {"collective": "allreduce", "algorithm": "ring", "sizes": ["4 KiB"]}
    plain = memory.estimate_collective("allreduce", "ring", 4, 4096, verify=True).total
    extra = verify.replay_bytes(1024, 4, 4)
    monkeypatch.setattr(memory, "available_memory", lambda: int((plain + extra / 2) / 0.9))
    assert collective.run(collective.parse(raw), context(4)).rows[0]["verified"] is True
    with pytest.raises(memory.MemoryLimitError) as info:
        collective.run(collective.parse({**raw, "values": "random"}), context(4))
    assert "order replay" in str(info.value)


@pytest.mark.parametrize("algo", REDUCING, ids=algo_id)
def test_the_replay_has_the_real_runs_timeline(algo):
    """Order payloads carry the real count and dtype: every message and its times are the real run's.

    So an algorithm that reduces in arrival order (ANY_SOURCE) meets the same arrivals in the replay.
    """
    p = 6 if algo.allows(6) else 8
    count = 20_011  # 80 KB: blocks go eagerly and by rendezvous (16 KiB limit), on the fair-share model
    settings = {"model": "fairshare", "eager_limit_inter": 16 * 1024, "reduce_cost": 1e-10}
    rng = np.random.default_rng(p)
    data = [rng.uniform(-1, 1, count).astype(np.float32) for _ in range(p)]
    table = Expressions(p)
    names = [OrderPayload.leaf(table, r, count, np.dtype(np.float32)) for r in range(p)]
    _, real = run_collective(algo, data, p, root=p - 1, **settings)
    _, replay = run_collective(algo, names, p, root=p - 1, **settings)
    assert real.tracer.messages and real.tracer.messages == replay.tracer.messages
