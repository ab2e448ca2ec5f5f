"""The output directory: figures written and non-empty, report.md agreeing with results.json, re-rendering, atomicity."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import numpy as np
import pytest

from mpisim.cli import main
from mpisim.report import plots
from mpisim.report.render import load_result, slim, timeline_worlds, write_outputs
from mpisim.report.tables import row_kinds

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

#: Figures each scenario must produce (timelines and link figures are checked by prefix).
EXPECTED = {
    "compare": {"bandwidth.png", "closed_form.png", "timeline-ring-1-mib.png", "timeline-parameter-server-1-mib.png",
                "links-ring-1-mib.png", "links-parameter-server-1-mib.png"},
    "osu": {"p2p.png", "timeline-latency-1-mib.png", "timeline-bandwidth-1-mib.png"},
    "training": {"scaling.png", "breakdown.png"},
}


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, f"{path.name} is not a PNG"
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_figure_is_written_linked_and_not_empty(rendered, name):
    out = rendered[name]
    figures = {p.name for p in (out / "figures").iterdir()}
    assert EXPECTED[name] <= figures
    if name == "training":
        assert any(f.startswith("timeline-training-4-ranks") for f in figures), "the largest readable world gets a timeline"
    report = (out / "report.md").read_text()
    linked = set(re.findall(r"!\[[^\]]*\]\(figures/([^)]+)\)", report))
    assert linked == figures, "report.md links exactly the figures that were written"
    for fig in figures:
        width, height = png_size(out / "figures" / fig)
        assert width >= 600 and height >= 300, f"{fig} is {width}x{height}"
        assert (out / "figures" / fig).stat().st_size > 10_000, f"{fig} is nearly empty"


def test_output_directory_holds_every_file(rendered):
    names = {p.name for p in rendered["compare"].iterdir()}
    assert {"results.json", "results.csv", "messages.csv", "collectives.csv", "links.csv", "report.md",
            "trace.json", "figures"} <= names
    assert not [n for n in names if n.startswith(".")], "no staging directory is left behind"


def _table(report: str, title: str) -> list[dict[str, str]]:
    """Parse the Markdown table under '### title' into dicts keyed by header."""
    section = report.split(f"### {title}\n", 1)[1].strip().splitlines()
    lines = []
    for line in section:  # the table: the run of lines starting with '|'
        if not line.startswith("|"):
            break
        lines.append(line)
    headers = [h.strip() for h in lines[0].strip("|").split("|")]
    return [dict(zip(headers, (c.strip() for c in line.strip("|").split("|")), strict=True)) for line in lines[2:]]


UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30,
         "KB": 1e3, "MB": 1e6, "GB": 1e9, "GB/s": 1e9, "MB/s": 1e6, "KB/s": 1e3, "B/s": 1, "%": 0.01}


def number(text: str) -> float:
    """'43.65 us' -> 4.365e-05; '8 KiB' -> 8192; '99.5 %' -> 0.995; '1.234' -> 1.234."""
    value, _, unit = text.partition(" ")
    return float(value) * UNITS[unit] if unit else float(value)


def test_report_numbers_equal_results_json(rendered):
    for name, title, checks in (
        ("compare", "Collective calls", {"time": "time_s", "size": "bytes", "busbw (GB/s)": "busbw_GBps",
                                         "algbw (GB/s)": "algbw_GBps"}),
        ("osu", "Point-to-point", {"size": "bytes", "latency": "latency_s", "bandwidth": "bandwidth_Bps"}),
        ("training", "Training iterations", {"iteration": "iteration_time_s", "exposed communication": "exposed_comm_s",
                                             "scaling efficiency": "scaling_efficiency"}),
    ):
        out = rendered[name]
        rows = json.loads((out / "results.json").read_text())["results"]
        table = _table((out / "report.md").read_text(), title)
        assert len(table) == len(rows), name
        for shown, row in zip(table, rows, strict=True):
            for header, key in checks.items():
                if key not in row:
                    assert shown[header] == "", (name, header)
                    continue
                assert number(shown[header]) == pytest.approx(row[key], rel=6e-4, abs=1e-12), (name, header, shown)


def test_headline_numbers_come_from_the_largest_size(rendered):
    out = rendered["compare"]
    rows = json.loads((out / "results.json").read_text())["results"]
    report = (out / "report.md").read_text()
    ring = max((r for r in rows if r["algorithm"] == "ring"), key=lambda r: r["bytes"])
    line = next(line for line in report.splitlines() if line.startswith("| allreduce/ring, 4 ranks, 1 MiB: time"))
    assert number(line.split("|")[2].strip()) == pytest.approx(ring["time_s"], rel=6e-4)


def test_findings_name_the_winner_the_data_shows(rendered):
    out = rendered["compare"]
    rows = json.loads((out / "results.json").read_text())["results"]
    report = (out / "report.md").read_text()
    big = [r for r in rows if r["bytes"] == 2**20]
    winner = min(big, key=lambda r: r["time_s"])["algorithm"]
    loser = max(big, key=lambda r: r["time_s"])
    factor = loser["time_s"] / min(r["time_s"] for r in big)
    sentence = next(line for line in report.splitlines() if line.startswith("- **allreduce on 4 ranks:**"))
    assert re.search(rf"to 1 MiB \*\*{winner}\*\* is fastest, [0-9.]+x to {factor:.2f}x faster", sentence), sentence
    assert "**NIC links bound ring 1 MiB:** `node0.nic0->switch` (NIC)" in report


def test_report_command_reproduces_the_same_report(rendered, tmp_path, capsys):
    source = rendered["osu"]
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "results.json").write_bytes((source / "results.json").read_bytes())
    assert main(["report", str(copy)]) == 0
    capsys.readouterr()
    assert (copy / "report.md").read_text() == (source / "report.md").read_text()
    assert (copy / "trace.json").read_bytes() == (source / "trace.json").read_bytes()
    for fig in (source / "figures").iterdir():
        assert (copy / "figures" / fig.name).read_bytes() == fig.read_bytes(), fig.name
    assert (copy / "results.json").read_bytes() == (source / "results.json").read_bytes(), "results.json is left alone"


def test_report_of_a_missing_directory_is_bad_input(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nothing")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_a_failing_figure_leaves_the_directory_as_it_was(rendered, tmp_path, monkeypatch):
    result = load_result(rendered["compare"])
    out = tmp_path / "out"
    write_outputs(result, out)
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def broken(*args, **kwargs):
        raise RuntimeError("plotting failed")

    monkeypatch.setattr(plots, "plot_timeline", broken)
    result.rows[0]["time_s"] *= 2  # a different result, which must not half-replace the old one
    with pytest.raises(RuntimeError, match="plotting failed"):
        write_outputs(result, out)
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_timelines_prefer_readable_worlds_with_communication(rendered):
    result = load_result(rendered["training"])
    chosen = [result.records[i] for i in timeline_worlds(result)]
    assert {w.point["topology.inter.bandwidth"] for w in chosen} == {"10 Gbps", "100 Gbps"}
    assert all(w.label == "training 4 ranks" for w in chosen)


def test_no_plots_skips_figures_only(rendered, tmp_path):
    result = load_result(rendered["osu"])
    write_outputs(result, tmp_path, figures=False)
    assert list((tmp_path / "figures").iterdir()) == []
    report = (tmp_path / "report.md").read_text()
    assert "## Figures" not in report and "## Results" in report


def test_closed_form_holds_on_a_contention_free_network(tmp_path):
    from mpisim.report.tables import closed_form_rows
    from mpisim.scenario import load_dict, run_scenario

    raw = {"topology": {"nodes": 4, "inter": {"kind": "full", "bandwidth": "1 GB/s", "latency": "1 us"}},
           "network": {"model": "analytic"}, "payload": "size",
           "workload": {"kind": "collective", "collective": "allreduce", "algorithm": ["ring", "recursive_doubling"],
                        "sizes": ["4 KiB", "32 KiB"]}}
    result = run_scenario(load_dict(raw))
    rows = closed_form_rows(result)
    assert len(rows) == len(row_kinds(result)["collective"]) == 4
    for row in rows:
        assert row["ratio"] == pytest.approx(1.0, rel=1e-9), row
    assert plots.plot_closed_form(result) is not None


def test_a_slim_result_renders_the_same_report(rendered, tmp_path):
    result = load_result(rendered["compare"])
    thin = slim(result)
    assert sum(len(w.messages) for w in thin.records) < sum(len(w.messages) for w in result.records)
    write_outputs(thin, tmp_path)
    assert (tmp_path / "report.md").read_text() == (rendered["compare"] / "report.md").read_text()


def test_report_plots_key_selects_figures(rendered, tmp_path):
    result = load_result(rendered["compare"])
    result.scenario["report"] = {"plots": ["timeline", "link_utilisation"]}
    write_outputs(result, tmp_path)
    names = sorted(p.name.split("-")[0] for p in (tmp_path / "figures").iterdir())
    assert names == ["links", "links", "timeline", "timeline"]


def test_size_plots_need_two_sizes_and_rank_plots_two_rank_counts():
    from mpisim.report.records import RunResult

    rows = [{"collective": "allreduce", "algorithm": "ring", "ranks": p, "bytes": 1000, "time_s": 1e-3 * p,
             "busbw_GBps": 1.0 / p, "algbw_GBps": 0.5 / p, "topology.nodes": p} for p in (2, 4)]
    result = RunResult(scenario={"name": "x", "sweep": {"topology.nodes": [2, 4]}}, rows=rows)
    assert plots.plot_bandwidth(result) is None, "one size: no curve against size"
    assert plots.plot_scaling(result) is not None
    assert plots.plot_scaling(RunResult(scenario={"name": "x"}, rows=rows[:1])) is None


def _collective_rows(ranks, sizes, algorithms=("ring",), collectives=("allreduce",)):
    return [{"collective": c, "algorithm": a, "ranks": p, "bytes": b, "time_s": 1e-6 * p * b ** 0.5,
             "busbw_GBps": 1.0, "algbw_GBps": 0.5}
            for c in collectives for a in algorithms for p in ranks for b in sizes]


def test_scaling_is_drawn_only_when_ranks_vary():
    from mpisim.report.records import RunResult

    one_count = RunResult(scenario={"name": "x"},
                          rows=_collective_rows([8], [1024, 4096], collectives=("allreduce", "bcast")))
    assert plots.plot_scaling(one_count) is None, "every point at one rank count: no scaling figure"
    assert plots.plot_scaling(RunResult(scenario={"name": "x"}, rows=_collective_rows([4, 8], [1024]))) is not None


def test_legends_stay_inside_the_figure():
    """35 curves (the sweep that once pushed the legend off the image) keep every legend inside."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from mpisim.report.records import RunResult

    rows = _collective_rows([2, 4, 8], [2**k for k in range(5, 12)], algorithms=[f"alg{i}" for i in range(5)])
    result = RunResult(scenario={"name": "x"}, rows=rows)
    for fig in (plots.plot_scaling(result), plots.plot_bandwidth(result)):
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        renderer = canvas.get_renderer()
        box = fig.bbox
        legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
        assert legends
        for legend in legends:
            extent = legend.get_window_extent(renderer)
            assert extent.x0 >= box.x0 - 1 and extent.x1 <= box.x1 + 1, (extent, box)
            assert extent.y0 >= box.y0 - 1 and extent.y1 <= box.y1 + 1, (extent, box)


