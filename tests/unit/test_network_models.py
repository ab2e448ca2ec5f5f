"""Network models on tiny hand-made topologies, with exact expected times.

Each test builds a fake topology (a dict of routes made with ``Route.through``), starts a few
transfers as SimPy processes and compares the simulated finish times with times computed by
hand: the alpha-beta formula for ``analytic`` (a shared link split equally), max-min fair shares
for ``fairshare``.
A last group checks ``fairshare`` against a naive reference solver that re-solves every flow
at every event.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpisim.engine.sim import Simulation
from mpisim.engine.trace import Tracer
from mpisim.network import fairshare
from mpisim.network.analytic import PACKET_BYTES, AnalyticNetwork
from mpisim.network.fairshare import FairShareNetwork
from mpisim.network.links import Link, Route
from mpisim.network.models import make_model, model_names

REL = 1e-12


class FakeTopology:
    """Links plus a fixed table of routes ``(src, dst) -> [link names]``."""

    def __init__(self, links: list[Link], routes: dict[tuple[int, int], list[str]]) -> None:
        self.links = links
        for i, link in enumerate(links):
            link.index = i
        by_name = {link.name: link for link in links}
        self._routes = {pair: Route.through([by_name[n] for n in names]) for pair, names in routes.items()}
        self.size = 1 + max(max(pair) for pair in routes)
        self.route_calls = 0

    def route(self, src: int, dst: int) -> Route:
        self.route_calls += 1
        return self._routes[(src, dst)]


def run_transfers(
    net, transfers: list[tuple[float, int, int, int]], until: float | None = None
) -> list[float]:
    """Issue each ``(t_issue, src, dst, nbytes)`` as a process; return each finish time (nan if not done)."""
    env = net.sim.env
    finish = [math.nan] * len(transfers)

    def one(k: int, t_issue: float, src: int, dst: int, nbytes: int):
        if t_issue > 0:
            yield env.timeout(t_issue)
        yield from net.transfer(src, dst, nbytes)
        finish[k] = env.now

    for k, spec in enumerate(transfers):
        env.process(one(k, *spec))
    net.sim.run(until=until)
    return finish


def line(name: str, bandwidth: float, latency: float = 0.0, efficiency: float = 1.0) -> Link:
    return Link(name, latency, bandwidth, efficiency)


# -- analytic ---------------------------------------------------------------------------------


def path_topology() -> FakeTopology:
    """Rank 0 -> 1 over three links of different latency, bandwidth and efficiency."""
    links = [
        line("up", 12.5e9, 0.6e-6, 0.9),
        line("core", 50e9, 0.3e-6),
        line("down", 12.5e9, 0.6e-6, 0.8),
        line("up1", 12.5e9, 0.6e-6),
    ]
    return FakeTopology(links, {(0, 1): ["up", "core", "down"], (1, 0): ["up1"]})


@pytest.mark.parametrize("nbytes", [1, 4096, 3 * 10**8 + 7])
def test_analytic_time_is_latency_plus_bytes_over_bottleneck(nbytes):
    """T = sum of link latencies + n / (slowest effective bandwidth), to rel 1e-12."""
    net = AnalyticNetwork(Simulation(), path_topology())
    [t] = run_transfers(net, [(0.0, 0, 1, nbytes)])
    assert t == pytest.approx(1.5e-6 + nbytes / (12.5e9 * 0.8), rel=REL)


def test_analytic_messages_of_one_pair_travel_in_order():
    """A second message over the same route starts when the first has arrived; busy = bytes / capacity."""
    topo = path_topology()
    tracer = Tracer(links=True)
    net = AnalyticNetwork(Simulation(tracer=tracer), topo)
    n = 10**6
    core = 50e9
    t = run_transfers(net, [(0.0, 0, 1, n), (1e-6, 0, 1, n)])
    alpha, first = 1.5e-6, 1.5e-6 + n / 10e9
    assert t == [pytest.approx(first, rel=REL), pytest.approx(first + n / 10e9, rel=REL)]
    # The slowest link serves the second message from when it has served the first.
    assert [(r.t_start, r.t_end) for r in tracer.links if r.link == "down"] == [
        (pytest.approx(alpha), pytest.approx(first)), (pytest.approx(first), pytest.approx(first + n / 10e9))]
    stats = net.link_stats()
    assert stats["core"].nbytes == 2 * n
    assert stats["core"].busy_time == pytest.approx(2 * n / core, rel=1e-9)
    assert stats["up1"].nbytes == 0
    assert stats["down"].capacity == pytest.approx(10e9)


def shared_topology() -> FakeTopology:
    """Ranks 0 and 2 send to rank 1; their routes meet on link b (all links 10 GB/s, 1 us)."""
    links = [line("a", 10e9, 1e-6), line("c", 10e9, 1e-6), line("b", 10e9, 1e-6)]
    return FakeTopology(links, {(0, 1): ["a", "b"], (2, 1): ["c", "b"]})


def test_analytic_transfers_reaching_a_link_together_are_served_together():
    """Two senders' bytes reaching one link at the same instant both arrive when it has served both."""
    n = 10**6
    shared = run_transfers(AnalyticNetwork(Simulation(), shared_topology()), [(0.0, 0, 1, n), (0.0, 2, 1, 3 * n)])
    assert shared == [pytest.approx(2e-6 + 4 * n / 10e9, rel=REL)] * 2
    later = run_transfers(AnalyticNetwork(Simulation(), shared_topology()), [(0.0, 0, 1, n), (1e-6, 2, 1, 3 * n)])
    assert later == [pytest.approx(2e-6 + n / 10e9, rel=REL), pytest.approx(2e-6 + 4 * n / 10e9, rel=REL)]
    in_order = run_transfers(AnalyticNetwork(Simulation(), shared_topology()), [(0.0, 0, 1, n), (0.0, 0, 1, 3 * n)])
    assert in_order == [pytest.approx(2e-6 + n / 10e9, rel=REL), pytest.approx(2e-6 + 4 * n / 10e9, rel=REL)]


