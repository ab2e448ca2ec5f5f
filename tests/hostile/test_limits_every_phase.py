"""Limits that always stop: wall_time in planning, bucket building and the event loop; days refused up front."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from mpisim.engine.limits import WallTimeReached, wall_clock_watchdog
from tests.hostile.helpers import cli, one_line_exit_2

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def test_a_bucket_cap_mistyped_by_units_is_refused_before_any_bucket_is_built():
    started = time.perf_counter()
    code, _, err = cli("run", str(SCENARIOS / "capacity-plan-7b-h100.yaml"), "--set", "workload.bucket_cap=500 B",
                       "--limit", "wall_time=10s")
    one_line_exit_2(code, err, "capacity-plan-7b-h100.yaml: workload.bucket_cap: 500 B buckets", "allreduces per step")
    assert time.perf_counter() - started < 10


def test_a_run_estimated_at_days_is_refused_unless_asked(monkeypatch):
    # Plenty of memory, so that the refusal is the duration's on any machine, not the memory's.
    monkeypatch.setattr("mpisim.collectives.memory.available_memory", lambda: 2**50)
    code, _, err = cli("run", str(SCENARIOS / "capacity-plan-7b-h100.yaml"), "--set", "workload.bucket_cap=20 KiB")
    one_line_exit_2(code, err, "estimate before the run:", "days", "--long-run")


def test_wall_time_stops_a_training_step_whose_ranks_each_plan_for_seconds():
    """params: 1e12 gives each rank ~10^5 buckets to set up inside one event: the event-loop check never comes.

    `fold: tp` keeps every data-parallel replica: with replicas folded the same step finishes within the limit.
    """
    code, _, err = cli("run", str(SCENARIOS / "training-300m-hybrid.yaml"), "--set", "workload.model={params: 1e12}",
                       "--set", "workload.fold=tp", "--limit", "wall_time=1.5s")
    assert code == 1, err
    found = re.search(r"stopped at the limit of 1\.5 s of wall time \(limits\.wall_time\) after ([\d.]+) s", err)
    assert found, err
    assert float(found.group(1)) < 1.5 + 1.0


def test_the_watchdog_interrupts_a_busy_loop_and_a_sleep_and_restores_the_previous_timer():
    import signal

    for work in (lambda: time.sleep(30), lambda: [0 for _ in iter(int, 1)]):
        started = time.perf_counter()
        try:
            with wall_clock_watchdog(0.3):
                work()
        except WallTimeReached as err:
            assert err.limit == "wall_time"
        assert time.perf_counter() - started < 1.3
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


#: Run in a fresh interpreter: how long the command took from its first line, and its peak memory.
#: The peak is this process's own (VmHWM): Linux carries a parent's ru_maxrss across fork and exec, so
#: a command started from a large test worker would report the worker's peak.
_MEASURED = """
import resource, sys, time
from mpisim.cli import main
started = time.perf_counter()
try:
    code = main(sys.argv[1:])
finally:
    try:
        with open("/proc/self/status") as status:
            rss = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"measured {time.perf_counter() - started:.3f} s {rss} B", file=sys.stderr)
sys.exit(code)
"""


def _measured_cli(*args: str) -> tuple[int, str, float, int]:
    """(exit code, stderr, seconds from the command's start to its end, peak resident bytes)."""
    done = subprocess.run([sys.executable, "-c", _MEASURED, *args], capture_output=True, text=True, timeout=120,
                          cwd=SCENARIOS.parent, env={**os.environ, "PYTHONPATH": str(SCENARIOS.parent)})
    found = re.search(r"measured ([\d.]+) s (\d+) B", done.stderr)
    assert found, done.stderr
    return done.returncode, done.stderr, float(found.group(1)), int(found.group(2))


def test_a_bucket_cap_far_below_the_model_runs_small_and_stops_at_the_limit():
    """params: 1e13 in 100 MiB buckets: 64 GPUs x 381,470 buckets. With an event per GPU and bucket
    (~309 B each) that was 7.4 GB: the estimate refused it, and before it did, the run started and its
    garbage collector's pauses over tens of millions of objects held the wall_time limit off by
    seconds. The ranks now hold only the bucket events fired and not yet processed: the run starts,
    stays within a few hundred MB, and the command ends within a second of its limit."""
    code, err, seconds, peak = _measured_cli("run", "scenarios/training-300m-hybrid.yaml",
                                             "--set", "workload.model={params: 1e13}", "--limit", "wall_time=3s")
    assert code == 1 and "stopped at the limit of 3 s of wall time (limits.wall_time)" in err, err
    assert seconds < 3 + 1.0, err
    assert peak < 2**30, err


def test_one_clock_for_the_estimate_and_the_run():
    """A 16 KB bucket_cap gives a 7B model 874,936 buckets: planning them takes seconds, and the
    estimate, the run's own estimate and the run each started the limit's clock anew (a 5 s limit
    stopped the command after 12 s). They share one clock now."""
    code, err, seconds, _ = _measured_cli("run", "scenarios/capacity-plan-7b-h100.yaml", "--set", "sweep={}",
                                          "--set", "workload.bucket_cap=16KB", "--limit", "wall_time=3s")
    assert code == 1 and "stopped at the limit of 3 s of wall time (limits.wall_time)" in err, err
    assert seconds < 3 + 1.0, err


def test_a_nested_watchdog_keeps_the_enclosing_clock():
    """An inner watchdog of the same limit started later does not push the stop back; a shorter one
    fires first and gives the enclosing one back its remaining time."""
    import signal

    started = time.perf_counter()
    try:
        with wall_clock_watchdog(0.6):
            time.sleep(0.4)
            with wall_clock_watchdog(0.6):  # would stop at 1.0 s on a clock of its own
                time.sleep(5)
    except WallTimeReached:
        pass
    assert 0.55 < time.perf_counter() - started < 0.9
    started = time.perf_counter()
    try:
        with wall_clock_watchdog(0.8):
            try:
                with wall_clock_watchdog(0.2):
                    time.sleep(5)
            except WallTimeReached:
                assert time.perf_counter() - started < 0.5
            time.sleep(5)
    except WallTimeReached:
        pass
    assert 0.75 < time.perf_counter() - started < 1.1
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
