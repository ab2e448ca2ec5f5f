"""Playing one training iteration: what every GPU runs, in simulated time.

Each rank is one GPU at ``(tp, pp, dp)`` of the :class:`~mpisim.workloads.training.layout.Layout`.
It runs its pipeline stage's :func:`~mpisim.workloads.training.schedule.schedule` pass by pass:

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

**Data-parallel sync.** Gradients are packed into buckets (DDP's assignment,
:mod:`~mpisim.workloads.training.buckets`); during the last micro-batch's backward each bucket
becomes ready when its last layer is done and, with ``overlap: {dp: true}``, a stream per rank
reduces the buckets one after another while backward goes on: an allreduce (ZeRO 0), a
reduce-scatter and a final allgather of the updated parameters (ZeRO 1 and 2). ZeRO 3 (FSDP)
allgathers every layer's parameters before its forward and again before its backward (one layer
ahead, as FSDP prefetches) and reduce-scatters its gradients after its backward, in every
micro-batch: a GPU keeps only its shard of the gradients, so there is nothing to accumulate. All of these
are real collective calls on real communicators (:meth:`~mpisim.mpi.comm.Comm.sub`), so
tensor-, pipeline- and data-parallel traffic contend wherever they share links.

**The data-parallel form** (``params:``, :mod:`~mpisim.workloads.training.ddp`) is this program at
tp = pp = 1 with one micro-batch of a flat model: a forward, then a backward cut at the end of
each layer (:attr:`~mpisim.workloads.training.plan.Job.ticks`) that readies the buckets, while
the stream reduces them -- in the wire format, as a top-k allgather, or on real data checked
against numpy (:meth:`_Rank.ddp_reduce`). The ranks that start that backward together share one
process for it (:func:`_start_backward`): a 1000-rank job waits once per layer, not 1000 times.


**What the row says**, for the rank that finishes last (the critical path): ``compute_s``
(its compute, recomputation included), ``tp_comm_s`` and ``ep_comm_s`` (time in its
tensor-parallel and expert-parallel collectives), ``bubble_s`` (time waiting for a pipeline
input the neighbour had not yet produced: the schedule's bubble), ``pp_comm_s`` (waiting for
one already sent: the transfer), ``dp_comm_s`` (the duration of its data-parallel
collectives, hidden or not) and ``exposed_comm_s`` (iteration - compute - bubble: the
communication on the critical path).
"""

from __future__ import annotations

import functools
import math
import weakref
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mpisim.collectives import dispatch
from mpisim.collectives.calls import world_table
from mpisim.engine.records import SpanRecord
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.ops import SUM
from mpisim.mpi.payload import DataPayload, Payload, SizePayload
from mpisim.mpi.world import World
from mpisim.workloads.training.ddp import (
    INDEX_DTYPE,
    check_average,
    gradients,
    pack,
    topk_count,
    topk_select,
    unpack_sum,
)
from mpisim.workloads.training.folded import credit_folded_tp
from mpisim.workloads.training.plan import Job, run_collective, tp_blocks, tp_calls
from mpisim.workloads.training.replicas import credit_folded_dp, replica_ranks
from mpisim.workloads.training.schedule import Op, schedule, virtual_stage

__all__ = ["Tally", "layers_are_one_delay", "play"]

# ---------------------------------------------------------------------------------------------
# The ranks


def layers_are_one_delay(job: Job, folded: bool, record_spans: bool) -> bool:
    """Whether a rank plays layers in a row as one delay (:meth:`_Rank.layers`): with folded
    tensor-parallel groups, no expert all-to-alls between layers and no timeline to draw."""
    return folded and not (job.layout.ep > 1 and job.params.model.moe) and not record_spans


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
    dp_calls: Counter[tuple] = field(default_factory=Counter)  # folded replicas: dp_times key -> calls


