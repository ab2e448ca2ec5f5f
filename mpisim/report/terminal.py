"""What ``mpisim`` prints on a terminal: result tables, the ``exec`` summary and progress bars.

:func:`print_result` writes a :class:`~mpisim.report.records.RunResult` for people: a header
(scenario, ranks, fabric, network model), one table per group of rows (a collective on so many
ranks, a point-to-point test, a training iteration) with the columns of
:mod:`mpisim.report.columns` in their terminal form, then expectations and notes. Tables are never
narrowed to the terminal's width, as narrowing would split numbers over lines. Swept keys lead each
table; keys no column names are shown after the table's own, each formatted by its value kind.

:class:`SweepProgress` and :class:`RunProgress` draw a progress bar on stderr, only on a terminal,
so piped output and ``--json`` stay exactly what the run computed.
"""

from __future__ import annotations

import gc
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from mpisim.engine.units import format_size, format_time, pretty_bandwidth, pretty_time
from mpisim.errors import LimitReached, MPIError
from mpisim.report.columns import cell, view
from mpisim.report.records import value_kind
from mpisim.report.tables import fmt_time
from mpisim.report.text import plural, printable

__all__ = ["RunProgress", "SweepProgress", "exec_summary", "print_result", "print_table", "wide_table"]


def exec_summary(result: Any) -> str:
    """What ``mpisim exec`` prints after the program: simulated time, traffic, time per rank in MPI calls."""
    def _t4(seconds: float) -> str:  # four significant digits are what a person reads
        return format_time(float(f"{seconds:.4g}"))

    row = result.rows[0]
    topology = result.scenario.get("topology", {})
    times = row.get("mpi_time_s", [])
    lines = [f"mpisim exec: {plural(row['ranks'], 'rank')} on {topology.get('name')} "
             f"({plural(topology.get('nodes'), 'node')} x {topology.get('ranks_per_node')}), "
             f"compute {result.scenario['workload'].get('compute')}",
             f"  simulated time {_t4(row['time_s'])}, {row['messages']} messages, {format_size(row['bytes'])}"]
    if times:
        shown = ", ".join(f"{r}: {_t4(t)}" for r, t in enumerate(times[:16]))
        more = f", ... (max {_t4(max(times))})" if len(times) > 16 else ""
        lines.append(f"  time in MPI calls per rank: {shown}{more}")
    lines.extend(f"  note: {note}" for note in result.notes)
    return "\n".join(lines) + "\n"


def failure_text(exc: MPIError) -> str:
    """What stderr says when the simulated program failed, or a run limit stopped it."""
    if isinstance(exc, LimitReached):
        return f"{exc}\n"
    return f"the simulated program failed: {type(exc).__name__}\n{exc}\n"


#: Written as it is when memory ran out: formatting a message then could itself fail.
OUT_OF_MEMORY = ("out of memory: the run needed more memory than this machine could give; use payload: size, "
                 "fewer ranks (topology.nodes) or limits: (see mpisim run --help); "
                 "mpisim check FILE --estimate says what a run needs\n")
_OUT_OF_MEMORY_BYTES = OUT_OF_MEMORY.encode()


def write_out_of_memory(err: TextIO) -> None:
    """Say that memory ran out, once the failed run's cycles are collected, in bytes made in advance.

    The caller must have let go of the run first (the traceback's frames hold it); then the line
    needs no memory, and if writing to *err* still fails, it goes straight to file descriptor 2.
    """
    gc.collect()
    try:
        err.write(OUT_OF_MEMORY)
        err.flush()
    except MemoryError:
        os.write(2, _OUT_OF_MEMORY_BYTES)


def console_for(out: TextIO) -> Any:
    # A terminal sets the width (rich reads COLUMNS too). A pipe or a file, such as a CI log,
    # gets COLUMNS if set, else rows at their full width: a number is never split over lines.
    width = None
    if not out.isatty():
        columns = os.environ.get("COLUMNS", "")
        width = int(columns) if columns.isdigit() and int(columns) > 0 else 100_000
    return Console(file=out, width=width, highlight=False, soft_wrap=False)


def print_table(console: Any, table: Any) -> None:
    """Print *table* at its full width, past the console's edge if need be: narrowing it would split numbers."""
    needed = Measurement.get(console, console.options.update_width(1_000_000), table).maximum
    if needed > console.width:
        console = Console(file=console.file, width=needed, highlight=False, soft_wrap=False,
                          color_system=console.color_system)
    console.print(table, crop=False)


def wide_table(headers: Sequence[str], rows: Sequence[Sequence[str]], justify: str = "left", **options: Any) -> Any:
    """A rich Table whose cells never wrap: each column is as wide as its header and longest cell.

    Print it with :func:`print_table`, which never narrows it.
    """
    table = Table(**options)
    for i, header in enumerate(headers):
        longest = max([len(header), *(len(row[i]) for row in rows)])
        table.add_column(header, justify=justify, no_wrap=True, min_width=longest)  # type: ignore[arg-type]
    for row in rows:
        table.add_row(*row)
    return table


