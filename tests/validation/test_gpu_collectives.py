"""GPU collectives: protocols on the wire, NCCL's algorithms, the tuner and the presets' regimes."""

from __future__ import annotations

import numpy as np
import pytest

from mpisim.collectives import dispatch, nccl, select
from mpisim.engine.units import si_numbers
from mpisim.errors import ConfigError, TopologyError
from mpisim.mpi import SUM
from mpisim.mpi.payload import SizePayload
from mpisim.mpi.wire import Wire
from mpisim.network.topology import ProtocolSpec, TopologySpec
from mpisim.scenario import load, run_scenario
from mpisim.scenario.run import new_world_factory
from tests.conftest import make_world, run_program

KiB, MiB, GiB = 2**10, 2**20, 2**30


def scenario(topology, algorithms, sizes, *, network="fairshare", payload="size", collective="allreduce"):
    return load({"units": "SI", "topology": topology, "network": {"model": network}, "payload": payload,
                 "workload": {"kind": "collective", "collective": collective, "algorithm": list(algorithms),
                              "sizes": list(sizes)}})


def rows(topology, algorithms, sizes, **kwargs):
    return run_scenario(scenario(topology, algorithms, sizes, **kwargs)).rows


def coll_comm(topology, network="fairshare"):
    """Rank 0's collective communicator on a fresh world of *topology* (nothing run)."""
    new_world, _ = new_world_factory(scenario(topology, ["nccl_ring"], [8], network=network))
    return new_world().comm_world(0).coll


# --- the wire ----------------------------------------------------------------------------------


def _one_message(world, nbytes, wire):
    def program(comm):
        if comm.rank == 0:
            yield from comm.coll.with_wire(wire).send(SizePayload(nbytes, np.uint8), dest=1, tag=3)
        else:
            yield from comm.coll.recv(source=0, tag=3)
        return comm.now
    return run_program(world, program)


def test_a_wire_message_pays_the_protocol_latency_and_bandwidth_share_and_no_cpu_overhead():
    world = make_world(2, alpha=1e-6, bandwidth=1e9, send_overhead=5e-6, recv_overhead=5e-6)
    _, t_recv = _one_message(world, 1000, Wire("LL", latency_inter=2e-6, efficiency_inter=0.5))
    assert t_recv == pytest.approx(2e-6 + 1e-6 + 2000 / 1e9, rel=1e-12)
    (record,) = world.tracer.messages
    assert (record.protocol, record.nbytes) == ("LL", 1000)


@pytest.mark.parametrize("model", ["fairshare", "analytic"])
def test_a_gpu_flag_does_not_wait_for_another_connections_chunk(model):
    """NCCL's flags (pipeline credits) are writes to the peer's memory: a zero-byte message on one
    connection arrives after its latency even while a chunk on another connection to the same
    peer is still moving (MPI's per-pair order does not apply to a GPU library's messages)."""
    world = make_world(2, model=model, alpha=1e-6, bandwidth=1e9)
    wire = Wire("Simple", latency_inter=2e-6, efficiency_inter=1.0)

    def program(comm):
        wired = comm.coll.with_wire(wire)
        if comm.rank == 0:
            big = wired.isend(SizePayload(10**6, np.uint8), dest=1, tag=1)
            yield from wired.send(SizePayload(0, np.uint8), dest=1, tag=2)
            yield from wired.wait(big)
            return comm.now
        flag_at = None
        yield from wired.recv(source=0, tag=2)
        flag_at = comm.now
        yield from wired.recv(source=0, tag=1)
        return flag_at, comm.now

    _, (flag_at, chunk_at) = run_program(world, program)
    assert flag_at == pytest.approx(2e-6 + 1e-6, rel=1e-9)
    assert chunk_at == pytest.approx(2e-6 + 1e-6 + 1e6 / 1e9, rel=1e-9)


