"""A transformer layer's kernel list: FLOPs against the model's closed forms, and physical properties."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpisim.errors import ConfigError
from mpisim.workloads.compute import LayerShape, device, estimate_step, job_times, layer_time
from mpisim.workloads.compute.kernels import causal_fraction

try:  # the training package (restructure), or the module it replaces
    from mpisim.workloads.training.model import PRESETS
except ImportError:
    from mpisim.workloads.llm.model import PRESETS

H100, A100 = device("h100-sxm"), device("a100-sxm4-80gb")


def gemm_flops(lt, kernels):
    return sum(k.flops for k in kernels if k.kind == "gemm")


@pytest.mark.parametrize("preset", ["gpt3-175b", "llama3-8b", "llama3-70b", "megatron-18.4b"])
@pytest.mark.parametrize("tp", [1, 2, 8])
def test_forward_gemm_flops_are_the_models_projection_flops(preset, tp):
    """The QKV, output and MLP GEMMs of all tp GPUs add up to model.py's projection and MLP FLOPs."""
    model = PRESETS[preset]
    shape = LayerShape.from_model(model, 2, tp=tp)
    lt = layer_time(shape, H100)
    attention = model.attention_core_flops(2)
    assert gemm_flops(lt, lt.forward) * tp == pytest.approx(model.layer_forward_flops(2) - attention, rel=1e-12)
    # the backward's data and weight gradients are twice the forward's GEMMs
    assert gemm_flops(lt, lt.backward) == pytest.approx(2 * gemm_flops(lt, lt.forward), rel=1e-12)


def test_flash_attention_flops_are_causal_half_and_backward_two_and_a_half():
    shape = LayerShape(hidden=4096, heads=32, seq=8192, micro_batch=1)
    lt = layer_time(shape, H100)
    fwd = next(k for k in lt.forward if k.kind == "attention")
    bwd = next(k for k in lt.backward if k.kind == "attention")
    assert fwd.flops == pytest.approx(4 * 8192**2 * 4096 * causal_fraction(8192), rel=1e-12)
    assert bwd.flops == pytest.approx(2.5 * fwd.flops, rel=1e-12)
    # context parallelism: each of cp GPUs does 1/cp of the causal work
    cp = layer_time(replace(shape, cp=4), H100)
    assert next(k for k in cp.forward if k.kind == "attention").flops == pytest.approx(fwd.flops / 4, rel=1e-12)


def test_allgather_context_parallelism_calls_attention_over_the_whole_gathered_sequence():
    """Same causal work as the ring, but one kernel call over all s keys instead of cp calls over s/cp:
    each query block's fixed cost spread over s keys (flash_attention's s / (s + s0) at s, not s/cp)."""
    from mpisim.workloads.compute.devices import ATTENTION_S0
    shape = LayerShape(hidden=16384, heads=128, kv_heads=8, seq=131072, micro_batch=1, tp=8, cp=16)
    ring = layer_time(shape, H100)
    gathered = layer_time(replace(shape, cp_comm="allgather"), H100)
    for pass_ in ("forward", "backward"):
        r = next(k for k in getattr(ring, pass_) if k.kind == "attention")
        g = next(k for k in getattr(gathered, pass_) if k.kind == "attention")
        assert g.flops == pytest.approx(r.flops, rel=1e-12)
        s, c = 131072, 131072 // 16
        assert r.seconds / g.seconds == pytest.approx((s / (s + ATTENTION_S0)) / (c / (c + ATTENTION_S0)), rel=1e-9)
    # without context parallelism the two are one and the same kernel
    one = replace(shape, cp=1)
    assert layer_time(replace(one, cp_comm="allgather"), H100).total_s == layer_time(one, H100).total_s
    with pytest.raises(ConfigError, match="cp_comm"):
        LayerShape(hidden=1024, heads=8, seq=1024, cp_comm="tree")


def test_flash2_names_flashattention2_whatever_the_device():
    """attention: flash2 runs FlashAttention-2's fractions of the peak: on Hopper its 35 % (slower than
    the device's FlashAttention-3, same FLOPs and GEMMs), on Ampere the device's own kernel unchanged."""
    from mpisim.workloads.compute.kernels import flash_attention
    from mpisim.workloads.compute.software import FA2_HOPPER
    shape = LayerShape(hidden=16384, heads=128, kv_heads=8, seq=8192, micro_batch=1, tp=8)
    fa3, fa2 = layer_time(shape, H100), layer_time(replace(shape, attention="flash2"), H100)
    for pass_ in ("forward", "backward"):
        k3 = next(k for k in getattr(fa3, pass_) if k.kind == "attention")
        k2 = next(k for k in getattr(fa2, pass_) if k.kind == "attention")
        assert k2.flops == k3.flops
        expect = flash_attention(16, 8192, 8192, 128, H100, share=causal_fraction(8192), backward=pass_ == "backward",
                                 fractions=FA2_HOPPER)
        assert k2.seconds == pytest.approx(expect.seconds, rel=1e-12)
        assert k2.seconds > k3.seconds
    assert fa2.breakdown()["gemm"] == fa3.breakdown()["gemm"]
    assert layer_time(replace(shape, attention="flash2"), A100).total_s == layer_time(shape, A100).total_s


