"""``mpisim explain``: every registered algorithm, step by step, with printed results equal to numpy's."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mpisim.cli import main
from mpisim.collectives import registry
from mpisim.teaching import decode, describe_pieces, encode, explain, format_explanation, substitute
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
    from mpisim.teaching import FormulaError, evaluate, formulas

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


# ------------------------------------------------------------------ the closed form, or why not


def closed_form_cases(ranks=(2, 4, 8, 5, 3, 6, 7)) -> list:
    # nvls and nvls_tree run only on a switch that reduces, not on the teaching network: their own test below.
    return [pytest.param(algo, p, id=f"{algo.collective}-{algo.name}-p{p}")
            for algo in registry.available() for p in ranks
            if algo.allows(p) and "in_switch_reduction" not in algo.requires]


@pytest.mark.parametrize(("algo", "p"), closed_form_cases())
def test_explain_equals_the_closed_form_or_says_specifically_why(algo, p):
    """On the teaching network the simulated time is the closed form's, or explain names the assumption that differs."""
    from mpisim.teaching import GENERIC_CAVEAT, differences

    ex = explain(algo.collective, algo.name, p)
    text = format_explanation(ex)
    if algo.cost is None:
        assert "no closed-form cost function is registered" in text
        return
    reasons = differences(ex)
    if ex.matches:
        assert ex.simulated_s == pytest.approx(ex.model_s, rel=1e-9)
        assert not reasons and "Why they differ" not in text
    else:
        assert reasons, f"{ex.simulated_s / ex.model_s:.4f}x the closed form, and no reason given"
        assert "Why they differ:" in text
    assert " ".join(GENERIC_CAVEAT.split()[:8]) not in " ".join(text.split())


#: Where the teaching network and the closed form differ at the default count, and by how much
#: (simulated / closed form): the list the README's "Reports, traces and teaching" sums up.
DIFFERENT = {
    ("bcast", "scatter_recursive_doubling_allgather"): {3: 1.2520, 5: 1.3364, 6: 1.3368, 7: 4 / 3},
    ("reduce", "rabenseifner"): {5: 1.1922, 6: 1.2, 7: 1.0008},
    ("allreduce", "rabenseifner"): {3: 1.0020, 5: 1.1622, 6: 1.1686, 7: 1.0019},
    ("allreduce", "double_binary_tree"): {3: 0.9980, 4: 1.2490, 5: 1.0961, 6: 1.2937, 7: 1.2984, 8: 1.5953},
    ("reduce_scatter", "recursive_halving"): {3: 1.0013, 5: 1.2418, 6: 1.0029, 7: 1.0015},
}


def test_the_differences_are_the_documented_ones():
    """Every (algorithm, p) whose simulated time differs from its closed form on 2..8 ranks, and the factor."""
    found: dict[tuple[str, str], dict[int, float]] = {}
    for algo in registry.available():
        for p in range(2, 9):
            if algo.cost is None or not algo.allows(p):
                continue
            ex = explain(algo.collective, algo.name, p)
            if not ex.matches:
                found.setdefault((algo.collective, algo.name), {})[p] = ex.simulated_s / ex.model_s
    assert found.keys() == DIFFERENT.keys()
    for key, ratios in DIFFERENT.items():
        assert found[key] == pytest.approx(ratios, rel=1e-3), key


@pytest.mark.parametrize("p", [3, 4, 5, 8])
def test_linear_alltoall_on_one_port_is_its_closed_form(p):
    """Every rank's p-1 sends in p-1 rounds: the ports freed at one instant are handed out together."""
    ex = explain("alltoall", "linear", p)
    assert ex.matches and ex.steps == 1
    assert ex.simulated_s == pytest.approx((p - 1) * (ex.alpha + ex.nbytes / p * ex.beta), rel=1e-9)


@pytest.mark.parametrize("p", [2, 3, 4, 5, 7])
@pytest.mark.parametrize("count", [1, 2, 5, 8, 13, 40])
def test_parameter_server_closed_form_counts_the_credit_and_the_short_last_segment(p, count):
    ex = explain("allreduce", "parameter_server", p, count=count)
    assert ex.simulated_s == pytest.approx(ex.model_s, rel=1e-9)
    if p == 2 and ex.values["k"] > 1:
        text = format_explanation(ex)
        assert "p = 2 is a case of its own" in text and "    (k-1)(T + α) + 2T_last + nγ\n" in text


def test_parameter_server_on_two_ranks_waits_one_credit_per_segment():
    """The user's case: 1.331x the old formula, which charged no credit; the credit's α per segment after the first."""
    ex = explain("allreduce", "parameter_server", 2)
    v = ex.values
    assert v["k"] == 2 and ex.matches
    old = (v["k"] + 1) * (v["α"] + v["s"] * v["β"])
    assert ex.simulated_s == pytest.approx(old + (v["k"] - 1) * v["α"], rel=1e-9)
    assert "= 4.024 us   closed form" in format_explanation(ex)