# ------------------------------------------------------------------ auto over a sweep of topologies

AUTO_PICKS = {"dgx-h100": [("nccl_tree", 36.06), ("nccl_ring", 282.9), ("nccl_tree", 394.4)],
              "dgx-a100": [("nccl_ring", 18.76), ("nccl_tree", 119.2), ("nccl_tree", 248.5)]}
AUTO_SIZES = (2**20, 2**24, 2**30)


def auto_over_presets():
    """What `algorithm: auto` on 2 nodes of dgx-h100 and of dgx-a100 chose at 1 MiB, 16 MiB and 1 GiB (busbw in GB/s)."""
    from mpisim.report.records import RunResult

    rows = [{"collective": "allreduce", "algorithm": algorithm, "requested": "auto", "ranks": 16, "bytes": size,
             "time_s": size * 1.875 / (busbw * 1e9), "busbw_GBps": busbw, "algbw_GBps": busbw / 1.875,
             "topology.preset": preset}
            for preset, picks in AUTO_PICKS.items() for size, (algorithm, busbw) in zip(AUTO_SIZES, picks, strict=True)]
    return RunResult(scenario={"name": "topo-auto", "sweep": {"topology.preset": list(AUTO_PICKS)}}, rows=rows)


def test_with_auto_there_is_one_curve_per_sweep_point_marked_with_what_ran():
    result = auto_over_presets()
    curves = plots.bandwidth_curves(result)
    assert [c.label for c in curves] == ["auto, dgx-h100", "auto, dgx-a100"]
    for curve, (preset, picks) in zip(curves, AUTO_PICKS.items(), strict=True):
        assert curve.xs == list(AUTO_SIZES), "every size on the curve: none joined across another algorithm's"
        assert [r["algorithm"] for r in curve.rows] == [a for a, _ in picks]
        assert {r["topology.preset"] for r in curve.rows} == {preset}
    fig = plots.plot_bandwidth(result)
    ax_t = fig.axes[0]
    legend = [t.get_text() for t in ax_t.get_legend().get_texts()]
    assert legend == ["auto, dgx-h100", "auto, dgx-a100", "ran nccl_tree", "ran nccl_ring"]
    labels = [a.get_text() for a in ax_t.texts]
    assert labels == [a for picks in AUTO_PICKS.values() for a, _ in picks]
    caption = plots.bandwidth_caption(result)
    assert caption.startswith("One curve per algorithm asked for and sweep point: where auto chose, the marker")


