"""The ``mpisim`` command: parse arguments, call the library, print results. No simulation here.

::

    mpisim run FILE [--set KEY=VALUE ...] [--json] [-o DIR] [--seed N] [--payload data|size]
                    [--jobs N | --executor local[:N]|dask[:ADDRESS]] [--resume] [--update-expect]
                    [--limit simulated_time|events|wall_time=VALUE ...] [-v]
    mpisim check FILE [--set KEY=VALUE ...]
    mpisim list topologies|algorithms|workloads [--json]
    mpisim report DIR
    mpisim explain COLLECTIVE ALGORITHM [--ranks P] [--count N] [--topology PRESET] [-o DIR]
    mpisim exec -n N [--topology PRESET|FILE] [--set KEY=VALUE ...] [-o DIR] [--json] [--tag-output]
                [--compute none|measured|explicit] [--speed X] program.py [ARGS ...]

Each subcommand is a small class whose docstring is its ``--help`` text.

Exit codes: 0 success; 1 an expectation failed, the simulated program failed (deadlock,
MPI error: the full MPI report goes to stderr) or a run limit stopped it (``--limit``); 2 bad input (YAML, schema, units, unknown
algorithm, impossible topology, missing file), reported as one line
``<file>: <path>: <message>`` on stderr. Tracebacks appear only with ``-v``; an unexpected
internal error prints one ``internal error: ...`` line (exit 1).

``--json`` prints exactly one JSON document on stdout (keys sorted, no wall-clock times, so
the same scenario and seed give byte-identical output). ``-o DIR`` writes ``results.json``,
the CSV tables, ``report.md`` with ``figures/`` and ``trace.json`` there (rendered by the report
layer, moved into place only once all of it exists).

A sweep appends each finished point to a JSON-lines file as it completes: ``DIR/sweep.jsonl``
with ``-o DIR`` (kept with the other outputs), else ``<scenario stem>.sweep.jsonl`` in the
current directory, which is removed once the sweep has finished. After an interruption or a
failed point, ``--resume`` (same command line) skips the points that file already holds.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, TextIO

import yaml

from mpisim import __version__
from mpisim.collectives import nccl, registry  # importing the package registers every algorithm
from mpisim.compat.ranks import ProgramExit
from mpisim.engine.limits import wall_clock_watchdog
from mpisim.errors import ConfigError, LimitReached, MPIError
from mpisim.network.presets import list_presets
from mpisim.report.columns import cell
from mpisim.report.terminal import (
    RunProgress,
    SweepProgress,
    console_for,
    exec_summary,
    print_result,
    print_table,
    wide_table,
)

# run_scenario is looked up on its module at each call, so that a test can replace it there.
from mpisim.scenario import run as scenario_run
from mpisim.scenario import schema as scenario_schema
from mpisim.scenario.baseline import still_failing, update_expect
from mpisim.scenario.command_line import (
    apply_rank_count,
    exec_scenario,
    failure_document,
    parse_limits,
    programs_to_run,
)
from mpisim.scenario.estimate import LONG_RUN_S, REFUSED_RUN_S, run_estimate
from mpisim.scenario.executors import parse_executor
from mpisim.scenario.fidelity import resolve as resolve_fidelity
from mpisim.scenario.load import (
    dump,
    load_dict,
    load_file,
    parse_set,
    read_scenario_file,
    read_yaml,
    replaced_sweep_axes,
)
from mpisim.scenario.model import sweep_points
from mpisim.scenario.observe import wants_link_records
from mpisim.scenario.run import write_atomic
from mpisim.scenario.sweep import default_results_file
from mpisim.teaching import explain, format_explanation, write_diagram
from mpisim.workloads import workloads  # importing the package registers every kind

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


# --- commands -----------------------------------------------------------------------------------


class Command(ABC):
    """Base class: a subcommand adds its arguments and runs; the docstring is its help."""

    name: ClassVar[str]

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:  # noqa: B027 - an optional hook
        """Declare this command's arguments."""

    @abstractmethod
    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        """Do the work; return the exit code."""
        ...


