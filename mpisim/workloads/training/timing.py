"""How long one layer takes on one GPU: the compute model a training job is timed with.

Three sources, most specific first:

* **measured** layer times (``compute: {layer_forward: 1.2 ms, layer_backward: 2.4 ms}``), a
  profiler's: they include the element-wise kernels and the logits;
* **one efficiency** (``compute: {efficiency: 0.5}``): a layer's FLOPs over ``efficiency x peak``
  (the topology's ``device_flops``; with FP8 the projections' GEMMs at the FP8 peak, the attention
  core and the logits at the BF16 one, as Transformer Engine runs them) divided over the tp GPUs
  (and cp), plus its element-wise kernels
  streaming about twice the activation bytes the layer keeps (Korthikanti et al.'s count)
  through HBM (``device_memory_bandwidth``). One efficiency serves every matrix whatever its
  shape and every device: the override for a measured cluster;
* **the GEMM-shape model** (the default: ``compute:`` left out): each of the layer's kernels on
  the GPU the topology names (``gpu:``, or the preset's own GPU), by
  :mod:`mpisim.workloads.compute` -- every GEMM's m, n, k from the model's shape, the micro-batch,
  tp and sequence parallelism on the device's measured best matmul rate with tile and wave
  quantisation, fused attention at the kernel's measured rate, element-wise kernels on HBM,
  each kernel's launch, at the sustained clock a training's continuous load settles at, on the
  slowest of the job's GPUs (:mod:`mpisim.workloads.compute.variability`: every collective waits
  for it). Nothing in it is fitted to training throughputs.

The GEMM-shape model also times what happens once per step (:func:`step_overhead`): the
optimizer (Adam with FP32 master weights streams about 30 bytes per parameter it updates
through HBM as one fused kernel, 80 as the eager element-wise operations of PyTorch-native
trainers), the gradient-norm clipping before it, and, with FP8, the weights' casts with the
first micro-batch. The workload's ``framework:`` says which kernels the software runs
(:mod:`mpisim.workloads.compute.software`); under ZeRO 3 torchtitan's FSDP2 also copies each
gathered block into its parameters before the forward and the backward (:func:`fsdp_copy_out_time`).

Clipping (``clip_grad_norm_``, max norm 1.0 in llm-foundry's, torchtitan's, NeMo's and
Megatron-LM's recipes) reads every FP32 gradient the GPU holds for the norm
(``torch._foreach_norm``) and then scales them all in place by ``min(1, max / norm)``
(``torch._foreach_mul_``: PyTorch runs it unconditionally, so as not to sync the host on the
norm): 4 + 8 = ``CLIP_BYTES_PER_PARAM`` bytes per parameter of the shard through HBM.
"""

from __future__ import annotations

from dataclasses import dataclass

from mpisim.errors import ConfigError
from mpisim.network.topology import TopologySpec
from mpisim.workloads.compute import Device, device, job_times
from mpisim.workloads.compute.devices import DEVICES, PRESET_DEVICES
from mpisim.workloads.compute.estimate import ADAM_BYTES_PER_PARAM
from mpisim.workloads.compute.software import software
from mpisim.workloads.compute.variability import slowest_device
from mpisim.workloads.training.config import FLASH, PEAK_FORMAT, HybridParams
from mpisim.workloads.training.layout import Layout
from mpisim.workloads.training.memory import activation_bytes_per_layer

#: Gradient-norm clipping's HBM bytes per FP32 gradient: read for the norm, read and write to scale.
CLIP_BYTES_PER_PARAM = 12

__all__ = ["CLIP_BYTES_PER_PARAM", "LayerTimes", "fsdp_copy_out_time", "layer_times", "spec_device", "step_overhead"]


