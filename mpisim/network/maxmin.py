"""The max-min solver: rates for flows that share links, by progressive filling.

This module only computes rates; :mod:`mpisim.network.fairshare` decides when to ask (which
flows started or ended, which components they touch), gives the rates to its flows and
drives their completions. SimGrid keeps the same cut: its ``lmm`` solver apart from the
network models that use it.

**Max-min fairness.** Several flows crossing one link must share its capacity (its effective
bandwidth). An allocation of rates is *max-min fair* when no flow's rate can be raised without
lowering the rate of a flow that already has the same or a smaller rate. On a single link this
is an equal split; across a network it means each flow gets an equal share of its *bottleneck*
link, and links that are not any flow's bottleneck give their leftover capacity to the flows
that can still use it. Example: link 1 (10 B/s) carries flows A and B, link 2 (4 B/s) carries
A and C. Link 2 is the tighter one, so A = C = 2; A then uses 2 of link 1's 10, and B gets
the other 8 (not 5: B is not limited by A's poorer path).

**Progressive filling** computes this allocation. Raise the rates of all flows together;
the first link to fill up (the one with the smallest *fair share* ``capacity_left /
unfixed_flows``) fixes the rates of all its flows at that share; remove those flows, subtract
their rates from the other links they cross, and continue with the remaining flows until
every flow is fixed. Fair shares only grow as flows are fixed, so a heap of (share, link)
pops the links in the order they fill, and each flow is fixed exactly once
(:meth:`MaxMin.progressive_filling`).

**One level.** A component whose smallest fair share ``m = capacity / flows`` lies on some
link of every one of its flows is solved without the heap: progressive filling would fix them
all at *m* before any other link fills. That is the component a ring makes with mpisim's
default MPI parameters, where the FIN of one step and the request-to-send of the next leave
every rank at one instant and chain every other rank's links together (two flows per link,
each at half its capacity). The shortcut is taken only where it gives progressive filling's
very floats (see :meth:`MaxMin.one_level`); otherwise the heap runs.

**Weighted flows.** A flow of *weight* w stands for w equal flows on the same route started
together (mpisim.network.fairshare, "Weighted flows"): its rate is w shares. A link's fair
share is its capacity left over the *weights* of its unfixed flows, and fixing a flow takes w
shares from every link it crosses. That is the same allocation in real numbers (in floats, to
rounding), with one flow to solve instead of w.

**Components seen before.** A component's rates depend only on its flows' routes and weights
and the order of its flows on each link (the order of progressive filling's subtractions):
not on their bytes, not on the time. Workloads repeat components: a training run's buckets
post the same trees' flows again and again on an otherwise idle network. :class:`FillMemo`
records which flows progressive filling fixed together and at what share, keyed by the flows'
(weight, route) in creation order; the next component with that key replays the record --
the very floats, set in the very order -- instead of running the heap again. (A component
that one level solves is never filled.) The memo belongs to one network, so to one world.

**What the solver reads.** A flow is anything with ``seq`` (its creation order, the tie-breaker
everywhere), ``ids`` (the indices of the links it crosses, none twice), ``weight`` and a
scratch ``mark``. Per link, indexed by the link's index: ``capacity``, ``flows_on`` (the flows
on it, a dict keyed by ``seq`` and filled in creation order, so it iterates in that order) and
``extra`` (the weights of its flows beyond one each). tests/unit/test_maxmin.py holds the
solver to a reference max-min written from the definition above.
"""

from __future__ import annotations

import heapq
import math
from typing import Any

#: A bound on the unit roundoff of a float (2**-52 = 2.2e-16), with room to spare.
_ULP = 2.5e-16
#: At most this many recorded components, of at most this many flows in all, per network (a
#: workload whose components never repeat stops recording once it has filled the table; a
#: recorded flow costs about 100 bytes).
FILL_MEMO_MAX = 1024
FILL_MEMO_FLOWS = 1_000_000

#: What progressive filling did: each set of flows fixed together and their share, in order.
Fills = list[tuple[list[Any], float]]


