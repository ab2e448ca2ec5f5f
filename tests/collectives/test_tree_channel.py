"""NCCL's tree per channel across nodes: its chunks and its thread block's pace (mpisim.collectives.nccl.treechannel).

* The chunks are NCCL's (src/enqueue.cc ``calcCollChunking``), LL128's staircase made continuous:
  never below NCCL's chunk, never twice it, and never smaller for a bigger channel.
* The pace is tuning.cc's per-channel cap over two thread blocks and a tree's algBw ratio.
* The message path (tree_allreduce), the twin's replay and the tuner charge it as a rate: on a
  two-rank tree, k segments of s bytes at pace p end at k s p + 2 (hop latency + s / bandwidth)
  + s gamma, in closed form.
"""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpisim.collectives import nccl
from mpisim.collectives.allreduce import tree_allreduce
from mpisim.collectives.fluid.tree import Tree, _Edge, replay
from mpisim.collectives.nccl import treechannel, tuner
from mpisim.collectives.nccl.protocols import tree_head_sends
from mpisim.collectives.nccl.treechannel import cta_rate, generation, tree_chunk, tree_cut
from mpisim.collectives.trees import DBT_SEGMENT
from mpisim.mpi import SUM
from mpisim.mpi.payload import SizePayload
from mpisim.mpi.wire import Wire
from mpisim.network.topology import TopologySpec
from mpisim.scenario import load, run_scenario
from tests.conftest import make_world, run_program
from tests.validation.test_gpu_collectives import coll_comm

MiB = 2**20
GB = 1e9


def nccl_ll128_chunk(channel_bytes: int, nodes: int, ppn: int) -> int:
    """src/enqueue.cc calcCollChunking, Tree + LL128, as NCCL writes it (integer division on the left)."""
    chunk = 576_000
    nsteps = 1 + int(math.log2(nodes)) + 0.1 * ppn
    while channel_bytes // chunk < nsteps * 64 / ppn and chunk > 131072:
        chunk //= 2
    while channel_bytes // chunk < nsteps * 16 / ppn and chunk > 32768:
        chunk //= 2
    return chunk


def test_the_chunks_are_nccls_slots():
    """LL: half of a 64 KiB slot; Simple: a 512 KiB slot; LL128: 120/128 of a 600 KiB slot, halved
    for small channels (2 nodes of 8: 16 MiB over 16 channels -> 72,000 B, 1 MiB -> 18,000 B)."""
    assert tree_chunk("LL", 5 * MiB, 2, 8) == 32768
    assert tree_chunk("Simple", 5 * MiB, 2, 8) == DBT_SEGMENT == 524288
    assert tree_chunk("LL128", 2**30, 2, 8) == 576_000 == nccl_ll128_chunk(2**30, 2, 8)
    assert tree_chunk("LL128", MiB, 2, 8) == 72_000 == nccl_ll128_chunk(MiB, 2, 8)
    assert tree_chunk("LL128", 64 * 1024, 2, 8) == 18_000 == nccl_ll128_chunk(64 * 1024, 2, 8)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 2**31), st.sampled_from([2, 3, 4, 8, 16, 64]), st.sampled_from([1, 2, 4, 8, 16]))
def test_the_continuous_ll128_chunk_lies_within_a_halving_of_nccls(channel_bytes, nodes, ppn):
    """NCCL halves while a channel has fewer than A chunks, the continuous chunk is the channel over A:
    within a halving of NCCL's, up to NCCL's integer division (it halves once more while the whole
    chunks number floor(A), so by up to (floor(A) + 1) / A more)."""
    ours, theirs = tree_chunk("LL128", channel_bytes, nodes, ppn), nccl_ll128_chunk(channel_bytes, nodes, ppn)
    nsteps = 1 + int(math.log2(nodes)) + 0.1 * ppn
    slack = max((math.floor(a) + 1) / a for a in (nsteps * 64 / ppn, nsteps * 16 / ppn))
    assert theirs / 2 <= ours <= 2 * theirs * slack


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 2**31), min_size=2, max_size=20), st.sampled_from([2, 4, 32]))
def test_a_bigger_channel_never_gets_a_smaller_chunk(sizes, nodes):
    chunks = [tree_chunk("LL128", n, nodes, 8) for n in sorted(sizes)]
    assert all(a <= b for a, b in pairwise(chunks))


