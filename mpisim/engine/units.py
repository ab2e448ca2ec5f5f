"""Parse and format quantities with units: times, sizes, bandwidths, per-byte costs, counts.

Inside mpisim every number is SI: ``float`` seconds, ``int`` bytes, ``float`` bytes per second,
``float`` seconds per byte. Strings with units are read once, at the edge (the scenario loader),
by the ``parse_*`` functions here, and written back by the ``format_*`` functions.

Two conventions are never guessed, because guessing wrong is off by 8 or by 7 %:

**Bits or bytes: the letter's case decides.** Lowercase ``b`` is a bit and uppercase ``B`` is a
byte, as on spec sheets. A "200 Gb/s" InfiniBand port moves 25 GB/s:

* bits per second, divided by 8: ``bps``, ``Kbps`` ... ``Tbps``, also written ``Gb/s`` or
  ``Gbit/s``;
* bytes per second: ``B/s``, ``KB/s`` ... ``TB/s``, ``KiB/s`` ... ``TiB/s``, also written ``GBps``;

so ``parse_bandwidth("100 Gbps") == 12.5e9`` and ``parse_bandwidth("100 GB/s") == 100e9``.
Because the case carries meaning, units are case-sensitive. The only freedom is ``k`` or ``K``
for kilo; ``m`` is milli, never mega, so ``"10 mbps"`` is an error, not 10 Mbps.

**Powers of 1000 or of 1024: the ``i`` decides.** ``KB``, ``MB``, ``GB``, ``TB``, ``PB`` are
10^3, 10^6, 10^9, 10^12, 10^15 bytes (SI, as disk and link vendors count). ``KiB``, ``MiB``,
``GiB``, ``TiB``, ``PiB`` are 2^10, 2^20, 2^30, 2^40, 2^50 bytes (IEC, as memory is counted).
A ``GiB`` is 7.4 % more than a ``GB``. Bandwidths follow the same rule: ``GB/s`` is 10^9 B/s
and ``GiB/s`` is 2^30 B/s.

Other families:

* times: ``s``, ``ms``, ``us`` (also ``µs``, ``μs``), ``ns``, ``ps``: ``"1.5 us"``, ``"20ms"``;
* per-byte costs (the gamma of reductions, the inverse of a bandwidth): ``s/B``, ``ms/B``,
  ``us/B``, ``ns/B``, ``ps/B``: ``"0.1 ns/B"``, ``"1e-10 s/B"``;
* counts (parameters, elements): ``K`` (or ``k``) 10^3, ``M`` 10^6, ``B`` or ``G`` 10^9 (billion),
  ``T`` 10^12: ``"300M"``, ``"1.5B"``.

A plain number is never taken for a time, size, bandwidth or per-byte cost: ``latency: 2``
could mean 2 s or 2 us, and reading it as seconds once made a 1 MiB allreduce take 36 s.
``parse_time(2)`` raises ``2 has no unit; write e.g. 2 us``. Zero needs no unit. Counts
(ranks, parameters, elements) are plain numbers. The space between number and unit is optional.

Parsing is exact: the number is read as a decimal fraction, multiplied by the unit exactly and
rounded once, so ``parse_time("100 ns") == 1e-7`` (not ``100 * 1e-9``, which is one ulp off).
Sizes and counts must come out whole: ``"0.5 KiB"`` is 512 bytes, ``"1.5 B"`` is an error.
Negative values, NaN, infinities and booleans (YAML reads ``yes`` as ``true``) are rejected;
the one exception is ``parse_bandwidth("inf")``, which returns ``math.inf`` for "no bandwidth
limit" (a transfer over it takes no time beyond its latency).

Every parser raises :class:`~mpisim.errors.UnitError` with a message that quotes the value and
gives examples, ``'10 Gbsp' is not a bandwidth (e.g. 100 Gbps, 12.5 GB/s)``. The error carries no
field path; the caller adds it with ``err.at("topology.inter.bandwidth")``.

The ``format_*`` functions write short strings that parse back to exactly the same number,
``parse_time(format_time(x)) == x`` for every finite ``x >= 0``: ``format_time(1.5e-6)`` is
``"1.5 us"``. They shift the decimal point of the shortest round-trip representation of the
value (``repr``) instead of dividing, so no rounding can creep in. The ``pretty_*`` functions
round to three significant digits for terminal tables (``"123 MB"``, ``"12.3 us"``) and do not
round-trip.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import numbers
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from mpisim.errors import UnitError

__all__ = [
    "format_bandwidth",
    "format_count",
    "format_per_byte",
    "format_size",
    "format_time",
    "parse_bandwidth",
    "parse_count",
    "parse_flops",
    "parse_per_byte",
    "parse_percent",
    "parse_size",
    "parse_time",
    "parse_whole",
    "pretty_bandwidth",
    "pretty_size",
    "pretty_time",
    "reading_si_numbers",
    "si_numbers",
]


# --- unit tables -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Family:
    """One kind of quantity: its name in messages, examples, and units -> size in the SI base unit."""

    kind: str
    examples: str
    units: Mapping[str, Fraction]
    #: The unit a "write e.g." hint suggests for a bare number; "" for unit-less counts.
    suggest: str = ""
    #: The largest value accepted, in the base unit, and how a message writes it (in units this
    #: module parses, so the limit a message cites can be written back): far above any real
    #: cluster, low enough that arithmetic on it stays finite.
    maximum: Fraction = Fraction(10**18)
    maximum_text: str = "1e18"


_DECIMAL_PREFIXES = {"": 0, "k": 3, "K": 3, "M": 6, "G": 9, "T": 12, "P": 15}
_BINARY_PREFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50}
_TIME_UNITS = {
    "s": Fraction(1),
    "ms": Fraction(1, 10**3),
    "us": Fraction(1, 10**6),
    "µs": Fraction(1, 10**6),  # U+00B5 MICRO SIGN
    "μs": Fraction(1, 10**6),  # U+03BC GREEK SMALL LETTER MU, which NFKC turns the micro sign into
    "ns": Fraction(1, 10**9),
    "ps": Fraction(1, 10**12),
}


def _size_units() -> dict[str, Fraction]:
    units = {"": Fraction(1)}  # a plain number is bytes
    units.update({f"{prefix}B": Fraction(10**power) for prefix, power in _DECIMAL_PREFIXES.items()})
    units.update({f"{prefix}B": Fraction(2**power) for prefix, power in _BINARY_PREFIXES.items()})
    return units


def _bandwidth_units() -> dict[str, Fraction]:
    units = {"": Fraction(1)}  # a plain number is bytes per second
    for prefix, power in _DECIMAL_PREFIXES.items():
        for bits in (f"{prefix}bps", f"{prefix}b/s", f"{prefix}bit/s"):
            units[bits] = Fraction(10**power, 8)
        for byte_unit in (f"{prefix}B/s", f"{prefix}Bps"):
            units[byte_unit] = Fraction(10**power)
    for prefix, power in _BINARY_PREFIXES.items():
        units[f"{prefix}B/s"] = Fraction(2**power)
    return units


def _count_units() -> dict[str, Fraction]:
    units = {prefix: Fraction(10**power) for prefix, power in _DECIMAL_PREFIXES.items() if power <= 12}
    units["B"] = Fraction(10**9)  # billion, as in "a 1.5B-parameter model"
    return units


_TIME = _Family("time", "1.5 us, 20 ms", {"": Fraction(1), **_TIME_UNITS}, "us", Fraction(10**9), "1e9 s")
_SIZE = _Family("size", "64 KiB, 1.2 GB", _size_units(), "B", Fraction(10**18), "1000 PB")
_BANDWIDTH = _Family("bandwidth", "100 Gbps, 12.5 GB/s", _bandwidth_units(), "B/s", Fraction(10**18), "1000 PB/s")
_PER_BYTE = _Family(
    "time per byte",
    "0.1 ns/B, 1e-10 s/B",
    {"": Fraction(1), **{f"{unit}/B": scale for unit, scale in _TIME_UNITS.items()}},
    "ns/B",
    Fraction(1000),
    "1000 s/B",
)
_BIT_SIZES = {f"{prefix}{bit}" for prefix in _DECIMAL_PREFIXES for bit in ("b", "bit", "bits")}
_COUNT = _Family("count", "300M, 1.5B, 25K", _count_units(), "", Fraction(10**18), "1e18")


# --- parsing -----------------------------------------------------------------------------------

# re.ASCII: "\d" must not accept other scripts' digits, which int() would quietly convert.
_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE](?P<exponent>[+-]?\d+))?)\s*(?P<unit>\S+)?",
    re.ASCII,
)
# A decimal exponent beyond this is a typo, and 10**exponent would take a long time to build.
_MAX_EXPONENT = 1000


def _quoted(value: object) -> str:
    """Quote *value* for a message, cut short if someone pasted a novel into a field."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:50]}...{text[-7:]}"


