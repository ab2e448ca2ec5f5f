"""The single-port network of the textbooks: a rank sends one message and receives one at a time.

Hockney's and LogP's cost models, and the collective formulas of Thakur, Rabenseifner &
Gropp (2005), assume that a process can send one message and receive one message at the
same time (full duplex), but not several of either. Real NICs overlap many transfers, so
mpisim's models do not limit it; a teacher who wants the rounds the textbook draws (a linear
broadcast's p-1 sends one after another, a binomial tree's ⌈lg p⌉ rounds) asks for
``network: {ports: 1}``.

:class:`PortLimitedNetwork` wraps any model: a transfer starts only when its sender has a
free send port and its receiver a free receive port, holds both until its last byte has
arrived, and otherwise waits. Admission is greedy list scheduling at the end of each instant:
once every event due at that instant has run (so every transfer that ends then has freed its
ports and every message posted then is queued), the waiting transfers are examined in order
and every one whose two ports are free starts, at that same instant. A port never idles behind
a transfer that cannot start yet, as the textbooks' rounds assume, and messages between the
same two ranks keep their order. The order is that of posting, and among transfers posted at
the same instant that of their senders' ranks (each sender's own in the order it posted them).

Both rules keep the event loop's arbitrary order out of the rounds. Transfers that end
together end a round together: admitting after each one in turn let a linear alltoall's second
round start on the ports the first finisher freed and idle the others (4 rounds instead of 3
on 4 ranks). And messages posted together to one receiver go in rank order, not in the order
the ranks happened to resume: the rank that reaches a barrier last runs first, so its message
overtook its peers' -- a parameter server on 3 ranks then received worker 2's segment before
worker 1's, which it reduces first, and its pipeline stalled every round; on 3 and 7 ranks
the fold of recursive doubling and of Rabenseifner reached its partner after the exchange
message it must precede.

Flags (:meth:`PortLimitedNetwork.post_flag`: a pipeline's zero-byte credits) take no port: the
textbooks' algorithms have no flow control, and their rounds do not count it. Every other message
does, a zero-byte one too: a binomial barrier's tokens are the algorithm's messages, and its
root takes its ⌈lg p⌉ children's tokens one after the other, as the textbook's 2⌈lg p⌉α counts.
What the wrapped model does with the bytes (latency, bandwidth, sharing) is unchanged.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mpisim.engine.events import NORMAL, Call
from mpisim.network.base import Capabilities

if TYPE_CHECKING:
    from mpisim.engine.sim import Proc
    from mpisim.network.base import NetworkModel
    from mpisim.network.links import Route


#: Priority of the admission: after every event due at the same instant (SimPy's URGENT is 0 and
#: NORMAL 1, and the event loop runs the events due at one instant in order of priority).
AFTER_THE_INSTANT = NORMAL + 1

#: A waiting transfer: (instant posted, sender, order of posting, receiver, bytes, callback, its
#: argument, latency, route); the first three are its place in the queue.
_Waiting = tuple[float, int, int, int, int, "Callable[[Any], None] | None", Any, "float | None", "Route | None"]


class PortLimitedNetwork:
    """*inner* with at most *ports* transfers leaving and *ports* arriving at each rank at once."""

    def __init__(self, inner: NetworkModel, ports: int) -> None:
        if ports < 1:
            raise ValueError(f"ports must be at least 1, got {ports}")
        self.inner = inner
        self.ports = ports
        self.sim = inner.sim
        self.topology = inner.topology
        self._sending: dict[int, int] = {}
        self._receiving: dict[int, int] = {}
        self._waiting: deque[_Waiting] = deque()
        self._posted = 0
        #: Transfers posted at this instant, not yet in their place in ``_waiting``.
        self._new: list[_Waiting] = []
        #: True while an admission is scheduled for the end of the current instant.
        self._admit_due = False
        #: Optional ``started(arg)``, called with a transfer's callback argument when it gets its
        #: ports (``mpisim explain`` notes when each message's bytes leave; None: nobody asks).
        self.started: Callable[[Any], None] | None = None

    @property
    def capabilities(self) -> Capabilities:
        """The wrapped model's batches, but no max-min sharing and no weighted flows: ports hold transfers back."""
        return Capabilities(post_all=self.inner.capabilities.post_all)

    def __getattr__(self, name: str) -> Any:
        # Statistics and the like (link_stats, transfers) are the wrapped model's.
        return getattr(self.inner, name)

    def _free(self, src: int, dst: int) -> bool:
        return self._sending.get(src, 0) < self.ports and self._receiving.get(dst, 0) < self.ports

    def post(self, src: int, dst: int, nbytes: int, fn: Callable[[Any], None] | None, arg: Any,
             latency: float | None = None, route: Route | None = None) -> bool:
        """As the wrapped model's ``post``, once a send port at *src* and a receive port at *dst* are free.

        The transfer joins the queue; it starts at the end of this instant if its ports are free
        then (:meth:`_admit`). Returns False: the callback tells when it is over.
        """
        if src == dst:
            return self.inner.post(src, dst, nbytes, fn, arg, latency, route)  # type: ignore[attr-defined]
        self._posted += 1
        self._new.append((self.sim.env.now, src, self._posted, dst, nbytes, fn, arg, latency, route))
        self._admit_soon()
        return False

    def post_flag(self, src: int, dst: int, fn: Callable[[Any], None] | None, arg: Any) -> bool:
        """Post a zero-byte flow-control flag (a pipeline's credit) at once: it holds no port.

        The formulas' rounds count the algorithm's messages; credits are the simulated library's
        flow control, which the textbooks' algorithms do not have.
        """
        return self.inner.post(src, dst, 0, fn, arg)  # type: ignore[attr-defined]

    def transfer(self, src: int, dst: int, nbytes: int) -> Proc[None]:
        """The generator form of :meth:`post`."""
        done = self.sim.env.event()
        if not self.post(src, dst, nbytes, lambda _: done.succeed(), None):
            yield done

    def _admit_soon(self) -> None:
        """Schedule :meth:`_admit` for the end of this instant (once)."""
        if not self._admit_due:
            self._admit_due = True
            Call(self.sim.env, self._admit, None, priority=AFTER_THE_INSTANT)

    def _start(self, src: int, dst: int, nbytes: int, fn: Callable[[Any], None] | None, arg: Any,
               latency: float | None, route: Route | None = None) -> bool:
        self._sending[src] = self._sending.get(src, 0) + 1
        self._receiving[dst] = self._receiving.get(dst, 0) + 1
        if self.started is not None:
            self.started(arg)
        if self.inner.post(src, dst, nbytes, self._finished, (src, dst, fn, arg), latency, route):  # type: ignore[attr-defined]
            self._release(src, dst)  # over at once: the ports were never really busy
            return True
        return False

    def _release(self, src: int, dst: int) -> None:
        self._sending[src] -= 1
        self._receiving[dst] -= 1

    def _finished(self, token: tuple[int, int, Callable[[Any], None] | None, Any]) -> None:
        src, dst, fn, arg = token
        self._release(src, dst)
        if self._waiting:
            self._admit_soon()  # once every transfer that ends now has freed its ports
        if fn is not None:
            fn(arg)

    def _admit(self, _: Any = None) -> None:
        """Start every waiting transfer whose ports are free, in queue order (see the module docstring)."""
        self._admit_due = False
        if self._new:
            # Posted at this instant: in their senders' rank order, each sender's in its own order.
            self._new.sort(key=lambda w: w[:3])
            self._waiting.extend(self._new)
            self._new = []
        still: deque[_Waiting] = deque()
        blocked: set[tuple[int, int]] = set()  # pairs with an earlier transfer still waiting
        while self._waiting:
            entry = self._waiting.popleft()
            src, dst, nbytes, fn, arg, latency, route = entry[1], *entry[3:]
            if (src, dst) in blocked or not self._free(src, dst):
                still.append(entry)  # its ports are busy, or its pair's turn is not yet
                blocked.add((src, dst))
                continue
            if self._start(src, dst, nbytes, fn, arg, latency, route) and fn is not None:
                fn(arg)  # over at once, but its poster was told to wait: tell it now
        self._waiting = still
