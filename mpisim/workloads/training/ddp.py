"""The data-parallel form of the ``training`` workload: one iteration with PyTorch-DDP gradient bucketing.

(With ``model:`` the same kind plans a hybrid-parallel LLM iteration instead -- tensor x pipeline
x data parallelism, ZeRO stages 0-3, MoE expert parallelism, pipeline schedules --
:mod:`mpisim.workloads.training.config`; :func:`parse` tells the two forms apart. What follows is
the data-parallel form. It is the tp = pp = 1 layout of the same engine: :func:`as_hybrid`
translates it, :func:`~mpisim.workloads.training.plan.ddp_job` adds this module's
:class:`DDPPlan` -- layer ticks, wire format, real data -- and
:mod:`~mpisim.workloads.training.play` runs it with every other layout.)

Every rank holds a replica of the model and computes the gradients of its own share of the
batch; the gradients are then averaged over the ranks with an allreduce before the optimizer
step. What decides the iteration time is how much of that communication hides behind the
backward pass. mpisim plays it the way PyTorch's ``DistributedDataParallel`` does:

1. **Forward** takes ``(1 - backward_share) x compute`` (backward is usually about twice the
   forward, hence ``backward_share: 2/3``).
2. **Backward** takes the rest. Gradients become ready in *reverse* layer order, and a layer's
   share of the backward time is proportional to its parameter count.
3. **Buckets.** Parameters are packed into buckets in reverse order (DDP's
   ``compute_bucket_assignment_by_size``): a tensor is added to the open bucket, and the bucket
   closes once it holds at least its cap -- ``first_bucket`` (1 MiB) for the first bucket,
   ``bucket_cap`` (25 MiB) for the rest. A tensor larger than the cap still goes into one
   bucket. Given only ``params`` (no ``layers`` list), the model is taken as many small
   tensors: buckets are exactly the caps and the last one holds the remainder.
4. **Allreduce per bucket.** When a bucket's last gradient is ready, its allreduce starts.
   DDP launches them asynchronously *in bucket order* and NCCL runs them one after another on
   one stream, so bucket k's allreduce starts when its gradients are ready **and** bucket
   k-1's allreduce has finished. The step waits for all of them.

Reported per point: ``iteration_time_s`` (first rank's start to last rank's end, mean over
iterations), ``compute_s``, ``comm_time_s`` (the sum of the allreduces' durations, each last
exit minus first entry), ``exposed_comm_s`` (iteration minus compute: the communication that
did not hide behind backward), ``scaling_efficiency`` (one rank's iteration -- compute only --
over this iteration), ``params``, ``bytes`` (gradient bytes per rank), ``wire_bytes`` (bytes
each rank hands to collectives after compression), ``buckets``, ``algorithm`` (what ran) and
``verified``. A single rank communicates nothing.

**Compression** (``compression:``), modelled as the bytes it puts on the wire:

* ``{cast: fp16}`` or ``{cast: bf16}``: gradients travel as 2-byte floats (half the bytes of
  float32). numpy has no bfloat16, so bf16 is carried as float16 -- same size, same timing.
* ``{topk: 0.01}``: each rank keeps the ``ceil(ratio x count)`` largest-magnitude entries of
  each bucket and *allgathers* them as values plus int32 indices, packed into one byte buffer
  of ``k x (itemsize + 4)`` bytes; every rank then adds the p sparse vectors. The allgather
  uses the scenario's allgather algorithm, else ``auto`` (``sync`` names the allreduce only).
  Both keys may be combined.

With real data (``payload: data``) every rank's gradients are small integers from the seed
and rank, so the averaged gradient (the sum divided by p) must equal numpy's exactly;
``verified`` says whether it did (``null`` with size-only payloads). Real data lives in this one
process, so before anything is allocated :func:`memory_estimate` adds up every rank's gradients
and what the largest bucket's allreduce (or top-k allgather) and its numpy check need, and a
model that would not fit in the memory available is refused (a ConfigError at ``payload``)
with the estimate. Large models belong in ``payload: size``: same timing, no payload memory.

YAML::

    workload:
      kind: training
      params: 300M                # or layers: [4M, 16M, 16M, ...] in forward order
      dtype: float32
      compute: 300 ms             # or {flops: 1.8e15, device_flops: 312 TFLOPS, utilization: 0.4}
      backward_share: 0.6667
      bucket_cap: 25 MiB
      first_bucket: 1 MiB
      sync: ring                  # an allreduce algorithm name, auto, or parameter_server
                                  # (default: the scenario's algorithms: entry, else auto)
      compression: {cast: fp16}   # optional
      iterations: 1
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

import mpisim.collectives  # noqa: F401  (registers the algorithms that ``sync`` is checked against)
from mpisim.collectives import memory, registry
from mpisim.engine.reader import Block, Choice, Custom, Either, Unit
from mpisim.engine.units import parse_flops, parse_size, parse_time
from mpisim.errors import ConfigError
from mpisim.mpi.dtypes import is_floating
from mpisim.workloads.fields import (
    DTYPE,
    check_keys,
    count,
    parse_dtype,
    parse_positive_int,
    parse_with,
    read,
    workload_block,
)
from mpisim.workloads.training import config as hybrid_config
from mpisim.workloads.training.buckets import Bucket, ddp_buckets
from mpisim.workloads.training.model import TransformerModel

KIND = "training"
DEFAULT_BACKWARD_SHARE = 2 / 3
INDEX_DTYPE = np.dtype(np.int32)  # top-k indices travel as int32
#: Relative difference between iteration and compute time below which no communication is exposed.
ROUNDING = 1e-12

_CASTS = {"fp16": "float16", "float16": "float16", "bf16": "float16", "bfloat16": "float16"}



# ---------------------------------------------------------------------------------------------
# Parameters


@dataclass(frozen=True)
class TrainingParams:
    """A validated ``training`` workload (SI units)."""

    layers: tuple[int, ...]  # parameter counts in forward order; () when only ``params`` was given
    params: int
    dtype: str = "float32"
    compute_s: float = 0.0
    compute_spec: dict[str, float] | None = field(default=None, compare=False)  # the FLOPs form, for dump
    backward_share: float = DEFAULT_BACKWARD_SHARE
    bucket_cap: int = 25 * 2**20
    first_bucket: int = 2**20
    sync: str | None = None  # None: the scenario's default allreduce algorithm, else auto
    cast: str | None = None  # "fp16" | "bf16"
    topk: float | None = None
    iterations: int = 1


def _as_given(value: Any, path: str) -> Any:
    return value  # read by parse below, which needs the dtype or the other keys to do so


_SHARE_RULE = {"type": ["number", "string"], "examples": [0.5, "2/3"]}
_COMPUTE = Block({
    "flops": Unit(parse_flops, "1.8 PFLOP", required="this key is required", description="FLOPs of one iteration."),
    "device_flops": Unit(parse_flops, "312 TFLOPS", required="this key is required", description="Device peak."),
    "utilization": Custom(_as_given, _SHARE_RULE, description="Achieved fraction of the peak, (0, 1]."),
}, suggest=False)
_COMPRESSION = Block({
    "cast": Choice(("fp16", "bf16"), "expected fp16 or bf16, got {value!r}", description="Send gradients in 16 bits."),
    "topk": Custom(_as_given, _SHARE_RULE, description="Send this fraction of the gradients (top-k)."),
}, expected="{cast: fp16} or {topk: 0.01}", show=repr, suggest=False)

#: The data-parallel ``workload: {kind: training, params: 300M, ...}`` block.
SCHEMA = workload_block(KIND, {
    "model": Custom(_as_given, {}, description="With a model: the hybrid-parallel LLM iteration."),
    "params": Custom(_as_given, {"type": ["string", "integer"], "examples": ["300M"]},
                     description="Parameter count (or give layers)."),
    "layers": Custom(_as_given, {"type": "array", "items": {"type": ["string", "integer"]}, "minItems": 1},
                     description="Parameter count of each layer, first to last."),
    "dtype": DTYPE,
    "compute": Custom(_as_given, {"anyOf": [Unit(parse_time, "300 ms").json(), _COMPUTE.json()]},
                      required="this key is required: a time per iteration (300 ms) or "
                               "{flops, device_flops, utilization}",
                      description="Compute time of one iteration, or {flops, device_flops, utilization}."),
    "backward_share": Custom(_as_given, _SHARE_RULE, description="The backward pass's share of compute."),
    "bucket_cap": Unit(parse_size, "25 MiB", integer=True, description="DDP bucket size."),
    "first_bucket": Unit(parse_size, "1 MiB", integer=True, description="Size of the first bucket."),
    "sync": Custom(_as_given, {"type": "string"}, description="An allreduce algorithm, auto or parameter_server."),
    "compression": _COMPRESSION,
    "iterations": count(1, "Iterations to run."),
})
#: Data-parallel training, or the hybrid-parallel form when a model is given.
TRAINING = Either(SCHEMA, hybrid_config.SCHEMA)


def parse(raw: Any) -> TrainingParams | hybrid_config.HybridParams:
    """Validate a ``workload:`` mapping of kind ``training``. Raises ConfigError with a relative path.

    With ``model:`` it is a hybrid-parallel LLM iteration (:mod:`mpisim.workloads.training.config`).
    """
    if isinstance(raw, dict) and raw.get("model") is not None:
        return hybrid_config.parse(raw)
    raw = check_keys(raw, SCHEMA, KIND)
    if ("params" in raw) == ("layers" in raw):
        raise ConfigError("give either params (a count such as 300M) or layers (a list of counts)", "params")
    if "layers" in raw:
        if not isinstance(raw["layers"], list) or not raw["layers"]:
            raise ConfigError(f"expected a non-empty list of parameter counts, got {raw['layers']!r}", "layers")
        layers = tuple(parse_positive_int(n, f"layers[{i}]") for i, n in enumerate(raw["layers"]))
        params = sum(layers)
    else:
        layers, params = (), parse_positive_int(raw["params"], "params")
    dtype = parse_dtype(raw.get("dtype", "float32"))
    if not is_floating(dtype):
        raise ConfigError(f"gradients are floating point; got {dtype.name}", "dtype")
    compute_s, compute_spec = _parse_compute(read(SCHEMA, raw, "compute"))
    share = _parse_share(raw.get("backward_share", DEFAULT_BACKWARD_SHARE))
    bucket_cap = read(SCHEMA, raw, "bucket_cap", "25 MiB")
    first_bucket = read(SCHEMA, raw, "first_bucket", "1 MiB")
    for key, value in (("bucket_cap", bucket_cap), ("first_bucket", first_bucket)):
        if value < dtype.itemsize:
            raise ConfigError(f"must hold at least one {dtype.name} element, got {value} B", key)
    sync = raw.get("sync")
    if sync is not None and not isinstance(sync, str):
        raise ConfigError(f"expected an allreduce algorithm name, auto or parameter_server, got {sync!r}", "sync")
    if sync not in (None, "auto"):
        try:
            registry.get("allreduce", sync)
        except ConfigError as err:
            raise err.at("sync") from None
    cast, topk = _parse_compression(raw.get("compression"))
    iterations = read(SCHEMA, raw, "iterations", 1)
    return TrainingParams(layers, params, dtype.name, compute_s, compute_spec, share, bucket_cap, first_bucket,
                          sync, cast, topk, iterations)


def _parse_compute(raw: Any) -> tuple[float, dict[str, float] | None]:
    if not isinstance(raw, dict):
        return parse_with(parse_time, raw, "compute"), None
    fields = _COMPUTE.read(raw, "compute")
    flops, device = fields["flops"], fields["device_flops"]
    utilization = _parse_share(raw.get("utilization", 1.0), "compute.utilization")
    spec = {"flops": flops, "device_flops": device, "utilization": utilization}
    return flops / (device * utilization), spec


def _parse_share(value: Any, path: str = "backward_share") -> float:
    """Read a fraction in (0, 1]: a number, or a string such as ``"2/3"``."""
    try:
        if isinstance(value, bool):
            raise ValueError
        share = float(Fraction(value.strip())) if isinstance(value, str) else float(value)
    except (TypeError, ValueError, ZeroDivisionError):
        raise ConfigError(f"expected a fraction such as 0.5 or 2/3, got {value!r}", path) from None
    if not 0 < share <= 1:
        raise ConfigError(f"must be in (0, 1], got {value!r}", path)
    return share


def _parse_compression(raw: Any) -> tuple[str | None, float | None]:
    if raw is None:
        return None, None
    if not raw:
        raise ConfigError(f"expected {{cast: fp16}} or {{topk: 0.01}}, got {raw!r}", "compression")
    cast = _COMPRESSION.read(raw, "compression").get("cast")
    topk = None
    if "topk" in raw:
        topk = _parse_share(raw["topk"], "compression.topk")
    return cast, topk


def dump(params: TrainingParams | hybrid_config.HybridParams) -> dict[str, Any]:
    """Return the resolved workload (SI numbers) in a form :func:`parse` reads back."""
    if isinstance(params, hybrid_config.HybridParams):
        return hybrid_config.dump(params)
    out: dict[str, Any] = {"kind": KIND}
    if params.layers:
        out["layers"] = list(params.layers)
    else:
        out["params"] = params.params
    out["dtype"] = params.dtype
    out["compute"] = dict(params.compute_spec) if params.compute_spec else params.compute_s
    out.update(backward_share=params.backward_share, bucket_cap=params.bucket_cap,
               first_bucket=params.first_bucket)
    if params.sync is not None:
        out["sync"] = params.sync
    compression: dict[str, Any] = {}
    if params.cast:
        compression["cast"] = params.cast
    if params.topk is not None:
        compression["topk"] = params.topk
    if compression:
        out["compression"] = compression
    out["iterations"] = params.iterations
    return out


# ---------------------------------------------------------------------------------------------
# The plan: buckets and when their gradients are ready


@dataclass(frozen=True)
class DDPPlan:
    """What the data-parallel form adds to the job: its buckets (``first_bucket``, ``layers``),
    the backward's layer ticks, the wire format (a cast, top-k) and the real-data seed."""

    buckets: tuple[Bucket, ...]
    layer_ready: tuple[float, ...]  # backward fraction at the end of each layer (reverse order), for the timeline
    forward_s: float
    backward_s: float
    dtype: np.dtype  # of the gradients
    wire_dtype: np.dtype  # of what goes on the wire (after a cast)
    topk: float | None
    sync: str | None
    iterations: int
    data: bool
    seed: int