def test_analytic_independent_transfers_do_not_interact():
    """Transfers over disjoint links each take alpha + n beta, whenever they start."""
    net = AnalyticNetwork(Simulation(), path_topology())
    n = 10**6
    t = run_transfers(net, [(0.0, 0, 1, n), (0.0, 1, 0, n)])
    assert t == [pytest.approx(1.5e-6 + n / 10e9, rel=REL), pytest.approx(0.6e-6 + n / 12.5e9, rel=REL)]


def test_analytic_control_message_does_not_wait_for_bulk_bytes():
    """A 64-byte message passes a megabyte queued on its link; the megabyte arrives that much later."""
    net = AnalyticNetwork(Simulation(), shared_topology())
    n, h = 10**6, 64
    bulk, packet = run_transfers(net, [(0.0, 0, 1, n), (1e-6, 2, 1, h)])
    assert packet == pytest.approx(3e-6 + h / 10e9, rel=REL)
    assert bulk == pytest.approx(2e-6 + (n + h) / 10e9, rel=REL)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 1e-6, 3e-5, 1e-4]), st.sampled_from([(0, 1), (1, 0), (2, 1), (0, 2)]),
                          st.integers(0, 3 * 10**6)), min_size=1, max_size=10))
def test_analytic_never_carries_more_than_a_links_capacity(specs):
    """However transfers overlap, no window of time sees a link carry more bulk bytes than capacity x its length."""
    links = [line("a", 12.5e9, 1e-6), line("b", 25e9, 0.5e-6, 0.9), line("c", 10e9, 2e-6), line("d", 50e9)]
    topo = FakeTopology(links, {(0, 1): ["a", "b"], (1, 0): ["d"], (2, 1): ["c", "b"], (0, 2): ["a", "c"]})
    tracer = Tracer(links=True)
    net = AnalyticNetwork(Simulation(tracer=tracer), topo)
    finish = run_transfers(net, [(t, *pair, n) for t, pair, n in specs])
    for (t, (src, dst), n), done in zip(specs, finish, strict=True):
        route = topo.route(src, dst)
        assert done >= t + route.latency + n / route.bottleneck - 1e-15
    by_link: dict[str, list] = {}
    for r in tracer.links:
        by_link.setdefault(r.link, []).append(r)
    for name, records in by_link.items():
        capacity = next(link.effective_bandwidth for link in links if link.name == name)
        edges = sorted({r.t_start for r in records} | {r.t_end for r in records})
        for lo, hi in itertools.combinations(edges, 2):
            inside = [r.nbytes for r in records if r.t_start >= lo and r.t_end <= hi]
            bulk = sum(n for n in inside if n > PACKET_BYTES)
            # A packet goes ahead of the bulk bytes in service: its own bytes are the only slack.
            assert bulk <= capacity * (hi - lo) * (1 + 1e-9) + 1e-6, f"{name}: {bulk} B in [{lo}, {hi}]"


def test_analytic_zero_bytes_and_self_transfer():
    """Zero bytes cost the latency alone; a rank sending to itself costs nothing and needs no route."""
    topo = path_topology()
    net = AnalyticNetwork(Simulation(), topo)
    t_zero, t_self = run_transfers(net, [(0.0, 0, 1, 0), (0.0, 1, 1, 10**9)])
    assert t_zero == pytest.approx(1.5e-6, rel=REL)
    assert t_self == 0.0
    assert topo.route_calls == 1