def _add_set(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario key before validation, e.g. --set topology.nodes=16 "
        "--set mpi.eager_limit='8 KiB' (values are read as YAML; repeatable)",
    )


class RunCommand(Command):
    """Run a scenario: simulate it, print the results and check its expectations.

    Exits 1 if an expectation fails or the simulated program fails (e.g. deadlocks),
    2 if the scenario is invalid.
    """

    name = "run"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("file", help="scenario YAML file")
        _add_set(parser)
        parser.add_argument("--json", action="store_true", help="print one JSON document on stdout and nothing else")
        parser.add_argument("-o", "--output", metavar="DIR",
                            help="write results.json, CSV tables, report.md with figures and trace.json to DIR")
        parser.add_argument("--no-plots", action="store_true", help="with -o: skip the PNG figures")
        parser.add_argument("--seed", type=int, help="override the scenario's seed")
        parser.add_argument("--payload", choices=("data", "size"), help="real numpy data, or byte counts only")
        parser.add_argument(
            "--jobs", type=int, default=None, metavar="N", help="worker processes for sweeps (default: one per CPU)"
        )
        parser.add_argument("--resume", action="store_true", help="sweeps: skip points finished by an earlier run")
        parser.add_argument("--quiet", action="store_true",
                            help="no progress display (it is off anyway when stderr is not a terminal)")
        parser.add_argument("--allow-program", action="append", default=[], metavar="PATH",
                            help="run this program file although it lies outside the scenario's folder")
        parser.add_argument("--executor", metavar="local[:N]|dask[:ADDRESS]",
                            help="where sweep points run: a local process pool (N workers) or a Dask cluster "
                                 "(no address: a LocalCluster)")
        parser.add_argument("--limit", action="append", default=[], metavar="KEY=VALUE",
                            help="stop the run (exit 1, with where every rank was) at simulated_time=10s, "
                                 "events=50000000 or wall_time=300s; the scenario's limits: block, from the "
                                 "command line (repeatable)")
        parser.add_argument("--long-run", action="store_true",
                            help="start a run estimated at more than a day without a wall_time limit")
        parser.add_argument("--update-expect", action="store_true",
                            help="write this run's values into the file's expect: block (gate baselines always, "
                                 "other values where they fail), keeping comments and layout; show the diff")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        if args.update_expect and (args.set or args.seed is not None or args.payload is not None):
            raise ConfigError("records the file's own values: run it without --set, --seed or --payload",
                              "--update-expect")
        overrides = parse_set(args.set) + parse_limits(args.limit)
        if args.seed is not None:
            overrides.append(("seed", args.seed))
        if args.payload is not None:
            overrides.append(("payload", args.payload))
        if args.jobs is not None and args.jobs < 1:
            raise ConfigError(f"--jobs must be at least 1, got {args.jobs}", "--jobs")
        if args.executor is not None:
            parse_executor(args.executor)  # bad input fails before anything runs
            if args.jobs is not None:
                raise ConfigError("give --jobs N or --executor, not both (--jobs N is --executor local:N)", "--executor")
        scenario = load_file(args.file, overrides)
        for line in replaced_sweep_axes(read_scenario_file(args.file), overrides):
            err.write(f"note: {line}\n")
        for program in programs_to_run(scenario, args.allow_program):
            err.write(f"note: running {program} on every rank (a scenario with program: runs that Python file)\n")
        out_dir = Path(args.output).absolute() if args.output else None  # a program's os.chdir must not move it
        if out_dir is not None and wants_link_records(scenario):  # small: record link activity for the heat map
            scenario = load_file(args.file, [*overrides, ("trace.links", True)])

        with wall_clock_watchdog(scenario.limits.wall_time):  # planning counts against the limit too
            estimated = run_estimate(scenario)  # exit 2 here, before any work, for what cannot fit in memory
        if estimated.wall_s > REFUSED_RUN_S and scenario.limits.wall_time is None and not args.long_run:
            raise ConfigError(f"estimate before the run: {estimated.describe()} ({estimated.detail}); a run this long "
                              "starts only when asked: --limit wall_time=1h runs part of it, --long-run all of it",
                              "", args.file)
        if estimated.wall_s > LONG_RUN_S:
            err.write(f"note: estimate before the run: {estimated.describe()} ({estimated.detail}); "
                      "--limit wall_time=... stops it early\n")
        if out_dir is not None:
            _make_dir(out_dir)
        results_file = default_results_file(scenario, out_dir) if scenario.sweep else None
        if results_file is not None and out_dir is None and not os.access(results_file.parent, os.W_OK):
            # The file only serves --resume; a read-only folder must not stop the sweep itself.
            err.write(f"note: {results_file.parent.absolute()} is not writable: the sweep runs without a results "
                      "file, so an interrupted run cannot --resume (give -o DIR to keep one)\n")
            results_file = None
        worlds: list[Any] = []
        # An mpi4py program prints; with --json its output must not mix with the document.
        quiet_stdout = contextlib.redirect_stdout(err) if args.json else contextlib.nullcontext()
        try:
            with quiet_stdout, SweepProgress(err, enabled=bool(scenario.sweep) and not args.quiet) as progress, \
                    RunProgress(err, worlds, enabled=not scenario.sweep and not args.json and not args.quiet,
                                estimate_events=estimated.events if estimated.events_known else None):
                result = scenario_run.run_scenario(scenario, jobs=args.jobs, results_file=results_file, resume=args.resume,
                                      progress=progress, executor=args.executor, worlds=worlds)
        except MPIError as exc:
            if not args.json:
                raise
            # A pipeline parses stdout whatever happened: the document carries the failure.
            out.write(json.dumps(failure_document(scenario, exc), indent=2, sort_keys=True) + "\n")
            err.write(_failure_text(exc))
            return EXIT_FAILED
        if results_file is not None and out_dir is None:
            # The file only served to resume an interrupted run; this one finished.
            results_file.unlink(missing_ok=True)
        if out_dir is not None:
            write_outputs(result, out_dir, figures=not args.no_plots)
        if args.json:
            out.write(json.dumps(result.contract(__version__), indent=2, sort_keys=True, allow_nan=False) + "\n")
        else:
            print_result(result, out)
        if args.update_expect:
            return self._update_expect(args.file, result, out if not args.json else err, err)
        trace_notes = [note for note in result.notes if "--set trace." in note]
        if trace_notes:  # once per run, on stderr too: a report without timelines should not surprise
            err.write(f"note: {trace_notes[0]}\n")
        if result.failure is not None:
            expected = all(exp.get("passed") for exp in result.expectations if exp.get("check") == "expect_failure")
            err.write(f"{'expected failure' if expected else 'failure'} ({result.failure['kind']}):\n"
                      f"{result.failure['message']}\n")
        for exp in result.failed_expectations:
            err.write(f"FAILED: {exp['detail']}\n")
        return EXIT_OK if result.passed else EXIT_FAILED

    @staticmethod
    def _update_expect(file: str, result: Any, out: TextIO, err: TextIO) -> int:
        """Rewrite the file's expectations from *result*, show the diff, and check the file again."""
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
        return EXIT_FAILED if failing else EXIT_OK


