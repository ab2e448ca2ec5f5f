"""Small mpi4py programs, one per feature, with what MPICH printed for them: the expected output mpisim exec must print.

Each ``programs/NAME.py`` runs under ``mpiexec -n P`` (MPICH 5 with mpi4py 4, from PyPI) and
under ``mpisim exec -n P``; ``programs/NAME.nP.out`` holds MPICH's lines, each tagged with its
rank (``[2] ...``), ranks in order, each rank's lines in the order it printed them. It is
written by ``python -m tests.compat.mpich_programs`` (which needs ``mpiexec`` and mpi4py), as
``tests/mpich/golden.json`` is by its generator, and checked here against mpisim; where MPICH
is installed the test also re-runs it, so the stored output cannot drift from the library.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).with_name("programs")

#: (program, ranks): every program runs at the rank counts listed.
CASES = [
    ("nbc_overlap.py", 4),
    ("nbc_all.py", 3),
    ("nbc_all.py", 4),
    ("datatypes.py", 3),
    ("datatypes.py", 4),
    ("persistent_bsend.py", 3),
    ("neighbors.py", 2),
    ("neighbors.py", 4),
    ("mprobe.py", 3),
    ("mprobe.py", 4),
    ("rma.py", 3),
    ("rma.py", 4),
    ("alltoallw.py", 3),
    ("alltoallw.py", 4),
    ("intercomm.py", 3),
    ("intercomm.py", 4),
    ("intercomm_rooted.py", 3),
    ("intercomm_rooted.py", 5),
    ("dynamic_window.py", 3),
    ("alltoallw_derived.py", 3),
    ("countless_vcalls.py", 3),
    ("countless_vcalls.py", 4),
    ("op_buffers.py", 3),
    ("isendrecv.py", 3),
    ("datatype_maps.py", 2),
    ("dist_graph.py", 3),
    ("dist_graph.py", 4),
]


def by_rank(text: str) -> dict[int, list[str]]:
    """Lines tagged ``[r] text`` grouped by rank, each rank's in order."""
    lines: dict[int, list[str]] = defaultdict(list)
    for line in text.splitlines():
        match = re.match(r"\[(\d+)\] ?(.*)$", line)
        if match:
            lines[int(match.group(1))].append(match.group(2))
    return dict(lines)


def as_text(lines: dict[int, list[str]]) -> str:
    return "".join(f"[{rank}] {line}\n" for rank in sorted(lines) for line in lines[rank])


def expected_file(name: str, ranks: int) -> Path:
    return PROGRAMS / f"{Path(name).stem}.n{ranks}.out"


def run_mpisim(name: str, ranks: int) -> tuple[int, dict[int, list[str]], str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "mpisim", "exec", "-n", str(ranks), "--tag-output",
                           str(PROGRAMS / name)], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    return proc.returncode, by_rank(proc.stdout), proc.stderr


def real_mpi_missing() -> str | None:
    if shutil.which("mpiexec") is None:
        return "mpiexec (MPICH) is not installed"
    probe = subprocess.run([sys.executable, "-c", "import mpi4py"], capture_output=True, env=real_env())
    return "mpi4py is not installed" if probe.returncode else None


def real_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the real mpi4py, not mpisim's
    env["MPIR_CVAR_REDUCE_INTRA_ALGORITHM"] = "binomial"  # the reduction order mpisim's auto picks
    return env


def run_real(name: str, ranks: int) -> dict[int, list[str]]:
    with tempfile.TemporaryDirectory() as tmp:
        pattern = str(Path(tmp) / "out.%r")
        proc = subprocess.run(["mpiexec", "-n", str(ranks), "-outfile-pattern", pattern, sys.executable,
                               str(PROGRAMS / name)], capture_output=True, text=True, env=real_env(), timeout=300,
                              cwd=tmp)
        if proc.returncode:
            raise RuntimeError(f"{name} -n {ranks} failed under MPICH:\n{proc.stderr}")
        out = {}
        for rank in range(ranks):
            file = Path(tmp) / f"out.{rank}"
            lines = file.read_text().splitlines() if file.exists() else []
            if lines:
                out[rank] = lines
        return out


def main() -> None:
    missing = real_mpi_missing()
    if missing:
        sys.exit(f"cannot generate: {missing}")
    for name, ranks in CASES:
        expected_file(name, ranks).write_text(as_text(run_real(name, ranks)))
        print(f"wrote {expected_file(name, ranks).name}")


if __name__ == "__main__":
    main()