@dataclass
class _Shared:
    """What the ranks of one play share: pipeline send times, tallies, and the data-parallel form's record."""

    posted: dict[tuple[int, int, int], float] = field(default_factory=dict)  # (src, dst, tag) -> time sent
    tallies: dict[int, Tally] = field(default_factory=lambda: defaultdict(Tally))
    #: The data-parallel form (job.ddp): every gradient collective's [first entry, last exit] over
    #: the ranks (a pair per call, not per rank and call: a step can have 200,000 buckets), the
    #: calls each rank made so far, the numpy checks of real data, and the algorithms that ran.
    spans: list[list[float]] = field(default_factory=list)
    calls: Counter[int] = field(default_factory=Counter)
    results: list[bool] = field(default_factory=list)
    ran: set[str] = field(default_factory=set)


class _BucketsReady:
    """When one rank's gradient buckets of an iteration are ready, without an event per bucket.

    The sync stream reduces the buckets in the order backward readies them (``order`` in
    :meth:`_Rank.run`), so readiness is one sequence: bucket n is ready once :meth:`fire` has been
    called n + 1 times. An event exists only while it matters: from its firing until SimPy
    processes it (the same instant), or while the stream waits for a bucket not yet fired. What
    the stream sees is what a list of an event per bucket made up front gave it -- a bucket
    whose event was processed is passed without waiting, one fired but not yet processed, or
    not yet fired, is waited for -- so the run is the same, event for event; but a step of
    218,735 buckets on 32 ranks holds a few events instead of 7 million, whose garbage
    collection over a heap of gigabytes would hold a wall-time limit off by seconds.
    """

    __slots__ = ("env", "fired", "pending")

    def __init__(self, env: Any) -> None:
        self.env = env
        self.fired = 0  # buckets fired: 0 .. fired - 1
        self.pending: dict[int, Any] = {}  # bucket -> its event, from its first use until SimPy processed it

    def fire(self) -> None:
        """The next bucket is ready."""
        n, self.fired = self.fired, self.fired + 1
        event = self.pending.get(n)
        if event is None:
            event = self.pending[n] = self.env.event()
        event.callbacks.append(functools.partial(self._processed, n))
        event.succeed()

    def _processed(self, n: int, _event: Any) -> None:
        del self.pending[n]

    def wait(self, n: int) -> Any:
        """The event to wait for before reducing bucket *n*, or None when it was ready before now."""
        event = self.pending.get(n)
        if event is None:
            if n < self.fired:  # fired and processed
                return None
            event = self.pending[n] = self.env.event()
        return event


def _bucket_keys(order: list[tuple[int, int]], job: Job) -> Any:
    """The (virtual stage, bucket) of every bucket of *order*'s backward passes, in reduction order."""
    for vs, _ in order:
        for k in range(len(job.buckets[vs])):
            yield vs, k


