"""The fair share's shortcuts change nothing but its cost.

Two shortcuts of mpisim/network (fairshare.py, "Two flows"; completions.py, callers told in
place) must give the very floats and order of the general code: a ring of rendezvous messages
whose ranks drift apart (uneven blocks, shared-memory and network hops in one ring, the
``ib-hdr`` preset's MPI parameters) is run with each shortcut and with it switched off, and the
end time, every link's busy time and bytes, and the solver's counters must be identical.
"""

from __future__ import annotations

import numpy as np
import pytest

import mpisim.network.completions as completions
from mpisim.engine.sim import Simulation
from mpisim.engine.trace import Tracer
from mpisim.mpi import MpiConfig, SizePayload, World
from mpisim.network.fairshare import FairShareNetwork
from mpisim.network.presets import load_preset
from mpisim.network.topology import TopologySpec, build_topology
from mpisim.scenario.load import apply_overrides

RANKS, PER_NODE, STEPS, COUNT = 64, 32, 12, 3_000_000


def _ring() -> tuple:
    raw = load_preset("ib-hdr")
    raw.pop("mpi", None)
    raw = apply_overrides(raw, {"nodes": RANKS // PER_NODE, "ranks_per_node": PER_NODE})
    topology = build_topology(TopologySpec.from_dict(raw, name="ib-hdr"))
    mpi = MpiConfig(eager_limit_intra=4096, eager_limit_inter=12288, header_bytes=64,
                    send_overhead=1e-7, recv_overhead=1e-7)
    sim = Simulation(seed=0, tracer=Tracer(messages=False, spans=False, links=False))
    world = World(sim, topology, FairShareNetwork(sim, topology), mpi)
    size = -(-COUNT // RANKS)  # MPICH's ring cut: the last block shorter, so the ranks drift apart
    blocks = [SizePayload(max(0, min(size, COUNT - size * i)), np.float32) for i in range(RANKS)]

    def program(comm):
        r = comm.rank
        for k in range(STEPS):
            yield from comm.sendrecv(blocks[(r - k - 1) % RANKS], dest=(r + 1) % RANKS, source=(r - 1) % RANKS)

    world.launch(program)
    world.run()
    net = world.network
    result = (world.env.now, list(net._busy_time), list(net.link_bytes), net.rates_recomputed,
              net.one_level_solves, net.flows_finished)
    return result, world.events_processed


def test_two_flow_components_solved_as_the_general_walk_would(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = []
    pair = FairShareNetwork._solve_pair

    def counted(self, seed, stamp, now):
        solved = pair(self, seed, stamp, now)
        taken.append(solved)
        return solved

    # Every rate set, in order (flow, share, time): the shortcut's rates must be the walk's, bit for bit
    # (a slip of the last place in a control message's rate can vanish from the end time).
    rates: list[tuple] = []
    set_rates = FairShareNetwork._set_rates

    def logged(self, flows, share, now):
        rates.append((tuple(flow.seq for flow in flows), share, now))
        set_rates(self, flows, share, now)

    monkeypatch.setattr(FairShareNetwork, "_set_rates", logged)
    monkeypatch.setattr(FairShareNetwork, "_solve_pair", counted)
    fast, _ = _ring()
    fast_rates, rates[:] = list(rates), []
    assert any(taken), "the ring made no two-flow component: the test proves nothing"
    monkeypatch.setattr(FairShareNetwork, "_solve_pair", lambda self, seed, stamp, now: False)
    walked, _ = _ring()
    assert fast == walked
    assert fast_rates == rates


def test_callers_told_in_place_change_nothing_but_the_event_count(monkeypatch: pytest.MonkeyPatch) -> None:
    in_place, events = _ring()
    monkeypatch.setattr(completions, "normal_next", lambda env: False)
    queued, queued_events = _ring()
    assert in_place == queued
    assert events < queued_events


def test_two_flow_components_with_a_flow_ending_solved_as_the_general_walk_would(monkeypatch: pytest.MonkeyPatch) -> None:
    """A flow's last bytes land while its partner's start asks for a solve: the pair shortcut
    completes it and gives the other its bottleneck, as the walk's "one flow left" does."""
    ends = []
    pair_ends = FairShareNetwork._pair_ends

    def counted(self, pair, links, stamp, now):
        ends.append(now)
        pair_ends(self, pair, links, stamp, now)

    rates: list[tuple] = []
    set_rates = FairShareNetwork._set_rates

    def logged(self, flows, share, now):
        rates.append((tuple(flow.seq for flow in flows), share, now))
        set_rates(self, flows, share, now)

    monkeypatch.setattr(FairShareNetwork, "_set_rates", logged)
    monkeypatch.setattr(FairShareNetwork, "_pair_ends", counted)
    fast, _ = _ring()
    fast_rates, rates[:] = list(rates), []
    assert ends, "no two-flow component had a flow ending: the test proves nothing"
    pair = FairShareNetwork._solve_pair

    def without_ends(self, seed, stamp, now):
        # the shortcut as it was: a component with a flow ending now goes to the general walk
        flows = list(self._flows_on[seed].values())
        for f in flows:
            left = f.remaining - f.rate * (now - f.t_last) if f.rate else f.remaining
            if left <= 1e-9 * f.nbytes:
                return False
        partners = [g for f in flows for j in f.ids for g in self._flows_on[j].values() if g is not f]
        for g in partners:
            left = g.remaining - g.rate * (now - g.t_last) if g.rate else g.remaining
            if left <= 1e-9 * g.nbytes:
                return False
        return pair(self, seed, stamp, now)

    monkeypatch.setattr(FairShareNetwork, "_solve_pair", without_ends)
    walked, _ = _ring()
    assert fast == walked
    assert fast_rates == rates
