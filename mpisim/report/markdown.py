"""report.md: what was simulated, the headline numbers, findings, figures and the full results.

The report is written for someone who was not there when the scenario ran: it opens with the
resolved cluster and settings (every default filled in), then the few numbers that answer
the question, the findings in plain words, the figures with a line on how to read each, and
finally every result row and every expectation. All of it comes from the
:class:`~mpisim.report.records.RunResult`, so ``mpisim report DIR`` writes the same text
again from results.json.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mpisim.report.clusters import cluster_table
from mpisim.report.columns import view
from mpisim.report.hybrid import best_row, by_gpu_count, layout_groups, layout_label
from mpisim.report.records import RunResult
from mpisim.report.tables import (
    fmt_bandwidth,
    fmt_bytes,
    fmt_num,
    fmt_percent,
    fmt_time,
    point_label,
    row_kinds,
    sweep_keys,
)
from mpisim.report.text import markdown_text

__all__ = ["FigureInfo", "layout_tables", "markdown_report", "md_table", "results_tables", "scenario_table"]


@dataclass(frozen=True)
class FigureInfo:
    """A figure file (path relative to the report) with its title and how to read it."""

    path: str
    title: str
    caption: str


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], align: str = "") -> str:
    """Return a Markdown table; *align* holds one of ``l``/``r`` per column (default: left first, right after)."""
    align = align or "l" + "r" * (len(headers) - 1)
    rule = ["---:" if a == "r" else ":---" for a in align]
    lines = ["| " + " | ".join(_cell(h) for h in headers) + " |", "| " + " | ".join(rule) + " |"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- what was simulated


def _param(key: str, value: Any) -> str:
    """Format one resolved setting by what its name says it is."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    if not isinstance(value, int | float):
        return str(value)
    if key.endswith(("latency", "overhead")) or key in ("compute", "hop_latency"):
        return fmt_time(value)
    if "bandwidth" in key:
        return fmt_bandwidth(value)
    if "limit" in key or key.endswith(("bytes", "cap", "bucket")):
        return fmt_bytes(value)
    if key == "reduce_cost":
        return f"{fmt_num(value)} s/B"
    return fmt_num(value, 6)


def _fabric(fabric: dict[str, Any] | None) -> str:
    if not fabric:
        return "none"
    parts = [str(fabric.get("kind", "?"))]
    if "bandwidth" in fabric:
        eff = fabric.get("efficiency", 1.0)
        parts.append(f"{fmt_bandwidth(fabric['bandwidth'])}" + (f" x {eff:g} efficiency" if eff != 1 else ""))
    if "latency" in fabric:
        parts.append(f"latency {fmt_time(fabric['latency'])}")
    for key, value in fabric.items():
        if key not in ("kind", "bandwidth", "efficiency", "latency") and value not in (None, 0, 0.0, 1.0, ""):
            parts.append(f"{key} {_param(key, value)}")
    return ", ".join(parts)


def _workload(workload: dict[str, Any]) -> list[tuple[str, str]]:
    rows = []
    for key, value in workload.items():
        if key == "sizes" and isinstance(value, list):
            text = ", ".join(fmt_bytes(v) for v in value[:12]) + (f", ... ({len(value)} sizes)" if len(value) > 12 else "")
        elif isinstance(value, list):
            text = ", ".join(str(v) for v in value)
        elif isinstance(value, dict):
            text = ", ".join(f"{k}: {_param(k, v)}" for k, v in value.items()) or "none"
        elif key in ("params",):
            text = f"{value:,}" if isinstance(value, int) else str(value)
        else:
            text = _param(key, value)
        rows.append((f"workload.{key}", text))
    return rows


