"""Write a run's output directory: results.json, CSV tables, figures, report.md and trace.json.

:func:`write_outputs` renders everything from a :class:`~mpisim.report.records.RunResult`;
:func:`rerender` reads ``DIR/results.json`` and renders the rest again, which is what
``mpisim report DIR`` does. Both are atomic in the way that matters: every file is first
rendered into a hidden staging directory inside DIR, and only when all of them exist are they
moved into place, each with one ``os.replace`` (the ``figures/`` directory as a whole). A
crash or an error while plotting leaves DIR exactly as it was.

Layout of DIR::

    results.json      resolved scenario, result rows, expectations, records, summary
    results.csv       one line per result row (nccl-tests / OSU / training columns)
    messages.csv      one line per message record; collectives.csv, links.csv likewise
    report.md         the report (figures linked from figures/)
    figures/*.png     the figures
    trace.json        Chrome trace-event timeline: open it in Perfetto (ui.perfetto.dev)

A scenario may restrict the figures with ``report: {plots: [timeline, link_utilisation, ...]}``
(names in :data:`PLOT_NAMES`); without that key every figure the data allows is drawn.

Which worlds get a timeline: a run may hold hundreds of worlds (one per size, algorithm and
sweep point). :func:`timeline_worlds` picks one per kind of measurement (the first word of the
world's label: the algorithm, the OSU test, ``training``) and sweep point other than the rank
count: the world with the most ranks, up to :data:`READABLE_RANKS` when there is such a world,
then the one that sent the most bytes; at most :data:`MAX_TIMELINES` of them.
:func:`pipeline_worlds` picks the hybrid-parallel training worlds whose stages' passes were
recorded (span records, two stages or more) for pipeline timelines, at most
:data:`MAX_PIPELINES`, in the sweep's order.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from mpisim.report import plots
from mpisim.report.findings import all_findings, closed_form_worlds
from mpisim.report.hybrid import has_pipeline
from mpisim.report.markdown import FigureInfo, markdown_report
from mpisim.report.plot_names import PLOT_NAMES
from mpisim.report.plots.arrows import MAX_ARROWS
from mpisim.report.plots.style import save_png
from mpisim.report.records import RunResult, WorldRecords
from mpisim.report.tables import link_table, world_ranks, world_title
from mpisim.report.trace import chrome_trace

__all__ = ["MAX_PIPELINES", "MAX_TIMELINES", "link_worlds", "load_result", "pipeline_worlds", "rerender",
           "shown_worlds", "slim", "timeline_worlds", "write_outputs"]

MAX_TIMELINES = 3
#: Pipeline timelines drawn at most (one per sweep point, the first ones).
MAX_PIPELINES = 4
#: Link figures drawn at most: one per algorithm (or OSU test) and sweep point, so every
#: algorithm of a list gets one; a sweep with more points than this shows the first ones.
MAX_LINK_FIGURES = 12
#: Ranks drawn in a timeline (more would be a grey wall).
TIMELINE_RANKS = 64
#: Prefer worlds of at most this many ranks for timelines of a sweep over rank counts.
READABLE_RANKS = 8
#: Prefer worlds with at most this many spans (a denser timeline is a solid block of colour).
TIMELINE_SPANS = 20_000

FILES = {
    "results.json": "the resolved scenario, every result row, expectations and the raw records (re-rendered from)",
    "results.csv": "one line per result row",
    "messages.csv": "one line per message (src, dst, bytes, protocol, times)",
    "collectives.csv": "one line per rank per collective call (algorithm, entry and exit times)",
    "links.csv": "per-link totals of each world (class, bytes, busy time, capacity, utilisation), most utilised first",
    "trace.json": "Chrome trace-event timeline of the worlds: open it in Perfetto (ui.perfetto.dev)",
}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "world"


def _world_family(world: WorldRecords) -> str:
    """What a world measures, without its size: the first word of its label (``ring 1 MiB`` -> ``ring``)."""
    return world.label.split(" ")[0]


def _has_spans(world: WorldRecords) -> bool:
    return bool(world.spans)


def _has_link_data(world: WorldRecords) -> bool:
    return bool(world.links or world.link_totals)


def shown_worlds(result: RunResult, limit: int | None = MAX_TIMELINES,
                 has: Callable[[WorldRecords], bool] = _has_spans) -> list[int]:
    """Return the indices (into ``result.records``) of the worlds to draw; see the module docstring.

    Only worlds for which *has* is true are candidates (default: worlds with span records).
    """
    groups: dict[tuple, list[int]] = {}
    for i, world in enumerate(result.records):
        if not has(world):
            continue
        point = tuple(sorted((k, str(v)) for k, v in world.point.items() if k != "topology.nodes"))
        groups.setdefault((_world_family(world), point), []).append(i)
    ranks = {i: world_ranks(w) or _point_ranks(w) for i, w in enumerate(result.records)}

    def preference(i: int) -> tuple:
        world = result.records[i]
        return (ranks[i], len(world.spans) <= TIMELINE_SPANS, world.message_bytes, world.t_end, -i)

    chosen = []
    for members in groups.values():
        # Worlds with records come first (a slim result then picks what the full one did).
        candidates = [i for i in members if _has_records(result.records[i])] or members
        readable = [i for i in candidates if ranks[i] <= READABLE_RANKS] or candidates
        chosen.append(max(readable, key=preference))
    return chosen[:limit] if limit is not None else chosen


def which_point(result: RunResult, i: int) -> str:
    """Say which sweep point a drawn world is, when the sweep over nodes had others (else '').

    :func:`shown_worlds` draws one world per algorithm and point, but a sweep over
    ``topology.nodes`` is one group: the largest world readable in a figure is drawn, and the
    caption must say so, or a reader takes it for any point.
    """
    world = result.records[i]
    if "topology.nodes" not in world.point:
        return ""
    nodes = sorted({int(w.point["topology.nodes"]) for w in result.records
                    if "topology.nodes" in w.point and _world_family(w) == _world_family(world)})
    if len(nodes) < 2:
        return ""
    mine = int(world.point["topology.nodes"])
    which = "the sweep's largest point" if mine == nodes[-1] else (
        f"the largest point readable in a figure (the sweep goes up to nodes={nodes[-1]})")
    return f" Drawn for nodes={mine} ({world_ranks(world) or _point_ranks(world)} ranks), {which}."


def _has_records(world: WorldRecords) -> bool:
    return bool(world.spans or world.links or world.messages or world.collectives)


def timeline_worlds(result: RunResult, limit: int = MAX_TIMELINES) -> list[int]:
    """Return the indices of the worlds drawn as timelines (worlds with span records)."""
    return shown_worlds(result, limit, _has_spans)


def pipeline_worlds(result: RunResult, limit: int = MAX_PIPELINES) -> list[int]:
    """Return the indices of the hybrid-parallel training worlds drawn as pipeline timelines.

    Those whose passes were recorded on two stages or more (:func:`~mpisim.report.hybrid.has_pipeline`):
    the shipped training scenarios trace no spans (for speed), so their reports have no pipeline
    timeline unless run with ``--set trace.spans=true``.
    """
    return shown_worlds(result, limit, lambda world: has_pipeline(result, world))


def link_worlds(result: RunResult, limit: int | None = MAX_LINK_FIGURES) -> list[int]:
    """Return the indices of the worlds whose links are drawn (link records or link counters).

    One world per algorithm (or OSU test, or training) and sweep point, so that every
    algorithm of a list is covered; at most *limit* of them (None: all).
    """
    return shown_worlds(result, limit, _has_link_data)


def _point_ranks(world: WorldRecords) -> int:
    """Ranks of a world without records, from its label ("training 8 ranks") if it says; else 0."""
    match = re.search(r"(\d+) ranks", world.label)
    return int(match.group(1)) if match else 0


# ----------------------------------------------------------------------------- rendering


def _csv_text(columns: list[str], rows: list[list[Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if v is None else ("true" if v is True else "false" if v is False else v) for v in row])
    return buffer.getvalue()


def csv_tables(result: RunResult) -> dict[str, str]:
    """Return the CSV files' text by file name (results, messages, collectives, links)."""
    out = {f"{name}.csv": _csv_text(columns, rows) for name, (columns, rows) in result.tables().items()}
    point_keys = list(dict.fromkeys(key for world in result.records for key in world.point))
    link_cols = ["link", "class", "nbytes", "busy_s", "capacity_Bps", "utilisation"]
    rows = [[world.label, *(world.point.get(k) for k in point_keys), use.link, use.kind, use.nbytes, use.busy_s,
             use.capacity_Bps, round(use.utilisation, 6)]
            for world in result.records for use in link_table(world) if world.link_totals]
    out["links.csv"] = _csv_text(["world", *point_keys, *link_cols], rows)
    return out


