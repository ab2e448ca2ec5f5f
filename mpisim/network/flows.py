"""Flows: a transfer in its bandwidth phase, a transfer during its latency, and a set waited for together.

**Flows.** A transfer of *n* bytes becomes a *flow*: a fluid stream that crosses the links of
its route and has, at every moment, one rate (bytes/s). It finishes when its *n* bytes have
been sent at the rates it was given. This is a flow-level model, like SimGrid's network
models: no packets, only rates that change when flows start or finish.

**Latency before bandwidth.** A transfer first waits for its route's latency (switch hops,
wire, NIC and software delay) and only then becomes a flow that occupies bandwidth. The first
byte arrives after the latency; after that the bytes stream at the flow's rate. A lone flow
therefore takes exactly ``latency + n / bottleneck``, the alpha-beta formula that the
``analytic`` model and the textbook costs use, and a tiny message, whose cost is almost all
latency, does not take a share of a busy link for its whole flight time. SimGrid's
flow models do the same (an action joins the max-min system once its latency has elapsed);
unlike SimGrid we do not cap rates by a TCP window.

**Weighted flows.** Equal transfers between the same two ranks that start at the same instant
(the edges of several pipelined trees on one pair, mpisim.collectives.fluid_tree) are served
identically by max-min fairness: same links, same bytes, same start, so the same rate at every
moment and the same finish. :meth:`~mpisim.network.fairshare.FairShareNetwork.post` can take *w* of them as one flow of
*weight* w carrying their summed bytes, whose rate is the sum of theirs: a link's fair share is
its capacity left over the *weights* of its unfixed flows, and fixing a flow takes w shares
from every link it crosses. That is the same allocation in real numbers (in floats, to
rounding), with one flow to solve instead of w; link byte counters get the same sum.

**Transfers waited for together.** :meth:`~mpisim.network.fairshare.FairShareNetwork.post_all` posts many transfers
(a fluid tree's edges, mpisim.collectives.fluid_tree) for a caller that waits for all of
them and needs each one's arrival time. Each arrival but the last is only noted where the
network finds it; the last is told as a ``post`` callback would be,
at the same place among the callbacks of its instant. A callback that only notes a time
changes nothing anyone sees, so this is the same run with a callback per transfer fewer.

These are the records :class:`~mpisim.network.fairshare.FairShareNetwork` moves through its
latency batching, its solves (:mod:`mpisim.network.maxmin` reads a flow's ``seq``, ``ids``,
``weight`` and ``mark``) and its completion driver.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any

import simpy

from mpisim.engine.sim import schedule_at

if TYPE_CHECKING:
    from mpisim.network.links import Route


class Flow:
    """One transfer in its bandwidth phase: the links it crosses, its bytes and its rate."""

    __slots__ = (
        "arg",
        "bottleneck",
        "done",
        "finished",
        "fn",
        "ids",
        "links",
        "mark",
        "nbytes",
        "rate",
        "remaining",
        "seq",
        "t_finish",
        "t_last",
        "t_start",
        "version",
        "weight",
    )

    def __init__(self, seq: int, route: Route, nbytes: int, done: simpy.Event | None,
                 fn: Callable[[Any], None] | None = None, arg: Any = None, weight: int = 1) -> None:
        self.seq = seq  # creation order; the tie-breaker everywhere
        self.links = route.links
        self.ids = route.ids
        self.bottleneck = route.bottleneck  # min capacity of its links: its rate when alone
        self.done = done  # the event a transfer() generator waits for ...
        self.fn = fn  # ... or the call post() makes when the last byte has arrived
        self.arg = arg
        self.nbytes = nbytes
        self.remaining = float(nbytes)  # as of t_last
        self.rate = 0.0
        # t_start and t_last are set when the flow starts (FairShareNetwork._solve): nothing reads them before.
        self.t_finish = math.inf
        self.version = 0
        self.mark = 0  # solve stamp: == stamp when in the component, == -stamp once its rate is fixed
        self.finished = False
        self.weight = weight  # the equal flows it stands for (see "Weighted flows"); rate is their sum

    def __repr__(self) -> str:
        return f"Flow(#{self.seq}, {self.remaining:g}/{self.nbytes} B at {self.rate:g} B/s)"


class InFlight:
    """A posted transfer during its latency: a queue entry processed when the first byte arrives.

    Like :class:`~mpisim.engine.events.Call`, it carries only what SimPy's event loop reads.
    """

    __slots__ = ("arg", "callbacks", "fn", "nbytes", "route")
    _ok = True
    _value = None

    def __init__(self, net: Any, route: Route, nbytes: int, fn: Callable[[Any], None], arg: Any,
                 latency: float) -> None:
        self.callbacks = net._latency_over_cbs
        self.route, self.nbytes, self.fn, self.arg = route, nbytes, fn, arg
        env = net.env
        schedule_at(env, env.now + latency, self)


class Arrivals:
    """The transfers of one :meth:`FairShareNetwork.post_all`: when each arrived, and who waits for them all.

    Calling it with *i* says transfer i has arrived now; the call that completes the set
    calls ``done(t_arrived)``. The network tallies every arrival but the set's last one
    itself, where it finds it (module docstring, "Transfers waited for together").
    """

    __slots__ = ("done", "env", "left", "t_arrived")

    def __init__(self, env: simpy.Environment, n: int, done: Callable[[list[float]], None]) -> None:
        self.env = env
        self.t_arrived = [0.0] * n
        self.left = n
        self.done = done

    def __call__(self, i: int) -> None:
        self.t_arrived[i] = self.env.now
        self.left -= 1
        if self.left == 0:
            self.done(self.t_arrived)


# -- completion-heap entries: (t_finish, seq, version, flow), or (t_finish, first seq, GROUP,
# [(seq, version, flow), ...]) for flows finishing together (mpisim.network.fairshare, "Completions").

#: The version field of a heap entry that holds a group of flows finishing together.
GROUP = -1


def entry_live(entry: tuple) -> bool:
    """True if a completion-heap entry (a flow, or a group of them) still stands for a flow."""
    if entry[2] == GROUP:
        return any(version == flow.version and not flow.finished for _, version, flow in entry[3])
    return entry[2] == entry[3].version and not entry[3].finished


def entry_due_order(entry: tuple) -> tuple[float, int, int]:
    """The order single completion-heap entries come off the heap: (finish time, sequence, version)."""
    return entry[0], entry[1], entry[2]


#: Sort keys (NOTE: C-level getters, not Python functions: tens of thousands of flows are sorted
#: by them when a large batch starts or ends).
flow_seq = attrgetter("seq")  # a flow's creation order
member_seq = itemgetter(0)  # a group member's (seq, version, flow): its flow's creation order
