"""NCCL's proxy thread: one CPU thread per GPU posts every network step of every channel (mpisim.mpi.wire, "proxy").

Closed forms on a two-rank world (each rank its own node), NCCL's channel rule (src/enqueue.cc),
and the fabric's latency across nodes: on every path through the network it is paid at least
once per crossing that the call cannot overlap, so a slower network is never faster and a
latency grown by d grows the call by at least d.
"""

from __future__ import annotations

import numpy as np
import pytest
import simpy

from mpisim.collectives import nccl
from mpisim.collectives.nccl.protocols import nccl_channels
from mpisim.engine.events import Call
from mpisim.mpi.payload import SizePayload
from mpisim.mpi.proxy import ProxyThread
from mpisim.mpi.wire import Wire
from mpisim.scenario import load, run_scenario
from mpisim.scenario.run import new_world_factory
from tests.conftest import make_world, run_program

KiB, MiB = 2**10, 2**20
US = 1e-6


def _two_sends(world, wire, gap=0.0):
    """Rank 0 sends two 1000-byte messages to rank 1 (tags 1 and 2, the second *gap* s later)."""

    def program(comm):
        wired = comm.coll.with_wire(wire)
        if comm.rank == 0:
            first = wired.isend(SizePayload(1000, np.uint8), dest=1, tag=1)
            if gap:
                yield from comm.compute(gap, "gap")
            yield from wired.waitall([first, wired.isend(SizePayload(1000, np.uint8), dest=1, tag=2)])
            return None
        yield from wired.recv(source=0, tag=1)
        t1 = comm.now
        yield from wired.recv(source=0, tag=2)
        return t1, comm.now

    return run_program(world, program)[1]


def test_the_senders_proxy_posts_one_message_after_the_other():
    """Two messages posted at once: the second waits for the proxy's 2 us on the first (k = 1: no extra posts).

    Same-instant posts are served in the order of their connections (tag 1's, then tag 2's).
    """
    world = make_world(2, alpha=1e-6, bandwidth=1e9)
    wire = Wire("LL128", latency_inter=4 * US, proxy_send=2 * US)
    t1, t2 = _two_sends(world, wire)
    assert t1 == pytest.approx(4 * US + 1 * US + 1000 / 1e9, rel=1e-12)
    assert t2 == pytest.approx(2 * US + 4 * US + 1 * US + 1000 / 1e9, rel=1e-12)


def test_a_rank_posting_faster_than_its_proxy_is_paced_by_it():
    """Messages posted 1 us apart, 2 us of posts each: the thread is the bottleneck, so the n-th
    completes no earlier than its n x 2 us of posts (the thread's throughput is kept)."""
    world = make_world(2, alpha=0.0, bandwidth=1e12)
    wire = Wire("LL128", latency_inter=2 * US, proxy_send=2 * US)
    n = 6

    def program(comm):
        wired = comm.coll.with_wire(wire)
        if comm.rank == 0:
            reqs = []
            for _ in range(n):
                reqs.append(wired.isend(SizePayload(8, np.uint8), dest=1, tag=1))
                yield from comm.compute(1 * US, "gap")
            yield from wired.waitall(reqs)
            return None
        times = []
        for _ in range(n):
            yield from wired.recv(source=0, tag=1)
            times.append(comm.now)
        return times

    times = run_program(world, program)[1]
    # The thread never idles: the n-th post ends at n x 2 us, and the hop's latency holds it.
    assert times == [pytest.approx((i + 1) * 2 * US + 8 / 1e12, rel=1e-9) for i in range(n)]


def test_a_message_standing_for_k_channels_pays_the_other_channels_posts():
    """k = 4 channels of 1 us posts each: alone, a message waits 3 us at the sender and 3 us at the receiver."""
    world = make_world(2, alpha=1e-6, bandwidth=1e9)
    wire = Wire("LL", latency_inter=3 * US, proxy_send=4 * US, proxy_recv=4 * US, proxy_channels=4)
    t1, t2 = _two_sends(world, wire, gap=1e-3)
    lone = 3 * US + 3 * US + 1 * US + 1000 / 1e9  # the send's other posts, then latency, route and bytes
    assert t1 == pytest.approx(lone, rel=1e-12)  # the receive, posted with the send, is done by then
    assert t2 - 1e-3 == pytest.approx(lone, rel=1e-9)