class CheckCommand(Command):
    """Validate a scenario and print it fully resolved (defaults filled in, units in SI), as YAML."""

    name = "check"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("file", help="scenario YAML file")
        _add_set(parser)
        parser.add_argument("--estimate", action="store_true",
                            help="print what the run will cost (events, memory, wall time), auto resolved; "
                                 "exit 2 if it cannot fit in memory")
        parser.add_argument("--json", action="store_true", help="with --estimate: one JSON document")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        scenario = load_file(args.file, parse_set(args.set))
        if args.estimate:
            est = run_estimate(scenario)  # a run that cannot fit: exit 2 with the figure, as `run` would
            fidelity = resolve_fidelity(scenario)
            if args.json:
                out.write(json.dumps({"estimate": {"events": est.events if est.events_known else None,
                                                   "memory_bytes": est.memory, "wall_s": est.wall_s},
                                      "fidelity": {"fidelity": fidelity.fidelity, "reason": fidelity.reason},
                                      "detail": est.detail}, indent=2, sort_keys=True) + "\n")
            else:
                out.write(f"{args.file}: {est.describe()} ({est.detail}); fidelity {fidelity.fidelity} "
                          f"({fidelity.reason})\n")
            return EXIT_OK
        out.write(f"# {args.file}: valid; resolved scenario ({scenario.ranks} ranks")
        if scenario.sweep:
            out.write(f", sweep of {len(sweep_points(scenario.sweep))} points")
        out.write(")\n")
        out.write(yaml.safe_dump(dump(scenario), sort_keys=False, allow_unicode=True, width=100))
        return EXIT_OK


