"""Reports of hybrid-parallel training: breakdown by dimension, pipeline timeline, which layout, findings.

Figures and findings are checked on constructed rows (where the right answer is known by
construction) and on small simulated runs with span records (the pipeline's passes).
"""

from __future__ import annotations

import copy
from itertools import pairwise
from typing import Any

import pytest
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_hex
from matplotlib.patches import Rectangle

from mpisim.report.findings import hybrid_findings
from mpisim.report.hybrid import breakdown, layout_groups, layout_label, pipeline_lanes, stage_ranks
from mpisim.report.markdown import layout_tables
from mpisim.report.plots import plot_scaling
from mpisim.report.plots.hybrid import (
    COST_COLOURS,
    NO_FIT_COLOUR,
    plot_layouts,
    plot_parallel_breakdown,
    plot_pipeline,
)
from mpisim.report.records import RunResult, WorldRecords
from mpisim.report.render import load_result, pipeline_worlds, slim, write_outputs
from mpisim.report.tables import row_kinds
from mpisim.scenario import load_dict, run_scenario
from mpisim.workloads.training.schedule import schedule

GIB = 2**30


def hybrid_row(tp: int, pp: int, dp: int, *, iteration: float, compute: float, bubble: float = 0.0, tp_s: float = 0.0,
               pp_s: float = 0.0, ep_s: float = 0.0, exposed: float | None = None, fits: bool | None = True,
               memory: int = 40 * GIB, micro_batches: int = 8, schedule_name: str = "1f1b", zero: int = 1,
               **extra: Any) -> dict[str, Any]:
    """A row as the hybrid training workload writes it; exposed defaults to iteration - compute - bubble."""
    exposed = iteration - compute - bubble if exposed is None else exposed
    return {"ranks": tp * pp * dp, "tp": tp, "pp": pp, "dp": dp, "ep": 1, "micro_batches": micro_batches,
            "schedule": schedule_name, "zero": zero, "iteration_time_s": iteration, "tokens_per_s": 1e5 / iteration,
            "tflops_per_gpu": 300 / iteration, "mfu": 0.3 / iteration, "compute_s": compute, "bubble_s": bubble,
            "tp_comm_s": tp_s, "pp_comm_s": pp_s, "ep_comm_s": ep_s, "dp_comm_s": 0.05, "exposed_comm_s": exposed,
            "memory_per_gpu_bytes": memory, "fits": fits, "params": 7_000_000_000, "simulated_ranks": tp * pp * dp,
            **extra}


def layout_sweep(rows: list[dict[str, Any]], workload: dict[str, Any] | None = None) -> RunResult:
    """A result of a sweep over tp and pp on 64 GPUs of 80 GiB, holding *rows*."""
    for row in rows:
        row["workload.parallel.tp"], row["workload.parallel.pp"] = row["tp"], row["pp"]
    scenario = {"name": "layouts", "topology": {"device_memory": 80 * GIB},
                "workload": {"kind": "training", "sequence_parallel": False, "overlap": {"dp": True},
                             "bucket_cap": 25 * 2**20, "batch": {"micro": 1}, **(workload or {})},
                "sweep": {"workload.parallel.tp": [1, 2, 8], "workload.parallel.pp": [1, 4]}}
    return RunResult(scenario=scenario, rows=rows)


@pytest.fixture
def sweep() -> RunResult:
    """Four layouts: tp 8 loses to its allreduces, pp 4 to its bubble, tp 1 pp 1 is fastest but does not fit."""
    return layout_sweep([
        hybrid_row(1, 1, 64, iteration=1.0, compute=0.97, fits=False, memory=95 * 10**9),
        hybrid_row(2, 1, 32, iteration=1.2, compute=1.0, tp_s=0.15, exposed=0.2),
        hybrid_row(8, 1, 8, iteration=2.0, compute=1.1, tp_s=0.8, exposed=0.9),
        hybrid_row(1, 4, 16, iteration=1.6, compute=1.0, bubble=0.5, pp_s=0.02, exposed=0.1),
    ])


# ----------------------------------------------------------------------------- rows and breakdown


