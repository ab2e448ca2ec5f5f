"""Produce ``golden.json``: every case of :mod:`tests.mpich.cases` run under real MPICH.

    python -m tests.mpich.generate            # from the repository root; needs mpiexec and mpi4py

The ``mpich`` and ``mpi4py`` packages install from PyPI (``pip install mpich mpi4py``). For
each rank count and each algorithm, one ``mpiexec`` runs :mod:`tests.mpich.worker` with
``MPIR_CVAR_<COLLECTIVE>_INTRA_ALGORITHM`` forcing MPICH's algorithm and
``MPIR_CVAR_COLLECTIVE_FALLBACK=print`` so that MPICH says when it replaces an algorithm
whose conditions a case does not meet (those cases are recorded as ``"refused"``). The file records the MPICH version.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.mpich.cases import MPICH_NAMES, RANKS

GOLDEN = Path(__file__).with_name("golden.json")
ROOT = Path(__file__).resolve().parents[2]

#: MPICH's control-variable name of each collective's algorithm choice.
CVAR = {
    "allreduce": "ALLREDUCE", "reduce": "REDUCE", "reduce_scatter": "REDUCE_SCATTER", "bcast": "BCAST",
    "allgather": "ALLGATHER", "alltoall": "ALLTOALL", "gather": "GATHER", "scatter": "SCATTER",
}


def mpich_version() -> str:
    out = subprocess.run([sys.executable, "-c", "from mpi4py import MPI; print(MPI.Get_library_version())"],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    return out.stdout.splitlines()[0].split(":", 1)[-1].strip()


def run_case_set(collective: str, algorithm: str, p: int, timeout: float = 120) -> dict[str, object]:
    """Run one (collective, algorithm, p) under mpiexec; return its case key -> digests."""
    env = dict(os.environ)
    env[f"MPIR_CVAR_{CVAR[collective]}_INTRA_ALGORITHM"] = MPICH_NAMES[(collective, algorithm)]
    env["MPIR_CVAR_COLLECTIVE_FALLBACK"] = "print"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    cmd = ["mpiexec", "-n", str(p), sys.executable, "-m", "tests.mpich.worker", collective, algorithm]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    cases: dict[str, object] = {}
    for (collective, algorithm) in sorted(MPICH_NAMES):
        for p in RANKS:
            print(f"{collective}/{algorithm} on {p} ranks", file=sys.stderr)
            cases.update(run_case_set(collective, algorithm, p))
    document = {"mpich_version": mpich_version(), "cases": dict(sorted(cases.items()))}
    tmp = GOLDEN.with_suffix(".tmp")
    tmp.write_text(json.dumps(document, indent=0, sort_keys=True) + "\n")
    tmp.replace(GOLDEN)
    print(f"wrote {len(cases)} cases to {GOLDEN.name}", file=sys.stderr)


if __name__ == "__main__":
    main()
