"""``mpisim explain``: every registered algorithm, step by step, with printed results equal to numpy's."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mpisim.cli import main
from mpisim.collectives import registry
from mpisim.scenario.explain import decode, describe_pieces, encode, explain, format_explanation, substitute
from tests.collectives.helpers import reference


def printed_results(text: str) -> dict[int, np.ndarray | None]:
    """Parse the 'Result' block: rank -> the buffer printed for it."""
    out = {}
    block = text.split("Result (what each rank's call returned", 1)[1]
    for match in re.finditer(r"rank +(\d+): (\[[^\]]*\]|None)", block):
        values = match.group(2)
        out[int(match.group(1))] = None if values == "None" else np.array(
            [int(v) for v in values.strip("[]").split(",") if v.strip()], dtype=np.int64)
    return out


def cases() -> list:
    out = []
    for algo in registry.available():
        for p in (4, 5):
            if algo.allows(p):
                out.append(pytest.param(algo, p, id=f"{algo.collective}-{algo.name}-p{p}"))
    return out


def nvls_switch(p: int) -> dict:
    """One node of *p* GPUs on an NVSwitch that reduces in the switch: where ``nvls`` may be explained."""
    return {"nodes": 1, "ranks_per_node": p, "device": "gpu",
            "intra": {"kind": "nvswitch", "bandwidth": "1 GB/s", "latency": "1 us", "in_switch_reduction": True}}


@pytest.mark.parametrize(("algo", "p"), cases())
def test_explain_prints_numpys_answer_for_every_algorithm(algo, p):
    count = p + 2 if algo.collective not in ("allgather", "gather") else 3  # uneven blocks
    topology = nvls_switch(p) if "in_switch_reduction" in algo.requires else None
    ex = explain(algo.collective, algo.name, p, count=count, topology=topology)
    text = format_explanation(ex)
    inputs = [np.arange(count, dtype=np.int64) + r * 10 for r in range(p)]
    expected = reference(algo.collective, inputs) if algo.collective != "barrier" else [None] * p
    got = printed_results(text)
    assert sorted(got) == list(range(p))
    for r in range(p):
        if expected[r] is None:
            assert got[r] is None, f"rank {r}"
        else:
            np.testing.assert_array_equal(got[r], expected[r], err_msg=f"rank {r}")
    assert ex.correct
    assert ex.decoded and all(m.pieces is not None and None not in m.pieces for m in ex.messages if m.nbytes)
    assert f"Step {ex.steps} " in text and "Cost" in text and "simulated" in text
    if algo.cost is not None and algo.exact(p) and count % p == 0:
        assert ex.simulated_s == pytest.approx(ex.model_s, rel=1e-9)


def test_ring_allreduce_walkthrough():
    ex = explain("allreduce", "ring", 4)
    assert ex.steps == 6 and len(ex.messages) == 24
    first = [m for m in ex.messages if m.step == 1]
    assert [(m.src, m.dst, describe_pieces(m.pieces)) for m in first] == [
        (0, 1, "x0[3]"), (1, 2, "x1[0]"), (2, 3, "x2[1]"), (3, 0, "x3[2]")]
    # MPICH's rotation: block b starts at rank b+1, so after the reduce-scatter half rank r
    # holds the complete sum of block r.
    third = {m.dst: m for m in ex.messages if m.step == 3}
    assert describe_pieces(third[1].pieces) == "(x0+x2+x3)[1]"
    assert ex.holdings(6) == [{r: set(range(4)) for r in range(4)}] * 4
    assert ex.holdings(0)[2] == {2: set(range(4))}
    text = format_explanation(ex)
    assert "= 2(4-1)·1us + 2((4-1)/4)·32B·1ns/B + ((4-1)/4)·32B·0ns/B" in text
    assert "6.048 us   closed form" in text and "1.000x the closed form" in text


def test_decode_reads_back_sums_of_encoded_inputs():
    x = encode(5, 3)
    assert decode(x[2][1], 5) == (frozenset({2}), 1)
    assert decode(x[0][2] + x[3][2] + x[4][2], 5) == (frozenset({0, 3, 4}), 2)
    assert decode(4 * 32 + 0b111, 5) is None  # three ranks summed cannot give 4 x (element index)
    assert decode(0, 5) is None  # no rank at all
    assert decode(x[1][2], 5, count=2) is None  # an element beyond the buffer
    assert describe_pieces([(frozenset({1}), 0), (frozenset({1}), 1), (frozenset({0, 1, 2, 3}), 4)]) == \
        "x1[0..1] Σx{0-3}[4]"


def test_substitute_replaces_symbols_only_where_they_stand_alone():
    values = {"p": "8", "n": "1KiB", "α": "1us", "β": "1ns/B"}
    assert substitute("⌈lg p⌉(α + nβ)", values) == "⌈lg 8⌉(1us + 1KiB·1ns/B)"
    assert substitute("(p-1)T + α + T_last", values) == "(8-1)T + 1us + T_last"
    assert substitute("2(p-1)α", values) == "2(8-1)·1us"


def test_cli_explain_writes_a_diagram(tmp_path, capsys):
    assert main(["explain", "bcast", "binomial", "--ranks", "8", "-o", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "Step 3" in text and "Step 4" not in text
    diagram = tmp_path / "bcast-binomial-p8.png"
    assert diagram.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and diagram.stat().st_size > 10_000


def test_cli_explain_on_a_preset(capsys):
    assert main(["explain", "allreduce", "ring", "--ranks", "8", "--topology", "dgx-a100"]) == 0
    assert "nvswitch" not in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "message"), [
    (["explain", "allreduce", "rign"], "allreduce has no algorithm 'rign'"),
    (["explain", "allgather", "recursive_doubling", "--ranks", "6"], "power-of-two"),
    (["explain", "allreduce", "ring", "--ranks", "1"], "between 2 and"),
    (["explain", "allreduce", "ring", "--ranks", "4", "--topology", "dgx-a100"], "multiple of 8"),
])
def test_cli_explain_bad_input_is_one_line_exit_2(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize(("algo", "p"), [c for c in cases() if c.values[0].cost is not None])
def test_the_printed_formula_evaluates_to_the_closed_form_shown(algo, p):
    """Whatever formula explain prints as the closed form gives the number printed beside it."""
    from mpisim.scenario.explain import FormulaError, evaluate, formulas

    ex = explain(algo.collective, algo.name, p)
    text = format_explanation(ex)
    if ex.formula is not None:
        assert f"    {ex.formula.text}\n" in text
        assert evaluate(ex.formula.text, ex.values_with_definitions) == pytest.approx(ex.model_s, rel=1e-9)
    else:
        try:
            other = evaluate(formulas(algo)[0].text, ex.values_with_definitions)
        except FormulaError:
            return
        assert other != pytest.approx(ex.model_s, rel=1e-9)
        assert "does not apply at p =" in text and "a bound" in text


def test_rabenseifner_on_five_ranks_prints_the_fold_formula():
    text = format_explanation(explain("allreduce", "rabenseifner", 5))
    assert "p = 5 is not a power of two: p' = 4" in text
    assert "    (2⌊lg p⌋ + 2)α + (2(p'-1)/p' + 2)nβ + (1 + (p'-1)/p')nγ\n" in text
    assert "  = (2⌊lg 5⌋ + 2)·1us + (2(4-1)/4 + 2)·40B·1ns/B" in text
    assert "= 6.14 us   closed form" in text


def test_pipelined_chain_shows_several_segments():
    ex = explain("bcast", "pipelined_chain", 4)
    assert ex.values["k"] == 4 and ex.segment == 8
    from_root = [m for m in ex.messages if m.src == 0 and m.nbytes > 0]
    assert len(from_root) == 4, "the root sends each segment on its own"
    assert [m.step for m in from_root] == [1, 3, 5, 7], "a new segment leaves every other step: a pipeline"
    assert ex.simulated_s == pytest.approx(ex.model_s, rel=1e-9)
    text = format_explanation(ex)
    assert "segments: k = 4 of s = 8 B" in text and "= (4-1)T + (4-2)(T + 1us) + 1us + T_last" in text
    from mpisim.collectives import bcast

    assert bcast.CHAIN_SEGMENT == 256 * 1024, "the library's segment size is restored"


def test_nvls_is_explained_only_on_a_switch_that_reduces(capsys):
    """Off an NVLS switch (the default teaching network, a CPU preset, dgx-a100) explain refuses nvls,
    naming --topology and a preset where it runs; on dgx-h100 it runs."""
    for args in ([], ["--topology", "ib-hdr"], ["--topology", "dgx-a100", "--ranks", "8"]):
        assert main(["explain", "allreduce", "nvls", *args]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and err.startswith("--topology: allreduce algorithm 'nvls' needs an NVSwitch")
        assert "e.g. --topology dgx-h100 --ranks 8" in err
    assert explain("allreduce", "nvls", 8, topology="dgx-h100").correct
