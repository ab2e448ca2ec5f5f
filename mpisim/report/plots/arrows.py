"""A run's messages as arrows: ranks as lanes, simulated time across, one arrow per message.

This is the space-time diagram of a program's own run (``mpisim exec -o DIR``, ``mpisim run -o
DIR`` of a program): each rank is a horizontal lane, and a message is an arrow from the
sender's lane, when the send was posted, to the receiver's lane, when its last byte arrived.
The slope is the message's latency: a flat arrow arrived quickly, a long one waited (for its
receive to be posted, for a busy link).

A rendezvous message is drawn as its protocol, in the directions the control messages really
go: the RTS (request to send) from sender to receiver, the CTS (clear to send) back, the data
forward and the FIN back -- so a student sees why a large blocking send waits for the
receiver. An eager message is one arrow. Messages to oneself are left out.

Arrows are capped (:data:`MAX_ARROWS`, the earliest first): a run with thousands of messages
would be a grey wall, so the figure draws the start of the run and says how many it left out.
With a deadlock, each rank's call that never returns is marked with a red cross where it
stopped (the call and the reason come from the span's label), as on the timeline.
"""

from __future__ import annotations

import math
from typing import Any

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from mpisim.report.plots.style import new_figure, time_unit
from mpisim.report.plots.timeline import DEADLOCK_COLOUR
from mpisim.report.records import WorldRecords
from mpisim.report.tables import fmt_bytes, world_ranks

#: Arrows drawn at most (the earliest ones); the title says how many were left out.
MAX_ARROWS = 400
#: Ranks drawn at most.
MAX_RANKS = 32
#: Colour and direction of each kind of arrow: eager messages, and a rendezvous's four phases.
ARROW_STYLES = {
    "eager": ("#0072B2", "message (eager: sent at once, copied out at the receiver)"),
    "rts": ("#E69F00", "RTS: the sender asks to send (rendezvous)"),
    "cts": ("#009E73", "CTS: the receiver's buffer is ready"),
    "data": ("#D55E00", "data of a rendezvous message"),
    "fin": ("#8c8c8c", "FIN: the receiver has it all"),
}


def message_arrows(world: WorldRecords) -> list[dict[str, Any]]:
    """Every arrow of *world*, earliest first: ``{kind, src, dst, t0, t1, label}`` (ranks are world ranks).

    Rendezvous messages come from the protocol-phase spans (the acting rank is the sender of an
    RTS or data, the receiver of a CTS or FIN); eager ones, and rendezvous ones whose phases were
    not recorded, from the message records.
    """
    arrows = []
    phased = False
    for span in world.spans:
        if span.kind in ("rts", "cts", "data", "fin") and span.peer >= 0 and span.peer != span.rank:
            phased = True
            label = f"{fmt_bytes(span.nbytes)}" if span.kind == "data" else span.kind.upper()
            arrows.append({"kind": span.kind, "src": span.rank, "dst": span.peer, "t0": span.t_start,
                           "t1": span.t_end, "label": label})
    for msg in world.messages:
        if msg.src == msg.dst or (phased and msg.protocol == "rendezvous"):
            continue
        arrows.append({"kind": "eager" if msg.protocol != "rendezvous" else "data", "src": msg.src, "dst": msg.dst,
                       "t0": msg.t_post, "t1": msg.t_done, "label": f"{fmt_bytes(msg.nbytes)} tag {msg.tag}"})
    arrows.sort(key=lambda a: (a["t0"], a["t1"], a["src"], a["dst"]))
    return arrows


def plot_message_arrows(world: WorldRecords, *, max_arrows: int = MAX_ARROWS, max_ranks: int = MAX_RANKS,
                        title: str | None = None, failure: dict[str, Any] | None = None) -> Figure | None:
    """Draw *world*'s messages as arrows between rank lanes (see the module docstring); None if it has none."""
    arrows = [a for a in message_arrows(world) if a["src"] < max_ranks and a["dst"] < max_ranks]
    stops = _stops(world, max_ranks) if failure is not None and failure.get("kind") == "deadlock" else []
    if not arrows and not stops:
        return None
    total = len(arrows)
    drawn = arrows[:max_arrows]
    p = min(world_ranks(world), max_ranks)
    t_end = max([a["t1"] for a in drawn] + [s[1] for s in stops] + [1e-12])
    scale, unit = time_unit(t_end)
    fig = new_figure(11, min(2.4 + 0.55 * p, 14.0))
    ax = fig.add_subplot()
    for r in range(p):
        ax.axhline(r, color="#cccccc", linewidth=0.8, zorder=1)
    labels = len(drawn) <= 40
    used = set()
    for a in drawn:
        colour = ARROW_STYLES[a["kind"]][0]
        used.add(a["kind"])
        start, end = (a["t0"] / scale, a["src"]), (a["t1"] / scale, a["dst"])
        ax.annotate("", xy=end, xytext=start, zorder=3,
                    arrowprops={"arrowstyle": "-|>", "color": colour, "linewidth": 1.2, "shrinkA": 0, "shrinkB": 0})
        if labels:
            mid = ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2)
            ax.annotate(a["label"], mid, fontsize=7, color=colour, ha="center", va="center", zorder=4,
                        bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 0.3})
    for rank, t, call in stops:
        ax.plot([t / scale], [rank], marker="X", color=DEADLOCK_COLOUR, markersize=11, markeredgecolor="white", zorder=5)
        ax.annotate(f"stopped in {call}", (t / scale, rank), xytext=(-6, 8), textcoords="offset points", ha="right",
                    fontsize=8, color=DEADLOCK_COLOUR, zorder=6,
                    bbox={"facecolor": "white", "edgecolor": DEADLOCK_COLOUR, "alpha": 0.9, "pad": 2})
    ax.set_ylim(p - 0.5, -0.6)
    ax.set_yticks(range(p), [f"rank {r}" for r in range(p)])
    ax.set_xlim(0, t_end / scale * 1.04)
    ax.set_xlabel(f"time (simulated {unit}): each arrow leaves when the send is posted and lands when the data "
                  "has arrived")
    heading = title or f"{world.label}: every message as an arrow"
    if total > len(drawn):
        heading += f"\nthe first {len(drawn)} of {total} arrows (up to t = {t_end / scale:.4g} {unit}); trace.json links " \
                   "every send to its receive"
    if world_ranks(world) > p:
        heading += f"; ranks 0-{p - 1} of {world_ranks(world)}"
    if stops:
        heading += f"\ndeadlock: {len(stops)} rank{'s' if len(stops) > 1 else ''} stopped in a call that never returns"
    ax.set_title(heading, fontsize=10)
    handles = [Line2D([], [], color=ARROW_STYLES[k][0], marker=">", label=ARROW_STYLES[k][1])
               for k in ARROW_STYLES if k in used]
    if stops:
        handles.append(Line2D([], [], linestyle="none", marker="X", color=DEADLOCK_COLOUR, label="deadlock: stuck call"))
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncols=min(3, len(handles)), fontsize=8)
    return fig


def _stops(world: WorldRecords, max_ranks: int) -> list[tuple[int, float, str]]:
    """(rank, time, call) of each blocked call a deadlock left open: its span runs to the end of the run."""
    if not world.spans:
        return []
    end = max(world.t_end, max(s.t_end for s in world.spans))
    return [(s.rank, s.t_end, s.label.split(" -- ", 1)[0]) for s in world.spans
            if s.rank < max_ranks and s.kind in ("send", "recv", "wait") and " -- " in s.label
            and math.isclose(s.t_end, end, rel_tol=1e-12, abs_tol=1e-18)]
