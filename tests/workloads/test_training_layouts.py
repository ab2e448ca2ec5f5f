"""Training layouts real runs use, and the default compute model: closed forms and monotonicity.

Uneven pipeline stages (:mod:`mpisim.workloads.training.stages`), the activations a stage holds
under each schedule (Megatron-LM's warm-up count, Korthikanti et al.'s formula), the
shape-aware activation count (Table 2 for GPT's shape), and the GEMM-shape compute model as the
default when ``compute:`` is left out.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpisim.errors import ConfigError
from mpisim.network.presets import resolve_topology
from mpisim.scenario import load_dict
from mpisim.scenario.run import run_point
from mpisim.workloads.training.config import HybridParams
from mpisim.workloads.training.memory import (
    activation_bytes_per_layer,
    layer_activation_bytes,
    peak_in_flight,
)
from mpisim.workloads.training.model import PRESETS, TransformerModel
from mpisim.workloads.training.plan import plan_job
from mpisim.workloads.training.schedule import schedule
from mpisim.workloads.training.stages import split_layers

SMALL = {"layers": 8, "hidden": 1024, "heads": 16, "seq": 1024, "vocab": 32000}


def scenario(topology, **workload):
    return {"topology": topology, "payload": "size", "network": {"model": "analytic"},
            "workload": {"kind": "training", "model": SMALL, **workload}}


def row(raw):
    return run_point(load_dict(raw)).rows[0]


# --------------------------------------------------------------------------- stages


def test_llama3_and_bloom_split_as_published():
    llama = split_layers(126, 16)
    assert llama[0] == llama[-1] == 7 and set(llama[1:-1]) == {8}  # Llama 3, section 3.3.2
    assert split_layers(70, 12) == [5] + [6] * 10 + [5]
    one_per_chunk = split_layers(126, 16, 8)  # the first chunk holds the embedding only
    assert one_per_chunk[0] == one_per_chunk[-1] == 0 and set(one_per_chunk[1:-1]) == {1}


@given(st.integers(1, 400), st.integers(1, 32), st.integers(1, 8))
@settings(max_examples=200, deadline=None)
def test_a_balanced_split_keeps_every_layer_and_differs_by_at_most_one_in_the_middle(layers, pp, chunks):
    try:
        split = split_layers(layers, pp, chunks)
    except ConfigError:
        assert layers + 2 < pp * chunks
        return
    assert sum(split) == layers and len(split) == pp * chunks and min(split) >= 0
    middle = split[1:-1] or split
    assert max(middle) - min(middle) <= 1
    if layers % (pp * chunks) == 0:
        assert set(split) == {layers // (pp * chunks)}


def test_megatrons_first_and_last_stage_layers():
    assert split_layers(10, 4, first=1, last=1) == [1, 4, 4, 1]
    assert split_layers(12, 2, 2, first=4, last=8) == [2, 4, 2, 4]  # chunk k of stage s is k pp + s
    with pytest.raises(ConfigError, match="split evenly"):
        split_layers(11, 4, first=1, last=1)


# --------------------------------------------------------------------------- activations


@pytest.mark.parametrize(("pp", "chunks"), [(4, 2), (8, 2), (16, 4), (16, 8)])
def test_interleaved_in_flight_is_megatrons_warm_up_and_korthikantis_formula(pp, chunks):
    layers = pp * chunks * 2
    ops = schedule("interleaved", 0, pp, 4 * pp, chunks)
    passes = peak_in_flight(ops)
    assert passes == 2 * (pp - 1) + (chunks - 1) * pp + 1  # Megatron-LM: warm-up forwards, then one more
    held = peak_in_flight(ops, [layers // (pp * chunks)] * chunks)
    assert held == pytest.approx(layers * (1 + (pp - 1) / (pp * chunks)), abs=2)  # Korthikanti et al. Sec. 4.2.3


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("flash", [False, True])
def test_the_shape_aware_count_is_table_2_for_gpts_shape(recompute, sp, flash):
    gpt = PRESETS["gpt3-175b"]
    assert layer_activation_bytes(gpt, 2, 8, recompute, sp, flash) == pytest.approx(
        activation_bytes_per_layer(gpt, 2, 8, recompute, sp, flash), rel=1e-12)


def test_grouped_query_attention_and_no_dropout_keep_fewer_bytes_than_gpts_34():
    llama = PRESETS["llama3-405b"]
    sbh = llama.seq * llama.hidden
    # 4h norms + 2h + 2h GEMM inputs + Q 2h + K, V 4 h_kv + 2h + gated MLP 6f, over t = 8
    expected = llama.seq * (12 * llama.hidden + 4 * llama.kv_width + 6 * llama.mlp_width) / 8
    assert layer_activation_bytes(llama, 1, 8, "selective", True, True) == pytest.approx(expected)
    assert expected < 34 * sbh / 8


def test_llama3_405b_on_16_stages_fits_an_80_gb_h100():
    """Meta trained it at tp 8, pp 16 on 80 GB H100s (Llama Team 2024, Table 4)."""
    spec, _ = resolve_topology({"preset": "dgx-h100", "nodes": 1024})
    params = HybridParams(model=PRESETS["llama3-405b"], tp=8, pp=16, global_batch=2048, micro=1, zero=1,
                          recompute="selective", sequence_parallel=True)
    job = plan_job(params, 8192, spec)
    assert job.chunk_layers[0] == job.chunk_layers[-1] == 7
    assert max(m.total for m in job.memory) <= spec.device_memory


# --------------------------------------------------------------------------- the default compute model


def test_leaving_compute_out_uses_the_presets_gpu_and_says_so():
    out = row(scenario({"preset": "dgx-h100", "nodes": 1}, parallel={"tp": 8}))
    assert out["compute_model"] == "gemm-shape h100-sxm"
    assert out["optimizer_s"] > 0 and out["compute_split"].startswith("gemm")
    given = row(scenario({"preset": "dgx-h100", "nodes": 1}, parallel={"tp": 8}, compute={"efficiency": 0.5}))
    assert given["compute_model"] == "efficiency 0.5" and given["optimizer_s"] == 0


def test_an_inline_cluster_names_its_gpu_or_gives_an_efficiency():
    inline = {"nodes": 1, "ranks_per_node": 2, "device": "gpu",
              "intra": {"kind": "nvswitch", "bandwidth": "450 GB/s", "latency": "1 us"}}
    with pytest.raises(ConfigError, match="names no GPU"):
        row(scenario(inline))
    assert row(scenario({**inline, "gpu": "a100-sxm4-80gb"}))["compute_model"] == "gemm-shape a100-sxm4-80gb"
    with pytest.raises(ConfigError, match="unknown GPU"):
        row(scenario({**inline, "gpu": "z80"}))


def test_a_faster_gpu_is_never_slower_and_more_layers_never_faster():
    def iteration(preset, layers):
        model = {**SMALL, "layers": layers}
        return row({**scenario({"preset": preset, "nodes": 1}, parallel={"tp": 8}), "workload": {
            "kind": "training", "model": model, "parallel": {"tp": 8}, "batch": {"global": 4, "micro": 2}}}
        )["iteration_time_s"]

    times = {p: [iteration(p, n) for n in (4, 8, 12)] for p in ("dgx-a100", "dgx-h100", "dgx-b200")}
    for p in times:
        assert times[p] == sorted(times[p])
    for n in range(3):
        assert times["dgx-a100"][n] >= times["dgx-h100"][n] >= times["dgx-b200"][n]


def test_the_default_model_times_a_small_micro_batch_less_efficiently():
    """Issue 31: measured, MPT-13B at micro-batch 2 runs slower per token than at 8; one efficiency says equal."""
    spec, _ = resolve_topology({"preset": "dgx-a100", "nodes": 1})
    model = TransformerModel(layers=40, hidden=5120, heads=40, seq=2048, vocab=50368)
    per_token = {}
    for micro in (1, 8):
        job = plan_job(HybridParams(model=model, global_batch=8 * 8, micro=micro, zero=3), 8, spec)
        per_token[micro] = (job.forward_layer_s + job.backward_layer_s) / micro
    assert per_token[1] > per_token[8]


# --------------------------------------------------------------------------- planner units


def test_tokens_and_price_give_time_to_train_gpu_hours_cost_and_energy():
    raw = {**scenario({"preset": "dgx-h100", "nodes": 1}, parallel={"tp": 8}, tokens="1T"),
           "price": {"per_gpu_hour": 2.0}}
    out = row(raw)
    assert out["time_to_train_s"] == pytest.approx(1e12 / out["tokens_per_s"], rel=1e-12)
    assert out["gpu_hours"] == pytest.approx(8 * out["time_to_train_s"] / 3600, rel=1e-12)
    assert out["cost"] == pytest.approx(2.0 * out["gpu_hours"], rel=1e-12)
    # H100: 700 W TDP + 10.2 kW / 8 - 700 W of the node, at PUE 1.2
    assert out["energy_kwh"] == pytest.approx(out["gpu_hours"] * 10.2 / 8 * 1.2, rel=1e-12)
    plain = row(scenario({"preset": "dgx-h100", "nodes": 1}, parallel={"tp": 8}))
    assert not {"time_to_train_s", "gpu_hours", "cost", "energy_kwh"} & set(plain)


@pytest.mark.parametrize(("price", "message"), [({"per_gpu_hour": 0}, "greater than 0"), ({}, "required"),
                                                ({"per_gpu_hour": 1, "currency": "x"}, "currency")])
def test_a_bad_price_is_one_clear_error(price, message):
    with pytest.raises(ConfigError, match=message):
        load_dict({**scenario({"preset": "dgx-h100", "nodes": 1}, parallel={"tp": 8}), "price": price})


# --------------------------------------------------------------------------- tp-comm overlap


@pytest.mark.parametrize("fold", ["auto", "none"])
def test_tp_comm_overlap_hides_at_most_the_collectives_and_never_slows(fold):
    base = scenario({"preset": "dgx-h100", "nodes": 1}, parallel={"tp": 8}, batch={"global": 2, "micro": 2},
                    fold=fold)
    plain = row(base)
    overlapped = row({**base, "workload": {**base["workload"], "overlap": {"tp": True}}})
    assert overlapped["compute_s"] == pytest.approx(plain["compute_s"], rel=1e-12)
    assert overlapped["iteration_time_s"] < plain["iteration_time_s"]
    assert overlapped["iteration_time_s"] >= plain["iteration_time_s"] - plain["tp_comm_s"] - 1e-12
    assert overlapped["iteration_time_s"] >= overlapped["compute_s"]


def test_folded_and_simulated_tp_groups_agree_with_overlap():
    base = scenario({"preset": "dgx-h100", "nodes": 1}, parallel={"tp": 8}, batch={"global": 2, "micro": 2},
                    overlap={"tp": True})
    folded = row(base)
    every = row({**base, "workload": {**base["workload"], "fold": "none"}})
    assert folded["iteration_time_s"] == pytest.approx(every["iteration_time_s"], rel=0.01)


def test_flash2_on_hopper_is_slower_than_the_devices_flash_and_holds_the_same_memory():
    """attention: flash2 (FlashAttention-2's kernel) on an H100: the same FLOPs and activations as
    flash, only the attention slower; with context parallelism it is accepted as flash is."""
    def one(attention, **parallel):
        model = {**SMALL, "seq": 8192}
        return row({**scenario({"preset": "dgx-h100", "nodes": 2}), "workload": {
            "kind": "training", "model": model, "parallel": {"tp": 8, **parallel}, "batch": {"global": 2, "micro": 1},
            "attention": attention}})

    for parallel in ({}, {"cp": 2}, {"cp": 2, "cp_comm": "allgather"}):
        fa3, fa2 = one("flash", **parallel), one("flash2", **parallel)
        assert fa2["iteration_time_s"] > fa3["iteration_time_s"]
        assert fa2["memory_per_gpu_bytes"] == fa3["memory_per_gpu_bytes"]
        assert fa2["tflops_per_gpu"] < fa3["tflops_per_gpu"]
    with pytest.raises(ConfigError, match="attention"):
        one("flash4")
