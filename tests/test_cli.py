"""The mpisim command line: exit codes, one-line errors, --json contract, output files, list, check, report."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import tests.scenario.fake_workloads  # noqa: F401  (registers the fake_pingpong workload)
from mpisim import __version__
from mpisim.cli import main
from mpisim.report.records import RunResult
from mpisim.scenario import load, load_file

ROOT = Path(__file__).resolve().parents[1]
STAR = {"nodes": 2, "inter": {"kind": "star", "bandwidth": "1 GB/s", "latency": "1 us"}}
RAW = {
    "name": "cli-test",
    "topology": STAR,
    "network": "analytic",
    "mpi": {"eager_limit": "4 KiB"},
    "workload": {"kind": "fake_pingpong", "sizes": ["1 KiB", "1 MiB"]},
    "expect": [{"metric": "time_s", "where": {"bytes": "1 KiB"}, "approx": "2.024 us", "rel": 0.001},
               {"verified": True}],
}


def write(tmp_path, raw=None, name="s.yaml", **changes) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({**(raw or RAW), **changes}, sort_keys=False))
    return path


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- exit codes and errors ----------------------------------------------------------------------


def test_run_prints_tables_and_passes(tmp_path, capsys):
    code, out, err = run(capsys, "run", write(tmp_path))
    assert code == 0, err
    assert "cli-test: 2 ranks" in out
    assert "PASS expected time_s ~ 2.02 us (rel 0.1%) where bytes=1 KiB, got 2.02 us" in out
    assert err == ""


def test_failing_expectation_exits_1_saying_expected_and_got(tmp_path, capsys):
    path = write(tmp_path, expect=[{"metric": "time_s", "where": {"bytes": "1 KiB"}, "approx": "3 us", "rel": 0.01}])
    code, out, err = run(capsys, "run", path)
    assert code == 1
    assert err == "FAILED: expected time_s ~ 3 us (rel 1%) where bytes=1 KiB, got 2.02 us (-32.5%)\n"
    assert "FAIL expected time_s ~ 3 us" in out


def test_bad_input_is_one_line_naming_file_and_field_exit_2(tmp_path, capsys):
    path = write(tmp_path, topology={**STAR, "inter": {**STAR["inter"], "bandwidth": "10 Gbsp"}})
    code, out, err = run(capsys, "run", path)
    assert code == 2 and out == ""
    assert err == f"{path}: topology.inter.bandwidth: '10 Gbsp' is not a bandwidth (e.g. 100 Gbps, 12.5 GB/s)\n"


def test_verbose_shows_the_traceback(tmp_path, capsys):
    path = write(tmp_path, seed=-3)
    code, _, err = run(capsys, "run", path, "-v")
    assert code == 2
    assert "Traceback" in err and err.endswith(f"{path}: seed: expected a whole number >= 0, got -3\n")
    code, _, err = run(capsys, "-v", "check", path)
    assert code == 2 and "Traceback" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "{missing}"], "{missing}: no such file"),
        (["run", "{path}", "--set", "nodes"], "{path}: --set: expected dotted.key=value, got 'nodes'"),
        (["run", "{path}", "--set", "topology.nodes=0"], "{path}: topology.nodes: must be a whole number of at least 1, got 0"),
        (["run", "{path}", "--jobs", "0"], "{path}: --jobs: --jobs must be at least 1, got 0"),
        (["check", "{path}", "--set", "network.model=packet"], "{path}: network.model: expected one of analytic, fairshare, got 'packet'"),
        (["report", "{missing}"], "{missing}/results.json: no such file (run 'mpisim run FILE -o DIR' first)"),
    ],
)
def test_input_errors_exit_2_with_one_line(tmp_path, capsys, argv, message):
    path, missing = write(tmp_path), tmp_path / "missing"
    argv = [a.format(path=path, missing=missing) for a in argv]
    (missing if argv[0] == "report" else tmp_path).mkdir(exist_ok=True)
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err == message.format(path=path, missing=missing) + "\n"
    assert out == ""


def test_usage_errors_exit_2(capsys):
    assert main(["run"]) == 2
    assert main(["frobnicate"]) == 2
    assert "usage: mpisim" in capsys.readouterr().err


def test_simulated_program_failure_exits_1_with_the_deadlock_report(tmp_path, capsys):
    path = write(tmp_path, workload={"kind": "fake_pingpong", "sizes": ["8 B"], "mode": "deadlock"}, expect=None)
    code, _, err = run(capsys, "run", path, "-o", tmp_path / "out")
    assert code == 1
    assert err.startswith("the simulated program failed: DeadlockError\ndeadlock: 2 rank(s) blocked")
    assert "rank 0: blocked in recv(source=1" in err and "cycle of waits: rank 0 -> rank 1 -> rank 0" in err
    assert "Traceback" not in err
    assert not (tmp_path / "out" / "results.json").exists(), "a failed run writes no results"


def test_json_on_a_deadlock_is_still_one_document_with_the_failure(tmp_path, capsys):
    """A pipeline parses stdout whatever happened: kind, ranks and calls of the failure, exit 1."""
    path = write(tmp_path, workload={"kind": "fake_pingpong", "sizes": ["8 B"], "mode": "deadlock"}, expect=None)
    code, out, err = run(capsys, "run", path, "--json")
    assert code == 1
    doc = json.loads(out)
    assert doc["results"] == [] and doc["scenario"]["name"] == "cli-test"
    failure = doc["failure"]
    assert failure["kind"] == "deadlock" and failure["error"] == "DeadlockError"
    assert failure["ranks"] == [0, 1] and len(failure["calls"]) == 2
    assert all(call.startswith("recv(source=") for call in failure["calls"])
    assert "deadlock: 2 rank(s) blocked" in failure["message"] and "deadlock" in err


def test_expected_failure_exits_0_and_prints_the_report(tmp_path, capsys):
    path = write(tmp_path, workload={"kind": "fake_pingpong", "sizes": ["8 B"], "mode": "deadlock"}, expect=None,
                 expect_failure="deadlock")
    code, out, err = run(capsys, "run", path)
    assert code == 0
    assert err.startswith("expected failure (deadlock):\ndeadlock: 2 rank(s) blocked")
    assert "PASS expected the program to fail with deadlock, and it did" in out
    code, _, _ = run(capsys, "run", path, "--set", "expect_failure=null")
    assert code == 1


def test_internal_errors_are_one_line_unless_verbose(tmp_path, capsys, monkeypatch):
    import mpisim.scenario.run as run_module

    def broken(*args, **kwargs):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(run_module, "run_scenario", broken)
    code, _, err = run(capsys, "run", write(tmp_path))
    assert code == 1
    assert err == "internal error: RuntimeError: boom second line (run with -v for the traceback)\n"
    code, _, err = run(capsys, "run", write(tmp_path), "-v")
    assert code == 1 and "Traceback" in err and "internal error: RuntimeError" in err


# --- --json ------------------------------------------------------------------------------------


def test_json_is_the_only_output_and_has_the_contract_keys(tmp_path, capsys):
    code, out, err = run(capsys, "run", write(tmp_path), "--json")
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert set(doc) >= {"mpisim_version", "scenario", "results", "expectations"}
    assert doc["mpisim_version"] == __version__
    assert doc["scenario"]["topology"]["inter"]["bandwidth"] == 1e9, "resolved, in SI"
    assert doc["scenario"]["mpi"]["eager_limit"] == 4096
    assert [row["bytes"] for row in doc["results"]] == [1024, 2**20]
    assert all(isinstance(e["passed"], bool) for e in doc["expectations"])
    assert load(doc["scenario"]) == load_file(write(tmp_path)), "the embedded scenario loads back"


def test_json_is_byte_identical_across_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a sweep keeps its finished points in the cwd while it runs
    path = write(tmp_path, sweep={"topology.nodes": [2, 3]})
    outputs = [run(capsys, "run", path, "--json", "--jobs", "1")[1] for _ in range(2)]
    assert outputs[0] == outputs[1]
    assert "wall" not in outputs[0]


def test_seed_and_payload_flags_override_the_file(tmp_path, capsys):
    code, out, _ = run(capsys, "run", write(tmp_path), "--json", "--seed", "5", "--payload", "size")
    doc = json.loads(out)
    assert doc["scenario"]["seed"] == 5 and doc["scenario"]["payload"] == "size"
    assert [row["verified"] for row in doc["results"]] == [None, None]
    assert code == 0, "verified: true has nothing to check in size mode"


# --- -o DIR ------------------------------------------------------------------------------------


def test_output_dir_gets_results_json_and_csv_tables(tmp_path, capsys):
    out_dir = tmp_path / "deep" / "out"
    code, _, _ = run(capsys, "run", write(tmp_path), "-o", out_dir)
    assert code == 0
    assert {"collectives.csv", "messages.csv", "results.csv", "results.json"} <= {p.name for p in out_dir.iterdir()}
    result = RunResult.from_json((out_dir / "results.json").read_text())
    assert [row["bytes"] for row in result.rows] == [1024, 2**20]
    assert result.meta["mpisim_version"] == __version__
    with (out_dir / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert rows[0] == {"bytes": "1024", "ranks": "2", "time_s": "2.024e-06", "verified": "true", "fidelity": "message"}
    with (out_dir / "messages.csv").open() as f:
        messages = list(csv.DictReader(f))
    assert [m["protocol"] for m in messages] == ["eager", "rendezvous"]


def test_failed_write_leaves_no_partial_file(tmp_path, capsys, monkeypatch):
    out_dir = tmp_path / "out"
    assert run(capsys, "run", write(tmp_path), "-o", out_dir)[0] == 0
    before = (out_dir / "results.json").read_text()

    def fail(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    code, _, err = run(capsys, "run", write(tmp_path), "-o", out_dir, "--seed", "9")
    assert code == 2
    assert err == f"{out_dir}: -o: cannot write the results: No space left on device\n"
    assert (out_dir / "results.json").read_text() == before
    leftovers = [p.name for p in out_dir.iterdir() if p.name.startswith(".")]
    assert leftovers == [], "temporary files and directories are removed when writing fails"


def test_report_reprints_the_saved_results(tmp_path, capsys):
    out_dir = tmp_path / "out"
    _, printed, _ = run(capsys, "run", write(tmp_path), "-o", out_dir)
    code, reprinted, err = run(capsys, "report", out_dir)
    assert code == 0 and err == ""
    assert reprinted.startswith(printed), "the same tables, read back from results.json"


def test_report_rejects_a_file_that_is_not_a_result(tmp_path, capsys):
    (tmp_path / "results.json").write_text("[1, 2]")
    code, _, err = run(capsys, "report", tmp_path)
    assert code == 2 and err.startswith(f"{tmp_path / 'results.json'}: not a results file")


# --- check and list ----------------------------------------------------------------------------


def test_check_prints_the_resolved_scenario_as_yaml(tmp_path, capsys):
    path = write(tmp_path)
    code, out, err = run(capsys, "check", path, "--set", "topology.nodes=3")
    assert code == 0 and err == ""
    assert out.startswith(f"# {path}: valid; resolved scenario (3 ranks)\n")
    resolved = yaml.safe_load(out)
    assert resolved["topology"]["nodes"] == 3 and resolved["mpi"]["eager_limit"] == 4096
    assert load(resolved) == load_file(path, [("topology.nodes", 3)])


def test_list_algorithms_json_lists_the_registry(capsys):
    from mpisim.collectives import registry

    code, out, _ = run(capsys, "list", "algorithms", "--json")
    assert code == 0
    items = json.loads(out)
    assert [(i["collective"], i["algorithm"]) for i in items] == [(a.collective, a.name) for a in registry.available()]
    for item in items:
        assert {"collective", "algorithm", "summary", "requires"} <= set(item)
        assert isinstance(item["requires"], list) and item["summary"]


def test_list_topologies_and_workloads(capsys):
    code, out, _ = run(capsys, "list", "topologies", "--json")
    assert code == 0
    assert {"name": "ib-hdr", "summary": "InfiniBand HDR 200 Gb/s (C2), 1 rank per node on one switch"} in json.loads(out)
    code, out, _ = run(capsys, "list", "workloads", "--json")
    kinds = {item["kind"] for item in json.loads(out)}
    assert {"collective", "p2p", "training", "program", "fake_pingpong"} <= kinds
    code, out, _ = run(capsys, "list", "topologies")
    assert code == 0 and "ib-hdr" in out


def test_python_dash_m_mpisim_runs_the_cli():
    proc = subprocess.run([sys.executable, "-m", "mpisim", "--version"], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    assert proc.returncode == 0 and proc.stdout == f"mpisim {__version__}\n"


@pytest.mark.parametrize(("field", "value", "unit"), [
    ("topology.inter.latency", "2", "2 us"),
    ("topology.inter.bandwidth", "100", "100 B/s"),
    ("mpi.eager_limit", "4096", "4096 B"),
])
def test_a_bare_number_where_a_unit_is_needed_is_bad_input(tmp_path, capsys, field, value, unit):
    """`latency: 2` once ran as 2 s (a 1 MiB allreduce took 36 s, exit 0): now one line and exit 2."""
    code, out, err = run(capsys, "run", write(tmp_path), "--set", f"{field}={value}")
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert f"{field}: {value} has no unit; write e.g. {unit}" in err


def test_check_refuses_an_algorithm_the_rank_count_cannot_run(tmp_path, capsys):
    """A power-of-two algorithm on 6 ranks is bad input found by check (it used to fail after the run, exit 1)."""
    raw = {"topology": {"nodes": 6, "inter": STAR["inter"]}, "payload": "size",
           "workload": {"kind": "collective", "collective": "allgather", "algorithm": ["ring", "recursive_doubling"],
                        "sizes": ["1 KiB"]}}
    for command in ("check", "run"):
        code, _, err = run(capsys, command, write(tmp_path, raw))
        assert code == 2 and err.count("\n") == 1
        assert "workload.algorithm[1]: allgather algorithm 'recursive_doubling' needs a power-of-two number of ranks, got 6" in err


@pytest.mark.parametrize("metric", ["tiem_s", "time_ss"])
def test_check_refuses_a_misspelt_expect_metric(tmp_path, capsys, metric):
    """`time_ss` is not a time key, so `max: 1 s` used to be blamed ("expected a number"): the metric is named."""
    code, _, err = run(capsys, "check", write(tmp_path, expect=[{"metric": metric, "max": "1 s"}]))
    assert code == 2 and err.count("\n") == 1
    assert f"expect[0].metric: '{metric}' is not a column of fake_pingpong rows; did you mean 'time_s'?" in err


# --- gates: bad input exits 2, and --update-expect writes values that pass ------------------------

ALLREDUCE = {"name": "gates", "topology": {"nodes": 4, "inter": {**STAR["inter"], "bandwidth": "3 GB/s"}},
             "payload": "size",
             "workload": {"kind": "collective", "collective": "allreduce", "algorithm": "ring", "sizes": ["1 MiB"]}}
# This run: time_s 542.65067 us, busbw_GBps 2.8984835, algbw_GBps 1.9323223.
GATES = """name: gates
topology: {nodes: 4, inter: {kind: star, bandwidth: 3 GB/s, latency: 1 us}}
payload: size
fidelity: message
workload: {kind: collective, collective: allreduce, algorithm: ring, sizes: [1 MiB]}
expect:
  - {metric: time_s, max: 50 us}
  - {metric: time_s, max: 542.65 us}   # reads the same as the run at five digits, but fails
  - {metric: time_s, min: 1 ms}
  - {metric: busbw_GBps, min: 50}
  - {metric: algbw_GBps, max: 1}
  - {metric: time_s, baseline: 500 us, max_decrease: 0%}
