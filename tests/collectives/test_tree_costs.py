"""Pipelined trees: the shortcuts that make large tree calls cheap to simulate change no result.

* At ``fidelity: collective`` the edges of one pair of ranks with equal bytes ride one weighted
  fair-share flow (mpisim.collectives.fluid.tree, ``_plan``): the call's time is the one that
  one flow per edge gives (to rounding) and every link carries exactly the same bytes.
* The tuner's tree prediction (``tuner._tree_time``) walks the first segment's paths from the
  leaves only, over distinct hop costs: it equals, float for float, the walk from every rank
  over every hop.
"""

from __future__ import annotations

import math

import pytest

from mpisim.collectives import nccl
from mpisim.collectives.nccl import tuner
from mpisim.collectives.trees import DBT_SEGMENT, NCCL_STEPS
from mpisim.network.base import Capabilities
from mpisim.network.fairshare import FairShareNetwork
from mpisim.scenario import load, run_scenario
from tests.validation.test_gpu_collectives import coll_comm

MiB = 2**20


def _tree_call(algorithm: str, nodes: int, nbytes: int) -> dict:
    return {"units": "SI", "topology": {"preset": "dgx-h100", "nodes": nodes}, "network": {"model": "fairshare"},
            "payload": "size", "fidelity": "collective", "trace": {"messages": False, "spans": False},
            "workload": {"kind": "collective", "collective": "allreduce", "algorithm": algorithm, "sizes": [nbytes]}}


def _run_counting_flows(raw: dict, monkeypatch) -> tuple[float, dict[str, int], int]:
    """The call's time, the bytes over every link, and how many flows the network started.

    (Counted by the network itself: a fluid tree posts its flows in one ``post_all`` call.)
    """
    networks = []
    init = FairShareNetwork.__init__

    def keeping(self, *args, **kwargs):
        init(self, *args, **kwargs)
        networks.append(self)

    monkeypatch.setattr(FairShareNetwork, "__init__", keeping)
    result = run_scenario(load(raw))
    (world,) = result.records
    flows = sum(network.flows_started for network in networks)
    return result.rows[0]["time_s"], {link["link"]: link["nbytes"] for link in world.link_totals}, flows


@pytest.mark.parametrize(("algorithm", "nodes", "nbytes", "fewer"),
                         [("nccl_tree", 1, 64 * MiB, 2), ("nccl_tree", 4, 64 * MiB, 5), ("nccl_tree", 4, MiB, 5),
                          ("nccl_tree", 4, 64 * MiB + 12, 2), ("nvls", 4, 256 * MiB, 1)])
def test_one_weighted_flow_per_pair_gives_one_flow_per_edges_time_and_bytes(algorithm, nodes, nbytes, fewer,
                                                                            monkeypatch):
    """The same time and link bytes with *fewer* times fewer flows: on one node the two trees of
    the one channel share the chain; across nodes 8 channels' chains (2 trees x 7 edges each way)
    share a node's 8 pairs each way, and nvls's rail trees share few pairs. A vector that does
    not split evenly gives trees of different bytes, whose edges on one pair stay apart."""
    raw = _tree_call(algorithm, nodes, nbytes)
    merged_time, merged_links, merged_flows = _run_counting_flows(raw, monkeypatch)
    # One flow per edge, as before weighted flows: the same network, declaring it takes none.
    monkeypatch.setattr(FairShareNetwork, "capabilities", Capabilities(max_min_sharing=True, post_all=True))
    apart_time, apart_links, apart_flows = _run_counting_flows(raw, monkeypatch)
    assert merged_links == apart_links
    assert merged_time == pytest.approx(apart_time, rel=1e-12)
    assert merged_flows * fewer <= apart_flows


# --- the tuner's tree time against the plain walk ------------------------------------------------