def test_without_auto_curves_stay_per_algorithm_and_never_cross_a_missing_size():
    from mpisim.report.records import RunResult

    rows = [{"collective": "allreduce", "algorithm": a, "requested": a, "ranks": 8, "bytes": b, "time_s": 1e-9 * b,
             "busbw_GBps": 1.0, "algbw_GBps": 0.5}
            for a, sizes in (("ring", (1024, 4096, 16384)), ("rabenseifner", (1024, 16384))) for b in sizes]
    result = RunResult(scenario={"name": "x"}, rows=rows)
    assert [c.label for c in plots.bandwidth_curves(result)] == ["ring", "rabenseifner"]
    assert plots.bandwidth_caption(result).startswith("One curve per algorithm. Left:")
    lines = plots.plot_bandwidth(result).axes[0].get_lines()
    xs = {line.get_label(): list(line.get_xdata()) for line in lines}
    assert xs["ring"] == [1024, 4096, 16384]
    assert xs["rabenseifner"][0] == 1024 and xs["rabenseifner"][2] == 16384 and np.isnan(xs["rabenseifner"][1])


def test_scaling_with_auto_follows_the_request():
    from mpisim.report.records import RunResult

    rows = [{"collective": "allreduce", "algorithm": a, "requested": "auto", "ranks": p, "bytes": 2**20,
             "time_s": 1e-5 * p, "busbw_GBps": 10.0 / p, "algbw_GBps": 5.0 / p}
            for p, a in ((8, "nccl_ring"), (16, "nccl_tree"), (32, "nccl_tree"))]
    fig = plots.plot_scaling(RunResult(scenario={"name": "x"}, rows=rows))
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["auto, 1 MiB", "ran nccl_ring", "ran nccl_tree"]