"""


def test_update_expect_writes_bounds_that_the_next_run_passes(tmp_path, capsys):
    """A max is rounded up and a min down (four digits, or as many as written); a baseline to the
    nearest, with the digits a tight gate needs. The next run passes and a second update is a no-op."""
    path = tmp_path / "gates.yaml"
    path.write_text(GATES)
    code, _, err = run(capsys, "run", path)
    assert code == 1
    # The digits that show why: not "expected time_s <= 543 us, got 543 us".
    assert "FAILED: expected time_s <= 542.65 us, got 542.651 us\n" in err
    code, out, err = run(capsys, "run", path, "--update-expect")
    assert code == 0, err
    assert "FAILED" not in err
    assert path.read_text() == GATES.replace("max: 50 us", "max: 542.7 us").replace(
        "max: 542.65 us", "max: 542.66 us").replace("min: 1 ms", "min: 0.5426 ms").replace(
        "min: 50", "min: 2.898").replace("max: 1}", "max: 1.933}").replace("baseline: 500 us", "baseline: 542.65 us")
    code, _, err = run(capsys, "run", path)
    assert code == 0, err
    code, out, err = run(capsys, "run", path, "--update-expect")
    assert code == 0, err
    assert f"{path}: expectations unchanged" in out


@pytest.mark.parametrize(("entry", "message"), [
    ({"metric": "time_s", "baseline": "100 us", "max_increase": 2},
     "expect[0].max_increase: 2 is ambiguous: write 2% (or 0.02 for a fraction)"),
    ({"metric": "time_s", "approx": "100 us", "rel": 5}, "expect[0].rel: 5 is ambiguous: write 5% (or 0.05 for a fraction)"),
    ({"metric": "time_s", "where": {"algorithm": "rign"}, "max": "1 s"},
     "expect[0].where.algorithm: no row of this scenario has algorithm=rign; did you mean 'ring'? "
     "its rows have algorithm: ring"),
    ({"verified": True, "where": {"collective": "alreduce"}},
     "expect[0].where.collective: no row of this scenario has collective=alreduce; did you mean 'allreduce'? "
     "its rows have collective: allreduce"),
    ({"metric": "algorithm", "equals": "recursive_doubling"},
     "expect[0].equals: no row of this scenario has algorithm=recursive_doubling; its rows have algorithm: ring"),
])
def test_a_gate_that_cannot_mean_what_it_says_is_bad_input(tmp_path, capsys, entry, message):
    """These passed `mpisim check` (a +200 % gate; a where selecting no row, found only after the run): exit 2."""
    path = write(tmp_path, ALLREDUCE, expect=[entry])
    for command in ("check", "run"):
        code, out, err = run(capsys, command, path)
        assert (code, out, err) == (2, "", f"{path}: {message}\n")


def test_where_values_the_scenario_produces_are_accepted(tmp_path, capsys):
    """auto may choose any registered algorithm; a swept one, any point's; with --set, the file's own too."""
    auto = {**ALLREDUCE, "workload": {**ALLREDUCE["workload"], "algorithm": "auto"}}
    assert run(capsys, "check", write(tmp_path, auto, expect=[
        {"metric": "time_s", "where": {"algorithm": "recursive_doubling"}, "max": "1 s"}]))[0] == 0
    code, _, err = run(capsys, "check", write(tmp_path, auto, expect=[
        {"metric": "time_s", "where": {"algorithm": "rign"}, "max": "1 s"}]))
    assert code == 2 and "did you mean 'ring'? its rows have algorithm: " in err and "recursive_doubling" in err
    swept = write(tmp_path, ALLREDUCE, sweep={"workload.algorithm": ["ring", "recursive_doubling"]},
                  expect=[{"metric": "time_s", "where": {"algorithm": "recursive_doubling"}, "max": "1 s"},
                          {"metric": "time_s", "where": {"workload.algorithm": "ring"}, "max": "1 s"}])
    code, out, err = run(capsys, "run", swept, "--json")
    assert code == 0, err
    assert [e["rows"] for e in json.loads(out)["expectations"]] == [1, 1]
    code, _, err = run(capsys, "check", write(tmp_path, ALLREDUCE, sweep={"topology.nodes": [2, 4]},
                                              expect=[{"verified": True, "where": {"topology.nodes": 3}}]))
    assert code == 2 and "expect[0].where.topology.nodes: no row of this scenario has topology.nodes=3; " in err
    # An experiment on the file: the gate on ring selects no row, and the run says so (exit 1, not 2).
    path = write(tmp_path, ALLREDUCE, expect=[{"metric": "time_s", "where": {"algorithm": "ring"}, "max": "1 s"}])
    code, _, err = run(capsys, "run", path, "--set", "workload.algorithm=recursive_doubling")
    assert code == 1
    assert "but no row has algorithm=ring (rows have algorithm: recursive_doubling)" in err


def test_set_of_a_swept_key_replaces_that_axis_and_says_so(tmp_path, capsys):
    """--set topology.nodes=3 on a scenario sweeping topology.nodes runs 3, not the sweep, and says so."""
    path = write(tmp_path, sweep={"topology.nodes": [2, 4]}, expect=None)
    code, out, err = run(capsys, "run", path, "--set", "topology.nodes=3", "--json")
    assert code == 0
    doc = json.loads(out)
    assert "sweep" not in doc["scenario"] and {row["ranks"] for row in doc["results"]} == {3}
    assert "note: --set topology.nodes=3 replaces the sweep over topology.nodes ([2, 4]): one value runs" in err


def test_set_of_a_sweep_axis_takes_the_dotted_key_whole(tmp_path, capsys):
    path = write(tmp_path, sweep={"topology.nodes": [2, 4]}, expect=None)
    code, out, _ = run(capsys, "run", path, "--set", "sweep.topology.nodes=[2, 3]", "--json")
    assert code == 0
    assert sorted({row["topology.nodes"] for row in json.loads(out)["results"]}) == [2, 3]


def test_the_header_shows_the_rank_counts_that_ran(tmp_path, capsys):
    code, out, _ = run(capsys, "run", write(tmp_path, sweep={"topology.nodes": [2, 4]}, expect=None))
    assert code == 0
    assert out.splitlines()[0].startswith("cli-test: 2, 4 ranks (inline, swept)")


def test_piped_tables_never_split_a_number(tmp_path, capsys, monkeypatch):
    """Without a terminal, rows print whole, COLUMNS or not: 14000000000 never becomes 1400000000 + 0."""
    raw = {**RAW, "payload": "size", "workload": {"kind": "fake_pingpong", "sizes": ["14 GB"]}, "expect": None,
           # swept keys add long columns: the table is wider than 160 characters
           "sweep": {"mpi.eager_limit": ["4 KiB"], "mpi.send_overhead": ["0 s"], "mpi.recv_overhead": ["0 s"],
                     "mpi.copy_bandwidth": ["10 GB/s"], "topology.inter.latency": ["1 us", "2 us"]}}
    for columns in (None, "40"):
        if columns is None:
            monkeypatch.delenv("COLUMNS", raising=False)
        else:
            monkeypatch.setenv("COLUMNS", columns)
        code, out, _ = run(capsys, "run", write(tmp_path, raw))
        assert code == 0
        assert any("14000000000" in line for line in out.splitlines())
        assert not any("…" in line for line in out.splitlines())
class _Terminal:
    """A stderr that says it is a terminal and keeps what is written to it."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True

    def text(self) -> str:
        return "".join(self.parts)


