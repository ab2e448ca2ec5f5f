"""The GEMM model against published matmul benchmarks, closed forms and physical monotonicity."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpisim.errors import ConfigError
from mpisim.workloads.compute import DEVICES, device, gemm_time
from mpisim.workloads.compute.gemm import achievable_rate, gemm_flops


def tflops(m: int, n: int, k: int, dtype: str, name: str) -> float:
    return gemm_flops(m, n, k) / gemm_time(m, n, k, dtype, device(name)) / 1e12


@pytest.mark.parametrize(("name", "dtype"), [(n, dt) for n, d in DEVICES.items() for dt in d.mamf])
def test_calibration_reproduces_the_measured_best_matmul(name, dtype):
    """At the shape where mamf-finder measured its best, the model gives that rate, below the peak.

    A device sharing another's measurement (A100 40 GB, H200 in BF16) shares its tensor rate, and
    differs only by its memory: within 1 % there.
    """
    dev = device(name)
    rate, (m, n, k) = dev.mamf[dtype]
    shared = dev.measured_on and DEVICES[dev.measured_on].measured(dtype) == dev.measured(dtype)
    assert tflops(m, n, k, dtype, name) * 1e12 == pytest.approx(rate, rel=0.01 if shared else 1e-6)
    assert achievable_rate(dev, dtype) <= dev.peak(dtype)
    if shared:
        assert achievable_rate(dev, dtype) == achievable_rate(DEVICES[dev.measured_on], dtype)


# Held out of the calibration: the same benchmark's earlier table, at other shapes and on other
# software (S. Bekman, ML Engineering, compute/accelerator/README.md, first MAMF table, CUDA 12.1
# and 12.5): A100 SXM 267.9 TFLOPS at 6912x16384x2048, H100 SXM 792.1 at 6144x17920x2816, GH200
# (H200's 141 GB HBM3e part) 821.0 at 11264x19712x1536; from the current table, B300 ("same as
# B200, newer torch/cuda": B200's tensor cores and clocks) 1769.0 BF16 at 12288x18432x1024 and
# 3353.3 FP8 at 3072x6144x7168; and the FP8 rows of H100 and H200 (one die) at each other's shape:
# H200 1453.4 at 1280x4096x12032, H100 1402.6 at 1024x9216x14336.
HELD_OUT = [
    ("a100-sxm4-80gb", "bf16", (6912, 16384, 2048), 267.9),
    ("h100-sxm", "bf16", (6144, 17920, 2816), 792.1),
    ("h200-sxm", "bf16", (11264, 19712, 1536), 821.0),
    ("b200", "bf16", (12288, 18432, 1024), 1769.0),
    ("b200", "fp8", (3072, 6144, 7168), 3353.3),
    ("h100-sxm", "fp8", (1280, 4096, 12032), 1453.4),
    ("h200-sxm", "fp8", (1024, 9216, 14336), 1402.6),
]


@pytest.mark.parametrize(("name", "dtype", "shape", "measured"), HELD_OUT,
                         ids=[f"{r[0]}-{r[1]}-{'x'.join(map(str, r[2]))}" for r in HELD_OUT])
def test_held_out_matmul_benchmarks_within_5_percent(name, dtype, shape, measured):
    assert tflops(*shape, dtype, name) == pytest.approx(measured, rel=0.05)


def test_a_thin_gemm_streams_its_weights_at_hbm_speed():
    """A matrix-vector product (m = 1) is bound by reading the k x n weights: its closed form."""
    dev = device("h100-sxm")
    k = n = 8192
    expected = (k + k * n + n) * 2 / dev.hbm_rate
    assert gemm_time(1, n, k, "bf16", dev) == pytest.approx(expected, rel=1e-12)


def test_a_tiny_gemm_costs_one_launch():
    dev = device("a100-sxm4-80gb")
    assert gemm_time(16, 16, 16, "bf16", dev) == dev.launch_s
    assert gemm_time(16, 16, 16, "bf16", dev, launch=False) < dev.launch_s


def test_wave_quantisation_staircase():
    """One more tile than SMs costs a second full wave (Bekman's B300 staircase: 148 vs 152 SMs).

    With a single 128 x 256 tile and no split-K the time is waves x tile time + one epilogue,
    the closed form below; 149 tiles on 148 SMs take twice as long as 148.
    """
    dev = replace(device("b200"), tiles=((128, 256),), _cache={})
    k = 8192
    rate_sm = achievable_rate(dev, "bf16") / dev.sms

    def expected(tiles):
        waves = math.ceil(tiles / dev.sms)
        return waves * 2 * 128 * 256 * k / rate_sm + 128 * 256 * 2 / (dev.hbm_rate / dev.sms)

    one = gemm_time(128 * dev.sms, 256, k, "bf16", dev)
    two = gemm_time(128 * (dev.sms + 1), 256, k, "bf16", dev)
    assert one == pytest.approx(expected(dev.sms), rel=1e-12)
    assert two == pytest.approx(expected(dev.sms + 1), rel=1e-12)
    assert two / one == pytest.approx(2.0, rel=0.03)  # not exactly 2: the last tile's store shows once


def test_split_k_fills_the_sms_when_the_tiles_cannot():
    """A weight-gradient GEMM (small m x n, long k) is split over k rather than running on 4 SMs."""
    dev = device("h100-sxm")
    m, n, k = 256, 512, 65536
    assert tflops(m, n, k, "bf16", "h100-sxm") > 0.5 * achievable_rate(dev, "bf16") / 1e12


def test_fp8_is_faster_than_bf16_on_hopper_and_missing_on_ampere():
    assert gemm_time(8192, 8192, 8192, "fp8", device("h100-sxm")) < gemm_time(8192, 8192, 8192, "bf16",
                                                                               device("h100-sxm"))
    with pytest.raises(ConfigError, match="no fp8"):
        gemm_time(8192, 8192, 8192, "fp8", device("a100-sxm4-80gb"))


def test_unknown_names_are_refused():
    with pytest.raises(ConfigError, match="unknown device"):
        device("v100")
    with pytest.raises(ConfigError, match="unknown compute dtype"):
        gemm_time(8, 8, 8, "int3", device("h100-sxm"))


dims = st.integers(1, 20000)


@settings(max_examples=200, deadline=None)
@given(m=dims, n=dims, k=dims, grow=st.integers(1, 4096), axis=st.sampled_from("mnk"),
       name=st.sampled_from(sorted(DEVICES)))
def test_time_never_falls_when_a_dimension_grows(m, n, k, grow, axis, name):
    dev = device(name)
    bigger = {"m": (m + grow, n, k), "n": (m, n + grow, k), "k": (m, n, k + grow)}[axis]
    assert gemm_time(*bigger, "bf16", dev) >= gemm_time(m, n, k, "bf16", dev) * (1 - 1e-12)


@settings(max_examples=200, deadline=None)
@given(m=dims, n=dims, k=dims, name=st.sampled_from(sorted(DEVICES)), dtype=st.sampled_from(["bf16", "fp8"]),
       sustained=st.booleans())
def test_no_shape_beats_the_measured_maximum(m, n, k, name, dtype, sustained):
    """MAMF is the best of a search over shapes: no GEMM runs faster (at the sustained clock, its share of it)."""
    dev = device(name)
    if dtype not in dev.peaks:
        return
    clock = dev.sustained_share(dtype) if sustained else 1.0
    rate = gemm_flops(m, n, k) / gemm_time(m, n, k, dtype, dev, sustained=sustained)
    assert rate <= dev.measured(dtype)[0] * clock * (1 + 1e-9)


# Each pair: the second device has at least the first's SMs, bandwidth and measured matmul rate
# (not A100 80GB and H100 PCIe: the PCIe card's HBM2e, 2.0 TB/s, is slower than the SXM A100's 2.04).
FASTER = [("a100-sxm4-40gb", "a100-sxm4-80gb"), ("a100-sxm4-40gb", "h100-pcie"), ("a100-sxm4-80gb", "h100-sxm"),
          ("h100-pcie", "h100-sxm"),
          ("h100-sxm", "h200-sxm"), ("h100-sxm", "b200"), ("h200-sxm", "b200"), ("b200", "gb200")]


@settings(max_examples=100, deadline=None)
@given(m=dims, n=dims, k=dims, pair=st.sampled_from(FASTER))
def test_a_faster_device_is_never_slower(m, n, k, pair):
    slow, fast = (device(p) for p in pair)
    assert gemm_time(m, n, k, "bf16", fast, sustained=True) <= gemm_time(m, n, k, "bf16", slow, sustained=True)


# FlashAttention-3 forward on H100, head dim 128, 16 heads, batch x sequence = 16k tokens
# (pytorch/benchmark PR #2391, flash_v3 column): TFLOP/s by sequence length.
FA3_H100 = {512: 430.32, 1024: 517.099, 2048: 565.544, 4096: 590.233, 8192: 614.234, 16384: 620.73}


@pytest.mark.parametrize(("seq", "measured"), FA3_H100.items())
def test_flash_attention_rate_follows_the_measured_sequence_curve(seq, measured):
    from mpisim.workloads.compute.kernels import flash_attention

    dev = device("h100-sxm")
    kernel = flash_attention(16384 // seq * 16, seq, seq, 128, dev, sustained=False)
    assert kernel.flops / kernel.seconds / 1e12 == pytest.approx(measured, rel=0.015)
