"""mpisim exec: mpiexec's behaviour (output, stdin, exit codes), the reports a student reads, privatization, timing."""

from __future__ import annotations

import contextlib
import io
import json
import re
import textwrap
from pathlib import Path

import pytest

from mpisim.cli import main
from mpisim.scenario.load import load_dict
from mpisim.scenario.run import run_scenario

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "scenarios" / "programs" / "mpi4py"


def run_exec(*argv: str, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            _stdin(stdin):
        code = main(["exec", *argv])
    return code, out.getvalue(), err.getvalue()


@contextlib.contextmanager
def _stdin(text: str):
    import sys

    saved = sys.stdin
    sys.stdin = io.StringIO(text)
    try:
        yield
    finally:
        sys.stdin = saved


def program(tmp_path: Path, source: str, name: str = "prog.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


def test_head_to_head_deadlock_names_both_ranks_their_call_and_line():
    code, out, err = run_exec("-n", "2", "--topology", "ib-hdr", str(CORPUS / "head_to_head.py"))
    assert code == 1
    assert "deadlock: 2 rank(s) blocked" in err
    assert err.count("at head_to_head.py:22: comm.Send(outgoing, dest=other, tag=0)") == 2
    assert "cycle of waits: rank 0 -> rank 1 -> rank 0" in err
    # below the eager limit the same program completes
    code, out, _ = run_exec("-n", "2", "--topology", "ib-hdr", str(CORPUS / "head_to_head.py"), "1024")
    assert code == 0 and "rank 0: received 1024 bytes of 1 from rank 1" in out


def test_an_exception_shows_the_ranks_traceback_in_the_users_file_and_where_the_others_are(tmp_path):
    path = program(tmp_path, """\
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        def helper(x):
            return 1 / x
        if comm.rank == 2:
            helper(0)
        comm.Barrier()
        """)
    code, _, err = run_exec("-n", "4", path)
    assert code == 1
    assert "rank 2 raised ZeroDivisionError: division by zero" in err
    assert re.search(r'prog\.py", line 6, in <module>\n\s+helper\(0\)', err)
    assert re.search(r'prog\.py", line 4, in helper', err)
    assert "mpisim/" not in err.split("Traceback")[1], "the simulator's frames are left out"
    assert err.count("at prog.py:7: comm.Barrier()") == 3


@pytest.mark.parametrize(("source", "code", "message"), [
    ("import sys\nfrom mpi4py import MPI\nif MPI.COMM_WORLD.rank == 1:\n    sys.exit(3)\nMPI.COMM_WORLD.Barrier()\n",
     3, "rank 1 exited with status 3"),
    ("from mpi4py import MPI\nif MPI.COMM_WORLD.rank == 0:\n    MPI.COMM_WORLD.Abort(7)\nMPI.COMM_WORLD.Barrier()\n",
     7, "rank 0 called MPI_Abort(MPI_COMM_WORLD, 7)"),
    ("from mpi4py import MPI\nMPI.COMM_WORLD.Spawn('x')\n", 1, "rank 0: MPI.Comm.Spawn is not supported by mpisim exec"),
    ("from mpi4py import MPI\nMPI.INT.Pack_external_size('external32', 1)\n", 1,
     "rank 0: MPI.Datatype.Pack_external_size is not supported"),
])
def test_exit_codes_are_the_programs(tmp_path, source, code, message):
    got, _, err = run_exec("-n", "2", program(tmp_path, source))
    assert got == code
    assert message in err


def test_stdin_goes_to_rank_0_and_output_keeps_the_simulations_order():
    code, out, err = run_exec("-n", "3", "--tag-output", str(CORPUS / "stdin_sum.py"), stdin="1 2 3 4 5 6\n")
    assert code == 0
    assert "[0] total of 6 numbers: 21" in out
    assert sorted(line[:3] for line in out.splitlines()) == ["[0]", "[0]", "[1]", "[2]"]
    assert "simulated time" in err and "time in MPI calls per rank: 0:" in err


def test_same_program_same_output_byte_for_byte():
    runs = [run_exec("-n", "4", "--topology", "ib-hdr", "--json", str(CORPUS / "collectives.py")) for _ in range(2)]
    assert runs[0] == runs[1]
    doc = json.loads(runs[0][1])
    row = doc["results"][0]
    assert row["ranks"] == 4 and row["messages"] > 0 and len(row["mpi_time_s"]) == 4
    assert "rank 3: Allgather [10, 11, 12, 13]" in runs[0][2], "--json sends the program's stdout to stderr"


def test_each_rank_has_its_own_main_and_modules_from_the_programs_folder(tmp_path):
    program(tmp_path, "counter = []\n", "state.py")
    path = program(tmp_path, """\
        import pickle
        from mpi4py import MPI
        import state

        class Point:
            def __init__(self, x):
                self.x = x

        comm = MPI.COMM_WORLD
        rank = comm.Get_rank()          # bound at import time, as scripts do
        state.counter.append(rank)
        total = 0
        def add(v):
            global total
            total += v
        add(rank)
        p = comm.sendrecv(Point(rank), dest=(rank + 1) % comm.size, source=(rank - 1) % comm.size)
        assert type(p) is Point
        print(rank, state.counter, total, p.x)
        """)
    code, out, err = run_exec("-n", "3", path)
    assert code == 0, err
    assert sorted(out.splitlines()) == ["0 [0] 0 2", "1 [1] 1 0", "2 [2] 2 1"]
    import sys

    assert "state" not in sys.modules, "the program's modules do not outlive the run"


def test_the_real_mpi4py_is_not_shadowed_after_a_run(tmp_path):
    import sys

    before = sys.modules.get("mpi4py")
    run_exec("-n", "2", str(CORPUS / "hello.py"))
    assert sys.modules.get("mpi4py") is before


@pytest.mark.parametrize(("mode", "expected"), [("explicit", 0.25), ("none", 0.0)])
def test_compute_explicit_charges_what_the_program_declares(tmp_path, mode, expected):
    path = program(tmp_path, """\
        import mpisim
        from mpi4py import MPI
        t0 = MPI.Wtime()
        mpisim.compute(0.25)
        print(MPI.Wtime() - t0)
        """)
    code, out, _ = run_exec("-n", "1", "--compute", mode, path)
    assert code == 0 and float(out) == pytest.approx(expected)


def test_compute_measured_charges_wall_time_and_says_it_is_not_deterministic(tmp_path):
    path = program(tmp_path, """\
        import time
        from mpi4py import MPI
        t0 = MPI.Wtime()
        end = time.perf_counter() + 0.02
        while time.perf_counter() < end:
            pass
        print(MPI.Wtime() - t0)
        """)
    code, out, err = run_exec("-n", "1", "--compute", "measured", "--speed", "2", path)
    assert code == 0 and float(out) >= 0.04
    assert "not deterministic" in err


def test_mpi4py_program_as_a_scenario_workload():
    scenario = load_dict({"topology": {"preset": "ib-hdr", "nodes": 4},
                          "workload": {"kind": "program", "program": str(CORPUS / "ring.py"), "api": "mpi4py"}})
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = run_scenario(scenario)
    assert result.rows[0]["ranks"] == 4 and result.rows[0]["messages"] == 4
    assert "rank 0: the token came back with 6 after [0, 1, 2, 3]" in out.getvalue()


@pytest.mark.parametrize(("raw", "text"), [
    ({"api": "mpi4py", "args": "x"}, "args: expected the program's command-line arguments as a list"),
    ({"api": "fortran"}, "api: expected one of generator, mpi4py"),
    ({"api": "mpi4py", "compute": "fast"}, "compute: expected one of none, measured, explicit"),
    ({"api": "mpi4py", "speed": 2.0}, "speed: speed scales measured compute"),
])
def test_bad_mpi4py_workloads_are_one_line_errors(raw, text):
    from mpisim.errors import ConfigError

    with pytest.raises(ConfigError, match=re.escape(text)):
        load_dict({"topology": "ib-hdr", "workload": {"kind": "program", "program": "x.py", **raw}})


def _osu_table(out: str) -> dict[int, float]:
    return {int(a): float(b) for a, b in (line.split() for line in out.splitlines() if line[:1].isdigit())}


def test_osu_latency_script_gives_the_p2p_workloads_latencies_within_1_percent():
    code, out, _ = run_exec("-n", "2", "--topology", "ib-hdr", str(CORPUS / "osu_latency.py"), str(1 << 20), "3")
    assert code == 0
    script = _osu_table(out)
    sizes = [1, 64, 8192, 65536, 1 << 20]
    rows = run_scenario(load_dict({"topology": "ib-hdr", "workload": {
        "kind": "p2p", "test": "latency", "sizes": [f"{s} B" for s in sizes]}})).rows
    for size, row in zip(sizes, rows, strict=True):
        assert script[size] == pytest.approx(row["latency_s"] * 1e6, rel=0.01), size


def test_osu_bw_script_gives_the_p2p_workloads_bandwidths_within_1_percent():
    code, out, _ = run_exec("-n", "2", "--topology", "ib-hdr", str(CORPUS / "osu_bw.py"), str(1 << 20), "2")
    assert code == 0
    script = _osu_table(out)
    sizes = [1, 64, 16384, 1 << 20]
    rows = run_scenario(load_dict({"topology": "ib-hdr", "workload": {
        "kind": "p2p", "test": "bandwidth", "sizes": [f"{s} B" for s in sizes]}})).rows
    for size, row in zip(sizes, rows, strict=True):
        assert script[size] == pytest.approx(row["bandwidth_Bps"] / 1e6, rel=0.01), size


def test_a_failed_run_leaves_the_interpreter_as_it_was():
    """A deadlocked program's suspended ranks, once collected, touch neither __main__ nor sys.argv."""
    import gc
    import sys

    main_before, argv_before = sys.modules["__main__"], list(sys.argv)
    code, _, _ = run_exec("-n", "2", "--topology", "ib-hdr", str(CORPUS / "head_to_head.py"))
    assert code == 1
    gc.collect()
    assert sys.modules["__main__"] is main_before and sys.argv == argv_before
