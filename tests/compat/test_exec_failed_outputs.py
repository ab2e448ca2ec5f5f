"""``mpisim exec -o DIR`` on a program that fails: the outputs, with the deadlock timeline, are written all the same."""

from __future__ import annotations

import json

from tests.compat.test_mpi4py_api import run

DEADLOCK = """\
    import numpy as np
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    comm.Barrier()
    comm.Recv(np.zeros(1), source=1 - comm.rank)
    """


def test_a_deadlocked_program_still_gets_its_results_report_and_timeline(tmp_path):
    out_dir = tmp_path / "out"
    code, _, err = run(tmp_path, DEADLOCK, 2, "-o", str(out_dir))
    assert code == 1
    assert "deadlock: 2 rank(s) blocked" in err  # the report on stderr, as without -o
    results = json.loads((out_dir / "results.json").read_text())
    assert results["failure"]["kind"] == "deadlock"
    assert "rank 0: blocked in recv(source=1" in results["failure"]["message"]
    assert results["expectations"] == []  # nothing was declared: no expectation invented
    spans = results["records"][0]
    assert spans, "the world's records (its timeline) are kept"
    assert (out_dir / "figures" / "timeline-world-0.png").stat().st_size > 0
    report = (out_dir / "report.md").read_text()
    assert "failed, unexpectedly (deadlock)" in report and "expected by the scenario" not in report


def test_a_rank_that_exits_with_a_status_keeps_it_and_the_outputs(tmp_path):
    out_dir = tmp_path / "out"
    code, _, err = run(tmp_path, """\
        import sys
        from mpi4py import MPI
        MPI.COMM_WORLD.Barrier()
        if MPI.COMM_WORLD.rank == 1:
            sys.exit(3)
        MPI.COMM_WORLD.Barrier()
        """, 2, "-o", str(out_dir))
    assert code == 3, err
    results = json.loads((out_dir / "results.json").read_text())
    assert results["failure"]["error"] == "ProgramExit"
