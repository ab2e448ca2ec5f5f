"""The ``program`` workload with ``api: mpi4py``: an unchanged mpi4py script on every rank.

This is what ``mpisim exec -n P program.py ARGS`` runs: the script executes once per rank
(each rank its own ``__main__``), ``from mpi4py import MPI`` gives it
:mod:`mpisim.compat.mpi4py`, and its blocking calls block in simulated time
(:mod:`mpisim.compat.ranks`). Output goes where the program writes it (``sys.stdout`` of the
run), in the order the simulation produces it, which is the same on every run.

The row: ``ranks, time_s`` (simulated time when the last rank finished), ``messages,
bytes`` (every point-to-point message, collectives' included), ``exit_code`` (0: failures
raise instead) and ``mpi_time_s``, the simulated time each rank spent in blocking MPI calls.
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

from mpisim.compat import mpi4py as mpi_module
from mpisim.compat.ranks import Runner
from mpisim.errors import ConfigError
from mpisim.workloads.base import RunContext, WorkloadOutput

MPI4PY_VERSION = "4.0.0"  # the mpi4py API level the module follows


def mpi4py_package() -> types.ModuleType:
    """A fresh ``mpi4py`` package object whose ``MPI`` is the simulated one."""
    package = types.ModuleType("mpi4py", "mpi4py as seen by a program under mpisim exec")
    package.MPI = mpi_module  # type: ignore[attr-defined]
    package.__version__ = MPI4PY_VERSION  # type: ignore[attr-defined]
    package.rc = types.SimpleNamespace(initialize=True, threads=True, thread_level="multiple",  # type: ignore[attr-defined]
                                       finalize=None, fast_reduce=True, recv_mprobe=True, errors="exception")
    package.get_config = dict  # type: ignore[attr-defined]
    return package


def program_file(params: Any, base_dir: Path) -> Path:
    """The program's file, resolved against the scenario's folder; ConfigError if it is missing."""
    file = Path(params.path)
    if not file.is_absolute():
        file = base_dir / file
    if not file.is_file():
        raise ConfigError(f"no program file {str(file)!r}", "program")
    try:
        compile(file.read_bytes(), str(file), "exec")
    except (SyntaxError, ValueError) as err:
        raise ConfigError(f"cannot read {file.name} as Python: {err}", "program") from None
    return file


def run_mpi4py(params: Any, ctx: RunContext) -> WorkloadOutput:
    """Run the script on every rank of a fresh world; return one row (see the module docstring)."""
    file = program_file(params, ctx.base_dir)
    world = ctx.new_world()
    runner = Runner(world, file, list(params.args), mpi_module=mpi_module, package=mpi4py_package(),
                    compute=params.compute, speed=params.speed, tag_output=params.tag_output, seed=ctx.seed)
    runner.run()
    out = WorkloadOutput()
    times = runner.mpi_times()
    out.rows.append({
        "ranks": world.size,
        "time_s": world.env.now,
        "messages": world.tracer.message_count,
        "bytes": world.tracer.message_bytes,
        "exit_code": 0,
        "mpi_time_s": times,
    })
    out.worlds.append((file.name, world))
    out.notes.extend(world.unmatched)
    if params.compute == "measured":
        out.notes.append("compute: measured charges the wall time of the Python code between MPI calls: "
                         "times vary from run to run (not deterministic)")
    return out
