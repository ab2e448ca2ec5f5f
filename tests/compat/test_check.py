"""mpisim exec --check: each mistake a real MPI hides, found with its rank, the program's line and time.

The programs are the students' buggy programs in scenarios/programs/mpi4py/checks/; each test
asserts the exact finding (kind, rank, file, line), and that a correct program has none.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import textwrap
from pathlib import Path

import pytest

from mpisim.cli import main
from mpisim.compat.check.wildcards import NEAR_TIE_S
from mpisim.scenario import schema

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ROOT / "scenarios" / "programs" / "mpi4py" / "checks"
CORPUS = CHECKS.parent


#: A finding as the notes carry it: ``check [kind] rank R, file:line, t = T: text``.
FINDING = re.compile(r"check \[(?P<kind>[a-z-]+)\] rank (?P<rank>\d+), (?P<file>[^:,]+):(?P<line>\d+), "
                     r"t = (?P<time>[^:]+): (?P<text>.*)", re.S)


def findings_of(notes: list[str]) -> list[dict]:
    found = []
    for note in notes:
        match = FINDING.fullmatch(note)
        if match:
            found.append({**match.groupdict(), "rank": int(match["rank"]), "line": int(match["line"])})
    return found


def checked(program: str | Path, ranks: int = 3, *args: str) -> tuple[int, list[dict], str]:
    """Run *program* under --check with --json: (exit code, findings, the program's output)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["exec", "-n", str(ranks), "--check", "--json", str(program), *args])
    document = json.loads(out.getvalue())
    findings = findings_of(document["notes"])
    assert document["results"][0]["check_findings"] == len(findings)
    return code, findings, err.getvalue()


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def only(findings: list[dict]) -> dict:
    assert len(findings) == 1, findings
    return findings[0]


def test_a_request_never_completed_names_the_rank_and_the_isend_line():
    path = CHECKS / "forgotten_wait.py"
    code, findings, _ = checked(path)
    f = only(findings)
    assert code == 1
    assert (f["kind"], f["rank"], f["file"], f["line"]) == (
        "request-never-completed", 0, "forgotten_wait.py", line_of(path, "comm.Isend("))
    assert f["time"] == "0 s"
    assert "Isend(dest=1, tag=7)" in f["text"]


def test_a_send_buffer_modified_before_wait_is_reported_with_the_first_changed_element():
    path = CHECKS / "early_reuse.py"
    code, findings, output = checked(path)
    f = only(findings)
    assert code == 1
    assert (f["kind"], f["rank"], f["line"]) == ("send-buffer-modified", 0, line_of(path, "comm.Isend("))
    assert "1000 of 1000 elements changed" in f["text"] and "(1.0 at the call, 2.0 now)" in f["text"]
    assert f"completed at early_reuse.py:{line_of(path, 'req.Wait()')}" in f["text"]
    assert "received a sum of 1000" in output  # mpisim still sends the Isend's values


def test_an_any_source_race_is_found_by_taking_the_other_arrival_order():
    path = CHECKS / "any_source_race.py"
    code, findings, output = checked(path)
    f = only(findings)
    assert code == 1
    assert (f["kind"], f["rank"], f["line"]) == ("any-source-race", 0, line_of(path, "first = comm.recv"))
    assert "first - second = -1" in output
    assert "prints 'first - second = 1' instead of 'first - second = -1'" in f["text"]


def test_an_order_independent_any_source_program_has_no_finding(tmp_path):
    prog = tmp_path / "sum_any.py"
    prog.write_text(textwrap.dedent("""
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        if comm.rank == 0:
            print("total", sum(comm.recv(source=MPI.ANY_SOURCE) for _ in range(comm.size - 1)))
        else:
            comm.send(comm.rank, dest=0)
    """))
    code, findings, output = checked(prog, 4)
    assert (code, findings) == (0, [])
    assert "total 6" in output


STDIN_PROGRAM = """
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    if comm.rank == 0:
        k = int(input())
        got = [comm.recv(source=MPI.ANY_SOURCE) for _ in range(comm.size - 1)]
        print("k", k, "first", got[0], "rest", input())
    else:
        comm.send(comm.rank, dest=0)
"""


def test_every_rerun_of_the_checker_reads_the_same_stdin(tmp_path, monkeypatch):
    # The checker re-runs the program in the other arrival order: that run must read "3" and
    # "tail" again, not an exhausted pipe (EOFError blamed on the arrival order).
    prog = tmp_path / "reads_input.py"
    prog.write_text(textwrap.dedent(STDIN_PROGRAM))
    monkeypatch.setattr("sys.stdin", io.StringIO("3\ntail\n"))
    code, findings, output = checked(prog, 3)
    f = only(findings)
    assert code == 1
    assert (f["kind"], f["rank"], f["line"]) == ("any-source-race", 0, line_of(prog, "got = ["))
    assert "EOFError" not in f["text"]
    assert "prints 'k 3 first 2 rest tail' instead of 'k 3 first 1 rest tail'" in f["text"]
    assert "k 3 first 1 rest tail" in output


def test_recorded_input_reads_the_real_stream_once_and_lazily():
    from mpisim.compat.stdin import RecordedInput

    real = io.StringIO("a\nbc\nd")
    record = RecordedInput(real)
    first = record.replay()
    assert first.readline() == "a\n"
    assert real.tell() == 2  # no more than asked for
    second = record.replay()
    assert second.read(3) == "a\nb"
    assert list(first) == ["bc\n", "d"]
    assert second.read() == "c\nd" and record.replay().readlines() == ["a\n", "bc\n", "d"]
    assert first.readline() == "" and record.ended


def test_messages_far_apart_in_time_are_not_a_race(tmp_path):
    """Rank 2 sends well after the near-tie window: no real run reorders it, so nothing is reported."""
    prog = tmp_path / "late.py"
    prog.write_text(textwrap.dedent(f"""
        import mpisim
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        if comm.rank == 0:
            a = comm.recv(source=MPI.ANY_SOURCE)
            b = comm.recv(source=MPI.ANY_SOURCE)
            print(a - b)
        else:
            if comm.rank == 2:
                mpisim.compute({NEAR_TIE_S * 20})
            comm.send(comm.rank, dest=0)
    """))
    code, findings, output = checked(prog)
    assert (code, findings) == (0, [])
    assert output.startswith("-1")


def test_a_user_op_declared_commutative_is_evaluated_both_ways_on_the_data():
    path = CHECKS / "not_commutative.py"
    code, findings, _ = checked(path)
    f = only(findings)
    assert code == 1
    assert (f["kind"], f["rank"], f["line"]) == ("op-not-commutative", 0, line_of(path, "comm.allreduce("))
    assert "op(a, b) = 12 and op(b, a) = 21" in f["text"]


def test_a_commutative_user_op_on_buffers_is_not_reported(tmp_path):
    prog = tmp_path / "addop.py"
    prog.write_text(textwrap.dedent("""
        import numpy as np
        from mpi4py import MPI
        def add(a, b, t):
            x, y = np.frombuffer(a, dtype="d"), np.frombuffer(b, dtype="d")
            y += x
        comm = MPI.COMM_WORLD
        out = np.zeros(3)
        comm.Allreduce(np.full(3, comm.rank + 1.0), out, op=MPI.Op.Create(add, commute=True))
        print(out[0])
    """))
    code, findings, output = checked(prog, 4)
    assert (code, findings) == (0, [])
    assert output.splitlines()[0] == "10.0"


def test_a_non_commutative_user_op_on_buffers_is_reported(tmp_path):
    prog = tmp_path / "subop.py"
    prog.write_text(textwrap.dedent("""
        import numpy as np
        from mpi4py import MPI
        def sub(a, b, t):
            x, y = np.frombuffer(a, dtype="d"), np.frombuffer(b, dtype="d")
            y[:] = x - y
        comm = MPI.COMM_WORLD
        out = np.zeros(2)
        comm.Allreduce(np.full(2, comm.rank + 1.0), out, op=MPI.Op.Create(sub, commute=True))
    """))
    code, findings, _ = checked(prog, 2)
    assert code == 1
    assert [(f["kind"], f["line"]) for f in findings][:1] == [("op-not-commutative", 9)]


def test_minus_one_computed_as_a_rank_is_reported_but_proc_null_written_out_is_not():
    path = CHECKS / "minus_one.py"
    code, findings, output = checked(path)
    f = only(findings)
    assert code == 1
    assert (f["kind"], f["rank"], f["line"]) == ("peer-is-proc-null", 0, line_of(path, "comm.send(rank, dest=left)"))
    assert "rank 2 got None" in output  # the source=right of rank 2 is MPI.PROC_NULL, written as such


def test_a_correct_program_of_the_corpus_has_no_finding():
    code, findings, _ = checked(CORPUS / "nonblocking.py", 4)
    assert (code, findings) == (0, [])


def test_the_findings_repeat_exactly():
    assert checked(CHECKS / "any_source_race.py") == checked(CHECKS / "any_source_race.py")


def test_check_is_a_scenario_key_in_the_schema():
    rule = schema.json_schema()["properties"]["check"]
    assert rule["type"] == "boolean"


def test_the_scenario_key_runs_the_checker(tmp_path):
    (tmp_path / "forgotten_wait.py").write_text((CHECKS / "forgotten_wait.py").read_text())
    scenario = tmp_path / "s.yaml"
    scenario.write_text("topology: laptop-shm\ncheck: true\n"
                        "workload: {kind: program, api: mpi4py, program: forgotten_wait.py}\n")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["run", "--json", str(scenario)])
    assert code == 1
    document = json.loads(out.getvalue())
    assert document["results"][0]["check_findings"] == 1
    assert [f["kind"] for f in findings_of(document["notes"])] == ["request-never-completed"]