RING_64 = {
    "topology": {"nodes": 64, "inter": {"kind": "fat_tree", "bandwidth": "25 GB/s", "latency": "1 us"}},
    "network": "fairshare",
    "payload": "size",
    "workload": {"kind": "collective", "collective": "allreduce", "algorithm": "ring", "sizes": ["1 MB"]},
}


def test_progress_bar_shows_simulated_time_events_and_the_estimates_share_on_a_terminal(monkeypatch):
    from mpisim.report.terminal import RunProgress
    from mpisim.scenario import load_dict, run_scenario
    from mpisim.scenario.estimate import estimate

    monkeypatch.setattr(RunProgress, "DELAY", 0.0)
    monkeypatch.setattr(RunProgress, "PERIOD", 0.02)
    err, worlds = _Terminal(), []
    scenario = load_dict({**RING_64, "fidelity": "message"})
    with RunProgress(err, worlds, enabled=True, estimate_events=estimate(scenario).events) as progress:
        result = run_scenario(scenario, worlds=worlds)
    assert "simulated" in err.text() and "events" in err.text() and "of the estimate" in err.text()
    t_end, events = progress.sample()
    assert events == worlds[0].events_processed > 64 * 2 * 63, "every message takes several events"
    assert t_end == result.records[0].t_end
    half = RunProgress(err, [], enabled=False, estimate_events=100).describe(1e-3, 50, 10.0)
    assert half == "simulated 1 ms, 50 events, 50% of the estimate, ~10 s left"