class _Rank:
    """One simulated GPU: its communicators, its schedule, and its accounting."""

    def __init__(self, job: Job, comm: Comm, shared: _Shared) -> None:
        self.job, self.comm, self.shared = job, comm, shared
        layout = job.layout
        me = comm.rank
        self.coords = layout.coords(me)
        self.tally = shared.tallies[me]
        self.tp = comm.sub(layout.group(me, "tp"), "tp") if layout.tp > 1 and not job.fold else None
        # A data-parallel group of every rank (tp = pp = 1) is the world's communicator itself:
        # no group of p ranks built on each of p ranks.
        whole = layout.dp == comm.size
        dp_group = range(comm.size) if whole else layout.group(me, "dp")
        self.dp = (comm if whole else comm.sub(dp_group, "dp")) if layout.dp > 1 else None
        self.dp_params = comm.sub(dp_group, "dp-params") if layout.dp > 1 and job.params.zero == 3 else None
        self.ep = comm.sub(layout.ep_group(me), "ep") if layout.ep > 1 else None
        edp = layout.edp_group(me) if job.params.model.moe else ()  # only experts' gradients use it
        self.edp = comm.sub(edp, "edp") if len(edp) > 1 else None
        self.pp_group = layout.group(me, "pp")
        self.sends: list[Any] = []
        # Folded tensor-parallel collectives are fixed delays (job.tp_times): where nothing can
        # happen between a layer's compute and them -- no expert all-to-alls, no timeline to
        # draw -- layers in a row are one delay (see layers()).
        self.layer_is_one_delay = layers_are_one_delay(job, job.fold, comm.world.tracer.record_spans)

    # ------------------------------------------------------------------ communication pieces

    def tprun_collective(self, kind: str, count: int) -> Proc[None]:
        t0 = self.comm.now
        self.tally.tp_calls[(kind, count)] += 1
        if self.job.fold:
            yield self.comm.env.timeout(self.job.tp_times[(kind, count)])
        else:
            yield from run_collective(self.tp, kind, count, self.job.dtype)
        self.tally.tp += self.comm.now - t0

    def layers(self, count: int, seconds: float, label: str, passes: int) -> Proc[None]:
        """*count* layers in a row, each *seconds* of compute, then the tensor- and expert-parallel
        collectives of *passes* passes.

        With folded tensor-parallel groups and nothing else between them (``layer_is_one_delay``)
        the layers are a single delay of the same length, tallied the same way: one event where
        each layer's compute and each of its collectives would take one (5 per layer forward, 9
        backward with recomputation), which is most of a 100 000-GPU layout's events.
        """
        # Megatron's tp-comm-overlap: the collectives run in chunks under the GEMMs next to them
        # (an allgather under the GEMM that consumes it, a reduce-scatter under the one that
        # produces it), so only the GEMMs' share of the compute can hide them.
        hiding = self.job.gemm_share * seconds if self.job.params.overlap_tp and tp_calls(self.job) else 0.0
        if not self.layer_is_one_delay:
            for _ in range(count):
                if not hiding:
                    yield from self.compute(seconds, label)
                    yield from self.layer_comm(passes)
                    continue
                yield from self.compute(seconds - hiding, label)
                behind = self.comm.start(self.layer_comm(passes, ep=False))
                yield from self.compute(hiding, label)
                yield behind
                yield from self.layer_comm(passes, tp=False)
            return
        tp = 0.0
        for kind, count_ in tp_calls(self.job) * (tp_blocks(self.job) * passes):
            tp += self.job.tp_times[(kind, count_)]
            self.tally.tp_calls[(kind, count_)] += count
        self.tally.compute += count * seconds
        self.tally.tp += count * tp
        yield self.comm.env.timeout(count * (seconds + max(0.0, tp - hiding)))

    def layer_comm(self, passes: int, tp: bool = True, ep: bool = True) -> Proc[None]:
        """The tensor- and expert-parallel collectives of *passes* forward-like passes through one layer."""
        job = self.job
        for _ in range(passes):
            for _ in range(tp_blocks(job) if tp else 0):
                for kind, count in tp_calls(job):
                    yield from self.tprun_collective(kind, count)
            if ep and self.ep is not None and job.params.model.moe:
                for _ in range(2):  # dispatch and combine
                    t0 = self.comm.now
                    yield from run_collective(self.ep, "alltoall", job.a2a_count, job.dtype)
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
            yield from self.tprun_collective("allgather", job.tp_count)  # scatter-gather: rebuild b s h

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
        label = _label(job, op)
        if params_ready is not None:
            yield from params_ready()  # ZeRO 3: embedding and output
        layers = job.chunk_layers[vs]
        if params_ready is None:
            yield from self.layers(layers, job.forward_layer_s, label, 1)
        for _ in range(layers if params_ready is not None else 0):
            yield from params_ready()  # ZeRO 3: each layer's parameters before its compute
            yield from self.layers(1, job.forward_layer_s, label, 1)
        if vs == job.virtual_stages - 1:
            yield from self.compute(job.logits_forward_s, label)
        else:
            self.send(vs + 1, self.tag(iteration, op.micro, vs, False))

    def backward(self, iteration: int, op: Op, ready: _BucketsReady | None, params_ready: Any) -> Proc[None]:
        """The backward pass of *op*; *ready* (when its buckets are reduced after it) fires them."""
        job = self.job
        vs = virtual_stage(self.coords.pp, op.chunk, job.stages)
        label = _label(job, op)
        if vs < job.virtual_stages - 1:
            yield from self.receive(vs + 1, self.tag(iteration, op.micro, vs, True))
        else:
            yield from self.compute(job.logits_backward_s, label)
        buckets = job.buckets[vs]
        fired = 0

        def fire(done: float) -> None:
            nonlocal fired
            while ready is not None and fired < len(buckets) and buckets[fired].ready <= done:
                ready.fire()
                fired += 1

        if job.params.model.flat:
            if ready is None:
                yield from self.compute(job.backward_layer_s, label)
            else:  # bucket k is ready at its fraction of the backward (_start_backward)
                self.tally.compute += job.backward_layer_s
                yield _start_backward(self.comm, job, ready, label)
                fired = len(buckets)
        else:
            fire(0)
            if params_ready is not None:
                yield from params_ready()
            passes = 2 if job.params.recompute == "full" else 1
            layer = 0
            layers = job.chunk_layers[vs]
            while layer < layers:
                if params_ready is not None:
                    yield from params_ready()  # ZeRO 3: each layer's parameters before its compute
                    upto = layer + 1
                else:  # on to the next layer whose end readies a bucket: nothing happens before
                    upto = layers
                    if ready is not None and fired < len(buckets):
                        upto = min(upto, max(layer + 1, math.ceil(buckets[fired].ready)))
                yield from self.layers(upto - layer, job.backward_layer_s, label, passes)
                layer = upto
                fire(layer)
        fire(math.inf)
        if vs > 0:
            self.send(vs - 1, self.tag(iteration, op.micro, vs - 1, True))

    # ------------------------------------------------------------------ data parallelism

    def dp_collective(self, comm: Comm, group: str, kind: str, count: int, dtype: np.dtype,
                      algorithm: str | None = None) -> Proc[None]:
        """A data-parallel collective: on *comm*, or with folded replicas its time on the whole fabric."""
        if self.job.dp_times:
            key = (self.coords.pp, group, kind, count, np.dtype(dtype).str)
            self.tally.dp_calls[key] += 1
            yield self.comm.env.timeout(self.job.dp_times[key])
        else:
            yield from run_collective(comm, kind, count, dtype, algorithm)

    def sync_stream(self, order: list[tuple[int, int]], ready: _BucketsReady) -> Proc[None]:
        """Reduce the gradient buckets one after another, each once it is ready (one stream)."""
        job = self.job
        for n, key in enumerate(_bucket_keys(order, job)):
            event = ready.wait(n)
            if event is not None:
                yield event
            bucket = job.buckets[key[0]][key[1]]
            comm = self.dp if bucket.group == "dp" else self.edp
            if comm is None:
                continue
            t0 = self.comm.now
            if job.ddp is not None:
                yield from self.ddp_reduce(comm, key[1])
            elif job.params.zero == 0:
                yield from self.dp_collective(comm, bucket.group, "allreduce", bucket.count, job.reduce_dtype,
                                              job.params.sync)
                self.tally.dp_volume += 2 * bucket.count * job.reduce_dtype.itemsize
            else:
                yield from self.dp_collective(comm, bucket.group, "reduce_scatter", bucket.count, job.reduce_dtype)
                self.tally.dp_volume += bucket.count * job.reduce_dtype.itemsize
            self.tally.dp += self.comm.now - t0

    def ddp_reduce(self, comm: Comm, k: int) -> Proc[None]:
        """The data-parallel form's sync of bucket *k*: an allreduce of the gradients in the wire
        dtype, or with top-k an allgather of the packed (values, indices); real data is checked."""
        plan, p = self.job.ddp, comm.size
        bucket = plan.buckets[k]
        t_enter = comm.now
        if plan.topk is None:
            grad = gradients(plan, k, comm.rank) if plan.data else None
            buf: Payload = DataPayload(grad) if grad is not None else SizePayload(bucket.count, plan.wire_dtype)
            if comm.rank == 0:
                # The call as dispatch resolves it, once per bucket shape (the same object the call runs).
                self.shared.ran.add(dispatch.prepare(comm, "allreduce", plan.sync, buf.nbytes, SUM, 0,
                                                     buf.dtype.itemsize).algorithm.name)
            out = yield from comm.allreduce(buf, op=SUM, algorithm=plan.sync)
            if plan.data:
                self.shared.results.append(check_average(plan, k, p, out.array / p))
        else:
            keep = topk_count(plan.topk, bucket.count)
            nbytes = keep * (plan.wire_dtype.itemsize + INDEX_DTYPE.itemsize)
            if plan.data:
                buf = DataPayload(pack(*topk_select(gradients(plan, k, comm.rank), keep)))
            else:
                buf = SizePayload(nbytes, np.uint8)
            if comm.rank == 0:
                self.shared.ran.add(dispatch.prepare(comm, "allgather", None, buf.nbytes, SUM, 0,
                                                     buf.dtype.itemsize).algorithm.name + " allgather")
            out = yield from comm.allgather(buf)
            if plan.data:
                dense = unpack_sum(out.array, p, keep, bucket.count, plan.wire_dtype)
                self.shared.results.append(check_average(plan, k, p, dense / p))
        spans, call = self.shared.spans, self.shared.calls[comm.rank]
        self.shared.calls[comm.rank] += 1
        if call == len(spans):
            spans.append([t_enter, comm.now])
        else:
            span = spans[call]
            span[0], span[1] = min(span[0], t_enter), max(span[1], comm.now)

    def gather_updated(self, order: list[tuple[int, int]]) -> Proc[None]:
        """ZeRO 1 and 2: every rank updated its shard; allgather the new parameters."""
        job = self.job
        for key in _bucket_keys(order, job):
            bucket = job.buckets[key[0]][key[1]]
            comm = self.dp if bucket.group == "dp" else self.edp
            if comm is not None:
                t0 = self.comm.now
                yield from self.dp_collective(comm, bucket.group, "allgather", bucket.count, job.dtype)
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
                yield from self.dp_collective(self.dp_params, "dp-params", "allgather", count, job.dtype)
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
        every_backward = job.params.zero == 3 and job.ddp is None
        self.tally.start = self.comm.now
        for iteration in range(job.params.iterations):
            # (virtual stage, pass) of the backward passes whose buckets are reduced, in order: DDP and
            # ZeRO 1-2 accumulate gradients over the micro-batches and reduce the last backward's; ZeRO 3
            # (FSDP) keeps only its shard of them, so it reduce-scatters every micro-batch's gradients
            # as its backward makes them.
            order = [(virtual_stage(self.coords.pp, op.chunk, job.stages), i) for i, op in enumerate(ops)
                     if op.kind == "B" and (last_backward[op.chunk] == i or every_backward)]
            ready = _BucketsReady(env)
            sync = self.comm.start(self.sync_stream(order, ready)) if job.params.overlap_dp else None
            params_stream, params_ready = (self.fsdp_params(ops) if self.dp_params is not None else (None, None))
            for i, op in enumerate(ops):
                if op.kind == "F":
                    yield from self.forward(iteration, op, params_ready)
                    continue
                reduced = last_backward[op.chunk] == i or every_backward
                yield from self.backward(iteration, op, ready if reduced else None, params_ready)
            if sync is None:
                yield from self.sync_stream(order, ready)
            else:
                yield sync
            if params_stream is not None:
                yield params_stream
            if job.step_s:  # the optimizer updates what the sync reduced (FP8: and recasts the weights)
                yield from self.compute(job.step_s, "optimizer")
            if job.params.zero in (1, 2):
                yield from self.gather_updated(order)
            if self.sends:
                t0 = self.comm.now
                yield from self.comm.waitall(self.sends)
                self.tally.pp += self.comm.now - t0
                self.sends = []
        self.tally.end = self.comm.now


