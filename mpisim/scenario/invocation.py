"""One scenario run as the command line asks for it: ``mpisim run FILE`` and ``mpisim exec PROGRAM``.

:func:`~mpisim.scenario.run.run_scenario` simulates a scenario and returns its result; a command
does more around it, in this order, and that order is what this module holds (with ``mpisim check``
and ``mpisim report``, which print a scenario and re-render a report):

1. notes on stderr (a replaced sweep axis, each program that will run on every rank);
2. the estimate before the run (:mod:`~mpisim.scenario.estimate`): a run that cannot fit in memory
   fails with exit 2 before any work, one estimated at more than a day starts only when asked;
3. the sweep's results file (``--resume``), the progress display, stdout kept free for ``--json``;
4. the outputs (``-o DIR``, rendered by :mod:`mpisim.report.render`), the tables or the JSON
   document, ``--update-expect``, and the failed expectations on stderr.

The functions take the parsed options as a small frozen record and write to the streams they are
given, so the command line (:mod:`mpisim.cli`) only maps a run's outcome onto an exit code.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

import yaml

from mpisim import __version__
from mpisim.compat.ranks import ProgramExit
from mpisim.engine.limits import wall_clock_watchdog
from mpisim.errors import ConfigError, MPIError
from mpisim.report.terminal import RunProgress, SweepProgress, exec_summary, failure_text, print_result

# run_scenario is looked up on its module at each call, so that a test can replace it there.
from mpisim.scenario import run as scenario_run
from mpisim.scenario.baseline import still_failing, update_expect
from mpisim.scenario.command_line import apply_rank_count, exec_scenario, failure_document, programs_to_run
from mpisim.scenario.estimate import LONG_RUN_S, REFUSED_RUN_S, run_estimate
from mpisim.scenario.fidelity import resolve as resolve_fidelity
from mpisim.scenario.load import dump, load_dict, load_file, read_scenario_file, replaced_sweep_axes
from mpisim.scenario.model import sweep_points
from mpisim.scenario.observe import wants_link_records
from mpisim.scenario.sweep import default_results_file

__all__ = ["ExecOptions", "RunOptions", "check_file", "exec_program", "make_dir", "rerender_report", "run_file", "write_outputs"]


@dataclass(frozen=True, slots=True)
class RunOptions:
    """What ``mpisim run`` was asked for besides the file and its overrides (one field per flag)."""

    json: bool = False
    output: str | None = None
    no_plots: bool = False
    jobs: int | None = None
    resume: bool = False
    quiet: bool = False
    allow_program: Sequence[str] = ()
    executor: str | None = None
    long_run: bool = False
    update_expect: bool = False


def check_file(file: str, overrides: list[tuple[str, Any]], out: TextIO, *, estimate: bool = False,
               as_json: bool = False) -> None:
    """``mpisim check``: print the scenario fully resolved as YAML, or with *estimate* what its run will cost.

    The estimate comes with the fidelity ``auto`` resolves to, as text or (*as_json*) one JSON
    document. A run that cannot fit in memory raises ConfigError (exit 2) with the figure, as
    ``mpisim run`` would.
    """
    scenario = load_file(file, overrides)
    if estimate:
        est = run_estimate(scenario)
        fidelity = resolve_fidelity(scenario)
        if as_json:
            out.write(json.dumps({"estimate": {"events": est.events if est.events_known else None,
                                               "memory_bytes": est.memory, "wall_s": est.wall_s},
                                  "fidelity": {"fidelity": fidelity.fidelity, "reason": fidelity.reason},
                                  "detail": est.detail}, indent=2, sort_keys=True) + "\n")
        else:
            out.write(f"{file}: {est.describe()} ({est.detail}); fidelity {fidelity.fidelity} ({fidelity.reason})\n")
        return
    out.write(f"# {file}: valid; resolved scenario ({scenario.ranks} ranks")
    if scenario.sweep:
        out.write(f", sweep of {len(sweep_points(scenario.sweep))} points")
    out.write(")\n")
    out.write(yaml.safe_dump(dump(scenario), sort_keys=False, allow_unicode=True, width=100))


def run_file(file: str, overrides: list[tuple[str, Any]], options: RunOptions, out: TextIO, err: TextIO) -> bool:
    """Run the scenario *file* with *overrides*, print its results; return whether it passed.

    A failed simulated program raises MPIError, except with ``--json``, where the document on
    *out* carries the failure (a pipeline parses stdout whatever happened) and the result is False.
    Raises ConfigError (exit 2) for bad input, an estimate that cannot fit, or unwritable outputs.
    """
    scenario = load_file(file, overrides)
    for line in replaced_sweep_axes(read_scenario_file(file), overrides):
        err.write(f"note: {line}\n")
    for program in programs_to_run(scenario, options.allow_program):
        err.write(f"note: running {program} on every rank (a scenario with program: runs that Python file)\n")
    out_dir = Path(options.output).absolute() if options.output else None  # a program's os.chdir must not move it
    if out_dir is not None and wants_link_records(scenario):  # small: record link activity for the heat map
        scenario = load_file(file, [*overrides, ("trace.links", True)])

    # Without a sweep, the estimate, the planning and the event loop share the limit's one clock
    # (each sweep point has its own); the outputs are written after it stopped.
    with contextlib.ExitStack() as clock:
        clock.enter_context(wall_clock_watchdog(scenario.limits.wall_time))  # planning counts too
        estimated = run_estimate(scenario)  # exit 2 here, before any work, for what cannot fit in memory
        if scenario.sweep:
            clock.close()
        if estimated.wall_s > REFUSED_RUN_S and scenario.limits.wall_time is None and not options.long_run:
            raise ConfigError(f"estimate before the run: {estimated.describe()} ({estimated.detail}); a run this long "
                              "starts only when asked: --limit wall_time=1h runs part of it, --long-run all of it",
                              "", file)
        if estimated.wall_s > LONG_RUN_S:
            err.write(f"note: estimate before the run: {estimated.describe()} ({estimated.detail}); "
                      "--limit wall_time=... stops it early\n")
        if out_dir is not None:
            make_dir(out_dir)
        results_file = default_results_file(scenario, out_dir) if scenario.sweep else None
        if results_file is not None and out_dir is None and not os.access(results_file.parent, os.W_OK):
            # The file only serves --resume; a read-only folder must not stop the sweep itself.
            err.write(f"note: {results_file.parent.absolute()} is not writable: the sweep runs without a results "
                      "file, so an interrupted run cannot --resume (give -o DIR to keep one)\n")
            results_file = None
        worlds: list[Any] = []
        # An mpi4py program prints; with --json its output must not mix with the document.
        quiet_stdout = contextlib.redirect_stdout(err) if options.json else contextlib.nullcontext()
        try:
            with quiet_stdout, SweepProgress(err, enabled=bool(scenario.sweep) and not options.quiet) as progress, \
                    RunProgress(err, worlds, enabled=not scenario.sweep and not options.json and not options.quiet,
                                estimate_events=estimated.events if estimated.events_known else None):
                result = scenario_run.run_scenario(scenario, jobs=options.jobs, results_file=results_file,
                                                   resume=options.resume, progress=progress, executor=options.executor,
                                                   worlds=worlds,
                                                   # -o: a failed program's run gets its report (timeline, arrows)
                                                   keep_failure=out_dir is not None and not options.json
                                                   and scenario.workload.kind == "program",
                                                   estimated=True)
        except MPIError as exc:
            if not options.json:
                raise
            # A pipeline parses stdout whatever happened: the document carries the failure.
            _write_json(out, failure_document(scenario, exc))
            err.write(failure_text(exc))
            return False
    if results_file is not None and out_dir is None:
        # The file only served to resume an interrupted run; this one finished.
        results_file.unlink(missing_ok=True)
    if out_dir is not None:
        write_outputs(result, out_dir, figures=not options.no_plots)
    if options.json:
        _write_json(out, result.contract(__version__))
    else:
        print_result(result, out)
    if options.update_expect:
        return _update_expect(file, result, out if not options.json else err, err)
    trace_notes = [note for note in result.notes if "--set trace." in note]
    if trace_notes:  # once per run, on stderr too: a report without timelines should not surprise
        err.write(f"note: {trace_notes[0]}\n")
    if result.failure is not None and not scenario.expect_failure:
        err.write(f"the simulated program failed: {result.failure['error']}\n{result.failure['message']}\n"
                  f"report written to {out_dir}\n")
    elif result.failure is not None:
        expected = all(exp.get("passed") for exp in result.expectations if exp.get("check") == "expect_failure")
        err.write(f"{'expected failure' if expected else 'failure'} ({result.failure['kind']}):\n"
                  f"{result.failure['message']}\n")
    for exp in result.failed_expectations:
        err.write(f"FAILED: {exp['detail']}\n")
    unexpected = result.failure is not None and not scenario.expect_failure  # kept for the report (-o)
    checked = any(row.get("check_findings") for row in result.rows)  # check: true found mistakes
    return bool(result.passed) and not unexpected and not checked


def _update_expect(file: str, result: Any, out: TextIO, err: TextIO) -> bool:
    """Rewrite the file's expectations from *result*, show the diff; return whether the file now holds."""
    update = update_expect(file, result)
    if update.changed:
        out.write(update.diff())
    else:
        out.write(f"{file}: expectations unchanged (every value still holds as written)\n")
    if update.baseline_written is not None:
        out.write(f"wrote {update.baseline_written} (the inputs these baselines come from)\n")
    for line in update.skipped:
        err.write(f"note: {line}\n")
    failing = still_failing(file, result.rows)
    for exp in failing:
        err.write(f"FAILED: {exp['detail']}\n")
    return not failing