@pytest.mark.parametrize("model", ["fairshare", "analytic"])
def test_a_paced_wire_goes_no_faster_than_its_pace_and_a_ranks_sends_share_it(model):
    """Wire.pace_inter: at most that many bytes of data per second from one rank across nodes.

    The pace is no link: a message's bytes on the NIC are the protocol's (2 per byte for LL),
    at the lesser of the link's rate and the pace, and two messages from one rank to two other
    nodes share the rank's pace (the proxy thread that turns its buffers round).
    """
    world = make_world(3, model=model, alpha=1e-6, bandwidth=1e9)
    wire = Wire("LL", latency_inter=2e-6, efficiency_inter=0.5, pace_inter=1e8)  # 0.1 GB/s of data

    def program(comm):
        wired = comm.coll.with_wire(wire)
        if comm.rank == 0:
            yield from wired.waitall([wired.isend(SizePayload(10**5, np.uint8), dest=d, tag=1) for d in (1, 2)])
        else:
            yield from wired.recv(source=0, tag=1)
        return comm.now

    _, t1, t2 = run_program(world, program)
    # Alone, 1e5 bytes at 0.1 GB/s would take 1 ms (the link, at 1 GB/s for 2e5 wire bytes, 0.2 ms):
    # the two share the pace, 2 ms for both.
    assert max(t1, t2) == pytest.approx(2e-6 + 1e-6 + 2 * 10**5 / 1e8, rel=1e-9)
    stats = world.network.link_stats()
    assert not [name for name in stats if name.startswith("pace")]
    assert sum(s.nbytes for s in stats.values()) == 2 * 2 * 10**5  # two messages of LL's 2e5 wire bytes, one link each


def test_without_a_wire_the_same_message_pays_mpi_overheads():
    world = make_world(2, alpha=1e-6, bandwidth=1e9, send_overhead=5e-6, recv_overhead=5e-6)
    _, t_recv = _one_message(world, 1000, None)
    assert t_recv == pytest.approx(5e-6 + 1e-6 + 1000 / 1e9 + 5e-6, rel=1e-12)


def test_a_wire_message_above_the_eager_limit_needs_no_rendezvous():
    world = make_world(2, alpha=1e-6, bandwidth=1e9, eager_limit_inter=1024)
    _, t_recv = _one_message(world, 10**6, Wire("Simple", latency_inter=3e-6))
    assert t_recv == pytest.approx(3e-6 + 1e-6 + 1e-3, rel=1e-12)
    assert [m.protocol for m in world.tracer.messages] == ["Simple"]


# --- topology fields -----------------------------------------------------------------------------

GPU_RAW = {
    "nodes": 1, "ranks_per_node": 8, "device": "gpu",
    "base_latency": {"LL": "6.6 us", "Simple": "8.4 us"},
    "intra": {"kind": "nvswitch", "bandwidth": "450 GB/s", "latency": "0.7 us", "in_switch_reduction": True,
              "protocols": {"NVLS": {"latency": "25 us", "efficiency": 0.85}, "LL": {"latency": "0.6 us", "efficiency": "50%"}}},
}


def test_protocols_parse_to_si_sorted_and_round_trip():
    spec = TopologySpec.from_dict(GPU_RAW)
    assert spec.intra.protocols == (ProtocolSpec("LL", 0.6e-6, 0.5), ProtocolSpec("NVLS", 25e-6, 0.85))
    assert spec.intra.in_switch_reduction
    assert spec.base_latency == (("LL", 6.6e-6), ("Simple", 8.4e-6))
    with si_numbers():  # to_dict writes SI numbers
        assert TopologySpec.from_dict(spec.to_dict()) == spec