def test_hybrid_rows_are_a_kind_of_their_own(sweep):
    kinds = row_kinds(sweep)
    assert len(kinds["hybrid"]) == 4 and not kinds["training"]


def test_breakdown_splits_exposed_communication_by_dimension():
    row = hybrid_row(2, 4, 8, iteration=1.0, compute=0.6, bubble=0.1, tp_s=0.15, pp_s=0.03, ep_s=0.02)
    parts = breakdown(row)
    assert parts == pytest.approx({"compute": 0.6, "bubble": 0.1, "tp": 0.15, "pp": 0.03, "ep": 0.02, "cp": 0.0,
                                   "dp": 0.1})
    assert sum(parts.values()) == pytest.approx(row["iteration_time_s"])
    # Context parallelism's exposed ring is its own part, taken out of the exposed communication.
    ring = breakdown({**row, "cp_comm_s": 0.04})
    assert ring["cp"] == 0.04 and ring["dp"] == pytest.approx(0.06) and sum(ring.values()) == pytest.approx(1.0)
    # More tp/pp/ep time than exposed communication (the clip): no negative data-parallel part.
    assert breakdown(hybrid_row(2, 1, 8, iteration=1.0, compute=0.8, tp_s=0.3))["dp"] == 0.0


def test_layout_label_names_the_layout_and_other_swept_values():
    row = hybrid_row(2, 4, 8, iteration=1.0, compute=1.0, **{"workload.zero": 1, "workload.parallel.pp": 4})
    assert layout_label(row, ["workload.parallel.pp", "workload.zero"]) == "tp 2, pp 4, dp 8, zero=1"
    assert layout_label({**row, "ep": 4}, []) == "tp 2, pp 4, dp 8, ep 4"


def test_layout_groups_put_the_fastest_fitting_layout_first(sweep):
    (ranks, rows), = layout_groups(sweep).items()
    assert ranks == 64
    assert [layout_label(r) for r in rows] == ["tp 2, pp 1, dp 32", "tp 1, pp 4, dp 16", "tp 8, pp 1, dp 8",
                                               "tp 1, pp 1, dp 64"]


# ----------------------------------------------------------------------------- figures


def _bars(ax) -> list[Rectangle]:
    return [p for p in ax.patches if isinstance(p, Rectangle)]


def test_breakdown_figure_stacks_each_cost_per_layout(sweep):
    fig = plot_parallel_breakdown(sweep)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == [layout_label(r) for r in sweep.rows]  # the sweep's order
    bars = _bars(ax)
    # compute, bubble, tp, pp and dp parts are present (ep is zero everywhere): 5 stacks of 4 bars.
    assert len(bars) == 5 * 4
    colours = {to_hex(b.get_facecolor()) for b in bars}
    assert colours == {to_hex(COST_COLOURS[k]) for k in ("compute", "bubble", "tp", "pp", "dp")}
    for i, row in enumerate(sweep.rows):
        mine = [b for b in bars if abs(b.get_x() + b.get_width() / 2 - i) < 1e-9]
        assert sum(b.get_height() for b in mine) == pytest.approx(row["iteration_time_s"])  # seconds: scale 1
        tp_bar = next(b for b in mine if to_hex(b.get_facecolor()) == to_hex(COST_COLOURS["tp"]))
        assert tp_bar.get_height() == pytest.approx(row["tp_comm_s"])
    # A layout that does not fit is written in red.
    assert to_hex(ax.get_xticklabels()[0].get_color()) != to_hex(ax.get_xticklabels()[1].get_color())


def test_breakdown_figure_needs_hybrid_rows():
    assert plot_parallel_breakdown(RunResult(scenario={}, rows=[{"ranks": 2, "iteration_time_s": 1.0,
                                                                  "compute_s": 1.0, "exposed_comm_s": 0.0}])) is None