def _not_a(value: object, family: _Family, hint: str = "") -> UnitError:
    message = f"{_quoted(value)} is not a {family.kind} (e.g. {family.examples})"
    return UnitError(f"{message}; {hint}" if hint else message)


def _unit_hint(unit: str, family: _Family) -> str:
    """Explain a near miss: a unit that exists in another case, or a unit of another family."""
    same_letters = [known for known in family.units if known and known.lower() == unit.lower()]
    if same_letters:
        return f"units are case-sensitive (b is bits, B is bytes): did you mean {' or '.join(same_letters)}?"
    if family is _SIZE and unit in _BANDWIDTH.units:
        return "that is a bandwidth"
    if family is _SIZE and unit in _BIT_SIZES:
        return "sizes are in bytes (B); b means bits"
    if family is _BANDWIDTH and unit in _SIZE.units:
        return f"a bandwidth needs a rate, such as {unit}/s"
    return ""


def _magnitude(value: object, family: _Family) -> Fraction:
    """Return *value* in the family's base unit, exactly.

    Raises UnitError if *value* is not a number or a number with one of the family's units,
    or if it is negative, NaN or infinite.
    """
    if isinstance(value, bool):
        raise _not_a(value, family, "YAML reads yes, no, on and off as true and false")
    if isinstance(value, numbers.Integral):
        magnitude = Fraction(int(value))
    elif isinstance(value, numbers.Real):
        as_float = float(value)
        if math.isnan(as_float):
            raise _not_a(value, family)
        if as_float == math.inf:
            raise _not_a(value, family, "it must be finite")
        magnitude = Fraction(-1) if as_float == -math.inf else Fraction(as_float)  # -1: any negative
    elif isinstance(value, str):
        magnitude = _text_magnitude(value, family)
    else:
        raise _not_a(value, family)
    if magnitude < 0:
        raise UnitError(f"a {family.kind} must not be negative, got {_quoted(value)}")
    if magnitude > family.maximum:
        raise UnitError(f"{_quoted(value)} is out of range for a {family.kind} (at most {family.maximum_text})")
    if family.suggest and magnitude != 0 and _is_bare_number(value) and not _SI_NUMBERS.get():
        raise UnitError(f"{_plain(value)} has no unit; write e.g. {_plain(value)} {family.suggest} "
                        f"or {family.examples} (units are never guessed)")
    return magnitude