class ListCommand(Command):
    """List what a scenario can name: topology presets, collective algorithms, workload kinds."""

    name = "list"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("what", choices=("topologies", "algorithms", "workloads"))
        parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        items, columns = _list_items(args.what)
        if args.json:
            out.write(json.dumps(items, indent=2, sort_keys=True) + "\n")
            return EXIT_OK
        cells = [[cell(getter(item)) for _, getter in columns] for item in items]
        print_table(console_for(out), wide_table([header for header, _ in columns], cells, title=args.what,
                                           title_justify="left"))
        return EXIT_OK


def _list_items(what: str) -> tuple[list[dict[str, Any]], list[tuple[str, Callable[[dict[str, Any]], Any]]]]:
    if what == "topologies":
        items = [{"name": name, "summary": summary} for name, summary in list_presets()]
        return items, [("name", lambda i: i["name"]), ("summary", lambda i: i["summary"])]
    if what == "algorithms":
        def gpu(algo: registry.Algorithm) -> str | None:
            """"only": it needs GPU hardware (nvls: a switch that reduces); "nccl": NCCL's, runs anywhere."""
            if "in_switch_reduction" in algo.requires:
                return "only"
            return "nccl" if algo.name in nccl.GPU_ALGORITHMS else None

        items = [{**algo.to_dict(), "gpu": gpu(algo)} for algo in registry.available()]
        return items, [
            ("collective", lambda i: i["collective"]),
            ("algorithm", lambda i: i["algorithm"]),
            ("GPU", lambda i: {"only": "only (NVLS switch)", "nccl": "NCCL-style"}.get(i["gpu"] or "", "")),
            ("requires", lambda i: ", ".join(i["requires"])),
            ("summary", lambda i: i["summary"]),
        ]

    items = [{"kind": w.kind, "summary": w.summary} for w in workloads()]
    return items, [("kind", lambda i: i["kind"]), ("summary", lambda i: i["summary"])]


class ReportCommand(Command):
    """Render the report again from the results saved by 'mpisim run -o DIR' (nothing is re-run).

    Reads DIR/results.json and writes report.md, figures/*.png, the CSV tables and trace.json
    next to it, then prints the result tables.
    """

    name = "report"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("dir", help="output directory of 'mpisim run -o DIR' (or a results.json file)")
        parser.add_argument("--no-plots", action="store_true", help="skip the PNG figures")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        # Lazy (here and in write_outputs): the report layer draws with matplotlib, a second or more
        # to import, which only commands that write a report need.
        from mpisim.report.render import load_result, write_outputs

        path = Path(args.dir)
        shown = path / "results.json" if path.is_dir() else path
        try:
            result = load_result(path)
            # Everything is written next to results.json, which itself is left as it is.
            write_outputs(result, shown.parent, write_results=False, figures=not args.no_plots)
        except FileNotFoundError:
            raise ConfigError("no such file (run 'mpisim run FILE -o DIR' first)", "", str(shown)) from None
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"not a results file written by mpisim run: {exc}", "", str(shown)) from None
        except OSError as exc:
            raise ConfigError(f"cannot write the report: {exc.strerror or exc}", "", str(shown)) from None
        print_result(result, out)
        return EXIT_OK