# -- fairshare: exact times from max-min shares -----------------------------------------------


def test_fairshare_single_flow_is_alpha_beta():
    net = FairShareNetwork(Simulation(), path_topology())
    n = 3 * 10**8 + 7
    [t] = run_transfers(net, [(0.0, 0, 1, n)])
    assert t == pytest.approx(1.5e-6 + n / 10e9, rel=REL)


def test_two_flows_on_one_link_each_get_half():
    topo = FakeTopology([line("l", 1e9, 2e-6)], {(0, 1): ["l"], (2, 1): ["l"]})
    net = FairShareNetwork(Simulation(), topo)
    n = 5 * 10**6
    t = run_transfers(net, [(0.0, 0, 1, n), (0.0, 2, 1, n)])
    assert t == [pytest.approx(2e-6 + 2 * n / 1e9, rel=REL)] * 2


def test_classic_max_min_example_and_reallocation():
    """Link l1 (10 B/s: A, B) and l2 (4 B/s: A, C).

    Progressive filling: l2 fills first at 4/2 = 2, so A = C = 2 and B = 10 - 2 = 8.
    C (6 B) finishes at t = 3, when A has 14 B left and B 56 B. Now l2 alone would give A 4,
    l1 would give 5 each, so A = 4 (l2 is its bottleneck) and B = 6: A finishes at 3 + 14/4 = 6.5,
    B has 56 - 3.5 * 6 = 35 B left and finishes alone at 6.5 + 35/10 = 10.
    """
    l1 = line("l1", 20.0, efficiency=0.5)  # 10 B/s effective
    l2 = line("l2", 4.0)
    topo = FakeTopology([l1, l2], {(0, 1): ["l1", "l2"], (2, 3): ["l1"], (4, 5): ["l2"]})
    net = FairShareNetwork(Simulation(), topo)
    t_a, t_b, t_c = run_transfers(net, [(0.0, 0, 1, 20), (0.0, 2, 3, 80), (0.0, 4, 5, 6)])
    assert (t_a, t_b, t_c) == (
        pytest.approx(6.5, rel=REL),
        pytest.approx(10.0, rel=REL),
        pytest.approx(3.0, rel=REL),
    )


def star(n_ranks: int, bandwidth: float, latency: float) -> FakeTopology:
    """Every rank has an uplink and a downlink to one switch; routes i -> j are [up_i, down_j]."""
    links = []
    for r in range(n_ranks):
        links += [line(f"up{r}", bandwidth, latency), line(f"down{r}", bandwidth, latency)]
    routes = {(i, j): [f"up{i}", f"down{j}"] for i in range(n_ranks) for j in range(n_ranks) if i != j}
    return FakeTopology(links, routes)


def test_incast_senders_finish_together_with_one_recomputation_per_instant():
    """N-1 senders into rank 0 share its downlink: all finish at 2 alpha + (N-1) S / B.

    The N-1 starts happen at one instant and are solved in one recomputation; so are the
    N-1 simultaneous finishes.
    """
    p, size, bw, lat = 8, 10**6, 12.5e9, 1e-6
    net = FairShareNetwork(Simulation(), star(p, bw, lat))
    transfers = [(0.0, r, 0, size) for r in range(1, p)]
    run_transfers(net, transfers, until=2 * lat + 1e-9)
    assert (net.recomputations, net.rates_recomputed, net.active_flows) == (1, p - 1, p - 1)

    net.sim.run()
    expected = 2 * lat + (p - 1) * size / bw
    assert net.flows_finished == p - 1
    assert net.recomputations == 2
    assert net.sim.now == pytest.approx(expected, rel=REL)


def test_incast_finish_times():
    p, size, bw, lat = 5, 3 * 10**5, 1e9, 2e-6
    net = FairShareNetwork(Simulation(), star(p, bw, lat))
    t = run_transfers(net, [(0.0, r, 0, size) for r in range(1, p)])
    assert t == [pytest.approx(2 * lat + (p - 1) * size / bw, rel=REL)] * (p - 1)


def test_disjoint_flows_do_not_slow_each_other():
    topo = FakeTopology([line("a", 1e9, 1e-6), line("b", 4e9, 3e-6)], {(0, 1): ["a"], (2, 3): ["b"]})
    net = FairShareNetwork(Simulation(), topo)
    t = run_transfers(net, [(0.0, 0, 1, 10**6), (0.0, 2, 3, 10**7)])
    assert t == [pytest.approx(1e-6 + 1e-3, rel=REL), pytest.approx(3e-6 + 2.5e-3, rel=REL)]