class MaxMin:
    """The max-min system of one network: per-link capacities and flows, and the two solvers."""

    def __init__(self) -> None:
        # Per link, indexed by Link.index and grown by grow().
        self.capacity: list[float] = []
        self.flows_on: list[dict[int, Any]] = []  # flows on the link, by sequence number
        self.mark: list[int] = []  # solve stamp, marks links already in a component
        # Per link: the flows' weights beyond one each, so that a link's share counts
        # len(flows) + extra weights without summing them (see "Weighted flows").
        self.extra: list[int] = []
        self._cap_left: list[float] = []  # progressive-filling scratch
        self._unfixed: list[int] = []  # progressive-filling scratch
        #: True once a flow of weight > 1 exists: from then on link shares count weights, not
        #: flows (a run without weighted flows keeps the plain counts' code).
        self.weighted = False

    def grow(self, n_links: int) -> None:
        """Make room for links up to index ``n_links - 1`` (new links have no capacity yet)."""
        grow = n_links - len(self.capacity)
        if grow > 0:
            self.capacity.extend([0.0] * grow)
            self.flows_on.extend({} for _ in range(grow))
            self.mark.extend([0] * grow)
            self.extra.extend([0] * grow)
            self._cap_left.extend([0.0] * grow)
            self._unfixed.extend([0] * grow)

    def one_level(self, links: list[int], live: list[Any]) -> float:
        """The share every flow of the component gets when progressive filling would fix them all at once; else 0.

        *links* and *live* are the component's links and flows. The common shared component
        (the FIN of one ring step and the request-to-send of the next, which chain every other
        rank together) has one *level*: the smallest fair share ``m = capacity / flows`` is
        found on some link of every flow, so progressive filling fixes them all at *m* before
        any other link fills. This finds that case in two linear passes, without the heap.

        It gives the very floats progressive filling gives, not just the same real numbers:
        a link at the level carries one or two flows, so its capacity less the flows fixed
        elsewhere, over the flows left, is *m* exactly (halving and subtracting a half are
        exact in binary floating point); and every other link's share exceeds *m* by more
        than the rounding of its subtractions could take away (at most about ``n**2 / 2``
        units in the last place for *n* flows), so it never fills first. Once weighted flows
        are about, shares are over weights and *m* is a share per unit of weight: the same
        allocation as progressive filling in real numbers, and in floats to rounding (its
        subtractions of w x m need not be exact).
        """
        flows_on, capacity, share = self.flows_on, self.capacity, self._cap_left
        weighted, extra = self.weighted, self.extra
        level = math.inf
        for i in links:
            n = len(flows_on[i]) + extra[i] if weighted else len(flows_on[i])
            s = capacity[i] / n if n else math.inf
            share[i] = s
            if s < level:
                level = s
        if not 0.0 < level < math.inf:
            return 0.0
        for i in links:
            s = share[i]
            if s == level:
                if len(flows_on[i]) > 2:
                    return 0.0
            elif s != math.inf:
                n = len(flows_on[i])
                if s - s * (n * n + 2) * _ULP < level:
                    return 0.0  # close enough that rounding could make it fill first
        for flow in live:
            for j in flow.ids:
                if share[j] == level:
                    break
            else:
                return 0.0  # this flow's bottleneck is elsewhere: more than one level
        return level

    def progressive_filling(self, links: list[int], n_flows: int, stamp: int) -> Fills:
        """Fix the rates of the component's *n_flows* flows, tightest link first (module docstring).

        Returns each set of flows fixed together (in the order of their bottleneck's flows)
        with its share, in the order they were fixed: a flow's rate is its share times its
        weight. Each fixed flow's ``mark`` becomes ``-stamp``.
        """
        flows_on, cap_left, unfixed = self.flows_on, self._cap_left, self._unfixed
        weighted, extra = self.weighted, self.extra
        heap: list[tuple[float, int]] = []
        for i in links:
            n = len(flows_on[i]) + extra[i] if weighted else len(flows_on[i])
            unfixed[i] = n
            cap_left[i] = self.capacity[i]
            if n:
                heap.append((cap_left[i] / n, i))
        heapq.heapify(heap)
        fixed = -stamp
        fills: Fills = []
        while n_flows:
            share, i = heapq.heappop(heap)
            n = unfixed[i]
            if n == 0 or share != cap_left[i] / n:
                continue  # stale entry: this link's share has grown since it was pushed
            # Invariant: every unfixed flow on link i is bottlenecked here, at *share*.
            bottlenecked = []
            for flow in flows_on[i].values():
                if flow.mark == fixed:
                    continue
                flow.mark = fixed
                bottlenecked.append(flow)
                w = flow.weight
                rate = share if w == 1 else share * w
                for j in flow.ids:
                    if j != i:
                        left = cap_left[j] - rate
                        cap_left[j] = left if left > 0.0 else 0.0
                        unfixed[j] -= w
                        if unfixed[j]:
                            heapq.heappush(heap, (cap_left[j] / unfixed[j], j))
            unfixed[i] = 0
            n_flows -= len(bottlenecked)
            fills.append((bottlenecked, share))
        return fills


class FillMemo:
    """Progressive filling's outcome per component key ("Components seen before"), for one network.

    A record is, in order, the positions (in the component's creation order) of the flows
    fixed together and their share.
    """

    __slots__ = ("_flows", "_records", "replayed")

    def __init__(self) -> None:
        self._records: dict[tuple, list[tuple[list[int], float]]] = {}
        self._flows = 0
        #: Components served from a record (a counter for tests and benchmarks).
        self.replayed = 0

    @staticmethod
    def key(live: list[Any]) -> tuple:
        """The key of a component whose flows are *live*, sorted by creation order."""
        return tuple([(flow.weight, flow.ids) for flow in live])

    def recall(self, key: tuple) -> list[tuple[list[int], float]] | None:
        """The record of a component with *key*, or None if none was filled."""
        record = self._records.get(key)
        if record is not None:
            self.replayed += 1
        return record

    def remember(self, key: tuple, live: list[Any], fills: Fills) -> None:
        """Record *fills* for the component *live* (sorted by creation order), while the table has room."""
        if len(self._records) < FILL_MEMO_MAX and self._flows + len(live) <= FILL_MEMO_FLOWS:
            position = {flow.seq: k for k, flow in enumerate(live)}
            self._records[key] = [([position[flow.seq] for flow in flows], share) for flows, share in fills]
            self._flows += len(live)