def test_recompute_full_reruns_the_forward_and_selective_nothing_with_flash():
    shape = LayerShape(hidden=8192, heads=64, seq=4096, micro_batch=1, tp=8)
    none, selective, full = (layer_time(replace(shape, recompute=r), H100) for r in ("none", "selective", "full"))
    assert full.recompute_s == pytest.approx(none.forward_s, rel=1e-12)
    assert selective.recompute_s == 0.0
    unfused = layer_time(replace(shape, attention="unfused", recompute="selective"), A100)
    assert 0 < unfused.recompute_s < unfused.forward_s


def test_fp8_runs_the_projections_faster_and_pays_casts():
    shape = LayerShape(hidden=8192, heads=64, seq=8192, micro_batch=1, tp=4, ffn=28672, gated_mlp=True, kv_heads=8)
    bf16, fp8 = layer_time(shape, H100), layer_time(replace(shape, fp8=True), H100)
    assert fp8.total_s < bf16.total_s
    assert fp8.breakdown()["memory"] > bf16.breakdown()["memory"]  # the casts
    assert sum(1 for k in fp8.forward if "amax" in k.name) == 4  # one per projection
    with pytest.raises(ConfigError, match="no FP8"):
        layer_time(replace(shape, fp8=True), A100)


def test_bad_layouts_are_refused():
    with pytest.raises(ConfigError, match="recompute"):
        LayerShape(hidden=1024, heads=8, seq=1024, recompute="some")
    with pytest.raises(ConfigError, match="flash"):
        layer_time(LayerShape(hidden=1024, heads=8, seq=1024, cp=2, attention="unfused"), A100)


def test_micro_batch_2_is_less_efficient_than_8():
    """Per sequence, a micro-batch of 8 never runs slower than 2 (fuller waves, more work per launch), and
    runs faster where the GEMMs are below the device's best measured rate (a small model's); once every
    GEMM of both sits at that ceiling (Llama 3 8B's 8,192-token sequences) neither can gain."""
    for preset in ("llama3-8b", "megatron-1.7b", "gpt3-175b"):
        model = PRESETS[preset]
        for dev in (A100, H100):
            two = layer_time(LayerShape.from_model(model, 2, tp=8 if preset == "gpt3-175b" else 1), dev).total_s
            eight = layer_time(LayerShape.from_model(model, 8, tp=8 if preset == "gpt3-175b" else 1), dev).total_s
            assert eight / 8 <= two / 2 * (1 + 1e-12)
            if preset == "megatron-1.7b":
                assert eight / 8 < two / 2


shapes = st.builds(
    LayerShape,
    hidden=st.sampled_from([1024, 2048, 2304, 4096, 5120, 8192]),
    heads=st.sampled_from([8, 16, 32]),
    seq=st.sampled_from([512, 1024, 2048, 4096, 8192]),
    micro_batch=st.integers(1, 8),
    tp=st.sampled_from([1, 2, 4, 8]),
    gated_mlp=st.booleans(),
    recompute=st.sampled_from(["none", "selective", "full"]),
    attention=st.sampled_from(["flash", "unfused"]),
    dropout=st.booleans(),
    framework=st.sampled_from(["", "megatron", "megatron-2021", "megatron-deepspeed", "torchtitan", "llm-foundry"]),
)


@settings(max_examples=150, deadline=None)
@given(shape=shapes, field=st.sampled_from(["hidden", "seq", "micro_batch", "ffn"]), factor=st.integers(2, 3))
def test_layer_time_never_falls_when_a_dimension_grows(shape, field, factor):
    base = shape.mlp_width if field == "ffn" else getattr(shape, field)
    bigger = replace(shape, **{field: base * factor})
    for dev in (A100, H100):
        assert layer_time(bigger, dev).total_s >= layer_time(shape, dev).total_s


@settings(max_examples=100, deadline=None)
@given(shape=shapes, pair=st.sampled_from([("a100-sxm4-80gb", "h100-sxm"), ("h100-sxm", "h200-sxm"),
                                           ("h100-sxm", "b200"), ("b200", "gb200")]))
def test_a_faster_device_never_takes_longer_for_a_layer(shape, pair):
    slow, fast = (device(p) for p in pair)
    assert layer_time(shape, fast).total_s <= layer_time(shape, slow).total_s


def test_the_step_adds_micro_batches_bubble_and_optimizer():
    model = PRESETS["llama3-70b"]
    one = estimate_step(model, H100, micro_batch=1, micro_batches=1, tp=8, pp=4)
    many = estimate_step(model, H100, micro_batch=1, micro_batches=16, tp=8, pp=4, chunks=2)
    assert one.bubble_s == pytest.approx(3 * one.stage_s, rel=1e-12)
    assert many.step_s == pytest.approx(16 * many.stage_s + 1.5 * many.stage_s + many.optimizer_s, rel=1e-12)
    assert many.layers_per_stage == 20


