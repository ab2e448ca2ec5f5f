"""The program workload: user generators on every rank, deadlock reports, notes, errors."""

from __future__ import annotations

import textwrap

import pytest

from mpisim.errors import ConfigError, DeadlockError
from mpisim.workloads import program
from mpisim.workloads.program import parse
from tests.workloads import PROGRAMS, context

LIMIT = 64 * 1024  # make_world's eager limit


def write(tmp_path, source: str, name: str = "prog.py"):
    (tmp_path / name).write_text(textwrap.dedent(source))
    return tmp_path


@pytest.mark.parametrize(("raw", "expected"), [
    ({"program": "halo.py"}, ("halo.py", "main", None)),
    ({"program": "programs/halo.py:run"}, ("programs/halo.py", "run", None)),
    ({"program": "x.py", "args": {"nbytes": "1 MiB"}}, ("x.py", "main", {"nbytes": "1 MiB"})),
])
def test_parse_and_dump(raw, expected):
    params = parse(raw)
    assert (params.path, params.function, params.args) == expected
    assert parse(program.dump(params)) == params


@pytest.mark.parametrize(("raw", "path", "text"), [
    ({}, "program", "required"),
    ({"program": "halo"}, "program", "FILE.py"),
    ({"program": "halo.py:2main"}, "program", "not a Python function name"),
    ({"program": "halo.py", "args": [1, 2]}, "args", "mapping"),
    ({"program": "halo.py", "argv": {}}, "argv", "allowed keys: kind, program, args"),
])
def test_parse_errors_name_the_field(raw, path, text):
    with pytest.raises(ConfigError) as info:
        parse(raw)
    assert info.value.path == path
    assert text in info.value.message


def test_halo_runs_and_rank_zero_fills_the_row():
    params = parse({"program": "halo.py", "args": {"cells": 64, "steps": 5, "compute": "1 us"}})
    out = program.run(params, context(4, base_dir=PROGRAMS))
    (row,) = out.rows
    assert row["ranks"] == 4 and row["steps"] == 5
    assert row["conserved"] is True and row["heat_before"] == 64 * 1024.0
    assert row["messages"] >= 4 * 2 * 5  # two halo messages per rank per step, plus the allreduce
    assert row["bytes"] >= 4 * 2 * 5 * 8
    assert row["time_s"] >= 5 * 1e-6
    assert out.notes == []


def test_head_to_head_passes_below_the_eager_limit():
    params = parse({"program": "head_to_head.py", "args": {"nbytes": f"{LIMIT} B"}})
    out = program.run(params, context(2, base_dir=PROGRAMS))
    (row,) = out.rows
    assert row["received_from_peer"] is True and row["nbytes"] == LIMIT and row["messages"] == 2


def test_head_to_head_deadlocks_above_the_eager_limit():
    params = parse({"program": "head_to_head.py", "args": {"nbytes": f"{LIMIT + 1} B"}})
    with pytest.raises(DeadlockError) as info:
        program.run(params, context(2, base_dir=PROGRAMS))
    report = str(info.value)
    assert "rank 0: blocked in send" in report and "rank 1: blocked in send" in report
    assert "cycle of waits" in report


def test_unreceived_messages_and_reserved_keys_go_to_notes(tmp_path):
    write(tmp_path, """
        import numpy as np

        def main(comm):
            if comm.rank == 0:
                yield from comm.send(np.zeros(3), dest=1, tag=5)
            yield from comm.compute(1e-3)
            return {"ranks": 99, "answer": np.int64(42), "vector": np.arange(2)}
    """)
    out = program.run(parse({"program": "prog.py"}), context(2, base_dir=tmp_path))
    (row,) = out.rows
    assert row["ranks"] == 2 and row["answer"] == 42 and row["vector"] == [0, 1]
    assert type(row["answer"]) is int
    assert row["time_s"] == pytest.approx(1e-3)
    assert any("never received" in note for note in out.notes)
    assert any("'ranks'" in note for note in out.notes)


@pytest.mark.parametrize(("source", "raw", "text"), [
    ("def main(comm):\n    return 1\n", {"program": "prog.py"}, "generator function"),
    ("def main(comm):\n    yield\n", {"program": "prog.py", "args": {"n": 1}}, "(comm, args)"),
    ("def main(comm):\n    yield\n", {"program": "prog.py:other"}, "no function 'other'"),
    ("import no_such_module_here\ndef main(comm):\n    yield\n", {"program": "prog.py"}, "ModuleNotFoundError"),
    ("import no_such_module_here\n", {"program": "prog.py"}, "defines no function 'main'"),
    ("def main(comm):\n    def inner():\n        yield\n    return inner()\n", {"program": "prog.py"}, "generator function"),
    ("", {"program": "missing.py"}, "no program file"),
])
def test_bad_programs_are_config_errors(tmp_path, source, raw, text):
    write(tmp_path, source)
    with pytest.raises(ConfigError) as info:
        program.run(parse(raw), context(2, base_dir=tmp_path))
    assert info.value.path == "program"
    assert text in info.value.message


# --- errors a student understands -----------------------------------------------------------


def run_cli(tmp_path, source: str, nodes: int = 2) -> tuple[int, str]:
    from mpisim.cli import main

    write(tmp_path, source)
    (tmp_path / "s.yaml").write_text(
        f"topology: {{preset: ib-hdr, nodes: {nodes}}}\nworkload: {{kind: program, program: prog.py:main}}\n")
    import contextlib
    import io
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["run", str(tmp_path / "s.yaml")])
    return code, err.getvalue()