def scenario_table(scenario: dict[str, Any]) -> list[tuple[str, str]]:
    """Return (setting, value) pairs describing the resolved scenario for people."""
    topo = scenario.get("topology", {})
    nodes, per_node = topo.get("nodes", 0), topo.get("ranks_per_node", 1)
    rows = [
        ("ranks", f"{nodes * per_node} ({nodes} node{'s' if nodes != 1 else ''} x {per_node} {topo.get('device', 'cpu')} "
                  f"rank{'s' if per_node != 1 else ''}, {topo.get('placement', 'block')} placement)"),
        ("topology", markdown_text(f"{topo.get('name', '')}" + (f": {topo['description']}" if topo.get("description") else ""))),
        ("intra-node fabric", _fabric(topo.get("intra"))),
        ("inter-node fabric", _fabric(topo.get("inter"))),
        ("network model", str(scenario.get("network", {}).get("model", ""))),
        ("payload", str(scenario.get("payload", ""))),
    ]
    for key, value in (scenario.get("mpi") or {}).items():
        rows.append((f"mpi.{key}", _param(key, value)))
    algorithms = scenario.get("algorithms") or {}
    if algorithms:
        rows.append(("algorithms", ", ".join(f"{k}: {v}" for k, v in algorithms.items())))
    rows += _workload(scenario.get("workload") or {})
    for key, values in (scenario.get("sweep") or {}).items():
        rows.append((f"sweep {key}", ", ".join(str(v) for v in values)))
    rows.append(("seed", str(scenario.get("seed", 0))))
    return rows


# ----------------------------------------------------------------------------- results


def results_tables(result: RunResult) -> list[tuple[str, list[str], list[list[str]]]]:
    """Return (title, headers, formatted rows) per kind of row: the report's full results tables."""
    kinds = row_kinds(result)
    keys = sweep_keys(result)
    out = []
    for kind, title in (("collective", "Collective calls"), ("p2p", "Point-to-point"),
                        ("training", "Training iterations"), ("hybrid", "Training iterations (hybrid parallel)")):
        rows = kinds[kind]
        columns = view(kind, "markdown")
        if not rows:
            continue
        present = [c for c in columns if any(c[1] in r for r in rows)]
        # A swept key that a column already shows (workload.parallel.tp and tp) is shown once.
        shown = [k for k in keys if k.rsplit(".", 1)[-1] not in {c[1] for c in present}]
        headers = [k.rsplit(".", 1)[-1] for k in shown] + [c[0] for c in present]
        body = [[str(r.get(k, "")) for k in shown] + [fmt(r[key]) if key in r else "" for _, key, fmt in present]
                for r in rows]
        out.append((title, headers, body))
    if kinds["other"]:
        columns = list(dict.fromkeys(k for r in kinds["other"] for k in r))
        body = [[fmt_num(r.get(c)) if isinstance(r.get(c), float) else str(r.get(c, "")) for c in columns]
                for r in kinds["other"]]
        out.append(("Results", columns, body))
    return out


