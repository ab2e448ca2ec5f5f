"""The training framework's kernels: eager chains, per-op checkpointing, attention kernel generations."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpisim.errors import ConfigError
from mpisim.workloads.compute import LayerShape, device, job_times, layer_time
from mpisim.workloads.compute.devices import FA2_A100
from mpisim.workloads.compute.estimate import output_layer
from mpisim.workloads.compute.software import FA2_HOPPER, attention_fractions, software
from mpisim.workloads.training.model import PRESETS

H100, A100 = device("h100-sxm"), device("a100-sxm4-80gb")
LLAMA = LayerShape(hidden=4096, heads=32, kv_heads=8, ffn=14336, gated_mlp=True, seq=8192, micro_batch=1)


def kernel(lt, name):
    return next(k for k in lt.forward if k.name == name)


def test_unknown_framework_is_refused_naming_the_field():
    with pytest.raises(ConfigError, match="unknown framework 'pytorch'") as err:
        LayerShape(hidden=1024, heads=8, seq=1024, framework="pytorch")
    assert err.value.path == "framework"


def test_eager_rmsnorm_rotary_and_swiglu_move_their_counted_bytes():
    """torchtitan's reference RMSNorm: 36 bytes per element; complex rotary 20 per q/k element; SwiGLU 10."""
    T, h, kv, f = 8192, 4096, 1024, 14336
    fused = layer_time(LLAMA, A100)
    eager = layer_time(replace(LLAMA, framework="torchtitan"), A100)
    assert kernel(fused, "norm 1").bytes == 4 * T * h
    assert kernel(eager, "norm 1").bytes == 36 * T * h
    assert kernel(eager, "rotary embedding").bytes == 20 * T * (h + kv)
    assert kernel(eager, "SwiGLU").bytes == 10 * T * f
    assert kernel(eager, "repeat K, V").bytes == 4 * T * (kv + h)
    # llm-foundry's LayerNorm is one F.layer_norm kernel, as fused as Megatron's.
    mpt = LayerShape(hidden=4096, heads=32, seq=2048, micro_batch=6, rope=False)
    assert kernel(layer_time(replace(mpt, framework="llm-foundry"), A100), "norm 1").bytes == \
        kernel(layer_time(mpt, A100), "norm 1").bytes


def test_op_checkpointing_recomputes_every_second_matmul_and_the_elementwise_kernels():
    """Llama's block runs wq, wk, wv, wo, w1, w3, w2: the recomputation redoes wk, wo and w3, 2 T h (kv + h + f) FLOPs."""
    T, h, kv, f = 8192, 4096, 1024, 14336
    lt = layer_time(replace(LLAMA, framework="torchtitan", recompute="selective"), A100)
    assert sum(k.flops for k in lt.recompute) == 2 * T * h * (kv + h + f)
    assert {k.name for k in lt.recompute if k.kind == "memory"} == {k.name for k in lt.forward if k.kind == "memory"}
    assert not any(k.kind == "attention" for k in lt.recompute)
    full = layer_time(replace(LLAMA, framework="torchtitan", recompute="full"), A100)
    assert 0 < lt.recompute_s < full.recompute_s
    # Megatron's selective recomputation with flash attention has nothing to redo.
    assert layer_time(replace(LLAMA, recompute="selective"), A100).recompute_s == 0


def test_attention_kernel_generations():
    """FlashAttention-2 on Hopper at its 35 %, the Triton FlashAttention at half FlashAttention-2's rate."""
    assert attention_fractions(software("megatron"), H100) is None
    assert attention_fractions(software("torchtitan"), A100) is None  # A100's own kernel is FlashAttention-2
    assert attention_fractions(software("torchtitan"), H100) == FA2_HOPPER
    assert attention_fractions(software("llm-foundry"), A100) == (FA2_A100[0] / 2, FA2_A100[1] / 2)
    assert attention_fractions(software("llm-foundry"), H100) == (FA2_HOPPER[0] / 2, FA2_HOPPER[1] / 2)
    attention = {fw: kernel(layer_time(replace(LLAMA, framework=fw), H100), "attention").seconds
                 for fw in ("megatron", "torchtitan", "llm-foundry")}
    assert attention["megatron"] < attention["torchtitan"] < attention["llm-foundry"]
    assert attention["llm-foundry"] == pytest.approx(2 * attention["torchtitan"], rel=1e-12)


