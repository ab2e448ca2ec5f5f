"""What a fit leaves behind: the preset file, the report, the terminal summary.

The **preset** is the base preset's mapping with the fitted values written in, every fitted
or kept parameter carrying a comment that says where its value comes from (the points that
determine it, or why the data could not), and a header citing the measurement files. It loads
like any preset: ``mpisim run s.yaml --set topology=mycluster.yaml``.

The **report** (Markdown, with a PNG of the residuals against size) lists every measured point
next to the base's and the fitted preset's predictions, the fitted values, the hold-out error,
and the warnings where the model cannot follow the data.
"""

from __future__ import annotations

import copy
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from mpisim.calibrate.fit import FitResult, FittedParam, PointFit
from mpisim.calibrate.measurements import Series
from mpisim.calibrate.model import get, put, si_value
from mpisim.report.tables import fmt_bandwidth, fmt_bytes, fmt_time
from mpisim.scenario.run import write_atomic


def pretty(kind: str, value: float) -> Any:
    """A preset entry to four significant digits, in the unit people write: ``1.62 us``, ``23.48 GB/s``."""
    if kind == "time":
        for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
            if value >= scale:
                return f"{value / scale:.4g} {unit}"
        return f"{value * 1e9:.4g} ns"
    if kind == "bandwidth":
        return f"{value / 1e9:.4g} GB/s"
    if kind == "size":
        return f"{int(value) // 1024} KiB" if value and int(value) % 1024 == 0 else f"{int(value)} B"
    return float(f"{value:.4g}")


def _show(kind: str, value: float | None) -> str:
    if value is None or value == 0:
        return "none"
    shown = pretty(kind, value)
    return str(shown)


def _sources(fp: FittedParam, quote: str = "") -> str:
    """``from osu_latency.txt:4, osu_bw.txt:3``, or what bounds it when no point determines it."""
    if fp.determined_by and fp.determined_by[0].startswith("no point"):
        return f"but {fp.determined_by[0]}"
    return "from " + ", ".join(f"{quote}{_short(p)}{quote}" for p in fp.determined_by)


def _param_comment(fp: FittedParam, base_name: str) -> str:
    if fp.fitted:
        return f"fitted (base {base_name}: {_show(fp.param.kind, fp.base)}) {_sources(fp)}"
    return f"{base_name}'s value, kept: {fp.reason}"


def _short(name: str) -> str:
    """``osu_latency.txt:4 (latency 0 B)`` -> ``osu_latency.txt:4``; other text as it is."""
    return name.split(" (")[0] if name.endswith(")") and ":" in name.split(" (")[0] else name


def preset_text(result: FitResult, files: Sequence[str], name: str = "THIS_FILE.yaml") -> str:
    """The fitted preset as YAML, with comments citing where each fitted number comes from."""
    preset = copy.deepcopy(result.preset)  # put() writes into nested mappings
    comments: dict[str, str] = {}
    for fp in result.params:
        if fp.value == 0 and not fp.fitted:
            continue  # an optional mechanism the data does not show: not written
        for key in fp.param.keys:
            raw = get(result.preset, key)
            if raw is None:
                continue
            put(preset, key, pretty(fp.param.kind, si_value(fp.param.kind, raw)))
            comments[key] = _param_comment(fp, result.base_name)
    for eager in result.eager:
        put(preset, eager.key, pretty("size", eager.value))
        comments[eager.key] = ("fitted: " if eager.fitted else f"{result.base_name}'s value, kept: ") + eager.reason
    names = [Path(f).name for f in files]
    preset["description"] = f"Fitted by mpisim calibrate to {', '.join(names)} (base preset {result.base_name})"
    header = [
        "# A preset fitted by `mpisim calibrate` to measurements of the user's cluster, starting from",
        f"# the preset {result.base_name}. Measurements: {', '.join(names)}.",
        "# Each fitted number says which measured points (file:line) determine it; numbers the data",
        f"# cannot identify keep {result.base_name}'s value, and say why. Numbers without a comment",
        f"# are {result.base_name}'s, untouched (see its file for their sources).",
    ]
    if result.holdout:
        held = result.errors(True)
        header.append(f"# Hold-out: fitted on {1 - result.holdout:.0%} of the points; the other {len(held)} are "
                      f"predicted within {max(held):.1%}.")
    header.append(f"# Use it: mpisim run SCENARIO.yaml --set topology={Path(name).name}")
    return "\n".join(header) + "\n" + "\n".join(_emit(preset, 0, "", comments)) + "\n"


def _scalar(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=1000).strip().removesuffix("...").strip()


def _emit(node: Mapping[str, Any], indent: int, prefix: str, comments: Mapping[str, str]) -> list[str]:
    lines = []
    pad = "  " * indent
    for key, value in node.items():
        path = f"{prefix}{key}"
        note = f"  # {comments[path]}" if path in comments else ""
        if isinstance(value, Mapping) and value:
            lines.append(f"{pad}{key}:{note}")
            lines.extend(_emit(value, indent + 1, f"{path}.", comments))
        else:
            lines.append(f"{pad}{key}: {_scalar(value)}{note}")
    return lines


# --- report -------------------------------------------------------------------------------------


def _value(series: Series, value: float) -> str:
    return fmt_bandwidth(value) if series.metric == "bandwidth_Bps" else fmt_time(value)


def _errors_line(result: FitResult) -> str:
    fit = result.errors(False)
    line = f"fitted points: largest error {max(fit):.2%}, mean {sum(fit) / len(fit):.2%} ({_count(len(fit))})"
    held = result.errors(True)
    if held:
        line += f"; held-out points: largest {max(held):.2%}, mean {sum(held) / len(held):.2%} ({_count(len(held))})"
    return line


