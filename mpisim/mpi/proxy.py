"""A GPU library's proxy thread: one CPU thread per GPU that posts every network step, one post at a time.

A GPU does not drive its NIC itself. In NCCL one CPU thread per GPU (the proxy progress thread,
``src/proxy.cc``) posts every network send and receive of every channel that crosses the network
through that GPU (``src/transport/net.cc``: ``sendProxyProgress`` posts an ``isend`` per step,
``recvProxyProgress`` an ``irecv``, and an ``iflush`` for Simple received by GPUDirect RDMA).
The thread does one post at a time, so a rank's posts queue: a GPU whose channels post faster
than its thread can serve them is paced by the thread.

**The order of service.** NCCL's loop (``progressOps``) walks its list of active operations in
a fixed order, the order the operations were enqueued, and each advances by at most one post
per pass: the thread serves posts in an order of the library's own, never in the order in which
some outside observer happened to see them become ready. A simulator sees several posts become
ready at one instant in the order it processes that instant's events, and that order changes
with things that must not change an answer (tracing on or off). So the thread serves its posts
first come, first served by simulated time, and posts made at one instant in the order of their
*key* (a message's envelope: sends before receives, whose buffers NCCL posts ahead of the data,
then connection and sequence on it): when the thread is free it chooses its next post only after
every other event of the instant has run (:data:`SERVE`), when all of that instant's posts are in.

A job's callback runs when the thread has done its work, never at the instant the job starts:
the thread chooses at the end of an instant, and a callback run then could post more work at
that instant after another thread has already chosen.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

import simpy

from mpisim.engine.events import NORMAL, Call

__all__ = ["SERVE", "ProxyThread"]

#: Priority of a thread's choice of its next post: after every other event of the instant
#: (SimPy runs one instant's events by priority: URGENT 0, NORMAL 1, and 2 for the fair-share
#: network's solves and the single-port network's admissions, which may still deliver messages
#: whose receivers post more work at the same instant).
SERVE = NORMAL + 2


class ProxyThread:
    """One rank's proxy thread: a server of post work (seconds of thread time), one job at a time."""

    __slots__ = ("_choosing", "_free", "_queue", "env")

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        #: Jobs waiting: (instant posted, key, work, callback, argument); the first two are their order.
        self._queue: list[tuple[float, tuple, float, Callable[[Any], None], Any]] = []
        self._free = 0.0  # when the job in service ends
        self._choosing = False  # a choice of the next job is scheduled

    def submit(self, work: float, key: tuple, fn: Callable[[Any], None], arg: Any) -> None:
        """Add a job of *work* seconds (> 0); call ``fn(arg)`` when the thread has done it.

        *key* orders jobs posted at the same instant: it must be unique on this thread and
        must not depend on the order events are processed in (a message's envelope, not a
        counter of the thread's).
        """
        heapq.heappush(self._queue, (self.env.now, key, work, fn, arg))
        if self._free <= self.env.now:
            self._choose_later()

    def _choose_later(self) -> None:
        if not self._choosing:
            self._choosing = True
            Call(self.env, self._choose, None, 0, SERVE)

    def _choose(self, _: None) -> None:
        self._choosing = False
        _, _, work, fn, arg = heapq.heappop(self._queue)
        self._free = self.env.now + work
        Call(self.env, self._done, (fn, arg), work)

    def _done(self, job: tuple[Callable[[Any], None], Any]) -> None:
        if self._queue:
            self._choose_later()
        fn, arg = job
        fn(arg)
