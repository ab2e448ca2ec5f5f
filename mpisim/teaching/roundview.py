"""The round view ``mpisim explain`` prints: each round's messages, when they leave, what it pays.

Steps (:mod:`.steps`) say what depends on what; rounds (:mod:`.rounds`) are the run's critical
path, one message a round. The round view lists, per round, each message with the time its bytes
leave the sender and arrive, marks the one the next round waited for, and gives the round's
α + n·β; the sum of those terms is the closed form read off the rounds, printed next to the
simulated time and the algorithm's cost so a student sees where they agree -- and, where they
do not, which wait on the single-port network makes the difference.
"""

from __future__ import annotations

import math
import textwrap
from typing import Any

from mpisim.report.tables import fmt_time
from mpisim.teaching.rounds import port_wait, round_costs, round_formula
from mpisim.teaching.steps import message_label


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15)


def format_rounds(ex: Any) -> list[str]:
    """The round view of explanation *ex*, as lines (empty when it sent no messages)."""
    rounds = ex.rounds
    if not rounds:
        return []
    out = [f"Rounds (round r = the r-th message on the run's critical path, * below; the others go in the round "
           f"in which they leave): {len(rounds)}"]
    for r in rounds:
        out.append(f"Round {r.number}  ({fmt_time(r.start)} -> {fmt_time(r.end)}, pays {r.term()} "
                   f"= {fmt_time(r.cost(ex.alpha, ex.beta))})")
        for i, start, arrived in zip(r.messages, r.starts, r.ends, strict=True):
            m = ex.messages[i]
            mark = "*" if i == r.critical else " "
            out.append(f" {mark}rank {m.src:>2} -> rank {m.dst:>2}  leaves {fmt_time(start):>9}, arrives "
                       f"{fmt_time(arrived):>9}  {message_label(m)}")
    total = round_costs(rounds, ex.alpha, ex.beta)
    sim = "= the simulated time" if _same(total, ex.simulated_s) else f"(simulated: {fmt_time(ex.simulated_s)})"
    out.append(f"Sum of the rounds: {round_formula(rounds)} = {fmt_time(total)} {sim}"
               + (f" (the algorithm's cost: {fmt_time(ex.model_s)})" if ex.model_s is not None else ""))
    wait = port_wait(rounds) if ex.ports == 1 else None
    if ex.model_s is not None and not _same(total, ex.model_s) and wait is not None:
        held, waited = wait
        h, w = ex.messages[held.critical], ex.messages[waited.critical]
        out.extend(textwrap.wrap(
            f"The difference is physical: on one port rank {w.src} -> rank {w.dst} (round {waited.number}) waited "
            f"for rank {w.dst}'s receive port, which rank {h.src} -> rank {h.dst}, a message it does not depend "
            "on, took first; the closed form does not count that wait.", 100, initial_indent="  ",
            subsequent_indent="  "))
    if ex.gamma and ex.collective in ("reduce", "allreduce", "reduce_scatter", "scan", "exscan"):
        out.append("  (the rounds count communication only; the algorithm's cost also pays γ per byte reduced)")
    out.append("")
    return out
