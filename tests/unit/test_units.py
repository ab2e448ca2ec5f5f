"""Units: every accepted unit, bits vs bytes, 10^3 vs 2^10, error messages, exact round trips."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mpisim.engine.units import (
    format_bandwidth,
    format_count,
    format_per_byte,
    format_size,
    format_time,
    parse_bandwidth,
    parse_count,
    parse_per_byte,
    parse_size,
    parse_time,
    parse_whole,
    pretty_bandwidth,
    pretty_size,
    pretty_time,
    si_numbers,
)
from mpisim.errors import ConfigError, UnitError

PARSERS = [parse_time, parse_size, parse_bandwidth, parse_per_byte, parse_count]
KIND = {
    parse_time: "time",
    parse_size: "size",
    parse_bandwidth: "bandwidth",
    parse_per_byte: "time per byte",
    parse_count: "count",
}
# One valid unit per parser, to build otherwise valid values ("-1 us", "1 B", ...).
SOME_UNIT = {
    parse_time: "us",
    parse_size: "KiB",
    parse_bandwidth: "GB/s",
    parse_per_byte: "ns/B",
    parse_count: "M",
}

# --- parsing: every unit ------------------------------------------------------------------------

TIMES = [
    ("2 s", 2.0),
    ("20 ms", 0.02),
    ("1.5 us", 1.5e-6),
    ("1.5us", 1.5e-6),
    ("1.5 µs", 1.5e-6),  # micro sign
    ("1.5 μs", 1.5e-6),  # greek mu
    ("3 ns", 3e-9),
    ("250 ps", 2.5e-10),
    ("0", 0.0),
    ("0 s", 0.0),
    ("  7 ms  ", 7e-3),
    ("1e-3 s", 1e-3),
    ("1.5e3 us", 1.5e-3),
    (".5 s", 0.5),
    ("-0 us", 0.0),
    (0, 0.0),  # zero needs no unit
]

SIZES = [
    ("0 B", 0),
    ("1 B", 1),
    ("123 B", 123),
    ("1 KB", 1000),
    ("1 kB", 1000),
    ("1 MB", 10**6),
    ("1.2GB", 1_200_000_000),
    ("1.2 GB", 1_200_000_000),
    ("2 TB", 2 * 10**12),
    ("1 PB", 10**15),
    ("1 KiB", 1024),
    ("64 KiB", 65536),
    ("1 MiB", 2**20),
    ("1 GiB", 2**30),
    ("1 TiB", 2**40),
    ("1 PiB", 2**50),
    ("0.5 KiB", 512),
    ("1.5 MiB", 3 * 2**19),
    ("1e3 B", 1000),
    (0, 0),
]

BANDWIDTHS = [
    # bits per second: divided by 8
    ("8 bps", 1.0),
    ("8 b/s", 1.0),
    ("8 bit/s", 1.0),
    ("8 Kbps", 1e3),
    ("8 kbps", 1e3),
    ("8 Kb/s", 1e3),
    ("8 Mbps", 1e6),
    ("1 Mb/s", 125e3),
    ("100 Gbps", 12.5e9),
    ("200 Gb/s", 25e9),
    ("200 Gbit/s", 25e9),
    ("1 Tbps", 125e9),
    ("1 Tb/s", 125e9),
    # bytes per second
    ("1 B/s", 1.0),
    ("1 KB/s", 1e3),
    ("1 kB/s", 1e3),
    ("1 MB/s", 1e6),
    ("12.5 GB/s", 12.5e9),
    ("12.5GB/s", 12.5e9),
    ("1 TB/s", 1e12),
    ("25 GBps", 25e9),
    ("1 KiB/s", 1024.0),
    ("1 MiB/s", 2.0**20),
    ("1 GiB/s", 2.0**30),
    ("1 TiB/s", 2.0**40),
]

PER_BYTE = [
    ("1 s/B", 1.0),
    ("2 ms/B", 2e-3),
    ("3 us/B", 3e-6),
    ("3 µs/B", 3e-6),
    ("0.1 ns/B", 1e-10),
    ("100 ps/B", 1e-10),
    ("1e-10 s/B", 1e-10),
    (0, 0.0),
]

#: Bare numbers: refused where users write them, read as SI values in mpisim's own resolved
#: scenarios (``units: SI``, see units.si_numbers).
BARE = [
    (parse_time, "1e-10", 1e-10),  # YAML 1.1 reads 1e-10 (no dot) as a string
    (parse_time, 2, 2.0),
    (parse_time, 0.5, 0.5),
    (parse_size, "4096", 4096),
    (parse_size, 4096, 4096),
    (parse_size, 8.0, 8),
    (parse_bandwidth, "1e9", 1e9),
    (parse_bandwidth, 1e9, 1e9),
    (parse_bandwidth, 5, 5.0),
    (parse_per_byte, "1e-10", 1e-10),
    (parse_per_byte, 1e-10, 1e-10),
]

COUNTS = [
    ("300M", 300_000_000),
    ("300 M", 300_000_000),
    ("1.5B", 1_500_000_000),
    ("25K", 25_000),
    ("25k", 25_000),
    ("2G", 2 * 10**9),
    ("1T", 10**12),
    ("1000", 1000),
    ("3e8", 300_000_000),
    (1000, 1000),
    (3e8, 300_000_000),
]

TABLES = [
    *[(parse_time, text, expected) for text, expected in TIMES],
    *[(parse_size, text, expected) for text, expected in SIZES],
    *[(parse_bandwidth, text, expected) for text, expected in BANDWIDTHS],
    *[(parse_per_byte, text, expected) for text, expected in PER_BYTE],
    *[(parse_count, text, expected) for text, expected in COUNTS],
]
FORMATTER = {
    parse_time: format_time,
    parse_size: format_size,
    parse_bandwidth: format_bandwidth,
    parse_per_byte: format_per_byte,
    parse_count: format_count,
}


def _case_id(value):
    return value.__name__ if callable(value) else repr(value)


@pytest.mark.parametrize(("parse", "text", "expected"), TABLES, ids=_case_id)
def test_every_unit_parses_to_si(parse, text, expected):
    """Each accepted spelling gives the SI value, exactly (the expected literals are correctly rounded)."""
    value = parse(text)
    assert value == expected
    assert type(value) is type(expected)  # sizes and counts are int, the rest float


@pytest.mark.parametrize(("parse", "text", "expected"), TABLES, ids=_case_id)
def test_parsed_values_format_and_parse_back(parse, text, expected):
    assert parse(FORMATTER[parse](parse(text))) == expected


@pytest.mark.parametrize(("parse", "value", "expected"), BARE, ids=_case_id)
def test_a_bare_number_is_refused_with_an_example(parse, value, expected):
    """``latency: 2`` could be 2 s or 2 us: never guessed (it once made a 1 MiB allreduce take 36 s)."""
    with pytest.raises(UnitError, match=r"has no unit; write e\.g\. .* \(units are never guessed\)"):
        parse(value)


def test_the_message_names_the_value_and_a_unit():
    with pytest.raises(UnitError) as info:
        parse_time(2)
    assert str(info.value).startswith("2 has no unit; write e.g. 2 us")


@pytest.mark.parametrize(("parse", "value", "expected"), BARE, ids=_case_id)
def test_bare_numbers_are_si_inside_a_resolved_scenario(parse, value, expected):
    with si_numbers():
        assert parse(value) == expected


def test_parsing_rounds_once_not_per_step():
    """'100 ns' is the double nearest 1e-7; multiplying 100 by 1e-9 would be one ulp off."""
    assert 100 * 1e-9 != 1e-7
    assert parse_time("100 ns") == 1e-7
    assert parse_per_byte("0.1 ns/B") == 1e-10
    assert parse_bandwidth("0.3 Gbps") == 0.0375e9


# --- the two conventions that are never guessed -------------------------------------------------


@pytest.mark.parametrize(("prefix", "power"), [("", 0), ("K", 3), ("M", 6), ("G", 9), ("T", 12)])
def test_lowercase_b_is_bits_and_uppercase_b_is_bytes(prefix, power):
    assert parse_bandwidth(f"8 {prefix}bps") == 10**power
    assert parse_bandwidth(f"8 {prefix}b/s") == 10**power
    assert parse_bandwidth(f"8 {prefix}B/s") == 8 * 10**power
    assert parse_bandwidth(f"8 {prefix}Bps") == 8 * 10**power


@given(st.integers(min_value=0, max_value=10**6))
def test_bits_are_an_eighth_of_bytes(n):
    assert parse_bandwidth(f"{n} Gbps") * 8 == parse_bandwidth(f"{n} GB/s")
    assert parse_bandwidth(f"{n} Gb/s") == parse_bandwidth(f"{n} Gbps")


@pytest.mark.parametrize(("prefix", "k"), [("K", 1), ("M", 2), ("G", 3), ("T", 4), ("P", 5)])
def test_kb_is_a_power_of_1000_and_kib_a_power_of_1024(prefix, k):
    assert parse_size(f"1 {prefix}B") == 1000**k
    assert parse_size(f"1 {prefix}iB") == 1024**k
    if k <= 4:
        assert parse_bandwidth(f"1 {prefix}B/s") == 1000**k
        assert parse_bandwidth(f"1 {prefix}iB/s") == 1024**k


@given(st.integers(min_value=0, max_value=10**9))
def test_sizes_scale_exactly(n):
    assert parse_size(f"{n} KiB") == n * 1024
    assert parse_size(f"{n}KB") == n * 1000
    assert parse_count(f"{n}M") == n * 10**6


@pytest.mark.parametrize(
    ("parse", "text", "suggestion"),
    [
        (parse_bandwidth, "10 gbps", "did you mean Gbps or GBps?"),
        (parse_bandwidth, "10 GBPS", "did you mean Gbps or GBps?"),
        (parse_bandwidth, "10 mbps", "did you mean Mbps or MBps?"),  # m is milli, never mega
        (parse_size, "1 kib", "did you mean KiB?"),
        (parse_size, "1 Gb", "did you mean GB?"),
        (parse_time, "1 MS", "did you mean ms?"),
    ],
)
def test_units_are_case_sensitive_and_the_error_says_so(parse, text, suggestion):
    with pytest.raises(UnitError) as info:
        parse(text)
    assert "case-sensitive" in str(info.value)
    assert str(info.value).endswith(suggestion)


def test_a_size_in_bits_or_a_bandwidth_without_per_second_is_explained():
    with pytest.raises(UnitError, match=r"^'10 GB' is not a bandwidth .*such as GB/s$"):
        parse_bandwidth("10 GB")
    with pytest.raises(UnitError, match=r"^'1 Gbps' is not a size .*that is a bandwidth$"):
        parse_size("1 Gbps")
    with pytest.raises(UnitError, match=r"b means bits$"):
        parse_size("8 Kbit")


# --- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (parse_bandwidth, "10 Gbsp", "'10 Gbsp' is not a bandwidth (e.g. 100 Gbps, 12.5 GB/s)"),
        (parse_time, "fast", "'fast' is not a time (e.g. 1.5 us, 20 ms)"),
        (parse_size, "1.2 GQ", "'1.2 GQ' is not a size (e.g. 64 KiB, 1.2 GB)"),
        (parse_per_byte, "1 ns", "'1 ns' is not a time per byte (e.g. 0.1 ns/B, 1e-10 s/B)"),
        (parse_count, "many", "'many' is not a count (e.g. 300M, 1.5B, 25K)"),
        (parse_time, "", "'' is not a time (e.g. 1.5 us, 20 ms)"),
        (parse_time, "1 G B", "'1 G B' is not a time (e.g. 1.5 us, 20 ms)"),
        (parse_time, "us", "'us' is not a time (e.g. 1.5 us, 20 ms)"),
        (parse_time, "1.5 GB", "'1.5 GB' is not a time (e.g. 1.5 us, 20 ms)"),
        (parse_size, "1 us", "'1 us' is not a size (e.g. 64 KiB, 1.2 GB)"),
        (parse_count, "1 KiB", "'1 KiB' is not a count (e.g. 300M, 1.5B, 25K)"),
        (parse_time, None, "None is not a time (e.g. 1.5 us, 20 ms)"),
        (parse_size, [1, 2], "[1, 2] is not a size (e.g. 64 KiB, 1.2 GB)"),
        (parse_time, "١ s", "'١ s' is not a time (e.g. 1.5 us, 20 ms)"),  # only ASCII digits
    ],
)
def test_unparseable_values_are_quoted_with_examples(parse, text, message):
    with pytest.raises(UnitError) as info:
        parse(text)
    assert str(info.value) == message


def test_unit_errors_are_config_errors_located_by_the_caller():
    with pytest.raises(UnitError) as info:
        parse_bandwidth("10 Gbsp")
    err = info.value
    assert isinstance(err, ConfigError)
    assert err.path == ""
    located = err.at("topology.inter.bandwidth")
    assert str(located) == "topology.inter.bandwidth: '10 Gbsp' is not a bandwidth (e.g. 100 Gbps, 12.5 GB/s)"


@pytest.mark.parametrize("parse", PARSERS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("value", ["fast", "1 parsec", "x1", "1..2 s", "--1"])
def test_every_parser_quotes_the_value_and_gives_examples(parse, value):
    with pytest.raises(UnitError) as info:
        parse(value)
    assert str(info.value).startswith(f"{value!r} is not a {KIND[parse]} (e.g. ")


@pytest.mark.parametrize("parse", PARSERS, ids=lambda p: p.__name__)
def test_negative_values_are_rejected(parse):
    for value in (f"-1 {SOME_UNIT[parse]}", -1, -2.5, float("-inf")):
        with pytest.raises(UnitError) as info:
            parse(value)
        assert str(info.value) == f"a {KIND[parse]} must not be negative, got {value!r}"


@pytest.mark.parametrize("parse", PARSERS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("value", [True, False])
def test_booleans_are_rejected_with_a_yaml_hint(parse, value):
    """YAML 1.1 turns `yes`/`no`/`on`/`off` into booleans, and bool is an int subclass."""
    with pytest.raises(UnitError, match="YAML reads yes"):
        parse(value)


@pytest.mark.parametrize("parse", PARSERS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("value", [float("nan"), "nan", "NaN us"])
def test_nan_is_rejected(parse, value):
    with pytest.raises(UnitError, match="is not a"):
        parse(value)


@pytest.mark.parametrize(
    "parse", [parse_time, parse_size, parse_per_byte, parse_count], ids=lambda p: p.__name__
)
@pytest.mark.parametrize("value", [float("inf"), "inf", "infinity"])
def test_infinity_is_rejected_except_as_a_bandwidth(parse, value):
    with pytest.raises(UnitError, match="is not a"):
        parse(value)


@pytest.mark.parametrize("value", ["inf", " Inf ", "infinity", float("inf")])
def test_infinite_bandwidth_means_no_limit(value):
    assert parse_bandwidth(value) == math.inf


@pytest.mark.parametrize(
    ("parse", "value", "message"),
    [
        (parse_size, "1.5 B", "'1.5 B' is not a whole number of bytes"),
        (parse_size, "0.3 KiB", "'0.3 KiB' is not a whole number of bytes"),
        (parse_size, "1.5 B", "'1.5 B' is not a whole number of bytes"),
        (parse_count, "1.5", "'1.5' is not a whole number of items"),
        (parse_count, "1.0001K", "'1.0001K' is not a whole number of items"),
    ],
)
def test_sizes_and_counts_must_be_whole(parse, value, message):
    with pytest.raises(UnitError) as info:
        parse(value)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("parse", "value"),
    [
        (parse_time, "1e400 s"),  # beyond the largest double
        (parse_bandwidth, "1e400 GB/s"),
        (parse_size, "1e99999999 B"),  # must fail fast, not build 10**99999999
        (parse_time, "1" * 5000),  # more digits than int() converts
    ],
)
def test_values_out_of_range_are_rejected_quickly(parse, value):
    with pytest.raises(UnitError) as info:
        parse(value)
    message = str(info.value)
    assert f"is out of range for a {KIND[parse]}" in message
    assert len(message) < 120  # a pasted novel is quoted in part only


def test_numpy_scalars_are_numbers():
    np = pytest.importorskip("numpy")
    assert parse_count(np.int64(4096)) == 4096
    with si_numbers():
        assert parse_size(np.int64(4096)) == 4096
        assert parse_time(np.float32(0.5)) == 0.5
        assert parse_bandwidth(np.float64(1e9)) == 1e9


# --- exact formatting ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (1.5e-6, "1.5 us"),
        (0.02, "20 ms"),
        (2.0, "2 s"),
        (3e-9, "3 ns"),
        (0.0, "0 s"),
        (-0.0, "0 s"),
        (123.456, "123.456 s"),
        (1e-12, "0.001 ns"),
        (1e300, "1e+300 s"),
        (5e-324, "5e-315 ns"),
    ],
)
def test_format_time(seconds, text):
    assert format_time(seconds) == text


@pytest.mark.parametrize(
    ("nbytes", "text"),
    [
        (0, "0 B"),
        (123, "123 B"),
        (1000, "1 KB"),
        (1024, "1 KiB"),
        (1234, "1234 B"),  # "1.234 KB" is no shorter
        (1536, "1.5 KiB"),
        (65536, "64 KiB"),
        (2**20, "1 MiB"),
        (2**30, "1 GiB"),
        (100_000, "100 KB"),
        (3_000_000, "3 MB"),
        (2430, "2430 B"),  # as short as "2.43 KB": plain bytes win the tie
        (125 * 1024, "125 KiB"),  # as short as "128 KB": binary wins the tie
        (1_200_000_000, "1.2 GB"),
        (2**50, "1 PiB"),
    ],
)
def test_format_size_prefers_the_shortest_exact_form(nbytes, text):
    assert format_size(nbytes) == text


@pytest.mark.parametrize(
    ("bps", "text"),
    [
        (12.5e9, "12.5 GB/s"),
        (0.0, "0 B/s"),
        (1e12, "1 TB/s"),
        (250e6, "250 MB/s"),
        (1.5, "1.5 B/s"),
        (math.inf, "inf"),
    ],
)
def test_format_bandwidth(bps, text):
    assert format_bandwidth(bps) == text


@pytest.mark.parametrize(
    ("cost", "text"),
    [(1e-10, "0.1 ns/B"), (2e-6, "2 us/B"), (0.0, "0 s/B"), (5e-3, "5 ms/B"), (3.0, "3 s/B")],
)
def test_format_per_byte(cost, text):
    assert format_per_byte(cost) == text


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (300_000_000, "300M"),
        (1_500_000_000, "1.5B"),
        (25_000, "25K"),
        (1234567, "1234567"),
        (0, "0"),
        (10**12, "1T"),
        (2**60, "1152921504606846976"),
    ],
)
def test_format_count(count, text):
    assert format_count(count) == text


@pytest.mark.parametrize("formatter", [format_time, format_bandwidth, format_per_byte])
@pytest.mark.parametrize("value", [-1.0, -1e-300, float("nan")])
def test_float_formatters_reject_what_cannot_parse_back(formatter, value):
    with pytest.raises(ValueError, match="cannot format"):
        formatter(value)


@pytest.mark.parametrize("formatter", [format_time, format_per_byte])
def test_time_formatters_reject_infinity(formatter):
    with pytest.raises(ValueError, match="finite"):
        formatter(math.inf)


@pytest.mark.parametrize("formatter", [format_size, format_count])
def test_integer_formatters_reject_negatives_and_non_integers(formatter):
    with pytest.raises(ValueError, match="negative"):
        formatter(-1)
    for value in (1.5, 2.0, True, "1 KiB"):
        with pytest.raises(TypeError, match="not an integer"):
            formatter(value)


def test_formatters_reject_non_numbers():
    for formatter in (format_time, format_bandwidth, format_per_byte):
        with pytest.raises(TypeError, match="not a number"):
            formatter("1 us")
        with pytest.raises(TypeError, match="not a number"):
            formatter(True)


# --- round trips: parse(format(x)) == x exactly -------------------------------------------------

#: Up to each family's stated maximum (times 1e9 s, per-byte 1000 s/B, the rest 10^18).
finite_non_negative = st.floats(min_value=0.0, max_value=1e3, allow_nan=False, allow_infinity=False)
within_range = st.builds(
    lambda mantissa, power: mantissa * 10.0**power,
    st.floats(min_value=0.0, max_value=1000.0, allow_nan=False),
    st.integers(min_value=-15, max_value=0),
)
# Values near the unit boundaries exercise every unit, not just the extremes hypothesis favours.
scaled = st.builds(
    lambda mantissa, power: mantissa * 10.0**power,
    st.floats(min_value=0.0, max_value=1000.0, allow_nan=False),
    st.integers(min_value=-15, max_value=5),
)
sizes = st.integers(min_value=0, max_value=10**18) | st.builds(
    lambda m, k, base: min(m * base**k, 10**18),
    st.integers(min_value=0, max_value=5000),
    st.integers(min_value=0, max_value=5),
    st.sampled_from([1000, 1024]),
)


@given(finite_non_negative | scaled)
def test_time_round_trips(seconds):
    """Also beyond 1000 s: every float up to the maximum below round-trips (checked on a few)."""
    assert parse_time(format_time(seconds)) == seconds


@given(finite_non_negative | scaled)
def test_bandwidth_round_trips(bps):
    assert parse_bandwidth(format_bandwidth(bps)) == bps


@given(finite_non_negative | within_range)
def test_per_byte_round_trips(cost):
    assert parse_per_byte(format_per_byte(cost)) == cost


@given(sizes)
def test_size_round_trips(nbytes):
    text = format_size(nbytes)
    assert parse_size(text) == nbytes
    number, _unit = text.split(" ")
    assert len(number) <= len(str(nbytes))  # never longer than plain bytes


@given(sizes)
def test_count_round_trips(count):
    text = format_count(count)
    assert parse_count(text) == count
    assert len(text) <= len(str(count))


@given(st.integers(min_value=1, max_value=1023), st.integers(min_value=1, max_value=5))
def test_whole_binary_multiples_are_written_as_such(m, k):
    """m KiB/MiB/... is written with its mantissa m, or something no longer."""
    text = format_size(m * 1024**k)
    number, unit = text.split(" ")
    assert len(number) <= len(str(m))
    if unit.endswith("iB"):
        assert text == f"{m} {'KMGTP'[k - 1]}iB"


# --- approximate formatting for tables ----------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (12.345e-6, "12.3 us"),
        (1.5, "1.5 s"),
        (0, "0 s"),
        (999.96e-9, "1 us"),  # rounds up into the next unit
        (0.25e-3, "250 us"),
        (12345.6, "12346 s"),  # beyond the largest unit: whole seconds, no exponent
        (-2e-3, "-2 ms"),
        (float("nan"), "nan"),
        (math.inf, "inf"),
    ],
)
def test_pretty_time(seconds, text):
    assert pretty_time(seconds) == text


@pytest.mark.parametrize(
    ("nbytes", "text"),
    [
        (65536, "64 KiB"),
        (1536, "1.5 KiB"),
        (2**30, "1 GiB"),
        (1_200_000_000, "1.2 GB"),
        (123_456_789, "123 MB"),
        (999, "999 B"),
        (1023, "1.02 KB"),
        (999_999, "1 MB"),
        (0, "0 B"),
    ],
)
def test_pretty_size(nbytes, text):
    assert pretty_size(nbytes) == text


@pytest.mark.parametrize(("bps", "text"), [(12.5e9, "12.5 GB/s"), (123_456.0, "123 KB/s"), (0.0, "0 B/s")])
def test_pretty_bandwidth(bps, text):
    assert pretty_bandwidth(bps) == text


@pytest.mark.parametrize(
    ("text", "made"),
    [
        ("43.65 us", lambda: pretty_time(43.6512e-6, 4)),
        ("1 us", lambda: pretty_time(999.996e-9, 4)),  # rounds up into the next unit at four digits too
        ("23.46 GB/s", lambda: pretty_bandwidth(23.456e9, 4)),
        ("65537 B", lambda: pretty_size(65537, 4, exact_below=100_000)),  # an eager limit plus one byte, exactly
        ("1.5 KiB", lambda: pretty_size(1536, 4)),
        ("1536 B", lambda: pretty_size(1536, 4, exact_below=100_000)),  # not a whole KiB: bytes below the bound
        ("32 KiB", lambda: pretty_size(32768, 4, exact_below=100_000)),
        ("1000 KiB", lambda: pretty_size(1000 * 1024, 4)),  # four digits: up to 1023 of a binary unit
        ("1.5 MiB", lambda: pretty_size(1.5 * 2**20, 4, exact_below=100_000)),
        ("150 KB", lambda: pretty_size(150_000, 4, exact_below=100_000)),
    ],
)
def test_pretty_formats_at_four_digits_as_the_report_tables_use_them(text, made):
    """The report's fmt_* are pretty_* with four digits: one formatter for every number a person reads."""
    assert made() == text