def test_progress_bar_stays_off_with_json_off_a_terminal_and_for_short_runs(tmp_path, capsys):
    from mpisim.report.terminal import RunProgress

    assert not RunProgress(_Terminal(), [], enabled=False).enabled, "--json and --quiet turn it off"
    err = _Terminal()
    err.isatty = lambda: False  # type: ignore[method-assign]
    assert not RunProgress(err, [], enabled=True).enabled
    err = _Terminal()
    with RunProgress(err, [], enabled=True):
        pass  # a run shorter than the delay
    assert err.text() == ""


def test_program_tables_write_times_as_times_and_swept_keys_once(tmp_path, capsys):
    (tmp_path / "p.py").write_text("def main(comm, args):\n    yield from comm.barrier()\n"
                                   "    return {'elapsed_s': comm.now}\n")
    raw = {"name": "prog", "topology": STAR, "workload": {"kind": "program", "program": "p.py", "args": {"x": 1}},
           "sweep": {"workload.args.x": [1, 2]}}
    code, out, _ = run(capsys, "run", write(tmp_path, raw))
    assert code == 0
    header = next(line for line in out.splitlines() if "workload.args.x" in line)
    assert header.count("workload.args.x") == 1
    assert "e-0" not in out and " us " in out


def test_expectation_messages_write_sizes_exactly():
    from mpisim.scenario.expect import format_value

    assert format_value("bytes", 12289) == "12289 B" and format_value("bytes", 12288) == "12 KiB"