def as_hybrid(params: TrainingParams) -> hybrid_config.HybridParams:
    """The hybrid-parallel parameters of *params*: a model known by its size at tp = pp = 1.

    What the hybrid form cannot say (``layers``, ``first_bucket``, compression, the FLOPs form
    of ``compute``) travels in the :class:`DDPPlan` :func:`make_plan` returns.
    """
    return hybrid_config.HybridParams(
        TransformerModel(flat_params=params.params), dtype=params.dtype, compute_s=params.compute_s,
        backward_share=params.backward_share, overlap_dp=True, sync=params.sync, bucket_cap=params.bucket_cap,
        iterations=params.iterations)


def topk_count(ratio: float, count: int) -> int:
    """Return how many entries top-k keeps of a bucket of *count*: ``ceil(ratio x count)``, at least 1."""
    # The small margin keeps float noise (0.1 x 10 = 1.0000000000000002) from adding an entry.
    return max(1, math.ceil(ratio * count - 1e-9))


def wire_bytes(plan: DDPPlan) -> int:
    """Return the bytes each rank hands to collectives per iteration."""
    if plan.topk is None:
        return sum(b.count for b in plan.buckets) * plan.wire_dtype.itemsize
    per_entry = plan.wire_dtype.itemsize + INDEX_DTYPE.itemsize
    return sum(topk_count(plan.topk, b.count) for b in plan.buckets) * per_entry