def test_layouts_figure_sorts_by_time_and_greys_what_does_not_fit(sweep):
    fig = plot_layouts(sweep)
    ax = fig.axes[0]
    bars = _bars(ax)
    assert [b.get_height() for b in bars] == pytest.approx([1.2, 1.6, 2.0, 1.0])
    assert [b.get_hatch() for b in bars] == [None, None, None, "//"]
    assert to_hex(bars[-1].get_facecolor()) == to_hex(NO_FIT_COLOUR)
    assert "does not fit" in " ".join(t.get_text() for t in ax.texts)
    memory_axis = fig.axes[1]
    (diamonds,) = [line for line in memory_axis.lines if line.get_marker() == "D"]
    assert list(diamonds.get_ydata()) == pytest.approx([40 * GIB / 1e9] * 3 + [95.0])
    assert any(line.get_ydata()[0] == pytest.approx(80 * GIB / 1e9) for line in memory_axis.lines
               if line.get_linestyle() == "--")


def test_layouts_figure_needs_two_layouts_at_one_gpu_count():
    one = layout_sweep([hybrid_row(8, 8, 24, iteration=10.0, compute=8.0)])
    assert plot_layouts(one) is None and not layout_tables(one)


def test_a_sweep_over_nodes_scales_iteration_time_and_mfu():
    rows = [hybrid_row(8, 4, dp, iteration=t, compute=0.8 * t, **{"topology.nodes": 4 * dp})
            for dp, t in ((2, 2.0), (4, 1.1), (8, 0.6))]
    result = RunResult(scenario={"name": "scale", "sweep": {"topology.nodes": [8, 16, 32]}}, rows=rows)
    fig = plot_scaling(result)
    ax_t, ax_e = fig.axes
    assert list(ax_t.lines[0].get_xdata()) == [64, 128, 256]
    assert ax_e.get_ylabel() == "MFU (%)"
    assert list(ax_e.lines[0].get_ydata()) == pytest.approx([r["mfu"] * 100 for r in rows])
    labels = [t.get_text() for t in plot_parallel_breakdown(result).axes[0].get_xticklabels()]
    assert labels == ["tp 8, pp 4, dp 2, nodes=8", "tp 8, pp 4, dp 4, nodes=16", "tp 8, pp 4, dp 8, nodes=32"]


# ----------------------------------------------------------------------------- findings


def test_findings_pick_the_fastest_layout_that_fits_and_name_what_does_not(sweep):
    findings = hybrid_findings(sweep)
    assert findings[0].startswith("**Fastest layout on 64 GPUs: tp 2, pp 1, dp 32**")
    assert "1.33x faster than the next that fits, tp 1, pp 4, dp 16" in findings[0]
    misfit = next(f for f in findings if "do not fit" in f)
    assert "**1 of 4 layouts on 64 GPUs do not fit** the 80 GiB of a GPU's memory" in misfit
    assert "tp 1, pp 1, dp 64 (95 GB)" in misfit and "would be faster than tp 2, pp 1, dp 32" in misfit


def test_findings_name_tensor_parallel_communication_when_it_dominates(sweep):
    dominant = hybrid_findings(sweep)[1]
    assert dominant.startswith("**Tensor-parallel communication is 12.5 % of the iteration of tp 2, pp 1, dp 32**")
    assert "tp 1" in dominant and "`sequence_parallel: true`" in dominant and "NVLink" in dominant
    lose = hybrid_findings(sweep)[2]
    assert "tensor-parallel communication: up to 650 ms more (tp 8, pp 1, dp 8)" in lose
    assert "the pipeline bubble: up to 500 ms more (tp 1, pp 4, dp 16)" in lose


def test_findings_name_the_bubble_with_the_1f1b_fraction_and_the_remedies():
    result = layout_sweep([hybrid_row(1, 4, 16, iteration=1.0, compute=0.8, bubble=0.15, micro_batches=16)])
    dominant = hybrid_findings(result)[1]
    assert dominant.startswith("**The pipeline bubble is 15.0 % of the iteration of tp 1, pp 4, dp 16**")
    assert "(p - 1) / (m + p - 1) = 15.8 %" in dominant  # 3 / 19
    assert "`batch.global`" in dominant and "`schedule: interleaved`" in dominant
    interleaved = layout_sweep([hybrid_row(1, 4, 16, iteration=1.0, compute=0.8, bubble=0.15, schedule_name="interleaved")],
                               {"chunks": 2})
    assert "`chunks: 3`" in hybrid_findings(interleaved)[1]


