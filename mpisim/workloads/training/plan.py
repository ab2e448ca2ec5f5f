"""The plan of one training iteration: what each GPU does, derived once from the parameters and the world.

A :class:`Job` holds everything the ranks need (:mod:`~mpisim.workloads.training.play` plays it):
the :class:`~mpisim.workloads.training.layout.Layout`, each layer's compute time, the message and
collective sizes, the parameters on each virtual stage and their gradient buckets, the memory
per stage. Data-parallel training (``params: 300M``, no ``model:``) is the same job at
tp = pp = 1 with one flat "layer" (:func:`ddp_job`); the run estimate
(:mod:`mpisim.scenario.estimate`) counts its events from the same job.

**Folding the tensor-parallel group** (``fold: auto`` and ``fold: tp``). When every tensor-parallel group fills
exactly one node (tp = ranks per node), its collectives use only the node's NVLink links,
which nothing else uses: the pipeline's and the data-parallel group's traffic leaves through
the NICs. Every tp rank then does the same thing at the same time, so only the tp rank 0 of
each group is simulated and each tensor-parallel collective takes the time the group's real
collective takes, measured once per size on a fresh world. The other tp ranks' pipeline and
data-parallel traffic runs on their own rails in a rail-optimized cluster; where it would not
(a shared inter-node link), ``fold: none`` simulates every GPU. Tests run both on clusters
small enough and require the same iteration time within 1 %. ``fold: auto`` also folds the
data-parallel replicas where the fabric allows (:mod:`~mpisim.workloads.training.replicas`).

**Compute.** Each layer's forward and backward time on one GPU comes from
:mod:`~mpisim.workloads.training.timing`: by default the GEMM-shape model of the GPU the cluster
names (:mod:`mpisim.workloads.compute`), or one efficiency of the device's peak, or measured
layer times. The GEMM-shape model also charges the optimizer step once per iteration
(:attr:`Job.step_s`).

"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mpisim.engine.sim import Proc
from mpisim.errors import ConfigError
from mpisim.mpi.comm import Comm
from mpisim.mpi.payload import SizePayload
from mpisim.mpi.world import World
from mpisim.network.topology import TopologySpec
from mpisim.workloads.fields import parse_dtype
from mpisim.workloads.training.buckets import ddp_buckets
from mpisim.workloads.training.config import PEAK_FORMAT, HybridParams
from mpisim.workloads.training.contention import (
    channels_for,
    contended_slowdown,
    grad_cast_time,
    overlap_share,
)
from mpisim.workloads.training.context import (
    exposed_ring_s,
    kv_step_bytes,
    measure_cp_collective,
    measure_ring_step,
)
from mpisim.workloads.training.ddp import DDPPlan, TrainingParams, as_hybrid, make_plan
from mpisim.workloads.training.layout import Layout
from mpisim.workloads.training.memory import (
    MemoryUse,
    layer_activation_bytes,
    model_state_bytes,
    peak_in_flight,
)
from mpisim.workloads.training.schedule import schedule, virtual_stage
from mpisim.workloads.training.timing import LayerTimes, layer_times, step_overhead

__all__ = ["GradBucket", "Job", "ddp_job", "foldable", "make_job", "plan_job", "run_collective", "tp_blocks", "tp_calls"]

DDP_FIRST_BUCKET = 2**20  # PyTorch DDP's first bucket (1 MiB); later ones bucket_cap


@dataclass(frozen=True, slots=True)  # a step can have a million: no __dict__ each
class GradBucket:
    """Gradients reduced together: ``count`` elements over the ``group`` communicator ("dp" or "edp")."""

    count: int
    ready: float  # transformer layers of the chunk whose backward is done when it is ready (flat models: fraction)
    group: str = "dp"


@dataclass
class Job:
    """Everything the ranks need, derived once from the parameters and the world."""

    params: HybridParams
    layout: Layout
    micro_batches: int
    itemsize: int
    dtype: np.dtype
    layers_per_chunk: int
    forward_layer_s: float  # one layer's forward compute on one GPU
    backward_layer_s: float  # its backward, recomputation included
    logits_forward_s: float
    logits_backward_s: float
    activation_count: int  # elements of one pipeline message per tp rank
    tp_count: int  # elements of one tensor-parallel allreduce
    a2a_count: int  # elements one rank sends in one MoE all-to-all
    chunk_params: list[list[int]]  # per virtual stage: parameter counts on one GPU (embedding, layers, output, experts)
    buckets: list[list[GradBucket]]  # per virtual stage, in the order they are reduced
    fold: bool
    #: ZeRO 3: parameters one GPU gathers per transformer layer (its experts too), and for the
    #: embedding and output layers together.
    fsdp_layer: int = 0
    fsdp_rest: int = 0
    chunk_expert_params: int = 0  # expert parameters one GPU holds per virtual stage (in chunk_params too)
    tp_times: dict[tuple[str, int], float] = field(default_factory=dict)
    #: Folded replicas (:mod:`~mpisim.workloads.training.replicas`): each data-parallel collective's
    #: time on the whole fabric, (stage, group, collective, elements, dtype) -> seconds; empty: every replica runs.
    dp_times: dict[tuple[int, str, str, int, str], float] = field(default_factory=dict)
    #: Where each folded collective's bytes went on its fresh world: link name -> (bytes, busy seconds).
    tp_links: dict[tuple[str, int], dict[str, tuple[int, float]]] = field(default_factory=dict)
    #: The same for each folded data-parallel collective (keyed as ``dp_times``), every replica's group included.
    dp_links: dict[tuple[int, str, str, int, str], dict[str, tuple[int, float]]] = field(default_factory=dict)
    memory: list[MemoryUse] = field(default_factory=list)  # per stage
    flops_per_iteration: float = 0.0  # executed, recomputation included
    model_flops_per_iteration: float = 0.0  # without recomputation (for MFU)
    peak: float | None = None
    #: Flat models: the backward fractions at which the last backward's compute is cut (the end
    #: of each layer, or of each bucket's share), at least every bucket's ready.
    ticks: tuple[float, ...] = ()
    #: Transformer layers of each virtual stage (uneven when the layers do not divide, see
    #: :mod:`~mpisim.workloads.training.stages`); ``layers_per_chunk`` is the largest.
    chunk_layers: list[int] = field(default_factory=lambda: [1])
    #: The data-parallel form's own plan (:func:`ddp_job`): None for the hybrid form.
    ddp: DDPPlan | None = None
    #: Where the layer times come from (:mod:`~mpisim.workloads.training.timing`); None for flat models.
    timing: LayerTimes | None = None
    #: The share of a layer's compute in GEMMs: what tensor-parallel collectives can hide behind (overlap: {tp}).
    gemm_share: float = 1.0
    #: Compute once per step after the micro-batches: the optimizer, FP8 weight casts (GEMM-shape model only).
    step_s: float = 0.0
    #: The gradients' format in their reduction (``reduce_dtype``); None: ``dtype``.
    grad_dtype: np.dtype | None = None

    @property
    def reduce_dtype(self) -> np.dtype:
        """The format gradients are reduced in: ``reduce_dtype`` if given, else the training's."""
        return self.grad_dtype if self.grad_dtype is not None else self.dtype
    #: Context parallelism: ring attention's exposed exchange per layer forward and backward (in the layer times).
    cp_forward_s: float = 0.0
    cp_backward_s: float = 0.0

    @property
    def stages(self) -> int:
        return self.layout.pp

    @property
    def virtual_stages(self) -> int:
        return self.layout.pp * self.params.chunks


