"""The space-time diagram of an explanation: simulated time across, ranks down, one arrow per message.

Each message is an arrow from the moment its bytes leave the sender (on the single-port network,
when both its ports are free) to the moment its last byte arrives, labelled with what it carries (``x2[0..5]``, or its bytes). Rounds are shaded bands,
each captioned with what it pays (``α + 48B·β``), so the closed form is read off the picture as
the sum of the captions. :func:`write_frames` draws one frame per round (round r shows rounds
1..r) as a PNG series and an animated GIF for slides; without Pillow it writes an SVG series.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mpisim.report.tables import fmt_time
from mpisim.teaching.rounds import Round, round_formula
from mpisim.teaching.steps import message_label

#: Seconds each frame of the animated GIF stays on screen.
FRAME_SECONDS = 1.5


def plot_spacetime(ex: Any, rounds: Sequence[Round], upto: int | None = None, fig: Any = None) -> Any:
    """Draw the space-time diagram of explanation *ex*, showing rounds 1..*upto* (default: all).

    Draws into *fig* (cleared first) when given, so an animation redraws one figure per frame;
    the axes span the whole run in every frame, so arrows stay put from frame to frame.
    """
    # Lazy: matplotlib costs about a second to import, and the text explanation never needs it.
    from mpisim.report.plots.style import DIAGRAM_COLOURS, new_figure, time_unit

    upto = len(rounds) if upto is None else upto
    end = max((max(r.end, *r.ends) for r in rounds), default=0.0) or 1e-6
    scale, unit = time_unit(end)
    if fig is None:
        fig = new_figure(min(max(8.0, 2.2 * len(rounds) + 2.0), 22.0), min(2.4 + 0.6 * ex.p, 14.0))
    else:
        fig.clear()
    ax = fig.add_subplot()
    for r in rounds:
        if r.number > upto:
            continue
        ax.axvspan(r.start / scale, r.end / scale, color="#eef2f8" if r.number % 2 else "#f8f4ec", zorder=0)
        ax.text((r.start + r.end) / 2 / scale, -1.1, f"round {r.number}\n{r.term()}", ha="center", va="top",
                fontsize=7)
    for rank in range(ex.p):
        ax.axhline(rank, color="#bbbbbb", linewidth=0.8, zorder=1)
    for r in rounds[:upto]:
        for i, start, arrived in zip(r.messages, r.starts, r.ends, strict=True):
            msg = ex.messages[i]
            colour = DIAGRAM_COLOURS[msg.src % len(DIAGRAM_COLOURS)]  # one colour per sender: follow a rank
            x0, x1 = start / scale, arrived / scale
            ax.annotate("", xy=(x1, msg.dst), xytext=(x0, msg.src), zorder=3,
                        arrowprops={"arrowstyle": "->", "color": colour, "linewidth": 1.3})
            ax.text(x0 + (x1 - x0) * 0.25, msg.src + (msg.dst - msg.src) * 0.25, message_label(msg), fontsize=6.5,
                    color=colour, ha="center", va="center", zorder=4,
                    bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.8})
    ax.set_xlim(0, end / scale * 1.02)
    ax.set_ylim(ex.p - 0.5, -1.2)
    ax.set_yticks(range(ex.p), [f"rank {r}" for r in range(ex.p)])
    ax.set_xlabel(f"simulated time ({unit})")
    shown = rounds[:upto]
    ax.set_title(f"{ex.collective} / {ex.algorithm.name} on {ex.p} ranks: round {upto} of {len(rounds)}, "
                 f"paid so far {round_formula(shown)} = {fmt_time(sum(r.cost(ex.alpha, ex.beta) for r in shown))}",
                 fontsize=9)
    return fig


def write_frames(ex: Any, rounds: Sequence[Round], out_dir: str | Path) -> list[Path]:
    """Write one frame per round into *out_dir* and an animated GIF; return the paths written.

    Frames are ``<name>-round<r>.png`` with the GIF ``<name>-rounds.gif`` (matplotlib's
    PillowWriter), or ``<name>-round<r>.svg`` when Pillow is not installed.
    """
    # Lazy: matplotlib costs about a second to import, and the text explanation never needs it.
    # Optional: Pillow writes the GIF (PillowWriter needs it only when it writes); without it the
    # frames are an SVG series.
    from matplotlib.animation import PillowWriter as Writer
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    PillowWriter = Writer if importlib.util.find_spec("PIL") is not None else None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    name = f"{ex.collective}-{ex.algorithm.name}-p{ex.p}"
    paths: list[Path] = []
    suffix = "png" if PillowWriter is not None else "svg"
    for upto in range(1, len(rounds) + 1):
        fig = plot_spacetime(ex, rounds, upto)
        FigureCanvasAgg(fig)
        path = out / f"{name}-round{upto}.{suffix}"
        fig.savefig(path, format=suffix, metadata={"Software": None} if suffix == "png" else {"Date": None})
        paths.append(path)
    if PillowWriter is not None and rounds:
        gif = out / f"{name}-rounds.gif"
        writer = PillowWriter(fps=1.0 / FRAME_SECONDS)
        movie = plot_spacetime(ex, rounds, 1)
        FigureCanvasAgg(movie)
        with writer.saving(movie, str(gif), dpi=80):
            for upto in range(1, len(rounds) + 1):
                plot_spacetime(ex, rounds, upto, fig=movie)
                writer.grab_frame()
        paths.append(gif)
    return paths