def _label(job: Job, op: Op) -> str:
    """A pass's name on the timeline: ``F3`` / ``B3.1`` (micro-batch 3, chunk 1); the data-parallel
    form's one micro-batch is ``forward`` / ``backward``."""
    if job.ddp is not None:
        return "forward" if op.kind == "F" else "backward"
    return f"{op.kind}{op.micro}" + (f".{op.chunk}" if job.params.chunks > 1 else "")


# ---------------------------------------------------------------------------------------------
# A flat model's last backward, shared by the ranks that start it together


def _backward(comm: Comm, job: Job, t_start: float, ready: _BucketsReady, label: str) -> Proc[None]:
    """Compute the backward pass tick by tick (:attr:`Job.ticks`), firing each bucket's event when it is ready.

    Each tick ends at an absolute time ``t_start + fraction x backward``, so rounding does not
    accumulate over thousands of layers.
    """
    buckets, k = job.buckets[0], 0
    for fraction in job.ticks:
        yield from comm.compute(t_start + fraction * job.backward_layer_s - comm.now, label)
        while k < len(buckets) and buckets[k].ready <= fraction:
            ready.fire()
            k += 1


class _SharedBackward:
    """The ranks whose backward pass of one job starts at one instant: one timeline for them all."""

    __slots__ = ("members",)

    def __init__(self) -> None:
        self.members: list[tuple[int, _BucketsReady, Any]] = []  # (world rank, its buckets, end event)