def make_job(params: HybridParams, world: World, new_world: Callable[[], World]) -> Job:
    """Derive the :class:`Job` of *params* on *world* (raises ConfigError for what cannot run).

    *new_world* makes fresh worlds of the same cluster, on which folded tensor-parallel
    collectives are timed.
    """
    job = plan_job(params, world.size, world.topology.spec)
    job.fold = _can_fold(params, job.layout, world)
    if job.fold:
        job.tp_times = measure_tp(job, new_world)
    _fsdp_contention(job, new_world)
    if job.layout.cp > 1:
        _charge_context_exchange(job, new_world)
    return job


def _fsdp_contention(job: Job, new_world: Callable[[], World]) -> None:
    """ZeRO 3 on the GEMM-shape model: slow each layer by the SMs its overlapped allgather and
    reduce-scatter hold (:mod:`~mpisim.workloads.training.contention`), each timed alone on a fresh world."""
    dev = job.timing.device if job.timing is not None else None
    if job.params.zero != 3 or dev is None or job.layout.dp < 2 or not job.fsdp_layer:
        return
    group = job.layout.group(0, "dp")
    took = {}
    for kind in ("allgather", "reduce_scatter"):
        fresh = new_world()
        finish: list[float] = []

        def one(comm: Comm, kind: str = kind, finish: list[float] = finish) -> Proc[None]:
            dtype = job.reduce_dtype if kind == "reduce_scatter" else job.dtype
            yield from run_collective(comm.sub(group, "dp"), kind, job.fsdp_layer, dtype)
            finish.append(comm.now)

        fresh.launch(one, ranks=group)
        fresh.run()
        took[kind] = max(finish)
    share = overlap_share(channels_for(dev.name), dev.sms)  # SMs, HBM and L2 the collectives take
    job.backward_layer_s += grad_cast_time(job.fsdp_layer, job.dtype.itemsize, job.reduce_dtype.itemsize, dev)
    job.forward_layer_s += contended_slowdown(job.forward_layer_s, took["allgather"], share)
    job.backward_layer_s += contended_slowdown(job.backward_layer_s, took["allgather"] + took["reduce_scatter"],
                                               share)


