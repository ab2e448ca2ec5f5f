"""The sustained matmul rate under a training's power draw, and the slowest GPU a synchronous job waits for."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpisim.scenario import load_dict
from mpisim.scenario.run import new_world_factory
from mpisim.workloads.compute import DEVICES, LayerShape, device, gemm_time, layer_time
from mpisim.workloads.compute.devices import GENERIC_NODE, NodeSpread
from mpisim.workloads.compute.kernels import elementwise
from mpisim.workloads.compute.variability import expected_max, rate_sigma, slowest_device, slowest_share
from mpisim.workloads.training.plan import make_job

# mamf-finder's MSMF against its MAMF in the same run (Bekman, ML Engineering, MAMF & MSMF table),
# and He's power-limited A100 GEMM (257 TFLOP/s on random data) against the A100's MAMF (271.2).
PUBLISHED = [("h100-sxm", "bf16", 708.5 / 841.9), ("h100-sxm", "fp8", 1288.7 / 1491.9),
             ("h200-sxm", "bf16", 708.5 / 841.9), ("b200", "bf16", 1456.3 / 1770.9),
             ("b200", "fp8", 2795.7 / 3435.2), ("a100-sxm4-80gb", "bf16", 257 / 271.2),
             ("a100-sxm4-80gb", "fp16", 257 / 271.2), ("mi300x", "bf16", 1.0)]


@pytest.mark.parametrize(("name", "dtype", "share"), PUBLISHED)
def test_sustained_shares_are_the_published_ratios(name, dtype, share):
    assert device(name).sustained_share(dtype) == pytest.approx(share, rel=1e-12)


@pytest.mark.parametrize(("name", "dtype"), [(n, dt) for n, d in DEVICES.items() for dt in d.mamf])
def test_at_the_measured_shape_the_sustained_gemm_runs_at_the_share_of_the_burst(name, dtype):
    """At MAMF's shape the GEMM runs at the measured best: the sustained clock stretches it by exactly
    1 / share. A device sharing another's measurement (A100 40 GB) writes its tiles through a slower
    HBM, which no clock slows: at most 1 / share there."""
    dev = device(name)
    m, n, k = dev.measured(dtype)[1]
    burst = gemm_time(m, n, k, dtype, dev, launch=False)
    sustained = gemm_time(m, n, k, dtype, dev, launch=False, sustained=True)
    if dev.measured_on:
        assert burst <= sustained <= burst / dev.sustained_share(dtype) * (1 + 1e-12)
    else:
        assert sustained == pytest.approx(burst / dev.sustained_share(dtype), rel=1e-9)


def test_the_more_power_dense_gpu_loses_more_of_its_burst_rate():
    """A100 (312 TFLOP/s in 400 W) < H100 (989 in 700 W) < B200 (2250 in 1000 W): the sustained share falls."""
    shares = [device(n).sustained_share("bf16") for n in ("a100-sxm4-80gb", "h100-sxm", "b200")]
    assert shares == sorted(shares, reverse=True)
    assert all(share < 1.0 for share in shares)


dims = st.integers(1, 20000)


@settings(max_examples=100, deadline=None)
@given(m=dims, n=dims, k=dims, name=st.sampled_from(sorted(DEVICES)), dtype=st.sampled_from(["bf16", "fp8"]))
def test_sustained_is_never_faster_than_the_burst(m, n, k, name, dtype):
    dev = device(name)
    if dtype not in dev.peaks:
        return
    assert gemm_time(m, n, k, dtype, dev, sustained=True) >= gemm_time(m, n, k, dtype, dev) * (1 - 1e-12)


def test_expected_max_closed_forms():
    assert expected_max(1) == 0.0
    assert expected_max(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-6)
    assert expected_max(3) == pytest.approx(3 / (2 * math.sqrt(math.pi)), rel=1e-6)
    # Tabulated E[max of n standard normals] (Tippett 1925; Harter 1961): 1.02938 for 4, 1.16296 for 5, 1.53875 for 10.
    assert expected_max(4) == pytest.approx(1.02938, rel=1e-4)
    assert expected_max(5) == pytest.approx(1.16296, rel=1e-4)
    assert expected_max(10) == pytest.approx(1.53875, rel=1e-4)
    for n in (2, 8, 64, 1024, 16384):  # the classical bound E[max] <= sqrt(2 ln n)
        assert expected_max(n) <= math.sqrt(2 * math.log(n))


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 20000), more=st.integers(1, 5000))
def test_more_gpus_never_have_a_faster_slowest(n, more):
    assert expected_max(n + more) >= expected_max(n)
    for name in ("a100-sxm4-80gb", "h100-sxm", "b200"):
        dev = device(name)
        assert slowest_share(dev, n + more) <= slowest_share(dev, n)


def test_sigma_from_the_range_with_the_noise_taken_out():
    clean = NodeSpread(1.0, 0.05, 8)
    assert rate_sigma(clean) == pytest.approx(0.05 / (2 * expected_max(8)))
    noisy = NodeSpread(1.0, 0.05, 8, 0.02, 5)
    expected = math.sqrt((0.05 / (2 * expected_max(8))) ** 2 - (0.02 / (2 * expected_max(5))) ** 2)
    assert rate_sigma(noisy) == pytest.approx(expected)
    assert rate_sigma(NodeSpread(1.0, 0.01, 8, 0.5, 5)) == 0.0  # noise larger than the range: no spread left


def test_slowest_share_formula_and_one_gpu():
    h100 = device("h100-sxm")
    assert slowest_share(h100, 1) == 1.0
    node = h100.node
    assert slowest_share(h100, 64) == pytest.approx(node.shared * (1 - rate_sigma(node) * expected_max(64)))
    # The H200 node measured under full load: mean 698.6 against 702.9 alone.
    assert node.shared == pytest.approx(698.6 / 702.9)
    assert device("a100-sxm4-80gb").node == GENERIC_NODE  # no full-node measurement: the 5 % spread of 8 GPUs


def test_the_slowest_gpu_slows_the_tensor_cores_not_the_memory():
    dev = device("h100-sxm")
    slow = slowest_device(dev, 1024)
    share = slowest_share(dev, 1024)
    assert slowest_device(dev, 1) is dev
    assert gemm_time(8192, 8192, 8192, "bf16", slow, sustained=True) == pytest.approx(
        gemm_time(8192, 8192, 8192, "bf16", dev, sustained=True) / share, rel=1e-9)
    assert gemm_time(8192, 8192, 8192, "bf16", slow) == gemm_time(8192, 8192, 8192, "bf16", dev)  # the burst
    assert elementwise("norm", 1e9, slow).seconds == elementwise("norm", 1e9, dev).seconds
    shape = LayerShape(hidden=4096, heads=32, seq=4096, micro_batch=2)
    assert layer_time(shape, slow).total_s > layer_time(shape, dev).total_s
    no_shares = replace(device("mi300x"))
    assert slowest_device(no_shares, 8).sustained_share("bf16") == pytest.approx(slowest_share(no_shares, 8))


MODEL = {"layers": 4, "hidden": 2048, "heads": 16, "seq": 2048, "vocab": 32000}


def job_of(nodes: int) -> Any:
    raw = {"topology": {"preset": "dgx-h100", "nodes": nodes}, "payload": "size", "fidelity": "collective",
           "workload": {"kind": "training", "model": MODEL, "batch": {"global": 16 * nodes, "micro": 2}}}
    loaded = load_dict(raw)
    new_world, _ = new_world_factory(loaded)
    return make_job(loaded.workload.params, new_world(), new_world)


def test_a_bigger_job_computes_at_a_slower_slowest_gpu():
    """Same work per GPU on 8 and on 32 GPUs: the 32-GPU job's layers take longer, by its slowest GPU's rate."""
    small, big = job_of(1), job_of(4)
    h100 = device("h100-sxm")
    assert small.timing.device.sustained_share("bf16") == pytest.approx(
        h100.sustained_share("bf16") * slowest_share(h100, 8))
    assert big.timing.device.sustained_share("bf16") == pytest.approx(
        h100.sustained_share("bf16") * slowest_share(h100, 32))
    assert big.forward_layer_s > small.forward_layer_s
    assert big.backward_layer_s > small.backward_layer_s