@pytest.mark.parametrize(("change", "error", "path"), [
    ({"intra": {**GPU_RAW["intra"], "protocols": {"LL64": {"latency": 0, "efficiency": 1}}}}, ConfigError,
     "intra.protocols.LL64"),
    ({"intra": {**GPU_RAW["intra"], "protocols": {"LL": {"latency": "1 us"}}}}, ConfigError,
     "intra.protocols.LL.efficiency"),
    ({"intra": {**GPU_RAW["intra"], "protocols": {"LL": {"latency": "1 us", "efficiency": 1.5}}}}, TopologyError,
     "intra.protocols.LL.efficiency"),
    ({"intra": {**GPU_RAW["intra"], "kind": "pcie"}}, TopologyError, "intra.in_switch_reduction"),
    ({"base_latency": {"Fast": "1 us"}}, ConfigError, "base_latency.Fast"),
])
def test_bad_protocol_settings_name_the_field(change, error, path):
    with pytest.raises(error) as info:
        TopologySpec.from_dict({**GPU_RAW, **change})
    assert info.value.path == path


def test_unlisted_protocols_take_nccl_defaults_less_the_paths_own_latency():
    """NCCL's hwLat is a whole hop; the path's 0.7 us is charged already, the protocol adds the rest."""
    table = nccl.protocols(TopologySpec.from_dict(GPU_RAW))
    assert table["LL"].base == pytest.approx(6.6e-6) and table["LL"].wire.latency_intra == pytest.approx(0.6e-6)
    assert table["LL128"].base == nccl.NCCL_BASE_LATENCY["LL128"]
    assert table["LL128"].wire.latency_intra == pytest.approx(nccl.NCCL_HOP_LATENCY["nvlink"]["LL128"] - 0.7e-6)
    assert table["LL128"].wire.efficiency_intra == nccl.NCCL_EFFICIENCY["LL128"]
    assert table["Simple"].wire.latency_inter == nccl.NCCL_HOP_LATENCY["net"]["Simple"]  # no inter fabric here


# --- algorithms and the tuner --------------------------------------------------------------------

A100 = {"preset": "dgx-a100", "nodes": 1}
A100x2 = {"preset": "dgx-a100", "nodes": 2}
H100 = {"preset": "dgx-h100", "nodes": 1}


@pytest.mark.parametrize("network", ["analytic", "fairshare"])
def test_ring_on_one_node_takes_exactly_the_tuners_prediction(network):
    sizes = [256, 32 * KiB, MiB, 8 * MiB, 256 * MiB]  # blocks divide evenly
    comm = coll_comm(A100, network)
    for row in rows(A100, ["nccl_ring"], sizes, network=network):
        # rel 1e-5: a message puts whole bytes on the wire (n / efficiency, rounded up)
        assert row["time_s"] == pytest.approx(nccl.tune(comm, "nccl_ring", row["bytes"]).predicted, rel=1e-5)


def test_tree_across_nodes_is_near_the_tuners_prediction():
    """4 nodes: a small tree's latencies are the prediction's (within 5 %); with many segments the
    prediction is the busiest links' bound plus the fill, which the message path does not reach
    (its NICs idle between a node's up and down streams: fluid_tree's docstring), by under 30 %."""
    topology = {"preset": "dgx-h100", "nodes": 4}
    comm = coll_comm(topology)
    small, large = rows(topology, ["nccl_tree"], [32 * KiB, 128 * MiB])
    predicted = nccl.tune(comm, "nccl_tree", small["bytes"]).predicted
    assert small["time_s"] == pytest.approx(predicted, rel=0.05)
    predicted = nccl.tune(comm, "nccl_tree", large["bytes"]).predicted
    assert predicted <= large["time_s"] <= predicted * 1.3


def test_the_tuner_picks_the_protocol_with_the_least_predicted_time():
    comm = coll_comm(A100)
    table = nccl.protocols(comm.world.topology.spec)
    picked = {}
    for nbytes in (32 * KiB, MiB, 8 * MiB, 256 * MiB):
        choice = nccl.tune(comm, "nccl_ring", nbytes)
        assert choice.predicted == min(nccl.predict_ring(comm, table[p], nbytes) for p in nccl.PROTOCOLS)
        picked[nbytes] = choice.protocol.name
    assert picked == {32 * KiB: "LL", MiB: "LL", 8 * MiB: "LL128", 256 * MiB: "Simple"}