def test_a_receive_not_yet_posted_holds_the_message():
    """The receiver's proxy posts receives in turn from when the steps are sent; a message that lands
    before its receive's posts are done waits for them (the second receive follows the first's 5 us)."""
    world = make_world(2, alpha=0.0, bandwidth=1e12)
    wire = Wire("Simple", latency_inter=0.0, proxy_send=1 * US, proxy_recv=5 * US)
    t1, t2 = _two_sends(world, wire)
    assert t1 == pytest.approx(5 * US, rel=1e-9)
    assert t2 == pytest.approx(10 * US, rel=1e-9)


def test_without_proxy_costs_nothing_changes():
    world = make_world(2, alpha=1e-6, bandwidth=1e9)
    t1, t2 = _two_sends(world, Wire("LL128", latency_inter=4 * US))
    assert t1 == pytest.approx(4 * US + 1 * US + 1000 / 1e9, rel=1e-12)
    assert t2 == pytest.approx(4 * US + 1 * US + 2000 / 1e9, rel=1e-12)  # one connection per tag: they share the link


def _comm(nodes: int, preset: str = "dgx-h100"):
    raw = {"units": "SI", "topology": {"preset": preset, "nodes": nodes}, "payload": "size",
           "workload": {"kind": "collective", "collective": "allreduce", "algorithm": "nccl_ring", "sizes": [8]}}
    new_world, _ = new_world_factory(load(raw))
    return new_world().comm_world(0).coll


def test_nccl_runs_two_channels_per_nic_and_fewer_for_small_calls():
    """enqueue.cc ``while (nBytes < nc * nt * threadThreshold) nc--`` from 2 x 8 NICs (ncclTopoPostset's duplication).

    nt x threshold per channel: LL 512 x 8 x 16 ranks = 64 KiB (a ring), LL128 640 x 8 = 5 KiB,
    Simple 512 x 64 = 32 KiB.
    """
    comm = _comm(2)
    assert nccl_channels(comm, "LL128", 16 * MiB) == 16
    assert nccl_channels(comm, "LL", MiB) == 16
    assert nccl_channels(comm, "LL", MiB - 1) == 15
    assert nccl_channels(comm, "LL", 64 * KiB) == 1
    assert nccl_channels(comm, "LL", 64 * KiB, ring=False) == 16  # a tree's LL threshold is not per rank
    assert nccl_channels(comm, "Simple", 256 * KiB) == 8
    assert nccl_channels(comm, "LL128", 20 * KiB) == 4


def test_a_ring_across_nodes_carries_its_channels_proxy_posts():
    comm = _comm(2)
    table = nccl.protocols(comm.world.topology.spec)
    ring = nccl.ring_protocol(comm, table["Simple"], "allreduce", 64 * MiB)
    # 16 NCCL channels on 8 of mpisim's: 2 each; Simple: isend, then irecv + iflush, 1 us each (Intel hosts).
    assert (ring.wire.proxy_channels, ring.wire.proxy_send, ring.wire.proxy_recv) == (2, pytest.approx(2 * US),
                                                                                        pytest.approx(4 * US))
    one_node = nccl.ring_protocol(_comm(1), table["Simple"], "allreduce", 64 * MiB)
    assert not one_node.wire.proxied("inter")


def _time(algorithm: str, nodes: int, nbytes: int, latency_us: float, fidelity: str = "message") -> dict:
    raw = {"units": "SI", "network": {"model": "fairshare"},
           "topology": {"preset": "dgx-h100", "nodes": nodes, "inter": {"latency": f"{latency_us} us"}},
           "payload": "size", "fidelity": fidelity, "trace": {"messages": False, "spans": False},
           "workload": {"kind": "collective", "collective": "allreduce", "algorithm": algorithm, "sizes": [nbytes]}}
    return run_scenario(load(raw)).rows[0]


@pytest.mark.parametrize("algorithm", ["nccl_ring", "nccl_tree"])
@pytest.mark.parametrize("nodes", [2, 4])
@pytest.mark.parametrize("nbytes", [64 * KiB, MiB, 16 * MiB])
def test_the_fabrics_latency_is_paid_at_least_once_per_unhidden_crossing(algorithm, nodes, nbytes):
    """1 -> 3 us of fabric latency: never faster, and at least 2 us slower per crossing it cannot hide.

    Every rank's result depends on the other nodes' data, so some crossing is on the critical
    path; a tree of one segment (up to 1 MiB) climbs to its root and comes back down: two.
    """
    low, high = _time(algorithm, nodes, nbytes, 1.0), _time(algorithm, nodes, nbytes, 3.0)
    assert low["protocol"] == high["protocol"]
    crossings = 2 if algorithm == "nccl_tree" and nbytes <= MiB else 1
    assert high["time_s"] - low["time_s"] >= crossings * 2 * US * (1 - 1e-9)


