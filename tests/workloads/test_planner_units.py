"""Answers in a planner's units: list prices, a scenario's price, whole clusters compared, and
whether Llama 3 405B's published layouts fit an 80 GB H100 (Korthikanti et al.'s counts)."""

from __future__ import annotations

import pytest
from matplotlib.patches import Rectangle

from mpisim.network.presets import resolve_topology
from mpisim.report.clusters import cluster_rows, cluster_table
from mpisim.report.markdown import markdown_report
from mpisim.report.plots.clusters import plot_clusters
from mpisim.report.records import RunResult
from mpisim.scenario import load_dict
from mpisim.scenario.run import run_point
from mpisim.workloads.compute import device
from mpisim.workloads.training.config import HybridParams
from mpisim.workloads.training.memory import layer_activation_bytes
from mpisim.workloads.training.model import PRESETS
from mpisim.workloads.training.plan import plan_job
from mpisim.workloads.training.planner import LIST_PRICE_PER_GPU_HOUR, planner_units

SMALL = {"layers": 8, "hidden": 1024, "heads": 16, "seq": 1024, "vocab": 32000}


def _row(preset, **top):
    raw = {"topology": {"preset": preset, "nodes": 1}, "payload": "size", "network": {"model": "analytic"},
           "workload": {"kind": "training", "model": SMALL, "parallel": {"tp": 8}, "tokens": "1T"}, **top}
    return run_point(load_dict(raw)).rows[0]


def test_without_a_price_a_gpu_with_a_list_price_is_costed_at_it_and_says_so():
    for preset, gpu in (("dgx-a100", "a100-sxm4-80gb"), ("dgx-h100", "h100-sxm")):
        out = _row(preset)
        assert out["price_per_gpu_hour"] == LIST_PRICE_PER_GPU_HOUR[gpu]
        assert out["cost"] == pytest.approx(out["gpu_hours"] * LIST_PRICE_PER_GPU_HOUR[gpu], rel=1e-12)
    quoted = _row("dgx-h100", price={"per_gpu_hour": 2.0})
    assert quoted["price_per_gpu_hour"] == 2.0 and quoted["cost"] == pytest.approx(2.0 * quoted["gpu_hours"])


def test_planner_units_scale_with_tokens_and_a_gpu_without_list_price_has_no_cost():
    h100, b200 = device("h100-sxm"), device("b200")
    one = planner_units(1e12, 1e6, 64, h100)
    two = planner_units(2e12, 1e6, 64, h100)
    for key in ("time_to_train_s", "gpu_hours", "energy_kwh", "cost"):
        assert two[key] == pytest.approx(2 * one[key], rel=1e-12)
    assert one["time_to_train_s"] == 1e6 and one["gpu_hours"] == pytest.approx(64 * 1e6 / 3600)
    faster = planner_units(1e12, 2e6, 64, h100)
    assert faster["cost"] == pytest.approx(one["cost"] / 2)  # the same GPU-seconds bought, at twice the rate
    assert "cost" not in planner_units(1e12, 1e6, 64, b200) and "energy_kwh" in planner_units(1e12, 1e6, 64, b200)
    assert planner_units(None, 1e6, 64, h100) == {}


def _cluster(preset, nodes, iteration, days, cost, mfu, fits=True):
    return {"topology.preset": preset, "topology.nodes": nodes, "ranks": 8 * nodes, "tp": 8, "pp": 1,
            "dp": nodes, "ep": 1, "micro_batches": 4, "schedule": "1f1b", "zero": 1, "iteration_time_s": iteration,
            "tokens_per_s": 1e6 / iteration, "tflops_per_gpu": 300.0, "mfu": mfu, "compute_s": iteration,
            "bubble_s": 0.0, "tp_comm_s": 0.0, "pp_comm_s": 0.0, "ep_comm_s": 0.0, "dp_comm_s": 0.0,
            "exposed_comm_s": 0.0, "memory_per_gpu_bytes": 10**10, "fits": fits, "params": 8 * 10**9,
            "simulated_ranks": nodes, "time_to_train_s": days * 86400.0, "gpu_hours": 1000.0, "cost": cost}


def _clusters() -> RunResult:
    rows = [_cluster("dgx-a100", 4, 5.0, 112.0, 215000.0, 0.6), _cluster("dgx-h100", 4, 2.2, 48.0, 455000.0, 0.44),
            _cluster("dgx-h100", 8, 1.1, 24.0, 466000.0, 0.43, fits=False),
            _cluster("dgx-a100", 8, 2.6, 57.0, 449000.0, 0.59)]
    scenario = {"name": "clusters", "topology": {"device_memory": 80 * 2**30},
                "sweep": {"topology.preset": ["dgx-a100", "dgx-h100"], "topology.nodes": [4, 8]}}
    return RunResult(scenario=scenario, rows=rows)


def test_the_cluster_table_puts_the_soonest_trained_first_and_what_does_not_fit_last():
    result = _clusters()
    assert [r["time_to_train_s"] / 86400 for r in cluster_rows(result)] == [48.0, 57.0, 112.0, 24.0]
    headers, rows = cluster_table(result)
    assert headers[:2] == ["cluster", "GPUs"] and {"time to train", "cost", "MFU", "iteration"} <= set(headers)
    assert rows[0][0] == "dgx-h100, nodes=4" and rows[-1][-1] == "**NO**"
    assert rows[0][headers.index("time to train")] == "48.0 days"
    text = markdown_report(result, [], [], [])
    assert "## Which cluster" in text and "| dgx-h100, nodes=4 | 32 |" in text


