"""Rounds in ``mpisim explain``: the r-th message through a port, what each round pays, its frames."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest

import mpisim
from mpisim.cli import main
from mpisim.collectives import registry
from mpisim.teaching import explain, format_explanation
from mpisim.teaching.rounds import round_costs, round_formula

ALPHA, BETA = 1e-6, 1e-9  # the teaching network: 1 us, 1 GB/s
NOTEBOOK = Path(__file__).resolve().parents[2] / "reports" / "teaching" / "rounds.ipynb"


def test_binomial_bcast_p6_root2_takes_three_rounds_and_the_root_sends_in_each():
    ex = explain("bcast", "binomial", 6, root=2)
    rounds = ex.rounds
    assert len(rounds) == math.ceil(math.log2(6)) == 3
    assert ex.steps < len(rounds)  # the causal depth hides the root's serialised sends
    n = 6 * 8
    hop = ALPHA + n * BETA
    root_sends = [(r.number, start) for r in rounds for i, start in zip(r.messages, r.starts, strict=True)
                  if ex.messages[i].src == 2]
    assert [number for number, _ in root_sends] == [1, 2, 3]
    assert [start for _, start in root_sends] == pytest.approx([0.0, hop, 2 * hop], abs=1e-15)
    # the set of ranks holding the data doubles every round: 1 -> 2 -> 4 -> 6
    holders = {2}
    sizes = []
    for r in rounds:
        holders |= {ex.messages[i].dst for i in r.messages}
        sizes.append(len(holders))
    assert sizes == [2, 4, 6]
    assert round_formula(rounds) == "3(α + 48B·β)"


@pytest.mark.parametrize(("collective", "algorithm", "p"), [
    ("bcast", "binomial", 6), ("bcast", "binomial", 8), ("allreduce", "ring", 4),
    ("allgather", "ring", 5), ("allgather", "recursive_doubling", 8), ("alltoall", "pairwise", 4),
])
def test_the_rounds_alpha_beta_sum_is_the_algorithms_cost(collective, algorithm, p):
    """The closed form read off the picture equals the registered cost (γ is zero on explain's network)."""
    ex = explain(collective, algorithm, p)
    algo = registry.get(collective, algorithm)
    assert ex.alpha == ALPHA and ex.beta == pytest.approx(BETA)
    cost = algo.cost(p, ex.nbytes, ex.alpha, ex.beta, 0.0)
    assert round_costs(ex.rounds, ex.alpha, ex.beta) == pytest.approx(cost, rel=1e-12)
    # rounds on one port do not overlap: each starts when the one before it ends
    for before, after in zip(ex.rounds, ex.rounds[1:], strict=False):
        assert after.start >= before.end - 1e-15


def test_rabenseifner_p5_fold_and_first_halving_are_different_rounds():
    ex = explain("allreduce", "rabenseifner", 5)
    number = {i: r.number for r in ex.rounds for i in r.messages}
    fold = next(i for i, m in enumerate(ex.messages) if (m.src, m.dst) == (0, 1))
    later_by_1 = [number[i] for i, m in enumerate(ex.messages) if m.src == 1]
    assert min(later_by_1) > number[fold]
    assert ex.steps < len(ex.rounds)


@pytest.mark.parametrize(("collective", "algorithm", "p"), [
    ("allreduce", "rabenseifner", 5), ("allreduce", "rabenseifner", 7), ("allreduce", "recursive_doubling", 6),
    ("reduce", "rabenseifner", 5), ("bcast", "binomial", 6), ("allgather", "bruck", 5), ("barrier", "binomial", 6),
])
def test_the_rounds_add_up_to_the_simulated_time_and_never_overlap(collective, algorithm, p):
    """Rounds are the run's critical path: consecutive, each α + nβ on the analytic network, summing to the run."""
    ex = explain(collective, algorithm, p)
    rounds = ex.rounds
    assert round_costs(rounds, ex.alpha, ex.beta) == pytest.approx(ex.simulated_s, rel=1e-12)
    assert rounds[0].start == 0.0 and rounds[-1].end == pytest.approx(ex.simulated_s, rel=1e-12)
    for before, after in itertools.pairwise(rounds):
        assert after.start == pytest.approx(before.end, abs=1e-15)
    assert sorted(i for r in rounds for i in r.messages) == list(range(len(ex.messages)))
    for r in rounds:
        assert r.end - r.start == pytest.approx(r.cost(ex.alpha, ex.beta), rel=1e-12)
        # every message holds its ports for exactly α + nβ, from when its bytes leave
        for i, left, arrived in zip(r.messages, r.starts, r.ends, strict=True):
            assert arrived - left == pytest.approx(ex.alpha + ex.messages[i].nbytes * ex.beta, rel=1e-12)
            assert r.start - 1e-15 <= left


def test_rabenseifner_p5_on_one_port_says_which_port_wait_the_closed_form_does_not_count():
    """Closed form 6α + 3.5nβ = 6.14 us (fold, 2 halvings, 2 doublings, unfold) is right: the multi-port
    run equals it; on one port rank 4's second-halving message takes rank 2's receive port before
    rank 1's first-halving message, one round more (7.136 us), and the round view says so."""
    ex = explain("allreduce", "rabenseifner", 5)
    assert ex.model_s == pytest.approx(6 * ALPHA + 3.5 * 40 * BETA)
    assert ex.simulated_s == pytest.approx(7.136e-6)
    rounds = ex.rounds
    assert len(rounds) == 7 and round_costs(rounds, ex.alpha, ex.beta) == pytest.approx(7.136e-6)
    crit = [(ex.messages[r.critical].src, ex.messages[r.critical].dst) for r in rounds]
    assert crit[1:3] == [(4, 2), (1, 2)]
    text = " ".join(format_explanation(ex).split())
    assert "Sum of the rounds: 7α + 136B·β = 7.136 us = the simulated time (the algorithm's cost: 6.14 us)" in text
    assert ("The difference is physical: on one port rank 1 -> rank 2 (round 3) waited for rank 2's receive port, "
            "which rank 4 -> rank 2, a message it does not depend on, took first") in text
    # without the port limit (and blocks that 4 divides) the same algorithm's rounds are the formula's
    free = explain("allreduce", "rabenseifner", 5, ports=0, count=8)
    n = 64
    assert len(free.rounds) == 6
    assert round_costs(free.rounds, free.alpha, free.beta) == pytest.approx(free.simulated_s, rel=1e-12)
    assert free.simulated_s == pytest.approx(free.model_s) == pytest.approx(6 * ALPHA + 3.5 * n * BETA)
    assert "The difference is physical" not in format_explanation(free)


def test_explain_prints_the_rounds_and_says_the_algorithms_cost_not_docstring():
    text = format_explanation(explain("bcast", "binomial", 6, root=2))
    assert "Round 3  (2.096 us -> 3.144 us, pays α + 48B·β" in text
    assert ("Sum of the rounds: 3(α + 48B·β) = 3.144 us = the simulated time (the algorithm's cost: 3.144 us)"
            in text)
    assert "docstring" not in text


def test_python_api_returns_steps_rounds_formula_and_figures():
    lesson = mpisim.explain("bcast", "binomial", ranks=6, root=2)
    assert isinstance(lesson, mpisim.Lesson)
    assert len(lesson.rounds) == 3 and len(lesson.steps) == 2
    assert lesson.formula == "⌈lg p⌉(α + nβ)"
    assert lesson.rounds_cost_s == pytest.approx(lesson.cost_s) == pytest.approx(3 * (ALPHA + 48 * BETA))
    frames = lesson.frames()
    assert len(frames) == 3 and all(len(f.axes) == 1 for f in frames)
    # frame r draws the arrows of rounds 1..r: 1, 3, 5 messages
    assert [sum(1 for t in f.axes[0].texts if t.get_text().startswith("x2")) for f in frames] == [1, 3, 5]


def test_cli_explain_writes_one_frame_per_round_and_a_gif(tmp_path, capsys):
    assert main(["explain", "bcast", "binomial", "--ranks", "6", "--root", "2", "-o", str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert [n for n in names if "-round" in n and n.endswith(".png")] == [
        f"bcast-binomial-p6-round{r}.png" for r in (1, 2, 3)]
    gif = tmp_path / "bcast-binomial-p6-rounds.gif"
    assert gif.read_bytes()[:6] == b"GIF89a"
    from PIL import Image

    with Image.open(gif) as image:
        assert image.n_frames == 3
    assert "one frame per round: 4 files" in capsys.readouterr().out


def test_the_teaching_notebook_runs():
    """Execute the notebook's code cells in order, as a kernel would (no jupyter needed)."""
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    assert notebook["nbformat"] == 4
    code = ["".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert len(code) >= 4
    namespace: dict = {"__name__": "__notebook__"}
    for source in code:
        exec(compile(source, str(NOTEBOOK), "exec"), namespace)
    assert len(namespace["lesson"].rounds) == 3


def test_explain_prints_the_rounds_before_the_causal_steps():
    """The rounds are what the single-port closed form counts, so a student reads them first."""
    text = format_explanation(explain("bcast", "binomial", 6, root=2))
    assert text.index("Round 1") < text.index("Step 1")
