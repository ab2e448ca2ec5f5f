"""Scenario files from someone else: hostile input gets one line and exit 2, quickly, in bounded memory.

Each case is generated small here (an alias bomb is 600 bytes) and run as ``mpisim run`` in a
child process whose address space is capped, so a case that expanded would fail the test by
running out of memory instead of taking the machine with it.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

BASE = "topology: {preset: ib-hdr, nodes: 2}\nworkload: {kind: collective, collective: allreduce, sizes: [1 KiB]}\n"


def _alias_bomb(levels: int = 9) -> str:
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]']
    for i in range(levels):
        prev, name = chr(97 + i), chr(98 + i)
        lines.append(f"{name}: &{name} [{', '.join(['*' + prev] * 10)}]")
    return "\n  ".join(lines)


CASES = {
    "alias bomb under report": (BASE + "report:\n  " + _alias_bomb() + "\n", "expands to more than"),
    "alias bomb in program args": (
        "topology: {preset: ib-hdr, nodes: 2}\nworkload:\n  kind: program\n  program: p.py:main\n  args:\n    "
        + _alias_bomb().replace("\n  ", "\n    ") + "\n", "expands to more than"),
    "many aliases to a long string": (
        BASE + "x: &s " + "y" * 100_000 + "\nreport: {plots: [" + ", ".join(["*s"] * 1000) + "]}\n",
        "expands to more than"),
    "list nested 1000 deep": (BASE + "report: {x: " + "[" * 1000 + "]" * 1000 + "}\n", "nested more than"),
    "integer of 5000 digits": (BASE + "seed: " + "9" * 5000 + "\n", "a number of 5000 characters"),
    "size beyond any double": (BASE.replace("[1 KiB]", "[1e400 B]"), "out of range for a size"),
    "where beyond any double": (BASE + "expect: [{metric: time_s, where: {bytes: 1e999 MiB}, max: 1 s}]\n",
                                "out of range for a size"),
    "a size string as node count": (BASE.replace("nodes: 2", 'nodes: "1e400 B"'), "expected a whole number"),
    "misspelt figure": (BASE + "report: {plots: [link_utilisaton]}\n", "did you mean 'link_utilisation'"),
    "unknown report key": (BASE + "report: {plot: [timeline]}\n", "report"),
    "alias that contains itself": (BASE + "report: &a {plots: [*a]}\n", "refers to a value that contains it"),
    "bare latency": (BASE.replace("{preset: ib-hdr, nodes: 2}", "{preset: ib-hdr, nodes: 2, inter: {latency: 2}}"),
                     "has no unit"),
}


def _cap_memory() -> None:
    limit = 2 * 1024**3  # address space: imports take a few hundred MB; an expansion would take far more
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def run_cli(*args: str, cwd: Path) -> tuple[int, str, str, float]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "mpisim", "run", *args], capture_output=True, text=True,
                          timeout=30, cwd=cwd, env=env, preexec_fn=_cap_memory)
    return done.returncode, done.stdout, done.stderr, time.monotonic() - t0


@pytest.mark.slow  # one mpisim subprocess per hostile file
@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_file_is_one_line_and_exit_2(case, tmp_path):
    text, expected = CASES[case]
    (tmp_path / "s.yaml").write_text(text)
    code, out, err, seconds = run_cli("s.yaml", cwd=tmp_path)
    assert code == 2, err
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err and "internal error" not in err
    assert err.startswith("s.yaml: ") and expected in err
    assert seconds < 10


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_is_refused_before_reading(device, tmp_path):
    if not Path(device).exists():
        pytest.skip(f"no {device} here")
    code, _, err, seconds = run_cli(device, cwd=tmp_path)
    assert code == 2 and "is not a regular file" in err and seconds < 10


def test_an_oversized_file_is_refused_before_reading(tmp_path):
    (tmp_path / "big.yaml").write_text(BASE + "#" + "x" * 2_000_000 + "\n")
    code, _, err, _ = run_cli("big.yaml", cwd=tmp_path)
    assert code == 2 and "a scenario file may have at most 1,000,000" in err


def test_a_symlink_planted_at_the_sweep_file_is_not_followed(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    (tmp_path / "s.yaml").write_text(BASE + "payload: size\nsweep: {topology.nodes: [2, 3]}\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.jsonl").symlink_to(target)
    code, _, err, _ = run_cli("s.yaml", "-o", "out", cwd=tmp_path)
    assert code == 2 and "is a symbolic link" in err
    assert target.read_text() == "keep me\n"


def test_names_are_shown_with_control_characters_escaped_and_markup_inert(tmp_path):
    name = "evil\x1b[2J<img src=x onerror=alert(1)>[x](http://e)"
    (tmp_path / "s.yaml").write_text(f"name: {name!r}\n".replace("'", '"').replace("\x1b", "\\x1b") + BASE
                                     + "payload: size\n")
    code, out, err, _ = run_cli("s.yaml", "-o", "out", cwd=tmp_path)
    assert code == 0, err
    assert "\x1b" not in out and out.startswith("evil\\x1b[2J<img")
    report = (tmp_path / "out" / "report.md").read_text()
    assert report.startswith("# evil\\\\x1b\\[2J\\<img src=x onerror=alert\\(1\\)\\>\\[x\\]\\(http://e\\)\n")
    assert "\x1b" not in report


def test_an_alias_bomb_given_with_set_is_refused_too(tmp_path):
    (tmp_path / "s.yaml").write_text("topology: {preset: ib-hdr, nodes: 2}\n"
                                     "workload: {kind: program, program: p.py:main, args: {}}\n")
    bomb = "{" + _alias_bomb().replace("\n  ", ", ") + "}"
    code, _, err, seconds = run_cli("s.yaml", "--set", f"workload.args={bomb}", cwd=tmp_path)
    assert code == 2 and "--set workload.args" in err and "expands to more than" in err and seconds < 10
