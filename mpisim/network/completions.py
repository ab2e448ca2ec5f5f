"""When flows finish: one driver timeout over a heap of completions.

Completions live in a heap of ``(t_finish, flow sequence number, version, flow)``. When a
flow's rate changes its version goes up and a new entry is pushed; the old one is ignored when
it reaches the top (lazy deletion), and the heap is compacted when stale entries outnumber
live ones. Flows given their rates by one solve, next to each other in creation order, that
finish at the same time (a ring step) share one entry, a group, which the driver expands (or
merges with other groups due then) back into the order single entries would have had. A single
*driver* timeout waits for the earliest live entry; SimPy cannot cancel a timeout, so when an
earlier completion appears a new driver is scheduled and the superseded one, recognised by its
generation number, does nothing when it fires. So a solve costs O(k log k) for a component of
k flows (O(k) for one level) plus at most one SimPy event, instead of one timeout per flow per
solve. This is SimGrid's *lazy action heap*, with groups.

The driver completes every flow whose completion time is within a relative 1e-12 of now
(:data:`TIME_RTOL`), so a flow finishes at the time computed for it, not when a subtraction
happens to reach zero.

:class:`CompletionDriver` is a mixin of :class:`~mpisim.network.fairshare.FairShareNetwork`:
it reads the network's heap, counters and pending arrivals, set up there.
"""

from __future__ import annotations

import heapq
import math

from mpisim.engine.events import Call
from mpisim.engine.sim import call_in_turn, normal_next
from mpisim.network.flows import GROUP, Arrivals, Flow, entry_due_order, entry_live, member_seq

#: The driver completes flows due within this relative distance of the current time.
TIME_RTOL = 1e-12


