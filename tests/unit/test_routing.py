"""Routing over a folded Clos: adaptive (pooled uplinks) against static ECMP, on the fair-share network.

A non-blocking fat tree can carry any permutation of its NICs at full NIC rate when every
connection is spread evenly over the spines; that is what ``routing: adaptive`` models and what
static ECMP hashing does not guarantee (two connections hashed onto one uplink share it).
"""

from __future__ import annotations

import math
import random

import pytest

from mpisim.engine.sim import Simulation
from mpisim.network.fairshare import FairShareNetwork
from mpisim.network.topology import FabricSpec, Topology, TopologySpec, build_topology

US = 1e-6
NIC = 25e9
FAT = FabricSpec("fat_tree", bandwidth=NIC, latency=1.0 * US, leaf_size=4)


def topo(nodes: int, fabric: FabricSpec) -> Topology:
    return build_topology(TopologySpec("t", nodes, 1, None, fabric))


def finish_times(topology: Topology, pairs: list[tuple[int, int]], nbytes: int) -> list[float]:
    """All transfers start at 0 on an idle fair-share network; return each one's finish time."""
    net = FairShareNetwork(Simulation(), topology)
    env = net.sim.env
    out = [math.nan] * len(pairs)

    def one(k: int, src: int, dst: int):
        yield from net.transfer(src, dst, nbytes)
        out[k] = env.now

    for k, (src, dst) in enumerate(pairs):
        env.process(one(k, src, dst))
    net.sim.run()
    return out


def leaf_crossing_permutation(nodes: int, leaf_size: int, seed: int) -> list[tuple[int, int]]:
    """A random permutation of the nodes in which every node sends to a node of another leaf."""
    rng = random.Random(seed)
    while True:
        dst = list(range(nodes))
        rng.shuffle(dst)
        if all(src // leaf_size != d // leaf_size for src, d in enumerate(dst)):
            return list(enumerate(dst))


@pytest.mark.parametrize("seed", range(5))
def test_adaptive_routing_carries_any_permutation_at_full_nic_rate(seed):
    """Non-blocking + even spreading: every connection of a permutation runs at its NIC's rate."""
    pairs = leaf_crossing_permutation(16, 4, seed)
    n = 10**8
    times = finish_times(topo(16, FAT), pairs, n)
    assert times == [pytest.approx(FAT.latency + n / NIC, rel=1e-12)] * len(pairs)


def test_static_ecmp_collides_where_adaptive_does_not():
    """Over the same permutations, one hash per connection puts two of them on one uplink somewhere."""
    n = 10**8
    alone = FAT.latency + n / NIC
    slowest = []
    for seed in range(5):
        pairs = leaf_crossing_permutation(16, 4, seed)
        slowest.append(max(finish_times(topo(16, FabricSpec(**{**FAT.__dict__, "routing": "ecmp"})), pairs, n)))
    assert all(t >= alone * (1 - 1e-12) for t in slowest)
    assert max(slowest) >= FAT.latency + 2 * n / NIC * (1 - 1e-12)  # a shared cable: half rate


def test_two_connections_hashed_onto_one_cable_share_it():
    ecmp = FabricSpec(**{**FAT.__dict__, "routing": "ecmp"})
    t = topo(16, ecmp)
    # Two senders on leaf 0 whose connections to leaf 1 hash onto the same spine.
    pairs = [(a, b) for a in range(4) for b in range(4, 8)]
    by_spine: dict[str, list[tuple[int, int]]] = {}
    for a, b in pairs:
        by_spine.setdefault(t.route(a, b).links[1].name, []).append((a, b))
    shared = next(group for group in by_spine.values() if len({a for a, _ in group}) >= 2 and
                  len({b for _, b in group}) >= 2)
    (a1, b1), (a2, b2) = next((p, q) for p in shared for q in shared if p[0] != q[0] and p[1] != q[1])
    n = 10**8
    assert finish_times(t, [(a1, b1), (a2, b2)], n) == [pytest.approx(FAT.latency + 2 * n / NIC, rel=1e-12)] * 2
    assert finish_times(topo(16, FAT), [(a1, b1), (a2, b2)], n) == [pytest.approx(FAT.latency + n / NIC, rel=1e-12)] * 2


@pytest.mark.parametrize("qps", [2, 3, 8])
def test_queue_pairs_split_a_connection_into_equal_lanes(qps):
    """Alone, a connection of several QPs is as fast as one (its NIC port is the bottleneck), and
    each QP's equal share of the bytes crosses the spine that QP is hashed onto."""
    ecmp = FabricSpec(**{**FAT.__dict__, "routing": "ecmp", "qps_per_connection": qps})
    t = topo(16, ecmp)
    net = FairShareNetwork(Simulation(), t)
    n = 10**8 + 1
    done = []
    net.sim.env.process(_timed(net, 0, 12, n, done))
    net.sim.run()
    assert done[0] == pytest.approx(FAT.latency + n / NIC, rel=1e-9)
    expected: dict[int, int] = {}
    for i, lane in enumerate(t.route(0, 12).lanes):
        share = n // qps + (i < n % qps)
        expected[lane.links[1].index] = expected.get(lane.links[1].index, 0) + share
    assert {i: net.link_bytes[i] for i in expected} == expected
    assert sum(expected.values()) == n


def _timed(net, src, dst, nbytes, out):
    yield from net.transfer(src, dst, nbytes)
    out.append(net.sim.env.now)


def test_lanes_survive_posting_with_an_explicit_route():
    """post(route=...) with a route that has lanes splits it too, and calls back once."""
    ecmp = FabricSpec(**{**FAT.__dict__, "routing": "ecmp", "qps_per_connection": 4})
    t = topo(16, ecmp)
    net = FairShareNetwork(Simulation(), t)
    calls = []
    assert net.post(0, 12, 4 * 10**6, lambda arg: calls.append((arg, net.sim.env.now)), "x", route=t.route(0, 12)) is False
    net.sim.run()
    assert len(calls) == 1 and calls[0][0] == "x"
    assert calls[0][1] == pytest.approx(FAT.latency + 4 * 10**6 / NIC, rel=1e-9)
    assert net.flows_started == 4
