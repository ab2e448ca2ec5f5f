"""The collective workload: parsing with paths, dump round trips, closed-form times, verification."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from mpisim.cli import main
from mpisim.collectives import memory, registry
from mpisim.engine.units import si_numbers
from mpisim.errors import ConfigError, MPIError, UnitError, UnknownAlgorithm
from mpisim.workloads import collective
from mpisim.workloads.collective import busbw_factor, layout, parse
from tests.conftest import make_world
from tests.workloads import context

ALPHA, BW = 1e-6, 1e9
BETA = 1 / BW


# ------------------------------------------------------------------------------ parse and dump


def test_sizes_parse_to_bytes_and_ranges_follow_nccl_tests():
    params = parse({"collective": "allreduce", "sizes": ["1 KiB", "1 MB", "64 B"]})
    assert params.sizes == (1024, 10**6, 64)
    assert params.algorithms == ()  # the scenario's default for the collective, else auto
    ranged = parse({"collective": "allreduce", "sizes": {"min": "8 B", "max": "64 B", "factor": 2}})
    assert ranged.sizes == (8, 16, 32, 64)
    # max need not be reached exactly: nccl-tests stops at the last size <= max
    assert parse({"collective": "allreduce", "sizes": {"min": "8 B", "max": "100 B", "factor": 4}}).sizes == (8, 32)


@pytest.mark.parametrize(("raw", "path", "text"), [
    ({"collective": "allreduce", "sizes": ["1 KiB", "1 KQ"]}, "sizes[1]", "'1 KQ' is not a size (e.g. 64 KiB, 1.2 GB)"),
    ({"collective": "allreduce", "sizes": ["6 B"]}, "sizes[0]", "not a whole number of 4-byte elements"),
    ({"collective": "allreduce", "sizes": {"min": "1 KiB"}}, "sizes.max", "required"),
    ({"collective": "allreduce", "sizes": {"min": "8 B", "max": "4 B"}}, "sizes.max", "below min"),
    ({"collective": "allreduce", "sizes": {"min": "8 B", "max": "64 B", "factor": 1}}, "sizes.factor", "at least 2"),
    ({"collective": "allreduce", "sizes": {"min": "8 B", "max": "64 B", "step": 8}}, "sizes.step", "allowed keys: min, max, factor"),
    ({"collective": "allreduce"}, "sizes", "required"),
    ({"collective": "allreduce", "sizes": ["8 B"], "colour": "red"}, "colour", "allowed keys: kind, collective"),
    ({"collective": "allreduse", "sizes": ["8 B"]}, "collective", "known: barrier, bcast"),
    ({"collective": "allreduce", "sizes": ["8 B"], "dtype": "complex64"}, "dtype", "known: bfloat16, float16"),
    ({"collective": "allreduce", "sizes": ["8 B"], "op": "xor"}, "op", "known: sum, prod, max, min"),
    ({"collective": "allreduce", "sizes": ["8 B"], "iterations": 0}, "iterations", "at least 1"),
    ({"collective": "barrier", "sizes": ["1 KiB"]}, "sizes", "moves no data"),
])
def test_parse_errors_name_the_field(raw, path, text):
    with pytest.raises(ConfigError) as info:
        parse(raw)
    assert info.value.path == path
    assert text in info.value.message


def test_size_errors_stay_unit_errors():
    with pytest.raises(UnitError):
        parse({"collective": "allreduce", "sizes": ["1 KQ"]})


def test_unknown_algorithm_in_a_list_lists_the_known_names():
    with pytest.raises(UnknownAlgorithm) as info:
        parse({"collective": "allgather", "algorithm": ["ring", "rign"], "sizes": ["8 B"]})
    assert info.value.path == "algorithm[1]"
    for algo in registry.available("allgather"):
        assert algo.name in info.value.message


@pytest.mark.parametrize("raw", [
    {"collective": "allreduce", "algorithm": ["ring", "auto"], "sizes": {"min": "8 B", "max": "1024 B", "factor": 4}},
    {"collective": "allgather", "algorithm": "ring", "sizes": ["1 KiB"], "dtype": "int8", "iterations": 3},
    {"collective": "bcast", "sizes": ["64 B"], "dtype": "fp64", "root": 2},
    {"collective": "reduce", "sizes": ["64 B"], "op": "MAX"},
    {"collective": "barrier"},
])
def test_dump_round_trips(raw):
    params = parse(raw)
    dumped = collective.dump(params)
    with si_numbers():  # dump writes SI numbers
        assert parse(dumped) == params
    assert all(isinstance(size, int) for size in dumped.get("sizes", []))


# ------------------------------------------------------------------------------ sizes and bandwidths


def test_block_collectives_round_counts_like_nccl_tests():
    # 1 KiB of float32 over 3 ranks: 256 elements -> 85 per rank, 1020 bytes run.
    assert layout("allgather", 1024, 4, 3) == (85, 85, 1020)
    assert layout("reduce_scatter", 1024, 4, 3) == (255, 85, 1020)
    assert layout("allreduce", 1024, 4, 3) == (256, 256, 1024)


def test_busbw_factors():
    assert busbw_factor("allreduce", 8) == pytest.approx(2 * 7 / 8)
    assert busbw_factor("allgather", 8) == busbw_factor("reduce_scatter", 8) == pytest.approx(7 / 8)
    assert busbw_factor("alltoall", 4) == busbw_factor("gather", 4) == pytest.approx(3 / 4)
    assert busbw_factor("bcast", 8) == busbw_factor("reduce", 8) == 1.0


def test_allgather_row_reports_the_rounded_size():
    out = collective.run(parse({"collective": "allgather", "algorithm": "ring", "sizes": ["1 KiB"]}), context(3))
    (row,) = out.rows
    assert (row["bytes"], row["count"], row["ranks"]) == (1020, 85, 3)
    assert row["verified"] is True
    assert row["algbw_GBps"] == pytest.approx(1020 / row["time_s"] / 1e9)
    assert row["busbw_GBps"] == pytest.approx(row["algbw_GBps"] * 2 / 3)


# ------------------------------------------------------------------------------ times against closed forms


def test_ring_allgather_time_is_the_closed_form():
    p, n = 4, 4096
    out = collective.run(parse({"collective": "allgather", "algorithm": "ring", "sizes": [f"{n} B"]}),
                         context(p, alpha=ALPHA, bandwidth=BW))
    assert out.rows[0]["time_s"] == pytest.approx((p - 1) * ALPHA + (p - 1) / p * n * BETA, rel=1e-12)


def test_ring_allreduce_time_is_the_closed_form():
    p, n = 4, 16384
    out = collective.run(parse({"collective": "allreduce", "algorithm": "ring", "sizes": [f"{n} B"]}),
                         context(p, alpha=ALPHA, bandwidth=BW))
    expected = 2 * (p - 1) * ALPHA + 2 * (p - 1) / p * n * BETA
    assert out.rows[0]["time_s"] == pytest.approx(expected, rel=1e-12)
    assert out.rows[0]["verified"] is True


def test_iterations_repeat_identical_calls():
    raw = {"collective": "allgather", "algorithm": "ring", "sizes": ["4096 B"]}
    once = collective.run(parse(raw), context(4)).rows[0]["time_s"]
    thrice = collective.run(parse({**raw, "iterations": 3}), context(4)).rows[0]["time_s"]
    assert thrice == pytest.approx(once, rel=1e-12)


def test_size_only_payloads_give_the_same_times_and_no_verdict():
    raw = {"collective": "allgather", "algorithm": ["ring", "bruck"], "sizes": ["96 B", "4096 B"]}
    data = collective.run(parse(raw), context(3, model="fairshare")).rows
    size = collective.run(parse(raw), context(3, model="fairshare", payload="size")).rows
    assert [r["time_s"] for r in size] == [r["time_s"] for r in data]
    assert all(r["verified"] is None for r in size)
    assert all(r["verified"] is True for r in data)


# ------------------------------------------------------------------------------ verification and choices


@pytest.mark.parametrize("name", ["allreduce", "reduce", "bcast", "allgather", "reduce_scatter",
                                  "alltoall", "gather", "scatter"])
@pytest.mark.parametrize("p", [3, 4])
def test_every_collective_verifies_against_numpy(name, p):
    raw = {"collective": name, "algorithm": "auto", "sizes": ["96 B", "1 KiB"], "root": 1}
    out = collective.run(parse(raw), context(p, model="fairshare"))
    assert [row["verified"] for row in out.rows] == [True, True]
    assert all(row["requested"] == "auto" for row in out.rows)
    assert all(row["algorithm"] in {a.name for a in registry.available(name)} for row in out.rows)


@pytest.mark.parametrize(("dtype", "op"), [("int8", "sum"), ("uint8", "prod"), ("float16", "sum"), ("float64", "min")])
def test_reductions_verify_in_every_dtype(dtype, op):
    raw = {"collective": "reduce_scatter", "algorithm": "ring", "sizes": ["192 B"], "dtype": dtype, "op": op}
    assert collective.run(parse(raw), context(5)).rows[0]["verified"] is True


def test_a_wrong_result_is_reported(monkeypatch):
    """The check can fail: corrupt numpy's reference and the same run is no longer verified."""
    real = collective.reduce_in_rank_order
    monkeypatch.setattr(collective, "reduce_in_rank_order", lambda op, xs: real(op, xs) + 1)
    raw = {"collective": "reduce_scatter", "algorithm": "ring", "sizes": ["96 B"]}
    assert collective.run(parse(raw), context(3)).rows[0]["verified"] is False


