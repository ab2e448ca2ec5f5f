"""Expectations: parsing with units by key, evaluation against rows, and the messages they give."""

from __future__ import annotations

import pytest

from mpisim.errors import ConfigError
from mpisim.scenario.expect import evaluate, evaluate_all, parse_expectation, parse_expectations, value_kind

ROWS = [
    {"collective": "allreduce", "algorithm": "ring", "ranks": 8, "bytes": 1024, "time_s": 12e-6,
     "algbw_GBps": 0.085, "verified": True},
    {"collective": "allreduce", "algorithm": "ring", "ranks": 8, "bytes": 1_200_000_000, "time_s": 2.21,
     "algbw_GBps": 0.54, "verified": True},
    {"collective": "allreduce", "algorithm": "rabenseifner", "ranks": 8, "bytes": 1_200_000_000, "time_s": 2.05,
     "algbw_GBps": 0.58, "verified": False},
]


def check(entry, rows=ROWS):
    return evaluate(parse_expectation(entry), rows)


@pytest.mark.parametrize(
    ("key", "kind"),
    [("time_s", "time"), ("iteration_time_s", "time"), ("bytes", "size"), ("message_bytes", "size"),
     ("bandwidth_Bps", "bandwidth"), ("busbw_GBps", "number"), ("ranks", "count"),
     ("scaling_efficiency", "number"), ("algorithm", "raw"), ("topology.nodes", "raw")],
)
def test_value_kind_follows_the_key(key, kind):
    assert value_kind(key) == kind


def test_values_are_parsed_with_the_units_of_their_key():
    exp = parse_expectation({"metric": "time_s", "where": {"bytes": "1.2 GB", "algorithm": "ring"},
                             "approx": "2.16 s", "rel": "1%"})
    assert exp.where == {"bytes": 1_200_000_000, "algorithm": "ring"}
    assert (exp.check, exp.value, exp.rel, exp.abs) == ("approx", 2.16, 0.01, None)
    assert parse_expectation({"metric": "time_s", "approx": "1 ms", "abs": "10 us"}).abs == 1e-5
    assert parse_expectation({"metric": "bandwidth_Bps", "min": "100 Gbps"}).value == 12.5e9


def test_approx_within_and_outside_tolerance_with_the_design_message():
    ring = {"algorithm": "ring", "bytes": "1.2 GB"}
    ok = check({"metric": "time_s", "where": ring, "approx": "2.2 s", "rel": 0.01})
    assert ok["passed"] and ok["got"] == 2.21
    bad = check({"metric": "time_s", "where": ring, "approx": "2.16 s", "rel": 0.01})
    assert not bad["passed"]
    assert bad["detail"] == (
        "expected time_s ~ 2.16 s (rel 1%) where algorithm=ring, bytes=1.2 GB, got 2.21 s (+2.31%)"
    )
    assert (bad["expected"], bad["got"], bad["rel"]) == (2.16, 2.21, 0.01)


def test_abs_tolerance():
    assert check({"metric": "time_s", "where": {"bytes": "1 KiB"}, "approx": "11 us", "abs": "1 us"})["passed"]
    assert not check({"metric": "time_s", "where": {"bytes": "1 KiB"}, "approx": "10 us", "abs": "1 us"})["passed"]


def test_every_selected_row_must_pass_and_the_message_names_the_worst():
    result = check({"metric": "time_s", "where": {"bytes": "1.2 GB"}, "max": "2.1 s"})
    assert not result["passed"]
    assert result["got"] == [2.21, 2.05]
    assert result["detail"] == "expected time_s <= 2.1 s where bytes=1.2 GB, got 2.21 s (worst of 2 rows, 1 failing)"
    assert check({"metric": "time_s", "where": {"bytes": "1.2 GB"}, "max": "2.5 s"})["passed"]


