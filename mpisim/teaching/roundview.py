"""The round view ``mpisim explain`` prints: each round's messages, when they leave, what it pays.

Steps (:mod:`.steps`) say what depends on what; rounds (:mod:`.rounds`) say what the single-port
network serialises. The round view lists, per round, each message with the time its bytes leave
the sender and arrive, and the round's α + n·β; the sum of those terms is the closed form read
off the rounds, printed next to the algorithm's cost so a student sees where they agree.
"""

from __future__ import annotations

from typing import Any

from mpisim.report.tables import fmt_time
from mpisim.teaching.rounds import round_costs, round_formula
from mpisim.teaching.steps import message_label


def format_rounds(ex: Any) -> list[str]:
    """The round view of explanation *ex*, as lines (empty when it sent no messages)."""
    rounds = ex.rounds
    if not rounds:
        return []
    port = ("the r-th message through a rank's port on the single-port network" if ex.ports == 1
            else "the r-th message through a rank's port (this network has more than one port per rank, so "
                 "rounds may overlap in time)")
    out = [f"Rounds (round r = {port}): {len(rounds)}"]
    for r in rounds:
        out.append(f"Round {r.number}  ({fmt_time(r.start)} -> {fmt_time(r.end)}, pays {r.term()} "
                   f"= {fmt_time(r.cost(ex.alpha, ex.beta))})")
        for i, start in zip(r.messages, r.starts, strict=True):
            m = ex.messages[i]
            out.append(f"  rank {m.src:>2} -> rank {m.dst:>2}  leaves {fmt_time(start):>9}, arrives "
                       f"{fmt_time(m.t_done):>9}  {message_label(m)}")
    total = round_costs(rounds, ex.alpha, ex.beta)
    out.append(f"Sum of the rounds: {round_formula(rounds)} = {fmt_time(total)}"
               + (f" (the algorithm's cost: {fmt_time(ex.model_s)})" if ex.model_s is not None else ""))
    if ex.gamma and ex.collective in ("reduce", "allreduce", "reduce_scatter", "scan", "exscan"):
        out.append("  (the rounds count communication only; the algorithm's cost also pays γ per byte reduced)")
    out.append("")
    return out