H100x4 = {"preset": "dgx-h100", "nodes": 4}
PCIE_GPUS = {"nodes": 1, "ranks_per_node": 8, "device": "gpu",
             "intra": {"kind": "pcie", "bandwidth": "31.5 GB/s", "latency": "1.5 us"}}


def test_a_ring_across_nodes_pays_the_network_post_overhead_on_every_step():
    """tuning.cc: intraLat = max(intraLat, netOverhead), netOverhead x3 for Simple, for rings across nodes."""
    comm = coll_comm(H100x4)
    spec = comm.world.topology.spec
    table = nccl.protocols(spec)
    for name, nvlink in (("LL", 0.6e-6), ("LL128", 1.9e-6), ("Simple", 3.4e-6)):
        floor = nccl.net_overhead(spec) * nccl.NCCL_NET_OVERHEAD_POSTS[name]
        wire = nccl.ring_protocol(comm, table[name]).wire
        assert wire.latency_intra + spec.intra.latency == pytest.approx(max(nvlink, floor))
        assert wire.latency_inter == table[name].wire.latency_inter
    assert nccl.ring_protocol(comm, table["LL"]).wire.latency_intra > table["LL"].wire.latency_intra
    # One node: unchanged. NCCL's broadcast ring (one hop's latency in NCCL's model): no post
    # overhead, but LL's pace across nodes, as every ring's (tuning.cc llMaxBws).
    assert nccl.ring_protocol(coll_comm(H100), table["LL"]) is table["LL"]
    assert nccl.ring_protocol(comm, table["Simple"], "bcast") is table["Simple"]
    bcast = nccl.ring_protocol(comm, table["LL"], "bcast").wire
    assert bcast.latency_intra == table["LL"].wire.latency_intra
    assert bcast.pace_inter == pytest.approx(nccl.ll_max_busbw(comm.world.topology.spec, 4) / 8)


def test_nccls_costs_across_nodes_follow_the_host_cpu():
    """tuning.cc keys two costs by the host's CPU: getNetOverhead (2 us on AMD x86, 1 us otherwise)
    and llMaxBws (LL's bus bandwidth across nodes: AMD 22.5 / 19.0 GB/s on 2 / 3+ nodes, else 39 / 20.4)."""
    for host, overhead, caps in (("intel", 1e-6, (39.0e9, 20.4e9)), ("arm", 1e-6, (39.0e9, 20.4e9)),
                                 (None, 1e-6, (39.0e9, 20.4e9)), ("amd", 2e-6, (22.5e9, 19.0e9))):
        topology = {"preset": "dgx-h100", "nodes": 4, "host_cpu": host}
        comm = coll_comm(topology)
        spec = comm.world.topology.spec
        assert spec.host_cpu == host
        assert nccl.net_overhead(spec) == overhead
        assert (nccl.ll_max_busbw(spec, 2), nccl.ll_max_busbw(spec, 4)) == caps
        ll = nccl.ring_protocol(comm, nccl.protocols(spec)["LL"]).wire
        assert ll.latency_intra + spec.intra.latency == pytest.approx(overhead)
        assert ll.pace_inter == pytest.approx(caps[1] / 8)  # 8 channels, one per NIC
    assert coll_comm(A100x2).world.topology.spec.host_cpu == "amd"  # DGX A100: 2x AMD EPYC 7742


def test_an_unknown_host_cpu_is_refused():
    with pytest.raises(TopologyError, match="host_cpu"):
        coll_comm({"preset": "dgx-h100", "nodes": 2, "host_cpu": "epyc"})