def headline(result: RunResult) -> tuple[list[str], list[list[str]]]:
    """Return the headline table: the few numbers that answer the scenario's question."""
    kinds = row_kinds(result)
    keys = sweep_keys(result)
    headers = ["what", "value"]
    rows: list[list[str]] = []
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in kinds["collective"]:
        groups.setdefault((row["algorithm"], row["ranks"], *(row.get(k) for k in keys)), []).append(row)
    for (algorithm, ranks, *point), members in groups.items():
        where = point_label(dict(zip(keys, point, strict=True)), keys)
        suffix = f" ({where})" if where else ""
        largest = max(members, key=lambda r: r["bytes"])
        rows.append([f"{largest['collective']}/{algorithm}, {ranks} ranks, {fmt_bytes(largest['bytes'])}{suffix}: time",
                     fmt_time(largest["time_s"])])
        if isinstance(largest.get("busbw_GBps"), int | float):
            rows.append([f"{largest['collective']}/{algorithm}, {ranks} ranks, {fmt_bytes(largest['bytes'])}{suffix}: busbw",
                         f"{fmt_num(largest['busbw_GBps'])} GB/s"])
    for test in ("latency", "bandwidth", "bibw"):
        mine = [r for r in kinds["p2p"] if r.get("test") == test]
        if test == "latency" and mine:
            low = min(mine, key=lambda r: r["bytes"])
            rows.append([f"latency at {fmt_bytes(low['bytes'])}", fmt_time(low["latency_s"])])
        elif mine:
            peak = max(mine, key=lambda r: r.get("bandwidth_Bps") or 0)
            rows.append([f"peak {test} (at {fmt_bytes(peak['bytes'])})", fmt_bandwidth(peak.get("bandwidth_Bps"))])
    train_keys = [k for k in keys if k != "topology.nodes"]
    tgroups: dict[tuple, list[dict[str, Any]]] = {}
    for row in kinds["training"]:
        tgroups.setdefault(tuple(row.get(k) for k in train_keys), []).append(row)
    for point, members in tgroups.items():
        last = max(members, key=lambda r: r["ranks"])
        where = point_label(dict(zip(train_keys, point, strict=True)), train_keys)
        prefix = f"{where}, {last['ranks']} ranks" if where else f"{last['ranks']} ranks"
        rows.append([f"{prefix}: iteration time", fmt_time(last["iteration_time_s"])])
        rows.append([f"{prefix}: scaling efficiency", fmt_percent(last.get("scaling_efficiency"))])
        rows.append([f"{prefix}: exposed communication", fmt_time(last["exposed_comm_s"])])
    rows += _hybrid_headline(result)
    return headers, rows


def _hybrid_headline(result: RunResult) -> list[list[str]]:
    """The hybrid-parallel rows' answer: the fastest layout that fits per GPU count, or the one row's numbers."""
    keys = sweep_keys(result)
    out = []
    for ranks, rows in by_gpu_count(result):
        best = best_row(rows)
        if best is None:
            continue
        prefix = f"{ranks} GPUs, {layout_label(best, keys)}"
        if len(rows) > 1:
            misfits = sum(1 for r in rows if r.get("fits") is False)
            which = "fastest layout that fits" if best.get("fits") is not False else "fastest layout (none fits)"
            out.append([f"{ranks} GPUs: {which} (of {len(rows)}" + (f", {misfits} do not fit" if misfits else "") + ")",
                        layout_label(best, keys)])
        out.append([f"{prefix}: iteration time", fmt_time(best["iteration_time_s"])])
        if best.get("tflops_per_gpu") is not None:  # a model known only by its size has no FLOP count
            out.append([f"{prefix}: TFLOP/s per GPU", fmt_num(best.get("tflops_per_gpu"))])
            out.append([f"{prefix}: MFU", fmt_percent(best.get("mfu"))])
        if best.get("tokens_per_s") is not None:
            out.append([f"{prefix}: tokens/s", f"{best['tokens_per_s']:,.0f}"])
        out.append([f"{prefix}: memory per GPU", fmt_bytes(best.get("memory_per_gpu_bytes"))])
    return out


def layout_tables(result: RunResult) -> list[tuple[str, list[str], list[list[str]]]]:
    """Return the "which layout" tables: per GPU count with two layouts or more, fastest first.

    Each row: the layout, its iteration time and how much slower than the fastest that fits,
    TFLOP/s per GPU, MFU, memory per GPU and whether it fits (layouts that do not fit come last).
    """
    keys = sweep_keys(result)
    out = []
    for ranks, rows in layout_groups(result).items():
        best = best_row(rows)
        assert best is not None  # a group holds two rows or more
        body = []
        for row in rows:
            fits = row.get("fits")
            body.append([
                layout_label(row, keys) if fits is not False else f"{layout_label(row, keys)} (does not fit)",
                fmt_time(row["iteration_time_s"]),
                f"{row['iteration_time_s'] / best['iteration_time_s']:.2f}x" if best["iteration_time_s"] > 0 else "n/a",
                fmt_num(row.get("tflops_per_gpu")), fmt_percent(row.get("mfu")), fmt_bytes(row.get("memory_per_gpu_bytes")),
                "n/a" if fits is None else ("yes" if fits else "**NO**"),
            ])
        out.append((f"{ranks} GPUs", ["layout", "iteration", "vs best", "TFLOP/s per GPU", "MFU", "memory per GPU",
                                      "fits"], body))
    return out