#: Inside :func:`si_numbers`, a bare number is read in the SI base unit instead of refused.
_SI_NUMBERS: contextvars.ContextVar[bool] = contextvars.ContextVar("si_numbers", default=False)


@contextlib.contextmanager
def si_numbers() -> Iterator[None]:
    """Read bare numbers as SI values (seconds, bytes, bytes/s, s/B) inside this block.

    For data mpisim wrote itself: a resolved scenario (``mpisim check``, ``--json``, results.json)
    holds SI numbers, and reading it back must give the same scenario. What users write is
    read outside this block, where a bare number is an error.
    """
    token = _SI_NUMBERS.set(True)
    try:
        yield
    finally:
        _SI_NUMBERS.reset(token)


_PERCENT = re.compile(r"(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*%", re.ASCII)


def reading_si_numbers() -> bool:
    """Whether bare numbers are being read as SI values (inside :func:`si_numbers`)."""
    return _SI_NUMBERS.get()


def parse_percent(value: object) -> float | None:
    """Return a percentage written as a string as a fraction: ``"94%"`` or ``"94 %"`` -> 0.94.

    None when *value* is not a string of a finite number followed by ``%`` (the caller says
    what it expected). The range is the caller's to check.
    """
    match = _PERCENT.fullmatch(value.strip()) if isinstance(value, str) else None
    return float(Fraction(match["number"]) / 100) if match else None


