"""The ``program`` workload with ``api: mpi4py``: an unchanged mpi4py script on every rank.

This is what ``mpisim exec -n P program.py ARGS`` runs: the script executes once per rank
(each rank its own ``__main__``), ``from mpi4py import MPI`` gives it
:mod:`mpisim.compat.mpi4py`, and its blocking calls block in simulated time
(:mod:`mpisim.compat.ranks`). Output goes where the program writes it (``sys.stdout`` of the
run), in the order the simulation produces it, which is the same on every run.

The row: ``ranks, time_s`` (simulated time when the last rank finished), ``messages,
bytes`` (every point-to-point message, collectives' included), ``exit_code`` (0: failures
raise instead) and ``mpi_time_s``, the simulated time each rank spent in blocking MPI calls.
A note names the ranks that ended without finalizing MPI (``mpi4py.rc.finalize``), which
MPICH's ``mpiexec`` takes as the end of the job.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

from mpisim.compat import mpi4py as mpi_module
from mpisim.compat import package as _package
from mpisim.compat.check.explore import checked_run
from mpisim.compat.package import MPI4PY_VERSION  # noqa: F401 - the mpi4py API level the module follows
from mpisim.compat.ranks import Runner
from mpisim.compat.stdin import RecordedInput
from mpisim.errors import ConfigError, DeadlockError
from mpisim.workloads.base import RunContext, WorkloadOutput


def mpi4py_package() -> types.ModuleType:
    """A fresh ``mpi4py`` package object whose ``MPI`` is the simulated one (:mod:`mpisim.compat.package`)."""
    return _package.mpi4py_package(mpi_module)


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
    """Run the script on every rank of a fresh world; return one row (see the module docstring).

    With ``check: true`` (``mpisim exec --check``) the run is made under the correctness checker
    (:mod:`mpisim.compat.check`): its findings become notes (``check [kind] rank R, file:line, t = T: what``) and
    the row's ``check_findings`` counts them.
    """
    file = program_file(params, ctx.base_dir)
    findings = None
    if ctx.check:
        stdin = RecordedInput(sys.stdin)  # every re-run reads the same input (mpisim.compat.stdin)
        runner, findings = checked_run(lambda checker, wildcards, stdout: _run_once(params, ctx, file, checker,
                                                                                     wildcards, stdout, stdin.replay()))
    else:
        runner = _run_once(params, ctx, file)
    world = runner.world
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
    unfinalized = mpi_module.unfinalized_ranks(runner.contexts)
    if unfinalized:
        ranks = ", ".join(map(str, unfinalized))
        out.notes.append(f"rank(s) {ranks} ended without MPI_Finalize (mpi4py.rc.finalize is False, or MPI.Init was "
                         "the program's and it never called MPI.Finalize): under MPICH's mpiexec the first rank to "
                         "exit so ends the job, and the ranks still running are killed")
    if findings is not None:
        out.rows[0]["check_findings"] = len(findings)
        out.notes.extend(str(finding) for finding in findings)
    if params.compute == "measured":
        out.notes.append("compute: measured charges the wall time of the Python code between MPI calls: "
                         "times vary from run to run (not deterministic)")
    return out


def _run_once(params: Any, ctx: RunContext, file: Path, checker: Any = None, wildcards: Any = None,
              stdout: Any = None, stdin: Any = None) -> Runner:
    """One run of the program on a fresh world (under the checker's hooks, if given); returns its runner."""
    world = ctx.new_world()
    world.wildcards = wildcards
    runner = Runner(world, file, list(params.args), mpi_module=mpi_module, package=mpi4py_package(),
                    compute=params.compute, speed=params.speed, tag_output=params.tag_output, seed=ctx.seed,
                    stdin=stdin)
    runner.checker = checker
    if stdout is not None:
        stdout.runner = runner
    try:
        runner.run()
    except DeadlockError as err:
        hint = eager_hint(world)
        if not hint:
            raise
        raise DeadlockError(f"{err}\n  {hint}") from err
    return runner


def eager_hint(world: Any) -> str:
    """For a deadlock of blocked rendezvous sends only: the eager limit at which the program would have got past it.

    Head-to-head ``Send`` pairs complete under MPI only while the messages go eagerly: the
    program is then unsafe (MPI allows any ``Send`` to wait for its receive), and whether it
    hangs depends on the library's limit. '' when some rank waits for anything else.
    """
    blocked = [state for state in world.states if not state.finished and state.waiting_on]
    sends = [req for state in blocked for req in state.waiting_on if not req.triggered]
    if not sends or any(req.kind != "send" or req.protocol != "rendezvous" for req in sends):
        return ""
    node_of = world.topology.node_of
    inter = any(node_of(req.comm.world_rank) != node_of(req.comm.group[req.peer]) for req in sends)
    key = "mpi.eager_limit_inter" if inter else "mpi.eager_limit_intra"
    need = max(req.nbytes for req in sends)
    limit = world.config.eager_limit_inter if inter else world.config.eager_limit_intra
    return (f"every blocked rank waits in a rendezvous send: with an eager limit of at least {need} B ({key} is "
            f"{limit} B here) these sends would have completed, as they do under an MPI whose limit is that high -- "
            "the program relies on buffering MPI does not promise (use Sendrecv or Isend)")
