"""The hybrid-parallel ``training`` workload's YAML: validated into :class:`HybridParams`.

A ``kind: training`` block with a ``model:`` key is a hybrid-parallel LLM iteration (the flat
``params:`` form without ``model:`` stays the data-parallel DDP workload)::

    workload:
      kind: training
      model: gpt3-175b              # a preset, a shape {layers, hidden, heads, seq, vocab, ...} or {params: 300M}
      parallel: {tp: 8, pp: 8}      # dp: the rest of the ranks; cp: context parallelism (see context), its K/V
                                    # exchange cp_comm: ring (Megatron, overlapped) | allgather (Llama 3, exposed);
                                    # ep for MoE (etp: 1 for whole experts); order: [tp, pp, dp]
                                    # (cp innermost in dp, or in its own place: [tp, cp, pp, dp]);
                                    # first_stage_layers / last_stage_layers (default: balanced, see stages)
      batch: {global: 1536, micro: 1}
      schedule: 1f1b                # gpipe | 1f1b | interleaved (chunks: 2)
      zero: 1                       # 0 | 1 | 2 | 3
      recompute: full               # none | selective | full
      sequence_parallel: false
      attention: flash              # flash (fused, the device's kernel) | flash2 (FlashAttention-2's) | standard
      dtype: bf16                   # the compute format: the device's peak for it (topology device_flops)
      reduce_dtype: fp32            # gradients' format in their reduction (FSDP MixedPrecision.reduce_dtype); default dtype
      framework: megatron           # megatron | megatron-2021 | megatron-deepspeed | nemo | torchtitan | llm-foundry
      compute: {efficiency: 0.5}    # leave out: each GEMM's shape on the cluster's GPU (topology gpu:, or the
                                    # preset's); or the achieved fraction of the peak (or 50%); or measured
                                    # {layer_forward: 1.2 ms, layer_backward: 2.4 ms}; or a time per micro-batch
                                    # (flat models)
      overlap: {dp: true}           # gradient sync overlaps the last backward; tp: true: Megatron's
                                    # tp-comm-overlap (tensor-parallel collectives behind the GEMMs)
      bucket_cap: 25 MiB            # gradient bucket for the data-parallel sync
      memory_check: error           # error | mark (a sweep over layouts marks what does not fit)
      fold: auto                    # auto | tp | none: fold tp groups and replicas (plan, replicas)
      tokens: 1T                    # the run's tokens: rows gain time_to_train_s, gpu_hours, energy_kwh
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mpisim.collectives import registry
from mpisim.engine.reader import Block, Choice, Custom, Flag, Unit
from mpisim.engine.units import parse_count, parse_flops, parse_percent, parse_size, parse_time
from mpisim.errors import ConfigError
from mpisim.mpi.dtypes import is_floating
from mpisim.workloads.compute.software import FRAMEWORKS, software
from mpisim.workloads.fields import (
    DTYPE,
    check_keys,
    count,
    parse_dtype,
    parse_positive_int,
    parse_with,
    workload_block,
)
from mpisim.workloads.training.layout import DIMENSIONS, Layout
from mpisim.workloads.training.model import PRESETS, TransformerModel, dump_model, parse_model
from mpisim.workloads.training.schedule import SCHEDULES
from mpisim.workloads.training.stages import split_layers

__all__ = ["KEYS", "HybridParams", "dump", "parse"]

KEYS = ("kind", "model", "parallel", "batch", "schedule", "chunks", "zero", "recompute", "sequence_parallel", "attention",
        "dtype", "reduce_dtype", "compute", "backward_share", "overlap", "sync", "bucket_cap", "memory_check", "fold", "iterations", "tokens",
        "framework")
RECOMPUTE = ("none", "selective", "full")
ATTENTION = ("flash", "flash2", "standard")
FLASH = ("flash", "flash2")  # fused kernels: no s x s scores in memory
MEMORY_CHECKS = ("error", "mark")
FOLDS = ("auto", "tp", "none")
CP_COMMS = ("ring", "allgather")
#: The device peak's number format for each compute dtype.
PEAK_FORMAT = {"bfloat16": "bf16", "float16": "fp16", "float32": "tf32", "float64": "fp64",
               "float8_e4m3fn": "fp8", "float8_e5m2": "fp8"}
_DTYPE_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8": "float8_e4m3fn"}


@dataclass(frozen=True)
class HybridParams:
    """A validated hybrid-parallel training workload (SI units)."""

    model: TransformerModel
    tp: int = 1
    pp: int = 1
    dp: int | None = None  # None: the ranks left over
    cp: int = 1  # context parallelism: each sequence split over cp GPUs (mpisim.workloads.training.context)
    cp_comm: str = "ring"  # how the cp GPUs exchange keys and values: ring (overlapped) or allgather (exposed)
    ep: int = 1
    etp: int | None = None  # expert tensor parallelism: None = tp, or 1 (Megatron-Core's parallel folding)
    order: tuple[str, ...] = DIMENSIONS
    first_stage_layers: int | None = None  # None: the balanced split (mpisim.workloads.training.stages)
    last_stage_layers: int | None = None
    global_batch: int | None = None  # None: dp x micro (one micro-batch per replica)
    micro: int = 1
    schedule: str = "1f1b"
    chunks: int = 1
    zero: int = 0
    recompute: str = "none"
    sequence_parallel: bool = False
    attention: str = "flash"  # flash (the device's kernel) | flash2 (FlashAttention-2's): fused; standard: materialised
    dtype: str = "bfloat16"
    #: The gradients' format on the wire (PyTorch FSDP's MixedPrecision.reduce_dtype); None: ``dtype``.
    reduce_dtype: str | None = None
    efficiency: float | None = None
    peak: float | None = None  # overrides the topology's device_flops
    layer_forward_s: float | None = None  # explicit: one layer's forward of one micro-batch on one GPU
    layer_backward_s: float | None = None  # explicit backward (default twice the forward)
    compute_s: float | None = None  # flat models: forward + backward of one micro-batch
    backward_share: float = 2 / 3
    overlap_dp: bool = True
    overlap_tp: bool = False  # Megatron's tp-comm-overlap: tensor-parallel collectives hide behind the GEMMs
    sync: str | None = None
    bucket_cap: int = 25 * 2**20
    memory_check: str = "error"
    fold: str = "auto"
    iterations: int = 1
    tokens: int | None = None  # the run's training tokens: rows gain time_to_train_s, gpu_hours, energy_kwh
    framework: str | None = None  # the training software (mpisim.workloads.compute.software); None: fused kernels

    def layout(self, ranks: int) -> Layout:
        """The layout on *ranks* ranks; raises ConfigError (at ``parallel``) when they do not match.

        With context parallelism the layout's data-parallel group is dp x cp GPUs, cp innermost:
        Megatron reduces the gradients over all of them (see :class:`Layout`).
        """
        mp = self.tp * self.pp * self.cp
        dp = self.dp if self.dp is not None else ranks // mp
        if dp < 1 or mp * dp != ranks:
            cp = " x cp" if self.cp > 1 else ""
            cps = f" x {self.cp}" if self.cp > 1 else ""
            given = f"tp x pp{cp} x dp = {self.tp} x {self.pp}{cps} x {self.dp} = {mp * (self.dp or 0)}" if self.dp \
                else f"tp x pp{cp} = {mp}, which does not divide them"
            raise ConfigError(f"the topology has {ranks} ranks but {given}", "parallel")
        if self.etp == 1 and self.tp > 1:
            if (self.tp * dp) % self.ep:
                raise ConfigError(f"ep ({self.ep}) must divide tp x dp ({self.tp} x {dp}): with etp: 1 experts are "
                                  "spread over a stage's tensor- and data-parallel ranks", "parallel.ep")
            return Layout(self.tp, self.pp, dp, self.ep, self.order, etp=1)
        if dp % self.ep:
            raise ConfigError(f"ep ({self.ep}) must divide dp ({dp}): experts are spread over data-parallel ranks",
                              "parallel.ep")
        return Layout(self.tp, self.pp, dp * self.cp, self.ep, self.order, cp=self.cp)

    def stage_layers(self) -> list[int]:
        """Layers of each virtual stage (:func:`~mpisim.workloads.training.stages.split_layers`)."""
        return split_layers(self.model.layers, self.pp, self.chunks, self.first_stage_layers, self.last_stage_layers)

    def micro_batches(self, dp: int) -> int:
        """Micro-batches each pipeline runs per iteration, over *dp* data-parallel replicas (a layout's
        ``replicas``: its cp GPUs share a micro-batch); raises ConfigError if the batch does not split."""
        if self.global_batch is None:
            return 1
        per_replica, rest = divmod(self.global_batch, dp * self.micro)
        if rest or per_replica < 1:
            raise ConfigError(f"global batch {self.global_batch} must be a multiple of dp x micro = {dp} x {self.micro}",
                              "batch.global")
        return per_replica


# --- the block, declared once (mpisim.engine.reader) ----------------------------------------------


def _as_given(value: Any, path: str) -> Any:
    return value  # read by parse below, which needs the other fields (the model, the schedule) to do so


def _choice(allowed: tuple[str, ...], what: str) -> Choice:
    return Choice(allowed, "expected one of {choices}, got {value!r}", description=what)


_PARALLEL = Block({
    **{key: count(1, what) for key, what in (("tp", "Tensor-parallel ranks."), ("pp", "Pipeline stages."),
                                             ("dp", "Data-parallel replicas (default: the ranks left over)."),
                                             ("cp", "Context-parallel ranks: each holds 1/cp of every sequence "
                                                    "(ring attention)."),
                                             ("ep", "Expert-parallel ranks (mixture of experts)."))},
    "cp_comm": _choice(CP_COMMS, "How context-parallel GPUs exchange keys and values: ring (Megatron / Transformer "
                                 "Engine, overlapped with the attention) or allgather (Llama 3, exposed)."),
    "first_stage_layers": count(0, "Layers on the first pipeline stage (default: a balanced split)."),
    "last_stage_layers": count(0, "Layers on the last pipeline stage (default: a balanced split)."),
    "etp": Custom(_as_given, {"const": 1}, description="1: whole experts (leave out to split experts over tp)."),
    "order": Custom(_as_given, {"type": "array", "items": {"enum": [*DIMENSIONS, "cp"]}},
                    description="The dimensions, innermost first, e.g. [tp, pp, dp]; cp may take its own place "
                                "(Llama 3: [tp, cp, pp, dp]), else it is innermost in dp."),
}, expected="{tp: 8, pp: 8, dp: 24}", show=repr, suggest=False)
_BATCH = Block({"global": count(1, "Sequences per iteration."), "micro": count(1, "Sequences per micro-batch.")},
               expected="{global: 1536, micro: 1}", show=repr, suggest=False)
_OVERLAP = Block({"dp": Flag(description="Overlap the gradient sync with the backward pass (default: the "
                                         "framework's; true but for megatron-2021)."),
                  "tp": Flag(description="Megatron's tp-comm-overlap: tensor-parallel collectives overlap "
                                         "the layer's GEMMs (default false: each layer waits for them).")},
                 expected="{dp: true}", show=repr, suggest=False)
_COMPUTE = Block({
    "efficiency": Custom(_as_given, {"type": ["number", "string"]}, description="Achieved fraction of peak: 0.5 or 50%."),
    "peak": Unit(parse_flops, "989 TFLOPS", description="Device peak (default: the topology's device_flops)."),
    "layer_forward": Unit(parse_time, "1.2 ms", description="Measured forward time of one layer and micro-batch."),
    "layer_backward": Unit(parse_time, "2.4 ms", description="Measured backward time (default 2 x forward)."),
}, expected="{efficiency: 0.5} (optionally with peak: 989 TFLOPS) or {layer_forward: 1.2 ms}", show=repr, suggest=False)
_MODEL_RULE = {"anyOf": [{"enum": sorted(PRESETS)}, {"type": "object", "properties": {
    "preset": {"enum": sorted(PRESETS)}, "params": {"type": ["string", "integer"], "examples": ["300M"]}}}]}

#: The hybrid-parallel ``workload: {kind: training, model: ...}`` block.
SCHEMA = workload_block("training", {
    "model": Custom(_as_given, _MODEL_RULE, required="this key is required",
                    description="A preset name, {preset, <overrides>}, a shape, or {params: 300M}."),
    "parallel": _PARALLEL,
    "batch": _BATCH,
    "schedule": _choice(SCHEDULES, "Pipeline schedule."),
    "chunks": count(1, "Model chunks per stage (schedule: interleaved)."),
    "zero": Custom(_as_given, {"enum": [0, 1, 2, 3]}, description="ZeRO stage."),
    "recompute": _choice(RECOMPUTE, "Activation recomputation."),
    "sequence_parallel": Flag(description="Megatron sequence parallelism."),
    "attention": _choice(ATTENTION, "flash: fused, the device's kernel generation (FlashAttention-3 on Hopper); "
                                     "flash2: fused, FlashAttention-2's kernel; standard: scores materialised."),
    "dtype": DTYPE,
    "reduce_dtype": Custom(_as_given, {"type": "string"},
                           description="The gradients' format in their reduction (FSDP's reduce_dtype, e.g. fp32); "
                                       "default: dtype."),
    "compute": Custom(_as_given, {"anyOf": [Unit(parse_time, "300 ms").json(), _COMPUTE.json()]},
                      description="Leave out for the GEMM-shape model of the cluster's GPU; or {efficiency: 0.5}, "
                                  "measured layer times, or (params: models) a time."),
    "backward_share": Custom(_as_given, {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                             description="params: models: the backward's share of compute."),
    "overlap": _OVERLAP,
    "sync": Custom(_as_given, {"type": "string"}, description="The gradient allreduce algorithm, or auto."),
    "bucket_cap": Unit(parse_size, "25 MiB", integer=True, description="Gradient bucket size."),
    "memory_check": _choice(MEMORY_CHECKS, "error: refuse a layout that does not fit; mark: say so in the row."),
    "fold": _choice(FOLDS, "auto: simulate one tp rank and one replica where alike; tp: fold tensor-parallel groups only."),
    "iterations": count(1, "Iterations to run."),
    "tokens": Unit(parse_count, "1T", integer=True,
                   description="Tokens the whole run trains on: rows gain time_to_train_s, gpu_hours, energy_kwh."),
    "framework": _choice(tuple(FRAMEWORKS), "The training software, for the GEMM-shape compute model's "
                         "element-wise and attention kernels (left out: fused kernels)."),
})
assert tuple(SCHEMA.fields) == KEYS


def _read(key: str, value: Any, path: str | None = None) -> Any:
    """Read *value* through the block's spec for *key* (at *path*, by default the key)."""
    return SCHEMA.fields[key].read(value, path or key)


