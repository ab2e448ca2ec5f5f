"""The max-min solver (mpisim.network.maxmin) against a reference max-min written from its definition.

The reference is the textbook water-filling, as slow and plain as possible: raise every
unfixed flow's rate by the same amount per unit of weight until some link is full, fix the
flows on full links, repeat. Its result is *the* max-min fair allocation, whatever the order
of links and flows; the solver must give the same rates to 1e-9, and the rates must be
feasible (no link above its capacity) and max-min fair (every flow has a bottleneck: a full
link on which no flow has a larger rate per unit of weight).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpisim.network.maxmin import FillMemo, MaxMin

REL = 1e-9


@dataclass
class F:
    """What the solver reads of a flow."""

    seq: int
    ids: tuple[int, ...]
    weight: int = 1
    mark: int = 0


def reference_maxmin(capacity: list[float], flows: list[F]) -> list[float]:
    """Each flow's max-min fair rate (its weight times its share), by plain water-filling."""
    share = [0.0] * len(flows)
    unfixed = set(range(len(flows)))
    while unfixed:
        # The largest common raise of every unfixed flow's share before some link is full.
        step = min(
            (capacity[i] - sum(share[k] * flows[k].weight for k in range(len(flows)) if i in flows[k].ids))
            / sum(flows[k].weight for k in unfixed if i in flows[k].ids)
            for i in {i for k in unfixed for i in flows[k].ids}
        )
        for k in unfixed:
            share[k] += step
        full = {i for i in range(len(capacity))
                if any(i in flows[k].ids for k in unfixed)
                and sum(share[k] * flows[k].weight for k in range(len(flows)) if i in flows[k].ids)
                >= capacity[i] * (1 - 1e-12)}
        unfixed -= {k for k in unfixed if full & set(flows[k].ids)}
    return [share[k] * flows[k].weight for k in range(len(flows))]


def load(capacity: list[float], flows: list[F]) -> tuple[MaxMin, list[int]]:
    """A solver holding *flows* on links of *capacity*, and the component's links."""
    solver = MaxMin()
    solver.grow(len(capacity))
    solver.capacity[:] = capacity
    for flow in flows:
        for i in flow.ids:
            solver.flows_on[i][flow.seq] = flow
            solver.extra[i] += flow.weight - 1
        if flow.weight != 1:
            solver.weighted = True
    links = sorted({i for flow in flows for i in flow.ids})
    return solver, links


def filled_rates(capacity: list[float], flows: list[F]) -> list[float]:
    solver, links = load(capacity, flows)
    rates = {}
    for fixed, share in solver.progressive_filling(links, len(flows), stamp=1):
        for flow in fixed:
            assert flow.seq not in rates, "a flow is fixed exactly once"
            assert flow.mark == -1
            rates[flow.seq] = share * flow.weight
    return [rates[flow.seq] for flow in flows]


def assert_max_min_fair(capacity: list[float], flows: list[F], rates: list[float]) -> None:
    """Feasible, and every flow bottlenecked: on a full link where no flow has a larger share."""
    used = [0.0] * len(capacity)
    for flow, rate in zip(flows, rates, strict=True):
        assert rate > 0
        for i in flow.ids:
            used[i] += rate
    for i, c in enumerate(capacity):
        assert used[i] <= c * (1 + REL)
    for flow, rate in zip(flows, rates, strict=True):
        share = rate / flow.weight
        assert any(
            used[i] >= capacity[i] * (1 - REL)
            and all(r / g.weight <= share * (1 + REL) for g, r in zip(flows, rates, strict=True) if i in g.ids)
            for i in flow.ids
        ), f"flow {flow.seq} has no bottleneck"


