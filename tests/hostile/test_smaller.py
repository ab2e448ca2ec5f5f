"""The smaller items: an unexpected kind of failure is not 'as expected'; numpy warnings stay inside."""

from __future__ import annotations

import warnings

import numpy as np

from tests.hostile.helpers import cli


def test_a_failure_of_another_kind_is_not_reported_as_expected(tmp_path):
    (tmp_path / "p.py").write_text("def main(comm):\n    yield from comm.recv(source=(comm.rank + 1) % comm.size)\n")
    file = tmp_path / "s.yaml"
    file.write_text("topology: {preset: ib-hdr, nodes: 2}\nworkload: {kind: program, program: p.py:main}\n"
                    "expect_failure: truncation\n")
    code, out, err = cli("run", str(file))
    assert code == 1
    assert "FAIL" in out and "expected the program to fail with truncation, got deadlock" in out
    assert "as expected" not in out + err and "expected failure (" not in err


def test_reductions_of_nan_and_inf_data_do_not_leak_numpy_warnings():
    from mpisim.mpi.ops import get_op

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ("sum", "prod"):
            op = get_op(name)
            a = np.array([np.inf, np.nan, 3e38], dtype=np.float32)
            op.apply(a, a) if hasattr(op, "apply") else op(a, a)


def test_a_program_of_the_wrong_shape_is_refused_before_the_running_note(tmp_path):
    (tmp_path / "p.py").write_text("def main(comm, extra, more):\n    yield\n")
    file = tmp_path / "s.yaml"
    file.write_text("topology: {preset: ib-hdr, nodes: 2}\nworkload: {kind: program, program: p.py:main}\n")
    code, _, err = cli("run", str(file))
    assert code == 2 and "note: running" not in err
    assert err.strip() == f"{file}: workload.program: p.py:main must accept (comm)"


def test_out_of_memory_lets_the_run_go_before_printing_its_one_line(monkeypatch):
    import gc
    import weakref

    from mpisim import cli as cli_module
    from mpisim.report.terminal import OUT_OF_MEMORY

    held: list[weakref.ref] = []

    class Big:
        pass

    def run(self, args, out, err):
        world = Big()  # stands for the run's worlds, reachable from this frame only
        held.append(weakref.ref(world))
        raise MemoryError

    monkeypatch.setattr(cli_module.CheckCommand, "run", run)
    seen_alive = []
    real_collect = gc.collect
    monkeypatch.setattr(gc, "collect", lambda *a: (real_collect(*a), seen_alive.append(held[0]() is not None))[0])
    code, _, err = cli("check", "x.yaml")
    assert code == 1 and err == OUT_OF_MEMORY
    assert seen_alive == [False]
