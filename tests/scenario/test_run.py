"""Running scenarios: fresh worlds, rows, records, expected failures, the RunResult JSON form."""

from __future__ import annotations

import json
import os

import pytest

import tests.scenario.fake_workloads  # noqa: F401  (registers the fake_pingpong workload)
from mpisim.errors import CollectiveMismatchError, DeadlockError, InvalidRankError, MPIError, TruncationError
from mpisim.report.records import RunResult, jsonable
from mpisim.scenario import load_dict, run_scenario, tracing
from mpisim.scenario.run import failure_kind, write_atomic
from mpisim.testing import assert_close, assert_expectations, assert_tree_close, assert_verified

ALPHA, BW = 1e-6, 1e9
STAR = {"nodes": 2, "inter": {"kind": "star", "bandwidth": "1 GB/s", "latency": "1 us"}}  # BW, ALPHA


def scenario(**raw):
    base = {"topology": STAR, "network": "analytic", "mpi": {"eager_limit": "4 KiB"},
            "workload": {"kind": "fake_pingpong", "sizes": ["1 KiB", "1 MiB"]}}
    return load_dict({**base, **raw}, file="t.yaml")


def test_rows_match_the_protocol_closed_forms():
    """Eager: alpha + n/B; rendezvous: 3 alpha + (n + 2h)/B, on the contention-free analytic model."""
    result = run_scenario(scenario())
    assert [row["bytes"] for row in result.rows] == [1024, 2**20]
    assert_close(result.rows[0]["time_s"], ALPHA + 1024 / BW, rel=1e-12)
    assert_close(result.rows[1]["time_s"], 3 * ALPHA + (2**20 + 2 * 64) / BW, rel=1e-12)
    assert_verified(result)


def test_records_come_from_every_world_the_workload_reports():
    result = run_scenario(scenario())
    assert [world.label for world in result.records] == ["pingpong/1024 B", "pingpong/1048576 B"]
    eager, rendezvous = result.records
    assert [m.protocol for m in eager.messages] == ["eager"]
    assert [m.protocol for m in rendezvous.messages] == ["rendezvous"]
    assert rendezvous.message_bytes == 2**20 and rendezvous.t_end > result.rows[1]["time_s"], "FIN follows"


def test_trace_settings_reach_the_tracer_and_counters_stay_exact():
    result = run_scenario(scenario(trace={"messages": False, "spans": False, "links": True}))
    world = result.records[1]
    assert world.messages == [] and world.spans == []
    assert world.message_count == 1 and world.message_bytes == 2**20
    assert world.links, "link records were asked for"


def test_size_only_payload_gives_the_same_times_and_null_verified():
    data, size = run_scenario(scenario()), run_scenario(scenario(payload="size"))
    assert [r["time_s"] for r in data.rows] == [r["time_s"] for r in size.rows]
    assert [r["verified"] for r in size.rows] == [None, None]
    assert data.records[1].messages == size.records[1].messages
    with pytest.raises(AssertionError, match="payload: size"):
        assert_verified(size)


def test_same_scenario_twice_gives_identical_results():
    a, b = run_scenario(scenario()), run_scenario(scenario())
    assert a.contract("x") == b.contract("x")
    assert a.summary == b.summary


def test_expectations_are_checked():
    result = run_scenario(scenario(expect=[
        {"metric": "time_s", "where": {"bytes": "1 KiB"}, "approx": "2.024 us", "rel": 1e-9},
        {"metric": "time_s", "where": {"bytes": "1 MiB"}, "max": "1 ms"},
    ]))
    assert [e["passed"] for e in result.expectations] == [True, False]
    assert not result.passed
    with pytest.raises(AssertionError, match=r"1 of 2 expectations failed:\n  expected time_s <= 1 ms"):
        assert_expectations(result)


def test_unexpected_program_failure_raises_the_mpi_error():
    with pytest.raises(DeadlockError, match="cycle of waits"):
        run_scenario(scenario(workload={"kind": "fake_pingpong", "sizes": ["8 B"], "mode": "deadlock"}))


