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
    code, _, err = cli("run", str(link), "--update-expect")
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


SWEPT = ("topology: {preset: ib-hdr, nodes: 2}\n"
         "workload: {kind: collective, collective: allreduce, sizes: [1 KiB]}\n"
         "sweep: {topology.nodes: [2, 4]}\n")


def test_a_sweep_does_not_write_through_a_planted_hardlink(tmp_path):
    file = tmp_path / "s.yaml"
    file.write_text(SWEPT)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "out").mkdir()
    os.link(victim, tmp_path / "out" / "sweep.jsonl")
    code, _, err = cli("run", str(file), "-o", str(tmp_path / "out"), "--jobs", "1", "--no-plots")
    assert code == 0, err
    assert victim.read_text() == "precious\n"


def test_a_sweep_runs_in_a_read_only_folder_without_o(tmp_path, monkeypatch):
    file = tmp_path / "s.yaml"
    file.write_text(SWEPT)
    folder = tmp_path / "ro"
    folder.mkdir()
    monkeypatch.chdir(folder)
    os.chmod(folder, 0o555)
    try:
        if os.access(folder, os.W_OK):
            import pytest
            pytest.skip("running as a user who can write anywhere")
        code, _, err = cli("run", str(file), "--jobs", "1")
    finally:
        os.chmod(folder, 0o755)
    assert code == 0, err
    assert "is not writable: the sweep runs without a results file" in err


def test_staging_folders_of_killed_runs_are_removed(tmp_path):
    file = tmp_path / "s.yaml"
    file.write_text(SWEPT.replace("sweep: {topology.nodes: [2, 4]}\n", ""))
    out = tmp_path / "out"
    out.mkdir()
    dead = out / ".staging-999999999-abc"
    dead.mkdir()
    (dead / "report.md").write_text("half")
    old = out / ".staging-xyz"
    old.mkdir()
    os.utime(old, (0, 0))
    code, _, err = cli("run", str(file), "-o", str(out), "--no-plots")
    assert code == 0, err
    assert not dead.exists() and not old.exists()