def test_fp32_loss_streams_40_bytes_per_logit():
    shape = replace(LLAMA, framework="torchtitan")
    fwd, bwd = output_layer(shape, 128256, A100)
    logits = 8192 * 128256
    assert fwd[1].bytes == 18 * logits and bwd[0].bytes == 22 * logits
    fused_fwd, _ = output_layer(LLAMA, 128256, A100)
    assert fused_fwd[1].bytes == 4 * logits


GPT = LayerShape(hidden=2304, heads=24, seq=2048, micro_batch=4, rope=False, attention="standard", recompute="full")


def test_megatron_2021_runs_dropout_on_the_scores_and_the_residuals():
    """Megatron-LM's 0.1 dropout defaults of 2021: 5 bytes per attention score (probabilities in, out
    and a mask) each way, 3 more per residual element (a read and a mask)."""
    b, a, s, h = 4, 24, 2048, 2304
    old, fused = layer_time(replace(GPT, framework="megatron-2021"), A100), layer_time(GPT, A100)
    names = {k.name: k for k in old.forward}
    assert names["attention dropout"].bytes == 5 * b * a * s * s
    assert "attention dropout" not in {k.name for k in fused.forward}
    assert names["residual 1"].bytes - kernel(fused, "residual 1").bytes == 3 * b * s * h
    assert "attention dropout backward" in {k.name for k in old.backward}
    assert "attention dropout" in {k.name for k in old.recompute}  # full recomputation reruns it


def test_megatron_2021_adds_each_micro_batchs_gradient_in_a_pass_of_its_own():
    """6 bytes per weight this GPU holds, per micro-batch: autograd's in-place add into the FP16 .grad."""
    tp = 8
    shape = replace(GPT, hidden=6144, heads=48, tp=tp, framework="megatron-2021")
    accumulate = [k for k in layer_time(shape, A100).backward if k.name == "FP32 gradient accumulation"]
    assert len(accumulate) == 1 and accumulate[0].bytes == 6 * 12 * 6144**2 // tp
    _, bwd = output_layer(shape, 51200, A100)
    assert bwd[-1].bytes == 6 * 6144 * 51200 // tp


def test_deepspeed_bf16_optimizer_casts_then_adds_each_micro_batchs_gradient():
    """hp_grad.add_(lp_grad.to(fp32)): the cast reads 2 and writes 4, the add reads 8 and writes 4: 18 bytes."""
    shape = replace(GPT, framework="megatron-deepspeed")
    accumulate = [k for k in layer_time(shape, A100).backward if k.name == "FP32 gradient accumulation"]
    assert accumulate[0].bytes == 18 * 12 * 2304**2
    assert "attention dropout" in {k.name for k in layer_time(shape, A100).forward}


def test_megatron_2021_loss_is_the_fp32_vocab_parallel_cross_entropy():
    """Cast, max, sub_, exp_, sum, div_: 38 bytes per logit forward; mul_ and the cast back: 14."""
    fwd, bwd = output_layer(replace(GPT, framework="megatron-2021"), 51200, A100)
    logits = 4 * 2048 * 51200
    assert fwd[1].bytes == 38 * logits and bwd[0].bytes == 14 * logits


frameworks = st.sampled_from(["megatron", "megatron-2021", "megatron-deepspeed", "torchtitan", "llm-foundry"])


@settings(max_examples=80, deadline=None)
@given(preset=st.sampled_from(["llama3-8b", "llama3-70b", "gpt3-175b", "megatron-1.7b"]), micro=st.integers(1, 4),
       framework=frameworks, recompute=st.sampled_from(["none", "selective", "full"]),
       dev=st.sampled_from(["a100-sxm4-80gb", "h100-sxm", "b200"]))
def test_a_framework_never_beats_the_fused_kernels(preset, micro, framework, recompute, dev):
    """Eager kernels, older attention and per-op recomputation only add work: never faster than Megatron's."""
    model, d = PRESETS[preset], device(dev)
    fused = job_times(model, d, micro_batch=micro, recompute=recompute, framework="megatron")
    other = job_times(model, d, micro_batch=micro, recompute=recompute, framework=framework)
    assert other.forward_layer_s >= fused.forward_layer_s
    assert other.backward_layer_s >= fused.backward_layer_s
    assert other.logits_forward_s + other.logits_backward_s >= fused.logits_forward_s + fused.logits_backward_s