def test_findings_name_exposed_data_parallel_sync_and_overlap():
    row = hybrid_row(1, 1, 64, iteration=1.0, compute=0.9, exposed=0.1, zero=0)
    text = hybrid_findings(layout_sweep([copy.deepcopy(row)], {"overlap": {"dp": False}}))[1]
    assert text.startswith("**Exposed data-parallel sync is 10.0 % of the iteration")
    assert "`overlap: {dp: true}`" in text and "`bucket_cap`, now 25 MiB" in text
    overlapped = hybrid_findings(layout_sweep([copy.deepcopy(row)]))[1]
    assert "overlap" not in overlapped and "larger buckets" in overlapped


def test_findings_name_a_nearly_as_fast_layout_with_much_less_memory():
    result = layout_sweep([
        hybrid_row(8, 2, 16, iteration=29.6, compute=24.0, memory=81 * 10**9, **{"workload.zero": 0}),
        hybrid_row(8, 2, 16, iteration=29.8, compute=24.0, memory=32 * 10**9, **{"workload.zero": 1}),
        hybrid_row(8, 4, 8, iteration=30.5, compute=24.0, memory=20 * 10**9, **{"workload.zero": 1}),
    ])
    result.scenario["sweep"]["workload.zero"] = [0, 1]
    lean = next(f for f in hybrid_findings(result) if "headroom" in f)
    assert lean.startswith("**tp 8, pp 2, dp 16, zero=1 is within 0.7 % of it with 32 GB per GPU instead of 81 GB:**")


def test_findings_say_compute_dominates_when_nothing_else_matters():
    result = layout_sweep([hybrid_row(1, 1, 64, iteration=1.0, compute=0.99)])
    text = hybrid_findings(result)[1]
    assert text.startswith("**Compute is 99.0 % of the iteration of tp 1, pp 1, dp 64:**")
    assert "`compute.efficiency`" in text
    # A model known by its size alone has no FLOP count: its compute time was given, not derived.
    flat = layout_sweep([hybrid_row(1, 1, 64, iteration=1.0, compute=0.99, tflops_per_gpu=None, mfu=None)])
    assert "efficiency" not in hybrid_findings(flat)[1]


def test_which_layout_table_is_sorted_and_marks_what_does_not_fit(sweep):
    ((title, headers, rows),) = layout_tables(sweep)
    assert title == "64 GPUs"
    assert headers == ["layout", "iteration", "vs best", "TFLOP/s per GPU", "MFU", "memory per GPU", "fits"]
    assert [r[0] for r in rows] == ["tp 2, pp 1, dp 32", "tp 1, pp 4, dp 16", "tp 8, pp 1, dp 8",
                                    "tp 1, pp 1, dp 64 (does not fit)"]
    assert [r[2] for r in rows] == ["1.00x", "1.33x", "1.67x", "0.83x"]
    assert [r[-1] for r in rows] == ["yes", "yes", "yes", "**NO**"]


# ----------------------------------------------------------------------------- pipeline timeline


def small_pipeline(**workload: Any) -> dict[str, Any]:
    """Two nodes of 8 H100s: tp 2, pp 4, dp 2, 8 micro-batches per replica, spans on."""
    return {
        "name": "pipeline", "topology": {"preset": "dgx-h100", "nodes": 2}, "payload": "size", "fidelity": "collective",
        "trace": {"messages": False, "spans": True},
        "workload": {"kind": "training", "model": {"layers": 8, "hidden": 1024, "heads": 16, "seq": 1024, "vocab": 32000},
                     "parallel": {"tp": 2, "pp": 4}, "batch": {"global": 16, "micro": 1},
                     "compute": {"efficiency": 0.5}, **workload},
    }


@pytest.fixture(scope="module")
def pipeline_run() -> RunResult:
    return run_scenario(load_dict(small_pipeline()))