def test_a_time_in_a_microsecond_column_over_a_second_prints_in_seconds():
    """10.839 s in the terminal's "time (us)" column reads "10.84 s", not 10839227.09."""
    from mpisim.report.columns import TABLES

    [header, fmt] = next(c.terminal for c in TABLES["collective"] if c.key == "time_s")
    assert header == "time (us)"
    assert fmt(10.83922709) == "10.84 s"
    assert fmt(43.65e-6) == "43.65"


def test_a_sweep_over_nodes_says_which_point_its_timeline_draws():
    from mpisim.report.render import which_point
    from mpisim.scenario import load_dict, run_scenario

    result = run_scenario(load_dict({
        "name": "x", "topology": {"nodes": 2, "ranks_per_node": 1,
                                  "inter": {"kind": "full", "bandwidth": "1 GB/s", "latency": "1 us"}},
        "payload": "size", "fidelity": "message", "trace": {"spans": True}, "sweep": {"topology.nodes": [2, 4, 16]},
        "workload": {"kind": "collective", "collective": "allreduce", "algorithm": "ring", "sizes": ["1 KiB"]}}))
    [drawn] = timeline_worlds(result)
    # 16 ranks is past what a timeline shows readably, so the 4-node point is drawn, and the caption says so
    assert which_point(result, drawn) == (" Drawn for nodes=4 (4 ranks), the largest point readable in a figure "
                                          "(the sweep goes up to nodes=16).")