#: Per world: the shared backward pass of each (job, start instant) still taking members.
_SHARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _start_backward(comm: Comm, job: Job, ready: _BucketsReady, label: str) -> Any:
    """Start this rank's backward pass now (:func:`_backward`); return the event of its end.

    Every rank of a data-parallel job runs the same backward timeline, and all of them start
    it at one instant: they share one process (:func:`_shared_backward`) that waits for each
    tick once, where a process per rank waits once per rank. What each rank sees is
    unchanged: its bucket events, its end event and its compute spans come at the same times
    and in the same order as its own process would have given them. A pass whose first tick
    takes no time runs per rank (its process would act before the other ranks have joined).
    """
    env = comm.env
    now = env.now
    if not job.ticks or not now + job.ticks[0] * job.backward_layer_s - now > 0:
        return env.process(_backward(comm, job, now, ready, label))
    table = world_table(_SHARED, comm.world)
    key = (id(job), now)  # the job is alive while the key is: its id is its own
    shared = table.get(key)
    if shared is None:
        shared = table[key] = _SharedBackward()
        env.process(_shared_backward(comm, job, now, shared, table, key, label))
    done = env.event()
    shared.members.append((comm.world_rank, ready, done))
    return done


def _shared_backward(comm: Comm, job: Job, t_start: float, shared: _SharedBackward, table: dict,
                     key: tuple, label: str) -> Proc[None]:
    """:func:`_backward` for every member of *shared*, one wait per tick for them all.

    Between two waits, each member in turn does what its own process would have done between
    the same two waits (the compute span of the tick just waited for, the buckets made
    ready, its end); the members go in the order they joined, which is the order in which
    their own processes' waits would have ended.
    """
    env = comm.env
    tracer = comm.world.tracer
    buckets, k = job.buckets[0], 0
    members = shared.members
    t_span = None  # (start, end) of the tick just waited for
    k_from = 0
    for fraction in job.ticks:
        delay = t_start + fraction * job.backward_layer_s - env.now
        if delay > 0:
            _act(members, tracer, t_span, k_from, k, None, label)
            t0 = env.now
            yield env.timeout(delay)
            if table.get(key) is shared:
                del table[key]  # time has moved on: nobody else can start at t_start
            t_span, k_from = (t0, env.now), k
        while k < len(buckets) and buckets[k].ready <= fraction:
            k += 1
    _act(members, tracer, t_span, k_from, k, True, label)


