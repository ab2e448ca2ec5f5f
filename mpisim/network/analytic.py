"""The analytic network: path latency plus bytes over the bottleneck, and no contention.

This is the Hockney (alpha-beta) model that the textbook cost formulas assume. A message of
*n* bytes from rank *src* to rank *dst* takes

    T(n) = alpha + n * beta,   alpha = route.latency,   beta = 1 / route.bottleneck

where the route's latency is the sum of its links' latencies and its bottleneck is the slowest
link's effective bandwidth (nominal bandwidth times efficiency). Every transfer sees the whole
bottleneck bandwidth, however many other transfers cross the same links at the same moment:
the model deliberately ignores contention. That makes it the *teaching* model: on it a ring
allreduce takes exactly ``2(p-1)alpha + 2(p-1)/p n beta``, so simulated times can be checked
against the closed forms to the last digits. When links really are shared (many senders into
one receiver, an oversubscribed fat-tree core), it is optimistic; the ``fairshare`` model is
the one that shares bandwidth.

Link accounting is kept anyway, so the same reports work on both models: per link, the bytes
that crossed it and its *busy time*, here the sum of the data phases of the transfers through
it. Transfers overlap freely in this model, so a busy time longer than the run itself is
possible, and it points at a link where the analytic model ignored contention.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from heapq import heappush
from typing import TYPE_CHECKING, Any

from simpy.events import NORMAL

from mpisim.engine.records import LinkRecord
from mpisim.network.base import register_model

if TYPE_CHECKING:
    from mpisim.engine.sim import Proc, Simulation
    from mpisim.network.links import Link, Route
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


class _Delivery:
    """A transfer in flight on the analytic network: a queue entry processed when the last byte arrives.

    Like :class:`~mpisim.engine.events.Call`, it carries only what SimPy's event loop reads.
    """

    __slots__ = ("arg", "callbacks", "fn", "nbytes", "route", "t_data")
    _ok = True
    _value = None

    def __init__(self, net: AnalyticNetwork, route: Route, nbytes: int, fn: Callable[[Any], None], arg: Any,
                 latency: float) -> None:
        env = net.env
        self.callbacks = net._deliver_cbs
        self.route, self.nbytes, self.fn, self.arg = route, nbytes, fn, arg
        self.t_data = env._now + latency
        heappush(env._queue, (env._now + (latency + nbytes / route.bottleneck), NORMAL, next(env._eid), self))


@register_model("analytic")
class AnalyticNetwork:
    """Contention-free network: each transfer takes ``route.latency + nbytes / route.bottleneck``.

    ``link_bytes[i]`` and ``link_busy[i]`` hold the bytes and summed data-phase seconds of the
    link whose ``index`` is *i* (the lists grow as links are first used); :meth:`link_stats`
    gives the same per link name.
    """

    def __init__(self, sim: Simulation, topology: Topology) -> None:
        self.sim = sim
        self.topology = topology
        self.env = sim.env
        self.link_bytes: list[int] = []
        self.link_busy: list[float] = []
        self.transfers = 0
        self._deliver_cbs = (self._deliver,)  # NOTE: bound once, not once per transfer

    def transfer(self, src: int, dst: int, nbytes: int) -> Proc[None]:
        """Move *nbytes* from rank *src* to rank *dst*; return when the last byte arrives.

        A rank sending to itself (or an empty route) returns at once without yielding any
        event; a zero-byte transfer pays the route latency only.
        """
        if src == dst:
            return
        route = self.topology.route(src, dst)
        if not route.links:
            return
        t_data = self.env.now + route.latency
        yield self.env.timeout(route.latency + nbytes / route.bottleneck)
        self._arrived(route, nbytes, t_data)

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
        self._arrived(delivery.route, delivery.nbytes, delivery.t_data)
        if delivery.fn is not None:
            delivery.fn(delivery.arg)

    def _arrived(self, route: Route, nbytes: int, t_data: float) -> None:
        self.transfers += 1
        if nbytes > 0:
            self._account(route.links, nbytes, t_data, self.env.now)

    def link_stats(self) -> dict[str, LinkStats]:
        """Return bytes and busy seconds per link name, for every link of the topology."""
        stats = {}
        for link in self.topology.links:
            i = link.index
            used = i < len(self.link_bytes)
            stats[link.name] = LinkStats(
                link.name,
                self.link_bytes[i] if used else 0,
                self.link_busy[i] if used else 0.0,
                link.effective_bandwidth,
            )
        return stats

    def _account(self, links: tuple[Link, ...], nbytes: int, t_data: float, t_done: float) -> None:
        tracer = self.sim.tracer
        for link in links:
            i = link.index
            if not 0 <= i < len(self.link_bytes):
                if i < 0:
                    raise ValueError(f"link {link.name!r} has no index; it is not part of a topology")
                grow = i + 1 - len(self.link_bytes)
                self.link_bytes.extend([0] * grow)
                self.link_busy.extend([0.0] * grow)
            self.link_bytes[i] += nbytes
            self.link_busy[i] += t_done - t_data
            if tracer.record_links:
                tracer.link(LinkRecord(link.name, t_data, t_done, nbytes))