def test_full_duplex_directions_are_independent():
    """A cable is two Link objects; traffic 0 -> 1 and 1 -> 0 each get the full bandwidth."""
    topo = FakeTopology(
        [line("0->1", 25e9, 1e-6), line("1->0", 25e9, 1e-6)], {(0, 1): ["0->1"], (1, 0): ["1->0"]}
    )
    net = FairShareNetwork(Simulation(), topo)
    n = 10**8
    t = run_transfers(net, [(0.0, 0, 1, n), (0.0, 1, 0, n)])
    assert t == [pytest.approx(1e-6 + n / 25e9, rel=REL)] * 2


def test_flow_joining_midway_moves_the_first_finish_exactly():
    """A (n B) runs alone at B; at its halfway point flow B (n B) joins.

    From then on both get B/2: A's remaining n/2 takes n/B, so A finishes n/(2B) later than it
    would have alone. B has moved n/2 by then and finishes its other half alone in n/(2B).
    """
    n, bw, lat = 8 * 10**6, 2e9, 1.5e-6
    topo = FakeTopology([line("l", bw, lat)], {(0, 1): ["l"], (2, 1): ["l"]})
    net = FairShareNetwork(Simulation(), topo)
    t_join = n / (2 * bw)  # B becomes active at t_join + lat, when A is exactly half done
    t_a, t_b = run_transfers(net, [(0.0, 0, 1, n), (t_join, 2, 1, n)])
    assert t_a == pytest.approx(t_join + lat + n / bw, rel=REL)
    assert t_b == pytest.approx(t_join + lat + n / bw + n / (2 * bw), rel=REL)


def test_zero_bytes_pay_latency_only_and_self_transfer_is_free():
    topo = path_topology()
    net = FairShareNetwork(Simulation(), topo)
    t_zero, t_self = run_transfers(net, [(0.0, 0, 1, 0), (0.0, 0, 0, 10**9)])
    assert t_zero == pytest.approx(1.5e-6, rel=REL)
    assert t_self == 0.0
    assert (net.flows_started, net.recomputations, topo.route_calls) == (0, 0, 1)


def test_start_in_one_component_leaves_the_other_untouched():
    """Flows A, B on link x (100 B/s) and C on link y (10 B/s) form two components.

    A and B get 50 B/s each, C 10 B/s. Flow D (150 B) joins x at t = 1: only x's three flows
    are re-solved (100/3 each); C keeps its rate and ends at 50/10 = 5 as computed at its start.
    D ends at 1 + 150/(100/3) = 5.5; A and B, with 1000 - 50 - 150 = 800 B left, at 5.5 + 16.
    """
    topo = FakeTopology([line("x", 100.0), line("y", 10.0)], {(0, 1): ["x"], (2, 3): ["x"], (4, 5): ["y"]})
    net = FairShareNetwork(Simulation(), topo)
    transfers = [(0.0, 0, 1, 1000), (0.0, 2, 3, 1000), (0.0, 4, 5, 50), (1.0, 0, 1, 150)]
    finish = run_transfers(net, transfers, until=0.5)
    assert (net.recomputations, net.rates_recomputed) == (1, 3)
    net.sim.run(until=1.5)
    assert (net.recomputations, net.rates_recomputed) == (2, 6)

    net.sim.run()
    assert finish == [pytest.approx(v, rel=REL) for v in (21.5, 21.5, 5.0, 5.5)]
    # Later solves: C's finish (its component is then empty), D's finish (A and B re-solved),
    # and the last finish of A and B together.
    assert (net.recomputations, net.rates_recomputed) == (5, 8)


def test_flow_ending_as_another_starts_on_its_link_ends_in_that_solve():
    """B (5 B) runs alone at 10 B/s, shares with A (2 B) at 5 B/s each, then runs alone again.

    With alpha = 1.3 us: B does 1 B before A starts at 0.1 + alpha; A ends at 0.5 + alpha, and
    B's last 2 B end at 0.7 + alpha -- the instant C starts on the same link. Rounding leaves B
    a few attobytes when C's start is solved; B must end in that solve rather than get a share
    and a completion event of its own a rounding error later.
    """
    lat = 1.3e-6
    topo = FakeTopology([line("l", 10.0, lat)], {(0, 1): ["l"], (2, 3): ["l"], (4, 5): ["l"]})
    net = FairShareNetwork(Simulation(), topo)
    t = run_transfers(net, [(0.1, 0, 1, 2), (0.0, 2, 3, 5), (0.7, 4, 5, 4)])
    assert t == [pytest.approx(v + lat, rel=REL) for v in (0.5, 0.7, 1.1)]
    # Solves: B starts, A starts, A ends, C starts with B ending, C ends.
    assert net.recomputations == 5


