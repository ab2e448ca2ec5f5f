"""Topology: placement, each fabric's routes (links, counts, exact latencies), validation, scale."""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import replace

import pytest

from mpisim.engine.units import si_numbers
from mpisim.errors import ConfigError, TopologyError, UnitError
from mpisim.network.builders import LEAF_DOWN_PORTS, SPINE_PORTS
from mpisim.network.topology import FabricSpec, Topology, TopologySpec, build_topology

US = 1e-6
SHM = FabricSpec("shm", bandwidth=20e9, latency=0.3 * US, efficiency=0.5)
STAR = FabricSpec("star", bandwidth=25e9, latency=1.5 * US, efficiency=0.9)


def topo(nodes: int = 1, ranks_per_node: int = 1, intra=None, inter=None, **kw) -> Topology:
    return build_topology(TopologySpec("t", nodes, ranks_per_node, intra, inter, **kw))


def names(route) -> list[str]:
    return [link.name for link in route.links]


# --- placement -----------------------------------------------------------------------------


def test_block_placement_fills_node_zero_first():
    t = topo(3, 4, SHM, STAR)
    assert [t.node_of(r) for r in range(12)] == [0] * 4 + [1] * 4 + [2] * 4
    assert [t.local_rank(r) for r in range(6)] == [0, 1, 2, 3, 0, 1]
    assert t.ranks_on_node(1) == [4, 5, 6, 7]


def test_round_robin_placement_deals_ranks_like_cards():
    t = topo(3, 4, SHM, STAR, placement="round_robin")
    assert [t.node_of(r) for r in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert [t.local_rank(r) for r in range(7)] == [0, 0, 0, 1, 1, 1, 2]
    assert t.ranks_on_node(1) == [1, 4, 7, 10]


@pytest.mark.parametrize("placement", ["block", "round_robin"])
def test_placement_functions_agree(placement):
    t = topo(5, 3, SHM, STAR, placement=placement)
    seen = []
    for node in range(t.nodes):
        for local, rank in enumerate(t.ranks_on_node(node)):
            assert (t.node_of(rank), t.local_rank(rank)) == (node, local)
            seen.append(rank)
    assert sorted(seen) == list(range(t.size)) == list(range(15))


def test_path_kind():
    t = topo(2, 2, SHM, STAR)
    assert [t.path_kind(0, 0), t.path_kind(0, 1), t.path_kind(0, 2)] == ["self", "intra", "inter"]


# --- routes: general ----------------------------------------------------------------------


def test_self_route_is_empty():
    route = topo(2, 2, SHM, STAR).route(3, 3)
    assert route.links == ()
    assert route.latency == 0
    assert math.isinf(route.bottleneck)
    assert route.beta == 0.0


def test_routes_are_cached_and_link_indices_match_positions():
    t = topo(4, 2, SHM, FabricSpec("fat_tree", 25e9, 1e-6, leaf_size=2))
    assert t.route(0, 7) is t.route(0, 7)
    assert all(link.index == i for i, link in enumerate(t.links))


def test_out_of_range_rank_is_an_index_error():
    t = topo(2, 1, None, STAR)
    with pytest.raises(IndexError, match="rank 2"):
        t.route(0, 2)
    with pytest.raises(IndexError, match="rank -1"):
        t.route(-1, 0)


def test_intra_node_traffic_never_touches_the_network():
    t = topo(3, 4, SHM, STAR)
    for src in range(t.size):
        for dst in range(t.size):
            kinds = {link.kind for link in t.route(src, dst).links}
            if t.path_kind(src, dst) == "intra":
                assert kinds == {"shm"}
            elif t.path_kind(src, dst) == "inter":
                assert kinds == {"net"}


def test_unused_fabrics_add_no_links():
    one_node = topo(1, 4, SHM, STAR)
    assert len(one_node.links) == 8
    assert {link.kind for link in one_node.links} == {"shm"}
    assert {link.kind for link in topo(4, 1, SHM, STAR).links} == {"net"}


# --- intra-node fabrics -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "hub", "link_kind"),
    [("shm", "shm", "shm"), ("pcie", "pcie", "pcie"), ("nvswitch", "nvswitch", "nvlink")],
)
def test_intra_fabric_is_a_star_of_rank_ports(kind, hub, link_kind):
    fabric = FabricSpec(kind, bandwidth=300e9, latency=0.7 * US, efficiency=0.78)
    t = topo(2, 4, fabric, STAR)
    route = t.route(5, 6)
    assert names(route) == [f"rank5->node1.{hub}", f"node1.{hub}->rank6"]
    assert [link.kind for link in route.links] == [link_kind, link_kind]
    assert route.latency == 0.7 * US  # two halves add up exactly
    assert route.bottleneck == 300e9 * 0.78
    assert sum(link.kind == link_kind for link in t.links) == 2 * t.size


