"""Outputs and baselines: planted links, links to the user's own file, damaged baselines."""

from __future__ import annotations

import os
import stat

from tests.hostile.helpers import cli

SCENARIO = ("topology: {preset: ib-hdr, nodes: 2}\n"
            "workload: {kind: collective, collective: allreduce, sizes: [1 KiB], algorithm: ring}\n"
            "expect:\n  - {metric: time_s, max: 1 ns}\n")


def test_update_expect_through_a_link_edits_the_real_file(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "s.yaml").write_text(SCENARIO)
    os.chmod(real / "s.yaml", 0o664)
    link = tmp_path / "s.yaml"
    link.symlink_to(real / "s.yaml")
    code, out, err = cli("run", str(link), "--update-expect")
    assert code == 0, err
    assert link.is_symlink()
    assert "max: 1 ns" not in (real / "s.yaml").read_text()
    assert stat.S_IMODE((real / "s.yaml").stat().st_mode) == 0o664
