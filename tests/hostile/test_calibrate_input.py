"""``mpisim calibrate`` on damaged, hostile or unusual benchmark files: one line naming the file, exit 2."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from mpisim.calibrate import osu
from mpisim.calibrate.measurements import MAX_POINTS, read_text
from mpisim.errors import ConfigError
from tests.hostile.helpers import cli, one_line_exit_2

DATA = Path(__file__).resolve().parents[1] / "calibrate" / "data"
LATENCY = "# OSU MPI Latency Test v7.3\n# Size       Avg Latency(us)\n{rows}"


def _latency(tmp_path: Path, rows: str, name: str = "osu_latency.txt") -> Path:
    file = tmp_path / name
    file.write_text(LATENCY.format(rows=rows))
    return file


@pytest.mark.parametrize("rows, needle", [
    ("1 1e-320\n2 1e-320\n", "not a plausible time"),  # underflows to 0 s: residuals were not finite
    ("1 1e300\n2 1e300\n", "not a plausible time"),  # gave a preset and exit 0
    ("1² 1.5\n", "expected a message size in bytes"),
    ("① 1.5\n", "expected a message size in bytes"),
    ("9" * 5000 + " 1.5\n", "a message size of 5000 digits"),
    ("1 ١.٥\n", "expected a number for latency"),
])
def test_impossible_values_are_refused_at_their_line(tmp_path, rows, needle):
    file = _latency(tmp_path, rows)
    code, _, err = cli("calibrate", str(file), "--base", "ib-hdr")
    one_line_exit_2(code, err, f"{file}: line 3:", needle)


def test_a_header_in_milliseconds_is_read_in_milliseconds():
    text = "# OSU MPI Latency Test v7.3\n# Size       Avg Latency(ms)\n1  0.0015\n8  0.0016\n"
    series = osu.parse(text, "lat.txt")
    assert [p.value for p in series.points] == pytest.approx([1.5e-6, 1.6e-6], rel=1e-12)
    with pytest.raises(ConfigError, match="unit 'fortnights' is not one calibrate reads"):
        osu.parse(text.replace("(ms)", "(fortnights)"), "lat.txt")


def test_too_many_sizes_are_refused_with_what_they_would_cost(tmp_path):
    file = _latency(tmp_path, "".join(f"{n} 1.5\n" for n in range(MAX_POINTS + 5)))
    code, _, err = cli("calibrate", str(file), "--base", "ib-hdr")
    one_line_exit_2(code, err, f"{file}: line {MAX_POINTS + 3}:", "more than 2,000 measured sizes")


def test_too_many_rank_lines_are_refused(tmp_path):
    lines = ["# nccl-tests all_reduce_perf"] + [f"#  Rank {r} Group 0 Pid 1 on h{r} device 0 [0x07] A100"
                                             for r in range(5000)]
    lines.append("#       size         count      type   redop    root     time   algbw   busbw #wrong")
    file = tmp_path / "all_reduce_perf.txt"
    file.write_text("\n".join(lines) + "\n")
    code, _, err = cli("calibrate", str(file), "--base", "dgx-a100")
    one_line_exit_2(code, err, f"{file}: line 4098:", "more than 4,096 '# Rank' lines")


def test_devices_and_oversized_files_are_not_read():
    with pytest.raises(ConfigError, match="not a regular file"):
        read_text("/dev/zero")
    code, _, err = cli("calibrate", "/dev/zero", "--base", "ib-hdr")
    one_line_exit_2(code, err, "/dev/zero: is not a regular file")


def test_a_byte_order_mark_is_allowed(tmp_path):
    file = tmp_path / "osu_latency.txt"
    file.write_bytes(b"\xef\xbb\xbf" + (DATA / "c3_osu_latency.txt").read_bytes())
    assert osu.parse(read_text(str(file)), str(file)).points


def test_a_shape_the_preset_cannot_hold_is_named_by_the_file_not_an_internal_field(tmp_path):
    lines = [line for line in (DATA / "c1_all_reduce_perf.txt").read_text().splitlines()
             if not line.startswith(("#  Rank  3", "#  Rank  4", "#  Rank  5", "#  Rank  6", "#  Rank  7"))]
    file = tmp_path / "all_reduce_perf.txt"
    file.write_text("\n".join(lines) + "\n")
    code, _, err = cli("calibrate", str(file), "--base", "dgx-a100")
    one_line_exit_2(code, err, f"{file}: cannot simulate this measurement on 1 node(s) x 3 rank(s)", "'# Rank' lines")
    assert "topology." not in err


def test_a_written_preset_follows_the_umask_not_mode_0600(tmp_path):
    old = os.umask(0o022)
    try:
        code, _, err = cli("calibrate", str(DATA / "c3_osu_latency.txt"), "--base", "ib-hdr",
                           "-o", str(tmp_path / "mine.yaml"))
    finally:
        os.umask(old)
    assert code == 0, err
    assert stat.S_IMODE((tmp_path / "mine.yaml").stat().st_mode) == 0o644


@pytest.mark.parametrize("planted", ["report.md", "residuals.png"])
def test_a_link_planted_in_the_report_folder_is_replaced_not_followed(tmp_path, planted):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    report = tmp_path / "report"
    report.mkdir()
    (report / planted).symlink_to(victim)
    code, _, err = cli("calibrate", str(DATA / "c3_osu_latency.txt"), "--base", "ib-hdr", "--report", str(report))
    assert code == 0, err
    assert victim.read_text() == "precious\n"
    assert not (report / planted).is_symlink() and (report / planted).stat().st_size > 0