def test_job_times_are_what_the_engine_charges():
    """The engine's per-layer times: the backward includes recomputation; FP8 is Transformer Engine's."""
    model = PRESETS["llama3-70b"]
    times = job_times(model, H100, micro_batch=1, dtype="bfloat16", tp=8, recompute="full")
    assert times.backward_layer_s == pytest.approx(times.layer.backward_s + times.forward_layer_s, rel=1e-12)
    assert times.logits_backward_s > times.logits_forward_s > 0
    fp8 = job_times(model, H100, micro_batch=1, dtype="float8_e4m3", tp=8)
    assert fp8.layer.forward[1].name.endswith("FP8 cast of input")
    assert fp8.first_micro_batch_layer_s > 0 == times.first_micro_batch_layer_s
    assert fp8.forward_layer_s < times.forward_layer_s


def test_module_examples_run():
    import doctest

    import mpisim.workloads.compute as package
    from mpisim.workloads.compute import devices, gemm

    for module in (package, devices, gemm):
        assert doctest.testmod(module).failed == 0


def test_standard_attention_is_the_unfused_kernels():
    shape = LayerShape(hidden=2304, heads=24, seq=2048, micro_batch=4, attention="standard")
    assert shape.attention == "unfused"
    assert any(k.name == "softmax" for k in layer_time(shape, A100).forward)


def _with_slower_hbm(dev, factor):
    """*dev* with HBM *factor* times slower and the same tensor cores.

    The GEMM model calibrates its tensor rate on the device's measured best matmul, so a copy with
    another bandwidth would recalibrate and could gain tensor throughput; a slower memory on the
    same silicon keeps the rate: it is copied over.
    """
    from mpisim.workloads.compute.gemm import achievable_rate

    slow = replace(dev, hbm_bandwidth=dev.hbm_bandwidth / factor)
    for dtype in dev.peaks:
        if dtype in ("bf16", "fp16", "fp8", "tf32"):
            slow._cache[("rate", dtype)] = achievable_rate(dev, dtype)
    return slow


@settings(max_examples=120, deadline=None)
@given(shape=shapes, factor=st.sampled_from([1.25, 2.0, 4.0]), name=st.sampled_from(["a100-sxm4-80gb", "h100-sxm"]))
def test_slower_hbm_never_makes_a_layer_faster(shape, factor, name):
    """Every kernel is bound by its FLOPs or its bytes (or the launches): less bandwidth can only add time."""
    dev = device(name)
    slow = _with_slower_hbm(dev, factor)
    fast_t, slow_t = layer_time(shape, dev), layer_time(shape, slow)
    assert slow_t.forward_s >= fast_t.forward_s * (1 - 1e-12)
    assert slow_t.total_s >= fast_t.total_s * (1 - 1e-12)


@settings(max_examples=60, deadline=None)
@given(preset=st.sampled_from(["llama3-8b", "gpt3-175b", "megatron-18.4b"]), micro=st.integers(1, 4),
       zero=st.sampled_from([1, 8]), factor=st.sampled_from([1.5, 3.0]))
def test_slower_hbm_never_makes_a_step_faster(preset, micro, zero, factor):
    """The whole step, output layer and optimizer included (the optimizer is pure HBM traffic)."""
    model = PRESETS[preset]
    slow = _with_slower_hbm(H100, factor)
    kw = {"micro_batch": micro, "micro_batches": 4, "zero_shards": zero, "tp": 8}
    fast_step, slow_step = estimate_step(model, H100, **kw), estimate_step(model, slow, **kw)
    assert slow_step.step_s >= fast_step.step_s * (1 - 1e-12)
    assert slow_step.optimizer_s > fast_step.optimizer_s  # bytes over bandwidth: strictly more


def test_moe_tokens_are_permuted_to_their_experts_and_back():
    """Each routed row read and written once each way: (T + T top_k) h BF16 elements, T the tokens the
    GPU routes (its sequence-parallel slice); the backward's passes move 1.5 x; dense layers have none."""
    moe = LayerShape(hidden=4096, heads=32, seq=4096, micro_batch=1, ffn=14336, gated_mlp=True, experts=8, top_k=2,
                     ep=8, tp=2)
    lt = layer_time(moe, device("h100-sxm"))
    T = 4096 // 2
    for name in ("token permutation", "token unpermutation"):
        assert kernel_named(lt.forward, name).bytes == 2 * (T + 2 * T) * 4096
        assert kernel_named(lt.backward, f"{name} backward").bytes == 1.5 * 2 * (T + 2 * T) * 4096
    top1 = layer_time(LayerShape(**{**moe.__dict__, "top_k": 1}), device("h100-sxm"))
    assert kernel_named(top1.forward, "token permutation").bytes < kernel_named(lt.forward, "token permutation").bytes
    dense = layer_time(LayerShape(hidden=4096, heads=32, seq=4096), device("h100-sxm"))
    assert not any("permutation" in k.name for k in dense.forward + dense.backward)


def kernel_named(kernels, name):
    return next(k for k in kernels if k.name == name)
