"""The time of one matrix multiplication on one GPU, from its shape: a roofline with tiles and waves.

A GEMM ``C[m, n] = A[m, k] B[k, n]`` (``2 m n k`` FLOPs) runs as a grid of thread blocks (CTAs),
each computing one ``Tm x Tn`` tile of C by walking the whole k dimension. Three effects make
its rate depend on the shape (NVIDIA, "Matrix Multiplication Background User's Guide", chapter 3;
Anthony et al., "The Case for Co-Designing Model Architectures with Hardware", 2024):

* **Tile quantisation**: C is cut into ``ceil(m/Tm) x ceil(n/Tn)`` tiles, and an edge tile costs a
  full one: m = 257 on 256-row tiles does the work of 512.
* **Wave quantisation**: one tile per SM runs at a time, so ``ceil(tiles / SMs)`` waves run,
  the last one partly empty: 109 tiles on A100's 108 SMs take two full waves' time.
* **Memory**: a small or thin GEMM cannot reuse its operands enough to keep the tensor cores
  busy; it takes at least the time to stream A, B and C through HBM.

Each tile costs its FLOPs at the SM's share of the device's achievable rate, plus the time its
epilogue takes to write the tile to HBM at the SM's share of the bandwidth (which is why a short
k is less efficient on A100; Hopper's and Blackwell's persistent, warp-specialised kernels write
one tile while computing the next, CUTLASS 3's "ping-pong" and "cooperative" schedules, so there
only the last tile's store shows). Smaller tiles reuse each loaded operand fewer times: a ``Tm x Tn`` tile
does ``Tm Tn / (Tm + Tn)`` FLOPs per byte it loads, and an A100 SM needs about 43 (its 2,048
BF16 FLOPs per clock over its share of the L2's 5,120 bytes per clock, Ampere whitepaper), so
64 x 64 tiles run at 32/43 of the rate; the same balance is assumed for later GPUs. Like
cuBLAS's heuristics, the model takes the fastest tile and, when the tiles are too few to fill
the SMs, splits k over several CTAs (split-K) and pays for reducing their FP32 partial sums.

The achievable rate is the one device constant: chosen so that the model reproduces the
device's measured maximum achievable matmul rate (:data:`~.devices.Device.mamf`) at the shape
where it was measured. Every other shape is a prediction, with one bound: the MAMF is the
*best* rate of a brute-force search over thousands of shapes (mamf-finder sweeps m, n and k up
to 20,480; Bekman, ML Engineering, compute/accelerator/benchmarks), so no shape runs faster.
The tile model alone would put a wave-aligned training GEMM above it (an A100 at 279 TFLOP/s
for a 12288 x 4096 x 16384 MLP GEMM, against the 271.2 the search found at best): the
measured maximum caps every shape's rate.

Examples::

    >>> from mpisim.workloads.compute.devices import device
    >>> a100 = device("a100-sxm4-80gb")
    >>> round(2 * 1024 * 10240 * 5120 / gemm_time(1024, 10240, 5120, "bf16", a100) / 1e12, 1)
    271.2
"""

from __future__ import annotations

import math

from mpisim.workloads.compute.devices import DEVICES, Device, canonical_dtype

__all__ = ["achievable_rate", "gemm_flops", "gemm_time", "itemsize"]

ITEMSIZE = {"fp8": 1, "bf16": 2, "fp16": 2, "tf32": 4}
OPERAND_INTENSITY = 43.0  # FLOPs per loaded byte an SM needs from its tile (A100: 2048 / (5120 / 108))
SPLITS = (1, 2, 4, 8, 16)


def itemsize(dtype: str) -> int:
    """Bytes per element of an operand in *dtype*."""
    return ITEMSIZE[canonical_dtype(dtype)]


def gemm_flops(m: int, n: int, k: int, batch: int = 1) -> float:
    """FLOPs of *batch* GEMMs of shape (m, n, k): one multiply and one add per term."""
    return 2.0 * batch * m * n * k


def _tile_efficiency(tm: int, tn: int) -> float:
    return min(1.0, tm * tn / (tm + tn) / OPERAND_INTENSITY)


