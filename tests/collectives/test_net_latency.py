"""A network hop's latency in NCCL's collectives: hwLat[NET] on top of the fabric's latency, Simple's flush again.

tuning.cc: ``interLat = hwLat[NET] + latencyInter`` (+ ``latencyInter`` once more for Simple's
GPUDirect RDMA flush). The fabric's ``latency:`` must therefore move NCCL collectives across
nodes, and a slower network is never faster.
"""

from __future__ import annotations

from itertools import pairwise

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


def test_a_tree_pays_nccls_tree_latencies_and_a_ring_its_own():
    """tuning.cc has a Tree row and columns of baseLat/hwLat: a tree's network step costs it more than a ring's."""
    spec = load(_call("nccl_tree", 2, MiB, 1.0)).topology
    ring, tree = nccl.protocols(spec), nccl.protocols(spec, tree=True)
    for name in ("LL", "LL128", "Simple"):
        added = 1e-6 if name == "Simple" else 0.0  # Simple's flush: the fabric's latency once more
        assert tree[name].wire.latency_inter == pytest.approx(nccl.NCCL_TREE_HOP_LATENCY["net"][name] + added)
        # A topology's own base latency (the preset's) wins over NCCL's Tree row, as over its Ring row.
        given = dict(spec.base_latency).get(name)
        assert tree[name].base == pytest.approx(given if given is not None else nccl.NCCL_TREE_BASE_LATENCY[name])
    assert tree["LL128"].wire.latency_inter > ring["LL128"].wire.latency_inter
    assert tree["LL"].wire.latency_inter > ring["LL"].wire.latency_inter
    # NVLink: NCCL's 1.25 against 1.9 us, unless the fabric gives its own (dgx-h100's NVSwitch does).
    assert tree["LL128"].wire.latency_intra <= ring["LL128"].wire.latency_intra


@pytest.mark.parametrize("nodes", [2, 4])
def test_nccl_tree_runs_on_the_tree_latencies_in_the_tuner_and_the_call(nodes):
    """The tuner's protocol for nccl_tree is the tree's, and a tree's higher network latency makes it no faster."""
    raw = _call("nccl_tree", nodes, MiB, 1.0)
    row = run_scenario(load(raw)).rows[0]
    spec = load(raw).topology
    tree = nccl.protocols(spec, tree=True)[row["protocol"]]
    ring = nccl.protocols(spec)[row["protocol"]]
    assert tree.wire.latency_inter >= ring.wire.latency_inter
    # The call pays at least its base and, per direction, one network step of the tree's.
    assert row["time_s"] >= tree.base + 2 * tree.wire.latency_inter


@pytest.mark.parametrize("algorithm", ["nccl_tree", "auto"])
def test_with_the_trees_latencies_a_bigger_call_is_never_faster(algorithm):
    """Across the sizes where the tree's latencies weigh most (1 MiB - 16 MiB), on 4 nodes."""
    raw = _call(algorithm, 4, MiB, 1.0)
    raw["fidelity"] = "auto"
    raw["workload"]["sizes"] = [256 * 1024, MiB, 2 * MiB, 4 * MiB, 8 * MiB, 16 * MiB]
    times = [row["time_s"] for row in run_scenario(load(raw)).rows]
    assert all(later >= earlier for earlier, later in pairwise(times))
