"""A network hop's latency in NCCL's collectives: hwLat[NET] on top of the fabric's latency, Simple's flush again.

tuning.cc: ``interLat = hwLat[NET] + latencyInter`` (+ ``latencyInter`` once more for Simple's
GPUDirect RDMA flush). The fabric's ``latency:`` must therefore move NCCL collectives across
nodes, and a slower network is never faster.
"""

from __future__ import annotations

import pytest

from mpisim.collectives import nccl
from mpisim.scenario import load, run_scenario

MiB = 2**20


def _call(algorithm: str, nodes: int, nbytes: int, latency_us: float) -> dict:
    return {"units": "SI", "network": {"model": "fairshare"},
            "topology": {"preset": "dgx-h100", "nodes": nodes, "inter": {"latency": f"{latency_us} us"}},
            "payload": "size", "fidelity": "collective", "trace": {"messages": False, "spans": False},
            "workload": {"kind": "collective", "collective": "allreduce", "algorithm": algorithm, "sizes": [nbytes]}}


def test_the_wire_adds_hwlat_net_and_simple_adds_the_flush():
    low = nccl.protocols(load(_call("nccl_ring", 2, MiB, 1.0)).topology)
    high = nccl.protocols(load(_call("nccl_ring", 2, MiB, 3.0)).topology)
    for name in ("LL", "LL128"):
        assert low[name].wire.latency_inter == pytest.approx(nccl.NCCL_HOP_LATENCY["net"][name])
        assert high[name].wire.latency_inter == pytest.approx(nccl.NCCL_HOP_LATENCY["net"][name])
    assert high["Simple"].wire.latency_inter - low["Simple"].wire.latency_inter == pytest.approx(2e-6)


@pytest.mark.parametrize("algorithm", ["nccl_ring", "nccl_tree", "auto"])
@pytest.mark.parametrize("nbytes", [64 * 1024, 4 * MiB])
def test_a_slower_network_is_never_faster(algorithm, nbytes):
    times = [run_scenario(load(_call(algorithm, 2, nbytes, lat))).rows[0]["time_s"] for lat in (1.0, 2.0, 3.0)]
    assert times[0] <= times[1] <= times[2]
    if algorithm == "nccl_ring":
        assert times[0] < times[2]  # the fabric's latency now moves the ring
