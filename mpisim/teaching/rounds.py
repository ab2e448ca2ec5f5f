"""Rounds of an explanation: the r-th message through a port, and what each round costs.

A *step* (:mod:`.steps`) is a causal depth: every message whose sender had received the same
number of earlier messages shares one. That hides the single-port network the textbook formulas
count on: a binomial broadcast's root sends three messages one after the other, at 0, α + nβ
and 2(α + nβ), yet all three are causal depth 1. A **round** follows the ports instead: a
message's round is one more than the latest round among

* the previous message its sender sent (the send port is busy until then),
* the previous message its receiver received (the receive port is busy until then), and
* every message its sender received before posting it (it may carry what this one forwards).

On the single-port network every message of round r starts after every message of round r - 1
it could wait for, so the rounds are the textbook's: a binomial broadcast on p ranks has
ceil(log2 p) of them, and "the set of ranks holding the data doubles every round" is visible.

Each round **pays** one α (its messages travel at once, each on its own pair of ports) and the
largest message's n·β: the round's cost is ``α + max(bytes)·β``, and the closed form of an
algorithm whose rounds do not overlap is the sum of those terms, read off the picture round by
round (:func:`round_costs`). Reductions also pay γ per byte combined; the terms below are the
communication ones, which the formula's α and β parts equal.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

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


def assign_rounds(messages: Sequence[Message], starts: Sequence[float] | None = None) -> dict[int, int]:
    """Return message index -> round (1-based), following ports and causality (module docstring).

    *starts* (default: the posting times) orders the messages through each port.
    """
    starts = [m.t_post for m in messages] if starts is None else starts
    last_sent: dict[int, int] = defaultdict(int)
    last_received: dict[int, int] = defaultdict(int)
    received: dict[int, list[tuple[float, int]]] = defaultdict(list)  # rank -> (t_done, round)
    rounds: dict[int, int] = {}
    order = sorted(range(len(messages)), key=lambda i: (starts[i], messages[i].t_done, i))
    for i in order:
        msg = messages[i]
        causal = max((r for t, r in received[msg.src] if t <= msg.t_post + 1e-15), default=0)
        rnd = 1 + max(last_sent[msg.src], last_received[msg.dst], causal)
        rounds[i] = rnd
        last_sent[msg.src] = rnd
        last_received[msg.dst] = rnd
        received[msg.dst].append((msg.t_done, rnd))
    return rounds


@dataclass(frozen=True)
class Round:
    """One round: its messages (indices into the explanation's messages), when it runs, what it pays."""

    number: int
    messages: tuple[int, ...]
    starts: tuple[float, ...]  # when each of those messages starts to leave its sender
    start: float  # earliest send start
    end: float  # latest receive end
    nbytes: int  # the largest message: the n of this round's n·β

    def cost(self, alpha: float, beta: float) -> float:
        """The round's α + n·β."""
        return alpha + self.nbytes * beta

    def term(self) -> str:
        """The round's cost as a student writes it, e.g. ``α + 16B·β``."""
        return f"α + {self.nbytes}B·β" if self.nbytes else "α"


def rounds_of(messages: Sequence[Message], single_port: bool = True,
              hop: tuple[float, float] | None = None) -> list[Round]:
    """Group *messages* into their :func:`assign_rounds` rounds, in order, with :func:`send_starts`."""
    starts = send_starts(messages, single_port, hop)
    numbers = assign_rounds(messages, starts)
    grouped: dict[int, list[int]] = defaultdict(list)
    for i, rnd in numbers.items():
        grouped[rnd].append(i)
    out = []
    for rnd in sorted(grouped):
        idx = sorted(grouped[rnd], key=lambda i: (starts[i], messages[i].src, messages[i].dst))
        out.append(Round(rnd, tuple(idx), tuple(starts[i] for i in idx), min(starts[i] for i in idx),
                         max(messages[i].t_done for i in idx), max(messages[i].nbytes for i in idx)))
    return out


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