# --- what a new user ran into -------------------------------------------------------------------


def test_the_header_names_the_swept_presets_and_counts_one_node_in_the_singular(tmp_path, capsys):
    """A sweep over topology.preset names every preset ("(ib-hdr, swept)" named one of three); one node is "1 node"."""
    raw = {"topology": "ib-hdr", "payload": "size",
           "workload": {"kind": "collective", "collective": "barrier"}}
    code, out, _ = run(capsys, "run", write(tmp_path, raw, sweep={"topology.preset": ["roce-100g", "ib-hdr"]}))
    assert code == 0
    assert out.splitlines()[0].startswith("s: 2 ranks (presets roce-100g, ib-hdr, swept)")
    code, out, _ = run(capsys, "run", write(tmp_path, raw, topology={"preset": "laptop-shm", "ranks_per_node": 4}))
    assert code == 0
    assert out.splitlines()[0].startswith("s: 4 ranks (laptop-shm: 1 node x 4)")
    code, out, _ = run(capsys, "run", write(tmp_path, raw, topology={"preset": "laptop-shm", "ranks_per_node": 1}))
    assert code == 0
    assert out.splitlines()[0].startswith("s: 1 rank (laptop-shm: 1 node x 1)")


def test_exec_summary_counts_one_node_in_the_singular(capsys):
    code, _, err = run(capsys, "exec", "-n", "4", ROOT / "scenarios/programs/mpi4py/pi.py", "1000")
    assert code == 0
    assert "mpisim exec: 4 ranks on laptop-shm (1 node x 4), compute explicit" in err
    code, _, err = run(capsys, "exec", "-n", "2", "--topology", "ib-hdr", ROOT / "scenarios/programs/mpi4py/pi.py", "1000")
    assert code == 0 and "mpisim exec: 2 ranks on ib-hdr (2 nodes x 1)" in err