def test_min_and_equals():
    assert check({"metric": "algbw_GBps", "where": {"bytes": "1.2 GB"}, "min": 0.5})["passed"]
    assert not check({"metric": "algbw_GBps", "min": 0.5})["passed"]
    assert check({"metric": "algorithm", "where": {"bytes": "1 KiB"}, "equals": "ring"})["passed"]
    result = check({"metric": "algorithm", "where": {"time_s": "2.05 s"}, "equals": "ring"})
    assert not result["passed"] and result["got"] == "rabenseifner"


def test_where_matching_no_row_fails_and_says_which_values_exist():
    result = check({"metric": "time_s", "where": {"bytes": "1 MiB"}, "max": "1 s"})
    assert not result["passed"] and result["rows"] == 0
    assert result["detail"].endswith("but no row has bytes=1 MiB (rows have bytes: 1 KiB, 1.2 GB)")
    assert "no row has a 'size' key" in check({"metric": "time_s", "where": {"size": 3}, "max": "1 s"})["detail"]
    assert "no result rows" in evaluate(parse_expectation({"verified": True}), [])["detail"]


def test_missing_metric_fails():
    result = check({"metric": "latency_s", "max": "1 s"})
    assert not result["passed"]
    assert "the rows have no 'latency_s'" in result["detail"]


def test_verified_checks_every_non_null_row():
    result = check({"verified": True})
    assert not result["passed"]
    assert "1 of 3 rows not verified" in result["detail"]
    assert "algorithm=rabenseifner" in result["detail"]
    assert check({"verified": True, "where": {"algorithm": "ring"}})["passed"]


def test_verified_with_size_only_rows_has_nothing_to_check():
    rows = [{**row, "verified": None} for row in ROWS]
    result = check({"verified": True}, rows)
    assert result["passed"]
    assert "nothing to check" in result["detail"]


def test_where_numbers_compare_to_a_relative_1e9():
    assert check({"metric": "algorithm", "where": {"time_s": f"{2.05 * (1 + 1e-12)} s"}, "equals": "rabenseifner"})["passed"]


def test_evaluate_all_keeps_order():
    results = evaluate_all(parse_expectations([{"verified": True}, {"metric": "ranks", "equals": 8}]), ROWS)
    assert [r["check"] for r in results] == ["verified", "equals"]
    assert [r["passed"] for r in results] == [False, True]


@pytest.mark.parametrize(
    ("entry", "path", "message"),
    [
        ("time_s < 1", "[0]", "expected a mapping"),
        ({"max": "1 s"}, "[0].metric", "this key is required"),
        ({"metric": 3, "max": 1}, "[0].metric", "expected a row key"),
        ({"metric": "time_s"}, "[0]", "give exactly one of approx, max, min, equals; got none"),
        ({"metric": "time_s", "approx": "1 s", "rel": "lots"}, "[0].rel", "relative tolerance"),
        ({"metric": "time_s", "approx": "1 s", "rel": -0.1}, "[0].rel", "relative tolerance"),
        ({"metric": "time_s", "max": "1 s", "rel": 0.1}, "[0].rel", "rel goes with approx only"),
        ({"metric": "time_s", "approx": "1 s", "abs": "1 GB"}, "[0].abs", "is not a time"),
        ({"metric": "busbw_GBps", "min": "fast"}, "[0].min", "expected a number"),
        ({"metric": "algorithm", "max": "ring"}, "[0].max", "expected a number"),
        ({"metric": "time_s", "max": 1, "where": [1]}, "[0].where", "expected a mapping of row keys"),
        ({"metric": "time_s", "max": 1, "where": {"bytes": "big"}}, "[0].where.bytes", "is not a size"),
        ({"metric": "time_s", "max": 1, "where": {"algorithm": ["a"]}}, "[0].where.algorithm", "single value"),
        ({"verified": True, "metric": "x"}, "[0].metric", "unknown key 'metric'"),
    ],
)
def test_malformed_entries_name_their_path(entry, path, message):
    with pytest.raises(ConfigError) as info:
        parse_expectations([entry])
    assert info.value.path == path
    assert message in info.value.message