class ExplainCommand(Command):
    """Teach a collective algorithm: run it on small integer arrays and print it step by step.

    Each step lists its messages (who sends which elements to whom, and their values) and then
    which elements of every rank's input each rank has. At the end: every rank's result next to
    numpy's, and the algorithm's cost formula with p, n, alpha, beta, gamma substituted next to
    the simulated time. The default network is contention-free (analytic model, every pair of
    ranks on its own 1 GB/s link with 1 us latency). -o DIR also writes a diagram (ranks x
    steps, one arrow per message). Exits 1 if a result differs from numpy's.
    """

    name = "explain"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("collective", help="e.g. allreduce (see 'mpisim list algorithms')")
        parser.add_argument("algorithm", help="e.g. ring")
        parser.add_argument("--ranks", "-p", type=int, default=4, metavar="P", help="number of ranks (default 4)")
        parser.add_argument("--count", type=int, default=None, metavar="N",
                            help="elements per rank's buffer (default: P, one element per block)")
        parser.add_argument("--root", type=int, default=0, help="root rank of bcast, reduce, gather, scatter")
        parser.add_argument("--topology", default=None, metavar="PRESET|YAML",
                            help="a topology preset (see 'mpisim list topologies') or an inline YAML mapping")
        parser.add_argument("--network", choices=("analytic", "fairshare"), default=None,
                            help="network model (default: explain's teaching network, see 'Network:' in its output)")
        parser.add_argument("--ports", type=int, default=None, metavar="N",
                            help="messages a rank may send (and receive) at once (default 1: the textbooks' "
                                 "single-port network, on which the formulas count rounds; 0: no limit)")
        parser.add_argument("-o", "--output", metavar="DIR", help="also write a diagram PNG to DIR")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        topology: Any = args.topology
        if topology is not None and any(ch in topology for ch in "{:"):
            topology = read_yaml(topology, "--topology")
        ex = explain(args.collective, args.algorithm, args.ranks, count=args.count, topology=topology,
                     network=args.network, root=args.root, ports=args.ports)
        out.write(format_explanation(ex))
        if args.output:
            try:
                path = write_diagram(ex, args.output)
            except OSError as exc:
                raise ConfigError(f"cannot write the diagram: {exc.strerror or exc}", "-o", args.output) from None
            out.write(f"\ndiagram written to {path}\n")
        return EXIT_OK if ex.correct else EXIT_FAILED


