"""``mpisim calibrate``: the preset it writes runs, its report, and one-line errors (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mpisim.cli import main
from mpisim.scenario import load_dict, run_scenario

DATA = Path(__file__).parent / "data"
C2 = [str(DATA / "c2_osu_latency.txt"), str(DATA / "c2_osu_mbw_mr.txt")]


@pytest.mark.slow  # fits a preset, then runs it
def test_written_preset_runs_and_reproduces_the_measurements(tmp_path, capsys, monkeypatch):
    out = tmp_path / "mycluster.yaml"
    assert main(["calibrate", *C2, "--base", "ib-hdr", "-o", str(out), "--report", str(tmp_path / "rep")]) == 0
    printed = capsys.readouterr().out
    assert "inter.efficiency: 0.94 -> 0.9392 (fitted from c2_osu_mbw_mr.txt:4)" in printed
    assert "mpi.send_overhead + mpi.recv_overhead: 100 ns kept (these points cannot tell it from inter.latency)" in printed
    text = out.read_text()
    assert "c2_osu_latency.txt, c2_osu_mbw_mr.txt" in text and str(tmp_path) not in text
    assert "latency: 1.42 us  # fitted (base ib-hdr: 1.42 us) from c2_osu_latency.txt:4" in text
    monkeypatch.chdir(tmp_path)  # a preset file is named relative to the working directory
    rows = run_scenario(load_dict({
        "topology": "mycluster.yaml", "payload": "size",
        "workload": {"kind": "p2p", "test": "latency", "sizes": ["0 B", "4 KiB"]},
    })).rows
    assert [r["latency_s"] for r in rows] == pytest.approx([1.62e-6, 3.72e-6], rel=0.001)
    report = (tmp_path / "rep" / "report.md").read_text()
    assert "| c2_osu_mbw_mr.txt:4 | mbw_mr | 8 MiB | 23.48 GB/s |" in report
    assert (tmp_path / "rep" / "residuals.png").stat().st_size > 10_000
    assert yaml.safe_load(text)["mpi"]["copy_bandwidth"] == "2.127 GB/s"


def test_run_with_set_topology_file(tmp_path, capsys, monkeypatch):
    out = tmp_path / "c3.yaml"
    assert main(["calibrate", str(DATA / "c3_osu_latency.txt"), str(DATA / "c3_osu_bw.txt"), "--base", "roce-100g",
                 "-o", str(out)]) == 0
    monkeypatch.chdir(tmp_path)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump({"topology": "roce-100g", "payload": "size",
                                        "workload": {"kind": "p2p", "test": "bandwidth", "sizes": ["256 MiB"]}}))
    capsys.readouterr()
    assert main(["run", str(scenario), "--set", "topology=c3.yaml", "--json"]) == 0
    row = yaml.safe_load(capsys.readouterr().out)["results"][0]
    assert row["bandwidth_Bps"] == pytest.approx(12254e6, rel=0.002)


@pytest.mark.parametrize(("argv", "message"), [
    (["missing.txt", "--base", "ib-hdr"], "missing.txt: no such file"),
    ([str(DATA / "c2_osu_latency.txt"), "--base", "ib-hdr", "--holdout", "half"],
     "--holdout: expected a share of the points such as 20%, got 'half'"),
    ([str(DATA / "c2_osu_latency.txt"), "--base", "no-such"], "unknown topology preset 'no-such'"),
    ([str(DATA / "c2_osu_latency.txt"), "--base", "ib-hdr", "-o", "out.txt"], "-o: a preset file name ends in .yaml"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, message):
    assert main(["calibrate", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_damaged_file_names_file_and_line(tmp_path, capsys):
    bad = tmp_path / "osu_bw.txt"
    bad.write_text("# OSU MPI Bandwidth Test v7.1\n# Size      Bandwidth (MB/s)\n1  3.4\n2  x\n")
    assert main(["calibrate", str(bad), "--base", "ib-hdr"]) == 2
    assert capsys.readouterr().err == f"{bad}: line 4: expected a number for bandwidth, got 'x'\n"


def test_sendrecv_is_read_but_not_fitted(tmp_path, capsys):
    from tests.calibrate.test_parsers import NCCL_MPI

    path = tmp_path / "sendrecv_perf.txt"
    path.write_text(NCCL_MPI)
    assert main(["calibrate", str(path), "--base", "dgx-a100"]) == 2
    assert "nothing to fit: sendrecv_perf.txt (sendrecv): read but left out of the fit" in capsys.readouterr().err
