"""A training step's compute on one GPU, without communication: layers x micro-batches + bubble + optimizer.

This is the compute-only estimate a planner can check against published throughputs before any
network is simulated. With *m* micro-batches per pipeline and *pp* stages of equal layer counts
(the slowest stage sets the pace: the last one also runs the output layer and the loss, the first
the embedding), the 1F1B schedule takes ``(m + (pp - 1) / v) x t_stage``: *m* micro-batches plus
the pipeline's fill and drain, cut *v* times by the interleaved schedule's model chunks
(Narayanan et al. 2021, section 2.2). The optimizer step (Adam with FP32 master weights) then
streams about 30 bytes per parameter held by the GPU through HBM: it reads the FP32 weight,
gradient and two moments (16 bytes) and writes the weight, the moments and the BF16 copy (14).

Everything the network does (tensor-, pipeline-, data-parallel collectives, exposed or hidden)
is outside this estimate: the training engine adds it by simulation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from mpisim.workloads.compute.devices import Device, canonical_dtype
from mpisim.workloads.compute.kernels import Kernel, elementwise, gemm
from mpisim.workloads.compute.layer import (
    LayerShape,
    LayerTime,
    fp8_weight_cast_time,
    layer_time,
    stream_time,
    weight_gemms,
)

__all__ = ["ADAM_BYTES_PER_PARAM", "JobTimes", "StepEstimate", "estimate_step", "job_times", "output_layer"]

ADAM_BYTES_PER_PARAM = 30
FP32_LOSS_BYTES = (18, 22)  # bytes per logit of an eager FP32 cross-entropy, forward and backward


@dataclass(frozen=True)
class StepEstimate:
    """The compute of one training step on the slowest GPU, and how it splits."""

    layer: LayerTime
    layers_per_stage: int
    micro_batches: int
    stage_s: float  # one micro-batch's forward + backward through the slowest stage
    output_s: float  # the output layer and loss per micro-batch (in stage_s)
    bubble_s: float
    optimizer_s: float  # the optimizer step, and FP8 weight casts (once per step)
    step_s: float
    params_per_gpu: float

    @property
    def compute_s(self) -> float:
        """Compute without the bubble: what the GPU is busy for."""
        return self.step_s - self.bubble_s


def output_layer(shape: LayerShape, vocab: int, dev: Device) -> tuple[list[Kernel], list[Kernel]]:
    """Forward and backward kernels of the output projection (vocabulary split over tp) and the loss.

    Megatron's vocabulary-parallel cross-entropy reads the logits twice in the forward (max, then
    the sum of exponentials) and reads them and writes their gradient in the backward.
    An eager FP32 loss (PyTorch's ``F.cross_entropy`` on ``logits.float()``, or under autocast)
    casts the logits (2 + 4 bytes each), runs log-softmax reading them twice and writing them
    (12), and in the backward zero-fills the gradient (4), runs log-softmax's backward (12) and
    casts back (6): 18 bytes per logit forward and 22 backward. A framework may name its own
    count (Megatron-LM 2021's FP32 vocabulary-parallel loss: :mod:`.software`).
    """
    T, h = shape.tokens, shape.hidden
    v = math.ceil(vocab / shape.tp)
    sw = shape.software
    fwd_b, bwd_b = sw.loss_bytes or (FP32_LOSS_BYTES if sw.fp32_loss else (4, 4))
    forward = [gemm("logits", T, v, h, shape.dtype, dev), elementwise("cross-entropy", fwd_b * T * v, dev)]
    backward = [elementwise("cross-entropy backward", bwd_b * T * v, dev),
                gemm("logits data gradient", T, h, v, shape.dtype, dev),
                gemm("logits weight gradient", h, v, T, shape.dtype, dev)]
    if sw.grad_accumulation_bytes:  # the output weights' gradient added into FP32 per micro-batch (software.py)
        backward.append(elementwise("FP32 gradient accumulation", sw.grad_accumulation_bytes * v * h, dev))
    return forward, backward


def estimate_step(model: Any, dev: Device, *, micro_batch: int, micro_batches: int, pp: int = 1, chunks: int = 1,
                  zero_shards: int = 1, **layout: Any) -> StepEstimate:
    """Compute-only time of one step on *dev* for *model* (an object with the training model's shape).

    *micro_batches* per pipeline (per data-parallel replica), *pp* stages in *chunks* model chunks
    each (interleaving), the optimizer state sharded *zero_shards* ways (ZeRO / FSDP: the
    data-parallel size; 1 without). *layout* goes to :class:`LayerShape` (tp, cp, dtype, fp8,
    recompute, attention, dropout, sequence_parallel).
    """
    shape = LayerShape.from_model(model, micro_batch, **layout)
    layer = layer_time(shape, dev)
    layers = math.ceil(model.layers / pp)
    out_fwd, out_bwd = output_layer(shape, model.vocab, dev)
    passes = out_fwd + out_bwd + (out_fwd if shape.recompute == "full" and pp == 1 else [])
    output_s = stream_time(passes, dev.launch_s)
    stage_s = layers * layer.total_s + output_s
    bubble_s = (pp - 1) / chunks * stage_s
    layer_params = sum(n * k for _, _, n, k in weight_gemms(shape))
    if shape.experts > 1:
        local = max(1, shape.experts // shape.ep)
        layer_params += local * shape.hidden * shape.mlp_width * (3 if shape.gated_mlp else 2)
    params = layers * layer_params + model.vocab * shape.hidden / shape.tp
    optimizer_s = ADAM_BYTES_PER_PARAM * params / zero_shards / dev.hbm_rate
    optimizer_s += layers * fp8_weight_cast_time(shape, dev)  # once per step, like the optimizer
    step_s = micro_batches * stage_s + bubble_s + optimizer_s
    return StepEstimate(layer, layers, micro_batches, stage_s, output_s, bubble_s, optimizer_s, step_s, params)


@dataclass(frozen=True)
class JobTimes:
    """What the training engine charges per layer and micro-batch, from the compute model.

    ``backward_layer_s`` includes the recomputation, as the engine's ``Job.backward_layer_s`` does;
    ``first_micro_batch_layer_s`` is what the first micro-batch of a step adds per layer (FP8 weight casts).
    """

    forward_layer_s: float
    backward_layer_s: float
    recompute_layer_s: float
    logits_forward_s: float
    logits_backward_s: float
    first_micro_batch_layer_s: float
    layer: LayerTime


def job_times(model: Any, dev: Device, *, micro_batch: int, dtype: str = "bf16", **layout: Any) -> JobTimes:
    """Per-layer and output-layer times of one micro-batch on one GPU, for the training engine.

    *dtype* is the training's (``bfloat16``, ``float8_e4m3``, ...): FP8 means Transformer Engine's
    FP8 GEMMs with BF16 elsewhere. *layout* holds tp, cp, sequence_parallel, recompute, attention,
    dropout, ep (see :class:`LayerShape`).
    """
    fp8 = canonical_dtype(dtype) == "fp8"
    shape = LayerShape.from_model(model, micro_batch, dtype="bf16" if fp8 else dtype, fp8=fp8, **layout)
    layer = layer_time(shape, dev)
    out_fwd, out_bwd = output_layer(shape, model.vocab, dev)
    return JobTimes(layer.forward_s, layer.backward_s + layer.recompute_s, layer.recompute_s,
                    stream_time(out_fwd, dev.launch_s), stream_time(out_bwd, dev.launch_s),
                    fp8_weight_cast_time(shape, dev), layer)
