"""NCCL-style collectives across DGX H100 nodes move the right bytes over the right links.

For every GPU algorithm on 1, 2, 4 and 16 nodes, the bytes each NIC and each NVLink port
carries are derived here from the algorithm's structure alone (rings, channels, trees,
in-switch phases: no simulation), and must equal what the simulated links carried, on both
network models. On both models no link may carry more than its capacity over the collective's
duration (the analytic model's links serve overlapping transfers in turn).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mpisim.collectives import nccl
from mpisim.collectives.nccl.protocols import NCCL_TREE_ALGBW_RATIO, tree_head_sends
from mpisim.collectives.trees import DBT_SEGMENT, double_binary_tree
from mpisim.mpi.payload import SizePayload
from mpisim.scenario import load
from mpisim.scenario.run import new_world_factory
from tests.conftest import run_program

MiB = 2**20
Q = 8  # GPUs (and NICs) per dgx-h100 node


def _world(nodes: int, model: str, fidelity: str = "message"):
    scenario = load({"units": "SI", "topology": {"preset": "dgx-h100", "nodes": nodes}, "fidelity": fidelity,
                     "network": {"model": model}, "payload": "size",
                     "workload": {"kind": "collective", "collective": "allreduce", "algorithm": "nccl_ring",
                                  "sizes": [8]}})
    new_world, _ = new_world_factory(scenario)
    return new_world()


def _run(world, algorithm: str, nbytes: int):
    def program(comm):
        yield from comm.allreduce(SizePayload(nbytes // 4, np.float32), algorithm=algorithm)
        return comm.now
    finish = max(run_program(world, program))
    choice = nccl.tune(world.comm_world(0).coll, algorithm, nbytes)
    return finish, choice.protocol.wire


def _tree_bytes(m: int, node: int, share: int) -> tuple[int, int]:
    """(bytes out, bytes in) of one node's NIC in a double binary tree allreduce of *share* bytes per tree.

    Up: a node sends its tree's share to its parent and receives one from each child; down,
    the other way round. Segments of DBT_SEGMENT bytes, the last one shorter.
    """
    out = inn = 0
    for parent, children in double_binary_tree(m, node):
        up_out = share if parent is not None else 0
        out += up_out + share * len(children)
        inn += share * len(children) + (share if parent is not None else 0)
    return out, inn


def _expected_nic_bytes(algorithm: str, nodes: int, nbytes: int, wire) -> dict[tuple[int, int], tuple[float, float]]:
    """Return {(node, nic): (bytes out, bytes in)} the algorithm must put on each NIC."""
    p = nodes * Q
    expected = {}
    for node in range(nodes):
        for nic in range(Q):
            if algorithm == "nccl_ring":
                # Channel `nic` leaves every node once per step: 2(p-1) blocks of n / (Q p).
                per = 2 * (p - 1) * wire.wire_bytes(nbytes // (Q * p), "inter")
                expected[node, nic] = (per, per)
            elif algorithm == "nccl_tree":
                # Channel `nic`'s two trees cross the network at local rank `nic`, n / (2 Q) each.
                share = nbytes // (2 * Q)
                out, inn = _tree_bytes(nodes, node, share)
                expected[node, nic] = (_wire_segments(out, wire), _wire_segments(inn, wire))
            else:  # nvls: local rank j's reduced block n / Q over rail j's two trees, n / (2 Q) each
                share = nbytes // (2 * Q)
                out, inn = _tree_bytes(nodes, node, share)
                expected[node, nic] = (out, inn)  # Simple protocol between nodes: no inflation
    return expected


def _wire_segments(total: int, wire) -> int:
    """Wire bytes of *total* payload bytes sent as whole DBT_SEGMENT segments (all shares here divide)."""
    assert total % DBT_SEGMENT == 0
    return (total // DBT_SEGMENT) * wire.wire_bytes(DBT_SEGMENT, "inter")


CASES = [(algorithm, nodes) for algorithm in nccl.ALGORITHMS for nodes in (1, 2, 4, 16)
         if not (algorithm == "nccl_ring" and nodes == 16)]  # the 16-node ring: benchmarks (2M messages)


@pytest.mark.parametrize("model", ["fairshare", "analytic"])
@pytest.mark.parametrize(("algorithm", "nodes"), CASES)
def test_every_nic_carries_the_algorithms_cross_node_bytes(algorithm, nodes, model):
    nbytes = 16 * MiB * Q if algorithm != "nccl_ring" else 64 * MiB
    world = _world(nodes, model)
    elapsed, wire = _run(world, algorithm, nbytes)
    stats = world.network.link_stats()
    if nodes == 1:
        assert not [name for name in stats if ".nic" in name], "one node: no NIC may carry anything"
    else:
        expected = _expected_nic_bytes(algorithm, nodes, nbytes, wire)
        for (node, nic), (out, inn) in expected.items():
            sent = sum(s.nbytes for name, s in stats.items() if name.startswith(f"node{node}.nic{nic}->"))
            got = sum(s.nbytes for name, s in stats.items() if name.endswith(f"->node{node}.nic{nic}"))
            assert sent == pytest.approx(out, rel=1e-6), (node, nic, "out")
            assert got == pytest.approx(inn, rel=1e-6), (node, nic, "in")
    _assert_within_capacity(stats, elapsed)


@pytest.mark.parametrize("model", ["fairshare", "analytic"])
@pytest.mark.parametrize(("algorithm", "nodes"), [(a, n) for a in ("nccl_tree", "nvls") for n in (2, 4, 16)])
def test_at_collective_fidelity_trees_put_the_same_bytes_on_every_nic(algorithm, nodes, model):
    """The trees as one flow per edge (mpisim.collectives.fluid.tree) carry the algorithm's bytes too."""
    nbytes = 16 * MiB * Q
    world = _world(nodes, model, "collective")
    elapsed, wire = _run(world, algorithm, nbytes)
    stats = world.network.link_stats()
    for (node, nic), (out, inn) in _expected_nic_bytes(algorithm, nodes, nbytes, wire).items():
        sent, got = _nic_bytes(stats, node, nic)
        assert sent == pytest.approx(out, rel=1e-6), (node, nic, "out")
        assert got == pytest.approx(inn, rel=1e-6), (node, nic, "in")
    _assert_within_capacity(stats, elapsed)