@pytest.mark.parametrize("ranks", ["3", "12"])
def test_exec_on_an_8_gpu_rail_preset_needs_whole_nodes(capsys, ranks):
    """-n 3 on dgx-h100 once said "topology.inter.nics: ... nics must equal ranks_per_node (3), got 8"."""
    code, out, err = run(capsys, "exec", "-n", ranks, "--topology", "dgx-h100", ROOT / "scenarios/programs/mpi4py/pi.py")
    assert code == 2 and out == ""
    assert err == (f"mpisim exec: -n: -n {ranks} does not fill nodes of 8 ranks: dgx-h100 has one NIC per rank on "
                   "rails, so -n must be a multiple of 8 (or set both topology.ranks_per_node=K and "
                   "topology.inter.nics=K)\n")


def test_exec_on_a_rail_preset_runs_whole_nodes_and_what_the_message_suggests(capsys):
    pi = ROOT / "scenarios/programs/mpi4py/pi.py"
    code, _, err = run(capsys, "exec", "-n", "3", "--topology", "dgx-h100", "--set", "topology.ranks_per_node=3",
                       "--set", "topology.inter.nics=3", pi, "100")
    assert code == 0 and "mpisim exec: 3 ranks on dgx-h100 (1 node x 3)" in err
    code, _, err = run(capsys, "exec", "-n", "144", "--topology", "gb200-nvl72", pi, "100")  # a one-rack preset
    assert code == 0 and "mpisim exec: 144 ranks on gb200-nvl72 (2 nodes x 72)" in err
    code, _, err = run(capsys, "exec", "-n", "3", "--topology", "ib-hdr", pi, "100")  # one rank per node: any -n
    assert code == 0 and "(3 nodes x 1)" in err