def _count(n: int) -> str:
    return f"{n} point{'s' if n != 1 else ''}"


def summary(result: FitResult) -> str:
    """The terminal summary: parameters, the error figures, warnings and notes."""
    lines = [f"base preset: {result.base_name}", "", "parameters:"]
    for fp in result.params:
        if fp.fitted:
            lines.append(f"  {fp.param.name}: {_show(fp.param.kind, fp.base)} -> {_show(fp.param.kind, fp.value)} "
                         f"(fitted {_sources(fp)})")
        else:
            lines.append(f"  {fp.param.name}: {_show(fp.param.kind, fp.base)} kept ({fp.reason})")
    for eager in result.eager:
        verb = f"{eager.base} B -> {eager.value} B (fitted: " if eager.fitted else f"{eager.value} B kept ("
        lines.append(f"  {eager.key}: {verb}{eager.reason})")
    lines += ["", _errors_line(result)]
    lines += [f"warning: {w}" for w in result.warnings]
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines) + "\n"


def _point_row(p: PointFit) -> str:
    s = p.series
    return (f"| {Path(s.file).name}:{p.point.line} | {s.test} | {fmt_bytes(p.point.nbytes)} | "
            f"{_value(s, p.point.value)} | {_value(s, p.base)} ({p.base_error:+.1%}) | "
            f"{_value(s, p.fitted)} ({p.error:+.1%}) | {'held out' if p.held_out else 'fitted'} |")


def report_markdown(result: FitResult, files: Sequence[str], figure: str | None) -> str:
    """The calibration report: parameters, every point, residuals, warnings."""
    names = ", ".join(Path(f).name for f in files)
    out = [f"# Calibration against {names}", "",
           f"Base preset: `{result.base_name}`. Every prediction is an mpisim run of the workload that measures "
           "what the file measured (size-only payloads). " + _errors_line(result).capitalize() + ".", ""]
    if result.holdout:
        out += [f"Hold-out: {result.holdout:.0%} of the points (seeded draw) were left out of the fit and only "
                "predicted; their error says how far predictions for unmeasured sizes can be trusted.", ""]
    out += ["## Parameters", "", "| parameter | what it is | base | fitted | how |", "|---|---|---|---|---|"]
    for fp in result.params:
        how = f"fitted {_sources(fp, '`')}" if fp.fitted else f"kept: {fp.reason}"
        value = _show(fp.param.kind, fp.value) if fp.fitted else "(base)"
        out.append(f"| `{fp.param.name}` | {fp.param.meaning} | {_show(fp.param.kind, fp.base)} | {value} | {how} |")
    for eager in result.eager:
        out.append(f"| `{eager.key}` | largest message sent eagerly | {eager.base} B | "
                   f"{eager.value if eager.fitted else '(base)'}{' B' if eager.fitted else ''} | {eager.reason} |")
    out += ["", "## Every point", "",
            "| file:line | test | size | measured | base preset (error) | fitted preset (error) | used |",
            "|---|---|---|---|---|---|---|"]
    out += [_point_row(p) for p in result.points]
    if figure:
        out += ["", "## Residuals against size", "", f"![relative error of each point, base and fitted]({figure})"]
    out += ["", "## Warnings", ""]
    out += [f"- {w}" for w in result.warnings] or ["- none: the fitted model follows every point within 5 %"]
    if result.notes:
        out += ["", "## Notes", ""] + [f"- {n}" for n in result.notes]
    return "\n".join(out) + "\n"


def residual_figure(result: FitResult) -> Any:
    """Relative error against message size, one marker per series, base (hollow) and fitted (filled)."""
    fig = Figure(figsize=(7.5, 4.2))
    ax = fig.add_subplot()
    clip = 30.0  # percent: a base preset 100 % off would squash the fitted points into a line

    def shown(error: float) -> float:
        return max(-clip, min(clip, 100 * error))

    labels = []
    for p in result.points:
        if p.series.label not in labels:
            labels.append(p.series.label)
    for i, label in enumerate(labels):
        pts = [p for p in result.points if p.series.label == label]
        xs = [max(p.point.nbytes, 1) for p in pts]
        colour = f"C{i % 10}"
        name = f"{Path(pts[0].series.file).name} ({pts[0].series.test})"
        ax.plot(xs, [shown(p.base_error) for p in pts], "o", mfc="none", color=colour, alpha=0.6)
        ax.plot(xs, [shown(p.error) for p in pts], "o-", color=colour, label=name)
        held = [(x, shown(p.error)) for x, p in zip(xs, pts, strict=True) if p.held_out]
        if held:
            ax.plot(*zip(*held, strict=True), "s", mfc="none", ms=11, color=colour)
    ax.axhline(0, color="black", lw=0.8)
    ax.axhspan(-5, 5, color="0.9", zorder=0)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: fmt_bytes(round(v)) if v >= 1 else "0 B"))
    ax.set_xlabel("message size (0 B drawn at 1 B)")
    ax.set_ylabel(f"predicted / measured - 1 (%, clipped at +-{clip:.0f})")
    ax.set_ylim(-clip - 2, clip + 2)
    ax.set_title("Residuals: fitted (filled), base preset (hollow), held out (squared); band: 5 %", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def write_report(result: FitResult, files: Sequence[str], directory: Path) -> Path:
    """Write report.md and residuals.png to *directory*; return the report's path."""
    directory.mkdir(parents=True, exist_ok=True)
    fig = residual_figure(result)
    FigureCanvasAgg(fig)
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=110, metadata={"Software": None})
    # Replaced, never written through: a link planted at report.md must not lead the write elsewhere.
    write_atomic(directory / "residuals.png", image.getvalue())
    path = directory / "report.md"
    write_atomic(path, report_markdown(result, files, "residuals.png"))
    return path
