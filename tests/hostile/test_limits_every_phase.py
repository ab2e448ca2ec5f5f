"""Limits that always stop: wall_time in planning, bucket building and the event loop; days refused up front."""

from __future__ import annotations

import re
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
    """params: 1e12 gives each rank ~10^5 buckets to set up inside one event: the event-loop check never comes."""
    code, _, err = cli("run", str(SCENARIOS / "training-300m-hybrid.yaml"), "--set", "workload.model={params: 1e12}",
                       "--limit", "wall_time=1.5s")
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


def test_a_bucket_cap_far_below_the_model_is_refused_for_its_memory_not_started(monkeypatch):
    """params: 1e13 in 100 MiB buckets: 64 GPUs x 381,470 bucket-ready events, ~7 GB (tracemalloc: ~309 B
    each). The estimate counted only the ranks (84 MB): the run started, its garbage collector's pauses
    over tens of millions of objects held off the wall_time limit by seconds, and memory ran out first."""
    monkeypatch.setattr("mpisim.collectives.memory.available_memory", lambda: 4 * 2**30)
    started = time.perf_counter()
    code, _, err = cli("run", str(SCENARIOS / "training-300m-hybrid.yaml"), "--set", "workload.model={params: 1e13}",
                       "--limit", "wall_time=5s")
    one_line_exit_2(code, err, "training-300m-hybrid.yaml: topology: this run would need about 7.4",
                    "bucket events 7.3", "larger gradient buckets (workload.bucket_cap)")
    assert time.perf_counter() - started < 5