def gradients(plan: DDPPlan, bucket: int, rank: int) -> np.ndarray:
    """Return rank *rank*'s gradients of *bucket* (small integers in the wire dtype: sums are exact)."""
    rng = np.random.default_rng([plan.seed, rank, bucket])
    return rng.integers(-3, 4, size=plan.buckets[bucket].count).astype(plan.wire_dtype)


def topk_select(grad: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Return (values, int32 indices) of the *k* largest-magnitude entries, ties to the lower index."""
    index = np.argsort(-np.abs(grad), kind="stable")[:k].astype(INDEX_DTYPE)
    return grad[index], index


def pack(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    return np.concatenate([values.view(np.uint8), index.view(np.uint8)])


def unpack_sum(packed: np.ndarray, p: int, k: int, count: int, dtype: np.dtype) -> np.ndarray:
    """Add the p sparse (values, indices) blocks of an allgather into one dense vector."""
    dense = np.zeros(count, dtype=dtype)
    per_rank = packed.size // p
    for r in range(p):
        chunk = packed[r * per_rank:(r + 1) * per_rank]
        values = chunk[:k * dtype.itemsize].view(dtype)
        index = chunk[k * dtype.itemsize:].view(INDEX_DTYPE)
        np.add.at(dense, index, values)
    return dense


def check_average(plan: DDPPlan, bucket: int, p: int, got: np.ndarray) -> bool:
    """Compare an averaged bucket with numpy's, computed straight from every rank's gradients."""
    grads = [gradients(plan, bucket, r) for r in range(p)]
    if plan.topk is not None:
        keep = topk_count(plan.topk, plan.buckets[bucket].count)
        sparse = []
        for g in grads:
            values, index = topk_select(g, keep)
            dense = np.zeros_like(g)
            dense[index] = values
            sparse.append(dense)
        grads = sparse
    total = grads[0]
    for g in grads[1:]:
        total = total + g
    return bool(np.array_equal(got, total / p))


def make_plan(params: TrainingParams, data: bool = False, seed: int = 0) -> DDPPlan:
    """Return the per-iteration plan: buckets, backward timeline, compute split, wire dtype."""
    dtype = np.dtype(params.dtype)
    wire_dtype = np.dtype(_CASTS[params.cast]) if params.cast else dtype
    buckets = ddp_buckets(params.layers, params.params, dtype.itemsize, params.first_bucket, params.bucket_cap)
    if params.layers:
        done, layer_ready = 0, []
        for n in reversed(params.layers):
            done += n
            layer_ready.append(done / params.params)
    else:
        layer_ready = [b.ready for b in buckets]
    backward_s = params.backward_share * params.compute_s
    return DDPPlan(tuple(buckets), tuple(layer_ready), params.compute_s - backward_s, backward_s, dtype, wire_dtype,
                 params.topk, params.sync, params.iterations, data, seed)


def memory_estimate(plan: DDPPlan, p: int, default_sync: str | None = None) -> memory.MemoryEstimate:
    """Estimate the peak payload memory of a real-data iteration of *plan* on *p* ranks.

    Inputs are every rank's gradients (in the wire dtype; DDP keeps the whole model's); on top
    come the results, working set and numpy check of the largest bucket's collective -- the
    allreduce in *plan*'s ``sync`` algorithm (else *default_sync*, else ``auto``), or with top-k
    the allgather of the packed entries -- which :func:`~mpisim.collectives.memory.estimate_collective`
    counts, less the inputs it would count again.
    """
    largest = max(b.count for b in plan.buckets)
    if plan.topk is None:
        collective, algorithm = "allreduce", plan.sync or default_sync or "auto"
        nbytes = largest * plan.wire_dtype.itemsize
    else:
        collective, algorithm = "allgather", "auto"
        nbytes = topk_count(plan.topk, largest) * (plan.wire_dtype.itemsize + INDEX_DTYPE.itemsize)
    call = memory.estimate_collective(collective, algorithm, p, nbytes, verify=True)
    gradients_bytes = p * sum(b.count for b in plan.buckets) * plan.wire_dtype.itemsize
    return memory.MemoryEstimate(
        inputs=gradients_bytes,
        results=call.results,
        working=call.working,
        verification=call.verification,
        description=f"training, {p} ranks x {gradients_bytes // p / 1e9:.3g} GB of gradients; "
                    f"largest bucket: {call.description}",
    )
