"""mpi4py's own unit tests as the yardstick of ``mpisim exec``.

The mpi4py source distribution ships its test files (``test/``). Each file is a unittest
module; run as ``mpiexec -n N python test_X.py -v`` under MPICH it prints, on rank 0's
stderr, one line per test ending in ``ok``, ``FAIL``, ``ERROR`` or ``skipped``. This module
runs the same file both ways, under real MPICH and under ``mpisim exec -n N``, and keeps the
names of the tests that passed on rank 0, so a cell of the README's table is "tests passing
under mpisim among those passing under MPICH" (a test with failing subtests counts once, as
a failure).

    python -m tests.mpi4py_suite.suite fetch                    # the sdist's test/ into the cache
    python -m tests.mpi4py_suite.suite mpich [FILES] [-n 1,2,3,4]   # record MPICH's passes: mpich.json
    python -m tests.mpi4py_suite.suite mpisim [FILES] [-n 1,2,3,4] [-o results.json]
    python -m tests.mpi4py_suite.suite table results.json      # the README table

The sdist comes from PyPI (``pip download --no-binary :all: --no-deps mpi4py==VERSION``), so
nothing here needs the network beyond PyPI; ``mpich`` needs ``pip install mpich mpi4py``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent
MPICH_JSON = HERE / "mpich.json"
VERSION = "4.1.2"  # the mpi4py the MPICH figures were measured with
CACHE = Path(os.environ.get("MPISIM_MPI4PY_TESTS", Path(tempfile.gettempdir()) / f"mpisim-mpi4py-{VERSION}"))

#: The files that test what mpisim simulates (issue 33's list), in the README's order.
FILES = [
    "test_environ.py", "test_status.py", "test_request.py", "test_op.py", "test_group.py",
    "test_comm.py", "test_comm_topo.py", "test_msgzero.py", "test_datatype.py",
    "test_p2p_buf.py", "test_p2p_obj.py", "test_p2p_buf_matched.py", "test_p2p_obj_matched.py",
    "test_cco_buf.py", "test_cco_obj.py", "test_cco_vec.py", "test_cco_nb_buf.py", "test_cco_nb_vec.py",
    "test_cco_ngh_buf.py", "test_cco_ngh_obj.py", "test_rma.py", "test_rma_nb.py", "test_win.py",
]
RANKS = (1, 2, 3, 4)

_START = re.compile(r"^(test\w*) \((?:__main__\.)?[\w.]*?(\w+)\.\1\)")
_STATUS = re.compile(r"(?:\.\.\. )?(ok|FAIL|ERROR|skipped.*|expected failure|unexpected success)$")
_FAILED = re.compile(r"^(?:FAIL|ERROR): (test\w*) \((?:__main__\.)?[\w.]*?(\w+)\.\1\)")


def fetch() -> Path:
    """The sdist's ``test/`` folder, downloaded once with pip into the cache."""
    tests = CACHE / f"mpi4py-{VERSION}" / "test"
    if tests.is_dir():
        return tests
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
                    f"mpi4py=={VERSION}", "-d", str(CACHE)], check=True, capture_output=True, timeout=900)
    with tarfile.open(CACHE / f"mpi4py-{VERSION}.tar.gz") as tar:
        tar.extractall(CACHE, filter="data")
    return tests


def outcomes(text: str) -> dict[str, str]:
    """Test name ("Class.test") -> "ok" | "fail" | "skip", from a verbose unittest log.

    A run that dies half way keeps the outcomes printed so far; a test whose status line never
    came (the run stopped inside it) is a failure, and so is any test the summary lists as
    FAIL or ERROR (a subtest failure is reported after the test's own "ok").
    """
    result: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        start = _START.match(line)
        if start:
            current = f"{start.group(2)}.{start.group(1)}"
            result[current] = "fail"
            line = line[start.end():]
        status = _STATUS.search(line.strip())
        if current and status:
            word = status.group(1)
            result[current] = "ok" if word in ("ok", "expected failure") else "skip" if word.startswith(
                "skipped") else "fail"
            current = None
    for line in text.splitlines():
        failed = _FAILED.match(line)
        if failed:
            result[f"{failed.group(2)}.{failed.group(1)}"] = "fail"
    return result