def test_fsdp2_copies_each_gathered_block_out_before_forward_and_backward():
    """torchtitan's FSDP2 (ZeRO 3): 2 + 2 bytes per BF16 parameter of the layer, per pass; nothing for FSDP1 or ZeRO 1."""
    from mpisim.workloads.training.config import parse
    from mpisim.workloads.training.timing import fsdp_copy_out_time

    raw = {"kind": "training", "model": "llama3-8b", "batch": {"micro": 1}, "zero": 3, "framework": "torchtitan"}
    params = parse(raw)
    layout = params.layout(8)
    expected = 4 * params.model.layer_params() / A100.hbm_rate
    assert fsdp_copy_out_time(params, layout, A100) == pytest.approx(expected, rel=1e-12)
    assert fsdp_copy_out_time(parse({**raw, "zero": 1}), layout, A100) == 0
    assert fsdp_copy_out_time(parse({**raw, "framework": "llm-foundry"}), layout, A100) == 0


def test_eager_adam_streams_80_bytes_per_parameter():
    """Eight FP32 element-wise passes (Composer's DecoupledAdamW, torch's foreach AdamW) against one fused kernel's 30."""
    from mpisim.workloads.compute.software import EAGER_ADAM_BYTES
    from mpisim.workloads.training.timing import CLIP_BYTES_PER_PARAM, LayerTimes, step_overhead

    assert EAGER_ADAM_BYTES == 80
    assert software("llm-foundry").adam_bytes == software("torchtitan").adam_bytes == 80
    assert software("megatron").adam_bytes == software("nemo").adam_bytes == 30
    params, shards = 13e9, 8
    for adam in (30, 80):
        times = LayerTimes(1e-3, 2e-3, 0.0, 0.0, 312e12, "test", A100, adam_bytes_per_param=adam)
        expected = (adam + CLIP_BYTES_PER_PARAM) * params / shards / A100.hbm_rate
        assert step_overhead(times, params, shards, 40) == pytest.approx(expected, rel=1e-12)


def test_megatron_2021_reduces_gradients_after_the_backward_and_packs_them():
    """Megatron-LM 2021's local DDP: the all-reduce after forward_backward_func (not overlapped), and
    12 bytes per parameter and step to flatten, scale and copy back the 16-bit gradients."""
    from mpisim.workloads.compute.software import DDP_FLATTEN_BYTES
    from mpisim.workloads.training.config import parse
    from mpisim.workloads.training.timing import CLIP_BYTES_PER_PARAM, LayerTimes, step_overhead

    assert DDP_FLATTEN_BYTES == 12
    assert not software("megatron-2021").overlap_dp
    assert all(software(name).overlap_dp for name in ("megatron", "nemo", "torchtitan", "llm-foundry",
                                                      "megatron-deepspeed"))
    raw = {"kind": "training", "model": "megatron-1.7b", "batch": {"micro": 4}, "framework": "megatron-2021"}
    assert parse(raw).overlap_dp is False
    assert parse({**raw, "overlap": {"dp": True}}).overlap_dp is True  # the scenario's word wins
    assert parse({**raw, "framework": "megatron"}).overlap_dp is True
    params = 1.7e9
    times = LayerTimes(1e-3, 2e-3, 0.0, 0.0, 312e12, "test", A100, ddp_copy_bytes_per_param=DDP_FLATTEN_BYTES)
    expected = (30 + CLIP_BYTES_PER_PARAM + 12) * params / A100.hbm_rate
    assert step_overhead(times, params, 1, 24) == pytest.approx(expected, rel=1e-12)


def test_a_reduction_after_the_backward_is_never_faster_than_one_during_it():
    from mpisim.scenario import load_dict
    from mpisim.scenario.run import run_point

    def iteration(overlap: bool) -> float:
        raw = {"topology": {"preset": "dgx-a100", "nodes": 2}, "payload": "size", "fidelity": "collective",
               "workload": {"kind": "training", "framework": "megatron-2021", "overlap": {"dp": overlap},
                            "model": {"layers": 4, "hidden": 1024, "heads": 16, "seq": 1024, "vocab": 32000},
                            "batch": {"global": 64, "micro": 2}}}
        return run_point(load_dict(raw)).rows[0]["iteration_time_s"]

    assert iteration(False) > iteration(True)