def test_completions_a_rounding_error_apart_share_one_event():
    """0.1 s + 7 B at 10 B/s and 0.3 s + 5 B at 10 B/s both end at 0.8 s, as floats one ulp apart."""
    topo = FakeTopology([line("x", 10.0, 0.1), line("y", 10.0, 0.3)], {(0, 1): ["x"], (2, 3): ["y"]})
    net = FairShareNetwork(Simulation(), topo)
    t = run_transfers(net, [(0.0, 0, 1, 7), (0.0, 2, 3, 5)])
    assert t == [pytest.approx(0.8, rel=REL)] * 2
    assert net.recomputations == 3  # two starts, one solve for both completions


def test_starts_at_one_instant_are_batched_even_after_zero_delay_events():
    """Sender k issues its transfer after k zero-delay steps: all start at t = 0, one solve."""
    p = 6
    topo = star(p, 1e9, 0.0)
    net = FairShareNetwork(Simulation(), topo)
    env = net.sim.env

    def sender(k: int):
        for _ in range(k):
            yield env.timeout(0)
        yield from net.transfer(k, 0, 1000)

    for k in range(1, p):
        env.process(sender(k))
    net.sim.run(until=1e-9)
    assert (net.recomputations, net.active_flows) == (1, p - 1)
    net.sim.run()
    assert env.now == pytest.approx((p - 1) * 1000 / 1e9, rel=REL)


def test_link_records_and_stats():
    """One LinkRecord per flow per link, from bandwidth phase start to last byte; busy time skips idle gaps."""
    tracer = Tracer(links=True)
    topo = FakeTopology(
        [line("a", 100.0, 1.0), line("b", 50.0, 1.0), line("c", 10.0)], {(0, 1): ["a", "b"], (2, 3): ["c"]}
    )
    net = FairShareNetwork(Simulation(tracer=tracer), topo)
    t = run_transfers(net, [(0.0, 0, 1, 100), (10.0, 0, 1, 50)])
    assert t == [pytest.approx(4.0), pytest.approx(13.0)]
    got = [(r.link, r.t_start, r.t_end, r.nbytes) for r in tracer.links]
    assert got == [("a", 2.0, 4.0, 100), ("b", 2.0, 4.0, 100), ("a", 12.0, 13.0, 50), ("b", 12.0, 13.0, 50)]
    stats = net.link_stats()
    assert {name: (s.nbytes, s.busy_time) for name, s in stats.items()} == {
        "a": (150, 3.0),
        "b": (150, 3.0),
        "c": (0, 0.0),
    }
    assert net.link_bytes == [150, 150]


def test_models_are_registered():
    assert {"analytic", "fairshare"} <= set(model_names())
    topo = path_topology()
    assert isinstance(make_model("fairshare", Simulation(), topo), FairShareNetwork)
    assert isinstance(make_model("analytic", Simulation(), topo), AnalyticNetwork)


# -- fairshare against a naive reference solver -------------------------------------------------


def reference_max_min(capacity: list[float], routes: list[tuple[int, ...]]) -> list[float]:
    """Progressive filling done the slow, obvious way: raise all unfixed flows until a link fills."""
    rate = [0.0] * len(routes)
    unfixed = set(range(len(routes)))
    left = list(capacity)
    while unfixed:
        shares = {}
        for link in range(len(capacity)):
            users = [f for f in unfixed if link in routes[f]]
            if users:
                shares[link] = left[link] / len(users)
        link = min(shares, key=lambda i: (shares[i], i))
        share = shares[link]
        for f in [f for f in unfixed if link in routes[f]]:
            rate[f] = share
            unfixed.discard(f)
            for other in routes[f]:
                left[other] -= share
    return rate


def reference_finish_times(capacity, latency, flows) -> list[float]:
    """Finish time of each ``(t_issue, route, nbytes)``, re-solving every flow at every event."""
    start = [t + sum(latency[i] for i in route) for t, route, _ in flows]
    remaining = [float(n) for _, _, n in flows]
    finish = [math.nan] * len(flows)
    active: list[int] = []
    pending = sorted(range(len(flows)), key=lambda f: start[f])
    t = 0.0
    while pending or active:
        rates = reference_max_min(capacity, [flows[f][1] for f in active])
        t_next = min(
            [start[f] for f in pending] + [t + remaining[f] / r for f, r in zip(active, rates, strict=True)]
        )
        for f, r in zip(active, rates, strict=True):
            remaining[f] -= r * (t_next - t)
        t = t_next
        for f in list(active):
            if remaining[f] <= 1e-9 * flows[f][2]:
                finish[f] = t
                active.remove(f)
        while pending and start[pending[0]] <= t:
            active.append(pending.pop(0))
    return finish