def test_expect_must_be_a_list():
    with pytest.raises(ConfigError, match="expected a list of expectations"):
        parse_expectations({"verified": True})


# --- one-sided gates ---------------------------------------------------------------------------

RING_1_2GB = {"algorithm": "ring", "bytes": "1.2 GB"}


@pytest.mark.parametrize(("baseline", "passed", "change"), [
    ("2.2 s", True, "+0.455%"),    # 2.21 s: a little slower, within 2 %
    ("2.1 s", False, "+5.24%"),    # 5 % slower: fails, and says by how much
    ("3 s", True, "-26.3%"),       # much faster: a one-sided gate passes
])
def test_max_increase_is_one_sided_and_states_the_signed_change(baseline, passed, change):
    result = check({"metric": "time_s", "where": RING_1_2GB, "baseline": baseline, "max_increase": "2%"})
    assert result["passed"] is passed
    assert f"expected time_s at most 2% above the baseline {baseline}" in result["detail"]
    assert f"got 2.21 s ({change})" in result["detail"]


def test_max_decrease_guards_the_other_direction():
    assert check({"metric": "algbw_GBps", "where": RING_1_2GB, "baseline": 0.55, "max_decrease": 0.05})["passed"]
    result = check({"metric": "algbw_GBps", "where": RING_1_2GB, "baseline": 0.6, "max_decrease": 0.05})
    assert not result["passed"]
    # Not "at most -5%", which reads as the opposite of what it means.
    assert result["detail"] == ("expected algbw_GBps at most 5% below the baseline 0.6 where algorithm=ring, "
                                "bytes=1.2 GB, got 0.54 (-10%)")


@pytest.mark.parametrize(("entry", "text"), [
    ({"metric": "time_s", "max_increase": "2%"}, "needs the value it is measured from: baseline"),
    ({"metric": "time_s", "baseline": "1 s"}, "give one of max_increase, max_decrease"),
    ({"metric": "time_s", "baseline": "1 s", "max_increase": "2%", "rel": 0.1}, "takes no rel"),
    ({"metric": "time_s", "baseline": "1 s", "max_increase": "two"}, "relative tolerance"),
])
def test_gate_errors_say_what_is_missing(entry, text):
    with pytest.raises(ConfigError, match=text):
        parse_expectation(entry)


# --- relative changes: a percentage or a fraction, never a guess ---------------------------------


@pytest.mark.parametrize("written", ["2%", "2 %", " 2 % ", 0.02])
@pytest.mark.parametrize("key", ["max_increase", "max_decrease"])
def test_a_gate_takes_a_percentage_or_a_fraction(written, key):
    exp = parse_expectation({"metric": "time_s", "baseline": "100 us", key: written})
    assert (exp.check, exp.value, exp.rel) == (key, 1e-4, 0.02)


@pytest.mark.parametrize(("key", "written", "message"), [
    ("max_increase", 2, "2 is ambiguous: write 2% (or 0.02 for a fraction)"),
    ("max_decrease", 1, "1 is ambiguous: write 1% (or 0.01 for a fraction)"),
    ("max_increase", 2.5, "2.5 is ambiguous: write 2.5% (or 0.025 for a fraction)"),
    ("max_increase", 150, "150 is ambiguous: write 150%"),
    ("rel", 5, "5 is ambiguous: write 5% (or 0.05 for a fraction)"),
    ("max_increase", "2", "expected a relative tolerance such as 2% or 0.02 (a fraction), got '2'"),
    ("max_increase", True, "expected a relative tolerance such as 2% or 0.02 (a fraction), got True"),
    ("max_increase", "-2%", "expected a relative tolerance such as 2% or 0.02 (a fraction), got '-2%'"),
])
def test_a_bare_relative_change_of_one_or_more_is_refused_naming_its_field(key, written, message):
    """`max_increase: 2` was read as +200 % and `rel: 5` as 500 %: now one line naming the field."""
    entry = ({"metric": "time_s", "approx": "100 us", "rel": written} if key == "rel"
             else {"metric": "time_s", "baseline": "100 us", key: written})
    with pytest.raises(ConfigError) as info:
        parse_expectations([entry])
    assert (info.value.path, info.value.message) == (f"[0].{key}", message)