def test_a_thread_blocks_rate_is_nccls_cap_over_two_blocks_and_the_trees_ratio():
    """tuning.cc: LL128 min(perChMaxTreeBw x 120/128, perChMaxTreeLL128Bw); every protocol perChMaxTreeBw."""
    assert cta_rate("hopper", "LL128", 2) == pytest.approx(36.7 * GB / 4, rel=1e-12)
    assert cta_rate("hopper", "LL128", 8) == pytest.approx(29.0 * GB / 4, rel=1e-12)
    assert cta_rate("hopper", "LL", 2) == pytest.approx(41.4 * GB / 4, rel=1e-12)
    assert cta_rate("ampere", "LL128", 2) == pytest.approx(20.0 * GB / 4, rel=1e-12)
    assert cta_rate("volta", "LL128", 4) == pytest.approx(10.0 * GB * 120 / 128 / 4, rel=1e-12)


def test_the_generation_comes_from_the_gpu_or_the_shipped_preset():
    assert generation(TopologySpec(name="dgx-a100", nodes=1)) == "ampere"
    assert generation(TopologySpec(name="aws-p5", nodes=1)) == "hopper"
    assert generation(TopologySpec(name="inline", nodes=1, gpu="b200")) == "blackwell"
    assert generation(TopologySpec(name="inline", nodes=1)) is None


def test_where_the_cut_applies():
    """Across nodes: NCCL's chunk, and the pace for LL and LL128 only; on one node DBT_SEGMENT, no pace."""
    one = coll_comm({"preset": "dgx-h100", "nodes": 1})
    assert tree_cut(one, "LL128", 16 * MiB) == treechannel.TreeCut(DBT_SEGMENT)
    two = coll_comm({"preset": "dgx-h100", "nodes": 2})
    cut = tree_cut(two, "LL128", 16 * MiB)  # 16 trees, 16 blocks: each tree one block
    assert cut.segment == 72_000
    assert 1 / cut.channel_pace == pytest.approx(36.7 * GB / 4, rel=1e-12)
    assert tree_cut(two, "Simple", 16 * MiB) == treechannel.TreeCut(DBT_SEGMENT)
    # A call too small to give 16 blocks their threads' work: fewer blocks, each tree a share of one.
    small = tree_cut(two, "LL128", 40_960)  # 640 threads x 8 bytes x 8 blocks
    assert 1 / small.channel_pace == pytest.approx(36.7 * GB / 4 * 8 / 16, rel=1e-12)


# --- the pace as a rate, in closed form -------------------------------------------------------------

S, K, PACE = 1000, 5, 1e-8  # 10 us per segment, against 1 us on the link
ALPHA, BANDWIDTH, WIRE_LATENCY, GAMMA = 1e-6, 1e9, 2e-6, 1e-12


def _closed_form() -> float:
    """The leaf's loop sends segment j at (j+1) s p; the root passes it straight down; the leaf's
    last arrives k s p + 2 (latency + s / bandwidth) + s gamma after the start."""
    return K * S * PACE + 2 * (WIRE_LATENCY + ALPHA + S / BANDWIDTH) + S * GAMMA


def test_the_message_paths_loops_pass_segments_at_the_blocks_pace():
    world = make_world(2, alpha=ALPHA, bandwidth=BANDWIDTH, reduce_cost=GAMMA)
    wire = Wire("LL128", latency_inter=WIRE_LATENCY)

    def program(comm):
        links = [(None, [1]), (0, [])]
        yield from tree_allreduce(comm.coll.with_wire(wire, shared=True), SizePayload(K * S, np.uint8), SUM,
                                  *links[comm.rank], 0, 8, S, PACE)
        return comm.now

    assert max(run_program(world, program)) == pytest.approx(_closed_form(), rel=1e-12)


def test_the_twins_replay_paces_the_same_recurrence():
    wire = Wire("LL128", latency_inter=WIRE_LATENCY)
    tree = Tree([(None, [1]), (0, [])], wire, (S,) * K, 0, 8, PACE)
    edges = [_Edge(0, 1, 0, True, WIRE_LATENCY + ALPHA, 1 / BANDWIDTH, (S,) * K),
             _Edge(0, 0, 1, False, WIRE_LATENCY + ALPHA, 1 / BANDWIDTH, (S,) * K)]
    assert replay(tree, edges, GAMMA, K) == pytest.approx(_closed_form(), rel=1e-12)


