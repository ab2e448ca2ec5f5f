"""What a run will cost before it starts: events, memory and wall time, from ranks, algorithm and sizes.

A scenario can ask for far more than a machine can give: 100,000 ranks running a ring
allreduce hold 100,000 block views each (10^10 objects), and the run would grow until the
machine's memory is gone. :func:`estimate` adds up, per world a run makes:

* **messages**: the closed form's latency term counts the steps on the critical path
  (``predict(alpha=1, beta=0)``: 2(p-1) for the ring, 2 log2 p for recursive doubling); every
  rank sends about one message per step, so p times that, and about
  :data:`EVENTS_PER_MESSAGE` simulation events each (measured: 4.0 for a 256-rank ring, 5.3
  for recursive doubling);
* **memory**: the simulator's own objects -- :data:`RANK_BYTES` per rank (its process,
  mailbox and requests) and :data:`VIEW_BYTES` per block view an algorithm keeps (a rank of a
  ring allreduce cuts its buffer into p views, so p^2 of them in all: measured 54-56 B each at
  1000 to 4000 ranks) -- plus message and span records (at most
  :data:`~mpisim.scenario.tracing.RECORD_BUDGET` of each, about :data:`RECORD_BYTES` apiece) and,
  with real data, the payload arrays (:mod:`mpisim.collectives.memory`); a collective
  workload's ring or barrier at collective fidelity runs as one batch with no process per rank
  (:mod:`mpisim.collectives.bulk`), :data:`BATCH_RANK_BYTES` per rank;
* **peers**: :data:`PAIR_BYTES` for every pair of ranks that exchange a message -- the
  network's route between them and its links' entries, cached for the next message, and
  MPI's sequence number of the pair (a dissemination barrier over p ranks has p log2 p pairs:
  measured 14.3 KB per rank at 5,000 to 40,000 ranks, two thirds of it these);
* **wall time**: events times :data:`SECONDS_PER_EVENT` (a 1024-rank ring, 8.4 million events,
  takes 54 s).

The estimate counts what the run will run: ``auto`` algorithms are resolved first (by the
scenario's rule set; NCCL's tuner, which needs a world, is counted as its ring, the most
events of its choices) and ``fidelity: auto`` too (:mod:`mpisim.scenario.fidelity`, with the
twins' validated regions of :mod:`mpisim.collectives.fluid.validated`), so a call that will
run as a twin is counted as one, a call that will send its messages as messages.

A training iteration is counted from its plan (:func:`~mpisim.workloads.training.plan.plan_job`,
the job the ranks will play, derived without a world): its buckets, micro-batches, layers per
stage and tensor-parallel calls, each collective counted as above.

These are estimates to within a factor of about two, meant to tell a 10 s run from a 10 day
one and a run that fits from one that cannot. :func:`check_fits` refuses (a ConfigError, exit 2)
a run whose simulator memory would exceed what the machine has available, naming what to change;
real-data payloads are refused by the workloads themselves, per point (``payload: size``).
A user program's messages cannot be known before it runs: only its ranks are counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mpisim.collectives import costmodel, memory, registry
from mpisim.collectives.fluid.validated import REGIONS
from mpisim.collectives.select import mpich
from mpisim.collectives.select.nccl import NCCL_ONLY
from mpisim.errors import ConfigError
from mpisim.mpi.dtypes import DTYPES
from mpisim.mpi.ops import SUM
from mpisim.network.topology import TopologySpec
from mpisim.scenario.fidelity import resolve as resolve_fidelity
from mpisim.scenario.load import load_dict, point_raw
from mpisim.scenario.model import Scenario, sweep_points
from mpisim.scenario.tracing import RECORD_BUDGET, trace_records
from mpisim.workloads.training.config import HybridParams
from mpisim.workloads.training.ddp import INDEX_DTYPE, TrainingParams, make_plan, topk_count
from mpisim.workloads.training.layout import Layout
from mpisim.workloads.training.plan import foldable, plan_job, tp_blocks, tp_calls
from mpisim.workloads.training.play import layers_are_one_delay
from mpisim.workloads.training.replicas import fold_reason
from mpisim.workloads.training.schedule import virtual_stage

__all__ = ["Estimate", "check_fits", "estimate", "run_estimate"]

EVENTS_PER_MESSAGE = 5
SECONDS_PER_EVENT = 7e-6
#: Building a world and its ranks' processes, whatever they then run (a step program's call
#: is a few events per rank; its world is most of its time).
SECONDS_PER_WORLD = 0.02
SECONDS_PER_RANK = 5e-5
#: Per rank: its process, mailbox (two matching queues), state and requests -- the growth of
#: tracemalloc's peak per rank of a ring allreduce from 100 to 900 ranks, caches warmed: 8.2 KB.
RANK_BYTES = 8192
VIEW_BYTES = 56
#: A size-only block view: blocks of one size are one shared object, so a view is its list slots.
SHARED_VIEW_BYTES = 16
RECORD_BYTES = 200
#: Per gradient bucket of a training job, once for all its GPUs: the plan's bucket and the job's
#: (tracemalloc: 176 B apiece). The ranks hold no event per bucket, only the few fired and not yet
#: processed (mpisim.workloads.training.play._BucketsReady): with an event per GPU and bucket
#: (309 B each) a bucket_cap far below the model's size made gigabytes, whose garbage collection
#: held a wall-time limit off by seconds.
BUCKET_BYTES = 200
#: A pair of ranks that exchanged a message: its cached route and link entries and its sequence
#: number (resident size, allocator included: measured with dissemination barriers of 5,000 to
#: 40,000 ranks, 13 to 16 peers each).
PAIR_BYTES = 600
#: The interpreter, numpy and mpisim before any world exists.
BASE_BYTES = 80 * 2**20
#: A run whose estimate is longer than this is announced before it starts.
LONG_RUN_S = 10.0
#: Runs estimated longer than this (a day) start only when asked (``--long-run``, or a wall_time limit).
REFUSED_RUN_S = 86_400.0

#: Collectives whose every rank holds one block view per rank (results of p parts, or p parts to send).
_P_VIEW_COLLECTIVES = frozenset({"allgather", "alltoall", "reduce_scatter", "gather", "scatter"})
#: Algorithms that cut every rank's buffer into p blocks (ring and scatter-allgather schemes).
_P_VIEW_ALGORITHMS = frozenset({"ring", "rabenseifner", "nccl_ring", "scatter_ring_allgather",
                                "scatter_recursive_doubling_allgather"})

#: Algorithms that at ``fidelity: collective`` with size-only data run as step programs
#: (mpisim.collectives.fluid.mpi_ring): no blocks per rank, a few events per rank per call.
_STEP_PROGRAMS = frozenset({("allreduce", "ring"), ("allgather", "ring"), ("reduce_scatter", "ring"),
                            ("barrier", "dissemination"), ("allreduce", "double_binary_tree")})
#: NCCL's algorithms whose twins time a call as flows (one per hop or tree edge), where validated.
_FLUID_TWINS = frozenset({("allreduce", "nccl_ring"), ("allgather", "nccl_ring"), ("reduce_scatter", "nccl_ring"),
                          ("allreduce", "nccl_tree")})
#: Events per rank of a step program's call (joining, leaving, its flow).
_STEP_PROGRAM_EVENTS = 4
#: Step programs that a collective workload runs as one batch, without a process per rank
#: (:mod:`mpisim.collectives.bulk`): a few events per call, whatever the ranks.
_BATCHED = frozenset({("allreduce", "ring"), ("allgather", "ring"), ("reduce_scatter", "ring"),
                      ("barrier", "dissemination")})
_BATCH_EVENTS = 20
#: Per rank of a batched call: no process, its communicator, state, mailbox, route and hop
#: costs -- the growth of the peak from 131,072 to 262,144 ranks of a ring allreduce: 3.7 KB.
BATCH_RANK_BYTES = 4096


@dataclass(frozen=True)
class Estimate:
    """The cost of a run (or of one world: :func:`call_estimate`)."""

    events: int
    memory: int  # peak bytes
    wall_s: float
    #: What dominates the memory, for messages: ``"64 ranks x ring allreduce: ..."``.
    detail: str = ""
    #: Whether the number of events is known (a user program's is not).
    events_known: bool = True
    #: Of :attr:`memory`, the real-data payloads (the workloads check those themselves, per point,
    #: with the algorithm resolved: see mpisim.collectives.memory).
    payload: int = 0

    @property
    def new_memory(self) -> int:
        """What the run adds to a process that has imported mpisim: the part compared with free memory."""
        return self.memory - BASE_BYTES

    def describe(self) -> str:
        """``~2.1e+10 events, ~560 GB of memory, ~1.7 days``."""
        events = f"~{self.events:.2g} events" if self.events_known else "events unknown (a user program)"
        return f"{events}, ~{_bytes(self.memory)} of memory, ~{_duration(self.wall_s)}"


def _steps(collective: str, algorithm: str | None, p: int, nbytes: int) -> float:
    """Latency steps on the critical path (the closed form's alpha coefficient)."""
    if p <= 1:
        return 0.0
    if algorithm not in (None, "auto"):
        try:
            return max(1.0, costmodel.predict(collective, algorithm, p, nbytes, 1.0, 0.0, 0.0))
        except (ValueError, KeyError, ZeroDivisionError, ConfigError):
            pass
    return 2.0 * math.ceil(math.log2(p))  # what auto picks at scale: logarithmic schemes


def resolve_algorithm(scenario: Scenario, collective: str, algorithm: str | None, nbytes: int,
                      itemsize: int = 4) -> str:
    """The algorithm a call of *collective* with nccl-tests size *nbytes* will run (``auto`` resolved).

    MPICH's rules need only the rank count, size and datatype; NCCL's tuner needs a world, so
    its allreduce, allgather and reduce-scatter count as ``nccl_ring`` (its choice from a few
    MiB up, and the most events of its choices below); the ``model`` rule set counts as MPICH's.
    """
    name = algorithm or scenario.algorithms.per_collective.get(collective) or "auto"
    if name != "auto":
        return name
    p = scenario.ranks
    if scenario.algorithms.selector == "nccl" and p > 1:
        if collective in ("allreduce", "allgather", "reduce_scatter"):
            return "nccl_ring"
        if collective in NCCL_ONLY:
            return NCCL_ONLY[collective]
    chosen = mpich.choose(collective, p, nbytes, SUM, itemsize)
    candidates = [a.name for a in registry.available(collective) if a.allows(p) and a.runs_on(scenario.topology)]
    return chosen if chosen in candidates or not candidates else candidates[0]


def runs_as_twin(scenario: Scenario, collective: str, algorithm: str, nbytes: int, data: bool) -> bool:
    """True if the run will time this call as a whole (a step program or a twin's flows), not as messages."""
    fidelity = resolve_fidelity(scenario)
    if data or fidelity.fidelity != "collective":
        return False
    if (collective, algorithm) in _STEP_PROGRAMS:
        return True
    if (collective, algorithm) in _FLUID_TWINS:
        return not fidelity.validated_only or REGIONS[algorithm](scenario.topology.nodes, nbytes)
    return False


def _views(collective: str, algorithm: str | None, p: int) -> int:
    if collective in _P_VIEW_COLLECTIVES or algorithm in _P_VIEW_ALGORITHMS:
        return p
    return math.ceil(math.log2(max(p, 2))) + 2


def call_estimate(collective: str, algorithm: str | None, p: int, nbytes: int, *, data: bool = False,
                  records: bool = True, calls: int = 1, fidelity: str = "message", batch: bool = False) -> Estimate:
    """The cost of one world running *calls* of one collective on *p* ranks with *nbytes* each.

    *fidelity* ``twin`` says the call runs as a whole (:func:`runs_as_twin`): a few events
    per rank, no blocks per rank. With *batch* (a collective workload's synchronised calls) a
    step program among :data:`_BATCHED` runs as one batch: no process per rank.
    """
    step_program = fidelity == "twin" or (fidelity == "collective" and not data and
                                          (collective, algorithm) in _STEP_PROGRAMS)
    if step_program and batch and not data and (collective, algorithm) in _BATCHED:
        detail = f"{p} ranks x {algorithm} {collective} as a step program, one batch: ranks {_bytes(p * BATCH_RANK_BYTES)}"
        return Estimate(calls * _BATCH_EVENTS, BASE_BYTES + p * BATCH_RANK_BYTES, _world_s(p), detail)
    if step_program:
        events = p * calls * _STEP_PROGRAM_EVENTS
        detail = f"{p} ranks x {algorithm} {collective} as a step program: ranks {_bytes(p * RANK_BYTES)}"
        return Estimate(events, BASE_BYTES + p * RANK_BYTES, events * SECONDS_PER_EVENT + _world_s(p), detail)
    messages = int(_steps(collective, algorithm, p, nbytes) * p * calls)
    events = messages * EVENTS_PER_MESSAGE
    views = _views(collective, algorithm, p)
    view_bytes = p * views * (VIEW_BYTES if data else SHARED_VIEW_BYTES)
    pair_bytes = min(messages, p * _peers(collective, algorithm, p, nbytes)) * PAIR_BYTES
    kept = min(messages, RECORD_BUDGET) * 2 * RECORD_BYTES if records else 0
    payload = 0
    if data:
        try:
            payload = memory.estimate_collective(collective, algorithm or "auto", p, nbytes, data=True).total
        except KeyError:
            payload = 0
    total = BASE_BYTES + p * RANK_BYTES + view_bytes + pair_bytes + kept + payload
    name = algorithm or "auto"
    detail = f"{p} ranks x {name} {collective}: ranks {_bytes(p * RANK_BYTES)}, peers {_bytes(pair_bytes)}"
    if views == p:
        detail += f", {views} block views per rank {_bytes(view_bytes)}"
    if kept:
        detail += f", records {_bytes(kept)}"
    if payload:
        detail += f", payloads {_bytes(payload)}"
    return Estimate(events, total, events * SECONDS_PER_EVENT + _world_s(p), detail, payload=payload)


def _peers(collective: str, algorithm: str | None, p: int, nbytes: int) -> int:
    """The distinct ranks one rank exchanges messages with: two for a ring, p - 1 for an alltoall, else its rounds."""
    if p <= 1:
        return 0
    if algorithm is not None and "ring" in algorithm:
        return 2
    if collective == "alltoall":
        return p - 1
    return max(1, min(p - 1, math.ceil(_steps(collective, algorithm, p, nbytes))))


def _world_s(p: int) -> float:
    return SECONDS_PER_WORLD + p * SECONDS_PER_RANK


def estimate(scenario: Scenario) -> Estimate:
    """Estimate the run of *scenario* (one sweep point: the scenario as resolved, without its sweep)."""
    p = scenario.ranks
    records = any(trace_records(scenario, p))
    data = scenario.payload == "data"
    kind, params = scenario.workload.kind, scenario.workload.params
    worlds: list[Estimate] = []
    if kind == "collective":
        itemsize = _itemsize(params.dtype)
        for requested in params.algorithms or (None,):
            for size in params.sizes:
                algorithm = resolve_algorithm(scenario, params.collective, requested, size, itemsize)
                twin = runs_as_twin(scenario, params.collective, algorithm, size, data)
                worlds.append(call_estimate(params.collective, algorithm, p, size, data=data, records=records,
                                            calls=max(1, params.iterations), batch=True,
                                            fidelity="twin" if twin else resolve_fidelity(scenario).fidelity))
    elif isinstance(params, HybridParams):
        worlds.append(_hybrid_estimate(params, scenario, records, spans=trace_records(scenario, p)[1]))
    elif isinstance(params, TrainingParams):
        worlds.append(_data_parallel_estimate(params, scenario, records))
    else:
        known = kind != "program"
        worlds.append(Estimate(0, BASE_BYTES + p * RANK_BYTES, 0.0, f"{p} ranks", events_known=known))
    events = sum(w.events for w in worlds)
    wall = sum(w.wall_s for w in worlds)
    largest = max(worlds, key=lambda w: w.memory)
    return Estimate(events, largest.memory, wall, largest.detail, events_known=largest.events_known,
                    payload=largest.payload)


def _data_parallel_estimate(params: TrainingParams, scenario: Scenario, records: bool) -> Estimate:
    """A data-parallel iteration: one collective per bucket of its plan, one after another."""
    p = scenario.ranks
    plan = make_plan(params)
    largest = max(b.count for b in plan.buckets)
    if plan.topk is None:
        collective = "allreduce"
        sync = params.sync or scenario.algorithms.per_collective.get("allreduce")
        sync = "ring" if sync == "parameter_server" else sync  # p-1 transfers each way: a ring's count
        nbytes = largest * plan.wire_dtype.itemsize
        sync = resolve_algorithm(scenario, collective, sync, nbytes, plan.wire_dtype.itemsize)
    else:  # the packed top-k entries, allgathered with the scenario's allgather
        collective, sync = "allgather", scenario.algorithms.per_collective.get("allgather")
        nbytes = topk_count(plan.topk, largest) * (plan.wire_dtype.itemsize + INDEX_DTYPE.itemsize)
        sync = resolve_algorithm(scenario, collective, sync, nbytes * p)
    data = scenario.payload == "data"
    twin = runs_as_twin(scenario, collective, sync, nbytes, data)
    per_bucket = call_estimate(collective, sync, p, nbytes, records=records, data=data,
                               fidelity="twin" if twin else resolve_fidelity(scenario).fidelity)
    buckets = len(plan.buckets)
    calls = buckets * params.iterations
    ready = buckets * BUCKET_BYTES  # the plan's buckets, once for all ranks
    return Estimate(per_bucket.events * calls, per_bucket.memory + ready, per_bucket.wall_s * calls,
                    per_bucket.detail.replace(collective, f"{collective} ({buckets} buckets)", 1)
                    + f", gradient buckets {_bytes(ready)}")


def _hybrid_estimate(params: HybridParams, scenario: Scenario, records: bool, *, spans: bool = True) -> Estimate:
    """A hybrid-parallel iteration: simulated GPUs x their passes, collectives and messages, from its plan.

    Within a factor of 4 (tests/workloads/test_hybrid.py): compute passes and folded
    tensor-parallel collectives are one event each -- and without *spans* (a timeline) a
    folded pass's layers are a few events in all (``_Rank.layers``) -- collectives the
    per-call estimate times the GPU library's channels.
    """
    p, spec = scenario.ranks, scenario.topology
    try:
        job = plan_job(params, p, spec)
    except ConfigError:  # the run itself says what is wrong
        return Estimate(0, BASE_BYTES + p * RANK_BYTES, 0.0, f"{p} GPUs")
    layout, micro_batches, chunks = job.layout, job.micro_batches, params.chunks
    tp, dp = layout.tp, layout.dp
    folded = foldable(params, tp, spec)
    simulated = p // tp if folded else p
    # GPU collectives run one ring per channel (a channel per NIC across nodes): that many
    # messages per step where the per-call estimate counts one.
    channels = spec.inter.nics if spec.device == "gpu" and spec.inter is not None else 1
    tp_call = 1  # folded: one timeout per collective
    # Folded: the two kinds of tensor-parallel call (allreduce and the pipeline's allgather, or
    # sequence parallelism's allgather and reduce-scatter) are timed once, alone, on a world of their own.
    measured = 0
    calls = len(tp_calls(job)) * tp_blocks(job)  # tensor-parallel collectives per pass through a layer
    if calls:
        one_tp = call_estimate("allreduce", None, tp, job.tp_count * job.itemsize, records=records).events
        if folded:
            measured = 2 * one_tp
        else:
            tp_call = max(1, one_tp // tp) * channels
    passes = 3 if params.recompute == "full" else 2  # forward, backward (and its recomputed forward)
    layers = job.layers_per_chunk * chunks  # per stage
    stage = [b for k in range(chunks) for b in job.buckets[virtual_stage(0, k, layout.pp)]]
    buckets = max(1, len(stage))
    bucket = max((b.count for b in stage), default=0) * job.itemsize
    per_rank = 2 * micro_batches * layers * 2 + micro_batches * layers * passes * calls * tp_call
    if layers_are_one_delay(job, folded, spans):
        # Folded layers in a row are one delay (_Rank.layers): a forward pass is one, a
        # backward pass one per gradient bucket it readies, a ZeRO-3 pass one per layer.
        per_pass = layers / chunks if params.zero == 3 else 1 + buckets / chunks
        per_rank = micro_batches * chunks * (1 + per_pass)
    per_rank += 2 * micro_batches * chunks * EVENTS_PER_MESSAGE  # pipeline messages
    events_dp = 0
    if dp > 1:
        sync = params.sync or scenario.algorithms.per_collective.get("allreduce")
        fidelity = resolve_fidelity(scenario)
        nccl_twin = sync is None or sync in ("auto", "nccl_ring", "nccl_tree")
        if (fidelity.fidelity == "collective" and spec.device == "gpu" and nccl_twin
                and (not fidelity.validated_only or REGIONS["nccl_ring"](_dp_nodes(layout, spec), bucket))):
            # NCCL-style algorithms at collective fidelity are step programs and fluids: a few
            # events per rank and call, not messages (a ZeRO pass is two calls a bucket).
            events_dp = simulated * buckets * _STEP_PROGRAM_EVENTS * (2 if params.zero else 1)
        else:
            # On GPUs, auto is NCCL, which runs gradient-sized buckets as rings: a ring's 2(p-1) steps.
            ring = spec.device == "gpu" and (sync in (None, "auto") or sync.startswith("nccl"))
            one = call_estimate("allreduce", "ring" if ring else sync, dp, bucket, records=records)
            events_dp = (simulated // dp) * buckets * one.events * channels
            if fidelity.fidelity == "collective" and not fidelity.validated_only:
                # A ring step is one flow per hop, not a message's protocol steps; under auto, a
                # bucket outside the twin's validated region runs as messages.
                events_dp //= 4
    if fold_reason(job, spec) is None:
        # Folded replicas (workloads/training/replicas.py): replica 0's GPUs play the iterations;
        # each stage's distinct data-parallel calls run once, every group of the stage at once.
        simulated //= layout.replicas
        distinct = len({b.count for b in stage}) * (2 if params.zero in (1, 2) else 1)
        events_dp = events_dp * distinct // max(1, buckets * (2 if params.zero else 1) * params.iterations)
    events = (simulated * per_rank + events_dp) * params.iterations + measured
    # The job's gradient buckets, every virtual stage's, once for all GPUs.
    ready = sum(len(stage_buckets) for stage_buckets in job.buckets) * BUCKET_BYTES
    memory = BASE_BYTES + p * RANK_BYTES + ready
    detail = f"{p} GPUs ({simulated} simulated) x {micro_batches} micro-batches x {layers} layers per stage"
    if ready > 2**30:
        detail += f", gradient buckets {_bytes(ready)}"
    return Estimate(int(events), memory, events * SECONDS_PER_EVENT, detail)



def _dp_nodes(layout: Layout, spec: TopologySpec) -> int:
    """Nodes that rank 0's data-parallel group spans (what the twin's validated region is asked about)."""
    stride = 1
    for dim in layout.order:
        if dim == "dp":
            break
        stride *= getattr(layout, dim)
    return len({k * stride // spec.ranks_per_node for k in range(layout.dp)})


def check_fits(scenario: Scenario, available: int | None = None, *, headroom: float = 0.9) -> Estimate:
    """Estimate *scenario* and refuse it (ConfigError, exit 2) when its memory would not fit.

    *available* defaults to what the machine can give (MemAvailable); unknown, nothing is refused.
    The message names the estimate, what dominates it and what to change.
    """
    est = estimate(scenario)
    if available is None:
        available = memory.available_memory()
    # Real-data payloads are left to the workload's own check, which resolves `auto` first and
    # says `payload: size`; here, what the simulator itself would allocate.
    if available is None or est.new_memory - est.payload <= headroom * available:
        return est
    advice = ["fewer ranks (topology.nodes)"]
    if "gradient buckets" in est.detail:
        advice.append("larger gradient buckets (workload.bucket_cap)")
    if "block views" in est.detail:
        advice.append("an algorithm that does not cut the buffer into one block per rank "
                      "(workload.algorithm: recursive_doubling)")
        if resolve_fidelity(scenario).fidelity != "collective" and scenario.payload == "size":
            advice.append("fidelity: collective (rings run as step programs, without blocks per rank)")
    raise memory.MemoryLimitError(
        f"this run would need about {_bytes(est.memory)} of memory ({est.detail}) but {_bytes(available)} "
        f"is available; use {' or '.join(advice)}", "topology")


def run_estimate(scenario: Scenario, available: int | None = None) -> Estimate:
    """:func:`check_fits` for every point of *scenario*'s sweep (or the scenario itself): events and
    wall time add up over the points, memory is the largest point's (points run one at a time
    per process). Raises ConfigError naming the sweep point that would not fit."""
    if not scenario.sweep:
        return check_fits(scenario, available)
    if available is None:
        available = memory.available_memory()
    found: list[Estimate] = []
    for point in sweep_points(scenario.sweep):
        try:
            found.append(check_fits(load_dict(point_raw(scenario, point), scenario.file, sweep_point=True), available))
        except memory.MemoryLimitError as err:
            where = ", ".join(f"{key}={value}" for key, value in point.items())
            raise memory.MemoryLimitError(f"{err.message} (sweep point {where})", err.path) from None
    largest = max(found, key=lambda e: e.memory)
    return Estimate(sum(e.events for e in found), largest.memory, sum(e.wall_s for e in found), largest.detail,
                    all(e.events_known for e in found), largest.payload)


def _itemsize(dtype: str) -> int:
    known = DTYPES.get(dtype)
    return 4 if known is None else known.itemsize  # an unknown dtype is the workload's error, when it runs


def _bytes(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def _duration(seconds: float) -> str:
    for unit, scale in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= scale:
            return f"{seconds / scale:.2g} {unit}"
    return f"{seconds:.2g} s"