class CalibrateCommand(Command):
    """Fit a preset to OSU and nccl-tests output from your own cluster.

    Each file is read (OSU micro-benchmarks v5-7, nccl-tests), every point is predicted by an
    mpisim run on the base preset, and the preset's physically meaningful parameters that the
    data can identify are fitted by least squares on relative error; the others keep the base's
    values. Example: mpisim calibrate osu_latency.txt osu_bw.txt --base ib-hdr -o mycluster.yaml
    then: mpisim run my-scenario.yaml --set topology=mycluster.yaml
    """

    name = "calibrate"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("files", nargs="+", metavar="FILE", help="OSU or nccl-tests output, one run per file")
        parser.add_argument("--base", required=True, metavar="PRESET", help="the preset to start from, e.g. ib-hdr")
        parser.add_argument("--nodes", type=int, default=None, help="nodes of the runs whose output does not say")
        parser.add_argument("--ranks-per-node", type=int, default=None, help="ranks per node of those runs")
        parser.add_argument("--holdout", default="0%", metavar="SHARE",
                            help="leave this share of the points out of the fit and report their error, e.g. 20%%")
        parser.add_argument("--in-place", action="store_true", help="nccl-tests: fit the in-place times")
        parser.add_argument("-o", "--output", metavar="PRESET.yaml", help="write the fitted preset here")
        parser.add_argument("--report", metavar="DIR", help="write report.md and residuals.png to DIR")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        # Lazy: calibration fits with scipy, seconds to import, which no other command needs.
        from mpisim.calibrate.output import preset_text, summary, write_report
        from mpisim.calibrate.run import calibrate, parse_share

        if args.output and not args.output.endswith((".yaml", ".yml")):
            raise ConfigError(f"a preset file name ends in .yaml, got {args.output!r}", "-o")
        result = calibrate(args.files, args.base, nodes=args.nodes, ranks_per_node=args.ranks_per_node,
                           holdout=parse_share(args.holdout), placement="in-place" if args.in_place else "out-of-place")
        out.write(summary(result))
        try:
            if args.output:
                write_atomic(args.output, preset_text(result, args.files, args.output))
                out.write(f"preset written to {args.output}\n")
            if args.report:
                out.write(f"report written to {write_report(result, args.files, Path(args.report))}\n")
        except OSError as exc:
            raise ConfigError(f"cannot write it: {exc.strerror or exc}", "", args.output or args.report) from None
        return EXIT_OK


class ExecCommand(Command):
    """Run an unchanged mpi4py program on N simulated ranks, like mpiexec -n N python program.py ARGS.

    Every rank's stdout and stderr are forwarded (--tag-output prefixes each line with
    "[rank] "), stdin goes to rank 0, and the exit code is the program's: 0, the status a rank
    passed to sys.exit or MPI.COMM_WORLD.Abort, or 1 on a deadlock, an MPI error or an
    exception (with the report: each blocked rank, its call and its line in the program).
    A summary (simulated time, messages, bytes, time per rank in MPI calls) follows on stderr.

    --topology takes a preset name (default laptop-shm), a preset with overrides in YAML
    ("{preset: ib-hdr, ranks_per_node: 4}") or a scenario file, whose topology, network and
    mpi settings are used. -n sets the number of nodes to N / ranks_per_node (a one-node
    preset gets N ranks on its node).
    """

    name = "exec"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-n", "-np", dest="ranks", type=int, required=True, metavar="N", help="number of ranks")
        parser.add_argument("--topology", default="laptop-shm", metavar="PRESET|FILE",
                            help="a preset, a YAML mapping {preset: NAME, ...} or a scenario file (default laptop-shm)")
        _add_set(parser)
        parser.add_argument("--json", action="store_true",
                            help="print one JSON document on stdout (the program's stdout goes to stderr)")
        parser.add_argument("-o", "--output", metavar="DIR",
                            help="write results.json, CSV tables, report.md with figures and trace.json to DIR")
        parser.add_argument("--tag-output", action="store_true", help="prefix every output line with [rank]")
        parser.add_argument("--compute", choices=("explicit", "none", "measured"), default="explicit",
                            help="what the Python code between MPI calls costs: explicit (only mpisim.compute(s) "
                                 "calls; default), none, or measured (its wall time x --speed; not deterministic)")
        parser.add_argument("--speed", type=float, default=None, metavar="X",
                            help="with --compute measured: simulated seconds per measured second")
        parser.add_argument("--limit", action="append", default=[], metavar="KEY=VALUE",
                            help="stop the program (exit 1, with where every rank was) at simulated_time=10s, "
                                 "events=50000000 or wall_time=300s; wall_time also stops a rank looping or "
                                 "sleeping between MPI calls (repeatable)")
        parser.add_argument("program", help="the mpi4py program (a .py file)")
        parser.add_argument("args", nargs=argparse.REMAINDER, help="the program's arguments")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        program = Path(args.program)
        if not program.is_file():
            raise ConfigError(f"no program file {args.program!r}", "program", "mpisim exec")
        if args.ranks < 1:
            raise ConfigError(f"-n must be at least 1, got {args.ranks}", "-n", "mpisim exec")
        workload: dict[str, Any] = {"kind": "program", "program": str(program.resolve()), "api": "mpi4py",
                                    "args": list(args.args), "compute": args.compute}
        if args.speed is not None:
            workload["speed"] = args.speed
        if args.tag_output:
            workload["tag_output"] = True
        raw = exec_scenario(args.topology, program.stem, workload)
        overrides = parse_set(args.set) + parse_limits(args.limit)
        shape = load_dict(raw, None, overrides).topology
        raw = apply_rank_count(raw, shape.nodes, shape.ranks_per_node, args.ranks, overrides,
                               rail=shape.inter is not None and shape.inter.kind == "rail", name=shape.name)
        scenario = load_dict(raw, None, overrides)
        out_dir = Path(args.output).absolute() if args.output else None  # a program's os.chdir must not move it
        if out_dir is not None:
            _make_dir(out_dir)
        redirect = contextlib.redirect_stdout(err) if args.json else contextlib.nullcontext()
        worlds: list[Any] = []
        try:
            with redirect:
                result = scenario_run.run_scenario(scenario, worlds=worlds)
        except MPIError as exc:
            if out_dir is not None:  # a failed program's timeline is the figure most wanted
                write_outputs(scenario_run.failed_run(scenario, worlds, exc), out_dir)
            if isinstance(exc, ProgramExit):
                err.write(f"mpisim exec: {exc}\n")
                # An exit status is one byte: sys.exit(256) would read as success; a failed rank never does.
                return exc.code % 256 or EXIT_FAILED
            if not args.json:
                raise
            out.write(json.dumps(failure_document(scenario, exc), indent=2, sort_keys=True) + "\n")
            err.write(f"the simulated program failed: {type(exc).__name__}\n{exc}\n")
            return EXIT_FAILED
        if out_dir is not None:
            write_outputs(result, out_dir)
        if args.json:
            out.write(json.dumps(result.contract(__version__), indent=2, sort_keys=True, allow_nan=False) + "\n")
        else:
            err.write(exec_summary(result))
        return EXIT_OK


