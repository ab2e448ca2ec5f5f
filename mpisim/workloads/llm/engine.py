"""Playing one hybrid-parallel training iteration: what every GPU runs, in simulated time.

Each rank is one GPU at ``(tp, pp, dp)`` of the :class:`~mpisim.workloads.llm.layout.Layout`.
It runs its pipeline stage's :func:`~mpisim.workloads.llm.schedule.schedule` pass by pass:

* a **forward** ``F`` of micro-batch i through model chunk k receives the activation from the
  previous virtual stage (a real message: b s h / tp elements per tensor-parallel rank, then an
  allgather inside the tensor-parallel group, Megatron's scatter-gather), computes each layer
  (its FLOPs / (efficiency x peak) / tp) with the layer's two tensor-parallel **allreduces**
  (with sequence parallelism an allgather and a reduce-scatter each) and, for mixture-of-experts
  layers with ep > 1, two **all-to-alls** over the expert-parallel group (dispatch and
  combine, tokens spread evenly over the experts), then sends its output on. With whole
  experts (``etp: 1``, sequence parallelism) the MoE block has no tensor-parallel collectives:
  each tp rank's share of the tokens goes to the all-to-all as it is;
* a **backward** ``B`` does the same in reverse at twice the FLOPs, after recomputing the
  forward when ``recompute: full`` (with its communication) or the attention core when
  ``selective``.

**Data-parallel sync.** Gradients are packed into buckets (DDP's assignment, as the
data-parallel ``training`` workload does); during the last micro-batch's backward each bucket
becomes ready when its last layer is done and, with ``overlap: {dp: true}``, a stream per rank
reduces the buckets one after another while backward goes on: an allreduce (ZeRO 0), a
reduce-scatter and a final allgather of the updated parameters (ZeRO 1 and 2). ZeRO 3 (FSDP)
allgathers every layer's parameters before its forward and again before its backward (one layer
ahead, as FSDP prefetches) and reduce-scatters its gradients after its backward. All of these
are real collective calls on real communicators (:meth:`~mpisim.mpi.comm.Comm.sub`), so
tensor-, pipeline- and data-parallel traffic contend wherever they share links.

**Folding the tensor-parallel group** (``fold: auto``). When every tensor-parallel group fills
exactly one node (tp = ranks per node), its collectives use only the node's NVLink links,
which nothing else uses: the pipeline's and the data-parallel group's traffic leaves through
the NICs. Every tp rank then does the same thing at the same time, so only the tp rank 0 of
each group is simulated and each tensor-parallel collective takes the time the group's real
collective takes, measured once per size on a fresh world. The other tp ranks' pipeline and
data-parallel traffic runs on their own rails in a rail-optimized cluster; where it would not
(a shared inter-node link), ``fold: none`` simulates every GPU. Tests run both on clusters
small enough and require the same iteration time within 1 %.

**Compute.** A layer's forward pass takes its FLOPs (:mod:`~mpisim.workloads.llm.model`) over
``efficiency x peak`` (the topology's ``device_flops`` for the dtype), divided over the tp
GPUs, plus the time its element-wise kernels (norms, GeLU, softmax, dropout, residual adds)
take to stream about twice the activation bytes the layer keeps (Korthikanti et al.'s count)
through the device's memory (``device_memory_bandwidth``): those kernels are bound by memory,
not FLOPs, which is why small hidden sizes reach a lower share of the peak. The backward pass
takes twice the forward; ``recompute: full`` adds one forward, ``selective`` the attention core.
One efficiency serves every matrix multiplication, whatever its shape: the shapes' own losses
(tiles of 128 x 128 or 128 x 256 outputs, run in waves of one tile per SM, the last wave part
empty) cost the validation rows' GEMMs 0.3-2.6 % of their FLOPs (forward, data- and weight-
gradient GEMMs of C8a-c, H2 and H10, best of five tile shapes), within 2.3 % of each other:
less than the spread of the rows' errors, so a per-shape efficiency would explain nothing they show.

**What the row says**, for the rank that finishes last (the critical path): ``compute_s``
(its compute, recomputation included), ``tp_comm_s`` and ``ep_comm_s`` (time in its
tensor-parallel and expert-parallel collectives), ``bubble_s`` (time waiting for a pipeline
input the neighbour had not yet produced: the schedule's bubble), ``pp_comm_s`` (waiting for
one already sent: the transfer), ``dp_comm_s`` (the duration of its data-parallel
collectives, hidden or not) and ``exposed_comm_s`` (iteration - compute - bubble: the
communication on the critical path).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mpisim.engine.sim import Proc
from mpisim.errors import ConfigError
from mpisim.mpi.comm import Comm
from mpisim.mpi.payload import SizePayload
from mpisim.mpi.world import World
from mpisim.workloads.buckets import ddp_buckets
from mpisim.workloads.collective import parse_dtype
from mpisim.workloads.llm.config import PEAK_FORMAT, HybridParams
from mpisim.workloads.llm.layout import Layout
from mpisim.workloads.llm.memory import (
    MemoryUse,
    activation_bytes_per_layer,
    model_state_bytes,
    peak_in_flight,
)
from mpisim.workloads.llm.schedule import Op, schedule, virtual_stage

__all__ = ["Job", "foldable", "make_job", "play"]

DDP_FIRST_BUCKET = 2**20  # PyTorch DDP's first bucket (1 MiB); later ones bucket_cap


@dataclass(frozen=True)
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
    memory: list[MemoryUse] = field(default_factory=list)  # per stage
    flops_per_iteration: float = 0.0  # executed, recomputation included
    model_flops_per_iteration: float = 0.0  # without recomputation (for MFU)
    peak: float | None = None

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
    layout = params.layout(world.size)
    m = params.micro_batches(layout.dp)
    if params.schedule == "interleaved" and m % layout.pp:
        raise ConfigError(f"the interleaved schedule needs micro-batches per pipeline ({m}) to be a multiple "
                          f"of pp ({layout.pp}); raise batch.global", "batch.global")
    model, dtype = params.model, parse_dtype(params.dtype)
    itemsize = dtype.itemsize
    spec = world.topology.spec
    peak = params.peak or spec.peak_flops(PEAK_FORMAT.get(params.dtype, ""))
    tp, b = layout.tp, params.micro
    if model.flat:
        forward = (1 - params.backward_share) * params.compute_s
        job = Job(params, layout, m, itemsize, dtype, 1, forward, params.compute_s - forward, 0.0, 0.0, 0, 0, 0,
                  [[model.params]], [], False, peak=peak)
        job.buckets = [_flat_buckets(model.params, itemsize, params.bucket_cap)]
        job.memory = [MemoryUse(*model_state_bytes(model.params, params.zero, layout.dp), 0.0)]
        return job
    explicit = params.layer_forward_s is not None
    if peak is None and not explicit:
        raise ConfigError(f"the topology gives no peak FLOP/s for {params.dtype} (device_flops: {{bf16: ...}}); "
                          "add it to the topology or give compute: {efficiency: 0.5, peak: 989 TFLOPS}", "compute")
    if explicit:
        # Measured per-layer times: they include the element-wise kernels; the logits are in them too.
        layer_fwd = params.layer_forward_s
        layer_bwd = params.layer_backward_s if params.layer_backward_s is not None else 2 * layer_fwd
        recompute = {"none": 0.0, "selective": 0.0, "full": layer_fwd}[params.recompute]  # measured: in the times
        logits = 0.0
    else:
        rate = params.efficiency * peak
        # Element-wise kernels (norms, GeLU, softmax, dropout, residuals) are bound by memory, not
        # FLOPs: they read and write about the activations a layer keeps (Korthikanti et al.'s
        # count), so a forward pass moves twice those bytes through HBM.
        # Fused (flash) attention never writes the s x s scores: no such traffic, but its backward
        # recomputes them, 2.5 x the forward's attention FLOPs instead of 2 x (Dao 2023); selective
        # recomputation then has nothing left to redo.
        flash = params.attention == "flash"
        hbm = spec.device_memory_bandwidth
        stored = activation_bytes_per_layer(model, b, tp, "none", params.sequence_parallel, flash)
        memory_fwd = 2 * stored / hbm if hbm else 0.0
        attention_memory = 0.0 if flash or not hbm else 2 * 5 * model.heads * model.seq**2 * b / tp / hbm
        core = model.attention_core_flops(b) / tp / rate
        layer_fwd = model.layer_forward_flops(b) / tp / rate + memory_fwd
        layer_bwd = 2 * layer_fwd + (0.5 * core if flash else 0.0)
        recompute = {"none": 0.0, "selective": 0.0 if flash else core + attention_memory,
                     "full": layer_fwd}[params.recompute]
        logits = model.logits_forward_flops(b) / tp / rate
    layers_per_chunk = model.layers // (layout.pp * params.chunks)
    samples = m * b * layout.dp
    job = Job(
        params, layout, m, itemsize, dtype, layers_per_chunk,
        forward_layer_s=layer_fwd,
        backward_layer_s=layer_bwd + recompute,
        logits_forward_s=logits,
        logits_backward_s=2 * logits,
        activation_count=model.activation_elements(b) // (tp if tp > 1 else 1),
        tp_count=model.activation_elements(b),
        a2a_count=_round_up(int(model.activation_elements(b) * model.top_k * model.capacity_factor)
                            // (tp if params.sequence_parallel else 1), layout.ep),
        chunk_params=[], buckets=[], fold=False, peak=peak,
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
        layers = [dense_layer] * layers_per_chunk
        embedding = model.embedding_params() // tp if vs == 0 else None
        # With pp > 1 the last stage keeps its own copy of tied embeddings for the logits.
        output = (model.output_params() + (model.vocab * model.hidden if model.tied_embeddings and last > 0 else 0)) \
            // tp if vs == last else None
        experts = [expert_layer] * layers_per_chunk if model.moe else []
        job.chunk_expert_params = sum(experts)
        job.chunk_params.append([*([embedding] if embedding else []), *layers, *([output] if output else []), *experts])
        job.buckets.append(_chunk_buckets(layers, experts, embedding, output, itemsize, params))
    if params.zero == 3:  # pp == 1: one virtual stage holds everything
        job.fsdp_layer = dense_layer + (expert_layer if model.moe else 0)
        job.fsdp_rest = (model.embedding_params() + model.output_params()) // tp
    job.memory = _memory(job)
    job.fold = _can_fold(params, layout, world)
    if job.fold:
        job.tp_times = _measure_tp(job, new_world)
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


def _tp_calls(job: Job) -> list[tuple[str, int]]:
    """The tensor-parallel collectives a layer makes, as (collective, elements per call)."""
    if job.layout.tp == 1:
        return []
    if job.params.sequence_parallel:
        return [("allgather", job.tp_count), ("reduce_scatter", job.tp_count)]
    return [("allreduce", job.tp_count)]


def _tp_blocks(job: Job) -> int:
    """The blocks of a layer that make tensor-parallel collectives: attention and MLP.

    Whole experts (etp: 1) take the sequence-parallel share of tokens each tp rank holds
    straight into the all-to-all: the MoE block needs no tensor-parallel gather or scatter.
    """
    return 1 if job.params.model.moe and job.layout.expert_tp < job.layout.tp else 2


def _measure_tp(job: Job, new_world: Callable[[], World]) -> dict[tuple[str, int], float]:
    """Time each tensor-parallel collective of the first tp group on a fresh world, alone."""
    group = job.layout.group(0, "tp")
    calls = set(_tp_calls(job))
    if not job.params.sequence_parallel:
        calls.add(("allgather", job.tp_count))  # the pipeline's scatter-gather
    times = {}
    for kind, count in sorted(calls):
        fresh = new_world()
        finish: list[float] = []

        def one(comm: Comm, kind: str = kind, count: int = count, finish: list[float] = finish) -> Proc[None]:
            sub = comm.sub(group, "tp")
            yield from _collective(sub, kind, count, job.dtype)
            finish.append(comm.now)

        fresh.launch(one, ranks=group)
        fresh.run()
        times[(kind, count)] = max(finish)
    return times


def _collective(comm: Comm, kind: str, count: int, dtype: np.dtype, algorithm: str | None = None) -> Proc[Any]:
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
    """Memory per GPU of each pipeline stage (see :mod:`mpisim.workloads.llm.memory`)."""
    p, model, layout = job.params, job.params.model, job.layout
    act = activation_bytes_per_layer(model, p.micro, layout.tp, p.recompute, p.sequence_parallel,
                                     p.attention == "flash")
    # ZeRO 1 and 2 shard expert states over the GPUs that hold the same experts (the group
    # their gradients are reduced over, as Megatron-Core's distributed optimizer does), not over
    # the whole data-parallel group; ZeRO 3 gathers experts over the data-parallel group.
    experts = job.chunk_expert_params * p.chunks
    edp = len(layout.edp_group(0)) if p.zero < 3 else layout.dp
    out = []
    for stage in range(layout.pp):
        params = sum(sum(job.chunk_params[virtual_stage(stage, k, layout.pp)]) for k in range(p.chunks))
        in_flight = peak_in_flight(schedule(p.schedule, stage, layout.pp, job.micro_batches, p.chunks))
        dense = model_state_bytes(params - experts, p.zero, layout.dp)
        expert = model_state_bytes(experts, p.zero, edp)
        weights, grads, optimizer = (d + e for d, e in zip(dense, expert, strict=True))
        out.append(MemoryUse(weights, grads, optimizer, in_flight * job.layers_per_chunk * act))
    return out


# ---------------------------------------------------------------------------------------------
# The ranks


@dataclass
class Tally:
    """What one rank spent its time on (seconds, summed over iterations)."""

    compute: float = 0.0
    tp: float = 0.0
    ep: float = 0.0
    bubble: float = 0.0
    pp: float = 0.0
    dp: float = 0.0
    start: float = 0.0
    end: float = 0.0
    #: Data-parallel communication volume in bytes, as the ZeRO paper counts it: an allreduce of
    #: n bytes is a reduce-scatter and an allgather, 2n; a reduce-scatter or allgather n.
    dp_volume: float = 0.0
    tp_calls: Counter[tuple[str, int]] = field(default_factory=Counter)  # (collective, elements) -> calls


@dataclass
class _Shared:
    posted: dict[tuple[int, int, int], float] = field(default_factory=dict)  # (src, dst, tag) -> time sent
    tallies: dict[int, Tally] = field(default_factory=lambda: defaultdict(Tally))


class _Rank:
    """One simulated GPU: its communicators, its schedule, and its accounting."""

    def __init__(self, job: Job, comm: Comm, shared: _Shared) -> None:
        self.job, self.comm, self.shared = job, comm, shared
        layout = job.layout
        me = comm.rank
        self.coords = layout.coords(me)
        self.tally = shared.tallies[me]
        self.tp = comm.sub(layout.group(me, "tp"), "tp") if layout.tp > 1 and not job.fold else None
        dp_group = layout.group(me, "dp")
        self.dp = comm.sub(dp_group, "dp") if layout.dp > 1 else None
        self.dp_params = comm.sub(dp_group, "dp-params") if layout.dp > 1 and job.params.zero == 3 else None
        self.ep = comm.sub(layout.ep_group(me), "ep") if layout.ep > 1 else None
        edp = layout.edp_group(me)
        self.edp = comm.sub(edp, "edp") if len(edp) > 1 else None
        self.pp_group = layout.group(me, "pp")
        self.sends: list[Any] = []
        # Folded tensor-parallel collectives are fixed delays (job.tp_times): where nothing can
        # happen between a layer's compute and them -- no expert all-to-alls, no timeline to
        # draw -- layers in a row are one delay (see layers()).
        self.layer_is_one_delay = (job.fold and not (self.ep is not None and job.params.model.moe)
                                   and not comm.world.tracer.record_spans)

    # ------------------------------------------------------------------ communication pieces

    def tp_collective(self, kind: str, count: int) -> Proc[None]:
        t0 = self.comm.now
        self.tally.tp_calls[(kind, count)] += 1
        if self.job.fold:
            yield self.comm.env.timeout(self.job.tp_times[(kind, count)])
        else:
            yield from _collective(self.tp, kind, count, self.job.dtype)
        self.tally.tp += self.comm.now - t0

    def layers(self, count: int, seconds: float, label: str, passes: int) -> Proc[None]:
        """*count* layers in a row, each *seconds* of compute, then the tensor- and expert-parallel
        collectives of *passes* passes.

        With folded tensor-parallel groups and nothing else between them (``layer_is_one_delay``)
        the layers are a single delay of the same length, tallied the same way: one event where
        each layer's compute and each of its collectives would take one (5 per layer forward, 9
        backward with recomputation), which is most of a 100 000-GPU layout's events.
        """
        if not self.layer_is_one_delay:
            for _ in range(count):
                yield from self.compute(seconds, label)
                yield from self.layer_comm(passes)
            return
        tp = 0.0
        for kind, count_ in _tp_calls(self.job) * (_tp_blocks(self.job) * passes):
            tp += self.job.tp_times[(kind, count_)]
            self.tally.tp_calls[(kind, count_)] += count
        self.tally.compute += count * seconds
        self.tally.tp += count * tp
        yield self.comm.env.timeout(count * (seconds + tp))

    def layer_comm(self, passes: int) -> Proc[None]:
        """The tensor- and expert-parallel collectives of *passes* forward-like passes through one layer."""
        job = self.job
        for _ in range(passes):
            for _ in range(_tp_blocks(job)):
                for kind, count in _tp_calls(job):
                    yield from self.tp_collective(kind, count)
            if self.ep is not None and job.params.model.moe:
                for _ in range(2):  # dispatch and combine
                    t0 = self.comm.now
                    yield from _collective(self.ep, "alltoall", job.a2a_count, job.dtype)
                    self.tally.ep += self.comm.now - t0

    def compute(self, seconds: float, label: str) -> Proc[None]:
        self.tally.compute += seconds
        yield from self.comm.compute(seconds, label)

    def receive(self, vstage: int, tag: int) -> Proc[None]:
        """Wait for the pipeline message *tag* from virtual stage *vstage*; split the wait into bubble and transfer."""
        job = self.job
        src = self.pp_group[vstage % job.stages]
        t0 = self.comm.now
        yield from self.comm.recv(source=src, tag=tag)
        t1 = self.comm.now
        sent = self.shared.posted.get((src, self.comm.rank, tag), t0)
        idle = min(max(0.0, sent - t0), t1 - t0)
        self.tally.bubble += idle
        self.tally.pp += t1 - t0 - idle
        if job.layout.tp > 1 and not job.params.sequence_parallel:
            yield from self.tp_collective("allgather", job.tp_count)  # scatter-gather: rebuild b s h

    def send(self, vstage: int, tag: int) -> None:
        dst = self.pp_group[vstage % self.job.stages]
        self.shared.posted[(self.comm.rank, dst, tag)] = self.comm.now
        self.sends.append(self.comm.isend(SizePayload(self.job.activation_count, self.job.dtype), dst, tag))

    # ------------------------------------------------------------------ passes

    def tag(self, iteration: int, micro: int, boundary: int, backward: bool) -> int:
        """The tag of the message crossing *boundary* (between virtual stages boundary and boundary + 1)."""
        job = self.job
        return ((iteration * job.micro_batches + micro) * job.virtual_stages + boundary) * 2 + int(backward)

    def forward(self, iteration: int, op: Op, params_ready: Any) -> Proc[None]:
        job = self.job
        vs = virtual_stage(self.coords.pp, op.chunk, job.stages)
        if vs > 0:
            yield from self.receive(vs - 1, self.tag(iteration, op.micro, vs - 1, False))
        label = f"F{op.micro}" + (f".{op.chunk}" if job.params.chunks > 1 else "")
        if params_ready is not None:
            yield from params_ready()  # ZeRO 3: embedding and output
        if params_ready is None:
            yield from self.layers(job.layers_per_chunk, job.forward_layer_s, label, 1)
        for _ in range(job.layers_per_chunk if params_ready is not None else 0):
            yield from params_ready()  # ZeRO 3: each layer's parameters before its compute
            yield from self.layers(1, job.forward_layer_s, label, 1)
        if vs == job.virtual_stages - 1:
            yield from self.compute(job.logits_forward_s, label)
        else:
            self.send(vs + 1, self.tag(iteration, op.micro, vs, False))

    def backward(self, iteration: int, op: Op, ready: list[Any] | None, params_ready: Any) -> Proc[None]:
        """The backward pass of *op*; *ready* (the chunk's last backward) are its buckets' events."""
        job = self.job
        vs = virtual_stage(self.coords.pp, op.chunk, job.stages)
        label = f"B{op.micro}" + (f".{op.chunk}" if job.params.chunks > 1 else "")
        if vs < job.virtual_stages - 1:
            yield from self.receive(vs + 1, self.tag(iteration, op.micro, vs, True))
        else:
            yield from self.compute(job.logits_backward_s, label)
        buckets = job.buckets[vs]
        fired = 0

        def fire(done: float) -> None:
            nonlocal fired
            while ready is not None and fired < len(buckets) and buckets[fired].ready <= done:
                ready[fired].succeed()
                fired += 1

        if job.params.model.flat:
            # As the data-parallel workload: bucket k is ready at its fraction of the backward,
            # at absolute times so rounding does not accumulate.
            t_start = self.comm.now
            for bucket in buckets if ready is not None else ():
                yield from self.compute(t_start + bucket.ready * job.backward_layer_s - self.comm.now, label)
                fire(bucket.ready)
            yield from self.compute(t_start + job.backward_layer_s - self.comm.now, label)
        else:
            fire(0)
            if params_ready is not None:
                yield from params_ready()
            passes = 2 if job.params.recompute == "full" else 1
            layer = 0
            while layer < job.layers_per_chunk:
                if params_ready is not None:
                    yield from params_ready()  # ZeRO 3: each layer's parameters before its compute
                    upto = layer + 1
                else:  # on to the next layer whose end readies a bucket: nothing happens before
                    upto = job.layers_per_chunk
                    if ready is not None and fired < len(buckets):
                        upto = min(upto, max(layer + 1, math.ceil(buckets[fired].ready)))
                yield from self.layers(upto - layer, job.backward_layer_s, label, passes)
                layer = upto
                fire(layer)
        fire(math.inf)
        if vs > 0:
            self.send(vs - 1, self.tag(iteration, op.micro, vs - 1, True))

    # ------------------------------------------------------------------ data parallelism

    def sync_stream(self, order: list[tuple[int, int]], ready: dict[tuple[int, int], Any]) -> Proc[None]:
        """Reduce the gradient buckets one after another, each once it is ready (one stream)."""
        job = self.job
        for key in order:
            yield ready[key]
            bucket = job.buckets[key[0]][key[1]]
            comm = self.dp if bucket.group == "dp" else self.edp
            if comm is None:
                continue
            t0 = self.comm.now
            if job.params.zero == 0:
                yield from _collective(comm, "allreduce", bucket.count, job.dtype, job.params.sync)
                self.tally.dp_volume += 2 * bucket.count * job.itemsize
            else:
                yield from _collective(comm, "reduce_scatter", bucket.count, job.dtype)
                self.tally.dp_volume += bucket.count * job.itemsize
            self.tally.dp += self.comm.now - t0

    def gather_updated(self, order: list[tuple[int, int]]) -> Proc[None]:
        """ZeRO 1 and 2: every rank updated its shard; allgather the new parameters."""
        job = self.job
        for key in order:
            bucket = job.buckets[key[0]][key[1]]
            comm = self.dp if bucket.group == "dp" else self.edp
            if comm is not None:
                t0 = self.comm.now
                yield from _collective(comm, "allgather", bucket.count, job.dtype)
                self.tally.dp += self.comm.now - t0
                self.tally.dp_volume += bucket.count * job.itemsize

    def fsdp_params(self, ops: list[Op]) -> tuple[Any, Any]:
        """ZeRO 3: a stream that allgathers parameters one unit ahead of the compute that needs them.

        Every pass needs the embedding and output first, then each layer's parameters (FSDP
        frees them after use, so backward gathers them again). Returns (the stream's process,
        ``wait()`` for a pass to call before each unit).
        """
        job = self.job
        units = [u for _ in ops for u in [job.fsdp_rest] + [job.fsdp_layer] * job.layers_per_chunk]
        have = [self.comm.env.event() for _ in units]
        may_start = [self.comm.env.event() for _ in units]
        may_start[0].succeed()
        cursor = 0

        def stream() -> Proc[None]:
            for u, count in enumerate(units):
                yield may_start[u]
                t0 = self.comm.now
                yield from _collective(self.dp_params, "allgather", count, job.dtype)
                self.tally.dp += self.comm.now - t0
                self.tally.dp_volume += count * job.itemsize
                have[u].succeed()

        def wait() -> Proc[None]:
            nonlocal cursor
            u, cursor = cursor, cursor + 1
            if u + 1 < len(units):
                may_start[u + 1].succeed()  # prefetch the next unit while this one computes
            if not have[u].triggered:
                yield have[u]

        return self.comm.start(stream()), wait

    # ------------------------------------------------------------------ one rank's program

    def run(self) -> Proc[None]:
        job, env = self.job, self.comm.env
        ops = schedule(job.params.schedule, self.coords.pp, job.stages, job.micro_batches, job.params.chunks)
        last_backward = {op.chunk: i for i, op in enumerate(ops) if op.kind == "B"}
        self.tally.start = self.comm.now
        for iteration in range(job.params.iterations):
            order: list[tuple[int, int]] = []
            ready: dict[tuple[int, int], Any] = {}
            for i, op in enumerate(ops):
                if op.kind == "B" and last_backward[op.chunk] == i:
                    vs = virtual_stage(self.coords.pp, op.chunk, job.stages)
                    order += [(vs, k) for k in range(len(job.buckets[vs]))]
            for key in order:
                ready[key] = env.event()
            sync = self.comm.start(self.sync_stream(order, ready)) if job.params.overlap_dp else None
            params_stream, params_ready = (self.fsdp_params(ops) if self.dp_params is not None else (None, None))
            for i, op in enumerate(ops):
                if op.kind == "F":
                    yield from self.forward(iteration, op, params_ready)
                    continue
                chunk_ready = None
                if last_backward[op.chunk] == i:
                    vs = virtual_stage(self.coords.pp, op.chunk, job.stages)
                    chunk_ready = [ready[(vs, k)] for k in range(len(job.buckets[vs]))]
                yield from self.backward(iteration, op, chunk_ready, params_ready)
            if sync is None:
                yield from self.sync_stream(order, ready)
            else:
                yield sync
            if params_stream is not None:
                yield params_stream
            if job.params.zero in (1, 2):
                yield from self.gather_updated(order)
            if self.sends:
                t0 = self.comm.now
                yield from self.comm.waitall(self.sends)
                self.tally.pp += self.comm.now - t0
                self.sends = []
        self.tally.end = self.comm.now


def play(job: Job, world: World) -> _Shared:
    """Run *job* on *world*: every rank, or with folding tp rank 0 of each tensor-parallel group."""
    shared = _Shared()
    ranks = [r for r in range(world.size) if not job.fold or job.layout.coords(r).tp == 0]

    def program(comm: Comm) -> Proc[None]:
        yield from _Rank(job, comm, shared).run()

    world.launch(program, ranks=ranks)
    world.run()
    return shared