def parse(raw: Any) -> HybridParams:
    """Validate a ``workload:`` mapping of kind ``training`` with ``model:``. Raises ConfigError with a relative path."""
    raw = check_keys(raw, SCHEMA, "training")
    model = parse_model(raw["model"])
    fields: dict[str, Any] = {"model": model}
    fields.update(_parse_parallel(raw.get("parallel", {})))
    batch = _BATCH.mapping(raw.get("batch", {}), "batch")
    if "global" in batch:
        fields["global_batch"] = parse_positive_int(batch["global"], "batch.global")
    fields["micro"] = parse_positive_int(batch.get("micro", 1), "batch.micro")
    fields["schedule"] = _read("schedule", raw.get("schedule", "1f1b"))
    fields["chunks"] = _read("chunks", raw.get("chunks", 2 if fields["schedule"] == "interleaved" else 1))
    if fields["chunks"] > 1 and fields["schedule"] != "interleaved":
        raise ConfigError("model chunks need schedule: interleaved", "chunks")
    zero = raw.get("zero", 0)
    if isinstance(zero, bool) or zero not in (0, 1, 2, 3):
        raise ConfigError(f"expected 0, 1, 2 or 3, got {zero!r}", "zero")
    fields["zero"] = zero
    fields["recompute"] = _read("recompute", raw.get("recompute", "none"))
    fields["sequence_parallel"] = _read("sequence_parallel", raw.get("sequence_parallel", False))
    fields["attention"] = _read("attention", raw.get("attention", "flash"))
    if raw.get("framework") is not None:
        fields["framework"] = _read("framework", raw["framework"])
    dtype = parse_dtype(_DTYPE_ALIASES.get(raw.get("dtype"), raw.get("dtype", "bfloat16")))
    if not is_floating(dtype):
        raise ConfigError(f"training computes in a floating-point format; got {dtype.name}", "dtype")
    fields["dtype"] = dtype.name
    if raw.get("reduce_dtype") is not None:
        reduce = parse_dtype(_DTYPE_ALIASES.get(raw["reduce_dtype"], raw["reduce_dtype"]), "reduce_dtype")
        if not is_floating(reduce):
            raise ConfigError(f"gradients are reduced in a floating-point format; got {reduce.name}", "reduce_dtype")
        fields["reduce_dtype"] = reduce.name
    fields.update(_parse_compute(raw.get("compute"), model))
    if "backward_share" in raw:
        share = raw["backward_share"]
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share < 1:
            raise ConfigError(f"expected a fraction in (0, 1), got {share!r}", "backward_share")
        if not model.flat:
            raise ConfigError("backward is 2 x forward from the model's FLOPs; backward_share is for "
                              "model: {params: ...}", "backward_share")
        fields["backward_share"] = float(share)
    overlap = _OVERLAP.mapping(raw.get("overlap", {}), "overlap")
    # Left out, the framework's own behaviour (Megatron-LM 2021 reduces after the backward: compute/software.py).
    default_overlap = software(fields.get("framework")).overlap_dp
    fields["overlap_dp"] = _OVERLAP.fields["dp"].read(overlap.get("dp", default_overlap), "overlap.dp")
    fields["overlap_tp"] = _OVERLAP.fields["tp"].read(overlap.get("tp", False), "overlap.tp")
    sync = raw.get("sync")
    if sync is not None:
        if not isinstance(sync, str):
            raise ConfigError(f"expected an allreduce algorithm name or auto, got {sync!r}", "sync")
        if sync != "auto":
            try:
                registry.get("allreduce", sync)
            except ConfigError as err:
                raise err.at("sync") from None
        fields["sync"] = sync
    fields["bucket_cap"] = parse_with(parse_size, raw.get("bucket_cap", "25 MiB"), "bucket_cap")
    if fields["bucket_cap"] < 1:
        raise ConfigError("must be at least 1 B", "bucket_cap")
    fields["memory_check"] = _read("memory_check", raw.get("memory_check", "error"))
    fields["fold"] = _read("fold", raw.get("fold", "auto"))
    fields["iterations"] = _read("iterations", raw.get("iterations", 1))
    if raw.get("tokens") is not None:
        if model.flat:
            raise ConfigError("a model given by params: has no sequence length to count tokens by; give its shape",
                              "tokens")
        fields["tokens"] = _read("tokens", raw["tokens"])
        if fields["tokens"] < 1:
            raise ConfigError(f"expected at least 1 token, got {raw['tokens']!r}", "tokens")
    params = HybridParams(**fields)
    _check_shape(params)
    return params