@dataclass(frozen=True, slots=True)
class ExecOptions:
    """What ``mpisim exec`` was asked for besides the program (one field per flag)."""

    ranks: int
    topology: str = "laptop-shm"
    json: bool = False
    output: str | None = None
    tag_output: bool = False
    compute: str = "explicit"
    speed: float | None = None
    check: bool = False


def exec_program(program_file: str, args: list[str], overrides: list[tuple[str, Any]], options: ExecOptions,
                 out: TextIO, err: TextIO) -> int:
    """Run the mpi4py *program* with *args* on ``options.ranks`` simulated ranks; return its exit status.

    The status is the program's, as under ``mpiexec``: 0, the status a rank passed to ``sys.exit``
    or ``Abort`` (one byte, never 0 for a failed rank), or 1 for a failure that the ``--json``
    document carries. Without ``--json`` a failed simulated program raises MPIError.
    """
    program = Path(program_file)
    if not program.is_file():
        raise ConfigError(f"no program file {program_file!r}", "program", "mpisim exec")
    if options.ranks < 1:
        raise ConfigError(f"-n must be at least 1, got {options.ranks}", "-n", "mpisim exec")
    workload: dict[str, Any] = {"kind": "program", "program": str(program.resolve()), "api": "mpi4py",
                                "args": list(args), "compute": options.compute}
    if options.speed is not None:
        workload["speed"] = options.speed
    if options.tag_output:
        workload["tag_output"] = True
    raw = exec_scenario(options.topology, program.stem, workload)
    if options.check:
        raw["check"] = True
    shape = load_dict(raw, None, overrides).topology
    raw = apply_rank_count(raw, shape.nodes, shape.ranks_per_node, options.ranks, overrides,
                           rail=shape.inter is not None and shape.inter.kind == "rail", name=shape.name)
    scenario = load_dict(raw, None, overrides)
    out_dir = Path(options.output).absolute() if options.output else None  # a program's os.chdir must not move it
    if out_dir is not None:
        make_dir(out_dir)
    redirect = contextlib.redirect_stdout(err) if options.json else contextlib.nullcontext()
    try:
        with redirect:  # with -o, a failed program's run is kept for its report
            result = scenario_run.run_scenario(scenario, keep_failure=out_dir is not None and not options.json)
    except ProgramExit as exc:
        err.write(f"mpisim exec: {exc}\n")
        # An exit status is one byte: sys.exit(256) would read as success; a failed rank never does.
        return exc.code % 256 or 1
    except MPIError as exc:
        if not options.json:
            raise
        _write_json(out, failure_document(scenario, exc))
        err.write(f"the simulated program failed: {type(exc).__name__}\n{exc}\n")
        return 1
    if out_dir is not None:
        write_outputs(result, out_dir)
    if result.failure is not None:  # kept for the report (-o): the program still failed
        err.write(f"the simulated program failed: {result.failure['error']}\n{result.failure['message']}\n"
                  f"report written to {out_dir}\n")
        return 1
    if options.json:
        _write_json(out, result.contract(__version__))
    else:
        err.write(exec_summary(result))
    return 1 if result.rows and result.rows[0].get("check_findings") else 0


