"""The single-port network of the textbooks: a rank sends one message and receives one at a time.

Hockney's and LogP's cost models, and the collective formulas of Thakur, Rabenseifner &
Gropp (2005), assume that a process can send one message and receive one message at the
same time (full duplex), but not several of either. Real NICs overlap many transfers, so
mpisim's models do not limit it; a teacher who wants the rounds the textbook draws (a linear
broadcast's p-1 sends one after another, a binomial tree's ⌈lg p⌉ rounds) asks for
``network: {ports: 1}``.

:class:`PortLimitedNetwork` wraps any model: a transfer starts only when its sender has a
free send port and its receiver a free receive port, holds both until its last byte has
arrived, and otherwise waits. When a port frees, the waiting transfers are examined in the
order they were posted and every one whose two ports are free starts (greedy list
scheduling): a port never idles behind a transfer that cannot start yet, as the textbooks'
rounds assume, and messages between the same two ranks keep their order. Zero-byte messages
(credits, barrier tokens) take no port: the textbooks' algorithms have no flow control, and
their rounds count data messages. What the wrapped
model does with the bytes (latency, bandwidth, sharing) is unchanged.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mpisim.engine.sim import Proc
    from mpisim.network.base import NetworkModel
    from mpisim.network.links import Route


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
        self._waiting: deque[tuple[int, int, int, Callable[[Any], None] | None, Any, float | None, Route | None]] = deque()

    def __getattr__(self, name: str) -> Any:
        # Statistics and the like (link_stats, transfers) are the wrapped model's.
        return getattr(self.inner, name)

    def _free(self, src: int, dst: int) -> bool:
        return self._sending.get(src, 0) < self.ports and self._receiving.get(dst, 0) < self.ports

    def post(self, src: int, dst: int, nbytes: int, fn: Callable[[Any], None] | None, arg: Any,
             latency: float | None = None, route: Route | None = None) -> bool:
        """As the wrapped model's ``post``, once a send port at *src* and a receive port at *dst* are free."""
        if src == dst or nbytes == 0:
            # A zero-byte message (a pipeline credit, a barrier token) is a flag, not a transfer:
            # the formulas' rounds count the data messages, so flags hold no port.
            return self.inner.post(src, dst, nbytes, fn, arg, latency, route)  # type: ignore[attr-defined]
        if not self._free(src, dst) or self._queued_behind(src, dst):
            self._waiting.append((src, dst, nbytes, fn, arg, latency, route))
            return False
        return self._start(src, dst, nbytes, fn, arg, latency, route)

    def _queued_behind(self, src: int, dst: int) -> bool:
        """True if an earlier transfer between the same two ranks waits: those keep their order."""
        return any(w_src == src and w_dst == dst for w_src, w_dst, *_ in self._waiting)

    def transfer(self, src: int, dst: int, nbytes: int) -> Proc[None]:
        """The generator form of :meth:`post`."""
        done = self.sim.env.event()
        if not self.post(src, dst, nbytes, lambda _: done.succeed(), None):
            yield done

    def _start(self, src: int, dst: int, nbytes: int, fn: Callable[[Any], None] | None, arg: Any,
               latency: float | None, route: Route | None = None) -> bool:
        self._sending[src] = self._sending.get(src, 0) + 1
        self._receiving[dst] = self._receiving.get(dst, 0) + 1
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
        self._admit()  # transfers that waited go before any the callback below starts
        if fn is not None:
            fn(arg)

    def _admit(self) -> None:
        """Start every waiting transfer whose ports are now free, in the order they were posted."""
        still: deque[tuple[int, int, int, Callable[[Any], None] | None, Any, float | None, Route | None]] = deque()
        while self._waiting:
            src, dst, nbytes, fn, arg, latency, route = self._waiting.popleft()
            if not self._free(src, dst) or any(s == src and d == dst for s, d, *_ in still):
                still.append((src, dst, nbytes, fn, arg, latency, route))  # its ports are busy, or its pair's turn is not yet
                continue
            if self._start(src, dst, nbytes, fn, arg, latency, route) and fn is not None:
                fn(arg)  # over at once, but its poster was told to wait: tell it now
        self._waiting = still