def _is_bare_number(value: object) -> bool:
    """True for a number written without a unit: ``2``, ``1e-6``, ``"2"``."""
    if isinstance(value, numbers.Real):
        return True
    match = _QUANTITY.fullmatch(value.strip()) if isinstance(value, str) else None
    return match is not None and not match["unit"]


def _plain(value: object) -> str:
    return value.strip() if isinstance(value, str) else repr(value)


def _text_magnitude(text: str, family: _Family) -> Fraction:
    """Return a number with an optional unit, such as ``"1.5 us"``, in the base unit, exactly."""
    match = _QUANTITY.fullmatch(text.strip())
    if match is None:
        raise _not_a(text, family)
    unit = match["unit"] or ""
    scale = family.units.get(unit)
    if scale is None:
        raise _not_a(text, family, _unit_hint(unit, family))
    exponent = match["exponent"]
    if exponent is not None and (len(exponent) > 6 or abs(int(exponent)) > _MAX_EXPONENT):
        raise UnitError(f"{_quoted(text)} is out of range for a {family.kind}")
    try:
        return Fraction(match["number"]) * scale
    except ValueError:  # more digits than int() converts (sys.get_int_max_str_digits)
        raise UnitError(f"{_quoted(text)} is out of range for a {family.kind}") from None


def _to_float(magnitude: Fraction, value: object, family: _Family) -> float:
    try:
        # Fraction -> float divides two ints, which Python rounds correctly: one rounding only.
        return float(magnitude)
    except OverflowError:
        raise UnitError(f"{_quoted(value)} is out of range for a {family.kind}") from None


def _to_int(magnitude: Fraction, value: object, family: _Family, what: str) -> int:
    if magnitude.denominator != 1:
        raise UnitError(f"{_quoted(value)} is not a whole number of {what}")
    return magnitude.numerator


def parse_time(value: object) -> float:
    """Return a time in seconds: ``"1.5 us"``, ``"20ms"``, ``"2 s"``, ``0`` (a bare number other than 0 is an error).

    Raises UnitError if *value* is not a non-negative finite time.
    """
    return _to_float(_magnitude(value, _TIME), value, _TIME)


def parse_size(value: object) -> int:
    """Return a size in bytes: ``"64 KiB"`` (65536), ``"1.2GB"`` (1.2e9), ``"4096 B"``, ``0``.

    ``KB``/``MB``/``GB``/``TB``/``PB`` are powers of 1000, ``KiB``/``MiB``/... powers of 1024.
    Raises UnitError if *value* is not a size or not a whole number of bytes (``"1.5 B"``).
    """
    return _to_int(_magnitude(value, _SIZE), value, _SIZE, "bytes")


def parse_bandwidth(value: object) -> float:
    """Return a bandwidth in bytes per second: ``"100 Gbps"`` (12.5e9), ``"25 GB/s"`` (25e9).

    Lowercase ``b`` is bits and uppercase ``B`` bytes. A plain number other than 0 is an error.
    ``"inf"`` (or a float infinity, YAML ``.inf``) returns ``math.inf``: no bandwidth limit.
    Raises UnitError if *value* is not a non-negative bandwidth.
    """
    if isinstance(value, str) and value.strip().lower() in {"inf", "infinity"}:
        return math.inf
    if isinstance(value, float) and value == math.inf:
        return math.inf
    return _to_float(_magnitude(value, _BANDWIDTH), value, _BANDWIDTH)


def parse_per_byte(value: object) -> float:
    """Return a cost in seconds per byte: ``"0.1 ns/B"`` (1e-10), ``"1e-10 s/B"``, ``0``.

    Raises UnitError if *value* is not a non-negative finite time per byte.
    """
    return _to_float(_magnitude(value, _PER_BYTE), value, _PER_BYTE)