def _charge_context_exchange(job: Job, new_world: Callable[[], World]) -> None:
    """Add context parallelism's exposed key/value exchange to each layer pass (:mod:`.context`).

    Every cp group does the same exchange at the same time, as a folded tensor-parallel group
    does its collectives: the first group's exchange is timed once on a fresh world. A ring
    (``cp_comm: ring``) exposes what its steps outlast the attention by, forward (K and V) and
    backward (K, V and their gradients: twice the bytes); an all-gather (``cp_comm: allgather``,
    Llama 3's) exposes all of it: the forward's gather of K and V, the backward's gather again
    and reduce-scatter of their gradients.
    """
    layout, model, times, params = job.layout, job.params.model, job.timing, job.params
    group = layout.cp_group(0)
    nbytes = kv_step_bytes(model.seq, model.kv_width, params.micro, layout.tp, layout.cp, job.itemsize)
    if params.cp_comm == "allgather":
        share = nbytes // job.itemsize  # K and V elements of this GPU's tokens
        gather = measure_cp_collective(group, "allgather", share, job.dtype, new_world)
        forward = gather
        backward = gather + measure_cp_collective(group, "reduce_scatter", share, job.dtype, new_world)
    else:
        forward = exposed_ring_s(measure_ring_step(group, nbytes, new_world), times.attention_forward_s, layout.cp)
        backward = exposed_ring_s(measure_ring_step(group, 2 * nbytes, new_world), times.attention_backward_s,
                                  layout.cp)
    job.cp_forward_s = forward
    job.cp_backward_s = backward + (forward if params.recompute == "full" else 0.0)
    job.forward_layer_s += job.cp_forward_s
    job.backward_layer_s += job.cp_backward_s