def test_expected_failure_is_recorded_and_passes():
    result = run_scenario(scenario(workload={"kind": "fake_pingpong", "sizes": ["8 B"], "mode": "deadlock"},
                                   expect_failure="deadlock"))
    assert result.passed
    assert result.failure["kind"] == "deadlock" and "rank 0" in result.failure["message"]
    assert result.expectations[-1]["check"] == "expect_failure"
    assert result.records, "the failed world's records are kept for the report"
    assert result.summary["failure"]["kind"] == "deadlock"


def test_expected_failure_that_does_not_happen_fails():
    result = run_scenario(scenario(expect_failure="deadlock"))
    assert not result.passed
    assert result.expectations[-1]["detail"] == "expected the program to fail with deadlock, but it completed"


def test_any_mpi_error_matches_mpi_error():
    result = run_scenario(scenario(workload={"kind": "fake_pingpong", "sizes": ["8 B"], "mode": "deadlock"},
                                   expect_failure="mpi_error"))
    assert result.passed and result.failure["kind"] == "deadlock"


@pytest.mark.parametrize(
    ("error", "kind"),
    [(DeadlockError, "deadlock"), (TruncationError, "truncation"), (InvalidRankError, "invalid_rank"),
     (CollectiveMismatchError, "collective_mismatch"), (MPIError, "mpi_error")],
)
def test_failure_kind_names(error, kind):
    assert failure_kind(error("x")) == kind

    class Specific(error):
        pass

    assert failure_kind(Specific("x")) == kind


def test_run_result_json_round_trip():
    result = run_scenario(scenario(expect=[{"verified": True}]))
    text = result.to_json()
    again = RunResult.from_json(text)
    assert again.to_json() == text
    assert again.records[1].messages == result.records[1].messages
    assert again.rows == result.rows and again.expectations == result.expectations
    data = json.loads(text)
    assert set(data) >= {"scenario", "results", "expectations", "notes", "records", "summary", "meta"}
    assert data["records"][0]["messages"]["columns"][:3] == ["src", "dst", "tag"]
    assert data["scenario"]["mpi"]["copy_bandwidth"] == "inf"


def test_tables_for_csv():
    tables = run_scenario(scenario()).tables()
    columns, rows = tables["results"]
    assert columns == ["bytes", "ranks", "time_s", "verified", "fidelity"] and len(rows) == 2
    columns, rows = tables["messages"]
    assert columns[0] == "world" and columns[1:4] == ["src", "dst", "tag"]
    assert [row[0] for row in rows] == ["pingpong/1024 B", "pingpong/1048576 B"]


def test_jsonable_makes_strict_json():
    import numpy as np

    value = {"a": np.float64(1.5), "b": [float("inf"), float("-inf"), float("nan")], 3: (np.int32(2),), "n": None}
    assert jsonable(value) == {"a": 1.5, "b": ["inf", "-inf", "nan"], "3": [2], "n": None}
    json.dumps(jsonable(value), allow_nan=False)


def test_write_atomic_leaves_the_old_file_when_replacing_fails(tmp_path, monkeypatch):
    target = tmp_path / "results.json"
    target.write_text("old")

    def fail(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, "new")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"], "no temporary file is left"


def test_assert_helpers_report_what_differs():
    with pytest.raises(AssertionError, match=r"2.21 is not within rel 1% of 2.16 \(off by \+2.31%\)"):
        assert_close(2.21, 2.16, rel=0.01)
    assert_close(1.0, 1.0 + 1e-12)
    with pytest.raises(AssertionError, match=r"rows\[1\].t: expected 1.0, got 1.1"):
        assert_tree_close({"rows": [{"t": 1}, {"t": 1.1}]}, {"rows": [{"t": 1}, {"t": 1.0}]})
    assert_tree_close({"a": [1.0, "x"]}, {"a": [1.0 + 1e-12, "x"]})
    with pytest.raises(AssertionError, match="keys differ"):
        assert_tree_close({"a": 1}, {"b": 1})