@dataclass(frozen=True)
class LayerTimes:
    """One micro-batch's compute per layer on one GPU, and where the numbers come from."""

    forward_s: float
    backward_s: float  # recomputation included
    logits_forward_s: float
    logits_backward_s: float
    peak: float | None  # the device's peak for the dtype (MFU's denominator)
    source: str  # "gemm-shape h100-sxm", "efficiency 0.6", "measured"
    device: Device | None = None  # the GEMM-shape model's device
    first_micro_batch_s: float = 0.0  # per layer, once per step (FP8 weight casts)
    adam_bytes_per_param: float = ADAM_BYTES_PER_PARAM  # the framework's optimizer step (compute/software)
    ddp_copy_bytes_per_param: float = 0.0  # the framework's DDP packing / unpacking of gradients, per step
    #: The GEMM-shape model's split of a layer's forward + backward: gemm, attention, memory, launch (seconds).
    breakdown: tuple[tuple[str, float], ...] = ()
    #: The attention core's part of a layer's forward and backward (what ring attention's exchange hides behind).
    attention_forward_s: float = 0.0
    attention_backward_s: float = 0.0

    @property
    def gemm_share(self) -> float:
        """The GEMMs' share of the layer's compute (1 for the FLOP-based and measured forms)."""
        parts = dict(self.breakdown)
        total = sum(parts.values())
        return parts.get("gemm", 0.0) / total if total else 1.0


def spec_device(spec: TopologySpec) -> Device | None:
    """The GPU of the cluster *spec*: its ``gpu:`` key, or the shipped preset's GPU; None if unknown."""
    if spec.gpu is not None:
        if spec.gpu not in DEVICES and spec.gpu not in PRESET_DEVICES:
            raise ConfigError(f"unknown GPU {spec.gpu!r}; known: {', '.join(DEVICES)}", "topology.gpu")
        return device(spec.gpu)
    return device(spec.name) if spec.name in PRESET_DEVICES else None


def layer_times(params: HybridParams, layout: Layout, spec: TopologySpec) -> LayerTimes:
    """The per-layer times of *params* on *layout* over the cluster *spec* (see the module docstring)."""
    model, b, tp = params.model, params.micro, layout.tp
    cp = layout.cp  # each GPU runs 1/cp of every sequence's tokens and, load-balanced, of its attention
    fmt = PEAK_FORMAT.get(params.dtype, "")
    if params.layer_forward_s is not None:
        forward = params.layer_forward_s
        backward = params.layer_backward_s if params.layer_backward_s is not None else 2 * forward
        recompute = forward if params.recompute == "full" else 0.0  # selective: in the measured times
        peak = params.peak or spec.peak_flops(fmt)
        core = forward * model.attention_core_flops(b) / model.layer_forward_flops(b)  # the FLOPs' share
        return LayerTimes(forward, backward + recompute, 0.0, 0.0, peak, "measured",
                          attention_forward_s=core, attention_backward_s=2.5 * core)
    if params.efficiency is None:
        return _gemm_shape(params, layout, spec, fmt)
    peak = params.peak or spec.peak_flops(fmt)
    if peak is None:
        raise ConfigError(f"the topology gives no peak FLOP/s for {params.dtype} (device_flops: {{bf16: ...}}); "
                          "add it to the topology or give compute: {efficiency: 0.5, peak: 989 TFLOPS}", "compute")
    rate = params.efficiency * peak
    # FP8 (Transformer Engine) runs the projections' GEMMs in FP8 and the attention core and the
    # output layer in BF16; MFU counts against the 16-bit peak, as the GEMM-shape form does.
    bf16 = spec.peak_flops("bf16") if fmt == "fp8" and not params.peak else None
    other = params.efficiency * bf16 if bf16 else rate
    peak = bf16 or peak
    # Fused (flash) attention never writes the s x s scores: no such traffic, but its backward
    # recomputes them, 2.5 x the forward's attention FLOPs instead of 2 x (Dao 2023); selective
    # recomputation then has nothing left to redo.
    flash = params.attention in FLASH
    hbm = spec.device_memory_bandwidth
    stored = activation_bytes_per_layer(model, b, tp, "none", params.sequence_parallel, flash) / cp
    memory_fwd = 2 * stored / hbm if hbm else 0.0
    attention_memory = 0.0 if flash or not hbm else 2 * 5 * model.heads * model.seq**2 * b / tp / hbm
    core_flops = model.attention_core_flops(b) / tp / cp
    core = core_flops / other
    forward = (model.layer_forward_flops(b) / tp / cp - core_flops) / rate + core + memory_fwd
    backward = 2 * forward + (0.5 * core if flash else 0.0)
    recompute = {"none": 0.0, "selective": 0.0 if flash else core + attention_memory,
                 "full": forward}[params.recompute]
    logits = model.logits_forward_flops(b) / tp / cp / other
    return LayerTimes(forward, backward + recompute, logits, 2 * logits, peak, f"efficiency {params.efficiency:g}",
                      attention_forward_s=core, attention_backward_s=(2.5 if flash else 2.0) * core)