# ----------------------------------------------------------------------------- the document


def markdown_report(result: RunResult, figures: Sequence[FigureInfo], findings: Sequence[str],
                    files: Sequence[tuple[str, str]]) -> str:
    """Return the text of report.md for *result* with the given figures, findings and files."""
    scenario = result.scenario
    name = markdown_text(scenario.get("name", "scenario"))
    out = [f"# {name}", ""]
    if scenario.get("description"):
        out += [markdown_text(str(scenario["description"]).strip(), keep_newlines=True), ""]
    version = result.meta.get("mpisim_version", "")
    out += [f"Simulated by mpisim {version}. Everything below is rendered from `results.json`; "
            "`mpisim report DIR` renders it again without re-running the simulation.", ""]
    out += ["## What was simulated", ""]
    if scenario.get("sweep"):
        out += ["These are the base scenario's settings; every point of the sweep (last rows) overrides the keys "
                "it names.", ""]
    out += [md_table(["setting", "value"], scenario_table(scenario), "ll"), ""]
    head_headers, head_rows = headline(result)
    if head_rows:
        out += ["## Headline numbers", "", md_table(head_headers, head_rows), ""]
    if findings:
        out += ["## Findings", ""] + [f"- {f}" for f in findings] + [""]
    headers, clusters = cluster_table(result)
    if clusters:
        out += ["## Which cluster", "", "The sweep's clusters side by side, soonest trained (else fastest iteration) "
                "first; layouts that do not fit the device's memory last.", "", md_table(headers, clusters), ""]
    layouts = layout_tables(result)
    if layouts:
        out += ["## Which layout", "", "Layouts fastest first at each GPU count; those that do not fit the device's "
                "memory last. *vs best*: iteration time over the fastest layout that fits.", ""]
        for title, headers, rows in layouts:
            out += ([f"### {title}", ""] if len(layouts) > 1 else []) + [md_table(headers, rows, "lrrrrrl"), ""]
    if figures:
        out += ["## Figures", ""]
        for fig in figures:
            out += [f"### {fig.title}", "", f"![{fig.title}]({fig.path})", "", fig.caption, ""]
        pipelined = any(int(r.get("pp") or 1) > 1 for r in row_kinds(result)["hybrid"])
        if pipelined and not any(fig.path.startswith("figures/pipeline-") for fig in figures):
            out += ["No pipeline timeline: the run recorded no spans of the stages' passes. Run it with "
                    "`--set trace.spans=true` (or `trace: {spans: true}`) to draw one per pipelined layout.", ""]
    tables = results_tables(result)
    if tables:
        out += ["## Results", ""]
        for title, headers, rows in tables:
            out += [f"### {title}", "", md_table(headers, rows), ""]
    if result.expectations:
        rows = [["PASS" if e.get("passed") else "FAIL", e.get("detail", "")] for e in result.expectations]
        out += ["## Expectations", "", md_table(["result", "detail"], rows, "ll"), ""]
    if result.failure is not None:
        expected = "expected by the scenario" if result.scenario.get("expect_failure") else "up to where it stopped"
        out += ["## Failure of the simulated program", "", f"Kind: **{result.failure.get('kind')}** "
                f"({expected}).", "", "```", str(result.failure.get("message", "")).strip(), "```", ""]
    if result.notes:
        out += ["## Notes", ""] + [f"- {note}" for note in result.notes] + [""]
    if files:
        out += ["## Files", ""] + [f"- `{path}`: {what}" for path, what in files] + [""]
    return "\n".join(out).rstrip() + "\n"