def requested_figures(result: RunResult) -> set[str] | None:
    """The figures the scenario's ``report.plots`` list asks for (None: every figure there is data for)."""
    plots_wanted = (result.scenario.get("report") or {}).get("plots")
    if not isinstance(plots_wanted, list):
        return None
    return {PLOT_NAMES[name] for name in plots_wanted if isinstance(name, str) and name in PLOT_NAMES}


def render_figures(result: RunResult, fig_dir: Path, worlds: list[int], links: list[int],
                   pipelines: list[int] | None = None) -> list[FigureInfo]:
    """Draw every figure that *result* has data for into *fig_dir*; return them in report order.

    *worlds* get timelines, *links* link figures and *pipelines* (default: :func:`pipeline_worlds`)
    pipeline timelines.
    """
    infos: list[FigureInfo] = []
    pipelines = pipeline_worlds(result) if pipelines is None else pipelines

    wanted = requested_figures(result)

    def add(name: str, make: Callable[[], Figure | None], title: str, caption: str) -> None:
        kind = name.split("-")[0].removesuffix(".png")
        if wanted is not None and kind not in wanted:
            return
        fig = make()
        if fig is not None:
            save_png(fig, fig_dir / name)
            infos.append(FigureInfo(f"figures/{name}", title, caption))

    add("bandwidth.png", lambda: plots.plot_bandwidth(result), "Time and bandwidth against message size",
        plots.bandwidth_caption(result))
    add("p2p.png", lambda: plots.plot_p2p(result), "Point-to-point latency and bandwidth",
        "Filled markers: eager messages; hollow: rendezvous. A dotted line marks an eager limit, where the "
        "protocol switches: the latency jumps there by the handshake's two latencies, or drops when eager's copy "
        "of the message already cost more (a limit above the size where the two protocols cross).")
    add("scaling.png", lambda: plots.plot_scaling(result), "Scaling with the number of ranks",
        "One curve per interconnect (or algorithm). Left: time against ranks; right: scaling efficiency "
        "(time with one rank over time with p ranks) or bus bandwidth.")
    add("breakdown.png", lambda: plots.plot_breakdown(result), "Compute and exposed communication",
        "Each bar is one iteration: compute (grey) and the communication that backward did not hide (red). "
        "The label is the exposed share of the iteration.")
    add("closed_form.png", lambda: plots.plot_closed_form(result), "Simulation against the closed form",
        "Solid: simulated; dashed: the algorithm's alpha-beta-gamma formula evaluated with this network's "
        "alpha, beta and gamma. Right: their ratio (1 means the formula holds; contention, protocol "
        "handshakes and per-message overheads move it).")
    add("breakdown-by-dimension.png", lambda: plots.plot_parallel_breakdown(result),
        "Where the iteration goes, by parallel dimension",
        "One bar per layout (per sweep point), for the rank that finishes last: compute, the pipeline bubble (waiting "
        "for an input the previous stage had not produced yet), tensor-parallel collectives, pipeline transfers, "
        "expert-parallel all-to-alls, and the data-parallel sync that backward did not hide (the exposed "
        "communication beyond the other three). The tick and number on top are the iteration time; a layout in red "
        "does not fit the device's memory.")
    add("clusters.png", lambda: plots.plot_clusters(result), "Which cluster",
        "One bar per cluster of the sweep, soonest trained first: time per iteration, time to train (workload "
        "tokens:), cost (price: x GPU-hours) and MFU, where the rows have them; grey hatched bars do not fit "
        "the device's memory.")
    add("layouts.png", lambda: plots.plot_layouts(result), "Which layout",
        "At each GPU count, the layouts fastest first: bar height is the iteration time, the label its model FLOPs "
        "utilisation (MFU); grey hatched bars do not fit the device's memory and sort last. Diamonds (right axis) are "
        "the memory per GPU, the dashed line the device's memory.")

    def named(i: int) -> tuple[str, str]:
        world = result.records[i]
        slug = _slug(world.label + ("-" + "-".join(str(v) for v in world.point.values()) if world.point else ""))
        name = world_title(world)
        return slug, name

    def failure_of(world: WorldRecords) -> dict[str, Any] | None:
        """The run's failure if it happened in *world*'s sweep point (a failed point keeps its worlds)."""
        failure = result.failure
        if failure is None or dict(failure.get("point") or {}) != dict(world.point):
            return None
        return failure

    for i in pipelines:
        slug, name = named(i)
        add(f"pipeline-{slug}.png", lambda w=result.records[i], n=name: plots.plot_pipeline(
            result, w, title=f"{n}: pipeline schedule"), f"Pipeline: {name}",
            "One lane per pipeline stage (the GPU of tensor-parallel rank 0 in data-parallel replica 0), time left to "
            "right. Each box is a forward (lighter) or backward (darker, hatched) pass of one micro-batch, coloured by "
            "micro-batch, from its first layer's compute to its last (the tensor-parallel communication in between "
            "included). Gaps are the stage idling: the pipeline bubble at the start and end of the schedule, waits "
            "for a transfer, and the data-parallel sync after the last backward; each lane's idle share is on its "
            "right.")
    for i in worlds:
        slug, name = named(i)
        add(f"timeline-{slug}.png", lambda w=result.records[i], n=name: plots.plot_timeline(
            w, max_ranks=TIMELINE_RANKS, title=f"{n}: per-rank timeline", failure=failure_of(w)),
            f"Timeline: {name}",
            "One band per rank, time left to right, in up to three strips: local work (compute, reductions), "
            "time blocked in MPI calls (send, receive, wait), and the protocol phases of the rank's messages "
            "(RTS, CTS, data, FIN): a rank blocked in a send waits on the middle strip while its RTS is in flight on "
            "the bottom one. Work that overlaps (backward compute during an allreduce) shows in both strips."
            + (" A red cross marks where each rank of the deadlock stopped, with the call and why it cannot return."
               if result.failure is not None and result.failure.get("kind") == "deadlock" else "")
            + which_point(result, i))
    if result.scenario.get("workload", {}).get("kind") == "program":  # a student's own program: its messages
        for i in worlds:
            slug, name = named(i)
            add(f"arrows-{slug}.png", lambda w=result.records[i], n=name: plots.plot_message_arrows(
                w, title=f"{n}: every message as an arrow", failure=failure_of(w)), f"Messages: {name}",
                "One lane per rank, simulated time left to right. Each arrow is a message, from the moment its send "
                "was posted to the moment its data had arrived; a rendezvous message is drawn as its protocol: the "
                "RTS to the receiver, the CTS back when the receive is posted, the data, and the FIN back. At most "
                f"{MAX_ARROWS} arrows are drawn, the earliest (the title says when some are left out; "
                "trace.json links every send to its receive)."
                + (" A red cross marks each call the deadlock left stuck." if result.failure is not None else ""))
    left_out = len(link_worlds(result, None)) - len(links)
    for i in links:
        slug, name = named(i)
        add(f"links-{slug}.png", lambda w=result.records[i], n=name: plots.plot_links(w, title=f"{n}: the most utilised links"),
            f"Links: {name}",
            "The most utilised directed links, with the busiest link of every class (NVLink, PCIe, NIC, spine) "
            "kept. Left (when link records were kept): utilisation over time, so a row that stays bright is "
            "the bottleneck. Right: each link's utilisation over the whole run (the time its bytes need at full "
            "rate, over the run), coloured by link class; one figure per algorithm and sweep point" + (f"; {left_out} more sweep points are not drawn (see links.csv)."
                                       if left_out > 0 else "."))
    return infos


