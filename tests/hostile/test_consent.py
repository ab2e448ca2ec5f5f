"""S1: running a program outside the scenario's folder needs --allow-program, however the file spells it."""

from __future__ import annotations

import pytest

from tests.hostile.helpers import cli, one_line_exit_2

EVIL = "def main(comm):\n    open({marker!r}, 'w').close()\n    yield from comm.barrier()\n"


@pytest.fixture
def layout(tmp_path):
    (tmp_path / "outside").mkdir()
    marker = tmp_path / "ran"
    (tmp_path / "outside" / "evil.py").write_text(EVIL.format(marker=str(marker)))
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "inside.py").write_text("def main(comm):\n    yield from comm.barrier()\n")
    return tmp_path, marker


@pytest.mark.parametrize("body", [
    # an axis over the whole workload block, from a collective scenario
    "workload: {kind: collective, collective: allreduce, sizes: [1 KiB]}\n"
    "sweep:\n  workload:\n    - {kind: program, program: ../outside/evil.py:main}\n",
    # the same from a program scenario whose own file is inside
    "workload: {kind: program, program: inside.py:main}\n"
    "sweep:\n  workload:\n    - {kind: program, program: inside.py:main}\n"
    "    - {kind: program, program: ../outside/evil.py:main}\n",
])
def test_a_sweep_that_replaces_the_workload_block_needs_consent(layout, body):
    tmp_path, marker = layout
    scenario = tmp_path / "s" / "s.yaml"
    scenario.write_text("topology: {preset: ib-hdr, nodes: 2}\n" + body)
    code, _, err = cli("run", str(scenario))
    one_line_exit_2(code, err, "evil.py is outside the scenario's folder", "--allow-program", str(scenario))
    assert not marker.exists()
    code, _, err = cli("run", str(scenario), "--allow-program", str(tmp_path / "outside" / "evil.py"))
    assert code == 0, err
    assert f"note: running {tmp_path / 'outside' / 'evil.py'} on every rank" in err
    assert marker.exists()
