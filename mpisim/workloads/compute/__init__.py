"""How long a GPU takes to compute a transformer layer, from its shape and the device's published numbers.

A training step's compute is a list of kernels: matrix multiplications (GEMMs) whose speed
depends on their shape (:mod:`.gemm`), fused attention and memory-bound element-wise kernels
(:mod:`.kernels`), each paying a launch cost. :mod:`.layer` lists one transformer layer's kernels
for a given model shape, parallel layout, micro-batch and dtype and sums their times;
:mod:`.devices` holds the per-device constants, every one from a spec sheet or a published
benchmark; :mod:`.software` what the training framework runs around the GEMMs (fused or eager
element-wise kernels, its attention kernel, its optimizer step and recomputation policy). Nothing here is fitted to training throughputs: those are what the model is checked
against (:mod:`.estimate`).

One Llama 3 70B layer (8,192 tokens, tensor parallel 8) on an H100 and on an A100::

    >>> shape = LayerShape(hidden=8192, heads=64, kv_heads=8, ffn=28672, gated_mlp=True, seq=8192, tp=8)
    >>> h100 = layer_time(shape, device("h100-sxm"))
    >>> round(h100.forward_s * 1e3, 2), round(h100.backward_s * 1e3, 2)
    (3.02, 6.22)
    >>> {kind: round(seconds / h100.total_s, 2) for kind, seconds in h100.breakdown().items()}
    {'memory': 0.03, 'gemm': 0.85, 'attention': 0.11, 'launch': 0.0}
    >>> round(layer_time(shape, device("a100-sxm4-80gb")).total_s / h100.total_s, 2)
    2.56
"""

from mpisim.workloads.compute.devices import DEVICES, Device, device
from mpisim.workloads.compute.estimate import JobTimes, StepEstimate, estimate_step, job_times
from mpisim.workloads.compute.gemm import gemm_time
from mpisim.workloads.compute.layer import LayerShape, LayerTime, layer_time

__all__ = ["DEVICES", "Device", "JobTimes", "LayerShape", "LayerTime", "StepEstimate", "device", "estimate_step",
           "gemm_time", "job_times", "layer_time"]
