"""MPI rings at collective fidelity (mpisim.collectives.fluid.mpi_ring) against the message path.

The step program replayed as a recurrence must give every rank the exit time the message path
gives it -- to rounding where each hop has its links to itself, within 2 % where hops share a
NIC -- and put the same bytes on every link.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mpisim.collectives.fluid.mpi_ring import RingPhase, _Hops, ceil_blocks, even_blocks, hop_bytes, replay
from mpisim.mpi.payload import SizePayload
from mpisim.network.topology import FabricSpec
from tests.conftest import make_world

MPI = {"send_overhead": 1e-6, "recv_overhead": 0.5e-6, "copy_bandwidth": 8e9, "rendezvous_overhead": 1e-6}
RINGS = [("allreduce", "ring"), ("allreduce", "hierarchical"), ("allgather", "ring"), ("reduce_scatter", "ring")]
#: Two nodes of four ranks; the interleaved order makes every hop cross the network, four per NIC.
INTERLEAVED = [0, 4, 1, 5, 2, 6, 3, 7]


def _world(model="fairshare", nodes=2):
    if nodes == 8:
        return make_world(8, model=model, **MPI)
    return make_world(8, ranks_per_node=4, intra=FabricSpec("shm", 20e9, 0.3e-6), model=model, **MPI)


def _exits(fidelity, collective, algorithm, nbytes, *, order=None, late=0.0, model="fairshare", nodes=2):
    world = _world(model, nodes)
    world.fidelity = fidelity
    import mpisim.collectives  # noqa: F401  (installs the collective runner)

    def program(comm):
        group = comm.sub(order) if order else comm
        if comm.rank == 5:
            yield from comm.compute(late)
        yield from getattr(group, collective)(SizePayload(nbytes // 4, np.dtype(np.float32)), algorithm=algorithm)
        return comm.now

    procs = world.launch(program)
    world.run()
    return [proc.value for proc in procs], list(world.network.link_bytes), world.tracer.message_count


@pytest.mark.parametrize(("collective", "algorithm"), RINGS)
@pytest.mark.parametrize("nbytes", [4096, 2**20, 2**26])
def test_every_rank_leaves_when_it_does_on_the_message_path(collective, algorithm, nbytes):
    """One rank per node, every hop on links of its own: the recurrence is the message path's arithmetic."""
    detailed, _, count_detailed = _exits("message", collective, algorithm, nbytes, nodes=8)
    fast, _, count_fast = _exits("collective", collective, algorithm, nbytes, nodes=8)
    assert fast == pytest.approx(detailed, rel=1e-9)
    assert count_fast == count_detailed


@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reduce_scatter"])
@pytest.mark.parametrize("nbytes", [2**20, 2**26])
def test_fast_and_slow_hops_in_one_ring(collective, nbytes):
    """Four ranks per node: shared-memory hops and two network hops. Above the eager limit a
    sender waits for its receiver, and every rank leaves as on the message path."""
    detailed = _exits("message", collective, "ring", nbytes)[0]
    fast = _exits("collective", collective, "ring", nbytes)[0]
    assert fast == pytest.approx(detailed, rel=1e-9)


def test_eager_senders_running_ahead_of_a_slow_hop():
    """Below the eager limit the ranks before a network hop run ahead and queue messages on it.

    The step program sends them through the hop one after the other, as one connection
    delivers them; the message path lets queued messages of one pair share the hop at once
    (processor sharing), so each lands as late as the last. At 4 KiB the call ends 8 % sooner
    here, and single ranks' exits differ by up to a fifth; with every message alone on its hop
    (the other tests) the two agree.
    """
    detailed = _exits("message", "allgather", "ring", 4096)[0]
    fast = _exits("collective", "allgather", "ring", 4096)[0]
    assert max(detailed) * 0.9 < max(fast) <= max(detailed)


@pytest.mark.parametrize("nbytes", [2**20, 2**26])
def test_rings_running_at_once_on_one_nic(nbytes):
    """The hierarchical allreduce's four cross-node rings share each node's NIC."""
    detailed = _exits("message", "allreduce", "hierarchical", nbytes)[0]
    fast = _exits("collective", "allreduce", "hierarchical", nbytes)[0]
    assert fast == pytest.approx(detailed, rel=0.02)


@pytest.mark.parametrize("nbytes", [4096, 2**20, 2**26])
def test_a_late_rank_holds_the_ring_back_as_on_the_message_path(nbytes):
    detailed = _exits("message", "allreduce", "ring", nbytes, late=300e-6)[0]
    fast = _exits("collective", "allreduce", "ring", nbytes, late=300e-6)[0]
    assert min(fast) > 300e-6
    assert fast == pytest.approx(detailed, rel=0.01)