class CompletionDriver:
    """The fair-share network's completions: the heap, its driver timeout and the callers told."""

    def _arm_driver(self, now: float) -> None:
        """Make sure a driver timeout waits for the earliest live completion."""
        heap = self._heap
        if len(heap) > 2 * self.active_flows + 64:
            heap[:] = [e for e in heap if entry_live(e)]
            heapq.heapify(heap)
        while heap:
            # NOTE: entry_live, inlined: once per solve, on the entry at the top.
            entry = heap[0]
            version = entry[2]
            if version != GROUP:
                flow = entry[3]
                if version == flow.version and not flow.finished:
                    t_finish = entry[0]
                    break
            else:
                for _, version, flow in entry[3]:
                    if version == flow.version and not flow.finished:
                        break
                else:
                    heapq.heappop(heap)
                    continue
                t_finish = entry[0]
                break
            heapq.heappop(heap)
        else:
            return
        if t_finish < self._driver_at:
            self._driver_at = t_finish
            self._driver_gen += 1
            # NOTE: a light Call, not a SimPy Timeout: the same queue entry (time, NORMAL, next
            # id; the NORMAL lane when due now), without a simpy.Event built per driver.
            Call(self.env, self._driver_cb, self._driver_gen, max(t_finish - now, 0.0))

    def _on_driver(self, generation: int) -> None:
        """Complete the flows due now; their links are released by this instant's solve."""
        if generation != self._driver_gen:
            return  # superseded by a driver for an earlier completion
        self._driver_at = math.inf
        now = self.env.now
        due = now + TIME_RTOL * now
        heap = self._heap
        popped: list[tuple] = []
        while heap and heap[0][0] <= due:
            popped.append(heapq.heappop(heap))
        ready: list[tuple[int, int, Flow]]
        if len(popped) == 1 and popped[0][2] == GROUP:
            # NOTE: one group alone (a ring step) is already in order: its flows started in
            # sequence order and finish at one time. No copy and no sort needed.
            ready = popped[0][3]
        elif all(entry[2] == GROUP and entry[0] == popped[0][0] for entry in popped):
            # Groups due at one time (the components of a ring's FIN + RTS chain): merge
            # them by sequence number, which is the order single entries would have had.
            ready = [member for entry in popped for member in entry[3]]
            ready.sort(key=member_seq)
        else:
            due_now: list[tuple[float, int, int, Flow]] = []
            for entry in popped:
                if entry[2] == GROUP:
                    t_finish = entry[0]
                    due_now.extend((t_finish, seq, version, flow) for seq, version, flow in entry[3])
                else:
                    due_now.append(entry)
            if len(due_now) != len(popped):
                due_now.sort(key=entry_due_order)  # the order single entries would have come off the heap
            ready = [entry[1:] for entry in due_now]
        completed = False
        finishing = self._finishing
        arrivals = self._arrivals
        posted = 0  # flows completed by the inlined _complete below
        # The callers' event, not yet scheduled: nothing else is scheduled while it waits (see
        # the end); a flow's done event, which goes to the queue, takes it there first.
        deferred: list[Flow] | None = None
        for _, version, flow in ready:
            if version == flow.version and not flow.finished:
                completed = True
                finishing.append(flow)
                if flow.fn is None and flow.done is None:
                    # NOTE: _complete, inlined for a transfer nobody waits for (a FIN).
                    flow.finished = True
                    flow.remaining = 0.0
                    posted += 1
                    continue
                if flow.fn is None or flow.done is not None:
                    if deferred is not None and flow.done is not None:
                        Call(self.env, self._arrived_cb, deferred)
                        deferred = None
                    self._complete(flow)
                    arrivals = self._arrivals
                    continue
                # NOTE: _complete, inlined for the common case (a posted transfer).
                flow.finished = True
                flow.remaining = 0.0
                posted += 1
                fn = flow.fn
                if fn.__class__ is Arrivals and fn.left > 1:
                    fn.t_arrived[flow.arg] = now  # not the set's last: noted, nobody to tell
                    fn.left -= 1
                    continue
                if arrivals is None:
                    arrivals = deferred = self._arrivals = []
                arrivals.append(flow)
        self.flows_finished += posted
        if completed:
            if arrivals is not None and self._arrivals is arrivals and not self._solve_scheduled:
                # The solve goes with the last callers told (see _arrived_cb), unless more is due by then.
                self._solve_scheduled = True
                self._solve_after = arrivals
            else:
                self._request_solve()
        else:
            self._arm_driver(now)
        self._arrivals = None
        if deferred is not None:
            if normal_next(self.env):
                # Its event would be the next one processed: processing it here is the same.
                self._arrived_cb(deferred)
            else:
                Call(self.env, self._arrived_cb, deferred)

    def _complete(self, flow: Flow) -> None:
        flow.finished = True
        flow.remaining = 0.0
        self.flows_finished += 1
        if flow.done is not None:
            self._arrivals = None  # its event comes between: later arrivals go after it
            flow.done.succeed()
        elif flow.fn is not None:
            fn = flow.fn
            if fn.__class__ is Arrivals and fn.left > 1:
                fn.t_arrived[flow.arg] = self.env.now  # not the set's last (see _on_driver)
                fn.left -= 1
                return
            # NOTE: flows completed by one callback share one event, placed where the first
            # one's done.succeed() would have been; _arrived_cb keeps the order of a separate
            # event per flow (see there).
            arrivals = self._arrivals
            if arrivals is None:
                arrivals = self._arrivals = []
                Call(self.env, self._arrived_cb, arrivals)
            arrivals.append(flow)

    def _arrived_cb(self, arrivals: list[Flow]) -> None:
        """Tell each transfer's caller that its last byte has arrived, in completion order.

        With one event per flow, SimPy would process the URGENT events that one caller
        schedules (the start of a protocol step) before the next flow's event; running them
        here, between the calls, keeps exactly that order.
        """
        call_in_turn(self.env, arrivals)
        if self._solve_after is arrivals:
            # The driver's solve (see _on_driver): at once if nothing else is due now, else as
            # the instant's last event, where the driver would have scheduled it.
            self._solve_after = None
            if self._alone_now():
                self._solve(None)
            else:
                self._schedule_solve()

