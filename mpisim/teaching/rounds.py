"""Rounds of an explanation: the run's critical path, one message a round, and what each round pays.

A *step* (:mod:`.steps`) is a causal depth: every message whose sender had received the same
number of earlier messages shares one. That hides the single-port network the textbook formulas
count on: a binomial broadcast's root sends three messages one after the other, at 0, α + nβ
and 2(α + nβ), yet all three are causal depth 1. Numbering messages by their order through a
port does not work either: messages of different phases that do not depend on each other then
share a number while running at different times, and the rounds overlap and add up to more
than the run took.

A **round** here is one link of the run's critical path, the chain of messages the last
arrival waited for. Walking back from the message whose last byte arrived last, each link is
the related message that arrived last before this one's bytes left: one its sender received
(it may carry what this one forwards), the previous one through its sender's port, or the
previous one through its receiver's port (the single-port network serialises them). Round r
runs from the r-th critical message's departure to its arrival; every other message belongs to
the round in which its bytes leave. The rounds therefore never overlap, and on the analytic
network (every message α + nβ once it has its ports) they add up to the simulated time.

Each round **pays** one α and its critical message's n·β (:func:`round_costs`): the closed form
read off the picture. Where the algorithm's rounds are what the run waited for, that is the
algorithm's formula (a binomial broadcast's ⌈lg p⌉(α + nβ)); where they are not -- on one port a
message can wait for a receive port that a message it does not depend on took first -- the
rounds show the wait (:func:`port_wait`). Reductions also pay γ per byte combined, between
rounds; the terms below are the communication ones.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from mpisim.teaching.steps import Message


def send_starts(messages: Sequence[Message], single_port: bool,
                hop: tuple[float, float] | None = None) -> list[float]:
    """When each message's bytes start to leave its sender.

    A send is posted at once, but on the single-port network it waits for its sender's port to
    finish the previous send and its receiver's port to finish the previous receive. On the
    contention-free analytic network (*hop* = (α, β)) a message that has its ports takes exactly
    α + nβ, so it left at its arrival minus that. Otherwise ports are taken to serve messages in
    the order they complete. With more ports the payload leaves when the MPI layer hands it over.
    """
    starts = [m.t_data if m.t_data is not None and m.t_data >= 0 else m.t_post for m in messages]
    if not single_port:
        return starts
    if hop is not None:
        alpha, beta = hop
        return [max(start, m.t_done - (alpha + m.nbytes * beta)) for start, m in zip(starts, messages, strict=True)]
    port_free: dict[tuple[str, int], float] = defaultdict(float)
    for i in sorted(range(len(messages)), key=lambda i: (messages[i].t_done, i)):
        msg = messages[i]
        starts[i] = max(starts[i], port_free[("send", msg.src)], port_free[("recv", msg.dst)])
        port_free[("send", msg.src)] = port_free[("recv", msg.dst)] = msg.t_done
    return starts


def wire_times(messages: Sequence[Message], single_port: bool,
               hop: tuple[float, float] | None = None) -> list[tuple[float, float]]:
    """When each message's bytes left its sender and its last byte arrived.

    Noted by the explanation's world where it could (:class:`~mpisim.teaching.steps.ObservedWorld`);
    otherwise estimated by :func:`send_starts`, arriving when the receive completed.
    """
    guessed = send_starts(messages, single_port, hop)
    return [m.wire if m.wire is not None else (start, m.t_done) for m, start in zip(messages, guessed, strict=True)]


#: How a critical message waited for the one before it (see :func:`critical_path`).
CAUSAL, SEND_PORT, RECEIVE_PORT = "causal", "send port", "receive port"
_EPS = 1e-15


def _link(before: Message, after: Message) -> str | None:
    """Why *after* could have waited for *before*: the kind of link, or None if it could not."""
    if before.dst == after.src:
        return CAUSAL
    if before.src == after.src:
        return SEND_PORT
    if before.dst == after.dst:
        return RECEIVE_PORT
    return None


def critical_path(messages: Sequence[Message], times: Sequence[tuple[float, float]]) -> list[tuple[int, str | None]]:
    """The critical path, first message first: (message index, how it waited for the previous one).

    From the last arrival back, each message's predecessor is the related message (:func:`_link`)
    that arrived last no later than it left; ties prefer a causal link, then a port, then the
    earlier message, so the path is the same on every run.
    """
    if not messages:
        return []
    rank = {CAUSAL: 0, SEND_PORT: 1, RECEIVE_PORT: 2}
    current = max(range(len(messages)), key=lambda i: (times[i][1], times[i][0], -i))
    path: list[tuple[int, str | None]] = []
    while True:
        left = times[current][0]
        best: tuple[float, int, int] | None = None
        kind = None
        for j, msg in enumerate(messages):
            if j == current or times[j][1] > left + _EPS:
                continue
            link = _link(msg, messages[current])
            if link is None:
                continue
            key = (times[j][1], -rank[link], -j)
            if best is None or key > best:
                best, kind = key, link
        path.append((current, kind))
        if best is None:
            break
        current = -best[2]
    path.reverse()  # each entry already names how it waited for the entry before it
    return path


@dataclass(frozen=True)
class Round:
    """One round: its messages (indices into the explanation's messages), when it runs, what it pays."""

    number: int
    messages: tuple[int, ...]
    starts: tuple[float, ...]  # when each of those messages' bytes left its sender
    start: float  # when the round's critical message left
    end: float  # when its last byte arrived
    nbytes: int  # the critical message's size: the n of this round's n·β
    ends: tuple[float, ...] = ()  # when each message's last byte arrived
    critical: int = -1  # the message the next round waited for (index into the explanation's messages)
    waited: str | None = None  # how the critical message waited for the previous round's (CAUSAL, ...)

    def cost(self, alpha: float, beta: float) -> float:
        """The round's α + n·β."""
        return alpha + self.nbytes * beta

    def term(self) -> str:
        """The round's cost as a student writes it, e.g. ``α + 16B·β``."""
        return f"α + {self.nbytes}B·β" if self.nbytes else "α"


def rounds_of(messages: Sequence[Message], single_port: bool = True,
              hop: tuple[float, float] | None = None) -> list[Round]:
    """The rounds of *messages* (module docstring), round 1 first."""
    times = wire_times(messages, single_port, hop)
    path = critical_path(messages, times)
    if not path:
        return []
    lefts = [times[i][0] for i, _ in path]
    grouped: dict[int, list[int]] = defaultdict(list)
    for i, (left, _) in enumerate(times):
        grouped[max(0, bisect_right(lefts, left + _EPS) - 1)].append(i)
    out = []
    for k, (crit, waited) in enumerate(path):
        idx = sorted(grouped[k], key=lambda i: (times[i][0], messages[i].src, messages[i].dst))
        out.append(Round(k + 1, tuple(idx), tuple(times[i][0] for i in idx), times[crit][0], times[crit][1],
                         messages[crit].nbytes, tuple(times[i][1] for i in idx), crit, waited))
    return out


def port_wait(rounds: Sequence[Round]) -> tuple[Round, Round] | None:
    """The first round whose critical message waited for its receive port, and the round it waited for.

    The message that held the port came from another rank and the waiting one did not need it:
    the single-port network serialised two independent messages, a wait the closed forms of
    algorithms designed for it do not count.
    """
    for before, after in pairwise(rounds):
        if after.waited == RECEIVE_PORT:
            return before, after
    return None


def round_costs(rounds: Sequence[Round], alpha: float, beta: float) -> float:
    """The closed form read off the rounds: the sum of every round's α + n·β."""
    return sum(r.cost(alpha, beta) for r in rounds)


def round_formula(rounds: Sequence[Round]) -> str:
    """The rounds' terms collected: ``3(α + 48B·β)`` when every round pays the same, else ``7α + 168B·β``."""
    sizes = {r.nbytes for r in rounds}
    if len(rounds) > 1 and len(sizes) == 1 and sizes != {0}:
        return f"{len(rounds)}(α + {rounds[0].nbytes}B·β)"
    total_bytes = sum(r.nbytes for r in rounds)
    alpha = f"{len(rounds)}α" if len(rounds) != 1 else "α"
    return f"{alpha} + {total_bytes}B·β" if total_bytes else alpha