NVLS_PRESETS = "aws-p5, dgx-b200, dgx-h100, dgx-h200, gb200-nvl72"


@pytest.mark.parametrize(("preset", "intra"), [("dgx-a100", "nvswitch"), ("ib-hdr", "shm"), ("pcie-gen4-8gpu", "pcie")])
def test_nvls_where_the_switch_cannot_reduce_is_bad_input(tmp_path, capsys, preset, intra):
    """A100's NVSwitch (gen 2) has no NVLink SHARP; nvls there once ran and printed a row labelled nvls."""
    raw = {"topology": preset, "payload": "size",
           "workload": {"kind": "collective", "collective": "allreduce", "algorithm": ["nccl_ring", "nvls"],
                        "sizes": ["1 MiB"]}}
    path = write(tmp_path, raw)
    for command in ("check", "run"):
        code, out, err = run(capsys, command, path)
        assert code == 2 and out == "" and err.count("\n") == 1
        assert err == (f"{path}: workload.algorithm[1]: allreduce algorithm 'nvls' needs an NVSwitch that reduces in "
                       f"the switch (NVLink SHARP: intra.in_switch_reduction, as in the presets {NVLS_PRESETS}), "
                       f"which '{preset}' (intra: {intra}) does not have\n")


@pytest.mark.parametrize(("key", "value", "where"), [
    ("algorithms", {"allreduce": "nvls"}, "algorithms.allreduce"),
    ("workload", {"kind": "training", "params": "1M", "compute": "1 ms", "sync": "nvls"}, "workload.sync"),
    ("sweep", {"topology.preset": ["dgx-h100", "dgx-a100"]}, "sweep"),
])
def test_nvls_is_refused_wherever_a_scenario_names_it(tmp_path, capsys, key, value, where):
    raw = {"topology": "dgx-a100", "payload": "size",
           "workload": {"kind": "collective", "collective": "allreduce", "sizes": ["1 MiB"]}}
    if key == "sweep":
        raw = {**raw, "topology": "dgx-h100", "workload": {**raw["workload"], "algorithm": "nvls"}}
    code, _, err = run(capsys, "check", write(tmp_path, raw, **{key: value}))
    assert code == 2 and err.count("\n") == 1
    assert "allreduce algorithm 'nvls' needs an NVSwitch that reduces in the switch" in err
    assert "'dgx-a100' (intra: nvswitch) does not have" in err
    assert where in err


