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


GATED = ("topology: {preset: ib-hdr, nodes: 2}\n"
         "workload: {kind: collective, collective: allreduce, sizes: [1 KiB], algorithm: ring}\n"
         "expect:\n  - {metric: time_s, baseline: 1 ns, max_increase: 2%}\n")


def _gated(tmp_path):
    file = tmp_path / "g.yaml"
    file.write_text(GATED)
    return file, tmp_path / "g.baseline.json"


def test_a_fifo_as_the_baseline_does_not_hang_the_run(tmp_path):
    file, baseline = _gated(tmp_path)
    os.mkfifo(baseline)
    code, _, err = cli("run", str(file))
    assert code == 1 and "the baseline file g.baseline.json is not a regular file" in err


def test_a_damaged_baseline_is_reported_as_damaged_not_missing(tmp_path):
    file, baseline = _gated(tmp_path)
    for text, why in (("[" * 5000 + "]" * 5000, "cannot be read (RecursionError)"),
                      ('{"scenario": {"topology": 3, "workload": []}, "fingerprint": 1}', "from another version"),
                      ("{", "cannot be read")):
        baseline.write_text(text)
        code, _, err = cli("run", str(file))
        assert code == 1 and why in err and "internal error" not in err, err


def test_baseline_inputs_reach_the_terminal_without_raw_escapes(tmp_path):
    file, baseline = _gated(tmp_path)
    code, _, _ = cli("run", str(file), "--update-expect")
    document = baseline.read_text().replace('"device": "cpu"', '"device": "\\u001b[2Jcpu"')
    baseline.write_text(document)
    file.write_text(GATED)  # the gate fails again
    code, out, err = cli("run", str(file))
    assert code == 1 and "\x1b" not in err + out
    assert "\\x1b[2J" in err + out, err