def test_barrier_times_a_synchronisation():
    out = collective.run(parse({"collective": "barrier"}), context(4, alpha=ALPHA))
    (row,) = out.rows
    assert row["bytes"] == 0 and row["verified"] is None and row["algbw_GBps"] == 0.0
    assert row["time_s"] >= 2 * ALPHA  # at least two rounds of messages on four ranks


def test_without_an_algorithm_the_worlds_default_runs():
    def new_world():
        world = make_world(3)
        world.algorithms = {"allgather": "bruck"}
        return world

    ctx = context(3)
    ctx.new_world = new_world
    (row,) = collective.run(parse({"collective": "allgather", "sizes": ["96 B"]}), ctx).rows
    assert row["algorithm"] == row["requested"] == "bruck"
    (row,) = collective.run(parse({"collective": "allgather", "sizes": ["96 B"], "algorithm": "ring"}), ctx).rows
    assert row["algorithm"] == row["requested"] == "ring"


def test_power_of_two_algorithm_on_three_ranks_is_an_mpi_error():
    params = parse({"collective": "allgather", "algorithm": "recursive_doubling", "sizes": ["96 B"]})
    with pytest.raises(MPIError, match="power-of-two"):
        collective.run(params, context(3))


def test_root_outside_the_world_is_a_config_error():
    params = parse({"collective": "bcast", "algorithm": "auto", "sizes": ["64 B"], "root": 4})
    with pytest.raises(ConfigError) as info:
        collective.run(params, context(4))
    assert info.value.path == "root"