def _act(members: list[tuple[int, _BucketsReady, Any]], tracer: Any, t_span: tuple[float, float] | None,
         k_from: int, k_to: int, end: bool | None, label: str) -> None:
    """Each member's share of one wake-up of a shared backward pass (see _shared_backward)."""
    for rank, ready, done in members:
        if t_span is not None and tracer.record_spans:
            tracer.span(SpanRecord(rank, "compute", t_span[0], t_span[1], label))
        for _ in range(k_from, k_to):
            ready.fire()
        if end:
            done.succeed()


def play(job: Job, world: World) -> _Shared:
    """Run *job* on *world*: every rank, or with folding tp rank 0 of each tensor-parallel group
    and, with folded replicas, of replica 0 only."""
    shared = _Shared()
    ranks = [r for r in range(world.size) if not job.fold or job.layout.coords(r).tp == 0]
    if job.dp_times:
        ranks = replica_ranks(job, ranks)

    def program(comm: Comm) -> Proc[None]:
        yield from _Rank(job, comm, shared).run()

    world.launch(program, ranks=ranks)
    world.run()
    credit_folded_tp(job, world, {rank: tally.tp_calls for rank, tally in shared.tallies.items()})
    credit_folded_dp(job, world, {rank: tally.dp_calls for rank, tally in shared.tallies.items()})
    return shared
