"""Run a hybrid-parallel training iteration and report where its time goes.

The row (DESIGN's ``--json`` contract for ``kind: training`` with ``model:``) carries the
layout (``tp, pp, dp, ep, micro_batches, schedule, zero``), ``iteration_time_s``,
``tokens_per_s``, ``tflops_per_gpu`` (FLOPs executed, recomputation included, per GPU per
second: Megatron-LM's count), ``mfu`` (model FLOPs without recomputation over the devices'
peak), the breakdown of the critical path (``compute_s, bubble_s, tp_comm_s, pp_comm_s,
ep_comm_s, dp_comm_s, exposed_comm_s``: see :mod:`mpisim.workloads.llm.engine`),
``memory_per_gpu_bytes`` and ``fits`` (against the topology's ``device_memory``), ``params``
and ``simulated_ranks`` (fewer than ``ranks`` when tensor-parallel groups were folded).
"""

from __future__ import annotations

from mpisim.engine.units import pretty_size
from mpisim.errors import ConfigError
from mpisim.workloads.base import RunContext, WorkloadOutput
from mpisim.workloads.llm.config import HybridParams
from mpisim.workloads.llm.engine import make_job, play

__all__ = ["COLUMNS", "run"]

COLUMNS = ("ranks", "tp", "pp", "dp", "ep", "micro_batches", "schedule", "zero", "iteration_time_s", "tokens_per_s",
           "tflops_per_gpu", "mfu", "compute_s", "bubble_s", "tp_comm_s", "pp_comm_s", "ep_comm_s", "dp_comm_s",
           "exposed_comm_s", "memory_per_gpu_bytes", "fits", "params", "simulated_ranks")


def run(params: HybridParams, ctx: RunContext) -> WorkloadOutput:
    """Play ``iterations`` hybrid-parallel iterations on one fresh world; return one row."""
    out = WorkloadOutput()
    world = ctx.new_world()
    job = make_job(params, world, ctx.new_world)
    memory = max(job.memory, key=lambda m: m.total)
    device = world.topology.spec.device_memory
    fits = None if device is None else memory.total <= device
    if fits is False:
        advice = _memory_advice(params)
        text = (f"needs {pretty_size(int(memory.total))} per GPU (weights {pretty_size(int(memory.weights))}, "
                f"gradients {pretty_size(int(memory.gradients))}, optimizer {pretty_size(int(memory.optimizer))}, "
                f"activations {pretty_size(int(memory.activations))}) but the device has {pretty_size(device)}")
        if params.memory_check == "error":
            raise ConfigError(f"{text}; use {advice}, or memory_check: mark to time it anyway", "workload.parallel")
        out.notes.append(f"does not fit: {text}; use {advice}")
    if ctx.data:
        out.notes.append("hybrid-parallel training moves sizes only (its timing does not depend on the numbers)")
    shared = play(job, world)
    tallies = shared.tallies
    start = min(t.start for t in tallies.values())
    critical = max(tallies.values(), key=lambda t: t.end)
    n = params.iterations
    iteration = (critical.end - start) / n
    model, layout = params.model, job.layout
    tokens = None if model.flat else job.micro_batches * params.micro * layout.dp * model.seq
    gpus = layout.size
    flops = job.flops_per_iteration / (iteration * gpus) if job.flops_per_iteration and iteration > 0 else None
    mfu = job.model_flops_per_iteration / (iteration * gpus * job.peak) if job.peak and flops else None
    compute = critical.compute / n
    bubble = critical.bubble / n
    out.rows.append({
        "ranks": gpus, "tp": layout.tp, "pp": layout.pp, "dp": layout.dp, "ep": layout.ep,
        "micro_batches": job.micro_batches, "schedule": params.schedule, "zero": params.zero,
        "iteration_time_s": iteration,
        "tokens_per_s": tokens / iteration if tokens and iteration > 0 else None,
        "tflops_per_gpu": flops / 1e12 if flops else None,
        "mfu": mfu,
        "compute_s": compute, "bubble_s": bubble,
        "tp_comm_s": critical.tp / n, "pp_comm_s": critical.pp / n, "ep_comm_s": critical.ep / n,
        "dp_comm_s": critical.dp / n,
        "exposed_comm_s": max(0.0, iteration - compute - bubble),
        "memory_per_gpu_bytes": int(memory.total), "fits": fits,
        "params": model.params, "simulated_ranks": len(tallies),
    })
    out.worlds.append((f"training {gpus} GPUs (tp {layout.tp}, pp {layout.pp}, dp {layout.dp})", world))
    out.notes.extend(world.unmatched)
    return out


def _memory_advice(params: HybridParams) -> str:
    """What would make a layout fit, most effective first."""
    advice = []
    if (params.zero < 3 and params.pp == 1) or params.zero < 2:
        advice.append(f"zero: {params.zero + 1}")
    if params.recompute != "full":
        advice.append("recompute: full")
    advice.append("more tp or pp")
    return ", ".join(advice)