def _plain_hop_costs(comm, hops, wire, shared: bool):
    """(latency, seconds per payload byte) of each hop, alone or sharing its links (see tuner._hop_costs)."""
    topology = comm.world.topology
    routes = [topology.route(comm.group[a], comm.group[b]) for a, b in hops]
    load = nccl.link_loads(routes)
    out = []
    for (a, b), route in zip(hops, routes, strict=True):
        kind = topology.path_kind(comm.group[a], comm.group[b])
        if shared and not route.links:
            out.append((0.0, 0.0))
            continue
        if not route.links:
            per_byte = 0.0
        elif shared:
            per_byte = wire.wire_bytes(1 << 20, kind) / (1 << 20) / min(
                link.effective_bandwidth / load.get(link.index, 1) for link in route.links)
        else:
            per_byte = wire.wire_bytes(1 << 20, kind) / (1 << 20) / route.bottleneck
        out.append((wire.latency(kind) + route.latency, per_byte))
    return out


def _plain_tree_time(comm, links, share: float, wire) -> float:
    """tuner._tree_time's closed form, walked from every rank of every tree over every hop."""
    ups = [(r, parent) for tree in links for r, (parent, _) in enumerate(tree) if parent is not None]
    hops = ups + [(parent, r) for r, parent in ups]
    alone = dict(zip(hops, _plain_hop_costs(comm, hops, wire, shared=False), strict=True))
    shared = _plain_hop_costs(comm, hops, wire, shared=True)
    s = min(DBT_SEGMENT, share)
    k = max(1, math.ceil(share / DBT_SEGMENT))
    gamma = comm.world.config.reduce_cost
    first = 0.0
    for tree in links:
        for rank in range(len(tree)):
            path, r = 0.0, rank
            while tree[r][0] is not None:
                parent = tree[r][0]
                up, down = alone[(r, parent)], alone[(parent, r)]
                path += up[0] + s * (up[1] + gamma) + down[0] + s * down[1]
                r = parent
            first = max(first, path)
    queued = max(s * (per_byte - alone[hop][1]) for hop, (_, per_byte) in zip(hops, shared, strict=True))
    if k == 1:
        return first + queued
    period = max(max(s * per_byte, (2 * alone[hop][0] + s * alone[hop][1]) / NCCL_STEPS)
                 for hop, (_, per_byte) in zip(hops, shared, strict=True))
    return first + queued + (k - 1) * period


@pytest.mark.parametrize(("preset", "nodes"), [("dgx-h100", 1), ("dgx-h100", 3), ("dgx-h100", 16), ("dgx-a100", 4)])
def test_the_tuners_tree_time_is_the_plain_walks_to_the_last_bit(preset, nodes):
    comm = coll_comm({"preset": preset, "nodes": nodes})
    channels = nccl.channel_count(comm)
    links = [tree for c in range(channels) for tree in nccl.tree_links(comm, c)]
    for protocol in nccl.protocols(comm.world.topology.spec).values():
        for nbytes in (4096, 3 * MiB + 8, 25 * MiB, 2**30):
            share = nbytes / (2 * channels)
            assert tuner._tree_time(comm, lambda: links, share, protocol.wire, "nccl_tree") == \
                _plain_tree_time(comm, links, share, protocol.wire), (protocol.name, nbytes)


def test_a_fluid_tree_call_charges_every_ranks_launch_as_a_compute_span():
    """At ``fidelity: collective`` an nccl_tree call's launch is charged inside the call (one wait per
    rank): each rank still shows it as a compute span of the protocol's base latency from its entry."""
    raw = {**_tree_call("nccl_tree", 2, 64 * MiB), "trace": {"messages": False, "spans": True}}
    result = run_scenario(load(raw))
    (world,) = result.records
    launches = [span for span in world.spans if span.label.startswith("nccl_tree launch")]
    protocol = launches[0].label.split("(")[1].rstrip(")")
    base = nccl.protocols(load(raw).topology)[protocol].base
    assert sorted(span.rank for span in launches) == list(range(16))
    assert all(span.kind == "compute" and span.t_start == 0 and span.t_end == base for span in launches)
    assert result.rows[0]["time_s"] > base