@pytest.mark.parametrize("value", ["yes please", 3])
def test_a_bad_check_value_is_one_line_and_exit_2(tmp_path, value):
    (tmp_path / "forgotten_wait.py").write_text((CHECKS / "forgotten_wait.py").read_text())
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"topology: laptop-shm\ncheck: {value}\n"
                        "workload: {kind: program, api: mpi4py, program: forgotten_wait.py}\n")
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["run", str(scenario)])
    assert code == 2
    assert "check" in err.getvalue() and len(err.getvalue().strip().splitlines()) == 1


def test_collective_counts_that_differ_are_said_in_elements_per_rank(tmp_path):
    prog = tmp_path / "counts.py"
    prog.write_text(textwrap.dedent("""
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        n = 4 if comm.rank == 0 else 3
        out = np.zeros(n)
        comm.Allreduce(np.ones(n), out, op=MPI.SUM)
    """))
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["exec", "-n", "3", str(prog)])
    assert code == 1
    assert "in the program's terms: rank 1 passes 3 float64 elements, rank 0 passes 4 float64 elements" in err.getvalue()


def test_a_subset_allreduce_of_objects_is_named_allreduce_not_the_reduce_inside_it(tmp_path):
    prog = tmp_path / "subset.py"
    prog.write_text("from mpi4py import MPI\ncomm = MPI.COMM_WORLD\nif comm.rank < 2:\n"
                    "    total = comm.allreduce(comm.rank)\n")
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["exec", "-n", "3", str(prog)])
    text = err.getvalue()
    assert code == 1
    for rank in (0, 1):
        assert f"rank {rank}: blocked in allreduce(object) (collective #0 on its communicator) -- rank 2 has " \
               "finished without calling it" in text
    assert " reduce(object" not in text and "bcast(" not in text