def test_nvls_runs_on_h100_and_auto_never_picks_it_on_a100(tmp_path, capsys):
    raw = {"topology": {"preset": "dgx-a100", "nodes": 1}, "payload": "size",
           "workload": {"kind": "collective", "collective": "allreduce", "algorithm": "auto",
                        "sizes": ["8 B", "64 KiB", "16 MiB", "256 MiB"]}}
    for selector in ("nccl", "mpich", "model"):
        code, out, err = run(capsys, "run", write(tmp_path, raw, algorithms={"selector": selector}), "--json")
        assert code == 0, err
        assert "nvls" not in {row["algorithm"] for row in json.loads(out)["results"]}
    code, out, _ = run(capsys, "run", write(tmp_path, raw, topology={"preset": "dgx-h100", "nodes": 1}), "--json")
    assert code == 0 and "nvls" in {row["algorithm"] for row in json.loads(out)["results"]}


def test_list_algorithms_marks_what_is_for_gpus(capsys):
    code, out, _ = run(capsys, "list", "algorithms", "--json")
    assert code == 0
    gpu = {(i["collective"], i["algorithm"]): i["gpu"] for i in json.loads(out)}
    assert gpu["allreduce", "nvls"] == "only" and gpu["allreduce", "nccl_ring"] == "nccl"
    assert gpu["alltoall", "nccl_p2p"] == "nccl" and gpu["allreduce", "ring"] is None
    code, out, _ = run(capsys, "list", "algorithms")
    nvls = next(line for line in out.splitlines() if " nvls " in line)
    assert "only (NVLS switch)" in nvls and "in_switch_reduction" in nvls


def test_list_workloads_says_training_is_hybrid_parallel_too(capsys):
    code, out, _ = run(capsys, "list", "workloads", "--json")
    assert code == 0
    summary = next(item["summary"] for item in json.loads(out) if item["kind"] == "training")
    for words in ("data-parallel", "tensor x pipeline x data", "ZeRO", "MoE"):
        assert words in summary


@pytest.mark.parametrize(("field", "value", "message"), [
    ("topology.inter.bandwidth", "1e-300 GB/s", "bandwidth must be at least 1 kB/s (8 kbps, slower than a 9600-baud "
                                                "serial line), got 1e-291 B/s"),
    ("topology.inter.bandwidth", "999 B/s", "bandwidth must be at least 1 kB/s"),
    ("topology.inter.host_bandwidth", "1 B/s", "host_bandwidth must be at least 1 kB/s"),
    ("mpi.copy_bandwidth", "1e-9 GB/s", "copy_bandwidth must be at least 1 kB/s"),
    ("topology.inter.bandwidth", "1001 PB/s", "'1001 PB/s' is out of range for a bandwidth (at most 1000 PB/s)"),
])
def test_absurd_bandwidths_are_bad_input(tmp_path, capsys, field, value, message):
    """1e-300 GB/s once ran and reported ~1e300 us."""
    code, out, err = run(capsys, "run", write(tmp_path), "--set", f"{field}={value}")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"{field}: {message}" in err
    assert main(["run", str(write(tmp_path)), "--set", f"{field}=8 kbps", "--set", "expect=[]"]) == 0  # the floor runs


def test_the_largest_size_cited_in_an_error_is_one_that_parses(tmp_path, capsys):
    """"at most 1 EB" cited a unit the parser refused; the limit it names now reads back as that limit."""
    code, _, err = run(capsys, "run", write(tmp_path), "--set", "mpi.eager_limit=1001 PB")
    assert code == 2 and "'1001 PB' is out of range for a size (at most 1000 PB)" in err
    assert main(["run", str(write(tmp_path)), "--set", "mpi.eager_limit=1000 PB", "--set", "expect=[]"]) == 0