class SchemaCommand(Command):
    """Print the JSON Schema (draft 2020-12) of scenario files, for editors and CI.

    Made from the reader that validates scenarios (mpisim.scenario.schema). Save it and name it
    on a scenario's first line, for the YAML language server:

        mpisim schema > scenario.schema.json
        # yaml-language-server: $schema=scenario.schema.json
    """

    name = "schema"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        pass

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        out.write(scenario_schema.render())
        return EXIT_OK


COMMANDS: tuple[type[Command], ...] = (RunCommand, CheckCommand, ListCommand, ReportCommand, ExplainCommand,
                                       CalibrateCommand, ExecCommand, SchemaCommand)




def _make_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the output directory: {exc.strerror or exc}", "-o", str(path)) from None


def write_outputs(result: Any, out_dir: Path, figures: bool = True) -> None:
    """Write results.json, the CSV tables, report.md with its figures and trace.json to *out_dir*.

    Rendering is the report layer's (:func:`mpisim.report.render.write_outputs`): everything is
    staged first and moved into place only when all of it exists. Raises ConfigError (exit 2)
    if the directory cannot be written.
    """
    from mpisim.report.render import write_outputs as render_outputs  # lazy: matplotlib (see ReportCommand)

    try:
        render_outputs(result, out_dir, figures=figures)
    except OSError as exc:
        raise ConfigError(f"cannot write the results: {exc.strerror or exc}", "-o", str(out_dir)) from None