def _serve(jobs, order):
    """Submit *jobs* ((instant, work, key), four per instant) to one ProxyThread, each instant's in *order*.

    Returns the (time, key) of each completion, in the order the callbacks ran.
    """
    env = simpy.Environment()
    thread = ProxyThread(env)
    done = []
    by_instant = {}
    for job in jobs:
        by_instant.setdefault(job[0], []).append(job)
    for instant, group in by_instant.items():
        Call(env, lambda g: [thread.submit(work, key, lambda k: done.append((env.now, k)), key)
                             for _, work, key in g], [group[i] for i in order], instant)
    env.run()
    return done


@pytest.mark.parametrize("order", [(0, 1, 2, 3), (3, 2, 1, 0), (1, 3, 0, 2), (2, 0, 3, 1)])
def test_same_instant_posts_in_any_order_complete_at_the_same_times(order):
    """The proxy thread's answer does not depend on the order of posts made at one instant
    (mpisim.mpi.proxy): completion times and the order callbacks run in."""
    jobs = [(0.0, 2 * US, (0, "a")), (0.0, 4 * US, (1, "b")), (0.0, 2 * US, (0, "c")), (0.0, 1 * US, (1, "d")),
            (3 * US, 2 * US, (0, "e")), (3 * US, 1 * US, (1, "f")), (3 * US, 3 * US, (0, "g")), (3 * US, 1 * US, (0, "h"))]
    done = _serve(jobs, order)
    # First come first served by instant, then by key: a c b d (posted at 0) e g h f (at 3 us).
    assert [key[1] for _, key in done] == list("acbdeghf")
    assert [t for t, _ in done] == pytest.approx([x * US for x in (2, 4, 8, 9, 11, 14, 15, 16)])


@pytest.mark.parametrize("algorithm", ["nccl_ring", "nccl_tree"])
def test_tracing_does_not_move_a_proxied_collective(algorithm):
    """Tracing (spans, message records) changes the order same-instant events are processed in, never the time.

    On the message path (``fidelity: message``; under ``auto``, ``trace.messages`` also chooses the path).
    """
    def run(spans: bool) -> list[float]:
        raw = {"units": "SI", "topology": {"preset": "dgx-h100", "nodes": 3}, "payload": "size", "fidelity": "message",
               "trace": {"messages": spans, "spans": spans},
               "workload": {"kind": "collective", "collective": "allreduce", "algorithm": algorithm,
                            "sizes": [MiB, 16 * MiB]}}
        return [row["time_s"] for row in run_scenario(load(raw)).rows]

    assert run(True) == run(False)


@pytest.mark.parametrize("late", [None, 0, 1])
def test_posts_at_one_instant_in_either_order_give_the_same_times(late):
    """Two GPUs on two nodes send to each other at t = 0: each proxy gets its own send and the
    peer's receive at one instant. Whichever rank's post the simulator processes first (*late*
    yields once at t = 0 before posting), the times are the same (a first-come queue would serve
    the two posts in that order and move them)."""
    wire = Wire("Simple", latency_inter=2 * US, proxy_send=1 * US, proxy_recv=3 * US)

    def program(comm):
        wired = comm.coll.with_wire(wire)
        if comm.rank == late:
            yield comm.env.timeout(0)
        peer = 1 - comm.rank
        request = wired.isend(SizePayload(1000, np.uint8), dest=peer, tag=1)
        yield from wired.recv(source=peer, tag=1)
        yield from wired.wait(request)
        return comm.now

    times = run_program(make_world(2, alpha=1e-6, bandwidth=1e9), program)
    # Each thread posts its send (1 us) before the peer's receive (3 us): the send's latency,
    # less its one post, runs 1 us, then route and bytes (1 + 1 us); the receive is posted by
    # then. First come, first served in event order gives 4 and 7 us, or 7 and 4.
    assert times == [pytest.approx(4 * US, rel=1e-12)] * 2