def test_the_cluster_figure_draws_iteration_time_to_train_cost_and_mfu_in_the_tables_order():
    fig = plot_clusters(_clusters())
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["time per iteration", "time to train", "cost", "MFU"]
    heights = [[p.get_height() for p in ax.patches if isinstance(p, Rectangle)] for ax in fig.axes]
    assert heights[1] == pytest.approx([48.0, 57.0, 112.0, 24.0])
    assert heights[3] == pytest.approx([44.0, 59.0, 60.0, 43.0])
    assert plot_clusters(RunResult(scenario={"sweep": {"workload.zero": [0, 1]}}, rows=_clusters().rows)) is None


# --------------------------------------------------------------------------- Llama 3 405B's memory


def _llama_405b(chunks, zero):
    spec, _ = resolve_topology({"preset": "dgx-h100", "nodes": 1024})
    params = HybridParams(model=PRESETS["llama3-405b"], tp=8, pp=16, global_batch=2048, micro=1, zero=zero,
                          schedule="interleaved", chunks=chunks, recompute="selective", sequence_parallel=True)
    return spec, plan_job(params, 8192, spec)


def test_llama3_405b_with_metas_one_layer_chunks_fits_80_gb_and_two_chunks_do_not():
    """Korthikanti et al.: an interleaved stage holds ``L/P (1 + (P - 1) / (P v))`` x P layer passes on
    stage 0 (2 (P - 1) + (v - 1) P + 1 chunk passes); Meta's schedule has one layer per chunk (v = 8),
    the first chunk only the embedding, and shards gradients and optimizer states (FSDP, zero 2)."""
    spec, job = _llama_405b(chunks=8, zero=2)
    assert job.chunk_layers[0] == job.chunk_layers[-1] == 0 and set(job.chunk_layers[1:-1]) == {1}
    per_layer = layer_activation_bytes(PRESETS["llama3-405b"], 1, 8, "selective", True, True)
    p, v = 16, 8
    stage1 = 2 * (p - 2) + (v - 1) * p + 1  # Megatron's warm-up on stage 1, one layer per chunk pass
    assert job.memory[1].activations == pytest.approx(stage1 * per_layer, rel=1e-12)
    assert job.memory[0].activations < job.memory[1].activations  # its first chunk holds no layer
    assert max(m.total for m in job.memory) <= spec.device_memory
    _, two = _llama_405b(chunks=2, zero=2)
    assert max(m.total for m in two.memory) > spec.device_memory  # 1 + 15/32 x 126 layers do not fit


def test_fp8_with_one_efficiency_speeds_the_gemms_only_and_counts_mfu_against_bf16():
    """Transformer Engine: FP8 GEMMs, BF16 attention core and logits; MFU over the 16-bit peak (NeMo's)."""
    spec, _ = resolve_topology({"preset": "dgx-h100", "nodes": 1})
    model = PRESETS["llama3-8b"]
    jobs = {d: plan_job(HybridParams(model=model, tp=8, global_batch=1, dtype=d, efficiency=0.5,
                                     sequence_parallel=True), 8, spec) for d in ("bfloat16", "float8_e4m3fn")}
    bf16, fp8 = spec.peak_flops("bf16"), spec.peak_flops("fp8")
    gemms = (model.layer_forward_flops(1) - model.attention_core_flops(1)) / 8
    saved = gemms / (0.5 * bf16) - gemms / (0.5 * fp8)
    assert jobs["bfloat16"].forward_layer_s - jobs["float8_e4m3fn"].forward_layer_s == pytest.approx(saved, rel=1e-9)
    assert jobs["float8_e4m3fn"].timing.attention_forward_s == jobs["bfloat16"].timing.attention_forward_s
    assert jobs["float8_e4m3fn"].logits_forward_s == jobs["bfloat16"].logits_forward_s
    assert jobs["float8_e4m3fn"].peak == jobs["bfloat16"].peak == bf16


def test_the_cluster_finding_names_the_soonest_and_the_cheapest_that_fit():
    from mpisim.report.clusters import cluster_findings

    (line,) = cluster_findings(_clusters())
    assert line.startswith("**Soonest trained: dgx-h100, nodes=4** (48.0 days on 32 GPUs, cost 455,000)")
    assert "**cheapest: dgx-a100, nodes=4** (112.0 days on 32 GPUs, cost 215,000: 53% less, 2.33x the time)" in line
    assert cluster_findings(RunResult(scenario={}, rows=_clusters().rows)) == []


def test_every_part_of_the_breakdown_has_a_name_and_advice_in_the_findings():
    from mpisim.report.findings import COST_NAMES, hybrid_findings
    from mpisim.report.hybrid import COSTS

    assert {key for key, _ in COSTS} - {"compute"} <= set(COST_NAMES)
    row = {**_cluster("dgx-h100", 4, 2.0, 48.0, 1.0, 0.4), "compute_s": 1.0, "exposed_comm_s": 1.0,
           "cp": 4, "cp_comm_s": 0.9}
    text = " ".join(hybrid_findings(RunResult(scenario={"name": "cp"}, rows=[row])))
    assert "Context-parallel K/V exchange is 45.0 % of the iteration" in text and "ring step" in text