def test_round_robin_intra_links_name_the_hosting_node():
    t = topo(2, 2, SHM, STAR, placement="round_robin")
    assert names(t.route(1, 3)) == ["rank1->node1.shm", "node1.shm->rank3"]


# --- inter-node fabrics -----------------------------------------------------------------


def test_star_goes_up_to_one_switch_and_down():
    t = topo(4, 1, None, STAR)
    route = t.route(0, 3)
    assert names(route) == ["node0.nic0->switch", "switch->node3.nic0"]
    assert route.latency == 1.5 * US
    assert route.bottleneck == 25e9 * 0.9
    assert len(t.links) == 4 * 2


def test_local_rank_uses_nic_modulo_nics():
    t = topo(2, 4, SHM, replace(STAR, nics=2))
    assert names(t.route(1, 7)) == ["node0.nic1->switch", "switch->node1.nic1"]
    assert names(t.route(2, 5)) == ["node0.nic0->switch", "switch->node1.nic1"]
    assert len(t.links) == 2 * 4 * 2 + 2 * 2 * 2  # shm ports + NIC ports


def test_full_mesh_creates_direct_links_lazily():
    t = topo(6, 1, None, FabricSpec("full", 25e9, 2 * US))
    assert t.links == []
    route = t.route(1, 4)
    assert names(route) == ["node1.nic0->node4.nic0"]
    assert route.latency == 2 * US
    t.route(1, 4)
    t.route(4, 1)
    assert [link.name for link in t.links] == ["node1.nic0->node4.nic0", "node4.nic0->node1.nic0"]
    assert [link.index for link in t.links] == [0, 1]


def test_large_full_mesh_builds_instantly():
    t = topo(100_000, 1, None, FabricSpec("full", 25e9, 1 * US))
    assert t.links == []
    assert len(t.route(0, 99_999).links) == 1


def test_full_mesh_rides_the_senders_plane():
    t = topo(2, 2, SHM, FabricSpec("full", 25e9, 1 * US, nics=2))
    assert names(t.route(1, 2)) == ["node0.nic1->node1.nic1"]


@pytest.mark.parametrize(
    ("src", "dst", "hops"),
    [
        (0, 1, ["node0.nic0->node1.nic0"]),
        (0, 3, ["node0.nic0->node1.nic0", "node1.nic0->node2.nic0", "node2.nic0->node3.nic0"]),
        (0, 6, ["node0.nic0->node7.nic0", "node7.nic0->node6.nic0"]),  # shorter way back
        (6, 1, ["node6.nic0->node7.nic0", "node7.nic0->node0.nic0", "node0.nic0->node1.nic0"]),
        (
            0,
            4,
            [
                "node0.nic0->node1.nic0",
                "node1.nic0->node2.nic0",
                "node2.nic0->node3.nic0",
                "node3.nic0->node4.nic0",
            ],
        ),  # tie: clockwise
        (
            5,
            1,
            [
                "node5.nic0->node6.nic0",
                "node6.nic0->node7.nic0",
                "node7.nic0->node0.nic0",
                "node0.nic0->node1.nic0",
            ],
        ),  # tie: clockwise
    ],
)
def test_ring_takes_the_shorter_way_and_pays_latency_per_hop(src, dst, hops):
    t = topo(8, 1, None, FabricSpec("ring", 10e9, 1 * US))
    route = t.route(src, dst)
    assert names(route) == hops
    assert route.latency == pytest.approx(len(hops) * US, rel=1e-15)
    assert len(t.links) == 8 * 2


def test_two_node_ring_has_one_link_per_direction():
    t = topo(2, 1, None, FabricSpec("ring", 10e9, 1 * US))
    assert [link.name for link in t.links] == ["node0.nic0->node1.nic0", "node1.nic0->node0.nic0"]
    assert names(t.route(1, 0)) == ["node1.nic0->node0.nic0"]