def plan_job(params: HybridParams, ranks: int, spec: TopologySpec) -> Job:
    """The :class:`Job` of *params* on *ranks* GPUs of the cluster *spec*, before any world exists:
    everything but folding (which needs the placement) and the folded collectives' times.

    The run estimate (:mod:`mpisim.scenario.estimate`) counts a run's events from it.
    """
    layout = params.layout(ranks)
    m = params.micro_batches(layout.replicas)
    if params.schedule == "interleaved" and m % layout.pp:
        raise ConfigError(f"the interleaved schedule needs micro-batches per pipeline ({m}) to be a multiple "
                          f"of pp ({layout.pp}); raise batch.global", "batch.global")
    model, dtype = params.model, parse_dtype(params.dtype)
    itemsize = dtype.itemsize
    tp, b, cp = layout.tp, params.micro, layout.cp
    if model.flat:
        peak = params.peak or spec.peak_flops(PEAK_FORMAT.get(params.dtype, ""))
        forward = (1 - params.backward_share) * params.compute_s
        job = Job(params, layout, m, itemsize, dtype, 1, forward, params.compute_s - forward, 0.0, 0.0, 0, 0, 0,
                  [[model.params]], [], False, peak=peak)
        job.buckets = [_flat_buckets(model.params, itemsize, params.bucket_cap)]
        job.ticks = tuple(bucket.ready for bucket in job.buckets[0])
        job.memory = [MemoryUse(*model_state_bytes(model.params, params.zero, layout.dp), 0.0)]
        return job
    times = layer_times(params, layout, spec)
    chunk_layers = params.stage_layers()
    layers_per_chunk = max(chunk_layers)
    samples = m * b * layout.replicas
    tokens = model.activation_elements(b) // cp  # elements of a micro-batch's activation on one cp rank
    job = Job(
        params, layout, m, itemsize, dtype, layers_per_chunk,
        forward_layer_s=times.forward_s,
        backward_layer_s=times.backward_s,
        logits_forward_s=times.logits_forward_s,
        logits_backward_s=times.logits_backward_s,
        activation_count=tokens // (tp if tp > 1 else 1),
        tp_count=tokens,
        a2a_count=_round_up(int(tokens * model.top_k * model.capacity_factor)
                            // (tp if params.sequence_parallel else 1), layout.ep),
        chunk_params=[], buckets=[], fold=False, peak=times.peak, timing=times, chunk_layers=chunk_layers,
        gemm_share=times.gemm_share,
    )
    recompute_total = {"none": 0.0, "selective": model.attention_core_flops(1), "full": model.layer_forward_flops(1)}
    job.model_flops_per_iteration = model.model_flops(samples)
    job.flops_per_iteration = job.model_flops_per_iteration + samples * model.layers * recompute_total[params.recompute]
    # Parameters on one GPU, per virtual stage; gradients bucketed per communicator.
    mlp = model.hidden * model.experts if model.moe else model.expert_params()  # the router, or the dense MLP
    dense_layer = (model.attention_params() + 4 * model.hidden + mlp) // tp
    expert_layer = model.experts // layout.ep * model.expert_params() // layout.expert_tp
    last = job.virtual_stages - 1
    for vs in range(job.virtual_stages):
        layers = [dense_layer] * chunk_layers[vs]
        embedding = model.embedding_params() // tp if vs == 0 else None
        # With pp > 1 the last stage keeps its own copy of tied embeddings for the logits.
        output = (model.output_params() + (model.vocab * model.hidden if model.tied_embeddings and last > 0 else 0)) \
            // tp if vs == last else None
        experts = [expert_layer] * chunk_layers[vs] if model.moe else []
        job.chunk_expert_params = sum(experts)
        job.chunk_params.append([*([embedding] if embedding else []), *layers, *([output] if output else []), *experts])
        job.buckets.append(_chunk_buckets(layers, experts, embedding, output, itemsize, params))
    if params.zero == 3:  # pp == 1: one virtual stage holds everything
        job.fsdp_layer = dense_layer + (expert_layer if model.moe else 0)
        job.fsdp_rest = (model.embedding_params() + model.output_params()) // tp
    if params.reduce_dtype is not None:
        job.grad_dtype = parse_dtype(params.reduce_dtype)
    job.memory = _memory(job)
    # Once per step, on the GPU that updates the most parameters: the optimizer (FP8: weight casts too).
    per_stage = [sum(sum(job.chunk_params[virtual_stage(stage, k, layout.pp)]) for k in range(params.chunks))
                 for stage in range(layout.pp)]
    shards = layout.dp if params.zero else 1
    stage_layers = [sum(chunk_layers[virtual_stage(stage, k, layout.pp)] for k in range(params.chunks))
                    for stage in range(layout.pp)]
    job.step_s = step_overhead(times, max(per_stage), shards, max(stage_layers))
    return job


def ddp_job(params: TrainingParams, world: World, new_world: Callable[[], World], data: bool = False,
            seed: int = 0) -> Job:
    """The :class:`Job` of the data-parallel form: the tp = pp = 1 job of its hybrid translation
    (:func:`~mpisim.workloads.training.ddp.as_hybrid`) with the data-parallel form's own buckets,
    layer ticks, compute split and wire format (:class:`~mpisim.workloads.training.ddp.DDPPlan`)."""
    job = make_job(as_hybrid(params), world, new_world)
    plan = make_plan(params, data, seed)
    job.ddp = plan
    job.buckets = [[GradBucket(b.count, b.ready) for b in plan.buckets]]
    job.ticks = plan.layer_ready
    # The plan's own split (backward = share x compute, forward the rest), to the last bit.
    job.forward_layer_s, job.backward_layer_s = plan.forward_s, plan.backward_s
    return job


def _round_up(n: int, k: int) -> int:
    return -(-n // k) * k


def _flat_buckets(params: int, itemsize: int, bucket_cap: int) -> list[GradBucket]:
    return [GradBucket(b.count, b.ready) for b in ddp_buckets((), params, itemsize, DDP_FIRST_BUCKET, bucket_cap)]


def _chunk_buckets(layers: list[int], experts: list[int], embedding: int | None, output: int | None,
                   itemsize: int, params: HybridParams) -> list[GradBucket]:
    """The gradient buckets of one chunk, in the order backward makes them ready.

    Backward meets the output layer first (ready before any transformer layer), then the
    layers last to first, then the embedding (ready after the last one). Dense gradients are
    reduced over the data-parallel group, expert gradients over the expert-data-parallel
    group. Buckets close at DDP's caps; with ZeRO 3 (FSDP) each unit is reduce-scattered alone.
    """
    n = len(layers)
    units: list[tuple[int, float]] = [(output, 0)] if output else []  # (count, layers done when ready)
    units += [(c, n - i) for i, c in enumerate(reversed(layers))]
    if embedding:
        units.append((embedding, n))
    out = _bucketize(units, "dp", itemsize, params, DDP_FIRST_BUCKET)
    out += _bucketize([(c, n - i) for i, c in enumerate(reversed(experts))], "edp", itemsize, params, params.bucket_cap)
    return sorted(out, key=lambda bucket: bucket.ready)


def _bucketize(units: list[tuple[int, float]], group: str, itemsize: int, params: HybridParams,
               first_cap: int) -> list[GradBucket]:
    """Pack *units* (count, ready) into buckets that close once they hold their cap (DDP's rule)."""
    if params.zero == 3:
        return [GradBucket(count, ready, group) for count, ready in units]
    out: list[GradBucket] = []
    count = 0
    for n, ready in units:
        count += n
        if count * itemsize >= (first_cap if not out else params.bucket_cap):
            out.append(GradBucket(count, ready, group))
            count = 0
    if count:
        out.append(GradBucket(count, units[-1][1], group))
    return out


def foldable(params: HybridParams, tp: int, spec: Any) -> bool:
    """Whether the topology *spec* lets tensor-parallel groups of *tp* be folded (placement aside)."""
    if params.fold == "none" or tp == 1 or spec.ranks_per_node != tp:
        return False
    if params.ep > 1 and params.etp == 1:  # expert-parallel groups mix tp ranks: each must be simulated
        return False
    inter = spec.inter
    return spec.nodes == 1 or inter is None or not (
        inter.nics != tp or inter.oversubscription > 1 or inter.kind == "ring" or inter.host_bandwidth)


def _can_fold(params: HybridParams, layout: Layout, world: World) -> bool:
    """Whether tensor-parallel groups can be folded (see the module's docstring).

    Each group must fill exactly one node, and each GPU must have its own path out of the node
    (a NIC per GPU on a non-oversubscribed fabric: rails, or a star, full or fat-tree without
    oversubscription), so that the other tp ranks' pipeline and data-parallel traffic runs on
    links the simulated rank's does not use.
    """
    if not foldable(params, layout.tp, world.topology.spec):
        return False
    comm = world.comm_world(0)
    for rank in range(0, world.size, layout.tp):
        group = layout.group(rank, "tp")
        if len({comm.node_of(r) for r in group}) != 1:
            return False
    return True


def tp_calls(job: Job) -> list[tuple[str, int]]:
    """The tensor-parallel collectives a layer makes, as (collective, elements per call)."""
    if job.layout.tp == 1:
        return []
    if job.params.sequence_parallel:
        return [("allgather", job.tp_count), ("reduce_scatter", job.tp_count)]
    return [("allreduce", job.tp_count)]


def tp_blocks(job: Job) -> int:
    """The blocks of a layer that make tensor-parallel collectives: attention and MLP.

    Whole experts (etp: 1) take the sequence-parallel share of tokens each tp rank holds
    straight into the all-to-all: the MoE block needs no tensor-parallel gather or scatter.
    """
    return 1 if job.params.model.moe and job.layout.expert_tp < job.layout.tp else 2


def measure_tp(job: Job, new_world: Callable[[], World]) -> dict[tuple[str, int], float]:
    """Time each tensor-parallel collective of the first tp group on a fresh world, alone."""
    group = job.layout.group(0, "tp")
    calls = set(tp_calls(job))
    if not job.params.sequence_parallel:
        calls.add(("allgather", job.tp_count))  # the pipeline's scatter-gather
    times = {}
    for kind, count in sorted(calls):
        fresh = new_world()
        finish: list[float] = []

        def one(comm: Comm, kind: str = kind, count: int = count, finish: list[float] = finish) -> Proc[None]:
            sub = comm.sub(group, "tp")
            yield from run_collective(sub, kind, count, job.dtype)
            finish.append(comm.now)

        fresh.launch(one, ranks=group)
        fresh.run()
        times[(kind, count)] = max(finish)
        stats = getattr(fresh.network, "link_stats", None)
        if stats is not None:  # where the group's bytes went, for the link figures (folded.py)
            job.tp_links[(kind, count)] = {s.name: (s.nbytes, s.busy_time) for s in stats().values() if s.nbytes > 0}
    return times


def run_collective(comm: Comm, kind: str, count: int, dtype: np.dtype, algorithm: str | None = None) -> Proc[Any]:
    """Run collective *kind* of *count* elements in total (per rank for allgather: count / size)."""
    if kind == "allreduce":
        return (yield from comm.allreduce(SizePayload(count, dtype), algorithm=algorithm))
    if kind == "allgather":
        return (yield from comm.allgather(SizePayload(math.ceil(count / comm.size), dtype)))
    if kind == "reduce_scatter":
        return (yield from comm.reduce_scatter(SizePayload(_round_up(count, comm.size), dtype)))
    if kind == "alltoall":
        return (yield from comm.alltoall(SizePayload(count, dtype)))
    raise ValueError(kind)


def _memory(job: Job) -> list[MemoryUse]:
    """Memory per GPU of each pipeline stage (see :mod:`mpisim.workloads.training.memory`)."""
    p, model, layout = job.params, job.params.model, job.layout
    act = layer_activation_bytes(model, p.micro, layout.tp, p.recompute, p.sequence_parallel,
                                 p.attention == "flash") / layout.cp  # cp: each GPU holds s / cp tokens
    # ZeRO 1 and 2 shard expert states over the GPUs that hold the same experts (the group
    # their gradients are reduced over, as Megatron-Core's distributed optimizer does), not over
    # the whole data-parallel group; ZeRO 3 gathers experts over the data-parallel group.
    experts = job.chunk_expert_params * p.chunks
    edp = len(layout.edp_group(0)) if p.zero < 3 else layout.dp
    out = []
    for stage in range(layout.pp):
        params = sum(sum(job.chunk_params[virtual_stage(stage, k, layout.pp)]) for k in range(p.chunks))
        ops = schedule(p.schedule, stage, layout.pp, job.micro_batches, p.chunks)
        layers = peak_in_flight(ops, [job.chunk_layers[virtual_stage(stage, k, layout.pp)] for k in range(p.chunks)])
        dense = model_state_bytes(params - experts, p.zero, layout.dp)
        expert = model_state_bytes(experts, p.zero, edp)
        weights, grads, optimizer = (d + e for d, e in zip(dense, expert, strict=True))
        out.append(MemoryUse(weights, grads, optimizer, layers * act))
    return out
