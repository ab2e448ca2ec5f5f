"""Sweeps: grid order, parallel == sequential, the results file, --resume after an interruption."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import tests.scenario.fake_workloads  # noqa: F401  (registers the fake_pingpong workload)
from mpisim.cli import main
from mpisim.errors import ConfigError, DeadlockError, WorkerLost
from mpisim.report.terminal import failure_text
from mpisim.scenario import load_dict, load_file, run_scenario
from mpisim.scenario.sweep import PointTask, _raise_if_error, _run_task, read_results_file

ROOT = Path(__file__).resolve().parents[2]
STAR = {"nodes": 2, "inter": {"kind": "star", "bandwidth": "1 GB/s", "latency": "1 us"}}


def raw_scenario(tmp_path, sweep, **workload):
    return {
        "topology": STAR,
        "network": "analytic",
        "workload": {"kind": "fake_pingpong", "sizes": ["1 KiB"], "log_file": str(tmp_path / "ran.log"), **workload},
        "sweep": sweep,
    }


def ran(tmp_path) -> list[str]:
    """The seeds the fake workload ran, in order (each point logs its seed)."""
    log = tmp_path / "ran.log"
    return log.read_text().split() if log.exists() else []


def test_rows_carry_the_swept_keys_in_grid_order():
    s = load_dict({
        "topology": STAR,
        "network": "analytic",
        "workload": {"kind": "fake_pingpong", "sizes": ["1 KiB"]},
        "sweep": {"topology.nodes": [2, 3], "mpi.eager_limit": ["512 B", "64 KiB"]},
        "expect": [{"metric": "time_s", "where": {"topology.nodes": 3, "mpi.eager_limit": "64 KiB"}, "max": "3 us"}],
    })
    result = run_scenario(s)
    keys = [(row["topology.nodes"], row["mpi.eager_limit"], row["ranks"]) for row in result.rows]
    assert keys == [(2, "512 B", 2), (2, "64 KiB", 2), (3, "512 B", 3), (3, "64 KiB", 3)]
    eager, rendezvous = result.rows[1]["time_s"], result.rows[0]["time_s"]
    assert rendezvous > eager, "below the eager limit there is no RTS/CTS round trip"
    assert result.passed and result.expectations[0]["rows"] == 1
    assert [w.point for w in result.records][:2] == [
        {"topology.nodes": 2, "mpi.eager_limit": "512 B"}, {"topology.nodes": 2, "mpi.eager_limit": "64 KiB"}
    ]
    assert "sweep" in result.scenario and result.scenario["topology"]["nodes"] == 2


def test_parallel_points_give_the_same_result_as_sequential(tmp_path):
    s = load_dict(raw_scenario(tmp_path, {"seed": [0, 1, 2], "workload.sizes": [["1 KiB"], ["1 MiB"]]}))
    sequential = run_scenario(s, jobs=1)
    parallel = run_scenario(s, jobs=2, results_file=tmp_path / "points.jsonl")
    assert parallel.contract("v") == sequential.contract("v")
    assert parallel.to_dict()["records"] == sequential.to_dict()["records"]
    done, damaged = read_results_file(tmp_path / "points.jsonl")
    assert len(done) == 6 and not damaged


def test_a_failing_point_in_the_pool_raises_its_mpi_error(tmp_path):
    s = load_dict(raw_scenario(tmp_path, {"workload.mode": ["ok", "deadlock"]}))
    with pytest.raises(DeadlockError, match="cycle of waits"):
        run_scenario(s, jobs=2)


def test_a_killed_worker_is_one_line_naming_its_sweep_point(tmp_path):
    # The ok points sleep, so they are still running when the other worker dies: the message
    # must name the dead worker's point, not the first unfinished one.
    s = load_dict(raw_scenario(tmp_path, {"workload.mode": ["ok", "die", "ok"]}, sleep="1 s"))
    with pytest.raises(WorkerLost) as info:
        run_scenario(s, jobs=2)
    message = str(info.value)
    assert message.startswith("sweep point workload.mode=die: its worker process died"), message
    assert "\n" not in message and "--resume" in message
    assert failure_text(info.value) == message + "\n"  # what mpisim run prints: no 'internal error'


def test_config_errors_from_workers_keep_their_path():
    raw = {"topology": {**STAR, "nodes": 0}, "workload": {"kind": "fake_pingpong", "sizes": ["1 B"]}}
    outcome = _run_task(PointTask(0, {}, raw, "s.yaml", "{}", "h"))
    with pytest.raises(ConfigError) as info:
        _raise_if_error(outcome)
    assert str(info.value) == "s.yaml: topology.nodes: must be a whole number of at least 1, got 0"
    assert type(info.value).__name__ == "TopologyError"


def test_resume_skips_finished_points_and_ignores_a_line_cut_short(tmp_path):
    s = load_dict(raw_scenario(tmp_path, {"seed": [0, 1, 2, 3, 4]}))
    points = tmp_path / "points.jsonl"
    full = run_scenario(s, results_file=points)
    assert ran(tmp_path) == ["seed=0", "seed=1", "seed=2", "seed=3", "seed=4"]
    lines = points.read_text().splitlines(keepends=True)
    points.write_text(lines[0] + lines[3] + lines[1][: len(lines[1]) // 2])  # a crash mid-write
    (tmp_path / "ran.log").unlink()

    resumed = run_scenario(s, results_file=points, resume=True)
    assert ran(tmp_path) == ["seed=1", "seed=2", "seed=4"]
    assert resumed.contract("v") == full.contract("v")
    done, damaged = read_results_file(points)
    assert len(done) == 5 and not damaged, "the cut line was dropped before appending"


def test_resume_reruns_points_of_a_changed_scenario_and_keeps_those_of_an_extended_sweep(tmp_path):
    points = tmp_path / "points.jsonl"
    run_scenario(load_dict(raw_scenario(tmp_path, {"seed": [0, 1]})), results_file=points)
    (tmp_path / "ran.log").unlink()
    run_scenario(load_dict(raw_scenario(tmp_path, {"seed": [0, 1, 2]})), results_file=points, resume=True)
    assert ran(tmp_path) == ["seed=2"]
    (tmp_path / "ran.log").unlink()
    changed = raw_scenario(tmp_path, {"seed": [0, 1, 2]})
    changed["mpi"] = {"eager_limit": "1 KiB"}
    run_scenario(load_dict(changed), results_file=points, resume=True)
    assert ran(tmp_path) == ["seed=0", "seed=1", "seed=2"]


def test_without_resume_the_results_file_starts_afresh(tmp_path):
    points = tmp_path / "points.jsonl"
    points.write_text("garbage\n")
    run_scenario(load_dict(raw_scenario(tmp_path, {"seed": [0, 1]})), results_file=points)
    done, damaged = read_results_file(points)
    assert len(done) == 2 and not damaged


@pytest.mark.slow  # interrupts a sweep running in a subprocess
def test_interrupted_sweep_resumes_to_the_same_result(tmp_path, capsys):
    """Kill `mpisim run` (and its workers) after the first finished point, then --resume."""
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(raw_scenario(tmp_path, {"seed": [0, 1, 2, 3, 4, 5]}, sleep="0.25 s")))
    out = tmp_path / "out"
    code = "import sys, tests.scenario.fake_workloads; from mpisim.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "run", str(path), "-o", str(out), "--jobs", "2"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )
    points = out / "sweep.jsonl"
    deadline = time.monotonic() + 60
    try:
        while not (points.exists() and "\n" in points.read_text()):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "no point finished within 60 s"
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the run and its worker processes
        proc.wait()
        proc.stderr.close()
    done, _ = read_results_file(points)
    assert 1 <= len(done) < 6, "the file holds the points finished before the kill"
    assert not (out / "results.json").exists(), "no results.json from an interrupted run"
    finished_seeds = {f"seed={p.point['seed']}" for p in done.values()}

    (tmp_path / "ran.log").unlink()
    assert main(["run", str(path), "-o", str(out), "--resume", "--jobs", "1", "--json"]) == 0
    resumed = capsys.readouterr().out
    assert set(ran(tmp_path)) == {f"seed={i}" for i in range(6)} - finished_seeds

    assert main(["run", str(path), "-o", str(tmp_path / "fresh"), "--jobs", "1", "--json"]) == 0
    fresh = capsys.readouterr().out
    assert resumed == fresh
    without_meta = [
        {k: v for k, v in json.loads((d / "results.json").read_text()).items() if k != "meta"}
        for d in (out, tmp_path / "fresh")
    ]
    assert without_meta[0] == without_meta[1]


def test_default_results_file_is_kept_for_resume_only_until_the_sweep_finishes(tmp_path, monkeypatch, capsys):
    from mpisim.scenario.sweep import default_results_file

    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(raw_scenario(tmp_path, {"workload.mode": ["ok", "deadlock"]})))
    s = load_file(path)
    assert default_results_file(s, tmp_path / "out") == tmp_path / "out" / "sweep.jsonl"
    assert default_results_file(s) == Path("grid.sweep.jsonl")
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(path), "--jobs", "1"]) == 1, "the second point deadlocks"
    done, _ = read_results_file(tmp_path / "grid.sweep.jsonl")
    assert [p.point for p in done.values()] == [{"workload.mode": "ok"}], "kept for --resume"
    (tmp_path / "ran.log").unlink()
    assert main(["run", str(path), "--resume", "--set", "sweep={workload.mode: [ok]}"]) == 0
    assert ran(tmp_path) == [], "the finished point was not run again"
    assert not (tmp_path / "grid.sweep.jsonl").exists(), "removed once the sweep finished"
    capsys.readouterr()


# --- executors ------------------------------------------------------------------------------------


def test_executor_specs_parse_and_bad_ones_name_the_flag():
    from mpisim.scenario.executors import ExecutorSpec, parse_executor

    assert parse_executor("local") == ExecutorSpec("local")
    assert parse_executor("local:3") == ExecutorSpec("local", workers=3)
    assert parse_executor("dask") == parse_executor("dask:") == ExecutorSpec("dask")
    assert parse_executor("dask:tcp://10.0.0.5:8786") == ExecutorSpec("dask", address="tcp://10.0.0.5:8786")
    for bad, message in [("local:0", "local:N with N a whole number"), ("local:x", "local:N"),
                         ("ray", "expected local, local:N, dask or dask:ADDRESS, got 'ray'")]:
        with pytest.raises(ConfigError, match=message) as info:
            parse_executor(bad)
        assert info.value.path == "--executor"


def test_cli_refuses_a_bad_executor_and_jobs_with_executor(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw_scenario(tmp_path, {"seed": [0, 1]})))
    assert main(["run", str(path), "--executor", "mpi:4"]) == 2
    assert capsys.readouterr().err == (
        f"{path}: --executor: expected local, local:N, dask or dask:ADDRESS, got 'mpi:4'\n")
    assert main(["run", str(path), "--executor", "local:2", "--jobs", "2"]) == 2
    assert "not both" in capsys.readouterr().err
    assert ran(tmp_path) == [], "nothing ran"


def test_missing_dask_is_one_line_of_bad_input(tmp_path, capsys, monkeypatch):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw_scenario(tmp_path, {"seed": [0, 1]})))
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    assert main(["run", str(path), "--executor", "dask:"]) == 2
    assert capsys.readouterr().err == (
        f"{path}: --executor: the dask executor needs Dask distributed: pip install 'mpisim[dask]'\n")


@pytest.mark.slow  # starts a Dask LocalCluster
def test_dask_local_cluster_gives_the_local_pools_rows_and_resumes_its_file(tmp_path):
    """A sweep on a 2-worker Dask LocalCluster: same rows as local:1, and --resume across executors."""
    pytest.importorskip("distributed")
    s = load_dict(raw_scenario(tmp_path, {"seed": [0, 1, 2], "workload.sizes": [["1 KiB"], ["1 MiB"]]}))
    local = run_scenario(s, executor="local:1")
    points = tmp_path / "points.jsonl"
    (tmp_path / "ran.log").unlink()
    # Half the points finished earlier on the local pool; Dask runs only the others.
    half = load_dict(raw_scenario(tmp_path, {"seed": [0, 1, 2], "workload.sizes": [["1 KiB"]]}))
    run_scenario(half, executor="local:1", results_file=points)
    (tmp_path / "ran.log").unlink()
    on_dask = run_scenario(s, executor="dask:", results_file=points, resume=True)
    assert json.dumps(on_dask.contract("v"), sort_keys=True) == json.dumps(local.contract("v"), sort_keys=True)
    assert on_dask.to_dict()["records"] == local.to_dict()["records"]
    assert sorted(ran(tmp_path)) == ["seed=0", "seed=1", "seed=2"], "only the 1 MiB points ran on Dask"
    done, damaged = read_results_file(points)
    assert len(done) == 6 and not damaged


@pytest.mark.slow  # starts a Dask LocalCluster
def test_a_failing_point_on_dask_raises_its_mpi_error(tmp_path):
    pytest.importorskip("distributed")
    s = load_dict(raw_scenario(tmp_path, {"workload.mode": ["ok", "deadlock"]}))
    with pytest.raises(DeadlockError, match="cycle of waits"):
        run_scenario(s, executor="dask")


def _worker_timers(dask_worker) -> dict[str, float]:
    return {name: callback.callback_time for name, callback in dask_worker.periodic_callbacks.items()}


@pytest.mark.slow  # starts a Dask LocalCluster
def test_the_local_clusters_workers_leave_the_gil_to_the_point():
    """The LocalCluster's workers get its settings: no profiler, no memory monitor, a slow tick
    (each wake-up of a worker's event loop takes the GIL from the running point)."""
    distributed = pytest.importorskip("distributed")
    import dask

    from mpisim.scenario.executors import _start_local_cluster

    before = dask.config.get("distributed.worker.profile.enabled")
    cluster = _start_local_cluster(distributed)
    try:
        with distributed.Client(cluster) as client:
            timers = client.run(_worker_timers)
    finally:
        cluster.close()
    assert len(timers) == (os.cpu_count() or 1)
    for worker_timers in timers.values():
        assert "profile" not in worker_timers and "memory_monitor" not in worker_timers
        assert min(worker_timers.values()) >= 1000, worker_timers  # milliseconds
    assert dask.config.get("distributed.worker.profile.enabled") == before, "the caller's settings are left alone"
