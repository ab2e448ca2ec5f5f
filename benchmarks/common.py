"""What every benchmark module shares: figures with targets, isolated runs, memory and worlds.

A benchmark module measures one or a few *cases* and reports each measurement as a
:class:`Figure`: a value with its unit, the target it is held to (if any), whether it met it,
and the command that reproduces it. Every case runs in a fresh Python process of its own
(:func:`run_isolated`), for two reasons: peak memory (the kernel's high-water mark,
``ru_maxrss``) then belongs to that case alone, and one case's garbage cannot slow the next.

Inside a case process, a module is called as ``python -m benchmarks.<module> --case NAME
--json`` and prints one JSON document, ``{"figures": [...]}``; without ``--json`` it prints
the figures as text. Without ``--case`` a module runs all its cases, each isolated.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GiB = 2**30


@dataclass
class Figure:
    """One measured figure, the target it is held to ('' for none) and how to reproduce it."""

    name: str
    value: float
    unit: str
    target: str = ""
    passed: bool | None = None
    reproduce: str = ""
    note: str = ""

    def line(self) -> str:
        """Return the figure as one line of text: name, value, target and verdict."""
        verdict = "" if self.passed is None else ("PASS" if self.passed else "FAIL")
        target = f"  (target {self.target})" if self.target else ""
        note = f"  [{self.note}]" if self.note else ""
        return f"{verdict:>4}  {self.name}: {format_value(self.value, self.unit)}{target}{note}"


def format_value(value: float, unit: str) -> str:
    """Format *value* with *unit* compactly (3 significant digits, thousands for big counts)."""
    if unit in ("", "x"):
        return f"{value:.3g}{unit}" if unit else f"{value:,.0f}" if value >= 1000 else f"{value:.3g}"
    if value >= 100_000:
        return f"{value:,.0f} {unit}"
    return f"{value:.3g} {unit}"


def target(name: str, value: float, unit: str, limit: float, *, at_least: bool = False, reproduce: str = "",
           note: str = "") -> Figure:
    """Return a figure held to ``value <= limit`` (or ``>= limit`` with *at_least*)."""
    passed = value >= limit if at_least else value <= limit
    sign = ">=" if at_least else "<="
    return Figure(name, value, unit, f"{sign} {format_value(limit, unit)}", passed, reproduce, note)


def info(name: str, value: float, unit: str, *, reproduce: str = "", note: str = "") -> Figure:
    """Return an informational figure (no target)."""
    return Figure(name, value, unit, "", None, reproduce, note)


def peak_rss() -> int:
    """Return this process's peak resident memory in bytes (the kernel's high-water mark)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # Linux reports KiB


def current_rss() -> int:
    """Return this process's resident memory now, in bytes (Linux; 0 where unknown)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


@contextmanager
def stopwatch() -> Iterator[dict[str, float]]:
    """Time a block: ``with stopwatch() as t: ...`` then ``t["wall"]`` and ``t["cpu"]`` in seconds."""
    times: dict[str, float] = {}
    wall, cpu = time.perf_counter(), time.process_time()
    yield times
    times["wall"] = time.perf_counter() - wall
    times["cpu"] = time.process_time() - cpu


def command(module: str, case: str | None = None) -> str:
    """Return the shell command that reproduces *case* of *module* (run from the repository root)."""
    return f"python -m benchmarks.{module}" + (f" --case {case}" if case else "")


def run_isolated(module: str, case: str, timeout: float = 900.0) -> list[Figure]:
    """Run one case of ``benchmarks.<module>`` in a fresh process; return its figures.

    A case that crashes or times out is reported as one failing figure carrying the error.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-m", f"benchmarks.{module}", "--case", case, "--json"]
    try:
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return [Figure(f"{module} {case}", timeout, "s", f"finish within {timeout:g} s", False, command(module, case),
                       "timed out")]
    try:
        return [Figure(**f) for f in json.loads(done.stdout)["figures"]]
    except (ValueError, KeyError, TypeError):
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return [Figure(f"{module} {case}", float(done.returncode), "exit code", "0", False, command(module, case),
                       tail[0][:200])]


def module_main(module: str, doc: str, cases: dict[str, Callable[[], list[Figure]]],
                argv: list[str] | None = None,
                derive: Callable[[list[Figure]], list[Figure]] | None = None) -> int:
    """The command line of a benchmark module: run one case here, or every case isolated.

    *derive*, if given, computes figures that combine several cases (run after all of them).
    Returns 0 when every figure with a target passed, 1 otherwise.
    """
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{module}", description=doc.splitlines()[0])
    parser.add_argument("--case", choices=sorted(cases), help="run only this case, in this process")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON document")
    args = parser.parse_args(argv)
    if args.case:
        figures = cases[args.case]()
    else:
        figures = []
        for name in cases:
            figures.extend(run_isolated(module, name))
        if derive is not None:
            figures.extend(derive(figures))
    if args.json:
        print(json.dumps({"figures": [asdict(f) for f in figures]}))
    else:
        print_figures(figures)
    return 0 if all(f.passed is not False for f in figures) else 1


def print_figures(figures: list[Figure]) -> None:
    """Print figures, each followed by the command that reproduces it."""
    for figure in figures:
        print(figure.line())
        if figure.reproduce:
            print(f"      reproduce: {figure.reproduce}")


def quiet_world(topology: Any, model: str = "fairshare", mpi: Any = None, *, messages: bool = False) -> Any:
    """Build a World on *topology* whose tracer keeps no per-message or per-span records.

    Counters (messages, bytes) stay exact; at 1024 ranks a ring allreduce sends two million
    messages, and keeping a record of each would cost more memory and time than simulating it.
    """
    from mpisim.engine.sim import Simulation
    from mpisim.engine.trace import Tracer
    from mpisim.mpi import MpiConfig, World
    from mpisim.network.models import make_model

    sim = Simulation(seed=0, tracer=Tracer(messages=messages, spans=False, links=False))
    return World(sim, topology, make_model(model, sim, topology), mpi or MpiConfig())


def preset_topology(name: str, **overrides: Any) -> tuple[Any, Any]:
    """Return (built topology, MpiConfig with the preset's MPI defaults) for preset *name* with *overrides*."""
    from mpisim.network.presets import load_preset
    from mpisim.network.topology import TopologySpec, build_topology
    from mpisim.scenario.load import apply_overrides

    raw = load_preset(name)
    mpi_raw = raw.pop("mpi", {}) or {}
    raw = apply_overrides(raw, overrides)
    spec = TopologySpec.from_dict(raw, name=name)
    return build_topology(spec), _mpi_config(mpi_raw)


def _mpi_config(raw: dict[str, Any]) -> Any:
    from mpisim.engine.units import parse_size, parse_time
    from mpisim.mpi import MpiConfig

    fields: dict[str, Any] = {}
    for key, value in raw.items():
        if key.startswith("eager_limit") or key == "header_bytes":
            fields[key] = parse_size(value)
        elif key.endswith("overhead"):
            fields[key] = parse_time(value)
    return MpiConfig(**fields)
