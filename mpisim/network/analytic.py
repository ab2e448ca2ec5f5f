"""The analytic network: path latency plus bytes over the bottleneck, links never above capacity.

This is the Hockney (alpha-beta) model that the textbook cost formulas assume. A message of
*n* bytes from rank *src* to rank *dst* that has its links to itself takes

    T(n) = alpha + n * beta,   alpha = route.latency,   beta = 1 / route.bottleneck

where the route's latency is the sum of its links' latencies and its bottleneck is the slowest
link's effective bandwidth (nominal bandwidth times efficiency). Transfers over disjoint links
never affect each other: there is no contention between independent transfers, so on a
topology where every pair of ranks has its own link (``full``) a ring allreduce takes exactly
``2(p-1)alpha + 2(p-1)/p n beta``, and simulated times can be checked against the closed forms
to the last digits. That makes it the *teaching* model, and the fast one: a transfer costs two
queue entries and no rate solve.

**Links serve in turn.** A link cannot carry more than its capacity, whatever the model: when
transfers overlap on a link (the channels of one GPU collective leaving through one NVLink
port, many senders into one receiver) the link serves their bytes in turn, in the order their
bytes reach it. Each transfer's bytes take ``n / capacity`` of every link on its route, from
when its latency has passed and that link has cleared its earlier work, and it arrives when
the last of its links has served it (at the earliest ``alpha + n * beta``). Over any interval
a link therefore carries at most ``capacity x interval`` bytes, so no collective reports a bus
bandwidth its links cannot carry. Three refinements keep this close to what networks do:

* transfers of *different* pairs of ranks whose bytes reach a link at the same instant are
  served together (they all arrive when the link has served them all), as the link would
  interleave their packets -- which also keeps the model free of arbitrary tie-breaking
  between the ranks of a symmetric algorithm; messages of *one* pair travel one connection in
  order;
* a transfer of at most one packet (:data:`PACKET_BYTES`: an RTS, a CTS, a FIN, a pipeline
  flag, a tiny eager message) queues only behind other packets, not behind another transfer's
  megabytes; queued bulk bytes clear that much later;
* this is still not the ``fairshare`` model, which splits a link between the transfers on it
  at once (max-min): here the first transfer in line finishes earlier and the last one at the
  same time. Which of two transfers that reach a link a moment apart goes first can move a
  step by one transfer's time, so on shared links this model may be a few percent slower or
  faster than fair share, and a byte more can reorder two arrivals
  (tests/validation/test_metamorphic.py states the slack). Use ``fairshare`` for contention.

Link accounting: per link, the bytes that crossed it and its *busy time*, the seconds of its
capacity those bytes took (``n / capacity`` each), so a busy time never exceeds the run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mpisim.engine.records import LinkRecord
from mpisim.engine.sim import schedule_at
from mpisim.network.base import Capabilities, PathCosts, register_model, route_costs

if TYPE_CHECKING:
    from mpisim.engine.sim import Proc, Simulation
    from mpisim.network.links import Route
    from mpisim.network.topology import Topology


@dataclass(frozen=True, slots=True)
class LinkStats:
    """Traffic totals of one directed link, for "which link saturates" tables and plots.

    ``nbytes`` counts the bytes of every finished transfer that crossed the link and
    ``busy_time`` the seconds the link carried data (see each model's docstring for its exact
    meaning). ``capacity`` is the link's effective bandwidth, so ``nbytes / (elapsed *
    capacity)`` is its average utilisation over a run of length *elapsed*.
    """

    name: str
    nbytes: int
    busy_time: float
    capacity: float


#: A transfer of at most this many bytes fits in one packet (InfiniBand's largest MTU): links
#: interleave it with other transfers' packets instead of queueing it behind their bytes.
PACKET_BYTES = 4096


class _Batch:
    """Transfers of different routes whose bytes reached one link at the same instant ``t``: served together.

    The link starts on them at ``begin`` (when its earlier work has cleared) and has served them
    all at ``end``: ``begin`` plus their bytes over its capacity (plus packets let through first).
    """

    __slots__ = ("begin", "end", "routes", "t", "waits")

    def __init__(self, t: float, begin: float, work: float, route: Route | None) -> None:
        self.t, self.begin, self.end = t, begin, begin + work
        #: The routes of its members: a second transfer over the same route (the same pair of
        #: ranks, one connection) does not join the batch but follows it, in order.
        self.routes = {route}
        #: True once a member would arrive later than alone: the batch queued behind earlier
        #: work, has more than one member, or let a packet go first.
        self.waits = begin > t


class _Delivery:
    """A transfer in flight on the analytic network, as a queue entry SimPy's event loop processes.

    It is processed when its latency has passed (its bytes reach the links, which queue them:
    :meth:`AnalyticNetwork._enter`) and when its last byte should have arrived
    (:meth:`AnalyticNetwork._deliver`; if transfers joined one of its batches meanwhile, it goes
    back into the queue for the batch's new end). Like :class:`~mpisim.engine.events.Call`, it
    carries only what the event loop reads. ``t_alone`` is its arrival on idle links.
    """

    __slots__ = ("arg", "batches", "callbacks", "fn", "nbytes", "route", "t_alone")
    _ok = True
    _value = None

    def __init__(self, net: AnalyticNetwork, route: Route, nbytes: int, fn: Callable[[Any], None] | None, arg: Any,
                 latency: float) -> None:
        env = net.env
        self.route, self.nbytes, self.fn, self.arg = route, nbytes, fn, arg
        self.batches: list[_Batch] | None = None
        now = env.now
        self.t_alone = now + (latency + nbytes / route.bottleneck)
        if nbytes == 0:  # nothing to queue: it arrives after the latency
            self.callbacks = net._deliver_cbs
            schedule_at(env, self.t_alone, self)
        elif latency > 0:
            self.callbacks = net._enter_cbs
            schedule_at(env, now + latency, self)
        else:
            net._enter(self)

    def due(self) -> float:
        """When the last byte arrives: alone, or when the last link that made it wait has served its batch."""
        t = self.t_alone
        for batch in self.batches or ():
            if batch.end > t and batch.waits:
                t = batch.end
        return t


@register_model("analytic")
class AnalyticNetwork:
    """Contention-free between independent transfers; each link serves overlapping ones in turn.

    A transfer alone on its links takes ``route.latency + nbytes / route.bottleneck``.
    ``link_bytes[i]`` and ``link_busy[i]`` hold the bytes and the seconds of capacity used of
    the link whose ``index`` is *i*; :meth:`link_stats` gives the same per link name.
    """

    capabilities = Capabilities()  # a link serves its transfers in turn: no max-min sharing, no batches

    def path_costs(self, src: int, dst: int) -> PathCosts:
        """The costs of the route from rank *src* to rank *dst*, alone (NetworkModel.path_costs)."""
        return route_costs(self.topology, src, dst)

    def __init__(self, sim: Simulation, topology: Topology) -> None:
        self.sim = sim
        self.topology = topology
        self.env = sim.env
        n = len(topology.links)
        self.link_bytes: list[int] = [0] * n
        self.link_busy: list[float] = [0.0] * n
        #: Per link: its last batch of bulk transfers, and when its queued packets clear.
        self._tail: list[_Batch | None] = [None] * n
        self._free_packets: list[float] = [0.0] * n
        self.transfers = 0
        self._deliver_cbs = (self._deliver,)  # NOTE: bound once, not once per transfer
        self._enter_cbs = (self._enter,)

    def _enter(self, delivery: _Delivery) -> None:
        """The transfer's latency has passed: its bytes join each link's queue; schedule its arrival.

        Bulk bytes join the link's last batch if it formed at this very instant from other
        routes, else start a new batch once the link's earlier work has cleared. A packet-sized
        transfer queues only behind earlier packets, and the link's queued bulk work clears that
        much later.
        """
        route, nbytes = delivery.route, delivery.nbytes
        ids = route.ids
        if max(ids) >= len(self._tail) or min(ids) < 0:
            self._grow(route)
        now = self.env.now
        tails = self._tail
        batches = delivery.batches = []
        if nbytes <= PACKET_BYTES:
            packets = self._free_packets
            for link in route.links:
                i = link.index
                work = nbytes / link.effective_bandwidth
                begin = packets[i] if packets[i] > now else now
                packets[i] = begin + work
                batches.append(_Batch(now, begin, work, None))
                tail = tails[i]
                if tail is not None and tail.end > now:
                    tail.end += work  # the packet goes first; queued bulk bytes wait for it
                    tail.waits = True
                else:
                    tails[i] = _Batch(now, packets[i], 0.0, None)  # bulk arriving meanwhile waits for it
        else:
            for link in route.links:
                i = link.index
                work = nbytes / link.effective_bandwidth
                tail = tails[i]
                if tail is None:
                    tail = tails[i] = _Batch(now, now, work, route)
                elif tail.t == now and tail.end > now and route not in tail.routes:
                    tail.end += work
                    tail.routes.add(route)
                    tail.waits = True
                else:
                    tail = tails[i] = _Batch(now, tail.end if tail.end > now else now, work, route)
                batches.append(tail)
        delivery.callbacks = self._deliver_cbs
        schedule_at(self.env, delivery.due(), delivery)

    def _grow(self, route: Route) -> None:
        """Make room for the links of *route* (links added after the model was made)."""
        for link in route.links:
            if link.index < 0:
                raise ValueError(f"link {link.name!r} has no index; it is not part of a topology")
        grow = max(route.ids) + 1 - len(self._tail)
        for table, zero in ((self.link_bytes, 0), (self.link_busy, 0.0), (self._tail, None), (self._free_packets, 0.0)):
            table.extend([zero] * grow)

    def transfer(self, src: int, dst: int, nbytes: int) -> Proc[None]:
        """Move *nbytes* from rank *src* to rank *dst*; return when the last byte arrives.

        A rank sending to itself (or an empty route) returns at once without yielding any
        event; a zero-byte transfer pays the route latency only.
        """
        done = self.env.event()
        if not self.post(src, dst, nbytes, done.succeed, None):
            yield done

    def post(self, src: int, dst: int, nbytes: int, fn: Callable[[Any], None] | None, arg: Any,
             latency: float | None = None, route: Route | None = None) -> bool:
        """Start the same transfer as :meth:`transfer` and call ``fn(arg)`` when it has arrived.

        Returns True, without calling *fn*, when the transfer is over at once (a rank sending
        to itself); the caller then goes on by itself, as a generator would not have yielded.
        *fn* may be None for a transfer nobody waits for (it still loads the network).
        *latency*, if given, replaces the route's (what is left of it for a held-back transfer).
        *route*, if given, replaces the topology's route from *src* to *dst* (a relayed path
        such as :meth:`~mpisim.network.topology.Topology.pxn_route`).
        """
        if src == dst:
            return True
        if route is None:
            route = self.topology.route(src, dst)
        if not route.links:
            return True
        _Delivery(self, route, nbytes, fn, arg, route.latency if latency is None else latency)
        return False

    def _deliver(self, delivery: _Delivery) -> None:
        env = self.env
        due = delivery.due()
        if due > env.now:  # transfers joined one of its batches after it was scheduled
            delivery.callbacks = self._deliver_cbs
            schedule_at(env, due, delivery)
            return
        self.transfers += 1
        if delivery.nbytes > 0:
            self._account(delivery)
        if delivery.fn is not None:
            delivery.fn(delivery.arg)

    def used_link_stats(self) -> dict[str, LinkStats]:
        """:meth:`link_stats` of the links that carried bytes only, in the same order."""
        return self.link_stats(used_only=True)

    def link_stats(self, used_only: bool = False) -> dict[str, LinkStats]:
        """Return bytes and busy seconds per link name, for every link of the topology (pace links aside);
        with *used_only*, only the links that carried bytes, in the same order."""
        stats = {}
        for link in self.topology.links:
            if link.kind == "pace":
                continue
            i = link.index
            used = i < len(self.link_bytes)
            if used_only and not (used and self.link_bytes[i]):
                continue
            stats[link.name] = LinkStats(
                link.name,
                self.link_bytes[i] if used else 0,
                self.link_busy[i] if used else 0.0,
                link.effective_bandwidth,
            )
        return stats

    def _account(self, delivery: _Delivery) -> None:
        nbytes = delivery.nbytes
        link_bytes, link_busy = self.link_bytes, self.link_busy
        record = self.sim.tracer.record_links
        for link, batch in zip(delivery.route.links, delivery.batches, strict=True):  # type: ignore[arg-type]
            i = link.index
            link_bytes[i] += nbytes
            link_busy[i] += nbytes / link.effective_bandwidth
            if record and link.kind != "pace":
                self.sim.tracer.link(LinkRecord(link.name, batch.begin, batch.end, nbytes))
