"""Deadlock diagnosis: where every rank is, why its call cannot return, and the cycle of waits.

**Deadlock**: SimPy's event loop stops when nothing is scheduled. If ranks are still blocked
then, nothing can ever wake them: :meth:`World.run` raises :class:`DeadlockError` naming each
blocked rank, the call it is blocked in and the cycle of waits between ranks.

The report reads only the ranks' states (:class:`~mpisim.mpi.world.RankState`: the call each
is blocked in and the requests it waits on) and the mailboxes. A deadlock inside a collective
is reported as the user's collective call and the members missing from it, not as the
algorithm's internal sends and receives. The *wait-for graph* has an edge from a blocked
rank to each rank it waits for in particular (a receive from ``ANY_SOURCE`` gives none); a
cycle in it among blocked ranks is the classic deadlock (every rank sends first, say), found
by a depth-first search.

:class:`Diagnosis` is one of :class:`~mpisim.mpi.world.World`'s parts; :meth:`World.run
<mpisim.mpi.world.World.run>` calls it when the event loop stops with ranks still blocked or
when a run limit is reached.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from mpisim.mpi.constants import ANY_SOURCE, ANY_TAG

if TYPE_CHECKING:
    from mpisim.mpi.request import Request
    from mpisim.mpi.world import Mailbox, RankState


class Diagnosis:
    """Reports of where ranks are and why they are stuck, as methods of :class:`~mpisim.mpi.world.World`."""

    # The world's state these read (set by World.__init__).
    size: int
    states: list[RankState]
    mailboxes: list[Mailbox]
    lost_calls: list[tuple[int, str]]
    locate: Callable[[int], str] | None

    def _waits_for(self, rank: int) -> list[int]:
        """World ranks that *rank* is waiting for, each one of them (the edges of the wait-for graph).

        A receive from ``ANY_SOURCE`` waits for *some* rank, not for each: it gives no edge, so
        a cycle found is one where every rank waits for the next in particular.
        """
        state = self.states[rank]
        peers: list[int] = []
        if state.blocked_call == "synchronize()":
            return [r for r, st in enumerate(self.states) if st.blocked_call != "synchronize()" and r != rank]
        for req in state.waiting_on:
            if not req.triggered and req.peer >= 0:
                peers.append(req.comm.group[req.peer])
        return sorted(set(peers))

    def _waits_for_anyone(self, rank: int) -> bool:
        """True if *rank* is blocked in a receive (or probe) from ``ANY_SOURCE``."""
        return any(not req.triggered and req.peer == ANY_SOURCE for req in self.states[rank].waiting_on)

    def _close_blocked_spans(self, blocked: list[int]) -> None:
        """Record the span of every call the deadlock leaves blocked, up to now.

        Its label is the call and why it cannot return (``send(dest=1, ...) -- waiting for rank
        1 to receive ...``), so a timeline shows where and why each rank stopped.
        """
        for rank in blocked:
            state = self.states[rank]
            kind, t0, peer, nbytes = state.opened
            pending = [req for req in state.waiting_on if not req.triggered]
            why = "; ".join(self._why(req) for req in pending)
            self._span(rank, kind, t0, state.blocked_call + (f" -- {why}" if why else ""), peer, nbytes)

    def _lost_report(self, shown: int = 8) -> list[str]:
        """The calls made without ``yield from``, rank by rank, each rank's in the order it made them."""
        lost = sorted(self.lost_calls, key=lambda item: item[0])
        lines = [text for _, text in lost[:shown]]
        if len(lost) > shown:
            lines.append(f"... and {len(lost) - shown} more calls made without `yield from`")
        return lines

    def _deadlock_report(self, blocked: list[int]) -> str:
        lines = [f"deadlock: {len(blocked)} rank(s) blocked and nothing can progress"]
        for rank in blocked:
            state = self.states[rank]
            if state.collective is not None:
                lines.append(f"  rank {rank}: blocked in {self._collective_story(rank)}{self._at(rank)}")
                continue
            pending = [req for req in state.waiting_on if not req.triggered]
            detail = "; ".join(self._why(req) for req in pending) if pending else ""
            lines.append(f"  rank {rank}: blocked in {state.blocked_call}" + (f" -- {detail}" if detail else "")
                         + self._at(rank))
        cycle = self._find_cycle(blocked)
        if cycle and not any(self.states[r].collective for r in cycle):
            lines.append("  cycle of waits: " + " -> ".join(f"rank {r}" for r in cycle))
        elif any_source := [r for r in blocked if self._waits_for_anyone(r)]:
            who = "every blocked rank waits" if len(any_source) == len(blocked) else \
                f"rank{'s' if len(any_source) > 1 else ''} {', '.join(map(str, any_source))} wait{'' if len(any_source) > 1 else 's'}"
            lines.append(f"  {who} for a message from any rank, and no rank that could send one ever will (each is blocked or has finished)")
        return "\n".join(lines)

    def _at(self, rank: int) -> str:
        """``\\n      at ring.py:14: comm.send(...)`` when a runner can say where the rank is in its source."""
        where = self.locate(rank) if self.locate is not None else ""
        return f"\n      at {where}" if where else ""

    def _user_call(self, rank: int) -> str:
        """The call *rank* is blocked in, as the user wrote it (a collective, not its internal messages)."""
        state = self.states[rank]
        return state.collective[2] if state.collective is not None else state.blocked_call

    def where_ranks_are(self) -> list[str]:
        """One line per unfinished rank: the call it is in (for reports of a failed program)."""
        lines = []
        for rank, state in enumerate(self.states):
            if state.finished:
                continue
            if state.collective is not None:
                lines.append(f"  rank {rank}: in {state.collective[2]}{self._at(rank)}")
            elif state.call:
                lines.append(f"  rank {rank}: blocked in {state.blocked_call}{self._at(rank)}")
            else:
                lines.append(f"  rank {rank}: running{self._at(rank)}")
        return lines

    def _collective_story(self, rank: int) -> str:
        """``barrier() -- rank 0 has finished without calling it``: the user's call and who is missing."""
        comm, call, signature = self.states[rank].collective  # type: ignore[misc]
        missing = []
        for member in comm.group:
            other = self.states[member].collective
            if other is not None and other[0].coll_context == comm.coll_context and other[1] == call:
                continue
            st = self.states[member]
            if st.finished:
                missing.append(f"rank {member} has finished without calling it")
            elif other is not None:
                missing.append(f"rank {member} is in {other[2]} instead")
            elif st.call:
                missing.append(f"rank {member} is blocked in {st.blocked_call}")
            else:
                missing.append(f"rank {member} has not called it")
        detail = "; ".join(missing) if missing else "every member called it"
        return f"{signature} (collective #{call} on its communicator) -- {detail}"

    def _why(self, req: Request) -> str:
        if req.kind == "send":
            peer = req.comm.group[req.peer]
            state = "has finished" if self.states[peer].finished else "has not posted a matching receive"
            return f"waiting for rank {peer} to receive (rank {peer} {state})"
        if req.peer == ANY_SOURCE:
            why = "no matching message from any rank"
        else:
            peer = req.comm.group[req.peer]
            state = " (it has finished)" if self.states[peer].finished else ""
            why = f"waiting for a message from rank {peer}{state}"
        return why + self._unmatched_nearby(req)

    def _unmatched_nearby(self, req: Request) -> str:
        """Messages waiting unmatched at a blocked receiver that differ only in tag or source: the usual bug."""
        box = self.mailboxes[req.comm.group[req.comm._rank]]
        near = [m for m in box.unexpected if m.context == req.comm.context
                and (req.peer in (ANY_SOURCE, m.src_rank) or req.tag in (ANY_TAG, m.tag))]
        return "".join(f"; a message from rank {m.src_rank} with tag {m.tag} ({m.nbytes} B) is waiting unmatched"
                       for m in near[:3])

    def _find_cycle(self, blocked: list[int]) -> list[int]:
        """Return one cycle in the wait-for graph among blocked ranks, closed (first == last)."""
        blocked_set = set(blocked)
        graph = {r: [p for p in self._waits_for(r) if p in blocked_set] for r in blocked}
        for start in blocked:
            path, on_path = [start], {start: 0}
            stack = [iter(graph[start])]
            while stack:
                nxt = next(stack[-1], None)
                if nxt is None:
                    stack.pop()
                    on_path.pop(path.pop(), None)
                    continue
                if nxt in on_path:
                    return [*path[on_path[nxt]:], nxt]
                on_path[nxt] = len(path)
                path.append(nxt)
                stack.append(iter(graph[nxt]))
        return []