FAT = FabricSpec(
    "fat_tree", bandwidth=25e9, latency=1.0 * US, efficiency=0.9, leaf_size=4, hop_latency=0.25 * US
)


def test_fat_tree_same_leaf_is_two_links():
    t = topo(8, 1, None, FAT)
    route = t.route(1, 3)
    assert names(route) == ["node1.nic0->leaf0", "leaf0->node3.nic0"]
    assert route.latency == 1.0 * US


def test_fat_tree_cross_leaf_goes_through_the_pooled_spine_bundles():
    """Adaptive routing (the default): a leaf's uplinks act as one bundle per direction."""
    t = topo(8, 1, None, FAT)
    route = t.route(1, 6)
    assert names(route) == ["node1.nic0->leaf0", "leaf0->spines", "spines->leaf1", "leaf1->node6.nic0"]
    assert route.latency == pytest.approx(1.0 * US + 2 * 0.25 * US, rel=1e-15)
    assert route.bottleneck == 25e9 * 0.9
    assert route.lanes == ()
    # 8 NICs x 2 directions, plus 2 leaves x 2 bundles.
    assert len(t.links) == 16 + 4
    bundle = t.route(1, 6).links[1]
    assert bundle.bandwidth == pytest.approx(4 * 25e9, rel=1e-15)  # 4 spines x one NIC port each


def test_fat_tree_ecmp_hashes_each_connection_onto_one_spine():
    t = topo(8, 1, None, replace(FAT, routing="ecmp"))
    route = t.route(1, 6)
    spine = t.inter.spine_for(1, 0, 6, 0)
    assert names(route) == ["node1.nic0->leaf0", f"leaf0->spine{spine}", f"spine{spine}->leaf1", "leaf1->node6.nic0"]
    assert route.latency == pytest.approx(1.0 * US + 2 * 0.25 * US, rel=1e-15)
    assert route.bottleneck == 25e9 * 0.9
    # 8 NICs x 2 directions, plus 2 leaves x 4 spines x 2 directions.
    assert len(t.links) == 16 + 16


def test_ecmp_queue_pairs_are_lanes_hashed_independently():
    t = topo(64, 1, None, replace(FAT, routing="ecmp", qps_per_connection=4))
    route = t.route(0, 63)
    assert len(route.lanes) == 4
    assert route.lanes[0].links == route.links
    spines = [t.inter.spine_for(0, 0, 63, 0, qp) for qp in range(4)]
    assert [lane.links[1].name for lane in route.lanes] == [f"leaf0->spine{s}" for s in spines]
    assert [lane.links[-2].name for lane in route.lanes] == [f"spine{s}->leaf15" for s in spines]
    assert all(lane.latency == route.latency and lane.bottleneck == route.bottleneck for lane in route.lanes)
    assert t.route(0, 1).lanes == ()  # one leaf: a single path


def test_ecmp_hash_spreads_over_every_spine_and_is_the_same_in_every_build():
    pairs = [(s, (s * 5 + 3) % 64) for s in range(64)]
    first = [names(topo(64, 1, None, replace(FAT, routing="ecmp")).route(s, d)) for s, d in pairs]
    again = [names(topo(64, 1, None, replace(FAT, routing="ecmp")).route(s, d)) for s, d in pairs]
    assert first == again
    spines = {name for route in first for name in route if name.startswith("spine")}
    assert len({name.split("->")[0] for name in spines}) == 4


