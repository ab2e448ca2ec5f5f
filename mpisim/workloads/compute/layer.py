"""One transformer layer's forward and backward pass on one GPU, as the list of kernels it runs.

For a micro-batch of *b* sequences of *s* tokens, with tensor parallelism *tp* (Megatron: the
QKV and MLP-up weights split by columns, the output and MLP-down weights by rows) and context
parallelism *cp* (each GPU holds s/cp of every sequence: T = b s / cp tokens), one GPU runs in
the forward pass:

====================  =============================================  ===========================
kernel                shape / bytes                                  bound by
====================  =============================================  ===========================
norm 1                reads, writes T' h                             HBM
QKV projection        GEMM m=T, n=(h + 2 h_kv)/tp, k=h               tensor cores (shape)
rotary embedding      reads, writes T (h + h_kv)/tp                  HBM
attention             heads/tp x (s/cp queries over s keys)          attention rate
output projection     GEMM m=T, n=h, k=h/tp                          tensor cores
residual (+dropout)   reads 2, writes 1 x T' h                       HBM
norm 2                reads, writes T' h                             HBM
MLP up (and gate)     GEMM m=T, n=f/tp (x2 gated), k=h               tensor cores
GeLU / SwiGLU         reads 1 (2), writes 1 x T f/tp                 HBM
MLP down              GEMM m=T, n=h, k=f/tp                          tensor cores
residual (+dropout)   reads 2, writes 1 x T' h                       HBM
====================  =============================================  ===========================

T' = T / tp with sequence parallelism (norms and dropout on a slice of the sequence), T
without. The backward pass runs, for each GEMM ``[m, k] x [k, n]``, the data gradient
``[m, n] x [n, k]`` and the weight gradient ``[k, m] x [m, n]`` (twice the forward's FLOPs, on
other shapes: the weight gradient contracts over the tokens), flash attention's backward, and
each element-wise kernel's backward (1.5 x its bytes). Recomputation adds, before the backward,
the whole forward (``full``) or the attention core (``selective``: nothing with flash
attention, whose backward recomputes the scores anyway).

**Which flash kernel.** ``attention: flash`` runs the device's own generation (FlashAttention-3
on Hopper, :mod:`.devices`) unless the framework runs another (:mod:`.software`);
``attention: flash2`` names FlashAttention-2's kernel whatever the framework: a run that predates
the Hopper kernels, or needs what they lacked then (FlashAttention-3's first public code, 11 July
2024, had FP16 only; its BF16 forward came on 14 July, variable-length sequences -- document
masks -- on 22 July, and the BF16 backward on 1 August 2024: Dao-AILab/flash-attention, commits
7f67966, 74b0761, dfe1a59 and bafe253 under ``hopper/``).

**FP8** (NVIDIA Transformer Engine): the four projections' GEMMs run in FP8 (E4M3 forward,
E5M2 gradients) at the FP8 rate; everything else stays BF16. Each FP8 GEMM pays casts: its
activation input is read in BF16 and written in FP8 with a transposed FP8 copy for the weight
gradient (4 bytes per element), its output gradient likewise in the backward, and a small
amax/scale update kernel per GEMM and pass (delayed scaling). The weights are cast once per
step, with the first micro-batch (Megatron tells Transformer Engine which micro-batch is the
first, and later ones reuse the FP8 weights): :func:`fp8_weight_cast_time`.

**Launches.** Kernels are issued asynchronously: a stream takes the sum of its kernels' times
or the CPU's time to launch them (one launch every ``launch_s``), whichever is longer.

A mixture-of-experts layer (``experts > 1``, whole experts per GPU, ``ep`` GPUs sharing
them) replaces the MLP GEMMs with grouped GEMMs: each of the GPU's experts/ep experts gets
``T ep top_k capacity / experts`` tokens, plus the router's ``T x experts`` GEMM. Around the
experts, the token dispatcher groups each token's copies by expert and back (Megatron-Core
``moe_utils.permute``: ``tokens.index_select(0, sorted_indices)``; ``unpermute``: the expert
outputs weighted by their router probabilities and ``scatter_add_`` into the token order):
each pass reads and writes every routed row, ``(T + T top_k) h`` elements each way, the fewest
bytes a fused kernel (Transformer Engine's ``moe_permute_fusion``) moves.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from mpisim.errors import ConfigError
from mpisim.workloads.compute.devices import Device, canonical_dtype
from mpisim.workloads.compute.kernels import (
    BACKWARD_BYTES,
    Kernel,
    causal_fraction,
    elementwise,
    flash_attention,
    gemm,
    unfused_attention,
)
from mpisim.workloads.compute.software import Software, attention_fractions, software

__all__ = ["LayerShape", "LayerTime", "fp8_weight_cast_time", "layer_time", "layer_weights", "stream_time",
           "weight_gemms"]

RECOMPUTE = ("none", "selective", "full")
EAGER_RMSNORM_BYTES = 36  # x.float() 2+4, pow 4+4, mean 4, x * rsqrt 4+4, type_as 4+2, * weight 2+2
EAGER_ROTARY_BYTES = 20  # x.float() 2+4, complex product 4+4, type_as 4+2
EAGER_SWIGLU_BYTES = 10  # silu(gate) 2+2, silu * up 4+2
ATTENTION = ("flash", "flash2", "unfused", "standard")  # standard: the training workload's name for unfused
CP_COMMS = ("ring", "allgather")


@dataclass(frozen=True)
class LayerShape:
    """A transformer layer as one GPU sees it: the model's shape, the micro-batch and the layout."""

    hidden: int
    heads: int
    seq: int
    micro_batch: int = 1
    ffn: int = 0  # 0: 4 x hidden
    kv_heads: int = 0  # 0: heads
    gated_mlp: bool = False
    tp: int = 1
    cp: int = 1
    cp_comm: str = "ring"  # how the cp GPUs get the keys: ring steps (one kernel call per key chunk) or allgather
    sequence_parallel: bool | None = None  # None: on when tp > 1 (Megatron's default with tp)
    dtype: str = "bf16"
    fp8: bool = False  # Transformer Engine FP8 GEMMs
    attention: str = "flash"
    causal: bool = True
    dropout: bool = False
    rope: bool = True
    recompute: str = "none"
    experts: int = 1
    top_k: int = 1
    capacity_factor: float = 1.0
    ep: int = 1
    framework: str = ""  # the training software's kernels (:mod:`.software`); "": fused, the device's attention

    def __post_init__(self) -> None:
        if self.recompute not in RECOMPUTE:
            raise ConfigError(f"expected one of {', '.join(RECOMPUTE)}, got {self.recompute!r}", "recompute")
        if self.attention not in ATTENTION:
            raise ConfigError(f"expected one of {', '.join(ATTENTION)}, got {self.attention!r}", "attention")
        if self.cp_comm not in CP_COMMS:
            raise ConfigError(f"expected one of {', '.join(CP_COMMS)}, got {self.cp_comm!r}", "cp_comm")
        if self.attention == "standard":
            object.__setattr__(self, "attention", "unfused")
        for name in ("hidden", "heads", "seq", "micro_batch", "tp", "cp", "experts", "top_k", "ep"):
            if getattr(self, name) < 1:
                raise ConfigError(f"expected a whole number >= 1, got {getattr(self, name)!r}", name)
        canonical_dtype(self.dtype)
        software(self.framework)

    @property
    def software(self) -> Software:
        return software(self.framework)

    @property
    def mlp_width(self) -> int:
        return self.ffn or 4 * self.hidden

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_width(self) -> int:
        return self.head_dim * (self.kv_heads or self.heads)

    @property
    def tokens(self) -> int:
        """Tokens of the micro-batch on this GPU (context parallelism splits each sequence)."""
        return self.micro_batch * self.seq // self.cp

    @property
    def sp(self) -> bool:
        return self.tp > 1 if self.sequence_parallel is None else self.sequence_parallel

    @classmethod
    def from_model(cls, model: Any, micro_batch: int, **layout: Any) -> LayerShape:
        """The layer of a model object with ``hidden, heads, seq, mlp_width, kv_width, gated_mlp``.

        Accepts the training workload's model (any object with those attributes); *layout* sets
        the other fields (tp, cp, dtype, fp8, recompute, ...).
        """
        kv_heads = model.kv_width * model.heads // model.hidden
        rope = not getattr(model, "learned_positions", False)
        moe = {"experts": model.experts, "top_k": model.top_k,
               "capacity_factor": model.capacity_factor} if getattr(model, "experts", 1) > 1 else {}
        return cls(hidden=model.hidden, heads=model.heads, seq=model.seq, micro_batch=micro_batch,
                   ffn=model.mlp_width, kv_heads=kv_heads, gated_mlp=model.gated_mlp, rope=rope,
                   **moe, **layout)


