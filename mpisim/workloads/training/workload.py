"""Run a training iteration and report where its time goes: the ``training`` workload kind.

Both forms -- data-parallel (``params:``, :mod:`~mpisim.workloads.training.ddp`) and hybrid
(``model:``, :mod:`~mpisim.workloads.training.config`) -- are planned by
:mod:`~mpisim.workloads.training.plan` and played by :mod:`~mpisim.workloads.training.play`;
they differ only in the row they report. The data-parallel row is described in
:mod:`~mpisim.workloads.training.ddp`. The hybrid row (DESIGN's ``--json`` contract for
``kind: training`` with ``model:``) carries the layout (``tp, pp, dp, ep, micro_batches, schedule,
zero``), ``iteration_time_s``, ``tokens_per_s``, ``tflops_per_gpu`` (FLOPs executed, recomputation included, per GPU per
second: Megatron-LM's count), ``mfu`` (model FLOPs without recomputation over the devices'
peak), the breakdown of the critical path (``compute_s, bubble_s, tp_comm_s, pp_comm_s,
ep_comm_s, dp_comm_s, exposed_comm_s``: see :mod:`mpisim.workloads.training.play`),
``memory_per_gpu_bytes`` and ``fits`` (against the topology's ``device_memory``), ``params``
and ``simulated_ranks`` (fewer than ``ranks`` when tensor-parallel groups were folded).
"""

from __future__ import annotations

from mpisim.collectives import memory as payload_memory
from mpisim.engine.units import pretty_size
from mpisim.errors import ConfigError
from mpisim.workloads.base import RunContext, WorkloadOutput, register_workload
from mpisim.workloads.collective import check_requirements
from mpisim.workloads.training.config import HybridParams
from mpisim.workloads.training.ddp import (
    KIND,
    ROUNDING,
    TRAINING,
    TrainingParams,
    dump,
    memory_estimate,
    parse,
    wire_bytes,
)
from mpisim.workloads.training.plan import Job, ddp_job, make_job
from mpisim.workloads.training.planner import planner_units
from mpisim.workloads.training.play import play
from mpisim.workloads.training.replicas import fold_replicas
from mpisim.workloads.training.schedule import virtual_stage
from mpisim.workloads.training.timing import spec_device

__all__ = ["COLUMNS", "DDP_COLUMNS", "WORKLOAD", "run"]

COLUMNS = ("ranks", "tp", "pp", "dp", "ep", "cp", "micro_batches", "schedule", "zero", "iteration_time_s", "tokens_per_s",
           "tflops_per_gpu", "mfu", "compute_s", "bubble_s", "tp_comm_s", "pp_comm_s", "ep_comm_s", "cp_comm_s", "dp_comm_s",
           "exposed_comm_s", "memory_per_gpu_bytes", "fits", "params", "simulated_ranks", "compute_model",
           "compute_split", "optimizer_s", "time_to_train_s", "gpu_hours", "energy_kwh", "cost", "price_per_gpu_hour")


DDP_COLUMNS = ("ranks", "iteration_time_s", "compute_s", "comm_time_s", "exposed_comm_s", "scaling_efficiency",
               "params", "bytes", "wire_bytes", "buckets", "algorithm", "verified")


def run(params: TrainingParams | HybridParams, ctx: RunContext) -> WorkloadOutput:
    """Play ``iterations`` training iterations on one fresh world; return one row."""
    if isinstance(params, TrainingParams):
        return run_data_parallel(params, ctx)
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
    fold_replicas(job, world.topology.spec, ctx.new_world, out.notes)
    shared = play(job, world)
    tallies = shared.tallies
    start = min(t.start for t in tallies.values())
    critical = max(tallies.values(), key=lambda t: t.end)
    n = params.iterations
    iteration = (critical.end - start) / n
    model, layout = params.model, job.layout
    tokens = None if model.flat else job.micro_batches * params.micro * layout.replicas * model.seq
    gpus = layout.size
    flops = job.flops_per_iteration / (iteration * gpus) if job.flops_per_iteration and iteration > 0 else None
    mfu = job.model_flops_per_iteration / (iteration * gpus * job.peak) if job.peak and flops else None
    # Context parallelism's exposed K/V exchange is charged in the layer times: the critical rank's share goes to cp_comm_s.
    cp_comm = _ring_exposed(job, critical_rank=max(tallies, key=lambda r: tallies[r].end))
    compute = critical.compute / n - cp_comm
    bubble = critical.bubble / n
    out.rows.append({
        "ranks": gpus, "tp": layout.tp, "pp": layout.pp, "dp": layout.replicas, "ep": layout.ep,
        **({"cp": layout.cp} if layout.cp > 1 else {}),
        "micro_batches": job.micro_batches, "schedule": params.schedule, "zero": params.zero,
        "iteration_time_s": iteration,
        "tokens_per_s": tokens / iteration if tokens and iteration > 0 else None,
        "tflops_per_gpu": flops / 1e12 if flops else None,
        "mfu": mfu,
        "compute_s": compute, "bubble_s": bubble,
        "tp_comm_s": critical.tp / n, "pp_comm_s": critical.pp / n, "ep_comm_s": critical.ep / n,
        **({"cp_comm_s": cp_comm} if layout.cp > 1 else {}),
        "dp_comm_s": critical.dp / n,
        "exposed_comm_s": max(0.0, iteration - compute - bubble),
        "memory_per_gpu_bytes": int(memory.total), "fits": fits,
        "params": model.params, "simulated_ranks": len(tallies),
        "compute_model": job.timing.source if job.timing else None,
        "compute_split": _split(job), "optimizer_s": job.step_s,
        **planner_units(params.tokens, tokens / iteration if tokens and iteration > 0 else None, gpus,
                        job.timing.device if job.timing and job.timing.device else spec_device(world.topology.spec)),
    })
    out.notes.append(_dominant(job, out.rows[-1]))
    cps = f", cp {layout.cp}" if layout.cp > 1 else ""
    out.worlds.append((f"training {gpus} GPUs (tp {layout.tp}{cps}, pp {layout.pp}, dp {layout.replicas})", world))
    out.notes.extend(world.unmatched)
    return out