def test_three_levels_when_the_spines_cannot_reach_every_leaf():
    """More leaves than SPINE_PORTS: pods of SPINE_PORTS / 2 leaves under a core level."""
    nodes = 4 * (SPINE_PORTS + 1)  # 65 leaves of 4 nodes
    t = topo(nodes, 1, None, replace(FAT, hop_latency=0.25 * US))
    pod_nodes = SPINE_PORTS // 2 * 4
    assert t.inter.pods == math.ceil(nodes / pod_nodes)
    same_pod = t.route(0, pod_nodes - 1)
    assert names(same_pod) == ["node0.nic0->leaf0", "leaf0->spines", f"spines->leaf{SPINE_PORTS // 2 - 1}",
                               f"leaf{SPINE_PORTS // 2 - 1}->node{pod_nodes - 1}.nic0"]
    across = t.route(0, nodes - 1)
    assert names(across)[1:5] == ["leaf0->spines", "pod0.spines->core", f"core->pod{t.inter.pods - 1}.spines",
                                  f"spines->leaf{SPINE_PORTS}"]
    assert across.latency == pytest.approx(1.0 * US + 4 * 0.25 * US, rel=1e-15)
    # The core is non-blocking: a pod's bundle to it carries all its leaves' uplinks.
    core = across.links[2]
    assert core.bandwidth == pytest.approx(SPINE_PORTS // 2 * 4 * 25e9, rel=1e-15)
    assert topo(4 * SPINE_PORTS, 1, None, FAT).inter.pods == 1  # exactly SPINE_PORTS leaves: two levels


def test_pod_size_is_rounded_to_whole_leaves():
    t = topo(16, 1, None, replace(FAT, pod_size=6))  # leaves of 4 nodes: pods of 8
    assert t.inter.pod_nodes == 8 and t.inter.pods == 2
    assert "pod0.spines->core" in names(t.route(0, 8))
    assert "pod0.spines->core" not in names(t.route(0, 7))


def test_fat_tree_automatic_leaf_size_fills_the_leaf_ports():
    t = topo(2 * LEAF_DOWN_PORTS + 1, 1, None, replace(FAT, leaf_size=0))
    assert names(t.route(0, LEAF_DOWN_PORTS - 1))[0] == "node0.nic0->leaf0"
    assert len(t.route(0, LEAF_DOWN_PORTS - 1).links) == 2
    assert t.route(0, 2 * LEAF_DOWN_PORTS).links[-1].name == f"leaf2->node{2 * LEAF_DOWN_PORTS}.nic0"
    small = topo(5, 1, None, replace(FAT, leaf_size=0))
    assert all(len(small.route(0, d).links) == 2 for d in range(1, 5))  # one leaf, no spines
    assert not any("spine" in link.name for link in small.links)


def test_fat_tree_keeps_a_nodes_nics_on_one_leaf():
    t = topo(4, 2, SHM, replace(FAT, nics=2, leaf_size=2))
    assert names(t.route(0, 3)) == ["node0.nic0->leaf0", "leaf0->node1.nic1"]
    assert len(t.route(0, 4).links) == 4


def _per_flow_share(t: Topology, pairs) -> list[float]:
    """Each flow's share of its tightest link when all flows run at once (equal split per link)."""
    routes = [t.route(src, dst) for src, dst in pairs]
    load = Counter(link.index for route in routes for link in route.links)
    return [min(link.effective_bandwidth / load[link.index] for link in route.links) for route in routes]


@pytest.mark.parametrize("ratio", [2, 4])
def test_fat_tree_oversubscription_divides_cross_leaf_bandwidth(ratio):
    """When every node of leaf 0 sends to leaf 1, an oversubscribed tree gives each flow 1/ratio."""
    pairs = [(node, 4 + (node + 1) % 4) for node in range(4)]  # leaf 0 -> leaf 1, a permutation
    full = _per_flow_share(topo(8, 1, None, FAT), pairs)
    thin = _per_flow_share(topo(8, 1, None, replace(FAT, oversubscription=ratio)), pairs)
    assert full == [25e9 * 0.9] * 4
    assert thin == pytest.approx([25e9 * 0.9 / ratio] * 4, rel=1e-12)


@pytest.mark.parametrize("routing", ["adaptive", "ecmp"])
def test_fat_tree_uplink_capacity_is_ports_times_bandwidth_over_ratio(routing):
    t = topo(8, 2, SHM, replace(FAT, nics=2, oversubscription=3, routing=routing))
    uplinks = [link for link in t.links if link.name.startswith("leaf0->spine")]
    assert sum(link.bandwidth for link in uplinks) == pytest.approx(4 * 2 * 25e9 / 3, rel=1e-12)


RAIL = FabricSpec("rail", bandwidth=25e9, latency=1.4 * US, efficiency=0.96, nics=4, hop_latency=0.1 * US)


def test_rail_same_rail_is_one_leaf_hop():
    t = topo(3, 4, SHM, RAIL)
    assert names(t.route(1, 9)) == ["node0.nic1->rail1.leaf0", "rail1.leaf0->node2.nic1"]
    assert t.route(1, 9).latency == 1.4 * US


def test_rail_cross_rail_goes_through_the_spine():
    t = topo(3, 4, SHM, RAIL)
    route = t.route(1, 10)  # local rank 1 on node 0 -> local rank 2 on node 2
    assert [name.split("->")[0] for name in names(route)][:2] == ["node0.nic1", "rail1.leaf0"]
    assert names(route)[1].startswith("rail1.leaf0->spine")
    assert names(route)[2].endswith("->rail2.leaf0")
    assert names(route)[3] == "rail2.leaf0->node2.nic2"
    assert route.latency == pytest.approx(1.6 * US, rel=1e-15)


def test_rail_with_many_nodes_is_a_fat_tree_per_rail():
    t = topo(6, 2, SHM, replace(RAIL, nics=2, leaf_size=2))
    route = t.route(0, 10)  # rail 0: node 0 (leaf 0) -> node 5 (leaf 2)
    assert names(route)[0] == "node0.nic0->rail0.leaf0"
    assert names(route)[-1] == "rail0.leaf2->node5.nic0"
    assert len(route.links) == 4


def test_rail_rejects_nics_not_matching_ranks_per_node():
    with pytest.raises(TopologyError, match=r"inter\.nics: .*one NIC per rank.*ranks_per_node \(8\), got 4"):
        topo(2, 8, SHM, replace(RAIL, nics=4))


# --- validation -------------------------------------------------------------------------


def _spec(**changes) -> TopologySpec:
    base = TopologySpec("t", nodes=2, ranks_per_node=2, intra=SHM, inter=STAR)
    return replace(base, **changes)


@pytest.mark.parametrize(
    ("spec", "path", "words"),
    [
        (_spec(nodes=0), "nodes", "at least 1, got 0"),
        (_spec(ranks_per_node=0), "ranks_per_node", "at least 1, got 0"),
        (_spec(inter=replace(STAR, bandwidth=0.0)), "inter.bandwidth", "positive"),
        (_spec(inter=replace(STAR, bandwidth=-1.0)), "inter.bandwidth", "positive"),
        (_spec(inter=replace(STAR, bandwidth=math.inf)), "inter.bandwidth", "finite"),
        (_spec(intra=replace(SHM, latency=-1e-6)), "intra.latency", "zero or positive"),
        (_spec(inter=replace(STAR, efficiency=0.0)), "inter.efficiency", "(0, 1]"),
        (_spec(inter=replace(STAR, efficiency=1.2)), "inter.efficiency", "(0, 1]"),
        (_spec(intra=None), "intra", "required when ranks_per_node > 1"),
        (_spec(inter=None), "inter", "required when nodes > 1"),
        (
            _spec(inter=replace(STAR, kind="fat_tree", oversubscription=0.5)),
            "inter.oversubscription",
            "at least 1",
        ),
        (_spec(inter=replace(STAR, kind="torus")), "inter.kind", "known: fat_tree, full, rail, ring, star"),
        (_spec(intra=replace(SHM, kind="nvlink")), "intra.kind", "known: nvswitch, pcie, shm"),
        (_spec(inter=replace(STAR, kind="shm")), "inter.kind", "unknown inter-node fabric kind 'shm'"),
        (_spec(placement="scatter"), "placement", "known: block, round_robin"),
        (_spec(device="tpu"), "device", "known: cpu, gpu"),
        (_spec(inter=replace(STAR, nics=0)), "inter.nics", "at least 1"),
        (_spec(inter=replace(STAR, leaf_size=-1)), "inter.leaf_size", "0 for automatic"),
        (_spec(inter=replace(STAR, hop_latency=-1.0)), "inter.hop_latency", "zero or positive"),
        (_spec(nodes=2.0), "nodes", "whole number"),
    ],
)
def test_impossible_topologies_are_rejected_with_the_field_named(spec, path, words):
    with pytest.raises(TopologyError) as info:
        build_topology(spec)
    assert info.value.path == path
    assert words in str(info.value)
    assert str(info.value).startswith(f"{path}: ")
    assert "\n" not in str(info.value)


def test_fabrics_are_optional_when_they_would_carry_nothing():
    assert topo(1, 1).size == 1
    assert topo(1, 4, SHM).size == 4
    assert topo(4, 1, None, STAR).size == 4


# --- from_dict / to_dict ----------------------------------------------------------------

RAW = {
    "nodes": 4,
    "ranks_per_node": 8,
    "device": "gpu",
    "intra": {"kind": "nvswitch", "bandwidth": "300 GB/s", "latency": "0.7 us", "efficiency": 0.78},
    "inter": {"kind": "rail", "nics": 8, "bandwidth": "200 Gbps", "latency": "1.4 us", "efficiency": "96%"},
}


def test_from_dict_parses_units_once():
    spec = TopologySpec.from_dict(RAW, name="cluster")
    assert spec.name == "cluster"
    assert spec.size == 32
    assert spec.intra == FabricSpec("nvswitch", 300e9, 0.7e-6, 0.78)
    assert spec.inter == FabricSpec("rail", 25e9, 1.4e-6, 0.96, nics=8)
    assert spec.placement == "block"


def test_from_dict_reads_ratio_strings_and_defaults():
    raw = {
        "nodes": "64",
        "inter": {
            "kind": "fat_tree",
            "bandwidth": "100 Gbps",
            "latency": "1 us",
            "oversubscription": "2:1",
            "leaf_size": 16,
            "hop_latency": "100 ns",
        },
    }
    spec = TopologySpec.from_dict(raw)
    assert (spec.name, spec.nodes, spec.ranks_per_node, spec.intra) == ("inline", 64, 1, None)
    assert spec.inter == FabricSpec(
        "fat_tree", 12.5e9, 1e-6, oversubscription=2.0, leaf_size=16, hop_latency=1e-7
    )


@pytest.mark.parametrize(
    "raw",
    [
        RAW,
        {
            "name": "x",
            "description": "d",
            "nodes": 3,
            "placement": "round_robin",
            "ranks_per_node": 2,
            "intra": {"kind": "shm", "bandwidth": "12.8 GB/s", "latency": "0.15 us"},
            "inter": {
                "kind": "ring",
                "nics": 2,
                "bandwidth": "10 Gbps",
                "latency": "17.2 us",
                "efficiency": 0.94,
            },
        },
        {"nodes": 1},
        {**RAW, "inter": {**RAW["inter"], "routing": "ecmp", "qps_per_connection": 4, "pod_size": 64}},
    ],
)
def test_to_dict_round_trips(raw):
    spec = TopologySpec.from_dict(raw)
    resolved = spec.to_dict()
    with si_numbers():  # what to_dict writes is SI, read back as such
        assert TopologySpec.from_dict(resolved) == spec
    for fabric in ("intra", "inter"):
        numbers = {key: value for key, value in resolved.get(fabric, {}).items() if key not in ("kind", "routing")}
        assert all(isinstance(value, int | float) for value in numbers.values())  # SI, no unit strings


@pytest.mark.parametrize(
    ("raw", "error", "path", "words"),
    [
        ({**RAW, "nodez": 4}, ConfigError, "nodez", "allowed keys: name, description, nodes"),
        (
            {**RAW, "intra": {**RAW["intra"], "nics": 2}},
            ConfigError,
            "intra.nics",
            "allowed keys: kind, bandwidth",
        ),
        (
            {**RAW, "inter": {**RAW["inter"], "bandwith": 1}},
            ConfigError,
            "inter.bandwith",
            "unknown key 'bandwith'",
        ),
        ({"ranks_per_node": 1}, ConfigError, "nodes", "required"),
        ({**RAW, "inter": {"kind": "star", "latency": "1 us"}}, ConfigError, "inter.bandwidth", "required"),
        (
            {**RAW, "inter": {**RAW["inter"], "bandwidth": "10 Gbsp"}},
            UnitError,
            "inter.bandwidth",
            "not a bandwidth",
        ),
        ({**RAW, "intra": {**RAW["intra"], "latency": "fast"}}, UnitError, "intra.latency", "not a time"),
        ({**RAW, "nodes": "four"}, UnitError, "nodes", "expected a whole number"),
        (
            {**RAW, "inter": {**RAW["inter"], "efficiency": "high"}},
            ConfigError,
            "inter.efficiency",
            "0.94 or 94%",
        ),
        ({**RAW, "inter": 5}, ConfigError, "inter", "expected a fabric mapping"),
        ({**RAW, "inter": {**RAW["inter"], "kind": 3}}, ConfigError, "inter.kind", "fabric kind name"),
        ({**RAW, "ranks_per_node": 0}, TopologyError, "ranks_per_node", "at least 1"),
        ({**RAW, "inter": {**RAW["inter"], "nics": 4}}, TopologyError, "inter.nics", "one NIC per rank"),
        ({**RAW, "placement": 1}, ConfigError, "placement", "expected a string"),
        ({**RAW, "inter": {**RAW["inter"], "routing": "random"}}, TopologyError, "inter.routing",
         "unknown routing 'random'; known: adaptive, ecmp"),
        ({**RAW, "inter": {**RAW["inter"], "qps_per_connection": 4}}, TopologyError, "inter.qps_per_connection",
         "needs routing: ecmp"),
        ({**RAW, "inter": {**RAW["inter"], "routing": "ecmp", "qps_per_connection": 0}}, TopologyError,
         "inter.qps_per_connection", "at least 1"),
        ({**RAW, "inter": {**RAW["inter"], "routing": "ecmp", "qps_per_connection": "4 QPs"}}, UnitError,
         "inter.qps_per_connection", "expected a whole number"),
        ({**RAW, "inter": {"kind": "star", "bandwidth": "1 Gbps", "latency": "1 us", "routing": "ecmp"}},
         TopologyError, "inter.routing", "not to kind 'star'"),
        ({**RAW, "inter": {**RAW["inter"], "pod_size": -1}}, UnitError, "inter.pod_size", "must not be negative"),
    ],
)
def test_from_dict_errors_carry_relative_paths(raw, error, path, words):
    with pytest.raises(error) as info:
        TopologySpec.from_dict(raw)
    assert info.value.path == path
    assert words in str(info.value)
    assert info.value.at("topology").path == f"topology.{path}"


def test_from_dict_rejects_a_non_mapping():
    with pytest.raises(ConfigError, match="expected a topology mapping"):
        TopologySpec.from_dict(["nodes", 2])  # type: ignore[arg-type]


# --- summary and scale ------------------------------------------------------------------


def test_summary_is_one_line_naming_counts_and_fabrics():
    line = build_topology(TopologySpec.from_dict(RAW)).summary()
    assert "\n" not in line
    assert line.startswith("4 nodes x 8 GPUs, NVSwitch 300 GB/s per GPU, rail-optimized")
    assert "8 x 200 Gb/s (25 GB/s) NICs per node" in line
    assert topo(1, 1).summary() == "1 node x 1 rank"


def test_16384_rank_fat_tree_builds_and_routes_quickly():
    start = time.perf_counter()
    t = topo(16384, 1, None, FabricSpec("fat_tree", 25e9, 1.5 * US, 0.95, oversubscription=2))
    routes = [t.route(rank, (rank * 7919 + 13) % t.size) for rank in range(t.size)]
    elapsed = time.perf_counter() - start
    assert all(route.latency > 0 and route.bottleneck > 0 for route in routes if route.links)
    assert len(t.links) < 4 * t.size  # links grow with the size, not with the number of pairs
    assert elapsed < 10  # generous: about 0.2 s on a laptop


def test_16384_gpu_rail_cluster_builds_and_routes_quickly():
    start = time.perf_counter()
    intra = FabricSpec("nvswitch", 300e9, 0.7 * US)
    t = topo(2048, 8, intra, replace(RAIL, nics=8), device="gpu")
    for rank in range(t.size):
        t.route(rank, (rank * 7919 + 13) % t.size)
    assert time.perf_counter() - start < 10


def test_device_peaks_memory_and_bandwidth_are_parsed_and_checked():
    spec = TopologySpec.from_dict({"nodes": 1, "device_flops": {"bf16": "989 TFLOPS", "fp8": "1979 TFLOPS"},
                            "device_memory": "80 GiB", "device_memory_bandwidth": "3.35 TB/s"})
    assert spec.peak_flops("bf16") == 989e12 and spec.peak_flops("fp4") is None
    assert spec.device_memory == 80 * 2**30 and spec.device_memory_bandwidth == 3.35e12
    with si_numbers():  # the resolved form is in SI numbers, as mpisim check prints it
        assert TopologySpec.from_dict(spec.to_dict()) == spec
    with pytest.raises(ConfigError, match=r"unknown number format 'bf17'") as info:
        TopologySpec.from_dict({"nodes": 1, "device_flops": {"bf17": "1 TFLOPS"}})
    assert info.value.path == "device_flops.bf17"