def print_listing(out: TextIO, title: str, items: Sequence[dict[str, Any]],
                  columns: Sequence[tuple[str, Callable[[dict[str, Any]], Any]]]) -> None:
    """Print a catalogue (``mpisim list``): one row per item, one column per (header, cell getter)."""
    cells = [[cell(getter(item)) for _, getter in columns] for item in items]
    print_table(console_for(out), wide_table([header for header, _ in columns], cells, title=title,
                                             title_justify="left"))


#: Row keys the table titles already say (or that only tests and reports need): never extra columns.
_KNOWN_ROW_KEYS = {"collective", "ranks", "test", "model_exact", "schedule", "zero", "params", "simulated_ranks"}


def _row_group(row: dict[str, Any]) -> tuple[str, str, list[tuple[str, str, Callable[[Any], str]]]]:
    """Return (group key, title, columns) of the table a row belongs to."""
    if "collective" in row and "time_s" in row:
        title = f"{row['collective']} on {row.get('ranks', '?')} ranks"
        return f"collective/{row['collective']}/{row.get('ranks')}", title, view("collective", "terminal")
    if "test" in row:
        return f"p2p/{row['test']}", f"point-to-point {row['test']} (OSU style, ranks 0 and 1)", view("p2p", "terminal")
    if "iteration_time_s" in row and "tp" in row:
        return "hybrid", f"training iteration ({row.get('schedule')}, ZeRO {row.get('zero')})", view("hybrid", "terminal")
    if "iteration_time_s" in row:
        return "training", "data-parallel training iteration", view("training", "terminal")
    keys = [key for key in row if key != "fidelity"]  # the fidelity goes last (below), as results.json sorts keys
    columns = [(key, key, _by_kind(key)) for key in keys]
    return "rows/" + ",".join(keys), "results", columns


def _by_kind(key: str) -> Callable[[Any], str]:
    """A cell formatter for a column known only by its name: times as times (10.2 us), not 1.0192e-05."""
    pretty = {"time": pretty_time, "bandwidth": pretty_bandwidth}.get(value_kind(key))
    if pretty is None:
        return cell

    def formatted(x: Any) -> str:
        if isinstance(x, list) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in x):
            return ", ".join(pretty(v) for v in x)  # per rank (an mpi4py program's mpi_time_s)
        return pretty(x) if isinstance(x, int | float) and not isinstance(x, bool) else cell(x)

    return formatted


def print_result(result: Any, out: TextIO) -> None:
    """Print a RunResult for people: a header, result tables, expectations and notes."""
    console = console_for(out)
    scenario = result.scenario
    topology = scenario.get("topology", {})
    swept = list(scenario.get("sweep", {}))
    shape = {"ranks": "", "nodes": topology.get("nodes"), "ranks_per_node": topology.get("ranks_per_node")}
    if result.rows and "ranks" in result.rows[0]:
        counts = sorted({row["ranks"] for row in result.rows if isinstance(row.get("ranks"), int)})
        shape["ranks"] = ", ".join(map(str, counts)) if counts else ""
    if not shape["ranks"]:
        shape["ranks"] = str(topology.get("nodes", 0) * topology.get("ranks_per_node", 0))
    presets = [axis for axis in swept if axis in ("topology", "topology.preset")]
    if presets:  # the points run other presets than the scenario's own: name them all
        names = [value if isinstance(value, str) else (value or {}).get("preset", "inline")
                 for value in scenario["sweep"][presets[0]]]
        where = f"presets {', '.join(map(str, dict.fromkeys(names)))}, swept"
    elif any(axis.startswith("topology.") for axis in swept):
        where = f"{topology.get('name')}, swept"  # the header's one shape is not what every point runs
    else:
        where = f"{topology.get('name')}: {plural(shape['nodes'], 'node')} x {shape['ranks_per_node']}"
    console.print(
        f"[bold]{escape(printable(scenario.get('name')))}[/bold]: {shape['ranks']} rank{'' if shape['ranks'] == '1' else 's'} "
        f"({escape(printable(where))}), "
        f"network {scenario.get('network', {}).get('model')}, payload {scenario.get('payload')}"
    )
    if swept:
        points = math.prod(len(values) for values in scenario["sweep"].values())
        console.print(f"sweep of {points} points over {', '.join(swept)}")
    groups: dict[str, tuple[str, list[tuple[str, str, Callable[[Any], str]]], list[dict[str, Any]]]] = {}
    for row in result.rows:
        key, title, columns = _row_group(row)
        groups.setdefault(key, (title, columns, []))[2].append(row)
    for title, columns, rows in groups.values():
        used = {key for _, key, _ in columns} | set(swept) | _KNOWN_ROW_KEYS
        present = [c for c in columns if c[1] not in swept and any(c[1] in row for row in rows)]  # swept: shown first
        extras = [key for key in dict.fromkeys(k for row in rows for k in row) if key not in used]
        if all(row.get("requested", row.get("algorithm")) == row.get("algorithm") for row in rows):
            extras = [key for key in extras if key != "requested"]  # says only what "algorithm" says
        # The fidelity a row ran at goes last, wherever its key sits (results.json sorts keys).
        extras = [key for key in extras if key != "fidelity"] + ["fidelity"] * ("fidelity" in extras)
        all_columns = [(k, k, cell) for k in swept] + present + [(k, k, _by_kind(k)) for k in extras]
        console.print(f"[bold]{title}[/bold]")
        cells = [[fmt(row.get(key)) if key in row else "" for _, key, fmt in all_columns] for row in rows]
        print_table(console, wide_table([header for header, _, _ in all_columns], cells, justify="right"))
    if result.expectations:
        console.print("[bold]expectations[/bold]")
        for exp in result.expectations:
            mark = "[green]PASS[/green]" if exp.get("passed") else "[red]FAIL[/red]"
            console.print(f"  {mark} {exp.get('detail', '')}", markup=True)
    if result.failure is not None:
        # Another kind of failure than the one expected is a FAIL above, not "as expected".
        expected = all(exp.get("passed") for exp in result.expectations if exp.get("check") == "expect_failure")
        how = "as expected " if expected else ""
        console.print(f"[bold]the program failed {how}({result.failure['kind']})[/bold]")
    if result.notes:
        console.print("[bold]notes[/bold]")
        for note in result.notes:
            console.print(f"  {note}", markup=False)