@pytest.mark.parametrize("seed", range(25))
def test_fairshare_matches_reference_solver(seed):
    """Random small networks and flows: finish times equal a full re-solve at every event."""
    rng = random.Random(seed)
    n_links = rng.randint(2, 6)
    links = [
        line(f"l{i}", rng.choice([1.0, 2.0, 5.0, 8.0]), rng.choice([0.0, 0.5, 1.0])) for i in range(n_links)
    ]
    flows = []
    routes = {}
    for f in range(rng.randint(1, 10)):
        route = tuple(sorted(rng.sample(range(n_links), rng.randint(1, min(3, n_links)))))
        t_issue = rng.choice([0.0, 0.0, 1.0, 2.5, rng.uniform(0, 10)])
        flows.append((t_issue, route, rng.randint(1, 40)))
        routes[(2 * f, 2 * f + 1)] = [f"l{i}" for i in route]
    topo = FakeTopology(links, routes)
    net = FairShareNetwork(Simulation(), topo)
    got = run_transfers(net, [(t, 2 * f, 2 * f + 1, n) for f, (t, _, n) in enumerate(flows)])
    expected = reference_finish_times(
        [lk.effective_bandwidth for lk in links], [lk.latency for lk in links], flows
    )
    assert got == [pytest.approx(e, rel=1e-9) for e in expected]
    assert net.active_flows == 0
    assert net.flows_finished == len(flows)
    assert net.recomputations <= 2 * len(flows)


def test_same_run_twice_gives_identical_records():
    def once():
        tracer = Tracer(links=True)
        net = FairShareNetwork(Simulation(tracer=tracer), star(6, 1e9, 1e-6))
        transfers = [(0.0, i, (i * 5 + 1) % 6, 1000 * (i + 1)) for i in range(6) if i != (i * 5 + 1) % 6]
        transfers += [(0.0, i, 0, 777) for i in range(1, 6)]
        return run_transfers(net, transfers), tracer.links

    assert once() == once()


# -- the one-level shortcut gives progressive filling's very floats ---------------------------


def _finish_times_and_links(transfers, capacities, routes, *, one_level: bool):
    links = [line(f"l{i}", c) for i, c in enumerate(capacities)]
    tracer = Tracer(links=True)
    net = FairShareNetwork(Simulation(tracer=tracer), FakeTopology(links, routes))
    if not one_level:
        net._solve_one_level = lambda links, live, now: False  # always the heap
    return run_transfers(net, transfers), tracer.links, net


def _compare_one_level(seed: int) -> int:
    """Random rings of links with one or two flows each, odd capacities, a few wider links.

    Chains like a ring's FIN + request-to-send (every link at capacity / 2) take the shortcut;
    components whose flows have different bottlenecks do not. Either way every finish time
    and link record must equal, as floats, what progressive filling alone computes.
    """
    rng = random.Random(seed)
    n = rng.randint(3, 12)
    caps = [rng.choice([25e9, 25e9, 12.5e9, 1e9 / 3, 7.0, 3e10 * 0.95]) for _ in range(n)]
    routes, transfers = {}, []
    for f in range(rng.randint(2, 2 * n)):
        first = rng.randrange(n)
        hops = [(first + k) % n for k in range(rng.randint(1, 3))]
        routes[(2 * f, 2 * f + 1)] = [f"l{i}" for i in hops]
        transfers.append((rng.choice([0.0, 0.0, 0.0, 1e-6, rng.uniform(0, 1e-5)]), 2 * f, 2 * f + 1,
                          rng.choice([64, 64, 64, 1000, rng.randint(1, 10**6)])))
    fast = _finish_times_and_links(transfers, caps, routes, one_level=True)
    slow = _finish_times_and_links(transfers, caps, routes, one_level=False)
    assert fast[0] == slow[0]
    assert fast[1] == slow[1]
    return fast[2].one_level_solves


@pytest.mark.parametrize("seed", range(40))
def test_one_level_solve_equals_progressive_filling_bit_for_bit(seed):
    _compare_one_level(seed)


def test_random_components_exercise_both_solvers():
    """The random cases above are not all one kind: some take the shortcut, some do not."""
    shortcuts = [_compare_one_level(seed) for seed in range(40)]
    assert sum(1 for n in shortcuts if n) >= 10
    assert sum(1 for n in shortcuts if not n) >= 10


