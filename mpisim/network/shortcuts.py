"""Shortcuts of the fair-share solver for the small components most solves meet.

A max-min solve walks the component of the links whose flows changed and fills it level by
level (:mod:`mpisim.network.maxmin`). Most components a ring or pairwise exchange produces are
tiny: one flow alone on its links (a ring step's flows touch disjoint links), or two flows that
share a rank's port (a data transfer and a control message once ranks drift apart). For these
the walk's stack and lists cost more than the answer; the methods here give the same progress
updates, the same rates and the same completion times without them, and hand anything else
back to the general walk. :class:`~mpisim.network.fairshare.FairShareNetwork` mixes them in.
"""

from __future__ import annotations

import heapq
import math
from typing import Any

#: A flow with at most this fraction of its bytes left after a progress update is complete.
BYTES_RTOL = 1e-9
_BYTES_RTOL = BYTES_RTOL


def _only_partner(flows_on: list[dict[Any, Any]], flow: Any, partner: Any) -> Any:
    """The one flow sharing a link with *flow* (starting from *partner*, which may be None),
    or None if *flow* meets more than one other flow or a link holds more than two."""
    for j in flow.ids:
        here = flows_on[j]
        n = len(here)
        if n == 1:
            continue
        if n != 2:
            return None
        for h in here.values():
            if h is not flow:
                if partner is None:
                    partner = h
                elif h is not partner:
                    return None
    return partner


class SmallComponents:
    """The one-flow and two-flow solves, mixed into the fair-share network: they use its state
    (the flows on each link, the solve marks, the capacities, the completion heap, the max-min filler) and its
    ``_complete``, ``_detach`` and ``_set_rates``."""

    _flows_on: list[dict[Any, Any]]
    _capacity: list[float]
    _mark: list[int]
    _heap: list[Any]
    _maxmin: Any
    rates_recomputed: int
    one_level_solves: int

    def _solve_alone(self, seed: int, stamp: int, now: float) -> bool:
        """Solve the component of link *seed*'s only flow if that flow is alone on all its links.

        The common case (a ring step's flows touch disjoint links), done without the general
        walk: the same progress update and the same rate, its bottleneck's capacity. Returns
        False, having changed nothing, if the flow shares a link.
        """
        flows_on = self._flows_on
        flow = next(iter(flows_on[seed].values()))
        ids = flow.ids
        for j in ids:
            if len(flows_on[j]) != 1:
                return False
        mark = self._mark
        for j in ids:
            mark[j] = stamp
        flow.mark = stamp
        if flow.rate:
            flow.remaining -= flow.rate * (now - flow.t_last)
        flow.t_last = now
        if flow.remaining <= _BYTES_RTOL * flow.nbytes:
            self._complete(flow)
            self._detach(flow, now)
            return True
        self.rates_recomputed += 1
        rate = flow.bottleneck
        if rate != flow.rate:
            flow.rate = rate
            flow.version += 1
            if rate > 0.0:
                flow.t_finish = now + flow.remaining / rate
                heapq.heappush(self._heap, (flow.t_finish, flow.seq, flow.version, flow))
            else:
                flow.t_finish = math.inf
        return True

    def _solve_pair(self, seed: int, stamp: int, now: float) -> bool:
        """Solve the component of link *seed* if it holds two flows, both going on, at one level.

        The common shared component of a ring whose ranks drift apart (module docstring, "Two
        flows"): a data transfer and a control message that share the rank's port. It is what
        the general walk and :meth:`~mpisim.network.maxmin.MaxMin.one_level` would do for it --
        the same progress updates, the same level (the smallest ``capacity / flows`` over the
        two flows' links, each carrying one or both), the same check that no other link could
        fill first, the rates set in creation order -- without the walk's stack and lists.
        Returns False, having changed nothing, for any other component (more flows, a flow
        that ends now, one link only, more than one level): the general walk takes it.
        """
        flows_on = self._flows_on
        on = flows_on[seed]
        it = iter(on.values())
        f = next(it)
        g = next(it, None)
        g = _only_partner(flows_on, f, g)
        if g is None or _only_partner(flows_on, g, f) is not f:
            return False
        # Progress at the old rates, not yet applied.
        f_left = f.remaining - f.rate * (now - f.t_last) if f.rate else f.remaining
        g_left = g.remaining - g.rate * (now - g.t_last) if g.rate else g.remaining
        # The component's links, each once: f's, then g's own.
        links = list(f.ids)
        for j in g.ids:
            if j not in links:
                links.append(j)
        if len(links) == 1:
            return False
        live = [f, g] if f.seq < g.seq else [g, f]
        if f_left <= _BYTES_RTOL * f.nbytes or g_left <= _BYTES_RTOL * g.nbytes:
            self._pair_ends(live, links, stamp, now)
            return True
        level = self._maxmin.one_level(links, live)
        if not level:
            return False
        mark = self._mark
        for i in links:
            mark[i] = stamp
        f.mark = g.mark = stamp
        if f.rate:
            f.remaining = f_left
        f.t_last = now
        if g.rate:
            g.remaining = g_left
        g.t_last = now
        self.rates_recomputed += 2
        self.one_level_solves += 1
        self._set_rates(live, level, now)
        return True

    def _pair_ends(self, pair: list[Any], links: list[int], stamp: int, now: float) -> None:
        """The two-flow component *pair* (in creation order, over *links*, more than one), one or both ending now.

        What the general walk does for it (a flow's last bytes land as the solve that its
        partner's start or finish asked for runs): both flows' progress brought up to now,
        the ending ones completed and detached in creation order, the one going on given its
        bottleneck's capacity, alone (the walk's "one flow left").
        """
        mark = self._mark
        for i in links:
            mark[i] = stamp
        ended, live = [], None
        for flow in pair:
            flow.mark = stamp
            if flow.rate:
                flow.remaining -= flow.rate * (now - flow.t_last)
            flow.t_last = now
            if flow.remaining <= _BYTES_RTOL * flow.nbytes:
                ended.append(flow)
            else:
                live = flow
        for flow in ended:
            self._complete(flow)
            self._detach(flow, now)
        if live is not None:
            self.rates_recomputed += 1
            # NOTE: the walk's min(capacity[i] for i in ids): the same values in the same order, no generator.
            rate, weight = min(map(self._capacity.__getitem__, live.ids)), live.weight
            self._set_rates([live], rate if weight == 1 else rate / weight, now)