@dataclass(frozen=True)
class LayerTime:
    """One layer's compute on one GPU for one micro-batch: each pass's kernels and their time."""

    forward: tuple[Kernel, ...]
    backward: tuple[Kernel, ...]
    recompute: tuple[Kernel, ...]
    launch_s: float = field(default=0.0)

    @property
    def forward_s(self) -> float:
        return stream_time(self.forward, self.launch_s)

    @property
    def backward_s(self) -> float:
        """The backward pass, without recomputation."""
        return stream_time(self.backward, self.launch_s)

    @property
    def recompute_s(self) -> float:
        return stream_time(self.recompute, self.launch_s)

    @property
    def total_s(self) -> float:
        """Forward, recomputation and backward of one micro-batch."""
        return self.forward_s + self.recompute_s + self.backward_s

    @property
    def flops(self) -> float:
        """FLOPs this GPU executes for the layer (recomputation included)."""
        return sum(k.flops for k in self.forward + self.recompute + self.backward)

    def breakdown(self) -> dict[str, float]:
        """Seconds per kind of kernel (gemm, attention, memory) over all passes, plus launch-bound time."""
        out: dict[str, float] = {}
        for k in self.forward + self.recompute + self.backward:
            out[k.kind] = out.get(k.kind, 0.0) + k.seconds
        out["launch"] = max(0.0, self.total_s - sum(out.values()))  # streams waiting for the CPU's launches
        return out