def test_a_resolved_scenario_reads_bare_relative_changes_as_fractions():
    """``units: SI`` (mpisim check, --json) writes every share as a fraction, 150 % as 1.5."""
    from mpisim.engine.units import si_numbers

    with si_numbers():
        exp = parse_expectation({"metric": "time_s", "baseline": 1e-4, "max_increase": 1.5})
    assert exp.rel == 1.5
    assert parse_expectation({"metric": "time_s", "baseline": "100 us", "max_increase": "150%"}).rel == 1.5


def test_the_metric_is_checked_before_the_values_read_in_its_unit():
    """``time_ss`` made ``max: 1 s`` the field blamed ("expected a number"); the metric is checked first."""
    def check_key(key):
        if key != "time_s":
            raise ConfigError(f"{key!r} is not a column; did you mean 'time_s'?")

    for entry, path in [({"metric": "time_ss", "max": "1 s"}, "[0].metric"),
                        ({"metric": "time_ss", "baseline": "1 s", "max_increase": "2%"}, "[0].metric"),
                        ({"metric": "time_s", "where": {"time_ss": "1 s"}, "max": "1 s"}, "[0].where.time_ss")]:
        with pytest.raises(ConfigError) as info:
            parse_expectations([entry], check_key)
        assert (info.value.path, info.value.message) == (path, "'time_ss' is not a column; did you mean 'time_s'?")


def test_without_known_columns_a_unit_on_a_plain_metric_hints_at_a_misspelt_name():
    with pytest.raises(ConfigError) as info:
        parse_expectations([{"metric": "time_ss", "max": "1 s"}])
    assert info.value.path == "[0].max"
    assert info.value.message == ("expected a number, got '1 s'; 'time_ss' holds plain numbers (a time's key ends "
                                  "in _s, a size's in _bytes, a bandwidth's in _Bps): is the metric misspelt?")


# --- failures write the digits that show them ---------------------------------------------------

MEASURED = [{"algorithm": "ring", "time_s": 93.723e-6, "busbw_GBps": 22.9264}]


@pytest.mark.parametrize(("entry", "detail"), [
    # Three digits made these "expected time_s <= 93.7 us, got 93.7 us".
    ({"metric": "time_s", "max": "93.72 us"}, "expected time_s <= 93.72 us, got 93.723 us"),
    ({"metric": "busbw_GBps", "min": 22.93}, "expected busbw_GBps >= 22.93, got 22.926"),
    ({"metric": "time_s", "max": "93.7 us"}, "expected time_s <= 93.7 us, got 93.72 us"),
    ({"metric": "time_s", "equals": "93.7229 us"}, "expected time_s == 93.7229 us, got 93.723 us"),
    ({"metric": "time_s", "baseline": "91.885 us", "max_increase": "2%"},
     "expected time_s at most 2% above the baseline 91.9 us, got 93.7 us (+2.0003%)"),
    ({"metric": "time_s", "baseline": "95.6361 us", "max_decrease": "2%"},
     "expected time_s at most 2% below the baseline 95.6 us, got 93.7 us (-2.0004%)"),
    ({"metric": "time_s", "approx": "92.7 us", "abs": "1.02 us"},
     "expected time_s ~ 92.7 us (abs 1.02 us), got 93.723 us (+1.1%)"),
    # Where three digits show it, the message stays as it was.
    ({"metric": "time_s", "max": "90 us"}, "expected time_s <= 90 us, got 93.7 us"),
    ({"metric": "busbw_GBps", "min": 30}, "expected busbw_GBps >= 30, got 22.93"),
])
def test_a_failure_writes_the_bound_and_the_value_with_the_digits_that_differ(entry, detail):
    result = check(entry, MEASURED)
    assert not result["passed"]
    assert result["detail"] == detail