def _parse_parallel(raw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in _PARALLEL.mapping(raw, "parallel").items():
        if key in ("tp", "pp", "dp", "cp", "ep"):
            out[key] = parse_positive_int(value, f"parallel.{key}")
        elif key in ("first_stage_layers", "last_stage_layers", "cp_comm"):
            out[key] = _PARALLEL.fields[key].read(value, f"parallel.{key}")
        elif key == "etp":
            if value != 1:
                raise ConfigError(f"expected 1 (whole experts; leave etp out to split experts over tp), got {value!r}",
                                  "parallel.etp")
            out["etp"] = 1
        elif key == "order":
            if not isinstance(value, list) or sorted(value) not in (sorted(DIMENSIONS), sorted([*DIMENSIONS, "cp"])):
                raise ConfigError(f"expected the dimensions innermost first, e.g. [tp, pp, dp] or "
                                  f"[tp, cp, pp, dp], got {value!r}", "parallel.order")
            out["order"] = tuple(value)
    return out


def _parse_compute(raw: Any, model: TransformerModel) -> dict[str, Any]:
    if model.flat:
        if raw is None or isinstance(raw, dict):
            raise ConfigError("a model given by params: has no FLOPs to count; give the time of one micro-batch's "
                              "forward and backward, e.g. compute: 300 ms", "compute")
        return {"compute_s": parse_with(parse_time, raw, "compute")}
    if raw is None:
        return {}  # the GEMM-shape model of the cluster's GPU (mpisim.workloads.training.timing)
    raw = _COMPUTE.mapping(raw, "compute")
    out: dict[str, Any] = {}
    if "peak" in raw:
        out["peak"] = parse_with(parse_flops, raw["peak"], "compute.peak")
    if "layer_forward" in raw or "layer_backward" in raw:
        # Measured times per layer (a profiler's): FLOPs and efficiency no longer set the compute.
        if "efficiency" in raw:
            raise ConfigError("give efficiency or measured layer times, not both", "compute.efficiency")
        if "layer_forward" not in raw:
            raise ConfigError("layer_backward needs layer_forward", "compute.layer_forward")
        out["layer_forward_s"] = parse_with(parse_time, raw["layer_forward"], "compute.layer_forward")
        if "layer_backward" in raw:
            out["layer_backward_s"] = parse_with(parse_time, raw["layer_backward"], "compute.layer_backward")
        return out
    if "efficiency" not in raw:
        if "peak" in raw:
            raise ConfigError("peak is what an efficiency is a fraction of: give efficiency too, or leave "
                              "compute: out for the GEMM-shape model of the cluster's GPU", "compute.peak")
        return out
    given = raw.get("efficiency")
    # A fraction (0.5) or a percentage ("50%"), as a topology's link efficiency is written.
    percent = parse_percent(given)
    efficiency = given if percent is None else percent
    if isinstance(efficiency, bool) or not isinstance(efficiency, int | float) or not 0 < efficiency <= 1:
        raise ConfigError(f"expected a fraction of the peak in (0, 1] such as 0.5 or 50%, got {given!r}",
                          "compute.efficiency")
    out["efficiency"] = float(efficiency)
    return out


def _check_shape(params: HybridParams) -> None:
    model = params.model
    if model.flat:
        if params.tp > 1 or params.pp > 1 or params.cp > 1 or params.ep > 1 or params.zero == 3:
            raise ConfigError("a model given by params: cannot be split over tp, pp, cp, ep or ZeRO-3 layers; "
                              "give its shape (layers, hidden, heads, seq, vocab) or a preset", "parallel")
        return
    params.stage_layers()  # raises when the layers cannot split over the stages
    if params.cp > 1:
        # Load-balanced ring attention (Megatron / Transformer Engine) cuts each sequence into 2 cp chunks.
        if model.seq % (2 * params.cp):
            raise ConfigError(f"cp ({params.cp}) needs the sequence ({model.seq}) to be a multiple of 2 x cp: each GPU "
                              "holds two of its 2 cp chunks", "parallel.cp")
        if params.attention not in FLASH:
            raise ConfigError("context parallelism is ring attention over fused (flash) kernels; set attention: flash",
                              "parallel.cp")
        if params.ep > 1:
            raise ConfigError("cp with expert parallelism is not modelled; use cp: 1 or ep: 1", "parallel.cp")
    elif params.cp_comm != "ring":
        raise ConfigError("cp_comm is how context-parallel GPUs exchange keys and values: it needs cp > 1",
                          "parallel.cp_comm")
    if model.heads % params.tp:
        raise ConfigError(f"tp ({params.tp}) must divide the attention heads ({model.heads})", "parallel.tp")
    if params.ep > 1 and (not model.moe or model.experts % params.ep):
        raise ConfigError(f"ep ({params.ep}) needs a mixture-of-experts model whose experts ({model.experts}) "
                          "it divides", "parallel.ep")
    if params.etp == 1 and params.tp > 1 and not (params.ep > 1 and params.sequence_parallel):
        raise ConfigError("etp: 1 keeps experts whole on ep GPUs that each hold a sequence-parallel share of the "
                          "tokens: it needs ep > 1 and sequence_parallel: true (as Megatron-Core does)", "parallel.etp")
    if params.zero == 3 and params.pp > 1:
        raise ConfigError("ZeRO-3 shards every layer over the data-parallel group and is not combined with "
                          "pipeline parallelism (as in DeepSpeed and Megatron-LM); use zero: 1 or 2 with pp > 1",
                          "zero")


def dump(params: HybridParams) -> dict[str, Any]:
    """The resolved workload (SI numbers), loadable again by :func:`parse`."""
    parallel: dict[str, Any] = {"tp": params.tp, "pp": params.pp, "ep": params.ep, "order": list(params.order)}
    if params.cp > 1:
        parallel["cp"] = params.cp
    if params.cp_comm != "ring":
        parallel["cp_comm"] = params.cp_comm
    if params.dp is not None:
        parallel["dp"] = params.dp
    if params.etp is not None:
        parallel["etp"] = params.etp
    for key in ("first_stage_layers", "last_stage_layers"):
        if getattr(params, key) is not None:
            parallel[key] = getattr(params, key)
    batch: dict[str, Any] = {"micro": params.micro}
    if params.global_batch is not None:
        batch["global"] = params.global_batch
    out: dict[str, Any] = {"kind": "training", "model": dump_model(params.model), "parallel": parallel,
                           "batch": batch, "schedule": params.schedule, "chunks": params.chunks,
                           "zero": params.zero, "recompute": params.recompute,
                           "sequence_parallel": params.sequence_parallel, "attention": params.attention,
                           "dtype": params.dtype}
    if params.reduce_dtype is not None:
        out["reduce_dtype"] = params.reduce_dtype
    if params.framework is not None:
        out["framework"] = params.framework
    if params.model.flat:
        out["compute"] = params.compute_s
        out["backward_share"] = params.backward_share
    else:
        compute: dict[str, Any] = {}
        if params.efficiency is not None:
            compute["efficiency"] = params.efficiency
        if params.layer_forward_s is not None:
            compute["layer_forward"] = params.layer_forward_s
        if params.layer_backward_s is not None:
            compute["layer_backward"] = params.layer_backward_s
        if params.peak:
            compute["peak"] = params.peak
        out["compute"] = compute
    out["overlap"] = {"dp": params.overlap_dp, **({"tp": True} if params.overlap_tp else {})}
    if params.sync is not None:
        out["sync"] = params.sync
    out.update(bucket_cap=params.bucket_cap, memory_check=params.memory_check, fold=params.fold,
               iterations=params.iterations)
    if params.tokens is not None:
        out["tokens"] = params.tokens
    return out