@pytest.mark.parametrize(("model", "tolerance"), [("fairshare", 0.02), ("analytic", 0.08)])
@pytest.mark.parametrize("nbytes", [2**20, 2**26])
def test_hops_sharing_a_nic_share_it(model, tolerance, nbytes):
    """Every hop crosses the network, four on each NIC: each gets a quarter of it.

    On ``analytic`` the message path serves transfers that reach a link at different instants
    one after the other, so the ranks whose block went first start their next step early; the
    step program shares the link between the four as fair share does (up to 7 % slower).
    """
    detailed = _exits("message", "allreduce", "ring", nbytes, order=INTERLEAVED, model=model)[0]
    fast = _exits("collective", "allreduce", "ring", nbytes, order=INTERLEAVED, model=model)[0]
    alone = _exits("collective", "allreduce", "ring", nbytes, order=list(range(8)), model=model)[0]
    assert max(fast) > 1.5 * max(alone)  # four hops on each NIC: the sharing shows
    assert fast == pytest.approx(detailed, rel=tolerance)


def test_links_carry_the_data_bytes_of_the_message_path():
    """The handshake's headers are the only difference (the direct path sends none)."""
    nbytes = 2**20  # every block above the eager limit: an RTS, a CTS and a FIN of 64 B per message
    _, links_detailed, count = _exits("message", "allreduce", "ring", nbytes, order=INTERLEAVED)
    _, links_fast, _ = _exits("collective", "allreduce", "ring", nbytes, order=INTERLEAVED)
    world = _world()
    hops = [len(world.topology.route(a, b).links) for a, b in zip(INTERLEAVED, INTERLEAVED[1:] + INTERLEAVED[:1], strict=True)]
    assert len(set(hops)) == 1  # every hop crosses the same number of links
    headers = np.array(links_detailed) - np.array(links_fast)
    assert sum(links_fast) > 0 and np.all(headers >= 0)
    assert headers.sum() == count * 3 * 64 * hops[0]


def test_the_steady_state_shortcut_is_the_step_by_step_answer():
    """Adding the period for the remaining steps equals replaying them one by one (max-plus)."""
    rng = np.random.default_rng(7)
    p = 16
    hops = _Hops(latency=rng.uniform(1e-6, 3e-6, p), beta=rng.uniform(1e-10, 3e-10, p),
                 eager_limit=np.full(p, 65536), rts=rng.uniform(1e-6, 2e-6, p), cts=rng.uniform(1e-6, 2e-6, p),
                 rendezvous_overhead=np.full(p, 1e-6))
    start = rng.uniform(0, 5e-6, p)
    for block in (1024, 2**20):
        blocks = np.full(p, block)
        phases = [RingPhase(p - 1, 1, True), RingPhase(p - 1, 0, False)]
        one_by_one = [RingPhase(1, phase.send_shift + k, phase.reduces) for phase in phases for k in range(phase.steps)]
        args = (1e-6, 0.5e-6, 1 / 8e9, 1e-10)
        assert replay(start, blocks, phases, {1: hops}, *args) == pytest.approx(
            replay(start, blocks, one_by_one, {1: hops}, *args), rel=1e-12)


@pytest.mark.parametrize("p", [1, 2, 3, 8, 17])
def test_hop_bytes_sum_each_hops_blocks(p):
    blocks = np.random.default_rng(p).integers(0, 10_000, p)
    for phase in (RingPhase(p - 1, 1, True), RingPhase(p - 1, 0, False), RingPhase(p - 1, -1, False)):
        by_step = sum((blocks[(np.arange(p) - k - phase.send_shift) % p] for k in range(phase.steps)),
                      np.zeros(p, dtype=np.int64))
        assert list(hop_bytes(blocks, [phase])) == list(by_step)


@pytest.mark.parametrize("late", [0.0, 40e-6])
@pytest.mark.parametrize("p", [8, 13])
def test_a_dissemination_barrier_is_a_ring_program_with_growing_distances(p, late):
    """Rounds at distance 1, 2, 4, ... of empty messages: every rank leaves as on the message path."""

    def exits(fidelity):
        world = make_world(p, **MPI) if p % 4 else _world()
        world.fidelity = fidelity
        import mpisim.collectives  # noqa: F401  (installs the collective runner)

        def program(comm):
            if comm.rank == 5:
                yield from comm.compute(late)
            yield from comm.barrier(algorithm="dissemination")
            return comm.now

        procs = world.launch(program)
        world.run()
        return [proc.value for proc in procs], world.tracer.message_count

    (detailed, count_detailed), (fast, count_fast) = exits("message"), exits("collective")
    assert fast == pytest.approx(detailed, rel=1e-9)
    assert count_fast == count_detailed
    assert min(fast) >= late


@given(count=st.integers(0, 5000), parts=st.integers(1, 200))
def test_block_sizes_without_the_blocks(count, parts):
    buf = SizePayload(count, np.dtype(np.float64))
    assert list(ceil_blocks(buf, parts)) == [b.nbytes for b in buf.split_ceil(parts)]
    assert list(even_blocks(buf, parts)) == [b.nbytes for b in buf.split(parts)]