def _ring_exposed(job: Job, critical_rank: int) -> float:
    """Context parallelism's exposed exchange in one iteration of *critical_rank*: per layer pass
    (:func:`~mpisim.workloads.training.plan._charge_context_exchange`) times the passes its stage runs."""
    if job.layout.cp < 2:
        return 0.0
    stage = job.layout.coords(critical_rank).pp
    layers = sum(job.chunk_layers[virtual_stage(stage, k, job.layout.pp)] for k in range(job.params.chunks))
    return job.micro_batches * layers * (job.cp_forward_s + job.cp_backward_s)


def _split(job: Job) -> str | None:
    """The GEMM-shape model's split of a layer's compute by kernel kind: ``gemm 84%, attention 12%, ...``."""
    parts = dict(job.timing.breakdown) if job.timing else {}
    total = sum(parts.values())
    if not total:
        return None
    return ", ".join(f"{kind} {seconds / total:.0%}" for kind, seconds in parts.items() if seconds / total >= 0.005)


def _dominant(job: Job, row: dict) -> str:
    """A warning naming the input the iteration time depends on most."""
    iteration = row["iteration_time_s"]
    shares = {"compute": row["compute_s"], "bubble": row["bubble_s"], "communication": row["exposed_comm_s"]}
    what, seconds = max(shares.items(), key=lambda kv: kv[1])
    share = seconds / iteration if iteration > 0 else 0.0
    source = job.timing.source if job.timing else "measured"
    if what == "compute":
        if source.startswith("efficiency"):
            why = (f"compute: {{{source.replace(' ', ': ')}}} decides it: the iteration moves in proportion to it "
                   "(leave compute: out for the GEMM-shape model of the cluster's GPU)")
        elif source == "measured":
            why = "the measured layer times decide it"
        else:
            dev = source.split(" ", 1)[1]
            why = (f"the compute model decides it: each kernel's shape on the {dev}'s measured matmul, attention "
                   f"and HBM rates ({row['compute_split']})")
    elif what == "bubble":
        why = f"the pipeline schedule decides it: pp {job.layout.pp} over {job.micro_batches} micro-batches"
    else:
        why = "the network decides it (tensor-, pipeline- and data-parallel collectives on the critical path)"
    return f"{what} is {share:.0%} of the iteration; {why}"


def _memory_advice(params: HybridParams) -> str:
    """What would make a layout fit, most effective first."""
    advice = []
    if (params.zero < 3 and params.pp == 1) or params.zero < 2:
        advice.append(f"zero: {params.zero + 1}")
    if params.recompute != "full":
        advice.append("recompute: full")
    advice.append("more tp or pp")
    return ", ".join(advice)


def run_data_parallel(params: TrainingParams, ctx: RunContext) -> WorkloadOutput:
    """Play ``iterations`` data-parallel iterations (the tp = pp = 1 job) on one fresh world; return one row."""
    out = WorkloadOutput()
    world = ctx.new_world()
    p = world.size
    if params.topk is None and p > 1:
        check_requirements("allreduce", params.sync, p, "sum")
    data = ctx.data and p > 1
    job = ddp_job(params, world, ctx.new_world, data, ctx.seed)
    plan = job.ddp
    if data:
        payload_memory.check_memory(memory_estimate(plan, p, world.algorithms.get("allreduce")))
    fold_replicas(job, world.topology.spec, ctx.new_world, out.notes)
    shared = play(job, world)
    tallies = shared.tallies.values()
    iteration = (max(t.end for t in tallies) - min(t.start for t in tallies)) / params.iterations
    comm_time = 0.0
    for first_entry, last_exit in shared.spans:  # each gradient collective, first entry to last exit
        comm_time += last_exit - first_entry
    comm_time /= params.iterations
    exposed = iteration - params.compute_s
    if abs(exposed) <= ROUNDING * params.compute_s:
        # The backward timeline is a sum of per-layer times; a last-bit difference is not communication.
        exposed, iteration = 0.0, params.compute_s
    out.rows.append({
        "ranks": p,
        "iteration_time_s": iteration,
        "compute_s": params.compute_s,
        "comm_time_s": comm_time,
        "exposed_comm_s": exposed,
        "scaling_efficiency": params.compute_s / iteration if iteration > 0 else 1.0,
        "params": params.params,
        "bytes": params.params * plan.dtype.itemsize,
        "wire_bytes": wire_bytes(plan) if p > 1 else 0,
        "buckets": len(plan.buckets),
        "algorithm": "+".join(sorted(shared.ran)) if shared.ran else None,
        "verified": all(shared.results) if data else None,
    })
    out.worlds.append((f"training {p} ranks", world))
    out.notes.extend(world.unmatched)
    return out


WORKLOAD = register_workload(
    KIND, "training iteration: data-parallel DDP buckets, or with model: an LLM over tensor x pipeline x data "
          "parallelism (ZeRO 0-3, MoE expert parallelism)",
    parse=parse, dump=dump, run=run, schema=TRAINING,
    columns=tuple(dict.fromkeys((*DDP_COLUMNS, *COLUMNS))),
)
