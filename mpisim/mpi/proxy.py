"""A GPU library's proxy thread: one CPU thread per GPU that posts every network step, shared by its active ops.

A GPU does not drive its NIC itself. In NCCL one CPU thread per GPU (the proxy progress thread,
``src/proxy.cc``) posts every network send and receive of every channel that crosses the network
through that GPU (``src/transport/net.cc``: ``sendProxyProgress`` posts an ``isend`` per step,
``recvProxyProgress`` an ``irecv``, and an ``iflush`` for Simple received by GPUDirect RDMA). The
thread's loop (``progressOps``) walks its list of active operations and calls each one's progress
function, which advances each of its channels by at most one step per pass: *k* active operations
share the thread round-robin, one post each per pass. mpisim keeps that loop's fluid limit, a
**processor-sharing** server per rank: while *k* jobs are active each is served at 1/k of the
thread, so a lone job takes its own work, and jobs that overlap finish later together, the
thread's total throughput unchanged (a rank's back-to-back posts still queue: the second cannot
finish before the thread has done both).

Why not first come, first served: posts made at the same simulated instant (a rank's send of a
ring step and the receive posted for its neighbour's) reach the thread in the order the
simulator happens to process same-instant events, and that order changes with tracing options.
Under processor sharing a job's completion depends only on the jobs and their arrival instants,
never on the order of arrivals within one instant; jobs completing at one instant are handed
back sorted by their key (their message's envelope), not by arrival.

The server keeps a *virtual time* ``v``: the work done so far for each active job. It grows at
``1/k`` per second while *k* jobs are active, so a job of work *w* arriving at virtual time
``v0`` completes when ``v`` reaches ``v0 + w`` (the classic processor-sharing construction).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

import simpy

from mpisim.engine.events import Call

__all__ = ["ProxyThread"]


class ProxyThread:
    """One rank's proxy thread, a processor-sharing server of post work (seconds of thread time)."""

    __slots__ = ("env", "_jobs", "_v", "_t", "_generation", "_due", "_target")

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        #: Active jobs: (virtual finish, key, callback, argument).
        self._jobs: list[tuple[float, tuple, Callable[[Any], None], Any]] = []
        self._v = 0.0  # virtual time: work done for each active job so far
        self._t = 0.0  # when _v was last brought up to date
        self._generation = 0  # only the latest scheduled completion check is live
        self._due = float("inf")  # when the live check fires, and the virtual time it reaches then
        self._target = 0.0

    def _advance(self) -> None:
        now = self.env.now
        if self._jobs and now > self._t:
            # At the live check's instant the virtual time is its target exactly, whether a new
            # job arrives before or after the check runs (no rounding may tell them apart).
            self._v = self._target if now >= self._due else self._v + (now - self._t) / len(self._jobs)
        self._t = now

    def submit(self, work: float, key: tuple, fn: Callable[[Any], None], arg: Any) -> None:
        """Add a job of *work* seconds; call ``fn(arg)`` when the thread has done it.

        *key* orders the callbacks of jobs that complete at the same instant (it must not
        depend on the order events are processed in: a message's envelope, not a counter).
        """
        self._advance()
        heapq.heappush(self._jobs, (self._v + work, key, fn, arg))
        self._schedule()

    def _schedule(self) -> None:
        self._generation += 1
        if self._jobs:
            self._target = target = self._jobs[0][0]
            delay = max(0.0, (target - self._v) * len(self._jobs))
            self._due = self.env.now + delay
            Call(self.env, self._complete, (self._generation, target), delay)
        else:
            self._due = float("inf")

    def _complete(self, check: tuple[int, float]) -> None:
        generation, target = check
        if generation != self._generation:
            return  # a job arrived since: a later check was scheduled
        self._advance()
        self._v = target  # the check was timed to reach it; no rounding drift
        done = []
        while self._jobs and self._jobs[0][0] <= target:
            done.append(heapq.heappop(self._jobs))
        self._schedule()
        done.sort(key=lambda job: job[1])
        for _, _, fn, arg in done:
            fn(arg)
