"""mpisim exec -o: a program's messages as arrows, Perfetto flows from send to receive, a failed run's report."""

from __future__ import annotations

import contextlib
import io
import json
import textwrap
from pathlib import Path

from mpisim.cli import main
from mpisim.report.plots.arrows import message_arrows, plot_message_arrows
from mpisim.report.render import load_result
from mpisim.report.trace import validate_trace

CORPUS = Path(__file__).resolve().parents[2] / "scenarios" / "programs" / "mpi4py"

#: Rank 0 sends 100 kB (rendezvous on ib-hdr) then a small object (eager) to rank 1.
RENDEZVOUS_THEN_EAGER = """
    import numpy as np
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    buf = np.zeros(100000, dtype="B")
    if comm.rank == 0:
        comm.Send(buf, dest=1)
        comm.send("small", dest=1)
    elif comm.rank == 1:
        comm.Recv(buf, source=0)
        print(comm.recv(source=0))
"""


def run_exec(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["exec", *argv])
    return code, err.getvalue()


def rendezvous_run(tmp_path: Path) -> Path:
    prog = tmp_path / "rv.py"
    prog.write_text(textwrap.dedent(RENDEZVOUS_THEN_EAGER))
    out = tmp_path / "out"
    code, err = run_exec("-n", "2", "--topology", "ib-hdr", "-o", str(out), str(prog))
    assert code == 0, err
    return out


def test_a_rendezvous_is_drawn_as_its_four_phases_in_their_directions_and_an_eager_message_as_one_arrow(tmp_path):
    out = rendezvous_run(tmp_path)
    world = load_result(out / "results.json").records[0]
    arrows = message_arrows(world)
    assert [(a["kind"], a["src"], a["dst"]) for a in arrows] == [
        ("rts", 0, 1), ("cts", 1, 0), ("data", 0, 1), ("fin", 1, 0), ("eager", 0, 1)]
    rts, cts, data, fin, _eager = arrows
    assert rts["t1"] <= cts["t0"] and cts["t1"] <= data["t0"] and data["t1"] <= fin["t0"]  # each waits for the last
    assert data["label"] == "100 KB"
    big = next(m for m in world.messages if m.protocol == "rendezvous")
    assert data["t0"] == big.t_data and big.t_match <= data["t0"] < data["t1"] <= big.t_done
    assert big.t_post <= rts["t0"] < rts["t1"] <= big.t_match  # the RTS leaves after the send overhead
    assert (out / "figures" / "arrows-rv-py.png").stat().st_size > 0
    assert "every message as an arrow" in (out / "report.md").read_text().lower() or \
        "Messages: rv.py" in (out / "report.md").read_text()


def test_the_arrows_are_capped_and_the_figure_says_so(tmp_path):
    world = load_result(rendezvous_run(tmp_path) / "results.json").records[0]
    fig = plot_message_arrows(world, max_arrows=2)
    assert "the first 2 of 5 arrows" in fig.axes[0].get_title()


def test_trace_json_links_each_send_to_its_receive_with_a_flow(tmp_path):
    out = rendezvous_run(tmp_path)
    trace = json.loads((out / "trace.json").read_text())
    assert validate_trace(trace) == []
    events = trace["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert len(starts) == 2 and starts.keys() == ends.keys()
    world = load_result(out / "results.json").records[0]
    for msg, i in zip(sorted(world.messages, key=lambda m: m.t_post), sorted(starts), strict=True):
        s, f = starts[i], ends[i]
        assert names[(s["pid"], s["tid"])] == "rank 0" and names[(f["pid"], f["tid"])] == "rank 1"
        assert s["ts"] == round(msg.t_post * 1e6, 3) and f["ts"] == round(msg.t_done * 1e6, 3)
        assert f["bp"] == "e"
        # the flow's ends sit inside a slice of their track (the send call, the receive call)
        for end in (s, f):
            assert any(e["ph"] == "X" and e["tid"] == end["tid"] and e["ts"] <= end["ts"] <= e["ts"] + e["dur"]
                       for e in events)


def test_a_deadlocked_program_gets_its_report_and_still_exits_1(tmp_path):
    out = tmp_path / "out"
    code, err = run_exec("-n", "2", "-o", str(out), str(CORPUS / "head_to_head.py"), "1000000")
    assert code == 1
    assert "rank 0: blocked in send(dest=1, tag=0, 1000000 B, rendezvous)" in err
    assert f"report written to {out}" in err
    report = (out / "report.md").read_text()
    assert "failed (deadlock)" in report and "expected by the scenario" not in report
    figures = sorted(p.name for p in (out / "figures").iterdir())
    assert {"arrows-head-to-head.png", "timeline-head-to-head.png"} <= set(figures)
    result = load_result(out / "results.json")
    assert result.failure["kind"] == "deadlock"
    stuck = plot_message_arrows(result.records[0], failure=result.failure)
    assert "deadlock: 2 ranks stopped" in stuck.axes[0].get_title()


def test_without_o_a_deadlock_writes_nothing_and_exits_1(tmp_path):
    code, err = run_exec("-n", "2", str(CORPUS / "head_to_head.py"), "1000000")
    assert code == 1 and "deadlock" in err and "report written" not in err


def test_a_program_exit_status_is_kept_with_o(tmp_path):
    prog = tmp_path / "bye.py"
    prog.write_text("import sys\nfrom mpi4py import MPI\nsys.exit(3 if MPI.COMM_WORLD.rank == 1 else 0)\n")
    code, _ = run_exec("-n", "2", "-o", str(tmp_path / "out"), str(prog))
    assert code == 3


def test_run_o_of_a_failing_program_scenario_writes_its_report_and_exits_1(tmp_path):
    (tmp_path / "head_to_head.py").write_text((CORPUS / "head_to_head.py").read_text())
    scenario = tmp_path / "h2h.yaml"
    scenario.write_text("topology: laptop-shm\nworkload: {kind: program, api: mpi4py, program: head_to_head.py, "
                        "args: ['100000']}\n")
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["run", str(scenario), "-o", str(tmp_path / "out")])
    assert code == 1
    assert err.getvalue().count("the simulated program failed: DeadlockError") == 1
    assert (tmp_path / "out" / "figures" / "arrows-h2h.png").is_file()
