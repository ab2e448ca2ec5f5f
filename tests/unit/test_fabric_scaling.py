"""A ring on every non-blocking rail or fat-tree preset keeps its bus bandwidth as the cluster grows.

On a non-blocking fabric a ring's bottleneck is the NIC, whatever the node count: crossing a
leaf boundary (or a pod boundary, where a core level appears) adds hops, not contention, as long
as the fabric spreads each connection over the equal-cost uplinks (``routing: adaptive``). Static
hashing once put two of the ring's leaf-crossing flows on one uplink and halved busbw from
33 dgx-h100 nodes on.

The message is large (1 TiB, size-only) so that every ring step is long against its latencies:
how those per-step costs add up on rings of thousands of ranks is a separate question (NCCL's
pipelining of chunks through a step), and this test is about the fabric's bandwidth. Runs use
``fidelity: collective``.
"""

from __future__ import annotations

import functools

import pytest

from mpisim.network.presets import resolve_topology
from mpisim.scenario import load_dict, run_scenario

#: The presets with a multi-level fabric, each with node counts that cross its leaf boundaries
#: (leaf_size nodes per leaf; 8 NICs per node put 4 aws-p5 nodes on a leaf) and, beyond 256
#: dgx nodes, a pod boundary. gb200-nvl72's nodes are racks of 72 GPUs: up to 65 racks.
GRIDS = {
    "aws-p5": [2, 4, 5, 9, 64, 256],
    "dgx-a100": [2, 20, 21, 41, 256],
    "dgx-b200": [2, 32, 33, 65, 256],
    "dgx-h100": [2, 32, 33, 65, 256, 257],
    "dgx-h200": [2, 32, 33, 129],
    "gb200-nvl72": [2, 32, 33, 65],
}
SIZE = "1 TiB"
#: How far busbw may fall from 2 nodes to any larger count ("a few percent").
TOLERANCE = 0.03


@functools.cache
def busbw(preset: str, nodes: int, size: str = SIZE, **inter: object) -> float:
    overrides = {"topology.nodes": nodes, **{f"topology.inter.{key}": value for key, value in inter.items()}}
    scenario = load_dict(
        {
            "topology": preset,
            "fidelity": "collective",
            "payload": "size",
            "workload": {"kind": "collective", "collective": "allreduce", "algorithm": "nccl_ring",
                         "sizes": [size], "dtype": "float32"},
        },
        overrides=overrides,
    )
    (row,) = run_scenario(scenario).rows
    return row["busbw_GBps"]


def test_the_grid_covers_every_multi_level_preset():
    from mpisim.network.presets import preset_names

    multi = sorted(name for name in preset_names()
                   if (spec := resolve_topology(name)[0].inter) is not None and spec.kind in ("rail", "fat_tree"))
    assert sorted(GRIDS) == multi


@pytest.mark.parametrize(("preset", "nodes"), [(p, n) for p, grid in GRIDS.items() for n in grid[1:]])
def test_ring_busbw_holds_across_leaf_and_pod_boundaries(preset, nodes):
    first = busbw(preset, GRIDS[preset][0])
    assert busbw(preset, nodes) >= first * (1 - TOLERANCE), (preset, nodes)


@pytest.mark.parametrize("preset", ["dgx-h100", "aws-p5"])
@pytest.mark.parametrize("size", [SIZE, "64 MiB"])
def test_a_slower_fabric_never_gives_a_faster_ring(preset, size):
    """Past a leaf boundary, thinner uplinks, slower NICs, slower spines or ECMP never raise busbw."""
    nodes = GRIDS[preset][3]
    inter = resolve_topology(preset)[0].inter
    base = busbw(preset, nodes, size)
    for slower in ({"oversubscription": 2}, {"oversubscription": 4}, {"bandwidth": f"{inter.bandwidth / 2e9:g} GB/s"},
                   {"hop_latency": f"{inter.hop_latency * 1e6 + 1:g} us"}, {"latency": f"{inter.latency * 2e6:g} us"},
                   {"routing": "ecmp"}):
        assert busbw(preset, nodes, size, **slower) <= base * (1 + 1e-9), (preset, size, slower)
    assert busbw(preset, nodes, size, oversubscription=4) <= busbw(preset, nodes, size, oversubscription=2) * (1 + 1e-9)