def run_mpich(tests: Path, name: str, n: int, timeout: float = 300) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the real mpi4py, not mpisim's
    with tempfile.TemporaryDirectory() as tmp:
        try:
            subprocess.run(["mpiexec", "-n", str(n), "-errfile-pattern", f"{tmp}/err.%r", "-outfile-pattern",
                            f"{tmp}/out.%r", sys.executable, name, "-v"], cwd=tests, env=env, timeout=timeout,
                           capture_output=True)
            finished = True
        except subprocess.TimeoutExpired:
            finished = False
        err = Path(tmp) / "err.0"
        text = err.read_text() if err.exists() else ""
    return {"finished": finished and "\nRan " in text, "tests": outcomes(text)}


def run_mpisim(tests: Path, name: str, n: int, timeout: float = 300) -> dict:
    env = {**os.environ, "PYTHONPATH": os.environ.get("MPISIM_ROOT", str(ROOT))}
    try:
        proc = subprocess.run([sys.executable, "-m", "mpisim", "exec", "-n", str(n), "--tag-output", name, "-v"],
                              cwd=tests, env=env, timeout=timeout, capture_output=True, text=True)
        text, tail = proc.stderr, proc.stderr[-2000:]
    except subprocess.TimeoutExpired as stop:
        text, tail = (stop.stderr or b"").decode(errors="replace"), "timed out"
    rank0 = "\n".join(line[4:] for line in text.splitlines() if line.startswith("[0] "))
    return {"finished": "\nRan " in "\n" + rank0, "tests": outcomes(rank0), "tail": tail}


def passed(run: dict) -> set[str]:
    return {name for name, outcome in run["tests"].items() if outcome == "ok"}


def cell(mpich: dict, sim: dict | None) -> str:
    reference = passed(mpich)
    if sim is None:
        return f"not run/{len(reference)}"
    mark = "" if sim["finished"] else " (stopped)"
    return f"{len(passed(sim) & reference)}/{len(reference)}{mark}"


def table(results: dict, mpich: dict, files: list[str]) -> str:
    lines = ["| file | 1 rank | 2 ranks | 3 ranks | 4 ranks |", "|---|---|---|---|---|"]
    for name in files:
        cells = [cell(mpich[f"{name}@{n}"], results.get(f"{name}@{n}")) if f"{name}@{n}" in mpich else "-"
                 for n in RANKS]
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.mpi4py_suite.suite")
    parser.add_argument("what", choices=["fetch", "mpich", "mpisim", "table"])
    parser.add_argument("files", nargs="*")
    parser.add_argument("-n", default=",".join(map(str, RANKS)))
    parser.add_argument("-o", default=str(HERE / "mpisim.json"))
    args = parser.parse_args(argv)
    tests = fetch()
    if args.what == "fetch":
        print(tests)
        return
    files = [f for f in args.files if f.startswith("test_")] or FILES
    ranks = [int(x) for x in args.n.split(",")]
    mpich = json.loads(MPICH_JSON.read_text()) if MPICH_JSON.exists() else {}
    out = Path(args.o)
    if args.what == "table":
        results = json.loads(Path(args.files[0] if args.files else out).read_text())
        print(table(results, mpich, FILES))
        return
    target, run = (MPICH_JSON, run_mpich) if args.what == "mpich" else (out, run_mpisim)
    results = json.loads(target.read_text()) if target.exists() else {}
    for name in files:
        for n in ranks:
            results[f"{name}@{n}"] = run(tests, name, n)
            target.write_text(json.dumps(dict(sorted(results.items())), indent=0, sort_keys=True) + "\n")
            got = results[f"{name}@{n}"]
            print(f"{name}@{n}: {len(passed(got))} passed of {len(got['tests'])}"
                  f"{'' if got['finished'] else ' (stopped)'}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