def test_one_level_solve_serves_a_ring_of_control_messages():
    """p flows i -> i+1 and p flows i -> i-1 over up- and downlinks, rate C/2 each.

    This is the FIN of one ring step and the request-to-send of the next: they chain the even
    ranks' uplinks into one component and the odd ranks' into another. The shortcut takes
    both (no heap); a flow whose bottleneck is elsewhere (a slow extra link) sends its own
    component back to progressive filling, and only that one.
    """
    p = 8
    links = [line(f"up{i}", 25e9) for i in range(p)] + [line(f"down{i}", 25e9) for i in range(p)]
    routes = {}
    for i in range(p):
        routes[(i, (i + 1) % p)] = [f"up{i}", f"down{(i + 1) % p}"]
        routes[(i, (i - 1) % p)] = [f"up{i}", f"down{(i - 1) % p}"]
    net = FairShareNetwork(Simulation(), FakeTopology(links, routes))
    transfers = [(0.0, src, dst, 64) for src, dst in routes]
    finish = run_transfers(net, transfers)
    assert finish == [64 / 12.5e9] * len(transfers)
    assert net.one_level_solves == 2

    links.append(line("slow", 1e9))
    routes[(0, 1)] = ["up0", "down1", "slow"]
    net = FairShareNetwork(Simulation(), FakeTopology(links, routes))
    finish = run_transfers(net, transfers)
    assert net.one_level_solves == 1
    assert finish[0] == pytest.approx(64 / 1e9, rel=REL)


# -- a component seen before replays progressive filling's very floats ------------------------


def _two_rounds(seed: int, monkeypatch, *, record: bool):
    """Random flows (16 to 40, over few links of odd capacities) started twice, the second time
    with other sizes once the first round is over: the second round's components repeat the first's."""
    rng = random.Random(seed)
    n = rng.randint(3, 8)
    caps = [rng.choice([25e9, 12.5e9, 1e9 / 3, 3e10 * 0.95]) for _ in range(n)]
    routes = {}
    for f in range(rng.randint(16, 40)):
        first = rng.randrange(n)
        routes[(2 * f, 2 * f + 1)] = [f"l{(first + k) % n}" for k in range(rng.randint(1, 3))]
    transfers = [(t_round, src, dst, rng.randint(1, 10**6)) for t_round in (0.0, 10.0) for src, dst in routes]
    if not record:
        monkeypatch.setattr(fairshare, "_FILL_MEMO_MIN", 10**9)  # every component solved afresh
    links = [line(f"l{i}", c) for i, c in enumerate(caps)]
    tracer = Tracer(links=True)
    net = FairShareNetwork(Simulation(tracer=tracer), FakeTopology(links, routes))
    finish = run_transfers(net, transfers)
    assert max(finish[:len(routes)]) < 10.0 < min(finish[len(routes):])  # the rounds do not overlap
    return finish, tracer.links, net


@pytest.mark.parametrize("seed", range(12))
def test_a_replayed_component_gets_the_floats_of_a_fresh_solve(seed, monkeypatch):
    """Every finish time and link record, with components recorded and replayed, equals (as
    floats) what solving each component afresh gives."""
    replayed = _two_rounds(seed, monkeypatch, record=True)
    fresh = _two_rounds(seed, monkeypatch, record=False)
    assert replayed[:2] == fresh[:2]
    assert fresh[2].fills_replayed == 0


def test_repeated_components_are_replayed():
    """The cases above do replay: the second round's large components were filled in the first."""
    class NoPatch:
        def setattr(self, *args):
            raise AssertionError("recording is on")

    replays = [_two_rounds(seed, NoPatch(), record=True)[2].fills_replayed for seed in range(12)]
    assert sum(1 for n in replays if n) >= 6


# -- weighted flows: one flow of weight w is w equal flows started together -------------------


def _posted(transfers, capacities, routes, *, merged: bool):
    """Post each ``(t_issue, src, dst, nbytes, w)``: w flows of nbytes, or one of weight w and w x nbytes.

    Returns each transfer's finish time, the bytes per link, and the network.
    """
    links = [line(f"l{i}", c, 1e-6) for i, c in enumerate(capacities)]
    net = FairShareNetwork(Simulation(), FakeTopology(links, routes))
    env = net.sim.env
    finish: list[list[float]] = [[] for _ in transfers]

    def issue(k, t_issue, src, dst, nbytes, w):
        if t_issue > 0:
            yield env.timeout(t_issue)
        if merged:
            net.post(src, dst, w * nbytes, lambda k: finish[k].append(env.now), k, weight=w)
        else:
            for _ in range(w):
                net.post(src, dst, nbytes, lambda k: finish[k].append(env.now), k)

    for k, spec in enumerate(transfers):
        env.process(issue(k, *spec))
    net.sim.run()
    return finish, {name: stats.nbytes for name, stats in net.link_stats().items()}, net