def parse_whole(value: object, maximum: int = 10**7) -> int:
    """Return a plain whole number such as a node or rank count: ``16`` or ``"16"``, nothing else.

    Unlike :func:`parse_count` it takes no suffixes (``"1e400 B"`` is not a node count) and no
    fractions, and it is at most *maximum*. Raises UnitError.
    """
    if isinstance(value, bool) or not (isinstance(value, numbers.Integral)
                                       or (isinstance(value, str) and value.strip().isdigit() and value.isascii())):
        raise UnitError(f"expected a whole number such as 16, got {_quoted(value)}")
    if isinstance(value, str) and len(value.strip()) > 19:
        raise UnitError(f"{_quoted(value)} is out of range (at most {maximum:,})")
    number = int(value)
    if number < 0:
        raise UnitError(f"must not be negative, got {number}")
    if number > maximum:
        raise UnitError(f"{number:,} is out of range (at most {maximum:,})")
    return number


def parse_count(value: object) -> int:
    """Return a count of items: ``"300M"``, ``"1.5B"`` (1.5 billion), ``"25K"``, ``"2G"``, ``1000``.

    Raises UnitError if *value* is not a count or not a whole number (``"1.5"``, ``"1.0001K"``).
    """
    return _to_int(_magnitude(value, _COUNT), value, _COUNT, "items")


# --- exact formatting --------------------------------------------------------------------------


def _float_digits(x: float) -> tuple[int, int]:
    """Return ``(digits, exponent)`` with ``repr(x) == digits * 10**exponent`` as decimals."""
    decimal = Decimal(repr(x)).as_tuple()
    assert isinstance(decimal.exponent, int)  # finite: callers reject NaN and infinities
    return int("".join(map(str, decimal.digits))), decimal.exponent


def _decimal_text(digits: int, exponent: int) -> str:
    """Write ``digits * 10**exponent`` (digits >= 0) exactly, without trailing zeros.

    Plain notation up to 21 integer digits (so byte and item counts stay whole numbers) and down
    to 1e-6; scientific (``1.5e+300``) beyond.
    """
    if digits == 0:
        return "0"
    while digits % 10 == 0:
        digits //= 10
        exponent += 1
    text = str(digits)
    point = len(text) + exponent  # position of the decimal point counted from the left
    if -6 < point <= 21:
        if exponent >= 0:
            return text + "0" * exponent
        if point <= 0:
            return "0." + "0" * -point + text
        return f"{text[:point]}.{text[point:]}"
    mantissa = text[0] + (f".{text[1:]}" if len(text) > 1 else "")
    return f"{mantissa}e{point - 1:+03d}"


def _check_real(x: float, kind: str) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise TypeError(f"cannot format {x!r} as a {kind}: it is not a number")
    as_float = float(x)
    if not (as_float >= 0 and math.isfinite(as_float)):
        raise ValueError(f"cannot format {x!r} as a {kind}: it must be finite and not negative")
    return as_float + 0.0  # turns -0.0 into 0.0


def _check_integer(n: int, kind: str) -> int:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"cannot format {n!r} as a {kind}: it is not an integer")
    if n < 0:
        raise ValueError(f"cannot format {n!r} as a {kind}: it must not be negative")
    return int(n)


def _format_scaled(x: float, steps: tuple[tuple[int, str], ...]) -> str:
    """Write *x* in the largest unit of *steps* (decimal exponent, unit) not above it, exactly."""
    digits, exponent = _float_digits(x)
    power, unit = steps[-1]
    for step_power, step_unit in steps:
        if x >= 10.0**step_power:
            power, unit = step_power, step_unit
            break
    if x == 0:
        power, unit = next(step for step in steps if step[0] == 0)  # "0 s", "0 B/s"
    return f"{_decimal_text(digits, exponent - power)} {unit}"


_TIME_STEPS = ((0, "s"), (-3, "ms"), (-6, "us"), (-9, "ns"))
_BANDWIDTH_STEPS = ((12, "TB/s"), (9, "GB/s"), (6, "MB/s"), (3, "KB/s"), (0, "B/s"))
_PER_BYTE_STEPS = ((0, "s/B"), (-3, "ms/B"), (-6, "us/B"), (-9, "ns/B"))


def format_time(seconds: float) -> str:
    """Write a time in s, ms, us or ns so that :func:`parse_time` reads it back exactly.

    ``format_time(1.5e-6) == "1.5 us"``. Raises ValueError for negative or non-finite times.
    """
    return _format_scaled(_check_real(seconds, "time"), _TIME_STEPS)


