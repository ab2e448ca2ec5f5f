"""How long a GPU takes to compute a transformer layer, from its shape and the device's published numbers.

A training step's compute is a list of kernels: matrix multiplications (GEMMs) whose speed
depends on their shape (:mod:`.gemm`), fused attention and memory-bound element-wise kernels
(:mod:`.kernels`), each paying a launch cost. :mod:`.layer` lists one transformer layer's kernels
for a given model shape, parallel layout, micro-batch and dtype and sums their times;
:mod:`.devices` holds the per-device constants, every one from a spec sheet or a published
benchmark. Nothing here is fitted to training throughputs: those are what the model is checked
against (:mod:`.estimate`).
"""

from mpisim.workloads.compute.devices import DEVICES, Device, device
from mpisim.workloads.compute.estimate import JobTimes, StepEstimate, estimate_step, job_times
from mpisim.workloads.compute.gemm import gemm_time
from mpisim.workloads.compute.layer import LayerShape, LayerTime, layer_time

__all__ = ["DEVICES", "Device", "JobTimes", "LayerShape", "LayerTime", "StepEstimate", "device", "estimate_step",
           "gemm_time", "job_times", "layer_time"]