@pytest.mark.parametrize("p", [3, 5, 6, 7, 12])
def test_binomial_barrier_tokens_take_a_port_so_it_takes_the_textbooks_rounds(p):
    """The root takes its ⌈lg p⌉ children's tokens one after the other: 2⌈lg p⌉α on one port (6 us on 6 ranks)."""
    from mpisim.collectives.costmodel import ceil_lg, floor_lg

    ex = explain("barrier", "binomial", p)
    assert ex.matches and ex.simulated_s == pytest.approx(2 * ceil_lg(p) * ex.alpha, rel=1e-9)
    more = explain("barrier", "binomial", p, ports=0)  # several tokens at once: only ⌊lg p⌋ deep
    assert more.simulated_s == pytest.approx(2 * floor_lg(p) * ex.alpha, rel=1e-9)
    assert f"only ⌊lg p⌋ = {floor_lg(p)} messages deep" in " ".join(format_explanation(more).split())


@pytest.mark.parametrize("collective", ["reduce", "allreduce"])
@pytest.mark.parametrize("p", [3, 5, 6, 7, 12])
def test_rabenseifner_fold_reason_holds(collective, p):
    """On one port the fold is a step of its own unless two or more ranks do not fold; without ports it always is."""
    from mpisim.teaching import differences

    q = 1 << (p.bit_length() - 1)
    one_port = explain(collective, "rabenseifner", p, count=4 * q)
    assert explain(collective, "rabenseifner", p, count=4 * q, ports=0).matches
    assert one_port.matches == (2 * q - p < 2)
    reasons = differences(one_port)
    assert len(reasons) == (0 if one_port.matches else 1)
    assert all("run ahead together" in r and f"p' = {q} divides" in r for r in reasons)


@pytest.mark.parametrize("count", [4, 8, 16])
def test_double_binary_tree_on_two_ranks_sends_two_segments_a_round(count):
    ex = explain("allreduce", "double_binary_tree", 2, count=count)
    v = ex.values
    k = int(v["k"])
    T = v["α"] + v["s"] * v["β"]
    assert ex.simulated_s == pytest.approx(2 * T + 2 * (k - 1) * T, rel=1e-9)
    text = " ".join(format_explanation(ex).split())
    assert ex.matches == (k == 1)
    if k > 1:
        assert f"2⌈lg p⌉(α + sβ + sγ) + 2(k-1)(α + sβ) = {ex.simulated_s * 1e6:.4g} us." in text


def test_an_uneven_count_is_named_and_an_even_one_matches():
    from mpisim.teaching import differences

    ex = explain("allreduce", "ring", 5, count=7)
    assert differences(ex) == [
        "The 7 elements do not split into 5 equal blocks (np.array_split gives blocks of 2 and 1 elements); the "
        "formula charges n/5 bytes a block, so messages that should take equal times do not (a --count that 5 "
        "divides avoids this)."]
    assert explain("allreduce", "ring", 5, count=10).matches


def test_another_network_is_named_as_the_difference():
    from mpisim.teaching import differences

    reasons = differences(explain("bcast", "linear", 4, ports=0))
    assert len(reasons) == 1 and reasons[0].startswith("With --ports 0 a rank has all its messages in flight")
    reasons = differences(explain("bcast", "binomial", 5, network="fairshare", ports=0))
    assert [r.split()[:2] for r in reasons] == [["The", "fairshare"], ["With", "--ports"]]


def test_the_users_three_cases(capsys):
    """alltoall linear on 4, the double binary tree on 8 and the parameter server on 2 ranks, as the user ran them."""
    def run(*argv: str) -> str:
        assert main(["explain", *argv]) == 0
        return " ".join(capsys.readouterr().out.split())

    linear = run("alltoall", "linear", "--ranks", "4")
    assert "1.000x the closed form" in linear and "Why they differ" not in linear
    dbt = run("allreduce", "double_binary_tree", "--ranks", "8")
    assert "1.595x the closed form Why they differ: - The formula is an estimate" in dbt
    assert "a rank with two children receives their segments one after the other" in dbt
    ps = run("allreduce", "parameter_server", "--ranks", "2")
    assert "1.000x the closed form" in ps and "Why they differ" not in ps
    for text in (linear, dbt, ps):
        assert "exact only for some rank counts" not in text


def test_nvls_is_explained_only_on_a_switch_that_reduces(capsys):
    """Off an NVLS switch (the default teaching network, a CPU preset, dgx-a100) explain refuses nvls,
    naming --topology and a preset where it runs; on dgx-h100 it runs."""
    for args in ([], ["--topology", "ib-hdr"], ["--topology", "dgx-a100", "--ranks", "8"]):
        assert main(["explain", "allreduce", "nvls", *args]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and err.startswith("--topology: allreduce algorithm 'nvls' needs an NVSwitch")
        assert "e.g. --topology dgx-h100 --ranks 8" in err
    assert explain("allreduce", "nvls", 8, topology="dgx-h100").correct