def test_run_scenario_file_takes_dotted_overrides_as_keywords(tmp_path):
    import yaml

    from mpisim.testing import run_scenario_file

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"topology": STAR, "workload": {"kind": "fake_pingpong", "sizes": ["8 B"]}}))
    result = run_scenario_file(path, topology__nodes=3, **{"network.model": "analytic"}, seed=4)
    assert result.rows[0]["ranks"] == 3
    assert result.scenario["network"]["model"] == "analytic" and result.scenario["seed"] == 4
    assert result.scenario["name"] == "s"


def test_world_records_json_handles_numpy_and_infinite_values_and_any_column_order():
    import numpy as np

    from mpisim.engine.records import SpanRecord
    from mpisim.report.records import WorldRecords

    world = WorldRecords(label="w", spans=[SpanRecord(0, "compute", np.float64(0.5), float("inf"))])
    data = world.to_dict()
    assert data["spans"]["rows"] == [[0, "compute", 0.5, "inf", "", -1, 0]]
    json.dumps(data, allow_nan=False)
    plain = WorldRecords(label="w", spans=[SpanRecord(1, "send", 0.0, 2.0, "x", 3, 8)]).to_dict()
    plain["spans"]["columns"].reverse()
    for row in plain["spans"]["rows"]:
        row.reverse()
    assert WorldRecords.from_dict(plain).spans == [SpanRecord(1, "send", 0.0, 2.0, "x", 3, 8)]


# ------------------------------------------------------------------------------ trace volume


def test_large_worlds_keep_no_message_or_span_records_unless_asked(monkeypatch):
    """Above LARGE_WORLD_RANKS (2 ranks > 1 here) unset trace keys turn off; counters stay exact."""
    monkeypatch.setattr(tracing, "LARGE_WORLD_RANKS", 1)
    result = run_scenario(scenario())
    world = result.records[1]
    assert world.messages == [] and world.spans == []
    assert world.message_count == 1 and world.message_bytes == 2**20
    assert result.notes[:-1] == ["2 ranks: message and span records not kept for worlds of more than 1 ranks "
                                 "(counters stay exact); to keep them use --set trace.messages=true --set trace.spans=true"]
    assert result.notes[-1].startswith("fidelity: auto")
    asked = run_scenario(scenario(trace={"messages": True}))
    assert [m.nbytes for m in asked.records[1].messages] == [2**20] and asked.records[1].spans == []
    assert asked.notes[0].endswith("span records not kept for worlds of more than 1 ranks "
                                   "(counters stay exact); to keep them use --set trace.spans=true")
    assert run_scenario(scenario(trace={"messages": True, "spans": False})).notes == [
        "fidelity: auto: trace.messages asks for every message"]
    monkeypatch.setattr(tracing, "LARGE_WORLD_RANKS", 2)
    small = run_scenario(scenario())
    assert small.records[1].messages and small.notes == [small.notes[-1]] \
        and small.notes[-1].startswith("fidelity: auto"), \
        "the threshold is 'more than'"


def test_records_past_the_budget_are_dropped_and_the_run_says_so(monkeypatch):
    """Memory stays bounded on big runs nobody asked to trace: counters exact, records dropped, a note."""
    monkeypatch.setattr(tracing, "RECORD_BUDGET", 3)
    raw = {"workload": {"kind": "collective", "collective": "allreduce", "algorithm": "ring", "sizes": ["64 KiB"]},
           "topology": {**STAR, "nodes": 8}, "payload": "size"}
    result = run_scenario(scenario(**raw))
    (world,) = result.records
    assert world.messages == [] and world.message_count == 8 * 2 * 7
    assert any("records dropped where a world made more than 3" in note for note in result.notes)
    kept = run_scenario(scenario(**raw, trace={"messages": True, "spans": True}))
    assert len(kept.records[0].messages) == 8 * 2 * 7  # asked for: kept, budget or not
