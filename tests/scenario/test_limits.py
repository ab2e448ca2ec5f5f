"""Run limits: ``limits: {simulated_time, events, wall_time}`` and ``--limit`` stop a run with a report
of where every rank was (exit 1), and records stay bounded so memory is flat on a long run."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import textwrap
import time

import pytest

from mpisim.cli import main
from mpisim.errors import LimitReached
from mpisim.scenario import load_file, run_scenario

FOREVER = """
import numpy as np

def main(comm):
    buf = np.zeros(256, dtype=np.float32)
    while True:          # calls MPI for ever
        yield from comm.allreduce(buf)
"""


@pytest.fixture
def forever(tmp_path):
    (tmp_path / "forever.py").write_text(FOREVER)
    path = tmp_path / "forever.yaml"
    path.write_text("topology: {nodes: 4, inter: {kind: star, bandwidth: 10 Gbps, latency: 2 us}}\n"
                    "payload: size\nworkload: {kind: program, program: forever.py:main}\n")
    return path


def _cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def test_simulated_time_limit_stops_a_program_that_never_ends(forever):
    with pytest.raises(LimitReached) as info:
        run_scenario(load_file(forever, [("limits.simulated_time", "2 ms")]))
    text = str(info.value)
    assert info.value.limit == "simulated_time"
    assert text.startswith("stopped at the limit of 2 ms of simulated time (limits.simulated_time)")
    assert "0 of 4 ranks had finished" in text
    for rank in range(4):
        assert f"rank {rank}: in allreduce(1024 B, op=sum" in text
    assert info.value.ranks == [0, 1, 2, 3]


def test_event_limit_from_the_command_line(forever):
    code, _, err = _cli("run", forever, "--limit", "events=20000")
    assert code == 1
    assert err.splitlines()[1].startswith("stopped at the limit of 20,000 events (limits.events)")
    events = int(err.split(" events,")[0].rsplit(", ", 1)[1].replace(",", ""))
    assert 20_000 <= events < 20_100  # checked where simulated time moves: a few events past it at most
    assert "Traceback" not in err


def test_wall_time_limit_stops_on_time(forever):
    started = time.perf_counter()
    code, _, err = _cli("run", forever, "--limit", "wall_time=0.5 s")
    assert code == 1
    assert "(limits.wall_time)" in err and "rank 3: in allreduce" in err
    assert time.perf_counter() - started < 3


def test_json_names_the_limit_as_the_failure(forever):
    code, out, _ = _cli("run", forever, "--limit", "simulated_time=1ms", "--json")
    assert code == 1
    document = json.loads(out)
    assert document["failure"]["kind"] == "limit_reached"
    assert document["failure"]["ranks"] == [0, 1, 2, 3]
    assert document["scenario"]["limits"] == {"simulated_time": 0.001}


def test_a_scenario_may_expect_to_be_stopped(forever):
    result = run_scenario(load_file(forever, [("limits.events", 5000), ("expect_failure", "limit_reached")]))
    assert result.passed and result.failure["kind"] == "limit_reached"


def test_limits_that_are_not_reached_change_nothing(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("topology: {preset: ib-hdr, nodes: 8}\n"
                    "workload: {kind: collective, collective: allreduce, algorithm: ring, sizes: [1 MiB]}\n")
    free = run_scenario(load_file(path))
    bounded = run_scenario(load_file(path, [("limits", {"simulated_time": "1 s", "events": 10**9,
                                                        "wall_time": "600 s"})]))
    assert bounded.rows == free.rows


@pytest.mark.parametrize(("argv", "message"), [
    (["--limit", "speed=3"], "--limit: expected KEY=VALUE with KEY one of simulated_time, events, wall_time"),
    (["--limit", "events=1.5"], "limits.events: 1.5 is not a whole number"),
    (["--limit", "wall_time=5"], "limits.wall_time:"),
    (["--limit", "simulated_time=0 s"], "limits.simulated_time: expected a limit greater than 0"),
    (["--set", "limits.cpu=1"], "limits.cpu: unknown key 'cpu'"),
])
def test_bad_limits_are_bad_input(forever, argv, message):
    code, _, err = _cli("run", forever, *argv)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.slow  # measures peak memory in subprocesses
def test_memory_stays_flat_on_a_long_run(forever):
    """Records are bounded: a run five times as long peaks at the same memory (budget made small here)."""
    probe = textwrap.dedent(f"""
        import resource, sys
        import mpisim.scenario.tracing as tracing
        tracing.RECORD_BUDGET = 5_000
        from mpisim.errors import LimitReached
        from mpisim.scenario import load_file, run_scenario
        try:
            run_scenario(load_file({str(forever)!r}, [("limits.events", int(sys.argv[1]))]))
        except LimitReached:
            print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    """)
    peaks = [int(subprocess.run([sys.executable, "-c", probe, str(n)], capture_output=True, text=True,
                                check=True).stdout) for n in (40_000, 200_000)]
    assert peaks[1] - peaks[0] < 8 * 1024, peaks  # KiB: under 8 MiB more for 5x the events
