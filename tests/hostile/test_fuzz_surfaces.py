"""Seeded fuzzing of every input surface: no internal error, and bad input is one line naming the file.

A mutator derives hostile variants from real inputs -- the shipped scenarios, ``--set`` values,
the shipped OSU and nccl-tests outputs -- by inserting, deleting, duplicating and replacing
text with values known to break parsers (NUL, lone surrogates, tags whose constructor raises,
numbers beyond any double, Unicode digits, terminal escapes). Every variant must either be
accepted (exit 0) or refused with exit 2 in one line that starts with the file's name. The seed
is fixed, so a failure repeats; the counts are in the README's reliability section.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

from mpisim.calibrate.run import read_series
from mpisim.errors import ConfigError
from tests.hostile.helpers import cli

ROOT = Path(__file__).resolve().parents[2]
SEED = 35
HOSTILE = ["\x00", "\ud800", "!!int 'x1'", "!!timestamp '2001-13-45'", "!!map 'x'", "1e400", "-1", "[", "{", "&a",
           "*a", "²", "①", "9" * 5000, "\x1b[2J", "\ufeff", "null", "~", "0", "1e-320", "nan", ".inf", "'", '"',
           ": :", "- -", "\t", "\r", "<<: *a", "!!python/object:os.system x", "10 Gbsp", "1e300 us", "ms"]


def mutate(text: str, rng: random.Random) -> str:
    """One to three random edits of *text*."""
    for _ in range(rng.randint(1, 3)):
        lines = text.splitlines(keepends=True) or [""]
        kind = rng.randrange(5)
        at = rng.randrange(len(text) + 1)
        if kind == 0:
            text = text[:at] + rng.choice(HOSTILE) + text[at:]
        elif kind == 1:
            text = text[:at] + text[at + rng.randint(1, 20):]
        elif kind == 2:
            i = rng.randrange(len(lines))
            lines.insert(i, lines[i])
            text = "".join(lines)
        elif kind == 3:  # replace a token
            words = text.split(" ")
            words[rng.randrange(len(words))] = rng.choice(HOSTILE)
            text = " ".join(words)
        else:
            text = text[:at]
    return text


def _write(path: Path, text: str) -> None:
    path.write_bytes(text.encode("utf-8", "surrogatepass"))


def _verdict(code: int, err: str, file: str) -> str:
    assert "internal error" not in err and "Traceback" not in err, err
    if code == 0:
        return "accepted"
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(file), err
    return "refused"


def test_scenario_files_and_set_values(tmp_path, record_property):
    rng = random.Random(SEED)
    sources = sorted(ROOT.glob("scenarios/*.yaml"))
    counts: Counter[str] = Counter()
    for n in range(300):
        source = rng.choice(sources)
        file = tmp_path / f"m{n}.yaml"
        _write(file, mutate(source.read_text(), rng))
        code, _, err = cli("check", str(file))
        counts["scenario " + _verdict(code, err, str(file))] += 1
    base = tmp_path / "base.yaml"
    base.write_text("topology: {preset: ib-hdr, nodes: 2}\n"
                    "workload: {kind: collective, collective: allreduce, sizes: [1 KiB]}\n")
    keys = ["topology.nodes", "seed", "workload.sizes", "mpi.eager_limit", "limits.wall_time", "sweep.topology.nodes",
            "workload", "name", "topology.inter.bandwidth", "expect"]
    for _ in range(150):
        value = mutate(rng.choice(["16", "8 KiB", "[1, 2]", "{a: 1}", "ring", "10 s"]), rng)
        code, _, err = cli("check", str(base), "--set", f"{rng.choice(keys)}={value}")
        counts["--set " + _verdict(code, err, str(base))] += 1
    record_property("counts", dict(counts))
    print(dict(counts))
    assert counts["scenario refused"] > 100 and counts["--set refused"] > 20


def test_calibrate_inputs(tmp_path):
    rng = random.Random(SEED)
    sources = sorted((ROOT / "tests" / "calibrate" / "data").glob("*.txt"))
    counts: Counter[str] = Counter()
    for n in range(400):
        source = rng.choice(sources)
        file = tmp_path / f"{n}_{source.name}"
        _write(file, mutate(source.read_text(), rng))
        try:
            read_series(str(file), 16)
            counts["calibrate accepted"] += 1
        except ConfigError as err:
            assert str(err).startswith(str(file)) and "\n" not in str(err), err
            counts["calibrate refused"] += 1
    print(dict(counts))
    assert counts["calibrate refused"] > 100


PROGRAM = ("import sys\nfrom mpi4py import MPI\nimport numpy as np\ncomm = MPI.COMM_WORLD\n"
           "data = np.arange(4.0) * comm.rank\ntotal = comm.allreduce(data.sum())\n"
           "if comm.rank == 0:\n    print(total, sys.argv[1:])\ncomm.Barrier()\n")
OPTIONS = [["-n", "2"], ["-n", "0"], ["-n", "3"], ["--limit", "wall_time=2s"], ["--limit", "events=10"],
           ["--limit", "x=1"], ["--topology", "ib-hdr"], ["--topology", "{preset: nope}"], ["--topology", "["],
           ["--set", "mpi.eager_limit=1e400 B"], ["--compute", "none"], ["--tag-output"]]


def test_exec_programs_and_options(tmp_path):
    rng = random.Random(SEED)
    counts: Counter[str] = Counter()
    for n in range(40):
        program = tmp_path / f"p{n}.py"
        _write(program, mutate(PROGRAM, rng) if n % 2 else PROGRAM)
        options = ["-n", "2"] + [part for _ in range(rng.randint(0, 2)) for part in rng.choice(OPTIONS)]
        code, _, err = cli("exec", *options, "--limit", "wall_time=5s", str(program), rng.choice(HOSTILE))
        assert "internal error" not in err, err
        assert code in (0, 1, 2), err
        counts[f"exec exit {code}"] += 1
    print(dict(counts))


def test_baselines(tmp_path):
    rng = random.Random(SEED)
    file = tmp_path / "g.yaml"
    gated = ("topology: {preset: ib-hdr, nodes: 2}\n"
             "workload: {kind: collective, collective: allreduce, sizes: [1 KiB], algorithm: ring}\n"
             "expect:\n  - {metric: time_s, baseline: 1 ns, max_increase: 2%}\n")
    file.write_text(gated)
    cli("run", str(file), "--update-expect")
    good = (tmp_path / "g.baseline.json").read_text()
    counts: Counter[str] = Counter()
    for _ in range(40):
        file.write_text(gated)
        _write(tmp_path / "g.baseline.json", mutate(good, rng))
        code, out, err = cli("run", str(file))
        assert "internal error" not in err and "Traceback" not in err, err
        assert code == 1 and "baseline" in out, err
        counts["baseline gate reported"] += 1
    print(dict(counts))
