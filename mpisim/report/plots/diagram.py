"""Teaching: a message diagram -- ranks against steps, one arrow per message, steps shaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure

from mpisim.report.plots.style import (
    DIAGRAM_COLOURS,
    new_figure,
)


def plot_message_diagram(p: int, messages: Sequence[dict[str, Any]], *, title: str = "",
                         step_labels: Sequence[str] = ()) -> Figure:
    """Draw a teaching diagram: ranks down, steps across, one arrow per message.

    Each message is a dict with ``src``, ``dst``, ``step`` (1-based) and an optional ``label``
    (what it carries), written at the start of its arrow. *step_labels* go under the step
    numbers (e.g. the step's time range).
    """
    steps = max((m["step"] for m in messages), default=0)
    width = min(max(7.5, 1.9 * steps + 2.0), 22.0)
    fig = new_figure(width, min(1.8 + 0.6 * p, 14.0))
    ax = fig.add_subplot()
    for k in range(1, steps + 1):
        ax.axvspan(k - 0.5, k + 0.5, color="#eef2f8" if k % 2 else "#f8f4ec", zorder=0)
    for r in range(p):
        ax.axhline(r, color="#bbbbbb", linewidth=0.8, zorder=1)
    per_step: dict[int, int] = {}
    for msg in messages:
        per_step[msg["step"]] = per_step.get(msg["step"], 0) + 1
    show_labels = max(per_step.values(), default=0) <= 16  # beyond that, labels would overlap
    for msg in messages:
        k = msg["step"]
        colour = DIAGRAM_COLOURS[msg["src"] % len(DIAGRAM_COLOURS)]  # one colour per sender: follow a rank
        x0, x1, y0, y1 = k - 0.38, k + 0.38, msg["src"], msg["dst"]
        ax.annotate("", xy=(x1, y1), xytext=(x0, y0), zorder=3,
                    arrowprops={"arrowstyle": "-|>", "color": colour, "linewidth": 1.4, "shrinkA": 3, "shrinkB": 3})
        if show_labels and msg.get("label"):
            ax.annotate(msg["label"], (x0 + 0.05, y0), xytext=(0, 5 if y1 >= y0 else -5), textcoords="offset points",
                        fontsize=7, ha="left", va="bottom" if y1 >= y0 else "top", color=colour, zorder=4,
                        bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 0.4})
    ax.set_ylim(p - 0.5, -0.7)
    ax.set_yticks(range(p), [f"rank {r}" for r in range(p)])
    ax.set_xlim(0.5, steps + 0.5)
    labels = [f"step {k}" + (f"\n{step_labels[k - 1]}" if k - 1 < len(step_labels) else "") for k in range(1, steps + 1)]
    ax.set_xticks(range(1, steps + 1), labels, fontsize=8)
    ax.set_xlabel("step (one more than the step of the last message the sender had received)", fontsize=9)
    ax.set_title(title)
    return fig