def _compare_weighted(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(2, 7)
    caps = [rng.choice([25e9, 12.5e9, 1e9 / 3, 3e10 * 0.95, 50e9]) for _ in range(n)]
    routes, transfers = {}, []
    for f in range(rng.randint(1, 9)):
        routes[(2 * f, 2 * f + 1)] = [f"l{i}" for i in rng.sample(range(n), rng.randint(1, min(3, n)))]
        transfers.append((rng.choice([0.0, 0.0, 2e-6, rng.uniform(0, 1e-4)]), 2 * f, 2 * f + 1,
                          rng.randint(1, 10**6), rng.choice([1, 1, 2, 3, 14])))
    merged, merged_bytes, net = _posted(transfers, caps, routes, merged=True)
    apart, apart_bytes, _ = _posted(transfers, caps, routes, merged=False)
    assert merged_bytes == apart_bytes  # the links carry the same bytes, exactly
    for k, (times, w) in enumerate(zip(merged, (t[4] for t in transfers), strict=True)):
        assert len(times) == 1 and len(apart[k]) == w
        # The w flows apart finish together (to rounding), when the weighted one does.
        assert apart[k] == [pytest.approx(times[0], rel=1e-12)] * w
    assert net.flows_started == len(transfers)


@pytest.mark.parametrize("seed", range(30))
def test_a_weighted_flow_finishes_when_its_equal_flows_would(seed):
    """Random networks, flows of weights 1 to 14 among others: the same finish times and link bytes."""
    _compare_weighted(seed)


def test_a_weighted_flow_takes_its_weights_share_of_a_link():
    """Weight 3 (3 x 30 B) against weight 1 (10 B) on one 40 B/s link: 30 B/s against 10 B/s.

    The light flow is done at 1 s; the heavy one has 60 B left, alone at 40 B/s: done at 2.5 s.
    """
    net = FairShareNetwork(Simulation(), FakeTopology([line("l", 40.0)], {(0, 1): ["l"], (2, 1): ["l"]}))
    env = net.sim.env
    done = {}
    net.post(0, 1, 90, lambda name: done.setdefault(name, env.now), "heavy", weight=3)
    net.post(2, 1, 10, lambda name: done.setdefault(name, env.now), "light")
    net.sim.run()
    assert done == {"heavy": pytest.approx(2.5, rel=REL), "light": pytest.approx(1.0, rel=REL)}


# -- what a model declares it can answer ---------------------------------------------------------


@pytest.mark.parametrize("name", ["analytic", "fairshare"])
def test_path_costs_are_the_routes_and_a_lone_transfer_takes_them(name):
    """path_costs(0, 1): the links' latencies summed, the slowest effective rate, three hops;
    a transfer alone takes latency + n / bottleneck on either model."""
    net = make_model(name, Simulation(), path_topology())
    costs = net.path_costs(0, 1)
    assert costs.latency == pytest.approx(0.6e-6 + 0.3e-6 + 0.6e-6, rel=REL)
    assert costs.bottleneck == pytest.approx(12.5e9 * 0.8, rel=REL)
    assert (costs.hops, net.path_costs(1, 0).hops) == (3, 1)
    assert costs.seconds_per_byte == pytest.approx(1 / costs.bottleneck, rel=REL)
    [t] = run_transfers(net, [(0.0, 0, 1, 10**8)])
    assert t == pytest.approx(costs.latency + 10**8 / costs.bottleneck, rel=1e-9)


def test_capabilities_are_declared_not_guessed_from_the_class():
    topo = path_topology()
    fair, analytic = make_model("fairshare", Simulation(), topo), make_model("analytic", Simulation(), topo)
    assert (fair.capabilities.max_min_sharing, fair.capabilities.post_all, fair.capabilities.weighted) == (True,) * 3
    assert (analytic.capabilities.max_min_sharing, analytic.capabilities.post_all,
            analytic.capabilities.weighted) == (False,) * 3
    # Ports hold a rank's transfers back: no longer max-min fair sharing, whatever the model inside.
    ported = make_model("fairshare", Simulation(), topo, ports=1)
    assert not ported.capabilities.max_min_sharing and not ported.capabilities.weighted
    assert ported.path_costs(0, 1) == fair.path_costs(0, 1)
