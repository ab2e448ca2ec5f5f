"""NCCL's rule for its in-switch algorithms across nodes, and NVLS where the network reduces too.

NCCL's tuner (src/graph/tuning.cc) disables NVLS as soon as a communicator spans nodes unless
CollNet is enabled (the InfiniBand switches reduce, SHARP), and disables NVLSTree on a single
node. mpisim's ``nccl`` selector and ``auto`` offer the same algorithms: ``nvls`` inside one
NVLink domain or where the fabric declares ``in_network_reduction``, ``nvls_tree`` across nodes.
"""

from __future__ import annotations

import numpy as np
import pytest

from mpisim.collectives import nccl
from mpisim.errors import ConfigError
from mpisim.mpi import SUM, DataPayload, SizePayload
from mpisim.scenario import load
from mpisim.scenario.run import new_world_factory
from tests.conftest import run_program

MiB = 2**20


def _world(nodes: int, in_network_reduction: bool = False, nic: str | None = None, preset: str = "dgx-h100"):
    inter: dict = {"in_network_reduction": in_network_reduction}
    if nic is not None:
        inter["bandwidth"] = nic
    scenario = load({"units": "SI", "topology": {"preset": preset, "nodes": nodes, "inter": inter} if nodes > 1
                     else {"preset": preset, "nodes": 1},
                     "payload": "size", "workload": {"kind": "collective", "collective": "allreduce",
                                                     "algorithm": "nccl_ring", "sizes": [8]}})
    new_world, _ = new_world_factory(scenario)
    return new_world()


def _time(world, algorithm: str, nbytes: int) -> float:
    def program(comm):
        yield from comm.allreduce(SizePayload(nbytes // 4, np.float32), algorithm=algorithm)
        return comm.now

    return max(run_program(world, program))


def test_one_node_offers_nvls_and_not_nvls_tree():
    comm = _world(1).comm_world(0).coll
    assert nccl.candidates(comm) == ["nccl_ring", "nccl_tree", "nvls"]


def test_across_nodes_without_in_network_reduction_nvls_is_refused_and_nvls_tree_offered():
    comm = _world(2).comm_world(0).coll
    assert nccl.candidates(comm) == ["nccl_ring", "nccl_tree", "nvls_tree"]
    for nbytes in (MiB, 64 * MiB, 2**30):
        assert nccl.best(comm, nbytes).algorithm != "nvls"


def test_across_nodes_with_in_network_reduction_nvls_is_offered():
    comm = _world(4, in_network_reduction=True).comm_world(0).coll
    assert nccl.candidates(comm) == ["nccl_ring", "nccl_tree", "nvls", "nvls_tree"]


@pytest.mark.parametrize("nodes", [2, 3])
def test_the_switches_sum_is_the_sum(nodes):
    """NVLS + CollNet on real data: every rank ends with the elementwise sum of every rank's vector."""
    world = _world(nodes, in_network_reduction=True)
    count = 1 << 12

    def program(comm):
        mine = np.arange(count, dtype=np.float64) * (comm.rank + 1)
        out = yield from comm.allreduce(DataPayload(mine), op=SUM, algorithm="nvls")
        return out.array

    want = np.arange(count, dtype=np.float64) * sum(range(1, world.size + 1))
    for got in run_program(world, program):
        np.testing.assert_array_equal(got, want)


def test_the_switches_sum_is_the_same_on_every_call():
    """Two calls in a row keep their switch aggregations apart (one per call and rail)."""
    world = _world(2, in_network_reduction=True)

    def program(comm):
        a = yield from comm.allreduce(DataPayload(np.full(64, comm.rank, dtype=np.float64)), algorithm="nvls")
        b = yield from comm.allreduce(DataPayload(np.full(64, 1.0)), algorithm="nvls")
        return a.array[0], b.array[0]

    p = world.size
    assert set(run_program(world, program)) == {(p * (p - 1) / 2, float(p))}


@pytest.mark.parametrize("nbytes", [MiB, 256 * MiB])
def test_in_network_reduction_never_faster_with_a_slower_nic_or_more_nodes(nbytes):
    fast = _time(_world(2, True), "nvls", nbytes)
    assert _time(_world(2, True, nic="100 Gbps"), "nvls", nbytes) >= fast
    assert _time(_world(4, True), "nvls", nbytes) >= fast


@pytest.mark.parametrize("nbytes", [MiB, 256 * MiB])
def test_nvls_tree_never_faster_with_a_slower_nic_or_more_nodes(nbytes):
    fast = _time(_world(2), "nvls_tree", nbytes)
    assert _time(_world(2, nic="100 Gbps"), "nvls_tree", nbytes) >= fast
    assert _time(_world(4), "nvls_tree", nbytes) >= fast


def test_the_switches_take_each_block_once_where_a_tree_takes_it_up_and_down_the_levels():
    """On 4 nodes the fabric's reduction crosses each NIC once each way; a tree climbs two levels."""
    nbytes = 256 * MiB
    assert _time(_world(4, True), "nvls", nbytes) < _time(_world(4, True), "nvls_tree", nbytes)


def test_the_prediction_follows_the_simulation_with_in_network_reduction():
    world = _world(2, True)
    comm = world.comm_world(0).coll
    nbytes = 64 * MiB
    predicted = nccl.tune(comm, "nvls", nbytes).predicted
    assert predicted == pytest.approx(_time(_world(2, True), "nvls", nbytes), rel=0.15)


@pytest.mark.parametrize("value, message", [
    ("yes", "expected true or false"),
    (1, "expected true or false"),
])
def test_a_bad_in_network_reduction_is_one_line_naming_the_field(value, message):
    with pytest.raises(ConfigError) as info:
        load({"topology": {"preset": "dgx-h100", "nodes": 2, "inter": {"in_network_reduction": value}},
              "workload": {"kind": "collective", "collective": "allreduce", "sizes": [8]}})
    text = str(info.value)
    assert "in_network_reduction" in text and message in text and "\n" not in text


def test_in_network_reduction_needs_nodes_whose_switch_reduces():
    with pytest.raises(ConfigError) as info:
        load({"topology": {"nodes": 2, "ranks_per_node": 2, "intra": {"kind": "shm", "bandwidth": "20 GB/s",
                                                                      "latency": "0.2 us"},
                           "inter": {"kind": "star", "bandwidth": "100 Gbps", "latency": "1 us",
                                     "in_network_reduction": True}},
              "workload": {"kind": "collective", "collective": "allreduce", "sizes": [8]}})
    assert "inter.in_network_reduction" in str(info.value) and "\n" not in str(info.value)