def stream_time(kernels: tuple[Kernel, ...] | list[Kernel], launch_s: float) -> float:
    """A stream of kernels issued back to back: their work, or the CPU's launches if those take longer."""
    return max(sum(k.seconds for k in kernels), len(kernels) * launch_s)


def weight_gemms(shape: LayerShape) -> list[tuple[str, int, int, int]]:
    """The layer's weight GEMMs as (name, m, n, k) on this GPU; MoE experts separately."""
    h, t, f = shape.hidden, shape.tp, shape.mlp_width
    T = shape.tokens
    out = [("QKV projection", T, (h + 2 * shape.kv_width) // t, h),
           ("output projection", T, h, h // t)]
    if shape.experts == 1:
        out += [("MLP up", T, f * (2 if shape.gated_mlp else 1) // t, h),
                ("MLP down", T, h, f // t)]
    return out


def _experts(shape: LayerShape) -> tuple[int, int]:
    """(local experts, tokens per expert) of a mixture-of-experts layer on this GPU."""
    local = max(1, shape.experts // shape.ep)
    tokens_sp = shape.tokens // shape.tp if shape.sp else shape.tokens  # whole experts: tp ranks send their slice
    per_expert = round(tokens_sp * shape.ep * shape.top_k * shape.capacity_factor / shape.experts)
    return local, max(1, per_expert)


def _forward(shape: LayerShape, dev: Device) -> list[Kernel]:
    h, t = shape.hidden, shape.tp
    T = shape.tokens
    Tn = T // t if shape.sp else T  # tokens the norms, residuals and dropouts see
    act = 2  # BF16 activations
    gemm_dtype = "fp8" if shape.fp8 else shape.dtype
    kernels: list[Kernel] = []

    def project(name: str, m: int, n: int, k: int, batch: int = 1) -> None:
        if shape.fp8:
            kernels.append(elementwise(f"{name}: FP8 cast of input", batch * m * k * 4, dev))
            kernels.append(elementwise(f"{name}: amax/scale update", 0.0, dev))
        kernels.append(gemm(name, m, n, k, gemm_dtype, dev, batch))

    sw = shape.software
    residual = (6 + (3 if _dropout(shape) else 0)) * Tn * h  # a + b -> c, and dropout's read, write, mask
    # Bytes per element: a fused norm reads and writes once; the eager reference RMSNorm runs six
    # kernels with FP32 intermediates (36 bytes, :mod:`.software`). LayerNorm is one kernel even eager.
    norm = EAGER_RMSNORM_BYTES if sw.eager_norm and shape.gated_mlp else 2 * act
    rotary = EAGER_ROTARY_BYTES if sw.eager_rotary else 2 * act
    glu = EAGER_SWIGLU_BYTES if sw.eager_swiglu else 3 * act  # per element of the MLP width
    projections = weight_gemms(shape)
    kernels.append(elementwise("norm 1", norm * Tn * h, dev))
    project(*projections[0])
    if shape.rope:
        kernels.append(elementwise("rotary embedding", rotary * T * (h + shape.kv_width) // t, dev))
    if sw.repeat_kv and shape.kv_width < h:  # K and V expanded to every query head: read h_kv, write h
        kernels.append(elementwise("repeat K, V", 2 * act * T * (shape.kv_width + h) // t, dev))
    kernels += _attention(shape, dev, backward=False)
    if sw.repeat_kv:  # the attention output transposed back and made contiguous
        kernels.append(elementwise("attention output copy", 2 * act * T * h // t, dev))
    project(*projections[1])
    kernels.append(elementwise("residual 1", residual, dev))
    kernels.append(elementwise("norm 2", norm * Tn * h, dev))
    if shape.experts == 1:
        f = shape.mlp_width // t
        project(*projections[2])
        kernels.append(elementwise("SwiGLU" if shape.gated_mlp else "GeLU",
                                   (glu if shape.gated_mlp else 2 * act) * T * f, dev))
        project(*projections[3])
    else:
        local, m = _experts(shape)
        f = shape.mlp_width
        routed = Tn * shape.top_k  # rows this GPU sends to the experts: each token once per chosen expert
        kernels.append(gemm("router", Tn, shape.experts, h, shape.dtype, dev))
        kernels.append(elementwise("token permutation", act * (Tn + routed) * h, dev))
        project("experts up", m, f * (2 if shape.gated_mlp else 1), h, local)
        kernels.append(elementwise("experts SwiGLU" if shape.gated_mlp else "experts GeLU",
                                   (glu if shape.gated_mlp else 2 * act) * local * m * f, dev))
        project("experts down", m, h, f, local)
        kernels.append(elementwise("token unpermutation", act * (routed + Tn) * h, dev))
    kernels.append(elementwise("residual 2", residual, dev))
    return kernels


def _dropout(shape: LayerShape) -> bool:
    """Whether the layer runs dropout: asked for, or the framework's default (Megatron-LM 2021's 0.1)."""
    return shape.dropout or shape.software.dropout


def _attention(shape: LayerShape, dev: Device, *, backward: bool) -> list[Kernel]:
    heads = shape.heads // shape.tp
    bh = shape.micro_batch * heads
    if shape.attention == "unfused":
        if shape.cp > 1:
            raise ConfigError("context parallelism needs flash attention (ring attention); set attention: flash",
                              "attention")
        return unfused_attention(bh, shape.seq, shape.head_dim, dev, dropout=_dropout(shape),
                                 backward=backward, dtype=shape.dtype)
    # Context parallelism (load-balanced causal chunks): each GPU's s/cp queries meet all s keys
    # and do 1/cp of the whole causal work. A ring calls the kernel once per step, on the chunk
    # of s/cp keys it holds then; an all-gather (Llama 3's) gives the kernel the whole gathered
    # K and V, so one call loops over the sequence's keys as a single GPU's causal kernel does,
    # and each query block's fixed cost is spread over s keys, not s/cp.
    share = causal_fraction(shape.seq) if shape.causal else 1.0
    keys = shape.seq if shape.cp_comm == "allgather" else shape.seq // shape.cp
    # The framework's attention kernel where it is not the device's best (FlashAttention-2 on Hopper),
    # or FlashAttention-2 where the layer names it (attention: flash2, whatever the framework).
    sw = shape.software if shape.attention == "flash" else replace(shape.software, attention="flash2")
    fractions = attention_fractions(sw, dev)
    return [flash_attention(bh, shape.seq // shape.cp, shape.seq, shape.head_dim, dev, share=share,
                            backward=backward, keys_per_call=keys, fractions=fractions)]


def _backward(shape: LayerShape, forward: list[Kernel], dev: Device) -> list[Kernel]:
    gemm_dtype = "fp8" if shape.fp8 else shape.dtype
    shapes = {name: (m, n, k, 1) for name, m, n, k in weight_gemms(shape)}
    if shape.experts > 1:
        local, m = _experts(shape)
        f = shape.mlp_width
        shapes["experts up"] = (m, f * (2 if shape.gated_mlp else 1), shape.hidden, local)
        shapes["experts down"] = (m, shape.hidden, f, local)
        shapes["router"] = (shape.tokens // shape.tp if shape.sp else shape.tokens, shape.experts, shape.hidden, 1)
    kernels: list[Kernel] = []
    attention_done = False
    for k in reversed(forward):
        if k.kind == "attention" or k.name.startswith("attention ") or k.name == "softmax":
            if not attention_done:  # the attention core's backward, once, where its forward was
                kernels += _attention(shape, dev, backward=True)
                attention_done = True
        elif k.kind == "gemm":
            m, n, kk, batch = shapes[k.name]
            dtype = shape.dtype if k.name == "router" else gemm_dtype
            if shape.fp8 and k.name != "router":
                kernels.append(elementwise(f"{k.name}: FP8 cast of output gradient", batch * m * n * 4, dev))
                kernels.append(elementwise(f"{k.name}: amax/scale update (backward)", 0.0, dev))
            kernels.append(gemm(f"{k.name} data gradient", m, kk, n, dtype, dev, batch))
            kernels.append(gemm(f"{k.name} weight gradient", kk, n, m, dtype, dev, batch))
        elif "FP8 cast" not in k.name and "amax" not in k.name:  # the backward's casts go with their GEMMs
            kernels.append(elementwise(f"{k.name} backward", BACKWARD_BYTES * k.bytes, dev))
    extra = shape.software.grad_accumulation_bytes
    if extra:  # each weight's 16-bit gradient added into its FP32 main gradient, once per micro-batch
        kernels.append(elementwise("FP32 gradient accumulation", extra * layer_weights(shape), dev))
    return kernels


def _op_checkpoint(shape: LayerShape, forward: list[Kernel], dev: Device) -> list[Kernel]:
    """What per-op selective checkpointing reruns before the backward: every second matrix
    multiplication of the forward, in the order the block runs them (wq, wk, wv, wo, then w1, w3,
    w2 gated or w1, w2 not), and every element-wise kernel; attention's output is kept."""
    h, t, T = shape.hidden, shape.tp, shape.tokens
    f = shape.mlp_width // t
    kv = shape.kv_width // t
    gemm_dtype = "fp8" if shape.fp8 else shape.dtype
    mms = [("wq", T, h // t, h), ("wk", T, kv, h), ("wv", T, kv, h), ("wo", T, h, h // t)]
    if shape.experts == 1:
        mms += [("w1", T, f, h), ("w3", T, f, h), ("w2", T, h, f)] if shape.gated_mlp else \
            [("w1", T, f, h), ("w2", T, h, f)]
    again = [gemm(f"{name} (recomputed)", m, n, k, gemm_dtype, dev) for name, m, n, k in mms[1::2]]
    return again + [k for k in forward if k.kind == "memory"]


def layer_weights(shape: LayerShape) -> int:
    """The layer's GEMM weights on this GPU (its tp shard, its ep share of the experts)."""
    weights = sum(n * k for _, _, n, k in weight_gemms(shape))
    if shape.experts > 1:
        local, _ = _experts(shape)
        weights += local * shape.hidden * shape.mlp_width * (3 if shape.gated_mlp else 2)
    return weights


def fp8_weight_cast_time(shape: LayerShape, dev: Device) -> float:
    """Casting one layer's weights to FP8 (and a transposed copy): once per step, 0 without FP8."""
    if not shape.fp8:
        return 0.0
    return 4 * layer_weights(shape) / dev.hbm_rate


def layer_time(shape: LayerShape, dev: Device) -> LayerTime:
    """The kernels and times of one layer's forward, recomputation and backward on *dev*."""
    if shape.fp8 and "fp8" not in dev.peaks:
        raise ConfigError(f"{dev.name} has no FP8 tensor cores; use dtype bf16", "fp8")
    forward = _forward(shape, dev)
    backward = _backward(shape, forward, dev)
    if shape.recompute == "full":
        recompute = list(forward)
    elif shape.recompute == "selective" and shape.software.op_checkpoint:
        recompute = _op_checkpoint(shape, forward, dev)
    elif shape.recompute == "selective" and shape.attention == "unfused":
        recompute = _attention(shape, dev, backward=False)
    else:
        recompute = []
    return LayerTime(tuple(forward), tuple(backward), tuple(recompute), dev.launch_s)


def with_layout(shape: LayerShape, **changes: Any) -> LayerShape:
    """*shape* with some fields changed (a convenience for sweeps)."""
    return replace(shape, **changes)