def test_pipeline_lanes_are_one_rank_per_stage_running_its_schedule(pipeline_run):
    world = pipeline_run.records[0]
    lanes = pipeline_lanes(pipeline_run, world)
    assert [rank for rank, _ in lanes] == [0, 2, 4, 6]  # tp innermost: stage s is rank 2 s
    for stage, (_rank, passes) in enumerate(lanes):
        assert [p.name for p in passes] == [f"{op.kind}{op.micro}" for op in schedule("1f1b", stage, 4, 8)]
        assert all(a.t_end <= b.t_start + 1e-15 for a, b in pairwise(passes))
    # A stage's forward of micro-batch 0 starts after the previous stage's ends: the pipeline fills.
    f0 = [next(p for p in passes if p.name == "F0") for _, passes in lanes]
    assert all(later.t_start >= earlier.t_end for earlier, later in pairwise(f0))


def test_pipeline_lanes_follow_the_layout_order():
    result = run_scenario(load_dict(small_pipeline(parallel={"tp": 2, "pp": 4, "order": ["tp", "dp", "pp"]})))
    assert stage_ranks(result, result.records[0]) == [0, 4, 8, 12]
    assert len(pipeline_lanes(result, result.records[0])) == 4


def test_pipeline_figure_draws_a_lane_per_stage_and_a_box_per_pass(pipeline_run):
    world = pipeline_run.records[0]
    fig = plot_pipeline(pipeline_run, world)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"stage {s} (rank {2 * s})" for s in range(4)]
    boxes = sum(len(c.get_paths()) for c in ax.collections if isinstance(c, PolyCollection))
    assert boxes == 4 * 2 * 8  # stages x (forward, backward) x micro-batches
    idle = [t.get_text() for t in ax.texts if t.get_text().startswith("idle")]
    assert len(idle) == 4
    # The first stage waits for the whole pipeline before its first backward: it idles more than the last.
    first, last = (float(text.split()[1]) for text in (idle[0], idle[-1]))
    assert first > last


def test_no_pipeline_without_spans_or_stages(tmp_path):
    no_spans = run_scenario(load_dict({**small_pipeline(), "trace": {"messages": False, "spans": False}}))
    assert plot_pipeline(no_spans, no_spans.records[0]) is None and pipeline_worlds(no_spans) == []
    out = tmp_path / "no-spans"
    write_outputs(no_spans, out)
    assert "No pipeline timeline: the run recorded no spans" in (out / "report.md").read_text()
    one_stage = run_scenario(load_dict(small_pipeline(parallel={"tp": 2, "pp": 1})))
    assert plot_pipeline(one_stage, one_stage.records[0]) is None


def test_a_layout_sweep_renders_every_hybrid_figure_and_the_table(tmp_path):
    raw = small_pipeline(memory_check="mark")
    raw["sweep"] = {"workload.parallel.pp": [1, 2, 4]}
    raw["report"] = {"plots": ["breakdown", "layouts", "pipeline"]}  # timelines and links are tested elsewhere
    result = run_scenario(load_dict(raw))
    out = tmp_path / "sweep"
    write_outputs(result, out)
    figures = sorted(p.name for p in (out / "figures").iterdir())
    assert figures == ["breakdown-by-dimension.png", "layouts.png", "pipeline-training-16-gpus-tp-2-pp-2-dp-4-2.png",
                       "pipeline-training-16-gpus-tp-2-pp-4-dp-2-4.png"]  # pp 1 has no pipeline
    report = (out / "report.md").read_text()
    assert "## Which layout" in report and "![Pipeline: " in report
    assert "**Fastest layout on 16 GPUs: " in report
    # A slim result keeps the pipelines' spans, so it draws the same pipelines.
    assert pipeline_worlds(slim(load_result(out))) == pipeline_worlds(result) == [1, 2]


def test_report_plots_selects_the_pipeline_alone(tmp_path):
    raw = {**small_pipeline(), "report": {"plots": ["pipeline"]}}
    out = tmp_path / "one"
    write_outputs(run_scenario(load_dict(raw)), out)
    assert [p.name for p in (out / "figures").iterdir()] == ["pipeline-training-16-gpus-tp-2-pp-4-dp-2.png"]


def test_world_records_without_a_row_have_no_lanes():
    world = WorldRecords(label="training 4 GPUs (tp 1, pp 2, dp 2)", point={"x": 1})
    assert pipeline_lanes(RunResult(scenario={}, rows=[]), world) == []
