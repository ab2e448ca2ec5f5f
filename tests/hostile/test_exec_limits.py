"""``mpisim exec --limit``: a watchdog stops user code between MPI calls, looping or sleeping."""

from __future__ import annotations

import re

import pytest

from tests.hostile.helpers import cli

PROGRAMS = {
    "spin": "while True:\n        pass\n",
    "sleep": "time.sleep(3600)\n",
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_wall_time_stops_a_rank_between_mpi_calls(tmp_path, name):
    program = tmp_path / f"{name}.py"
    program.write_text("import time\nfrom mpi4py import MPI\ncomm = MPI.COMM_WORLD\ncomm.Barrier()\n"
                       f"if comm.rank == 1:\n    {PROGRAMS[name]}comm.Barrier()\n")
    code, _, err = cli("exec", "-n", "4", "--limit", "wall_time=0.5s", str(program))
    assert code == 1, err
    found = re.search(r"stopped at the limit of 500 ms of wall time \(limits\.wall_time\) after ([\d.]+) s", err)
    assert found, err
    assert float(found.group(1)) < 1.5
    assert "internal error" not in err


def test_exec_limit_keys_are_checked(tmp_path):
    program = tmp_path / "p.py"
    program.write_text("from mpi4py import MPI\n")
    code, _, err = cli("exec", "-n", "2", "--limit", "wall_clock=1s", str(program))
    assert code == 2 and "--limit: expected KEY=VALUE with KEY one of simulated_time, events, wall_time" in err