# --- main ---------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="mpisim", description="Simulate MPI communication and its cost on a described cluster."
    )
    parser.add_argument("--version", action="version", version=f"mpisim {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for cls in COMMANDS:
        command = cls()
        doc = (cls.__doc__ or "").strip()
        child = sub.add_parser(
            command.name, help=doc.splitlines()[0], description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        child.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
        command.add_arguments(child)
        child.set_defaults(handler=command)
    return parser


def _failure_text(exc: MPIError) -> str:
    """What stderr says when the simulated program failed, or a run limit stopped it."""
    if isinstance(exc, LimitReached):
        return f"{exc}\n"
    return f"the simulated program failed: {type(exc).__name__}\n{exc}\n"


def _release(exc: BaseException | None) -> None:
    """Drop the tracebacks of *exc* and its chain: their frames hold the run that ran out of memory."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc.__traceback__ = None
        exc = exc.__cause__ or exc.__context__


def _out_of_memory(exc: BaseException) -> bool:
    """Whether *exc* is, or was caused while handling, a MemoryError.

    Running out of memory inside a simulated rank can surface as another error: SimPy's
    process machinery fails on the traceback-less MemoryError Python preallocates
    (``'NoneType' object has no attribute 'tb_next'``). The chain still holds the MemoryError.
    """
    # NOTE: nothing allocated here (no set of seen ids): the heap may be exhausted. A chain
    # longer than this is a cycle or not ours.
    for _ in range(64):
        if exc is None:
            return False
        if isinstance(exc, MemoryError):
            return True
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return False


#: Written as it is when memory ran out: formatting a message then could itself fail.
OUT_OF_MEMORY = ("out of memory: the run needed more memory than this machine could give; use payload: size, "
                 "fewer ranks (topology.nodes) or limits: (see mpisim run --help); "
                 "mpisim check FILE --estimate says what a run needs\n")
_OUT_OF_MEMORY_BYTES = OUT_OF_MEMORY.encode()


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``mpisim`` command line with *argv* (default: ``sys.argv[1:]``); return the exit code."""
    out, err = sys.stdout, sys.stderr
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse has printed the usage error (code 2) or the help (0)
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    verbose = getattr(args, "verbose", False)
    try:
        return args.handler.run(args, out, err)
    except ConfigError as exc:
        if verbose:
            traceback.print_exc(file=err)
        if not exc.file and getattr(args, "file", None):
            exc = exc.in_file(args.file)
        err.write(_one_line(str(exc)) + "\n")
        return EXIT_BAD_INPUT
    except MPIError as exc:
        if verbose:
            traceback.print_exc(file=err)
        err.write(_failure_text(exc))
        return EXIT_FAILED
    except KeyboardInterrupt:
        err.write("interrupted" + (" (finished sweep points are kept; rerun with --resume)" if args.command == "run" else "") + "\n")
        return EXIT_INTERRUPTED
    except MemoryError:
        # Leave the except clause first: that drops the traceback, whose frames hold the
        # world, and the memory comes back before anything is written (below).
        pass
    except BrokenPipeError:
        # The reader went away (mpisim ... | head): not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except Exception as exc:
        if verbose:
            traceback.print_exc(file=err)
        if _out_of_memory(exc):
            # The failed run is still reachable from the traceback's frames: let it go before
            # printing, and print bytes made in advance, so that the message needs no memory.
            _release(exc)
            del exc
            gc.collect()
            try:
                err.write(OUT_OF_MEMORY)
                err.flush()
            except MemoryError:
                os.write(2, _OUT_OF_MEMORY_BYTES)
            return EXIT_FAILED
        if verbose:
            err.write(f"internal error: {type(exc).__name__}: {_one_line(str(exc))}\n")
        else:
            err.write(f"internal error: {type(exc).__name__}: {_one_line(str(exc))} (run with -v for the traceback)\n")
        return EXIT_FAILED
    gc.collect()  # a MemoryError, its traceback gone: the run's cycles go before anything is written
    try:
        err.write(OUT_OF_MEMORY)
        err.flush()
    except MemoryError:
        os.write(2, _OUT_OF_MEMORY_BYTES)
    return EXIT_FAILED
