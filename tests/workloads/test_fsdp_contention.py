"""FSDP's overlapped collectives on the compute's SMs, and gradients reduced in a wider format."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpisim.errors import ConfigError
from mpisim.scenario import load_dict
from mpisim.scenario.run import new_world_factory, run_point
from mpisim.workloads.compute import device
from mpisim.workloads.training.contention import channels_for, grad_cast_time, overlap_slowdown
from mpisim.workloads.training.plan import make_job

MODEL = {"layers": 4, "hidden": 2048, "heads": 16, "seq": 2048, "vocab": 32000}


def scenario(**workload: Any) -> dict[str, Any]:
    # compute: left out -> the GEMM-shape model of the preset's GPU
    return {"topology": {"preset": "dgx-h100", "nodes": 1}, "payload": "size", "fidelity": "collective",
            "workload": {"kind": "training", "model": MODEL, "batch": {"global": 16, "micro": 2}, "zero": 3,
                         **workload}}


def job_of(raw: dict[str, Any]):
    loaded = load_dict(raw)
    new_world, _ = new_world_factory(loaded)
    return make_job(loaded.workload.params, new_world(), new_world)


times = st.floats(1e-6, 1.0)


@settings(max_examples=60, deadline=None)
@given(compute=times, comm=times, more=st.floats(0.0, 1.0), channels=st.integers(1, 64), sms=st.integers(66, 160))
def test_slowdown_monotone_in_the_collective_and_its_channels(compute, comm, more, channels, sms):
    base = overlap_slowdown(compute, comm, channels, sms)
    assert 0.0 <= base <= comm  # the compute never loses more than the collective lasts
    assert overlap_slowdown(compute, comm + more, channels, sms) >= base  # a longer (slower-network) collective
    assert overlap_slowdown(compute, comm, channels + 1, sms) >= base  # more SMs taken
    assert overlap_slowdown(compute + more, comm, channels, sms) >= base  # more compute under it


def test_slowdown_closed_form():
    # compute outlasts the collective: it loses comm x channels / SMs
    assert overlap_slowdown(10.0, 2.0, 16, 132) == pytest.approx(2.0 * 16 / 132)
    # compute ends inside it: stretched by 1 / (1 - share) as a whole
    assert overlap_slowdown(1.0, 5.0, 33, 132) == pytest.approx(1.0 * 0.25 / 0.75)
    assert overlap_slowdown(1.0, 0.0, 16, 132) == 0.0


def test_channels_and_cast():
    assert channels_for("a100-sxm4-80gb") == 24
    assert channels_for("h100-sxm") == 16
    dev = device("h100-sxm")
    assert grad_cast_time(10**9, 2, 2, dev) == 0.0
    assert grad_cast_time(10**9, 2, 4, dev) == pytest.approx(6e9 / dev.hbm_rate)


def test_fsdp_layers_slower_by_their_collectives_sms():
    """The ZeRO-3 job's layers take longer than the same layout's ZeRO-1 ones, by the closed form."""
    fsdp, zero1 = job_of(scenario()), job_of(scenario(zero=1))
    assert fsdp.forward_layer_s > zero1.forward_layer_s
    assert fsdp.backward_layer_s > zero1.backward_layer_s
    assert fsdp.backward_layer_s - zero1.backward_layer_s > fsdp.forward_layer_s - zero1.forward_layer_s


def test_fp32_reduction_never_faster():
    bf16 = run_point(load_dict(scenario())).rows[0]
    fp32 = run_point(load_dict(scenario(reduce_dtype="fp32"))).rows[0]
    assert fp32["tokens_per_s"] < bf16["tokens_per_s"]
    assert job_of(scenario(reduce_dtype="fp32")).reduce_dtype.itemsize == 4


def test_reduce_dtype_bad_input():
    with pytest.raises(ConfigError, match="reduce_dtype"):
        load_dict(scenario(reduce_dtype="int8"))


def test_step_charges_adam_and_clipping_on_the_shard():
    """The once-per-step compute: (Adam 30 + clipping 12) bytes per parameter of the GPU's shard on HBM."""
    from mpisim.workloads.compute.estimate import ADAM_BYTES_PER_PARAM
    from mpisim.workloads.training.timing import CLIP_BYTES_PER_PARAM, step_overhead

    job = job_of(scenario(zero=1))
    dev = job.timing.device
    params = 8e9
    assert step_overhead(job.timing, params, 8, 0) == pytest.approx(
        (ADAM_BYTES_PER_PARAM + CLIP_BYTES_PER_PARAM) * params / 8 / dev.hbm_rate)


def test_overlap_share_is_the_measured_interference_or_the_sms_held():
    """nccl #1428: a GEMM 1.18 ms alone, 2.08 ms under an allgather -> it lost 1 - 1.18/2.08 of its rate."""
    from mpisim.workloads.training.contention import OVERLAP_INTERFERENCE, overlap_share

    assert pytest.approx(0.90 / 2.08) == OVERLAP_INTERFERENCE
    assert overlap_share(16, 132) == pytest.approx(OVERLAP_INTERFERENCE)  # H100: memory, not SMs, decides
    assert overlap_share(24, 108) == pytest.approx(OVERLAP_INTERFERENCE)
    assert overlap_share(100, 132) == pytest.approx(100 / 132)  # more SMs held than the measured loss
    assert overlap_share(0, 132) == 0.0


def test_contended_slowdown_closed_form():
    """Compute that outlasts the collective loses comm x share; shorter compute is stretched by 1/(1-share)."""
    from mpisim.workloads.training.contention import contended_slowdown

    assert contended_slowdown(10.0, 2.0, 0.4) == pytest.approx(0.8)
    assert contended_slowdown(1.0, 5.0, 0.4) == pytest.approx(1.0 * 0.4 / 0.6)
    assert contended_slowdown(1.0, 0.0, 0.4) == 0.0
    # the stretched compute ends exactly when its work is done at the reduced rate, never after the collective + work
    compute, comm, share = 3.0, 4.0, 0.43
    assert compute + contended_slowdown(compute, comm, share) <= compute + comm


@settings(max_examples=80, deadline=None)
@given(compute=st.floats(1e-4, 10.0), comm=st.floats(1e-4, 10.0), share=st.floats(0.01, 0.9),
       more=st.floats(0.0, 1.0))
def test_contended_slowdown_grows_with_the_collective_and_the_share(compute, comm, share, more):
    from mpisim.workloads.training.contention import contended_slowdown

    base = contended_slowdown(compute, comm, share)
    assert contended_slowdown(compute, comm + more, share) >= base
    assert contended_slowdown(compute, comm, min(0.95, share + more / 10)) >= base
    assert 0.0 <= base <= comm * share + 1e-12
