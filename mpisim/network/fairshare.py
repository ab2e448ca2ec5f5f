"""The fair-share network: concurrent flows share every directed link max-min fairly.

**Flows.** A transfer of *n* bytes becomes a *flow* (:mod:`mpisim.network.flows`): a fluid
stream over its route's links with one rate at every moment, as in SimGrid's flow models.

**Max-min fairness.** Flows crossing one link share its capacity (its effective bandwidth)
max-min fairly: each flow gets an equal share of its *bottleneck* link, and links that are not
any flow's bottleneck give their leftover capacity to the flows that can still use it. The
rates come from :mod:`mpisim.network.maxmin` (progressive filling, its one-level shortcut and
the memo of components seen before); this module decides when to ask for them, gives them to
its flows and drives their completions.

**Latency before bandwidth.** A transfer waits for its route's latency before it becomes a
flow (:class:`~mpisim.network.flows.InFlight`): a lone flow takes ``latency + n / bottleneck``.

**Incremental, batched recomputation.** A start or finish changes the rates only of flows in
the same *connected component*: flows linked to the changed one through shared links,
directly or through other flows. Only that component is re-solved; flows elsewhere keep their
rates and their scheduled completion times. And starts (and finishes) that happen at the same
simulated instant are handled together: the first change at an instant schedules one
*solve event*; later changes at that instant only join its list. The solve event has a
priority below SimPy's NORMAL, so SimPy processes it after every ordinary event of that
instant: when 1024 ranks start a ring step together, the network solves once, not 1024 times.
This is what SimGrid's LMM solver calls *selective update* (a change marks the constraints
reachable from the modified one through shared variables, and only those are re-solved).

**One level.** A shared component whose smallest fair share lies on some link of every one of
its flows (the ring of FINs and requests-to-send that mpisim's default MPI parameters make) is
solved in two linear passes instead of by progressive filling, with the very same floats
(:meth:`~mpisim.network.maxmin.MaxMin.one_level`).

**Two flows.** When a ring's ranks drift apart, most shared components are two flows: a
data transfer and a control message (a request-to-send, a clear-to-send, a FIN) crossing the
same port at one moment. Such a component is recognised from its seed link's flows and solved
one level deep without the general walk's stack and lists (:meth:`FairShareNetwork._solve_pair`):
the same progress updates, the same level and the same rates, set in the same order.

**Weighted flows.** :meth:`FairShareNetwork.post` can take *w* equal transfers between the same
two ranks started at one instant as one flow of *weight* w (:mod:`mpisim.network.flows`).

**Components seen before.** A component's rates depend only on its flows' routes and weights
and the order of its flows on each link, so progressive filling of a component of at least
:data:`_FILL_MEMO_MIN` flows is recorded, and a later component with the same key replays the
record, the very floats set in the very order (:class:`~mpisim.network.maxmin.FillMemo`).

**Events batched at one instant.** For the MPI layer, which calls :meth:`FairShareNetwork.post`
rather than running a ``transfer`` generator, the other per-transfer events are batched too:
transfers whose latency ends at the same instant share one event that turns them into flows
(in posting order, which is the order their separate events would have had), and flows that
one callback completes share one event that tells their callers, in completion order, with
the URGENT work each caller starts run in between, as SimPy would have run it.

**Transfers waited for together.** :meth:`FairShareNetwork.post_all` posts many transfers for
a caller that needs each one's arrival time and waits for all (:class:`~mpisim.network.flows.Arrivals`).

**Solves without an event.** The solve of an instant is an event of its own only when
something else is due at that instant. When the flows starting at an instant are the only
thing due then (the event that turns them into flows is the instant's last), or the callers
told of the flows finishing are (see :mod:`mpisim.network.completions`), the solve runs at
once, after them: the place its event would have had. A ring whose ranks drift apart (uneven
blocks, hops of different speeds) starts and finishes its flows at distinct instants, and pays
one event less for each.

**Completions** are driven by one timeout over a heap of due flows
(:mod:`mpisim.network.completions`, SimGrid's *lazy action heap*, with groups).

**Floating point.** A flow finishes at the time computed for it, not when a subtraction
happens to reach zero: the driver completes every flow whose completion time is within a
relative 1e-12 of now. When a solve brings a flow's progress up to date and less than a
relative 1e-9 of its bytes remain, it is complete too, so rounding never leaves a flow with a
few nano-bytes that would cost another event.

**Determinism.** Nothing depends on object ids or set order: flows carry a creation sequence
number, per-link flow tables are dicts keyed by it (so they iterate in creation order), ties
between equally loaded links are broken by link index, and flows that end at one instant
resume their processes in creation order.

**Link activity.** For utilisation plots, when ``sim.tracer.record_links`` is on, each flow
emits one :class:`~mpisim.engine.records.LinkRecord` per link of its route when it finishes:
``(link, t_start, t_end, nbytes)`` from the start of its bandwidth phase to its last byte.
That is bounded (flows x hops records) and exact in bytes; a plot that spreads each record
evenly over its interval shows the flow's average rate there, not its rate changes.
Independently of the tracer, cheap per-link counters are always kept: ``link_bytes[i]`` (bytes
of finished flows over the link whose ``index`` is *i*) and the link's busy time (seconds with
at least one active flow); :meth:`FairShareNetwork.link_stats` reports both per link name.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import simpy

from mpisim.engine.events import Call
from mpisim.engine.records import LinkRecord
from mpisim.network.analytic import LinkStats
from mpisim.network.base import Capabilities, PathCosts, register_model, route_costs
from mpisim.network.completions import CompletionDriver
from mpisim.network.flows import (
    GROUP,
    Arrivals,
    Flow,
    InFlight,
    flow_seq,
)
from mpisim.network.maxmin import FillMemo, MaxMin
from mpisim.network.shortcuts import BYTES_RTOL as _BYTES_RTOL
from mpisim.network.shortcuts import SmallComponents

if TYPE_CHECKING:
    from mpisim.engine.sim import Proc, Simulation
    from mpisim.network.links import Link, Route
    from mpisim.network.topology import Topology

#: SimPy processes the events of one instant by priority (URGENT = 0, NORMAL = 1); a solve
#: scheduled with this priority runs after every ordinary event of its instant.
LATE = 2

#: Components of at least this many flows have their progressive filling recorded and replayed
#: (module docstring, "Components seen before"); smaller ones fill faster than a key is built.
_FILL_MEMO_MIN = 16


@register_model("fairshare")
class FairShareNetwork(SmallComponents, CompletionDriver):
    """Flow-level network whose concurrent flows share each directed link max-min fairly.

    Link accounting: ``link_bytes[i]`` is the bytes of finished flows over the link whose
    ``index`` is *i* (the list grows as links are first used); :meth:`link_stats` gives bytes
    and busy seconds per link name. Counters for tests and benchmarks: ``recomputations``
    (solve events run), ``rates_recomputed`` (flows whose rate a solve recomputed, summed),
    ``one_level_solves`` (shared components solved without progressive filling's heap),
    ``flows_started``, ``flows_finished`` and ``active_flows``.

    Assumes a route never crosses the same link twice and that link capacities do not change
    once a flow has used the link.
    """

    #: Declared (base.Capabilities): links shared max-min fairly, batches (:meth:`post_all`), and
    #: :meth:`post` takes ``weight``: one flow may stand for equal transfers started together.
    capabilities = Capabilities(max_min_sharing=True, post_all=True, weighted=True)

    def path_costs(self, src: int, dst: int) -> PathCosts:
        """The costs of the route from rank *src* to rank *dst*, alone (NetworkModel.path_costs)."""
        return route_costs(self.topology, src, dst)

    def __init__(self, sim: Simulation, topology: Topology) -> None:
        self.sim = sim
        self.topology = topology
        self.env = sim.env

        # Per-link state in flat lists indexed by Link.index, grown when a link is first used.
        # The max-min system (capacities, the active flows per link by sequence number, solve
        # marks, extra weights) is the solver's; NOTE: its lists are aliased here, read per flow.
        self._maxmin = solver = MaxMin()
        self._capacity = solver.capacity
        self._flows_on: list[dict[int, Flow]] = solver.flows_on
        self._mark = solver.mark
        self._extra = solver.extra
        self._links: list[Link | None] = []
        self.link_bytes: list[int] = []
        self._busy_time: list[float] = []
        self._busy_since: list[float] = []

        self._next_seq = 0
        self._starting: list[Flow] = []
        self._first_bytes: dict[float, list[Flow]] = {}  # posted transfers by end of latency
        self._arrivals: list[Flow] | None = None  # flows completed by the current callback
        # NOTE: the topology's own route cache, read directly when it is a dict (one call less
        # per transfer); Topology.route fills it.
        cache = getattr(topology, "_routes", None)
        self._route_cache: dict = cache if isinstance(cache, dict) else {}
        self._finishing: list[Flow] = []
        self._solve_scheduled = False
        #: The arrivals whose callback runs the pending solve, or None (completions.py, _on_driver).
        self._solve_after: list[Flow] | None = None
        self._stamp = 0
        self._heap: list[tuple[float, int, int, Flow]] = []
        self._driver_at = math.inf
        self._driver_gen = 0
        # NOTE: bound methods created once, not once per event.
        self._solve_cb = self._solve
        self._driver_cb = self._on_driver
        self._latency_over_cbs = (self._latency_over_cb,)

        self.active_flows = 0
        self.flows_started = 0
        self.flows_finished = 0
        self.recomputations = 0
        self.rates_recomputed = 0
        self.one_level_solves = 0
        self._fill_memo = FillMemo()  # "Components seen before"

    @property
    def fills_replayed(self) -> int:
        """Components whose progressive filling was replayed from the memo ("Components seen before")."""
        return self._fill_memo.replayed

    # -- the NetworkModel interface -------------------------------------------------------

    def transfer(self, src: int, dst: int, nbytes: int) -> Proc[None]:
        """Move *nbytes* from rank *src* to rank *dst*; return when the last byte arrives.

        The route's latency is paid first, then the bytes flow at their max-min fair rate.
        A rank sending to itself (or an empty route) returns at once without yielding any
        event; a zero-byte transfer pays the latency only and never becomes a flow.
        """
        if src == dst:
            return
        route = self.topology.route(src, dst)
        if not route.links:
            return
        if route.lanes:
            done = self.env.event()
            if not self.post(src, dst, nbytes, lambda _: done.succeed(), None, route=route):
                yield done
            return
        if route.latency > 0:
            yield self.env.timeout(route.latency)
        if nbytes <= 0:
            return
        done = self.env.event()
        self._start_flow(route, nbytes, done, None, None)
        yield done

    def post(self, src: int, dst: int, nbytes: int, fn: Callable[[Any], None] | None, arg: Any,
             latency: float | None = None, route: Route | None = None, weight: int = 1) -> bool:
        """Start the same transfer as :meth:`transfer` and call ``fn(arg)`` when it has arrived.

        *fn* may be None for a transfer nobody waits for (it still shares the links). *latency*,
        if given, replaces the route's: the part of it still to pass for a transfer that was
        held back after its latency had begun (a connection's queue, see mpisim.mpi.protocols).
        *route*, if given, replaces the topology's route from *src* to *dst* (a relayed path
        such as :meth:`~mpisim.network.topology.Topology.pxn_route`). *weight* > 1 makes it
        one flow standing for that many equal transfers of ``nbytes / weight`` bytes each
        between the same ranks, started together (module docstring, "Weighted flows").

        Returns True, without calling *fn*, when the transfer is over at once (a rank sending
        to itself, or a zero-byte transfer on a route without latency); the caller then goes
        on by itself, exactly where a :meth:`transfer` generator would not have yielded.
        """
        if src == dst:
            return True
        if route is None:
            route = self._route_cache.get((src, dst)) or self.topology.route(src, dst)
        if not route.links:
            return True
        if route.lanes:
            return self._post_lanes(src, dst, nbytes, fn, arg, latency, route, weight)
        if latency is None:
            latency = route.latency
        if weight != 1:
            self._maxmin.weighted = True
        if latency > 0:
            if nbytes <= 0:
                InFlight(self, route, nbytes, fn, arg, latency)  # its arrival is what the caller waits for
                return False
            # NOTE: transfers whose first byte arrives at the same instant share one event. Only
            # the order in which they become flows is observable (it numbers them), and that is
            # the order of posting either way.
            # NOTE: the flow is created now and numbered when it starts (_first_bytes_cb).
            env = self.env
            t_first = env._now + latency  # NOTE: the clock's attribute, not its property (4 posts a message)
            batch = self._first_bytes.get(t_first)
            if batch is None:
                batch = self._first_bytes[t_first] = []
                Call(env, self._first_bytes_due, t_first, latency)
            batch.append(Flow(-1, route, nbytes, None, fn, arg, weight))
            return False
        if nbytes <= 0:
            return True
        if self._first_bytes:
            self._first_bytes_cb(self.env.now)  # flows due now start first, as posted
        self._start_flow(route, nbytes, None, fn, arg, weight)
        return False

    def post_all(self, transfers: list[tuple[int, int, int, int]], done: Callable[[list[float]], None]) -> None:
        """:meth:`post` each ``(src, dst, nbytes, weight)`` of *transfers*; call ``done(t_arrived)`` once all have arrived.

        *t_arrived* holds each transfer's arrival time. The same flows, events and order as
        one :meth:`post` per transfer with a callback that notes its arrival (this is that
        loop with the common case inlined: a route with latency, some bytes), the callback
        that completes the set where its own would have run; ``done`` is called before this
        returns if every transfer is over at once.
        """
        fn = Arrivals(self.env, len(transfers), done)
        over = []
        env = self.env
        now = env.now
        routes, route_of = self._route_cache, self.topology.route
        first_bytes = self._first_bytes
        t_batch, batch = -1.0, []
        for i, (src, dst, nbytes, weight) in enumerate(transfers):
            route = None if src == dst else routes.get((src, dst)) or route_of(src, dst)
            if route is None or not route.links or route.latency <= 0 or nbytes <= 0 or route.lanes:
                if self.post(src, dst, nbytes, fn, i, weight=weight):
                    over.append(i)
                t_batch = -1.0  # post() may have started the batch of now
                continue
            if weight != 1:
                self._maxmin.weighted = True
            latency = route.latency
            t_first = now + latency
            if t_first != t_batch:
                t_batch = t_first
                batch = first_bytes.get(t_first)  # type: ignore[assignment]
                if batch is None:
                    batch = first_bytes[t_first] = []
                    Call(env, self._first_bytes_due, t_first, latency)
            batch.append(Flow(-1, route, nbytes, None, fn, i, weight))
        for i in over:
            fn(i)
        if not transfers:
            done(fn.t_arrived)

    def _post_lanes(self, src: int, dst: int, nbytes: int, fn: Callable[[Any], None] | None, arg: Any,
                    latency: float | None, route: Route, weight: int) -> bool:
        """:meth:`post` a connection split over ``route.lanes``: an equal share of the bytes per lane
        (the first lanes take the remainder), ``fn(arg)`` once the last lane has arrived."""
        lanes = route.lanes
        share, extra = divmod(nbytes, len(lanes))
        left = [len(lanes)]

        def arrived(_: Any) -> None:
            left[0] -= 1
            if left[0] == 0 and fn is not None:
                fn(arg)

        over = 0
        for i, lane in enumerate(lanes):
            if self.post(src, dst, share + (i < extra), arrived, None, latency, lane, weight):
                over += 1
        if over == len(lanes):
            return True
        for _ in range(over):
            arrived(None)
        return False

    def _first_bytes_due(self, t_first: float) -> None:
        """The event at *t_first*: :meth:`_first_bytes_cb`, solved at once when nothing else is due now."""
        self._first_bytes_cb(t_first, True)

    def _first_bytes_cb(self, t_first: float, due: bool = False) -> None:
        """Turn the posted transfers whose latency ends at *t_first* into flows, in posting order.

        *due*: called as its event, which nothing else of this instant follows if
        :meth:`_alone_now`; then the solve runs here instead of as an event of its own.
        """
        batch = self._first_bytes.pop(t_first, None)
        if batch:
            seq = self._next_seq
            for flow in batch:
                flow.seq = seq
                seq += 1
            self._next_seq = seq
            self._starting.extend(batch)
            self.flows_started += len(batch)
            if not self._solve_scheduled:
                if due and self._alone_now():
                    self._solve(None)
                    return
                self._solve_scheduled = True
                Call(self.env, self._solve_cb, None, 0, LATE)

    def _latency_over_cb(self, pending: InFlight) -> None:
        """The first byte has arrived: the transfer becomes a flow (or is over, if empty)."""
        if pending.nbytes <= 0:
            if pending.fn is not None:
                pending.fn(pending.arg)
        else:
            self._start_flow(pending.route, pending.nbytes, None, pending.fn, pending.arg)

    def _start_flow(self, route: Route, nbytes: int, done: simpy.Event | None,
                    fn: Callable[[Any], None] | None, arg: Any, weight: int = 1) -> None:
        flow = Flow(self._next_seq, route, nbytes, done, fn, arg, weight)
        self._next_seq += 1
        self.flows_started += 1
        self._starting.append(flow)
        if not self._solve_scheduled:
            self._solve_scheduled = True
            Call(self.env, self._solve_cb, None, 0, LATE)

    # -- link statistics ------------------------------------------------------------------

    def used_link_stats(self) -> dict[str, LinkStats]:
        """:meth:`link_stats` of the links that carried bytes only, in the same order."""
        return self.link_stats(used_only=True)

    def link_stats(self, used_only: bool = False) -> dict[str, LinkStats]:
        """Return bytes (of finished flows) and busy seconds per link name, for every link (pace links aside).

        With *used_only*, only the links that carried bytes, in the same order (a million-rank
        world has millions of links, and a summary of the busiest needs only those).
        """
        now = self.env.now
        stats = {}
        links = [link for link in self._links if link is not None] if used_only else self.topology.links
        for link in links:
            if used_only and not self.link_bytes[link.index]:
                continue
            if link.kind == "pace":
                continue
            i = link.index
            nbytes, busy = 0, 0.0
            if i < len(self._links) and self._links[i] is not None:
                nbytes = self.link_bytes[i]
                busy = self._busy_time[i]
                if self._flows_on[i]:
                    busy += now - self._busy_since[i]
            stats[link.name] = LinkStats(link.name, nbytes, busy, link.effective_bandwidth)
        return stats

    # -- flow lifecycle ---------------------------------------------------------------------

    def _request_solve(self) -> None:
        if not self._solve_scheduled:
            self._solve_scheduled = True
            Call(self.env, self._solve_cb, None, 0, LATE)

    def _schedule_solve(self) -> None:
        """The solve event of this instant (a solve already pending: see _arrived_cb)."""
        Call(self.env, self._solve_cb, None, 0, LATE)

    def _alone_now(self) -> bool:
        """True if no event is due at this instant: a solve event scheduled now would be the next
        one processed, so solving at once is the same (module docstring, "Solves without an event")."""
        env = self.env
        queue = env._queue
        return not getattr(env, "_soon", None) and not getattr(env, "_lane", None) and (
            not queue or queue[0][0] != env._now)

    def _solve(self, _: None) -> None:
        """Apply this instant's starts and finishes and re-solve the components they touch."""
        self._solve_scheduled = False
        now = self.env.now
        self._stamp += 1
        stamp = self._stamp
        flows_on, mark = self._flows_on, self._mark
        seeds: list[int] = []
        # NOTE: _detach, and attaching a flow to its links, are inlined below: they run for every flow.
        finishing = self._finishing
        starting = self._starting
        if finishing:
            self._finishing = []
            busy_time, busy_since, link_bytes = self._busy_time, self._busy_since, self.link_bytes
            extra = self._extra
            tracer = self.sim.tracer
            if tracer.record_links:
                for flow in finishing:
                    for i in flow.ids:
                        link = self._links[i]
                        if link.kind != "pace":  # type: ignore[union-attr]
                            tracer.link(LinkRecord(link.name, flow.t_start, now, flow.nbytes))  # type: ignore[union-attr]
            # NOTE: with no flow starting, a link this leaves empty stays empty: the seed loop
            # below would only mark it, so it is not made a seed (the common case: a step ends).
            append = seeds.append if not starting else None
            for flow in finishing:
                seq, nbytes = flow.seq, flow.nbytes
                ids = flow.ids
                for i in ids:
                    on = flows_on[i]
                    del on[seq]
                    if not on:
                        busy_time[i] += now - busy_since[i]
                    elif append is not None:
                        append(i)
                    link_bytes[i] += nbytes
                if append is None:
                    seeds.extend(ids)
                if flow.weight != 1:
                    for i in ids:
                        extra[i] -= flow.weight - 1
            self.active_flows -= len(finishing)
        if starting:
            self._starting = []
            links, busy_since = self._links, self._busy_since
            n_links = len(links)
            crowded = False  # did a starting flow join a link already in use?
            for flow in starting:
                seq = flow.seq
                for i in flow.ids:
                    if not 0 <= i < n_links or links[i] is None:
                        self._register(flow.links[flow.ids.index(i)])
                        n_links = len(links)
                    on = flows_on[i]
                    if on:
                        crowded = True
                    else:
                        busy_since[i] = now
                    on[seq] = flow
                if flow.weight != 1:
                    extra = self._extra
                    for i in flow.ids:
                        extra[i] += flow.weight - 1
                flow.t_start = flow.t_last = now
            self.active_flows += len(starting)
            heap = self._heap
            group: list[tuple[int, int, Flow]] | None = None  # alone flows sharing one finish time
            t_group = -1.0
            alone = 0
            for flow in starting:
                ids = flow.ids
                # NOTE: if no starting flow joined a busy link, each is alone: no need to look.
                if crowded:
                    for i in ids:
                        if len(flows_on[i]) != 1:
                            break
                    else:
                        i = -1
                    if i >= 0:
                        # One of its links is seed enough: its links are one component, and a
                        # walk from any of them (they are all unmarked, or all marked) finds it.
                        seeds.append(ids[0])
                        continue
                # Alone on all its links (the common case): its component is itself and
                # its rate its bottleneck's capacity -- what _solve_alone would find. Its
                # links are marked solved only if a finish made seeds that might reach them
                # (a shared flow's seeds never do: it shares none of this flow's links).
                if finishing:
                    for i in ids:
                        mark[i] = stamp
                flow.mark = stamp
                alone += 1
                rate = flow.bottleneck
                flow.rate = rate
                version = flow.version = flow.version + 1
                if rate > 0.0:
                    t_finish = flow.t_finish = now + flow.remaining / rate
                    # NOTE: flows of a step (same size, same bottleneck) finish together:
                    # they share one heap entry, a group (see _on_driver).
                    if t_finish == t_group:
                        group.append((flow.seq, version, flow))  # type: ignore[union-attr]
                    else:
                        group, t_group = [(flow.seq, version, flow)], t_finish
                        heapq.heappush(heap, (t_finish, flow.seq, GROUP, group))
                else:
                    flow.t_finish = math.inf
            self.rates_recomputed += alone

        for i in seeds:
            if mark[i] != stamp:
                if flows_on[i]:
                    self._solve_component(i, stamp, now)
                else:
                    mark[i] = stamp  # a link left empty: nothing to solve
        self._arrivals = None
        self.recomputations += 1
        self._arm_driver(now)

    def _solve_component(self, seed: int, stamp: int, now: float) -> None:
        """Collect the component around link *seed* and give its flows max-min fair rates."""
        mark, flows_on = self._mark, self._flows_on
        if len(flows_on[seed]) == 1 and self._solve_alone(seed, stamp, now):
            return
        if len(flows_on[seed]) <= 2 and self._solve_pair(seed, stamp, now):
            return
        mark[seed] = stamp
        stack = [seed]
        links: list[int] = []
        live: list[Flow] = []
        ended: list[Flow] = []
        # Walk links and flows breadth-first; bring each flow's progress up to now at its old
        # rate as it is found. Flows with nothing left end here (detached after the walk).
        while stack:
            i = stack.pop()
            links.append(i)
            for flow in flows_on[i].values():
                if flow.mark == stamp:
                    continue
                flow.mark = stamp
                if flow.rate:
                    flow.remaining -= flow.rate * (now - flow.t_last)
                flow.t_last = now
                if flow.remaining <= _BYTES_RTOL * flow.nbytes:
                    ended.append(flow)
                else:
                    live.append(flow)
                for j in flow.ids:
                    if mark[j] != stamp:
                        mark[j] = stamp
                        stack.append(j)
        if ended:
            ended.sort(key=flow_seq)  # they resume their processes in creation order
            for flow in ended:
                self._complete(flow)
                self._detach(flow, now)
        if not live:
            return
        self.rates_recomputed += len(live)
        if len(links) == 1:
            # One link: max-min fairness is an equal split (between weights, when weighted).
            total = sum(flow.weight for flow in live) if self._maxmin.weighted else len(live)
            self._set_rates(live, self._capacity[links[0]] / total, now)
        elif len(live) == 1:
            # One flow left: it gets its bottleneck's capacity, what progressive filling would
            # find without the heap. (Links of flows that just ended may be in *links*, empty.)
            capacity = self._capacity
            rate, weight = min(capacity[i] for i in live[0].ids), live[0].weight
            self._set_rates(live, rate if weight == 1 else rate / weight, now)
        elif not self._solve_one_level(links, live, now):
            if len(live) < _FILL_MEMO_MIN:
                for flows, share in self._maxmin.progressive_filling(links, len(live), stamp):
                    self._set_rates(flows, share, now)
            else:
                self._fill_recorded(links, live, stamp, now)

    def _fill_recorded(self, links: list[int], live: list[Flow], stamp: int, now: float) -> None:
        """Progressive filling of a large component, replayed if one with the same key was filled before.

        The key is the flows' (weight, route) in creation order. Progressive filling reads
        nothing else of a component: its links are its flows' links (capacities never change
        once used), a link's flows are visited in creation order, and a flow's bytes and the
        time only enter where its new rate is set (:meth:`_set_rates`). So a component with a
        recorded key takes the recorded shares, set -- as :meth:`_set_rates` does, inlined --
        on the same flows in the same order.
        """
        live.sort(key=flow_seq)
        memo = self._fill_memo
        key = memo.key(live)
        record = memo.recall(key)
        if record is None:
            fills = self._maxmin.progressive_filling(links, len(live), stamp)
            for flows, share in fills:
                self._set_rates(flows, share, now)
            memo.remember(key, live, fills)
            return
        fixed = -stamp
        heap = self._heap
        weighted = self._maxmin.weighted
        for positions, share in record:
            # NOTE: _set_rates(flows at positions, share), inlined: one call per bottleneck is
            # most of a replay's cost otherwise. A group never spans two calls.
            group: list[tuple[int, int, Flow]] | None = None
            t_group = -1.0
            for k in positions:
                flow = live[k]
                flow.mark = fixed
                rate = share if not weighted or flow.weight == 1 else share * flow.weight
                if rate == flow.rate:
                    continue
                flow.rate = rate
                version = flow.version = flow.version + 1
                if rate > 0.0:
                    t_finish = flow.t_finish = now + flow.remaining / rate
                    if t_finish == t_group:
                        group.append((flow.seq, version, flow))  # type: ignore[union-attr]
                    else:
                        group, t_group = [(flow.seq, version, flow)], t_finish
                        heapq.heappush(heap, (t_finish, flow.seq, GROUP, group))
                else:
                    flow.t_finish = math.inf

    def _solve_one_level(self, links: list[int], live: list[Flow], now: float) -> bool:
        """Give every flow of the component the same share if progressive filling would (module docstring, "One level").

        Returns False, having changed nothing, if the component has more than one level.
        """
        level = self._maxmin.one_level(links, live)
        if not level:
            return False
        self.one_level_solves += 1
        live.sort(key=flow_seq)
        self._set_rates(live, level, now)
        return True

    def _set_rates(self, flows: list[Flow], share: float, now: float) -> None:
        """Give *flows* the new *share* each (times its weight) and queue their new completion times."""
        heap = self._heap
        group: list[tuple[int, int, Flow]] | None = None
        t_group = -1.0
        weighted = self._maxmin.weighted
        rate = share
        for flow in flows:
            if weighted:
                rate = share if flow.weight == 1 else share * flow.weight
            if rate == flow.rate:
                continue  # same rate: the scheduled completion time is still exact
            flow.rate = rate
            version = flow.version = flow.version + 1
            if rate > 0.0:
                t_finish = flow.t_finish = now + flow.remaining / rate
                # NOTE: consecutive flows (in sequence order) that finish together share one
                # heap entry, as alone flows do in _solve (see _on_driver).
                if t_finish == t_group:
                    group.append((flow.seq, version, flow))  # type: ignore[union-attr]
                else:
                    group, t_group = [(flow.seq, version, flow)], t_finish
                    heapq.heappush(heap, (t_finish, flow.seq, GROUP, group))
            else:
                flow.t_finish = math.inf  # a link of zero capacity: wait for a change

    def _detach(self, flow: Flow, now: float) -> None:
        tracer = self.sim.tracer
        flows_on = self._flows_on
        for i in flow.ids:
            on = flows_on[i]
            del on[flow.seq]
            self._extra[i] -= flow.weight - 1
            if not on:
                self._busy_time[i] += now - self._busy_since[i]
            self.link_bytes[i] += flow.nbytes
            if tracer.record_links and self._links[i].kind != "pace":  # type: ignore[union-attr]
                tracer.link(LinkRecord(self._links[i].name, flow.t_start, now, flow.nbytes))  # type: ignore[union-attr]
        self.active_flows -= 1

    def _register(self, link: Link) -> None:
        """Make room for *link* in the per-link lists (topologies may create links lazily)."""
        i = link.index
        if i < 0:
            raise ValueError(f"link {link.name!r} has no index; it is not part of a topology")
        grow = i + 1 - len(self._links)
        if grow > 0:
            self._maxmin.grow(i + 1)
            self._links.extend([None] * grow)
            self.link_bytes.extend([0] * grow)
            self._busy_time.extend([0.0] * grow)
            self._busy_since.extend([0.0] * grow)
        self._links[i] = link
        self._capacity[i] = link.effective_bandwidth