def _gemm_shape(params: HybridParams, layout: Layout, spec: TopologySpec, fmt: str) -> LayerTimes:
    dev = spec_device(spec)
    if dev is None:
        raise ConfigError(f"the topology names no GPU for the compute model: add gpu: (one of {', '.join(DEVICES)}) "
                          "to it, or give compute: {efficiency: 0.5}", "compute")
    # A synchronous job computes at its slowest GPU's sustained rate (compute/variability.py).
    dev = slowest_device(dev, layout.size)
    model = params.model
    moe = {"ep": layout.ep} if model.moe else {}
    t = job_times(model, dev, micro_batch=params.micro, dtype="fp8" if fmt == "fp8" else fmt or "bf16",
                  tp=layout.tp, cp=layout.cp, sequence_parallel=params.sequence_parallel,
                  recompute=params.recompute, attention=params.attention, framework=params.framework or "",
                  cp_comm=params.cp_comm, **moe)
    # MFU counts against the 16-bit peak even for FP8 runs (NeMo's and Megatron's convention).
    peak = params.peak or spec.peak_flops("bf16" if fmt == "fp8" else fmt) or dev.peak("bf16" if fmt == "fp8" else fmt)
    parts = dict.fromkeys(("gemm", "attention", "memory", "launch"), 0.0)
    parts.update(t.layer.breakdown())
    copy_out = fsdp_copy_out_time(params, layout, dev)
    parts["memory"] += 2 * copy_out
    return LayerTimes(t.forward_layer_s + copy_out, t.backward_layer_s + copy_out, t.logits_forward_s,
                      t.logits_backward_s, peak,
                      f"gemm-shape {dev.name}", dev, t.first_micro_batch_layer_s, software(params.framework).adam_bytes,
                      software(params.framework).ddp_copy_bytes, tuple(parts.items()),
                      sum(k.seconds for k in t.layer.forward if k.kind == "attention"),
                      sum(k.seconds for k in t.layer.backward if k.kind == "attention"))


def fsdp_copy_out_time(params: HybridParams, layout: Layout, dev: Device) -> float:
    """FSDP2's copy of one gathered block into its parameters (ZeRO 3 under a framework that runs FSDP2):
    each parameter of the layer read and written once in the training dtype, before the forward and
    again before the backward (:mod:`~mpisim.workloads.compute.software`); 0 otherwise."""
    if params.zero != 3 or not software(params.framework).fsdp2_copy_out:
        return 0.0
    itemsize = 1 if PEAK_FORMAT.get(params.dtype) == "fp8" else 2  # FP8 all-gathers (torchao) move one byte
    model = params.model
    local = model.layer_params() - model.experts * model.expert_params() * (1 - 1 / layout.ep)  # experts over ep
    return 2 * itemsize * local / layout.tp / dev.hbm_rate


def step_overhead(times: LayerTimes, params_per_gpu: float, optimizer_shards: int, layers_per_gpu: int) -> float:
    """What one step adds once, after its micro-batches: the optimizer and the FP8 weight casts.

    Only the GEMM-shape model charges it (the efficiency and measured forms keep their numbers):
    Adam streams ``ADAM_BYTES_PER_PARAM`` bytes per parameter this GPU updates (its shard under
    ZeRO) through HBM as one fused kernel, or the framework's eager count
    (:data:`~mpisim.workloads.compute.software.EAGER_ADAM_BYTES`), clipping ``CLIP_BYTES_PER_PARAM`` more;
    a DDP that packs its gradients into one buffer for the all-reduce and copies them back
    (Megatron-LM 2021's local DDP, :data:`~mpisim.workloads.compute.software.DDP_FLATTEN_BYTES`)
    streams every gradient the GPU holds that many more bytes.
    """
    if times.device is None:
        return 0.0
    bytes_per_param = times.adam_bytes_per_param + CLIP_BYTES_PER_PARAM
    optimizer = bytes_per_param * params_per_gpu / optimizer_shards / times.device.hbm_rate
    packing = times.ddp_copy_bytes_per_param * params_per_gpu / times.device.hbm_rate
    return optimizer + packing + layers_per_gpu * times.first_micro_batch_s
