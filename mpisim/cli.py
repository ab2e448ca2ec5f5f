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
                [--compute none|measured|explicit] [--speed X] [--check] program.py [ARGS ...]

Each subcommand is a small class whose docstring is its ``--help`` text and whose ``run`` calls one
library function (:mod:`mpisim.scenario.invocation` for run, exec, check and report).

Exit codes: 0 success; 1 an expectation failed, the simulated program failed (deadlock, MPI
error: the full MPI report goes to stderr) or a run limit stopped it (``--limit``); 2 bad input
(YAML, schema, units, unknown algorithm, impossible topology, missing file), one line
``<file>: <path>: <message>`` on stderr. Tracebacks only with ``-v``; an unexpected internal
error prints one ``internal error: ...`` line (exit 1).

``--json`` prints exactly one JSON document on stdout (keys sorted, no wall-clock times, so
the same scenario and seed give byte-identical output). ``-o DIR`` writes ``results.json``,
the CSV tables, ``report.md`` with ``figures/`` and ``trace.json`` there (rendered by the report
layer, moved into place only once all of it exists).

A sweep appends each finished point to ``DIR/sweep.jsonl`` (``-o DIR``) or to
``<scenario stem>.sweep.jsonl`` here, removed once the sweep has finished; after an interruption
or a failed point, ``--resume`` (same command line) skips the points that file already holds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import fields
from typing import ClassVar, TextIO

from mpisim import __version__
from mpisim.errors import ConfigError, MPIError, caused_by_memory_error, release_tracebacks
from mpisim.report.terminal import failure_text, print_listing, write_out_of_memory
from mpisim.scenario import schema as scenario_schema
from mpisim.scenario.catalog import CATALOGUES, catalogue
from mpisim.scenario.command_line import parse_limits, run_overrides
from mpisim.scenario.invocation import (
    ExecOptions,
    RunOptions,
    check_file,
    exec_program,
    rerender_report,
    run_file,
)
from mpisim.scenario.load import parse_set
from mpisim.teaching import explain_to

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


class Command(ABC):
    """Base class: a subcommand adds its arguments and runs; the docstring is its help."""

    name: ClassVar[str]

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:  # noqa: B027 - an optional hook
        """Declare this command's arguments."""

    @abstractmethod
    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        """Do the work; return the exit code."""


def _add_set(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a scenario key before validation, e.g. --set topology.nodes=16 "
                             "--set mpi.eager_limit='8 KiB' (values are read as YAML; repeatable)")


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
        overrides = run_overrides(args.set, args.limit, seed=args.seed, payload=args.payload, jobs=args.jobs,
                                  executor=args.executor, update_expect=args.update_expect)
        options = RunOptions(**{f.name: getattr(args, f.name) for f in fields(RunOptions)})
        return EXIT_OK if run_file(args.file, overrides, options, out, err) else EXIT_FAILED


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
        check_file(args.file, parse_set(args.set), out, estimate=args.estimate, as_json=args.json)
        return EXIT_OK


class ListCommand(Command):
    """List what a scenario can name: topology presets, collective algorithms, workload kinds."""

    name = "list"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("what", choices=CATALOGUES)
        parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        items, columns = catalogue(args.what)
        if args.json:
            out.write(json.dumps(items, indent=2, sort_keys=True) + "\n")
        else:
            print_listing(out, args.what, items, columns)
        return EXIT_OK


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
        rerender_report(args.dir, out, figures=not args.no_plots)
        return EXIT_OK


class ExplainCommand(Command):
    """Teach a collective algorithm: run it on small integer arrays and print it step by step.

    Each step lists its messages (who sends which elements to whom, and their values) and then
    which elements of every rank's input each rank has. At the end: every rank's result next to
    numpy's, and the algorithm's cost formula with p, n, alpha, beta, gamma substituted next to
    the simulated time. The default network is contention-free (analytic model, every pair of
    ranks on its own 1 GB/s link with 1 us latency). -o DIR also writes a diagram (ranks x
    steps, one arrow per message) and a space-time diagram (simulated time across, one frame
    per round). Exits 1 if a result differs from numpy's.
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
        parser.add_argument("-o", "--output", metavar="DIR",
                            help="also write a diagram PNG and a space-time diagram per round (PNGs + GIF) to DIR")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        correct = explain_to(out, args.collective, args.algorithm, args.ranks, count=args.count, topology=args.topology,
                             network=args.network, root=args.root, ports=args.ports, output=args.output)
        return EXIT_OK if correct else EXIT_FAILED


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
        from mpisim.calibrate.command import calibrate_files

        calibrate_files(args.files, args.base, out, nodes=args.nodes, ranks_per_node=args.ranks_per_node,
                        holdout=args.holdout, in_place=args.in_place, output=args.output, report=args.report)
        return EXIT_OK


class ExecCommand(Command):
    """Run an unchanged mpi4py program on N simulated ranks, like mpiexec -n N python program.py ARGS.

    Every rank's stdout and stderr are forwarded (--tag-output prefixes each line with
    "[rank] "), stdin goes to rank 0, and the exit code is the program's: 0, the status a rank
    passed to sys.exit or MPI.COMM_WORLD.Abort, or 1 on a deadlock, an MPI error or an
    exception (with the report: each blocked rank, its call and its line in the program).
    -o DIR writes a failed program's report too (exit code 1); --check runs the correctness
    checker (each finding: rank, line, simulated time; exit code 1 if there is one).
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
        parser.add_argument("--check", action="store_true", help="run under the correctness checker: requests never "
                            "completed, send buffers modified before completion, ANY_SOURCE races, non-commutative "
                            "ops, -1 used as a rank (exit 1 if it finds any)")
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
        options = ExecOptions(**{f.name: getattr(args, f.name) for f in fields(ExecOptions)})
        return exec_program(args.program, args.args, parse_set(args.set) + parse_limits(args.limit), options, out, err)


class SchemaCommand(Command):
    """Print the JSON Schema (draft 2020-12) of scenario files, for editors and CI.

    Made from the reader that validates scenarios (mpisim.scenario.schema). Save it and name it
    on a scenario's first line, for the YAML language server:

        mpisim schema > scenario.schema.json
        # yaml-language-server: $schema=scenario.schema.json
    """

    name = "schema"

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        out.write(scenario_schema.render())
        return EXIT_OK


COMMANDS: tuple[type[Command], ...] = (RunCommand, CheckCommand, ListCommand, ReportCommand, ExplainCommand,
                                       CalibrateCommand, ExecCommand, SchemaCommand)


# --- main ---------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="mpisim", description="Simulate MPI communication and its cost on a described cluster.")
    parser.add_argument("--version", action="version", version=f"mpisim {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for cls in COMMANDS:
        command = cls()
        doc = (cls.__doc__ or "").strip()
        child = sub.add_parser(command.name, help=doc.splitlines()[0], description=doc,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
        child.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
        command.add_arguments(child)
        child.set_defaults(handler=command)
    return parser


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
        err.write(failure_text(exc))
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
        if caused_by_memory_error(exc):
            # The failed run is still reachable from the traceback's frames: let it go before
            # printing, and print bytes made in advance, so that the message needs no memory.
            release_tracebacks(exc)
            del exc
            write_out_of_memory(err)
            return EXIT_FAILED
        hint = "" if verbose else " (run with -v for the traceback)"
        err.write(f"internal error: {type(exc).__name__}: {_one_line(str(exc))}{hint}\n")
        return EXIT_FAILED
    write_out_of_memory(err)  # a MemoryError, its traceback gone
    return EXIT_FAILED