class SweepProgress:
    """A rich progress bar on stderr while sweep points finish (only on a terminal)."""

    def __init__(self, err: TextIO, enabled: bool) -> None:
        self.enabled = enabled and err.isatty()
        self.err = err
        self.bar: Any = None
        self.task: Any = None

    def __enter__(self) -> Callable[[int, int], None] | None:
        if not self.enabled:
            return None
        self.bar = Progress(
            TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=Console(file=self.err), transient=True,
        )
        self.bar.start()
        return self.update

    def update(self, done: int, total: int) -> None:
        if self.task is None:
            self.task = self.bar.add_task("sweep", total=total)
        self.bar.update(self.task, completed=done, total=total)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


class RunProgress:
    """A progress bar on stderr for a long single run: simulated time, events, share of the estimate, ETA.

    The simulation runs on this thread, untouched; a helper thread samples the world being
    run (its clock and ``env.events_done``: two reads, whatever the rank count) four times a
    second. The bar appears only once the run has taken :attr:`DELAY` seconds, only on a
    terminal, and not with ``--quiet``. With the run's estimate of events (*estimate_events*,
    from mpisim.scenario.estimate) it shows the share done and the time left at the rate so
    far; an estimate is good to a factor of about two, so past 99 % the bar waits there.
    """

    DELAY = 2.0
    PERIOD = 0.25

    def __init__(self, err: TextIO, worlds: list[Any], enabled: bool, estimate_events: int | None = None) -> None:
        self.enabled = enabled and err.isatty()
        self.err = err
        self.worlds = worlds
        self.estimate = estimate_events if estimate_events and estimate_events > 0 else None
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def __enter__(self) -> RunProgress:
        if self.enabled:
            self.thread = threading.Thread(target=self._show, name="mpisim-progress", daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.thread is not None:
            self.stop.set()
            self.thread.join()

    def sample(self) -> tuple[float, int]:
        """Return (simulated seconds of the world being run, events so far in every world)."""
        worlds = list(self.worlds)
        if not worlds:
            return 0.0, 0
        events = sum(getattr(w.env, "events_done", 0) for w in worlds)
        return worlds[-1].sim.now, events

    def describe(self, sim_now: float, events: int, elapsed: float) -> str:
        """``simulated 1.2 ms, 3,400,000 events, 41% of the estimate, ~12 s left``."""
        text = f"simulated {fmt_time(sim_now)}, {events:,} events"
        if self.estimate is not None:
            share = min(events / self.estimate, 0.99)
            text += f", {share:.0%} of the estimate"
            if events and elapsed > 0:
                left = elapsed * (1 - share) / share if share > 0 else float("inf")
                text += f", ~{left:.0f} s left" if left < 1e7 else ""
        return text

    def _show(self) -> None:
        if self.stop.wait(self.DELAY):
            return
        bar = Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                       console=Console(file=self.err), transient=True)
        task = bar.add_task("", total=self.estimate)
        started = time.perf_counter() - self.DELAY

        def update() -> None:
            sim_now, events = self.sample()
            done = None if self.estimate is None else min(events, int(0.99 * self.estimate))
            bar.update(task, description=self.describe(sim_now, events, time.perf_counter() - started),
                       completed=done)

        with bar:
            while not self.stop.wait(self.PERIOD):
                update()
            update()  # the state the run ended in, shown as the bar goes