def _write_json(out: TextIO, document: dict[str, Any]) -> None:
    """Write the one ``--json`` document: keys sorted, so the same run gives the same bytes."""
    out.write(json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\n")


def make_dir(path: Path) -> None:
    """Create the output directory *path*; raises ConfigError (exit 2) if it cannot be made."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the output directory: {exc.strerror or exc}", "-o", str(path)) from None


def _render() -> ModuleType:
    """The report renderer, imported on first use."""
    # Lazy: the report layer draws with matplotlib, a second or more to import, which only the
    # commands that write a report need.
    from mpisim.report import render

    return render


def write_outputs(result: Any, out_dir: Path, figures: bool = True) -> None:
    """Write results.json, the CSV tables, report.md with its figures and trace.json to *out_dir*.

    Rendering is the report layer's (:func:`mpisim.report.render.write_outputs`): everything is
    staged first and moved into place only when all of it exists. Raises ConfigError (exit 2)
    if the directory cannot be written.
    """
    try:
        _render().write_outputs(result, out_dir, figures=figures)
    except OSError as exc:
        raise ConfigError(f"cannot write the results: {exc.strerror or exc}", "-o", str(out_dir)) from None


def rerender_report(directory: str, out: TextIO, figures: bool = True) -> None:
    """``mpisim report DIR``: render the report again from DIR/results.json, then print its tables.

    Everything is written next to results.json, which itself is left as it is. Raises
    ConfigError (exit 2) for a missing or malformed results file, or one that cannot be written.
    """
    render = _render()
    path = Path(directory)
    shown = path / "results.json" if path.is_dir() else path
    try:
        result = render.load_result(path)
        render.write_outputs(result, shown.parent, write_results=False, figures=figures)
    except FileNotFoundError:
        raise ConfigError("no such file (run 'mpisim run FILE -o DIR' first)", "", str(shown)) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"not a results file written by mpisim run: {exc}", "", str(shown)) from None
    except OSError as exc:
        raise ConfigError(f"cannot write the report: {exc.strerror or exc}", "", str(shown)) from None
    print_result(result, out)
