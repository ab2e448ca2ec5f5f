"""An LL128 ring across nodes goes no faster than NCCL's rate per channel (tuning.cc ``perChMaxRingLL128Bws``).

NCCL's model: ``busBw = min(busBw * 0.92, graphs[RING]->nChannels * perChMaxRingLL128Bw)``, 36.7 GB/s
per ring on Hopper; a 400 Gb/s NIC would give LL128 0.92 x 48 = 44 GB/s. The rate is the channel's
threads' (prims_ll128.h), so it is a pace of the GPU that leaves a node in each ring, the same in
the message path, the collective twin and the tuner, and never bytes on a link.
"""

from __future__ import annotations

from itertools import pairwise

import pytest

from mpisim.collectives import nccl
from mpisim.collectives.nccl.protocols import NCCL_RING_LL128_PER_CHANNEL_BW, gpu_generation, ring_ll128_pace
from mpisim.scenario import load, run_scenario
from mpisim.scenario.run import new_world_factory

MiB = 2**20
Q = 8  # GPUs and NICs per dgx-h100


def _raw(nodes: int, nbytes: int, fidelity: str = "message", preset: str = "dgx-h100", inter: dict | None = None,
         gpu: str | None = None) -> dict:
    topology: dict = {"preset": preset, "nodes": nodes}
    if inter is not None:
        topology["inter"] = inter
    if gpu is not None:
        topology["gpu"] = gpu
    return {"units": "SI", "topology": topology, "payload": "size", "fidelity": fidelity,
            "network": {"model": "fairshare"}, "trace": {"messages": False, "spans": False},
            "workload": {"kind": "collective", "collective": "allreduce", "algorithm": "nccl_ring",
                         "sizes": [nbytes]}}


def _comm(raw: dict):
    world = new_world_factory(load(raw))[0]()
    return world.comm_world(0).coll


def test_the_rate_is_nccls_table_by_gpu_generation_and_only_across_nodes():
    assert NCCL_RING_LL128_PER_CHANNEL_BW == {"volta": 20.0e9, "ampere": 20.0e9, "hopper": 36.7e9,
                                              "blackwell": 40.0e9}
    assert ring_ll128_pace(_comm(_raw(2, MiB))) == 36.7e9
    assert ring_ll128_pace(_comm(_raw(2, MiB, preset="dgx-b200"))) == 40.0e9
    assert ring_ll128_pace(_comm(_raw(2, MiB, preset="dgx-a100"))) == 20.0e9
    assert ring_ll128_pace(_comm(_raw(1, MiB))) == float("inf")  # inside a node NVLink is far from it
    # The topology's gpu: names the GPU before the preset's name does.
    assert gpu_generation(load(_raw(2, MiB, gpu="b200")).topology) == "blackwell"


def test_the_tuners_ll128_ring_wire_carries_the_pace_and_other_protocols_do_not():
    comm = _comm(_raw(4, 128 * MiB))
    table = nccl.protocols(comm.world.topology.spec)
    ll128 = nccl.ring_protocol(comm, table["LL128"], "allreduce", 128 * MiB)
    simple = nccl.ring_protocol(comm, table["Simple"], "allreduce", 128 * MiB)
    assert ll128.wire.pace_inter == 36.7e9
    assert simple.wire.pace_inter == float("inf")
    # The NICs still carry LL128's own bytes (120 of every 128) and nothing else.
    assert ll128.wire.efficiency_inter == pytest.approx(0.92)


@pytest.mark.parametrize("fidelity", ["message", "collective"])
def test_a_large_ll128_ring_reaches_channels_times_the_rate_as_its_bus_bandwidth(fidelity, monkeypatch):
    """4 x dgx-h100, 512 MiB with LL128 only: busbw -> 8 rings x 36.7 GB/s (the rest is the chain's fill)."""
    monkeypatch.setattr(nccl.tuner, "PROTOCOLS", ("LL128",))  # the tuner tries these
    nbytes = 512 * MiB
    (row,) = run_scenario(load(_raw(4, nbytes, fidelity))).rows
    assert row["protocol"] == "LL128"
    p = 4 * Q
    busbw = 2 * (p - 1) / p * nbytes / row["time_s"]
    cap = Q * 36.7e9
    assert busbw <= cap
    assert busbw == pytest.approx(cap, rel=0.05)


def test_the_two_paths_and_the_tuner_agree_where_the_rate_binds(monkeypatch):
    """128 MiB on 4 x dgx-h100 with LL128: message path, twin and the tuner's prediction within 1 %."""
    monkeypatch.setattr(nccl.tuner, "PROTOCOLS", ("LL128",))
    raw = _raw(4, 128 * MiB)
    (message,) = run_scenario(load(raw)).rows
    (fluid,) = run_scenario(load({**raw, "fidelity": "collective"})).rows
    predicted = nccl.tune(_comm(raw), "nccl_ring", 128 * MiB).predicted
    assert fluid["time_s"] == pytest.approx(message["time_s"], rel=0.01)
    assert predicted == pytest.approx(message["time_s"], rel=0.01)


def test_a_faster_nic_does_not_make_an_ll128_ring_faster_than_its_rate(monkeypatch):
    """Past 36.7 / 0.92 GB/s per NIC the rate, not the NIC, sets an LL128 ring's time; a faster NIC is never slower."""
    monkeypatch.setattr(nccl.tuner, "PROTOCOLS", ("LL128",))
    times = [run_scenario(load(_raw(2, 256 * MiB, inter={"bandwidth": f"{gbps} Gb/s"}))).rows[0]["time_s"]
             for gbps in (200, 300, 400, 800, 1600)]
    assert all(later <= earlier for earlier, later in pairwise(times))
    assert times[0] > times[1] > times[2]  # below the rate the NIC still sets the pace
    assert times[3] == pytest.approx(times[4], rel=1e-9)  # above it, the rate does


@pytest.mark.parametrize("nbytes", [16 * MiB, 128 * MiB])
def test_a_slower_network_never_makes_the_ll128_ring_faster(nbytes, monkeypatch):
    monkeypatch.setattr(nccl.tuner, "PROTOCOLS", ("LL128",))
    times = [run_scenario(load(_raw(4, nbytes, inter={"latency": f"{lat} us"}))).rows[0]["time_s"]
             for lat in (1, 2, 3, 5)]
    assert all(later > earlier for earlier, later in pairwise(times))