def format_bandwidth(bytes_per_second: float) -> str:
    """Write a bandwidth in B/s ... TB/s (bytes, powers of 1000) that parses back exactly.

    ``format_bandwidth(12.5e9) == "12.5 GB/s"``; ``format_bandwidth(math.inf) == "inf"``.
    Raises ValueError for negative or NaN bandwidths.
    """
    if isinstance(bytes_per_second, float) and bytes_per_second == math.inf:
        return "inf"
    return _format_scaled(_check_real(bytes_per_second, "bandwidth"), _BANDWIDTH_STEPS)


def format_per_byte(seconds_per_byte: float) -> str:
    """Write a per-byte cost in s/B, ms/B, us/B or ns/B that parses back exactly.

    ``format_per_byte(1e-10) == "0.1 ns/B"``. Raises ValueError for negative or non-finite costs.
    """
    return _format_scaled(_check_real(seconds_per_byte, "time per byte"), _PER_BYTE_STEPS)


def _shortest(candidates: list[tuple[str, str]]) -> str:
    """Pick the candidate (number, unit) with the shortest number; the first one wins ties."""
    number, unit = min(candidates, key=lambda candidate: len(candidate[0]))
    return f"{number} {unit}"


def format_size(nbytes: int) -> str:
    """Write a size in the unit that gives the shortest exact number (binary units win ties).

    Powers of two come out binary and round decimal sizes decimal: ``"64 KiB"``, ``"1 MiB"``,
    ``"1.5 KiB"``, ``"1.2 GB"``, ``"123 B"``. :func:`parse_size` reads every result back exactly.
    Raises ValueError for negative sizes and TypeError for non-integers.
    """
    n = _check_integer(nbytes, "size")
    # On equally short numbers the order below decides: binary, then plain bytes, then decimal.
    candidates = [
        (_decimal_text(n * 5**power, -power), f"{prefix}B")
        for prefix, power in reversed(_BINARY_PREFIXES.items())
        if n >= 2**power
    ]
    candidates += [(str(n), "B"), (_decimal_text(n, 0), "B")]
    candidates += [
        (_decimal_text(n, -power), f"{prefix}B")
        for prefix, power in reversed(_DECIMAL_PREFIXES.items())
        if prefix != "k" and power > 0 and n >= 10**power
    ]
    return _shortest(candidates)


_COUNT_SUFFIXES = ((12, "T"), (9, "B"), (6, "M"), (3, "K"))


def format_count(count: int) -> str:
    """Write a count in its shortest exact form: ``"300M"``, ``"1.5B"``, ``"25K"``, ``"1234567"``.

    :func:`parse_count` reads every result back exactly. Raises ValueError for negative counts.
    """
    n = _check_integer(count, "count")
    candidates = [str(n), _decimal_text(n, 0)]  # 1000000000000000000001 and 1e+30
    candidates += [_decimal_text(n, -power) + suffix for power, suffix in _COUNT_SUFFIXES if n >= 10**power]
    return min(candidates, key=len)


# --- approximate formatting for people: the one human number formatter -------------------------
#
# Every table, report, note and message that shows a time, size or bandwidth to a person goes
# through pretty_time / pretty_size / pretty_bandwidth (the report layer's fmt_* are these with
# four digits and "n/a" for a missing value). *digits* is the number of significant digits: three
# reads best in a sentence, four in a table of results.


def _scaled(x: float, units: tuple[tuple[float, str], ...], digits: int = 3) -> str:
    """Write *x* >= 0 with *digits* significant digits in the largest unit (scale, name) below it.

    *units* go from the largest to the smallest scale, 1000 apart, so that a value rounding up
    to 1000 (999.96 ns) is written in the next unit instead (1 us).
    """
    if x == 0:
        return f"0 {next(name for scale, name in units if scale == 1)}"
    index = next((i for i, (scale, _) in enumerate(units) if x >= scale), len(units) - 1)
    scale, name = units[index]
    text = f"{x / scale:.{digits}g}"
    if float(text) >= 1000:
        if index > 0:
            scale, name = units[index - 1]
            text = f"{x / scale:.{digits}g}"
        else:
            text = f"{x / scale:.0f}"  # beyond the largest unit: all digits, never 1.23e+04
    return f"{text} {name}"