def _render_all(result: RunResult, staging: Path, write_results: bool, figures_too: bool) -> None:
    fig_dir = staging / "figures"
    fig_dir.mkdir()
    worlds, links, pipelines = timeline_worlds(result), link_worlds(result), pipeline_worlds(result)
    figures = render_figures(result, fig_dir, worlds, links, pipelines) if figures_too else []
    for name, text in csv_tables(result).items():
        (staging / name).write_text(text, encoding="utf-8")
    trace = chrome_trace(result, prefer=worlds)
    (staging / "trace.json").write_text(json.dumps(trace, separators=(",", ":")) + "\n", encoding="utf-8")
    findings = all_findings(result, [result.records[i] for i in worlds], [result.records[i] for i in links])
    files = list(FILES.items())
    (staging / "report.md").write_text(markdown_report(result, figures, findings, files), encoding="utf-8")
    if write_results:
        (staging / "results.json").write_text(result.to_json(), encoding="utf-8")


def _move_into_place(staging: Path, out_dir: Path) -> None:
    """Move every staged file into *out_dir* (figures/ as a whole), results.json last.

    If the figures cannot be swapped in, the old ones are put back and nothing else moves.
    """
    aside = Path(tempfile.mkdtemp(dir=out_dir, prefix=".old-figures-"))
    keep_aside = False
    try:
        had_figures = (out_dir / "figures").exists()
        if had_figures:
            os.replace(out_dir / "figures", aside / "figures")
        try:
            os.replace(staging / "figures", out_dir / "figures")
        except BaseException:
            if had_figures:
                keep_aside = True  # if putting them back fails too, they stay in the hidden directory
                os.replace(aside / "figures", out_dir / "figures")
                keep_aside = False
            raise
        names = sorted(p.name for p in staging.iterdir())
        for name in sorted(names, key=lambda n: n == "results.json"):
            os.replace(staging / name, out_dir / name)
    finally:
        if not keep_aside:
            shutil.rmtree(aside, ignore_errors=True)


