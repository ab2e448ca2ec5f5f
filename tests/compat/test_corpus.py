"""The mpi4py corpus runs under a real MPI (mpiexec from MPICH, mpi4py from PyPI) and under mpisim exec: same output per rank.

Each program of scenarios/programs/mpi4py/ prints what it computed; both runs must print
the same lines on every rank. For the benchmark scripts, whose numbers are times, the
columns that are not times (sizes, headers) must agree. The real-MPI half is skipped, with
the reason, where mpiexec or mpi4py is not installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "scenarios" / "programs" / "mpi4py"

#: (program, ranks, arguments, stdin, timed: only the first column of each line is compared)
PROGRAMS = [
    ("hello.py", 4, [], "", False),
    ("pi.py", 4, ["200000"], "", False),
    ("ring.py", 5, [], "", False),
    ("halo.py", 4, [], "", False),
    ("halo.py", 6, [], "", False),
    ("master_worker.py", 4, ["30"], "", False),
    ("osu_latency.py", 2, ["4096", "5"], "", True),
    ("osu_bw.py", 2, ["16384", "2"], "", True),
    ("osu_allreduce.py", 4, ["4096", "3"], "", True),
    ("nonblocking.py", 4, [], "", False),
    ("user_op.py", 4, [], "", False),
    ("stdin_sum.py", 3, [], "1 2 3 4 5 6 7 8 9 10\n", False),
    ("head_to_head.py", 2, ["1024"], "", False),
    ("collectives.py", 4, [], "", False),
    ("collectives.py", 3, [], "", False),
    ("scan.py", 7, [], "", False),
    ("scan.py", 8, [], "", False),
]


def _ids() -> list[str]:
    return [f"{name}-n{n}" for name, n, *_ in PROGRAMS]


def _by_rank(text: str) -> dict[int, list[str]]:
    lines: dict[int, list[str]] = defaultdict(list)
    for line in text.splitlines():
        match = re.match(r"\[(\d+)\] (.*)$", line)
        assert match, f"an untagged line: {line!r}"
        lines[int(match.group(1))].append(match.group(2))
    return dict(lines)


def _comparable(lines: list[str], timed: bool) -> list[str]:
    return [line.split()[0] if timed and line.split() else line for line in lines]


def run_mpisim(name: str, ranks: int, args: list[str], stdin: str) -> dict[int, list[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "mpisim", "exec", "-n", str(ranks), "--tag-output",
                           str(CORPUS / name), *args], input=stdin, capture_output=True, text=True, env=env,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return _by_rank(proc.stdout)


def _real_mpi_missing() -> str | None:
    if shutil.which("mpiexec") is None:
        return "mpiexec (MPICH) is not installed"
    probe = subprocess.run([sys.executable, "-c", "import mpi4py"], capture_output=True, env=_real_env())
    return "mpi4py is not installed" if probe.returncode else None


def _real_env() -> dict[str, str]:
    # The real mpi4py, not mpisim's: nothing of the repository on the path.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # Bitwise-equal floats need the same reduction order: MPICH's binomial tree, as mpisim's auto picks.
    env["MPIR_CVAR_REDUCE_INTRA_ALGORITHM"] = "binomial"
    return env


def run_real(name: str, ranks: int, args: list[str], stdin: str, tmp: Path) -> dict[int, list[str]]:
    pattern = str(tmp / "out.%r")
    proc = subprocess.run(["mpiexec", "-n", str(ranks), "-outfile-pattern", pattern, sys.executable,
                           str(CORPUS / name), *args], input=stdin, capture_output=True, text=True,
                          env=_real_env(), timeout=120, cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    out = {}
    for rank in range(ranks):
        file = tmp / f"out.{rank}"
        lines = file.read_text().splitlines() if file.exists() else []
        if lines:
            out[rank] = lines
    return out


@pytest.mark.slow  # one mpisim exec subprocess per program and rank count (and mpiexec where installed)
@pytest.mark.parametrize(("name", "ranks", "args", "stdin", "timed"), PROGRAMS, ids=_ids())
def test_mpisim_exec_prints_what_a_real_mpi_prints(name, ranks, args, stdin, timed, tmp_path):
    simulated = run_mpisim(name, ranks, args, stdin)
    assert simulated, f"{name} printed nothing under mpisim exec"
    missing = _real_mpi_missing()
    if missing:
        pytest.skip(f"the real-MPI half needs MPICH and mpi4py: {missing}")
    real = run_real(name, ranks, args, stdin, tmp_path)
    assert sorted(real) == sorted(simulated), "different ranks printed"
    for rank in real:
        assert _comparable(simulated[rank], timed) == _comparable(real[rank], timed), f"rank {rank} differs"


def test_the_corpus_has_the_programs_the_issue_names():
    files = {p.name for p in CORPUS.glob("*.py")}
    assert len(files) >= 12
    assert {name for name, *_ in PROGRAMS} == files, "every corpus program is compared"