@pytest.mark.parametrize(("parse", "text"), [
    (parse_time, "1000000001 s"), (parse_size, "1000000000000000001 B"), (parse_bandwidth, "1000001 TB/s"),
    (parse_per_byte, "1001 s/B"), (parse_count, "2e18"), (parse_size, "1e400 B"),
])
def test_values_beyond_the_stated_range_are_refused(parse, text):
    with pytest.raises(UnitError, match=r"is out of range for a .* \(at most "):
        parse(text)


@pytest.mark.parametrize(("value", "ok"), [(16, 16), ("16", 16), ("1e400 B", None), (1.5, None), (True, None),
                                           ("16K", None), (10**8, None), (-1, None)])
def test_whole_numbers_are_plain_integers_in_range(value, ok):
    if ok is None:
        with pytest.raises(UnitError):
            parse_whole(value)
    else:
        assert parse_whole(value) == ok


MAXIMUM = {parse_time: 1e9, parse_size: 10**18, parse_bandwidth: 1e18, parse_per_byte: 1000.0, parse_count: 10**18}


@pytest.mark.parametrize("parse", PARSERS, ids=_case_id)
def test_the_limit_a_range_error_cites_parses_back_to_that_limit(parse):
    """"at most 1 EB" cited a unit the size parser refuses ("'1 EB' is not a size"): a limit is cited as it reads back."""
    with pytest.raises(UnitError) as info:
        parse(f"1e30 {SOME_UNIT[parse]}")
    cited = re.search(r"\(at most (.+)\)$", str(info.value)).group(1)
    assert parse(cited) == MAXIMUM[parse]