def test_an_exception_in_the_program_shows_the_rank_and_the_users_frames(tmp_path):
    code, err = run_cli(tmp_path, """
        def helper(x):
            return x[5]

        def main(comm):
            if comm.rank == 1:
                helper([1, 2])
            yield from comm.barrier()
    """)
    assert code == 1
    assert "internal error" not in err
    assert "rank 1 raised IndexError: list index out of range" in err
    assert 'prog.py", line 7, in main' in err and 'prog.py", line 3, in helper' in err
    assert "mpisim" not in err.replace("the simulated program failed", "")  # no simulator frames
    assert "rank 0: in barrier(" in err


def test_a_deadlock_from_a_wrong_tag_shows_the_message_waiting_unmatched(tmp_path):
    code, err = run_cli(tmp_path, """
        import numpy as np

        def main(comm):
            if comm.rank == 0:
                yield from comm.send(np.zeros(4), dest=1, tag=3)
            else:
                yield from comm.recv(source=0, tag=2)
    """)
    assert code == 1
    assert ("rank 1: blocked in recv(source=0, tag=2) -- waiting for a message from rank 0 (it has finished); "
            "a message from rank 0 with tag 3 (32 B) is waiting unmatched") in err


def test_a_deadlock_in_a_collective_names_the_users_call_not_the_algorithms_messages(tmp_path):
    code, err = run_cli(tmp_path, """
        def main(comm):
            if comm.rank != 0:
                yield from comm.barrier()
    """, nodes=4)
    assert code == 1
    assert "sendrecv" not in err
    assert err.count("blocked in barrier(algorithm=dissemination)") == 3
    assert "rank 0 has finished without calling it" in err


def test_ranks_that_disagree_on_the_algorithm_are_a_named_mismatch(tmp_path):
    code, err = run_cli(tmp_path, """
        import numpy as np

        def main(comm):
            algorithm = "ring" if comm.rank == 0 else "recursive_doubling"
            yield from comm.allreduce(np.ones(8), algorithm=algorithm)
    """)
    assert code == 1
    assert "CollectiveMismatchError" in err
    assert "algorithm=ring" in err and "algorithm=recursive_doubling" in err


def test_started_allreduces_overlap_the_remaining_compute():
    """scenarios/programs/overlap.py: started syncs hide behind later layers; only the last one shows."""
    def iteration(layers: int, overlap: bool) -> float:
        args = {"layers": layers, "params_per_layer": 250_000, "compute": "5 ms", "overlap": overlap}
        (row,) = program.run(parse({"program": "overlap.py", "args": args}), context(4, payload="size", base_dir=PROGRAMS)).rows
        return row["iteration_s"]

    sync = iteration(1, False) - 5e-3  # one 1 MB allreduce on its own
    assert 0 < sync < 5e-3  # shorter than a layer's compute, so it can hide entirely
    assert iteration(4, False) == pytest.approx(4 * (5e-3 + sync), rel=1e-9)
    assert iteration(4, True) == pytest.approx(4 * 5e-3 + sync, rel=1e-9)


def test_a_wrong_program_is_refused_before_its_module_code_runs(tmp_path):
    """The signature is read from the source: a file whose function is wrong never executes its top level."""
    marker = tmp_path / "ran"
    write(tmp_path, f"open({str(marker)!r}, 'w').close()\ndef main(comm, extra, more):\n    yield\n")
    with pytest.raises(ConfigError, match="must accept"):
        program.run(parse({"program": "prog.py"}), context(2, base_dir=tmp_path))
    assert not marker.exists()


def test_a_program_outside_the_scenarios_folder_needs_consent(tmp_path):
    from mpisim.cli import main

    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "evil.py").write_text("def main(comm):\n    yield from comm.barrier()\n")
    (tmp_path / "s").mkdir()
    scenario = tmp_path / "s" / "s.yaml"
    scenario.write_text("topology: {preset: ib-hdr, nodes: 2}\nworkload: {kind: program, program: ../elsewhere/evil.py}\n")
    import contextlib
    import io
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", str(scenario)]) == 2
    assert "is outside the scenario's folder" in err.getvalue() and "--allow-program" in err.getvalue()
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", str(scenario), "--allow-program", str(tmp_path / "elsewhere" / "evil.py")]) == 0
    assert "note: running" in err.getvalue() and "evil.py on every rank" in err.getvalue()


def test_a_send_without_yield_from_is_reported_where_it_was_written(tmp_path):
    """The classic slip: the send is made but never run; the report names it before the receiver's deadlock."""
    code, err = run_cli(tmp_path, """
        import numpy as np

        def main(comm):
            if comm.rank == 0:
                comm.send(np.zeros(4), dest=1)
            else:
                yield from comm.recv(source=0)
    """)
    assert code == 1
    lost = err.index("rank 0 called comm.send(...) at prog.py:6 without `yield from`: the call never ran")
    assert "(write: yield from comm.send(np.zeros(4), dest=1))" in err
    assert lost < err.index("deadlock: 1 rank(s) blocked")


def test_a_run_with_a_call_that_never_ran_fails_as_unstarted_call(tmp_path):
    import json

    from mpisim.scenario.load import load_file
    from mpisim.scenario.run import run_scenario

    write(tmp_path, """
        def main(comm):
            comm.barrier()
            yield from comm.compute(1e-6)
    """)
    (tmp_path / "s.yaml").write_text("topology: {preset: ib-hdr, nodes: 2}\n"
                                     "workload: {kind: program, program: prog.py:main}\n")
    result = run_scenario(load_file(tmp_path / "s.yaml", [("expect_failure", "unstarted_call")]))
    assert result.passed
    assert result.failure["kind"] == "unstarted_call"
    assert "rank 1 called comm.barrier(...) at prog.py:3 without `yield from`" in json.dumps(result.failure)