@pytest.mark.parametrize("network", ["analytic", "fairshare"])
def test_ring_across_nodes_takes_the_tuners_prediction_with_the_costs_across_nodes(network):
    """4 x dgx-h100 at 1 MiB: the ring picks LL, with the post overhead; simulated = predicted."""
    comm = coll_comm(H100x4, network)
    choice = nccl.tune(comm, "nccl_ring", MiB)
    assert choice.protocol.name == "LL"
    # The NICs carry LL's own bytes (two per byte of data), nothing more: the proxy's pace is not bytes.
    assert choice.protocol.wire.efficiency_inter == nccl.NCCL_EFFICIENCY["LL"]
    (row,) = rows(H100x4, ["nccl_ring"], [MiB], network=network)
    # reports/validation.md, "the tuner's prediction against the simulation": +0.0 % here (LL paced across nodes).
    assert row["time_s"] == pytest.approx(choice.predicted, rel=0.08)


def test_ll128_only_where_nvlink_joins_the_gpus():
    """tuning.cc enables LL128 by default only over NVLink (typeIntra <= PATH_NVB); a fabric may list it."""
    assert nccl.ll128_enabled(coll_comm(A100).world.topology.spec)
    comm = coll_comm(PCIE_GPUS)
    assert not nccl.ll128_enabled(comm.world.topology.spec)
    assert {nccl.tune(comm, "nccl_ring", n).protocol.name for n in (KiB, MiB, 8 * MiB, 256 * MiB)} <= {"LL", "Simple"}
    listed = {**PCIE_GPUS, "intra": {**PCIE_GPUS["intra"], "protocols": {"LL128": {"latency": "1 us", "efficiency": 0.9}}}}
    assert nccl.ll128_enabled(coll_comm(listed).world.topology.spec)


def test_small_messages_on_a_dgx_cost_tens_of_microseconds():
    (row,) = rows(A100, ["nccl_ring"], [8])
    assert 20e-6 < row["time_s"] < 100e-6


def test_nvls_is_a_candidate_only_where_the_switch_reduces():
    assert "nvls" in nccl.candidates(coll_comm(H100))
    assert "nvls" not in nccl.candidates(coll_comm(A100))
    # Across nodes NCCL runs NVLSTree (in-switch inside each node, a tree per rail), and NVLS
    # itself only where the network reduces too (tuning.cc disables it at nNodes > 1 without CollNet).
    across = nccl.candidates(coll_comm({"preset": "dgx-h100", "nodes": 2}))
    assert "nvls_tree" in across and "nvls" not in across
    assert "nvls_tree" not in nccl.candidates(coll_comm(H100))


def test_in_switch_reduction_beats_the_ring_bound_on_h100():
    """busbw counts 2(p-1)/p n bytes per GPU; NVLS moves n(p+1)/p, so its busbw exceeds the link's."""
    ring, nvls = rows(H100, ["nccl_ring", "nvls"], [GiB])
    ring_bound = 450 * 0.82
    assert ring["busbw_GBps"] < ring_bound < nvls["busbw_GBps"]
    assert nccl.best(coll_comm(H100), GiB).algorithm == "nvls"


def test_multi_node_ring_uses_every_nic():
    """One channel per NIC: 2 DGX A100 nodes reach 8 NICs x 24 GB/s of busbw (maintainers' figure)."""
    (row,) = rows(A100x2, ["nccl_ring"], [GiB])
    assert row["busbw_GBps"] == pytest.approx(8 * 24, rel=0.05)
    assert len(nccl.ring_orders(coll_comm(A100x2))) == 8


def test_tree_is_a_chain_in_each_node_and_a_tree_between_heads():
    comm = coll_comm({"preset": "dgx-a100", "nodes": 4})
    tree0, tree1 = nccl.tree_links(comm)
    assert tree0[0] == (None, [1, 16])  # head of node 0: chain child 1, node 2's head
    assert tree0[5] == (4, [6])
    heads = {r for r in range(32) if r % 8 == 0}
    assert {tree0[h][0] for h in heads} - heads == {None}
    assert tree1[0][0] is not None and tree1[0][0] in heads


def test_tree_wins_small_messages_on_many_nodes_and_ring_large_ones():
    comm = coll_comm({"preset": "dgx-a100", "nodes": 8})
    assert nccl.best(comm, 8 * KiB).algorithm == "nccl_tree"
    assert nccl.best(comm, GiB).algorithm == "nccl_ring"