@st.composite
def networks(draw, weighted: bool = False):
    n_links = draw(st.integers(1, 8))
    capacity = [draw(st.sampled_from([1.0, 3.0, 7.0, 12.5e9, 25e9, 1e9 / 3, 0.95 * 3e10])) for _ in range(n_links)]
    flows = []
    for seq in range(draw(st.integers(1, 12))):
        ids = draw(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=min(4, n_links), unique=True))
        weight = draw(st.integers(1, 4)) if weighted else 1
        flows.append(F(seq, tuple(ids), weight))
    return capacity, flows


@settings(max_examples=300, deadline=None)
@given(networks())
def test_progressive_filling_is_the_reference_max_min(net):
    capacity, flows = net
    rates = filled_rates(capacity, flows)
    assert rates == pytest.approx(reference_maxmin(capacity, flows), rel=REL)
    assert_max_min_fair(capacity, flows, rates)


@settings(max_examples=200, deadline=None)
@given(networks(weighted=True))
def test_weighted_flows_get_their_weights_share(net):
    """A flow of weight w gets what w equal flows on its route would get together."""
    capacity, flows = net
    rates = filled_rates(capacity, flows)
    assert rates == pytest.approx(reference_maxmin(capacity, flows), rel=REL)
    assert_max_min_fair(capacity, flows, rates)


@settings(max_examples=300, deadline=None)
@given(networks(weighted=True))
def test_one_level_only_answers_with_progressive_fillings_floats(net):
    """When the shortcut answers, every flow's rate is the level, and it is progressive filling's (bit for bit unweighted)."""
    capacity, flows = net
    solver, links = load(capacity, flows)
    level = solver.one_level(links, flows)
    if not level:
        return
    rates = [level * flow.weight for flow in flows]
    assert rates == pytest.approx(reference_maxmin(capacity, flows), rel=REL)
    if not solver.weighted:
        assert rates == filled_rates(capacity, flows)


def test_one_level_takes_a_ring_of_control_messages_and_refuses_two_levels():
    """Flows i -> i+1 and i -> i-1 over up- and downlinks: two flows per link, one level (C/2).

    A slower link on one flow's route makes its bottleneck elsewhere: two levels, no shortcut.
    """
    p, c = 6, 25e9
    flows = [F(2 * i, (i, p + (i + 1) % p)) for i in range(p)] + [F(2 * i + 1, (i, p + (i - 1) % p)) for i in range(p)]
    flows.sort(key=lambda f: f.seq)
    solver, links = load([c] * (2 * p), flows)
    assert solver.one_level(links, flows) == c / 2
    slow = [c] * (2 * p) + [1e9]
    flows[0] = F(0, (*flows[0].ids, 2 * p))
    solver, links = load(slow, flows)
    assert solver.one_level(links, flows) == 0.0
    assert_max_min_fair(slow, flows, filled_rates(slow, flows))


def test_the_textbook_example():
    """Link 1 (10 B/s) carries A and B, link 2 (4 B/s) carries A and C: A = C = 2, B = 8."""
    flows = [F(0, (0, 1)), F(1, (0,)), F(2, (1,))]
    assert filled_rates([10.0, 4.0], flows) == [2.0, 8.0, 2.0]


def test_the_memo_recalls_a_component_by_routes_and_weights_only():
    flows = [F(k, (k % 3, 3), 1 + k % 2) for k in range(20)]
    capacity = [5.0, 7.0, 11.0, 13.0]
    solver, links = load(capacity, flows)
    fills = solver.progressive_filling(links, len(flows), stamp=1)
    memo = FillMemo()
    key = memo.key(flows)
    assert memo.recall(key) is None
    memo.remember(key, flows, fills)
    record = memo.recall(key)
    assert memo.replayed == 1
    assert [([flows[k] for k in positions], share) for positions, share in record] == fills
    # Other sequence numbers, same routes and weights: the same key.
    renumbered = [F(100 + flow.seq, flow.ids, flow.weight) for flow in flows]
    assert memo.key(renumbered) == key
    assert memo.key([F(0, (0, 3), 2), *flows[1:]]) != key