def _signed(x: float, pretty: str) -> str:
    if math.isnan(x):
        return "nan"
    return f"-{pretty}" if x < 0 else pretty


_PRETTY_TIME = ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns"))
_PRETTY_BANDWIDTH = ((1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "KB/s"), (1.0, "B/s"))
_PRETTY_DECIMAL_SIZE = ((1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "KB"), (1.0, "B"))


def pretty_time(seconds: float, digits: int = 3) -> str:
    """Write a time with *digits* significant digits for people: ``"12.3 us"``, ``"1.5 s"``.

    Approximate: the result need not parse back to the same number.
    """
    if math.isnan(seconds) or math.isinf(seconds):
        return _signed(seconds, "inf")
    return _signed(seconds, _scaled(abs(seconds), _PRETTY_TIME, digits))


def pretty_bandwidth(bytes_per_second: float, digits: int = 3) -> str:
    """Write a bandwidth with *digits* significant digits for people: ``"12.5 GB/s"`` (decimal units,
    as nccl-tests and OSU print them).

    Approximate: the result need not parse back to the same number.
    """
    if math.isnan(bytes_per_second) or math.isinf(bytes_per_second):
        return _signed(bytes_per_second, "inf")
    return _signed(bytes_per_second, _scaled(abs(bytes_per_second), _PRETTY_BANDWIDTH, digits))


def pretty_size(nbytes: float, digits: int = 3, *, exact_below: int = 0) -> str:
    """Write a size with *digits* significant digits for people: ``"64 KiB"``, ``"1.2 GB"``, ``"123 MB"``.

    A size that is a short exact multiple of a binary unit (64 KiB, 1.5 MiB) is written in it;
    a size below *exact_below* that is not a whole number of KiB, MiB, ... is written in bytes,
    every digit kept (an eager limit plus one byte, ``"65537 B"``, is the point of such a row);
    any other size is rounded in decimal units. Approximate: it need not parse back exactly.
    """
    if math.isnan(nbytes) or math.isinf(nbytes):
        return _signed(nbytes, "inf")
    magnitude = abs(nbytes)
    for prefix, power in reversed(_BINARY_PREFIXES.items()):
        if magnitude >= 2**power:
            mantissa = Fraction(magnitude) / 2**power
            text = f"{float(mantissa):.{digits}g}"
            whole = mantissa.denominator == 1
            if "e" not in text and Fraction(text) == mantissa and float(text) < 1024 and (
                    whole or magnitude >= exact_below):
                return _signed(nbytes, f"{text} {prefix}B")
            break
    if magnitude < exact_below and float(magnitude).is_integer():
        return _signed(nbytes, f"{magnitude:.0f} B")
    return _signed(nbytes, _scaled(magnitude, _PRETTY_DECIMAL_SIZE, digits))


_FLOPS = re.compile(r"(?P<number>[0-9.]+(?:[eE][+-]?[0-9]+)?)\s*(?P<prefix>[kKMGTPE]?)\s*(?P<unit>(?i:flop)[sS]?(/s)?)?")
_FLOP_PREFIXES = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}


def parse_flops(value: object) -> float:
    """Return a FLOP count or rate: ``312e12``, ``"312 T"``, ``"312 TFLOPS"``, ``"1.8 PFLOP"``.

    Raises UnitError if *value* is not a positive finite number with an optional SI prefix.
    """
    if isinstance(value, bool):
        raise UnitError(f"{value!r} is not a FLOP count (e.g. 312 TFLOPS, 312e12)")
    if isinstance(value, int | float):
        number = float(value)
    else:
        match = _FLOPS.fullmatch(str(value).strip())
        if match is None:
            raise UnitError(f"{value!r} is not a FLOP count (e.g. 312 TFLOPS, 312e12)")
        try:
            number = float(match["number"]) * _FLOP_PREFIXES[match["prefix"]]
        except ValueError:
            raise UnitError(f"{value!r} is not a FLOP count (e.g. 312 TFLOPS, 312e12)") from None
    if not math.isfinite(number) or number <= 0:
        raise UnitError(f"a FLOP count must be positive and finite, got {value!r}")
    return number