@pytest.mark.parametrize("nodes", [1, 2])
def test_ring_nvlink_ports_carry_the_channels_that_stay_in_the_node(nodes):
    """A GPU sends over NVLink in every channel whose next rank is on its node: Q-1 of Q across nodes."""
    nbytes = 64 * MiB
    world = _world(nodes, "fairshare")
    _, wire = _run(world, "nccl_ring", nbytes)
    stats = world.network.link_stats()
    p = nodes * Q
    channels = Q if nodes > 1 else 1
    staying = channels - 1 if nodes > 1 else 1
    per_channel = 2 * (p - 1) * wire.wire_bytes(nbytes // (channels * p), "intra")
    for rank in range(p):
        node = rank // Q
        sent = stats[f"rank{rank}->node{node}.nvswitch"].nbytes
        assert sent == pytest.approx(staying * per_channel, rel=1e-6)


def test_nvls_across_nodes_moves_a_qth_of_the_vector_per_nic_each_way():
    """NVLS + tree: each NIC carries n/Q each way summed over its two trees, as NCCL's NVLS_TREE."""
    nbytes, nodes = 16 * MiB * Q, 4
    world = _world(nodes, "fairshare")
    _run(world, "nvls", nbytes)
    stats = world.network.link_stats()
    total_out = sum(s.nbytes for name, s in stats.items() if ".nic" in name.split("->")[0])
    # Summed over nodes, each tree's edges carry share once up and once down: 2 (m-1) edges x share.
    share = nbytes // (2 * Q)
    assert total_out == pytest.approx(Q * 2 * 2 * (nodes - 1) * share, rel=1e-9)
    assert math.isclose(total_out / (nodes * Q), nbytes / Q * 2 * (nodes - 1) / nodes, rel_tol=1e-9)


# --- Alltoall (grouped send/recv, PXN), broadcast, allgather and reduce-scatter across nodes.


def _run_collective(world, collective: str, algorithm: str, count: int, root: int = 0):
    """Run one size-only *collective* of *count* float32 per rank; return the last rank's finish time."""
    def program(comm):
        buf = SizePayload(count, np.float32)
        if collective == "bcast":
            yield from comm.bcast(buf, root=root, algorithm=algorithm)
        elif collective in ("allgather", "alltoall"):
            yield from getattr(comm, collective)(buf, algorithm=algorithm)
        else:
            yield from getattr(comm, collective)(buf, algorithm=algorithm)
        return comm.now
    return max(run_program(world, program))


def _nic_bytes(stats, node: int, nic: int) -> tuple[int, int]:
    sent = sum(s.nbytes for name, s in stats.items() if name.startswith(f"node{node}.nic{nic}->"))
    got = sum(s.nbytes for name, s in stats.items() if name.endswith(f"->node{node}.nic{nic}"))
    return sent, got


def _assert_within_capacity(stats, elapsed):
    for name, s in stats.items():
        assert s.nbytes <= s.capacity * elapsed * (1 + 1e-9), f"{name} carried more than its capacity allows"


@pytest.mark.parametrize("model", ["fairshare", "analytic"])
@pytest.mark.parametrize("nodes", [1, 2, 4, 16])
def test_alltoall_leaves_every_node_through_the_destinations_rail(nodes, model):
    """NCCL alltoall with PXN: NIC j carries the q(m-1) blocks for and from local rank j of the other nodes.

    A GPU's NVLink port carries its q-1 blocks for its own node and the (q-1)(m-1) blocks it
    hands to the GPUs on the other rails (PXN relays), and receives as many; no byte crosses
    a rail through the spine.
    """
    p = nodes * Q
    block = 64 * 1024  # bytes per peer: Simple protocol (above NCCL's 16 KiB LL threshold)
    world = _world(nodes, model)
    elapsed = _run_collective(world, "alltoall", "nccl_p2p", p * block // 4)
    stats = world.network.link_stats()
    assert not [name for name, s in stats.items() if "spine" in name and s.nbytes], "a block crossed rails"
    for node in range(nodes):
        for nic in range(Q):
            sent, got = _nic_bytes(stats, node, nic)
            assert sent == Q * (nodes - 1) * block, (node, nic, "out")
            assert got == Q * (nodes - 1) * block, (node, nic, "in")
    for rank in range(p):
        node = rank // Q
        through = (Q - 1) * block + (Q - 1) * (nodes - 1) * block
        assert stats[f"rank{rank}->node{node}.nvswitch"].nbytes == through
        assert stats[f"node{node}.nvswitch->rank{rank}"].nbytes == through
    _assert_within_capacity(stats, elapsed)


def _chain_wire_bytes(share_count: int, protocol) -> int:
    """Wire bytes of one channel's share of a broadcast, sent in the protocol's steps (as nccl_bcast cuts it)."""
    from mpisim.collectives.bcast import segments
    from mpisim.collectives.nccl.bcast import STEP_BYTES

    pieces = segments(SizePayload(share_count, np.float32), STEP_BYTES[protocol.name])
    return sum(protocol.wire.wire_bytes(piece.nbytes, "inter") for piece in pieces)


@pytest.mark.parametrize("model", ["fairshare", "analytic"])
@pytest.mark.parametrize("nodes", [1, 2, 4, 16])
def test_broadcast_crosses_every_nic_once_per_channel(nodes, model):
    """Ring broadcast from rank 0: channel c leaves every node through NIC c and enters through NIC c+1.

    The chain is channel c's ring started at the root, so it uses every ring edge but the one
    into the root: in the last channel (whose ring enters node 0 at rank 0) the last node's
    NIC q-1 sends nothing and node 0's NIC 0 receives nothing.
    """
    nbytes = Q * 2**20
    world = _world(nodes, model)
    elapsed = _run_collective(world, "bcast", "nccl_ring", nbytes // 4)
    stats = world.network.link_stats()
    if nodes == 1:
        assert not [name for name, s in stats.items() if ".nic" in name and s.nbytes]
        return
    protocol = nccl.tune(world.comm_world(0).coll, "nccl_ring", nbytes, "bcast").protocol
    share = _chain_wire_bytes(nbytes // 4 // Q, protocol)
    for node in range(nodes):
        for nic in range(Q):
            sent, got = _nic_bytes(stats, node, nic)
            assert sent == (0 if (nic == Q - 1 and node == nodes - 1) else share), (node, nic, "out")
            assert got == (0 if (nic == 0 and node == 0) else share), (node, nic, "in")
    _assert_within_capacity(stats, elapsed)


@pytest.mark.parametrize("collective", ["allgather", "reduce_scatter"])
@pytest.mark.parametrize("nodes", [1, 2, 4, 16])
def test_ring_allgather_and_reduce_scatter_use_every_nic(collective, nodes):
    """Each channel's ring crosses out of every node once per step: p-1 blocks of n/(channels p) per NIC each way."""
    p = nodes * Q
    nbytes = p * Q * 4096 * 4  # the whole array (nccl-tests' size); blocks of 16 KiB per channel
    world = _world(nodes, "fairshare")
    count = nbytes // 4 // p if collective == "allgather" else nbytes // 4
    elapsed = _run_collective(world, collective, "nccl_ring", count)
    stats = world.network.link_stats()
    if nodes == 1:
        assert not [name for name, s in stats.items() if ".nic" in name and s.nbytes]
        return
    wire = nccl.tune(world.comm_world(0).coll, "nccl_ring", nbytes, collective).protocol.wire
    per = (p - 1) * wire.wire_bytes(nbytes // (Q * p), "inter")
    for node in range(nodes):
        for nic in range(Q):
            assert _nic_bytes(stats, node, nic) == (per, per), (node, nic)
    _assert_within_capacity(stats, elapsed)


@pytest.mark.parametrize("model", ["fairshare", "analytic"])
def test_send_to_another_node_takes_the_receivers_rail(model):
    """ncclSend from GPU 0 of node 0 to GPU 3 of node 1: over NVLink to GPU 3 of node 0, then rail 3 (PXN)."""
    from mpisim.collectives.nccl import p2p as nccl_p2p

    nbytes = 32 * MiB
    world = _world(2, model)

    def program(comm):
        buf = SizePayload(nbytes // 4, np.float32)
        if comm.rank == 0:
            yield from nccl_p2p.send(comm, buf, dest=Q + 3)
        elif comm.rank == Q + 3:
            yield from nccl_p2p.recv(comm, buf, source=0)
        return comm.now

    finish = run_program(world, program)
    stats = world.network.link_stats()
    used = {name for name, s in stats.items() if s.nbytes}
    assert used == {"rank0->node0.nvswitch", "node0.nvswitch->rank3", "node0.nic3->rail3.leaf0",
                    "rail3.leaf0->node1.nic3"}
    assert {stats[name].nbytes for name in used} == {nbytes}
    # Launch, the protocol's latency, both legs' latency, the bytes at the NIC's rate (its bottleneck).
    topology = world.topology
    route = topology.pxn_route(0, Q + 3)
    simple = nccl.protocols(topology.spec)["Simple"]
    expected = simple.base + simple.wire.latency("inter") + route.latency + nbytes / route.bottleneck
    assert finish[Q + 3] == pytest.approx(expected, rel=1e-12)


def test_alltoall_meets_its_closed_form_on_the_analytic_network():
    """On ``analytic`` the blocks of the most loaded link cross it in turn: base + h + α + L (n/p)β/e.

    One node: GPU i's NVLink port sends its q-1 blocks (L = q-1 over NVLink), all reaching it
    at once: exact. Two nodes: NIC j sends the q(m-1) blocks for local rank j of the other node
    (L = q over a NIC, slower than the NVLink port's q-1 + q blocks); the blocks relayed through
    another GPU reach the NIC a hop later than the NIC's own GPU's, so the NIC starts on the
    first ones earlier and the call ends up to that hop before the closed form.
    """
    from mpisim.collectives.nccl import p2p as nccl_p2p

    for nodes, blocks, link in ((1, Q - 1, "rank0->node0.nvswitch"), (2, Q, "node0.nic7->")):
        world = _world(nodes, "analytic")
        p = nodes * Q
        elapsed = _run_collective(world, "alltoall", "nccl_p2p", p * 65536 // 4)
        comm = world.comm_world(0).coll
        choice = nccl_p2p.choose(comm, p * 65536)
        route = world.topology.pxn_route(0, p - 1)  # a cross-rail block (or, on one node, any)
        kind = world.topology.path_kind(0, p - 1)
        [capacity] = {lk.effective_bandwidth for lk in route.links if lk.name.startswith(link)}
        wire = choice.protocol.wire
        closed_form = choice.protocol.base + wire.latency(kind) + route.latency + blocks * wire.wire_bytes(65536, kind) / capacity
        assert choice.predicted == pytest.approx(closed_form, rel=1e-12)
        if nodes == 1:
            assert elapsed == pytest.approx(closed_form, rel=1e-12)
        else:
            assert closed_form * 0.97 < elapsed <= closed_form * (1 + 1e-12)


@pytest.mark.parametrize("model", ["fairshare", "analytic"])
def test_broadcast_on_one_node_equals_its_closed_form(model):
    """One channel of p hops alike: base + (p-1)(h + α) + ((p-2)s + n)β/e, for each protocol the tuner may pick."""
    from mpisim.collectives.nccl import bcast as nccl_bcast

    for nbytes in (64 * 1024, 8 * MiB, 64 * MiB):
        world = _world(1, model)
        elapsed = _run_collective(world, "bcast", "nccl_ring", nbytes // 4)
        protocol = nccl.tune(world.comm_world(0).coll, "nccl_ring", nbytes, "bcast").protocol
        route = world.topology.route(0, 1)
        wire = protocol.wire
        step = min(nccl_bcast.STEP_BYTES[protocol.name], nbytes)
        beta = wire.wire_bytes(1 << 20, "intra") / (1 << 20) / route.bottleneck
        expected = protocol.base + (Q - 1) * (wire.latency("intra") + route.latency) + ((Q - 2) * step + nbytes) * beta
        assert elapsed == pytest.approx(expected, rel=1e-9), (nbytes, protocol.name)


@pytest.mark.parametrize("model", ["fairshare", "analytic"])
@pytest.mark.parametrize("fidelity", ["message", "collective"])
@pytest.mark.parametrize(("algorithm", "nodes"), [(a, n) for a in ("nccl_ring", "nccl_tree") for n in (2, 4)])
def test_ll_across_nodes_goes_at_nccls_capped_pace_and_the_nics_carry_only_its_bytes(algorithm, nodes, fidelity, model,
                                                                                      monkeypatch):
    """NCCL caps LL's bus bandwidth across nodes (tuning.cc llMaxBws: 39 GB/s on 2 nodes, 20.4 from 3).

    With LL the only protocol, each GPU that sends across nodes is paced: a ring's at the cap /
    channels, so that the ring, which moves at its slowest hop, reaches the cap as its bus
    bandwidth; a tree's head at the cap as a tree's bus bandwidth (algBw = busBw / 2) times the
    busiest head's sends per byte of its channel, / channels (tree_protocol), and it sends no
    faster than that to its parent and children together. The pace is no link: the NICs carry
    LL's two bytes per byte of data and nothing else, and no pace link shows in the link statistics.
    """
    monkeypatch.setattr(nccl.tuner, "PROTOCOLS", ("LL",))  # the tuner tries these
    nbytes = 64 * MiB if algorithm == "nccl_ring" else 4 * MiB * Q
    world = _world(nodes, model, fidelity)
    elapsed, wire = _run(world, algorithm, nbytes)
    assert wire.name == "LL" and wire.efficiency_inter == 0.5
    p = nodes * Q
    cap = nccl.ll_max_busbw(world.topology.spec, nodes)
    stats = world.network.link_stats()
    if algorithm == "nccl_ring":
        assert 2 * (p - 1) / p * nbytes / elapsed == pytest.approx(cap, rel=0.02)
    else:  # the busiest head: its NIC's bytes out are two per byte of data it sent across
        busiest = max(_nic_bytes(stats, node, nic)[0] for node in range(nodes) for nic in range(Q)) / 2
        pace = cap * NCCL_TREE_ALGBW_RATIO * tree_head_sends(world.comm_world(0).coll) / Q
        assert elapsed >= busiest / pace
        # ... and the pace is what binds: the rest is the pipeline's fill, and on the message
        # path a head's up and down streams waiting on each other (+17 % on 2 nodes).
        assert elapsed < 1.25 * busiest / pace
    assert not [name for name in stats if name.startswith("pace")]
    for (node, nic), (out, inn) in _expected_nic_bytes(algorithm, nodes, nbytes, wire).items():
        sent, got = _nic_bytes(stats, node, nic)
        assert sent == pytest.approx(out, rel=1e-6), (node, nic, "out")
        assert got == pytest.approx(inn, rel=1e-6), (node, nic, "in")
    _assert_within_capacity(stats, elapsed)


@pytest.mark.parametrize("model", ["fairshare", "analytic"])
@pytest.mark.parametrize("nodes", [2, 4])
def test_ll_broadcast_across_nodes_goes_at_nccls_capped_pace(nodes, model, monkeypatch):
    """NCCL caps LL's bus bandwidth on every ring, broadcast's too: its busbw (n / time) is the cap."""
    monkeypatch.setattr(nccl.tuner, "PROTOCOLS", ("LL",))  # the tuner tries these
    nbytes = 64 * MiB
    world = _world(nodes, model)
    elapsed = _run_collective(world, "bcast", "nccl_ring", nbytes // 4)
    assert nccl.tune(world.comm_world(0).coll, "nccl_ring", nbytes, "bcast").protocol.name == "LL"
    cap = nccl.ll_max_busbw(world.topology.spec, nodes)
    assert nbytes / elapsed <= cap
    assert nbytes / elapsed == pytest.approx(cap, rel=0.04)  # the rest: the chain's fill, 31 hops on 4 nodes