def test_the_corpus_scan_program_s_lopsided_op_is_found_where_it_is_declared_commutative():
    """scan.py runs its non-commutative op twice: with commute=False (fine) and commute=True (the finding)."""
    path = CORPUS / "scan.py"
    code, findings, _ = checked(path, 4)
    assert code == 1
    assert {f["kind"] for f in findings} == {"op-not-commutative"}
    lines = {f["line"] for f in findings}
    assert lines == {line_of(path, "comm.Scan(x, r, op=LOPSIDED)"), line_of(path, "comm.Exscan(x, q, op=LOPSIDED)")}
    assert all("lopsided" in f["text"] for f in findings)  # never matmul, created with commute=False


def test_an_irecv_never_completed_says_its_message_never_came_either(tmp_path):
    prog = tmp_path / "lost.py"
    prog.write_text(textwrap.dedent("""
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        buf = np.zeros(2)
        if comm.rank == 1:
            req = comm.Irecv(buf, source=0, tag=3)
        comm.Barrier()
    """))
    code, findings, _ = checked(prog, 2)
    f = only(findings)
    assert (code, f["kind"], f["rank"], f["line"]) == (1, "request-never-completed", 1, 7)
    assert "Irecv(source=0, tag=3)" in f["text"] and "never finished either" in f["text"]


def test_a_request_completed_by_waitall_or_a_test_loop_is_not_reported(tmp_path):
    prog = tmp_path / "fine.py"
    prog.write_text(textwrap.dedent("""
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        other = 1 - comm.rank
        a, b = np.full(3, comm.rank, dtype="i"), np.zeros(3, dtype="i")
        reqs = [comm.Isend(a, dest=other), comm.Irecv(b, source=other)]
        MPI.Request.Waitall(reqs)
        r = comm.isend(comm.rank, dest=other, tag=1)
        s = comm.irecv(source=other, tag=1)
        while not r.Test():
            pass
        print(s.wait(), b[0])
    """))
    code, findings, output = checked(prog, 2)
    assert (code, findings) == (0, [])
    assert sorted(output.splitlines()[:2]) == ["0 0", "1 1"]


def test_a_nonblocking_collective_never_waited_for_is_reported(tmp_path):
    prog = tmp_path / "ibarrier.py"
    prog.write_text("from mpi4py import MPI\ncomm = MPI.COMM_WORLD\nreq = comm.Ibarrier()\n"
                    "done = comm.Iallreduce(MPI.IN_PLACE, [bytearray(8), MPI.BYTE], op=MPI.BOR)\ndone.Wait()\n")
    code, findings, _ = checked(prog, 3)
    assert code == 1
    assert [(f["kind"], f["rank"], f["line"]) for f in findings] == [
        ("request-never-completed", rank, 3) for rank in range(3)]
    assert all("Ibarrier()" in f["text"] for f in findings)