def test_inputs_are_exact_small_integers():
    x = collective.rank_input("allreduce", "sum", 1000, np.dtype("float16"), seed=0, rank=3)
    assert x.dtype == np.float16 and np.all(x == np.round(x)) and x.min() >= -3 and x.max() <= 3
    assert not np.array_equal(x, collective.rank_input("allreduce", "sum", 1000, np.dtype("float16"), 0, 4))


# ------------------------------------------------------------------------------ worlds for reports


def test_worlds_are_labelled_and_large_sweeps_keep_only_the_largest(monkeypatch):
    raw = {"collective": "allgather", "algorithm": ["ring", "bruck"], "sizes": ["96 B", "1024 B"]}
    out = collective.run(parse(raw), context(3))
    assert [label for label, _ in out.worlds] == ["ring 96 B", "ring 1020 B", "bruck 96 B", "bruck 1020 B"]
    monkeypatch.setattr(collective, "MAX_KEPT_MESSAGES", 0)
    out = collective.run(parse(raw), context(3))
    assert [label for label, _ in out.worlds] == ["ring 1020 B", "bruck 1020 B"]
    auto = collective.run(parse({"collective": "allgather", "sizes": ["96 B"]}), context(3))
    assert auto.worlds[0][0].endswith("96 B (auto)")


def test_points_too_large_for_real_memory_are_refused_before_allocating(monkeypatch):
    """Data mode always means real data: a point that would not fit is refused with its estimate."""
    raw = {"collective": "allgather", "algorithm": "ring", "sizes": ["96 B", "3072 B"]}
    allocated = []
    real_input = collective.rank_input
    monkeypatch.setattr(collective, "rank_input", lambda *a, **k: allocated.append(a) or real_input(*a, **k))
    monkeypatch.setattr(memory, "available_memory", lambda: 20_000)
    need = memory.estimate_collective("allgather", "ring", 3, 1024, verify=True).total
    assert need > 0.9 * 20_000, "the 3072 B point must not fit, the 96 B point must"
    with pytest.raises(memory.MemoryLimitError) as info:
        collective.run(parse(raw), context(3))
    assert info.value.path == "payload"
    assert f"{need / 1e9:.3g} GB" in str(info.value) and "payload: size" in str(info.value)
    assert "allgather 3 KiB on 3 ranks" in str(info.value)
    assert {a[2] for a in allocated} == {8}, "only the point that fits allocated its inputs"
    sized = collective.run(parse(raw), context(3, payload="size"))
    assert [row["verified"] for row in sized.rows] == [None, None] and not sized.notes


def test_the_estimate_follows_the_algorithm_auto_resolves_to(monkeypatch):
    seen = []
    real = memory.estimate_collective
    monkeypatch.setattr(memory, "estimate_collective", lambda *a, **k: seen.append((a, k)) or real(*a, **k))
    out = collective.run(parse({"collective": "allreduce", "sizes": ["64 B"]}), context(4))
    assert seen == [(("allreduce", out.rows[0]["algorithm"], 4, 64), {"verify": True})]
    collective.run(parse({"collective": "barrier", "sizes": ["0 B"]}), context(4))
    assert len(seen) == 1, "a barrier carries no data"


def test_the_cli_refuses_an_oversized_data_point_with_exit_2(tmp_path, capsys, monkeypatch):
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump({
        "topology": {"nodes": 2, "inter": {"kind": "star", "bandwidth": "1 GB/s", "latency": "1 us"}},
        "network": "analytic",
        "workload": {"kind": "collective", "collective": "allreduce", "algorithm": "ring", "sizes": ["1 MiB"]},
    }))
    monkeypatch.setattr(memory, "available_memory", lambda: 1_000_000)
    assert main(["run", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"{path}: payload: allreduce 1 MiB on 2 ranks: real-data payloads need about ")
    assert "but only 0.001 GB of memory is available; use 'payload: size'" in err
    assert main(["run", str(path), "--payload", "size"]) == 0, capsys.readouterr().err