def _time_at(m: int, n: int, k: int, in_b: int, out_b: int, batch: int, rate: float, dev: Device) -> float:
    """Time of the GEMM when the device's tensor cores run at *rate* FLOP/s in all."""
    rate_sm = rate / dev.sms
    hbm_sm = dev.hbm_rate / dev.sms
    best = math.inf
    for tm, tn in dev.tiles:
        tiles = math.ceil(m / tm) * math.ceil(n / tn) * batch
        efficiency = _tile_efficiency(tm, tn)
        for split in SPLITS:
            if split > 1 and tiles >= dev.sms:  # cuBLAS splits k only when the tiles cannot fill the SMs
                break
            waves = math.ceil(tiles * split / dev.sms)
            kk = math.ceil(k / split)
            partial_b = 4 if split > 1 else out_b  # split-K partial sums stay in FP32
            math_s = 2.0 * tm * tn * kk / (rate_sm * efficiency)
            epilogue_s = tm * tn * partial_b / hbm_sm
            # Persistent kernels store a tile while the next one computes: only the last store shows.
            total = waves * math_s + (epilogue_s if dev.epilogue_overlap else waves * epilogue_s)
            if split > 1:  # a second kernel reads the partials and writes C
                total += max(batch * m * n * (4 * split + out_b) / dev.hbm_rate, dev.launch_s)
            best = min(best, total)
    return best


def _memory_time(m: int, n: int, k: int, in_b: int, out_b: int, batch: int, dev: Device) -> float:
    return batch * ((m * k + k * n) * in_b + m * n * out_b) / dev.hbm_rate


def achievable_rate(dev: Device, dtype: str) -> float:
    """The tensor-core rate (FLOP/s) at which the model reproduces the device's MAMF measurement.

    Found by bisection: the model's throughput at the measured shape grows with the rate.
    """
    key = canonical_dtype(dtype)
    cached = dev._cache.get(("rate", key))
    if cached is not None:
        return cached
    target, (m, n, k) = dev.measured(key)
    if dev.measured_on:  # the same silicon and the same measurement: the same tensor rate
        other = DEVICES[dev.measured_on]
        if other.measured(key) == (target, (m, n, k)):
            dev._cache[("rate", key)] = rate = achievable_rate(other, key)
            return rate
    in_b = ITEMSIZE[key]
    out_b = 2
    flops = gemm_flops(m, n, k)
    lo, hi = target, 4.0 * dev.peak(key)
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        t = max(_time_at(m, n, k, in_b, out_b, 1, mid, dev), _memory_time(m, n, k, in_b, out_b, 1, dev))
        if flops / t < target:
            lo = mid
        else:
            hi = mid
    dev._cache[("rate", key)] = hi
    return hi


def gemm_time(m: int, n: int, k: int, dtype: str, dev: Device, *, batch: int = 1, out_itemsize: int = 2,
              launch: bool = True, sustained: bool = False) -> float:
    """Seconds for *batch* GEMMs ``[m, k] x [k, n]`` in *dtype* on *dev* (output in BF16 by default).

    The slowest of: the tiles' waves at the achievable rate, streaming the operands through HBM,
    and (with *launch*, for a GEMM run on its own) the kernel's launch. In a stream of kernels
    the launches overlap the work; :mod:`~.layer` charges them once for the whole stream.
    *sustained* runs the tensor cores at the device's sustained rate for *dtype* (a long training
    run at the power limit, :meth:`~.devices.Device.sustained_share`) instead of a benchmark's burst.
    """
    if min(m, n, k, batch) < 1:
        return 0.0
    key = canonical_dtype(dtype)
    in_b = ITEMSIZE[key]
    clock = dev.sustained_share(key) if sustained else 1.0
    rate = achievable_rate(dev, key) * clock
    ceiling = gemm_flops(m, n, k, batch) / (dev.measured(key)[0] * clock)  # no shape beats the search's best
    return max(_time_at(m, n, k, in_b, out_itemsize, batch, rate, dev), ceiling,
               _memory_time(m, n, k, in_b, out_itemsize, batch, dev), dev.launch_s if launch else 0.0)
