"""The Python API of explain: ``mpisim.explain(...)`` for notebooks and scripts.

``mpisim.explain("bcast", "binomial", ranks=6, root=2)`` runs what ``mpisim explain`` runs and
returns a :class:`Lesson`: the steps (causal depths), the rounds (the run's critical path, one
message a round, with what each pays), the algorithm's cost formula, the closed form read off the rounds,
and the figures (matplotlib ``Figure`` objects a notebook shows inline). ``mpisim`` exposes it
as a lazy attribute (its module ``__getattr__``), so ``import mpisim`` stays light and the
package's top level imports nothing from the layers below until it is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mpisim.teaching.explain import Explanation
from mpisim.teaching.explain import explain as _explain
from mpisim.teaching.printing import format_explanation
from mpisim.teaching.rounds import Round, round_costs, round_formula
from mpisim.teaching.spacetime import plot_spacetime
from mpisim.teaching.steps import Message, message_label


@dataclass
class Lesson:
    """One explained run: what a notebook cell looks at."""

    #: Everything the command-line explanation prints from (inputs, outputs, messages, costs).
    explanation: Explanation

    @property
    def messages(self) -> list[Message]:
        """Every message, in the order they were posted."""
        return self.explanation.messages

    @property
    def steps(self) -> list[list[Message]]:
        """The messages of each step (causal depth), step 1 first."""
        ex = self.explanation
        return [[m for m in ex.messages if m.step == s] for s in range(1, ex.steps + 1)]

    @property
    def rounds(self) -> list[Round]:
        """The rounds, round 1 first; ``round.messages`` index :attr:`messages`."""
        return self.explanation.rounds

    @property
    def formula(self) -> str:
        """The algorithm's cost formula that applies at this rank count, as written."""
        return self.explanation.formula_text

    @property
    def cost_s(self) -> float | None:
        """The algorithm's cost (seconds) at this p and n on this network, or None if it has none."""
        return self.explanation.model_s

    @property
    def simulated_s(self) -> float:
        """The simulated time of the call (seconds)."""
        return self.explanation.simulated_s

    @property
    def rounds_formula(self) -> str:
        """The closed form read off the rounds, e.g. ``3(α + 48B·β)``."""
        return round_formula(self.rounds)

    @property
    def rounds_cost_s(self) -> float:
        """The rounds' α + n·β summed (seconds)."""
        return round_costs(self.rounds, self.explanation.alpha, self.explanation.beta)

    def text(self) -> str:
        """What ``mpisim explain`` prints."""
        return format_explanation(self.explanation)

    def figure(self, upto: int | None = None) -> Any:
        """The space-time diagram (a matplotlib Figure) showing rounds 1..*upto* (default: all)."""
        return plot_spacetime(self.explanation, self.rounds, upto)

    def frames(self) -> list[Any]:
        """One space-time Figure per round (round r shows rounds 1..r), for slides."""
        return [self.figure(r) for r in range(1, len(self.rounds) + 1)]

    def diagram(self) -> Any:
        """The ranks-by-steps message diagram (a matplotlib Figure)."""
        # Lazy: the plots import matplotlib (about a second), which the text lesson never needs.
        from mpisim.report.plots.diagram import plot_message_diagram

        ex = self.explanation
        msgs = [{"src": m.src, "dst": m.dst, "step": m.step, "label": message_label(m)} for m in ex.messages]
        return plot_message_diagram(ex.p, msgs, title=f"{ex.collective} / {ex.algorithm.name} on {ex.p} ranks")

    def __repr__(self) -> str:
        ex = self.explanation
        return (f"<Lesson {ex.collective}/{ex.algorithm.name} p={ex.p}: {len(self.rounds)} rounds, "
                f"{ex.steps} steps, simulated {ex.simulated_s:.6g} s>")


def explain(collective: str, algorithm: str, ranks: int = 4, **options: Any) -> Lesson:
    """Run *algorithm* of *collective* on *ranks* ranks with small arrays and return its :class:`Lesson`.

    *options* are those of ``mpisim explain``: ``count``, ``root``, ``topology``, ``network``,
    ``ports``, ``segment``. Raises ConfigError for an algorithm or rank count that cannot run.
    """
    return Lesson(_explain(collective, algorithm, ranks, **options))