#: A staging folder without a living owner older than this is left over from a killed run.
ABANDONED_AFTER_S = 3600.0


def _remove_abandoned(out: Path) -> None:
    """Remove the staging folders of runs killed (kill -9) before they could clean up.

    A folder is named ``.staging-PID-...``: it is abandoned when that process no longer exists.
    Folders without a PID (older mpisim) are removed once they are an hour old.
    """
    for folder in [*out.glob(".staging-*"), *out.glob(".old-figures-*")]:
        if not folder.is_dir() or folder.is_symlink():
            continue
        pid_text = folder.name.split("-")[1] if folder.name.startswith(".staging-") else ""
        if pid_text.isdigit() and pid_text.isascii():
            try:
                os.kill(int(pid_text), 0)
                continue  # its run is still going
            except ProcessLookupError:
                pass
            except (PermissionError, OverflowError):
                continue
        else:
            try:
                if time.time() - folder.stat().st_mtime < ABANDONED_AFTER_S:
                    continue
            except OSError:
                continue
        shutil.rmtree(folder, ignore_errors=True)


def write_outputs(result: RunResult, out_dir: str | os.PathLike[str], *, write_results: bool = True,
                  figures: bool = True) -> list[Path]:
    """Render *result* into *out_dir* (created if needed); return the paths written.

    *write_results* False keeps an existing results.json untouched (re-rendering from it);
    *figures* False skips the PNG figures (report.md then has no Figures section).
    Raises OSError if the directory cannot be written; on any error nothing in *out_dir* changes.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if write_results:
        # Render from exactly what results.json will hold (its keys are sorted, numbers are JSON
        # numbers), so that 'mpisim report' on that file writes the same report byte for byte.
        result = RunResult.from_json(result.to_json())
    _remove_abandoned(out)
    staging = Path(tempfile.mkdtemp(dir=out, prefix=f".staging-{os.getpid()}-"))
    try:
        _render_all(result, staging, write_results, figures)
        written = sorted(p.relative_to(staging) for p in staging.rglob("*") if p.is_file())
        _move_into_place(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [out / p for p in written]


def slim(result: RunResult, keep: Sequence[int] | None = None) -> RunResult:
    """Return a copy of *result* whose worlds other than *keep* hold no records.

    By default the worlds kept are those drawn (timelines, pipelines, links) and those whose records
    explain a gap to the closed form (:func:`~mpisim.report.findings.closed_form_worlds`).

    Every world keeps its label, point, totals, link counters and network parameters, so the
    report rendered from the slim result is the same as from the full one, except that
    trace.json and the message/collective tables cover the kept worlds only. Example reports
    use this to keep the repository small.
    """
    kept = set((*timeline_worlds(result), *pipeline_worlds(result), *link_worlds(result), *closed_form_worlds(result))
               if keep is None else keep)
    worlds = [
        world if i in kept else replace(world, messages=[], spans=[], collectives=[], links=[])
        for i, world in enumerate(result.records)
    ]
    return replace(result, records=worlds)


def load_result(path: str | os.PathLike[str]) -> RunResult:
    """Read a RunResult from a results.json file, or from the results.json inside a directory.

    Raises FileNotFoundError if there is none, ValueError/KeyError/TypeError if it is malformed.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "results.json"
    return RunResult.from_json(path.read_text(encoding="utf-8"))


def rerender(path: str | os.PathLike[str], *, figures: bool = True) -> Path:
    """Render report.md, figures, CSV tables and trace.json again from a results.json.

    *path* is the output directory or the results.json in it; the report is written next to
    that file. Returns the directory. Raises as :func:`load_result` and :func:`write_outputs`.
    """
    path = Path(path)
    result = load_result(path)
    out_dir = path if path.is_dir() else path.parent
    write_outputs(result, out_dir, write_results=False, figures=figures)
    return out_dir
