"""The kernels of a transformer layer that are not plain GEMMs: attention and the element-wise ones.

**Fused (flash) attention** (Dao et al. 2022, 2023; Shah et al. 2024) computes
``softmax(Q K^T / sqrt(d)) V`` tile by tile in on-chip memory, never writing the s x s scores to
HBM. Its work is two matrix products per head, ``4 s_q s_kv d`` FLOPs forward (half of it with a
causal mask, which skips the blocks above the diagonal), and its backward recomputes the
scores: 2.5 x the forward's FLOPs (five products instead of two). It runs at its own measured
fraction of the peak (:data:`~.devices.Device.attention`, measured in benchmark bursts, so
scaled like GEMMs by the device's sustained clock): softmax's exponentials and the online
rescaling keep it below a GEMM's rate, and each query block's fixed cost makes short key
ranges slower, ``s / (s + s0)`` of the long-sequence rate.

**Unfused attention** (Megatron-LM before flash attention, BLOOM): the scores ``Q K^T`` are a
batched GEMM per head written to HBM, a fused scale-mask-softmax kernel reads and writes them,
attention dropout reads them again and writes a mask, and a second batched GEMM multiplies by V.
Those s x s passes are bound by memory bandwidth.

**Element-wise kernels** (layer norms, residual adds, dropout, GeLU, SwiGLU, rotary embeddings,
FP8 casts) do a few operations per byte, so they take the bytes they read and write over the
HBM bandwidth a streaming kernel achieves. Their backward reads the saved input and the incoming
gradient and writes one gradient: about 1.5 x the forward's bytes for a unary kernel (Bekman,
ML Engineering, "forward vs backward execution speed": an activation's forward reads once and
writes once, its backward reads twice and writes once).
"""

from __future__ import annotations

from dataclasses import dataclass

from mpisim.workloads.compute.devices import ATTENTION_S0, Device
from mpisim.workloads.compute.gemm import gemm_flops, gemm_time

__all__ = ["BACKWARD_BYTES", "Kernel", "causal_fraction", "elementwise", "flash_attention", "gemm",
           "unfused_attention"]

BACKWARD_BYTES = 1.5  # backward / forward bytes of an element-wise kernel (reads 2, writes 1 vs reads 1, writes 1)
FLASH_BACKWARD_FLOPS = 2.5  # flash attention's backward: 5 matrix products against the forward's 2 (Dao 2023)
FLASH_BLOCK = 128  # query/key block of the flash kernels: the diagonal blocks are computed whole


@dataclass(frozen=True)
class Kernel:
    """One kernel of a layer's pass: its name, kind (gemm, attention, memory), seconds, FLOPs and HBM bytes."""

    name: str
    kind: str
    seconds: float
    flops: float = 0.0
    bytes: float = 0.0


def gemm(name: str, m: int, n: int, k: int, dtype: str, dev: Device, batch: int = 1) -> Kernel:
    """A GEMM kernel ``[m, k] x [k, n]`` (times *batch*) at the sustained rate, without its launch (charged per stream)."""
    return Kernel(name, "gemm", gemm_time(m, n, k, dtype, dev, batch=batch, launch=False, sustained=True),
                  gemm_flops(m, n, k, batch))


def elementwise(name: str, nbytes: float, dev: Device) -> Kernel:
    """A memory-bound kernel moving *nbytes* through HBM."""
    return Kernel(name, "memory", nbytes / dev.hbm_rate, 0.0, nbytes)


def causal_fraction(s: int) -> float:
    """Share of the s x s score blocks a causal kernel computes: the lower half, diagonal blocks whole."""
    return min(1.0, 0.5 + 0.5 * FLASH_BLOCK / s)


def flash_attention(batch_heads: int, s_q: int, s_kv: int, head_dim: int, dev: Device, *,
                    share: float = 1.0, backward: bool = False, itemsize: int = 2, sustained: bool = True,
                    keys_per_call: int = 0, fractions: tuple[float, float] | None = None) -> Kernel:
    """Fused attention of *batch_heads* (micro-batch x heads on this GPU) s_q queries over s_kv keys.

    *share* is the part of the s_q x s_kv score blocks computed (:func:`causal_fraction` for a
    causal mask). The rate is the device's attention fraction of its peak times
    ``s / (s + s0)`` (:data:`~.devices.ATTENTION_S0`) for the *keys_per_call* s one kernel call
    loops over (default s_kv; ring attention calls it once per key chunk), at the sustained
    clock unless *sustained* is off (a benchmark's burst). The time is the larger of the FLOPs at that rate and
    the HBM traffic (Q, K, V and O read or written once; the backward also reads dO and writes dQ,
    dK, dV). *fractions* replaces the device's own kernel's (forward, backward) fractions of the
    peak: another kernel generation than the device's best (FlashAttention-2 on Hopper).
    """
    flops = 4.0 * batch_heads * s_q * s_kv * head_dim * share
    forward, back = fractions or dev.attention
    keys = keys_per_call or s_kv
    saturation = keys / (keys + ATTENTION_S0)  # each query block's fixed cost, over the keys it loops over
    clock = dev.sustained_share("bf16") if sustained else 1.0  # the attention core runs in BF16
    if backward:
        flops *= FLASH_BACKWARD_FLOPS
        nbytes = batch_heads * head_dim * itemsize * (4 * s_q + 4 * s_kv)
        seconds = flops / (back * saturation * clock * dev.peak("bf16"))
    else:
        nbytes = batch_heads * head_dim * itemsize * (2 * s_q + 2 * s_kv)
        seconds = flops / (forward * saturation * clock * dev.peak("bf16"))
    return Kernel("attention backward" if backward else "attention", "attention",
                  max(seconds, nbytes / dev.hbm_rate), flops, nbytes)


def unfused_attention(batch_heads: int, s: int, head_dim: int, dev: Device, *, dropout: bool,
                      backward: bool = False, dtype: str = "bf16") -> list[Kernel]:
    """Attention with the scores in HBM (Megatron-LM's fused scale-mask-softmax, then dropout).

    Forward: ``Q K^T`` (batched GEMM), softmax (reads and writes the s x s scores: 4 bytes per
    score in BF16), dropout (reads the probabilities, writes them and a 1-byte mask: 5 bytes),
    then ``P V``. Backward: the two products' data gradients (four batched GEMMs), dropout's
    and softmax's backward (5 and 6 bytes per score).
    """
    scores = batch_heads * s * s
    if not backward:
        kernels = [gemm("attention scores QK^T", s, s, head_dim, dtype, dev, batch_heads),
                   elementwise("softmax", 4 * scores, dev)]
        if dropout:
            kernels.append(elementwise("attention dropout", 5 * scores, dev))
        kernels.append(gemm("attention values PV", s, head_dim, s, dtype, dev, batch_heads))
        return kernels
    kernels = [gemm("attention dP = dO V^T", s, s, head_dim, dtype, dev, batch_heads),
               gemm("attention dV = P^T dO", s, head_dim, s, dtype, dev, batch_heads)]
    if dropout:
        kernels.append(elementwise("attention dropout backward", 5 * scores, dev))
    kernels += [elementwise("softmax backward", 6 * scores, dev),
                gemm("attention dQ = dS K", s, head_dim, s, dtype, dev, batch_heads),
                gemm("attention dK = dS^T Q", s, head_dim, s, dtype, dev, batch_heads)]
    return kernels
