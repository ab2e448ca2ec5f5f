"""The NVSwitch chips' reduction units (collectives/nccl/switchalu.py) bound NVLS where declared.

Every element of an NVLS allreduce is added in one switch chip, q - 1 adds; C chips at R adds/s
each take N (q - 1) / (C R) for N FP32 elements, streamed with the ports' work. On a GB200
NVL72 rack (72 GPUs, 18 chips) that, not the ports, is the bound of a large call; on 8 GPUs the
ports are. A topology without the keys keeps the port model alone.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpisim.collectives import nccl
from mpisim.collectives.nccl.switchalu import alu_time
from mpisim.errors import ConfigError
from mpisim.mpi import SUM, DataPayload
from mpisim.network.presets import load_preset
from mpisim.scenario import load, run_scenario
from mpisim.scenario.run import new_world_factory
from tests.conftest import run_program

MiB = 2**20
GiB = 2**30


def _undeclared(**topology) -> dict:
    """The preset written out without the chips' keys (overrides merge, so they cannot remove them)."""
    raw = load_preset("gb200-nvl72")
    raw["intra"] = {k: v for k, v in raw["intra"].items() if k not in ("switch_chips", "switch_reduce_rate")}
    return {k: v for k, v in raw.items() if k not in ("preset", "mpi")} | topology


def _raw(sizes, algorithm="nvls", fidelity="collective", network="fairshare", plain=None, **topology) -> dict:
    return {"topology": plain if plain is not None else {"preset": "gb200-nvl72", **topology}, "algorithms": {"selector": "nccl"},
            "payload": "size", "fidelity": fidelity, "network": network,
            "trace": {"messages": False, "spans": False},
            "workload": {"kind": "collective", "collective": "allreduce", "algorithm": algorithm,
                         "sizes": [f"{s} B" for s in sizes], "dtype": "float32"}}


def _rows(sizes, **kw) -> list[dict]:
    return run_scenario(load(_raw(sizes, **kw))).rows


def _comm(**kw):
    new_world, _ = new_world_factory(load(_raw([8], **kw)))
    return new_world().comm_world(0).coll


def test_the_closed_form():
    """72 GPUs, 18 chips at 400 GFLOPS: n/4 x 71 / (18 x 400e9) seconds, and nothing without the keys."""
    comm = _comm()
    n = 8 * GiB
    assert alu_time(comm, n, 72) == pytest.approx(n / 4 * 71 / (18 * 400e9), rel=1e-12)
    assert alu_time(comm, n, 1) == 0.0
    assert alu_time(_comm(plain=_undeclared()), n, 72) == 0.0


@pytest.mark.parametrize("network", ["fairshare", "analytic"])
def test_a_rack_is_bound_by_its_switch_chips(network):
    """A large call on one NVL72 rack: busbw -> 2 x 71/72 x 4 x 18 x 400e9 / 71 (800 GB/s), from below."""
    n = 8 * GiB
    (row,) = _rows([n], network=network)
    bound = 2 * 71 / 72 * 4 * 18 * 400e9 / 71
    assert row["algorithm"] == "nvls"
    assert 0.99 * bound < row["busbw_GBps"] * 1e9 <= bound


def test_eight_gpus_stay_port_bound():
    """On 8 GPUs the chips' adds (7 per element over 18 chips) hide under the ports' work: no change."""
    n = 1 * GiB
    with_alu = _rows([n], ranks_per_node=8, inter={"nics": 8})[0]["time_s"]
    without = _rows([n], plain=_undeclared(ranks_per_node=8, inter={**load_preset("gb200-nvl72")["inter"], "nics": 8}))[0]["time_s"]
    assert with_alu == without
    assert alu_time(_comm(ranks_per_node=8, inter={"nics": 8}), n, 8) < 0.5 * without


def test_message_path_and_predictor_agree():
    """The tuner's prediction is the simulated time, in one rack and across two (NVLSTree)."""
    for kw in ({}, {"nodes": 2, "ranks_per_node": 64, "inter": {"nics": 64}, "algorithm": "nvls_tree"}):
        n = 2 * GiB
        (row,) = _rows([n], fidelity="message", **kw)
        comm = _comm(**kw)
        choice = nccl.tune(comm, kw.get("algorithm", "nvls"), n)
        assert row["time_s"] == pytest.approx(choice.predicted, rel=0.01)


@settings(max_examples=12, deadline=None)
@given(a=st.integers(1, 64), b=st.integers(1, 64), rate=st.sampled_from([100e9, 400e9, 1.6e12]))
def test_bigger_is_never_faster_and_a_slower_switch_never_faster(a, b, rate):
    """Monotone in size and in the chips' rate."""
    small, big = sorted((a, b))
    intra = {"switch_reduce_rate": f"{rate / 1e9} GFLOPS"}
    t_small, t_big = (r["time_s"] for r in _rows([small * 64 * MiB, big * 64 * MiB], intra=intra))
    assert t_big >= t_small
    intra = {"switch_reduce_rate": f"{rate / 2e9} GFLOPS"}
    (slower,) = _rows([big * 64 * MiB], intra=intra)
    assert slower["time_s"] >= t_big


def test_the_sum_is_the_sum():
    """Data payloads: every rank of a 72-GPU rack holds the elementwise sum."""
    p = 72
    new_world, _ = new_world_factory(load(_raw([8])))

    def program(comm):
        mine = np.arange(144, dtype=np.float64) * (comm.rank + 1)
        out = yield from comm.allreduce(DataPayload(mine), op=SUM, algorithm="nvls")
        return out.array

    expect = np.arange(144, dtype=np.float64) * p * (p + 1) / 2
    for out in run_program(new_world(), program):
        np.testing.assert_array_equal(out, expect)


def test_the_keys_need_each_other_and_in_switch_reduction():
    with pytest.raises(ConfigError, match="switch_reduce_rate"):
        _comm(intra={"switch_chips": 0})
    with pytest.raises(ConfigError, match="in_switch_reduction"):
        _comm(intra={"in_switch_reduction": False})


def test_the_run_names_the_bound_once():
    """A run of calls bound by the chips says so once, with the algbw they allow; a port-bound run says nothing."""
    notes = run_scenario(load(_raw([GiB, 2 * GiB]))).notes
    bound = [n for n in notes if "NVSwitch chips' adds" in n]
    assert len(bound) == 1 and f"{4 * 18 * 400 / 71:.4g} GB/s of algbw" in bound[0]
    port_bound = run_scenario(load(_raw([GiB], ranks_per_node=8, inter={"nics": 8}))).notes
    assert not [n for n in port_bound if "NVSwitch chips' adds" in n]
