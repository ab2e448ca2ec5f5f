"""NCCL's NVLSTree as streams (collectives/nccl/nvlstree.py): smooth in size, NCCL's caps, one answer on both paths.

NCCL runs NVLSTree with the in-switch reduction feeding a tree per head and the tree feeding
the multicast, all at once; a head passes data on no faster than NCCL's cap
(``perChMaxNVLSTreeBw``). The time must have no steps in size (the earlier segment-per-tree
pipeline jumped 2 % at segment boundaries), never fall as the call grows or a link slows, and
be the same at message and collective fidelity.
"""

from __future__ import annotations

import numpy as np
import pytest

from mpisim.collectives import nccl
from mpisim.collectives.nccl import nvlstree
from mpisim.mpi import SUM, DataPayload
from mpisim.scenario import load, run_scenario
from mpisim.scenario.run import new_world_factory
from tests.conftest import run_program

MiB = 2**20
GiB = 2**30


def _raw(nodes: int, sizes: list[int], fidelity: str = "collective", preset: str = "dgx-h100", **topology) -> dict:
    return {"topology": {"preset": preset, "nodes": nodes, **topology}, "algorithms": {"selector": "nccl"},
            "payload": "size", "fidelity": fidelity, "trace": {"messages": False, "spans": False},
            "workload": {"kind": "collective", "collective": "allreduce", "algorithm": "nvls_tree",
                         "sizes": [f"{s} B" for s in sizes], "dtype": "float32"}}


def _times(nodes: int, sizes: list[int], fidelity: str = "collective", **topology) -> list[float]:
    rows = run_scenario(load(_raw(nodes, sizes, fidelity, **topology))).rows
    return [row["time_s"] for row in rows]


def _comm(nodes: int, preset: str = "dgx-h100", **topology):
    new_world, _ = new_world_factory(load(_raw(nodes, [8], preset=preset, **topology)))
    return new_world().comm_world(0).coll


@pytest.mark.parametrize("nodes", [2, 4])
def test_no_step_in_size(nodes):
    """Sizes 3 % apart across the chunk staircase and the fill: the time grows, and by no more than the size."""
    sizes = [int(4 * MiB * 1.03**i) // 4 * 4 for i in range(0, 160, 4)]
    times = _times(nodes, sizes)
    for (s0, t0), (s1, t1) in zip(zip(sizes, times, strict=True), zip(sizes[1:], times[1:], strict=True), strict=False):
        assert t1 >= t0, f"{s1} B in {t1 * 1e6:.2f} us, faster than {s0} B in {t0 * 1e6:.2f} us"
        assert t1 / t0 <= s1 / s0 * (1 + 1e-9), f"a step at {s1} B: {t0 * 1e6:.2f} -> {t1 * 1e6:.2f} us"


@pytest.mark.parametrize("nodes, cap", [(2, 57.7e9), (4, 45.5e9)])
def test_large_calls_run_at_nccls_cap_per_head(nodes, cap):
    """On dgx-h100 (8 heads, one per NIC) the bus bandwidth of a large call approaches 8 x perChMaxNVLSTreeBw."""
    n = 16 * GiB
    p = 8 * nodes
    (t,) = _times(nodes, [n])
    busbw = 2 * (p - 1) / p * n / t
    assert 0.98 * 8 * cap < busbw <= 8 * cap


def test_heads_are_one_per_nic_and_at_most_32():
    groups = nccl.nvls_groups(_comm(2))
    assert nvlstree.head_count(_comm(2), groups) == 8
    big = _comm(2, preset="gb200-nvl72", ranks_per_node=64, inter={"nics": 64})
    assert nvlstree.head_count(big, nccl.nvls_groups(big)) == 32
    assert nvlstree.generation(big) == "blackwell" and nvlstree.generation(_comm(2)) == "hopper"


@pytest.mark.parametrize("nodes", [2, 4])
def test_message_path_and_twin_agree(nodes):
    sizes = [16 * MiB, 256 * MiB]
    message = _times(nodes, sizes, "message")
    twin = _times(nodes, sizes, "collective")
    for m, c in zip(message, twin, strict=True):
        assert c == pytest.approx(m, rel=0.01)


@pytest.mark.parametrize("nodes", [2, 4])
def test_the_prediction_is_the_simulation(nodes):
    comm = _comm(nodes)
    sizes = [MiB, 64 * MiB, GiB]
    for n, t in zip(sizes, _times(nodes, sizes), strict=True):
        assert nccl.tune(comm, "nvls_tree", n).predicted == pytest.approx(t, rel=0.05)


@pytest.mark.parametrize("nbytes", [64 * MiB, GiB])
def test_a_slower_nic_or_more_nodes_is_never_faster(nbytes):
    (fast,) = _times(2, [nbytes])
    assert _times(2, [nbytes], inter={"bandwidth": "200 Gbps"})[0] >= fast
    assert _times(4, [nbytes])[0] >= fast


@pytest.mark.parametrize("nodes", [2, 3])
def test_the_sum_is_the_sum(nodes):
    """Real data: every rank ends with the elementwise sum, the same on every rank."""
    new_world, _ = new_world_factory(load(_raw(nodes, [8])))
    world = new_world()
    count = 1 << 12

    def program(comm):
        mine = np.arange(count, dtype=np.float64) * (comm.rank + 1)
        out = yield from comm.allreduce(DataPayload(mine), op=SUM, algorithm="nvls_tree")
        return out.array

    want = np.arange(count, dtype=np.float64) * sum(range(1, world.size + 1))
    for got in run_program(world, program):
        np.testing.assert_array_equal(got, want)