# --- the call ------------------------------------------------------------------------------------


def _call(nodes: int, nbytes: int, fidelity: str = "message", bandwidth: str | None = None) -> dict:
    topology = {"preset": "dgx-h100", "nodes": nodes}
    if bandwidth is not None:
        topology["inter"] = {"bandwidth": bandwidth}
    raw = {"units": "SI", "topology": topology, "network": {"model": "fairshare"}, "payload": "size",
           "fidelity": fidelity, "trace": {"messages": False, "spans": False},
           "workload": {"kind": "collective", "collective": "allreduce", "algorithm": "nccl_tree", "sizes": [nbytes]}}
    return run_scenario(load(raw)).rows[0]


def test_an_ll128_tree_across_nodes_is_no_faster_than_its_blocks():
    """4 x dgx-h100, 16 MiB: 16 trees of 1 MiB, each a block passing 7.25 GB/s through each sweep
    (Hopper LL128 on 4+ nodes: 29 GB/s per channel): at least 1 MiB / 7.25 GB/s after the launch,
    and the tuner's prediction within 10 % of the message path."""
    row = _call(4, 16 * MiB)
    assert row["protocol"] == "LL128" and row["chunk_bytes"] == 72_000
    base = nccl.protocols(coll_comm({"preset": "dgx-h100", "nodes": 4}).world.topology.spec, tree=True)["LL128"].base
    assert row["time_s"] >= base + MiB / (29.0 * GB / 4)
    comm = coll_comm({"preset": "dgx-h100", "nodes": 4})
    protocol = nccl.tree_protocol(comm, nccl.protocols(comm.world.topology.spec)["LL128"], 16 * MiB)
    assert tuner.predict_tree(comm, protocol, 16 * MiB) == pytest.approx(row["time_s"], rel=0.10)


@pytest.mark.parametrize("mib", [2, 16])
def test_a_slower_network_never_makes_a_paced_tree_faster(mib):
    times = [_call(2, mib * MiB, bandwidth=f"{gbps} Gbps")["time_s"] for gbps in (800, 400, 200, 100)]
    assert all(a <= b for a, b in pairwise(times))


def test_a_bigger_call_is_never_faster_across_the_chunk_staircase():
    """2 x dgx-h100: sizes across LL128's halvings (16 channels: 18,000 to 576,000-byte chunks)."""
    comm = coll_comm({"preset": "dgx-h100", "nodes": 2})
    table = nccl.protocols(comm.world.topology.spec)
    sizes = [2**k for k in range(18, 31)] + [3 * 2**k for k in range(18, 29)]
    for name in ("LL", "LL128"):
        predicted = [tuner.predict_tree(comm, nccl.tree_protocol(comm, table[name], n), n) for n in sorted(sizes)]
        assert all(a <= b for a, b in pairwise(predicted)), name


# --- LL's pace across nodes, as NCCL caps a tree ------------------------------------------------------


@pytest.mark.parametrize(("nodes", "sends"), [(2, 1.0), (3, 1.5), (4, 2.0), (16, 2.0)])
def test_an_ll_tree_reaches_nccls_cap_and_no_more(nodes, sends):
    """tuning.cc: a tree's LL busBw <= llMaxBw, algBw = busBw / 2. The busiest head sends *sends*
    bytes across nodes per byte of its channel's part, and is paced so that 1 GiB reaches the cap's
    nccl-tests bus bandwidth, 2(p-1)/p of the algorithm bandwidth, within 10 % and never above it."""
    comm = coll_comm({"preset": "dgx-h100", "nodes": nodes})
    assert tree_head_sends(comm) == sends
    spec, n, p = comm.world.topology.spec, 2**30, comm.size
    protocol = nccl.tree_protocol(comm, nccl.protocols(spec)["LL"], n)
    busbw = n / tuner.predict_tree(comm, protocol, n) * 2 * (p - 1) / p
    assert 0.9 * nccl.ll_max_busbw(spec, nodes) <= busbw <= nccl.ll_max_busbw(spec, nodes)