@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reduce_scatter"])
@pytest.mark.parametrize("topology", [A100x2, H100, {"preset": "dgx-h100", "nodes": 2, "placement": "round_robin"}])
def test_gpu_algorithms_give_numpys_answer(topology, collective):
    names = nccl.candidates(coll_comm(topology), collective)
    result = rows(topology, names, [16 * 1000 + 64, 3 * MiB], payload="data", collective=collective)
    assert [r["verified"] for r in result] == [True] * len(result)


@pytest.mark.parametrize("collective", ["allgather", "reduce_scatter"])
def test_ring_allgather_and_reduce_scatter_use_every_nic_too(collective):
    ring, mpi_ring = rows(A100x2, ["nccl_ring", "ring"], [GiB], collective=collective)
    assert ring["busbw_GBps"] == pytest.approx(8 * 24, rel=0.05)
    assert mpi_ring["busbw_GBps"] == pytest.approx(24, rel=0.05)  # one ring, one NIC per node crossing


def test_the_nccl_rule_set_chooses_what_the_tuner_finds_fastest():
    comm = coll_comm(H100)
    comm.world.selector = "nccl"
    for nbytes in (8, 64 * KiB, 64 * MiB):
        chosen = dispatch.resolve(comm, "allreduce", None, nbytes, SUM)
        assert chosen.name == nccl.best(comm, nbytes).algorithm
    assert dispatch.resolve(comm, "allgather", None, MiB, SUM).name == "nccl_ring"
    # NCCL runs broadcast on its rings and alltoall as grouped send/recv; the rest follow MPICH.
    assert dispatch.resolve(comm, "bcast", None, MiB, SUM).name == "nccl_ring"
    assert dispatch.resolve(comm, "alltoall", None, MiB, SUM).name == "nccl_p2p"
    assert dispatch.resolve(comm, "gather", None, MiB, SUM).name == select.MPICH_RULES["gather"](8, MiB, SUM, 4)


def test_a_call_at_lls_pace_across_nodes_says_so_in_the_notes():
    """A call on LL across nodes at 80 % or more of NCCL's cap on LL (llMaxBws) is named in the notes.

    Its NICs are far below their rate, so link figures alone would blame latency; the note names
    the pace. On 4 x dgx-h100 the ring's LL calls are paced by the proxy threads' posts instead
    (about 15 GB/s of the 20.4 allowed), so they get no note, while a call at 90 % of the cap
    would. One node (no cap) and the other protocols never get one.
    """
    result = run_scenario(scenario(H100x4, ["nccl_ring", "auto"], [MiB, 16 * MiB], collective="allgather"))
    assert {r["bytes"]: r["protocol"] for r in result.rows} == {MiB: "LL", 16 * MiB: "LL128"}
    assert {r["algorithm"] for r in result.rows} == {"nccl_ring"}
    assert all(r["busbw_GBps"] < 0.8 * 20.4 for r in result.rows if r["protocol"] == "LL")
    assert not [n for n in result.notes if "LL's pace" in n]
    comm = coll_comm(H100x4)
    cap = nccl.ll_max_busbw(comm.world.topology.spec, 4)
    assert cap == 20.4e9
    note = nccl.ll_pace_note(comm, "allreduce/nccl_ring 1 MiB on 32 ranks", "LL", 0.9 * cap)
    assert note.startswith("allreduce/nccl_ring 1 MiB on 32 ranks runs at LL's pace across nodes: 18.36 GB/s")
    assert "of the 20.4 GB/s NCCL allows LL across 4 nodes" in note
    assert nccl.ll_pace_note(comm, "x", "LL", 0.7 * cap) is None
    assert nccl.ll_pace_note(comm, "x", "LL128", 0.9 * cap) is None
    assert nccl.ll_pace_note(coll_comm(H100), "x", "LL", 0.9 * cap) is None
