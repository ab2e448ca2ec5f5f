"""Expectations: the ``expect:`` block that turns a scenario into a regression test.

Each entry checks result rows and evaluates to a dict with ``passed``, ``got``, ``expected``
and a one-sentence ``detail``; ``mpisim run`` exits 1 when any entry fails. Entries::

    expect:
      - {metric: time_s, where: {bytes: 1.2 GB}, approx: 2.16 s, rel: 0.01}   # within 1 %
      - {metric: time_s, where: {bytes: 1 KiB}, approx: 12 us, abs: 1 us}     # within 1 us
      - {metric: busbw_GBps, where: {bytes: 1 GiB}, min: 180}                 # a lower bound
      - {metric: iteration_time_s, max: 350 ms}                               # an upper bound
      - {metric: algorithm, where: {bytes: 8 B}, equals: recursive_doubling}  # what auto chose
      - {metric: time_s, baseline: 7.33 ms, max_increase: 2%}                # a one-sided gate
      - {metric: busbw_GBps, baseline: 180, max_decrease: 5%}                 # ... the other way
      - {verified: true}                   # every row's result matched numpy
      - {verified: true, where: {algorithm: ring}}

``where`` selects rows by equality; every selected row must pass. A ``where`` that selects no
row is a failed expectation that says so, never a silent pass. ``{verified: true}`` passes when
every selected row with a non-null ``verified`` is true (size-only payloads carry ``null``, so
there is nothing to check and the detail says so).

Values carry units, read according to the row key they refer to: keys ending in ``_s`` are
times (``2.16 s``, ``350 ms``), ``bytes`` and keys ending in ``_bytes`` are sizes
(``1.2 GB``), keys ending in ``_Bps`` are bandwidths (``12 GB/s``), ``ranks`` is a count, and
keys ending in ``_GBps`` are plain numbers of GB/s as nccl-tests prints them. Other keys
(``algorithm``, swept keys such as ``topology.nodes``) compare as written. ``rel``,
``max_increase`` and ``max_decrease`` are a percentage (``2%`` or ``2 %``) or a fraction below 1
(``0.02``); a bare number of 1 or more (``max_increase: 2``: 2 % or 200 %?) is refused, as units
are never guessed. ``abs`` has the metric's unit.

A gate is one-sided, as CI wants it: ``baseline`` with ``max_increase`` fails only when the
metric grew by more than that share (a faster run passes), and says by how much, signed:
``expected time_s at most 2% above the baseline 7.33 ms, got 7.52 ms (+2.59%)``;
``max_decrease`` is the other way: ``at most 5% below the baseline``.

A failure's message writes the bound and the value that crossed it with the digits that tell
them apart: ``expected time_s <= 93.72 us, got 93.723 us``, never ``<= 93.7 us, got 93.7 us``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from mpisim.engine.reader import Block, Custom, Spec
from mpisim.engine.units import (
    format_size,
    parse_bandwidth,
    parse_count,
    parse_percent,
    parse_size,
    parse_time,
    pretty_bandwidth,
    pretty_size,
    pretty_time,
    reading_si_numbers,
)
from mpisim.errors import ConfigError
from mpisim.report.records import value_kind  # how a row key's values are written (re-exported here)
from mpisim.scenario.model import Expectation

CHECKS = ("approx", "max", "min", "equals")
GATES = ("max_increase", "max_decrease")
#: Two numbers in a ``where`` are the same value if they agree to this relative tolerance.
_WHERE_REL = 1e-9


# --- value kinds (value_kind itself lives in mpisim.report.records) ----------------------------


def _parse_number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"expected a number, got {value!r}")
    if math.isnan(value):
        raise ConfigError(f"expected a number, got {value!r}")
    return value


_PARSERS: dict[str, Callable[[Any], Any]] = {
    "time": parse_time,
    "size": parse_size,
    "bandwidth": parse_bandwidth,
    "count": parse_count,
    "number": _parse_number,
}


def parse_value(key: str, value: Any, *, numeric: bool = False) -> Any:
    """Read *value* as a value of row key *key* (``bytes: 1.2 GB`` -> 1200000000).

    With *numeric*, a raw-kind key must still get a number (bounds need one).
    Raises ConfigError (without a path) if the value does not parse.
    """
    kind = value_kind(key)
    if kind == "raw":
        if numeric:
            return _parse_number(value)
        if isinstance(value, Mapping | list):
            raise ConfigError(f"expected a single value to compare with, got {value!r}")
        return value
    return _PARSERS[kind](value)


def format_value(key: str, value: Any) -> str:
    """Write a value of row key *key* for a message: ``1.2 GB``, ``2.21 s``, ``ring``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if not isinstance(value, int | float):
        return str(value)
    kind = value_kind(key)
    if kind == "time":
        return pretty_time(value)
    if kind == "size":
        # Exact where rounding would hide the point: 12289 B is not "12.3 KB" next to 12288 B.
        return format_size(int(value)) if float(value).is_integer() else pretty_size(value)
    if kind == "bandwidth":
        return pretty_bandwidth(value)
    return f"{value:.4g}" if isinstance(value, float) else str(value)


# --- parsing the expect block -------------------------------------------------------------------


#: Refuses a row key no row will have (raises ConfigError without a path); see parse_expectations.
KeyCheck = Callable[[str], None]


def parse_expectations(raw: Any, check_key: KeyCheck | None = None) -> tuple[Expectation, ...]:
    """Validate a scenario's ``expect:`` list (error paths are relative to it: ``[0].approx``).

    *check_key*, if given, is called with each entry's metric and ``where`` keys before their
    values are read, so a misspelt key is named as such rather than its value (``time_ss``
    would read ``1 s`` as a number).
    Raises ConfigError for entries of the wrong shape, unknown keys and values that do not parse.
    """
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError(f"expected a list of expectations, got {raw!r}")
    out = []
    for i, entry in enumerate(raw):
        try:
            out.append(parse_expectation(entry, check_key))
        except ConfigError as err:
            raise _indexed(err, i) from None
    return tuple(out)


def _indexed(err: ConfigError, i: int) -> ConfigError:
    path = f"[{i}].{err.path}" if err.path else f"[{i}]"
    return type(err)(err.message, path, err.file)


def _at(err: ConfigError, key: str) -> ConfigError:
    moved = err.at(key)
    return type(err)(moved.message, moved.path, moved.file)


def parse_expectation(entry: Any, check_key: KeyCheck | None = None) -> Expectation:
    """Validate one ``expect:`` entry; see the module docstring for the forms (and
    :func:`parse_expectations` for *check_key*)."""
    if not isinstance(entry, Mapping):
        raise ConfigError(
            f"expected a mapping such as {{metric: time_s, where: {{bytes: 1 MiB}}, max: 1 ms}} "
            f"or {{verified: true}}, got {entry!r}"
        )
    if "verified" in entry:
        VERIFIED.mapping(entry)
        if entry["verified"] is not True:
            raise ConfigError(f"only 'verified: true' can be expected, got {entry['verified']!r}", "verified")
        return Expectation("verified", "verified", True, _parse_where(entry.get("where"), check_key))
    METRIC.mapping(entry)
    metric = entry.get("metric")
    if metric is None:
        raise ConfigError("this key is required (the row key to check, e.g. time_s)", "metric")
    if not isinstance(metric, str) or not metric:
        raise ConfigError(f"expected a row key such as time_s, got {metric!r}", "metric")
    if check_key is not None:
        try:
            check_key(metric)  # before the values: they are read in the metric's unit
        except ConfigError as err:
            raise _at(err, "metric") from None
    gates = [g for g in GATES if g in entry]
    if gates or "baseline" in entry:
        return _parse_gate(entry, metric, gates, check_key)
    checks = [c for c in CHECKS if c in entry]
    if len(checks) != 1:
        found = f"got {', '.join(checks)}" if checks else "got none"
        raise ConfigError(f"give exactly one of {', '.join(CHECKS)}; {found}")
    check = checks[0]
    where = _parse_where(entry.get("where"), check_key)
    try:
        value = parse_value(metric, entry[check], numeric=check != "equals")
    except ConfigError as err:
        raise _at(_with_unit_hint(err, metric, entry[check]), check) from None
    rel = tol = None
    if check != "approx":
        for key in ("rel", "abs"):
            if key in entry:
                raise ConfigError(f"{key} goes with approx only, not with {check}", key)
    else:
        if "rel" not in entry and "abs" not in entry:
            raise ConfigError("approx needs a tolerance: rel (e.g. 0.01 or '1%') or abs (in the metric's unit)")
        if "rel" in entry:
            rel = _parse_rel(entry["rel"], "rel")
        if "abs" in entry:
            try:
                tol = parse_value(metric, entry["abs"], numeric=True)
            except ConfigError as err:
                raise _at(err, "abs") from None
            if tol < 0:
                raise ConfigError(f"abs must not be negative, got {entry['abs']!r}", "abs")
    return Expectation(check, metric, value, where, rel, tol)


def _parse_gate(entry: Mapping[str, Any], metric: str, gates: list[str], check_key: KeyCheck | None) -> Expectation:
    """``{metric, where, baseline: 7.33 ms, max_increase: 2%}``: the baseline, and the allowed change as ``rel``."""
    if "baseline" not in entry:
        raise ConfigError(f"{gates[0]} needs the value it is measured from: baseline (e.g. baseline: 7.33 ms)")
    if len(gates) != 1:
        raise ConfigError(f"give one of {', '.join(GATES)} with baseline; got {', '.join(gates) or 'none'}")
    others = [k for k in (*CHECKS, "rel", "abs") if k in entry]
    if others:
        raise ConfigError(f"a gate (baseline + {gates[0]}) takes no {others[0]}", others[0])
    try:
        baseline = parse_value(metric, entry["baseline"], numeric=True)
    except ConfigError as err:
        raise _at(_with_unit_hint(err, metric, entry["baseline"]), "baseline") from None
    change = _parse_rel(entry[gates[0]], gates[0])
    return Expectation(gates[0], metric, baseline, _parse_where(entry.get("where"), check_key), change, None)


def _with_unit_hint(err: ConfigError, metric: str, value: Any) -> ConfigError:
    """Add to "expected a number, got '1 s'" that the metric's name decides its unit (``time_ss``)."""
    if not isinstance(value, str) or not re.search(r"\d\s*[A-Za-z]", value):
        return err
    if metric.endswith("_GBps"):
        hint = f"{metric!r} is a number of GB/s, written without a unit"
    elif value_kind(metric) == "raw":
        hint = (f"{metric!r} holds plain numbers (a time's key ends in _s, a size's in _bytes, a bandwidth's "
                "in _Bps): is the metric misspelt?")
    else:
        return err
    return type(err)(f"{err.message}; {hint}", err.path, err.file)


def _parse_rel(value: Any, key: str) -> float:
    """Read a relative change (``rel``, ``max_increase``, ``max_decrease``) as a fraction.

    A percentage (``2%``, ``2 %``) or a fraction below 1 (``0.02``). A bare number of 1 or
    more is refused: ``max_increase: 2`` is 2 % to one reader and 200 % to another, and units
    are never guessed. In a resolved scenario (``units: SI``) every bare number is a fraction.
    """
    what = f"expected a relative tolerance such as 2% or 0.02 (a fraction), got {value!r}"
    rel = parse_percent(value)
    if rel is None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(what, key)
        rel = float(value)
        if 1 <= rel < math.inf and not reading_si_numbers():
            fraction = f" (or {value / 100:g} for a fraction)" if value < 100 else ""
            raise ConfigError(f"{value:g} is ambiguous: write {value:g}%{fraction}", key)
    if not (0 <= rel < math.inf):
        raise ConfigError(what, key)
    return rel


def _parse_where(raw: Any, check_key: KeyCheck | None = None) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"expected a mapping of row keys to values, e.g. {{bytes: 1 MiB}}, got {raw!r}", "where")
    where = {}
    for key, value in raw.items():
        if not isinstance(key, str):
            raise ConfigError(f"expected a row key, got {key!r}", "where")
        if check_key is not None:
            try:
                check_key(key)
            except ConfigError as err:
                raise _at(_at(err, key), "where") from None
        try:
            where[key] = parse_value(key, value)
        except ConfigError as err:
            raise _at(_at(err, key), "where") from None
    return where


# --- the block's shape, declared once (mpisim.engine.reader) -------------------------------------
# Values are read in the metric's unit (parse_value), so each field is described here and read by
# parse_expectation above; the blocks check the keys and publish the shape as JSON Schema.

_QUANTITY: dict[str, Any] = {"type": ["string", "number", "boolean"]}
_TOLERANCE: dict[str, Any] = {"type": ["string", "number"], "examples": ["2%", 0.02]}


def _field(rule: Mapping[str, Any], what: str, required: str | None = None) -> Spec:
    return Custom(lambda value, path: value, rule, description=what, required=required)


_WHERE = _field({"type": "object", "examples": [{"bytes": "1 MiB"}]}, "Which rows: row keys and their values.")
VERIFIED = Block({
    "verified": _field({"const": True}, "Every selected row was verified against numpy."),
    "where": _WHERE,
}, suggest=False)
METRIC = Block({
    "metric": _field({"type": "string"}, "The row key to check, e.g. time_s.",
                     "this key is required (the row key to check, e.g. time_s)"),
    "where": _WHERE,
    "approx": _field(_QUANTITY, "Equal within rel or abs."),
    "max": _field(_QUANTITY, "At most this."),
    "min": _field(_QUANTITY, "At least this."),
    "equals": _field(_QUANTITY, "Exactly this."),
    "rel": _field(_TOLERANCE, "Relative tolerance of approx: 1% or 0.01."),
    "abs": _field(_QUANTITY, "Absolute tolerance of approx, in the metric's unit."),
    "baseline": _field(_QUANTITY, "The value a gate (max_increase, max_decrease) is measured from."),
    "max_increase": _field(_TOLERANCE, "Fail when the metric grows by more than this over baseline."),
    "max_decrease": _field(_TOLERANCE, "Fail when the metric falls by more than this under baseline."),
}, suggest=False, then=[{"oneOf": [{"required": [key]} for key in (*CHECKS, "baseline")]}])

#: The ``expect:`` block: a list of checks, each {verified: true} or {metric, <one check>, ...}.
EXPECT = Custom(lambda value, path: parse_expectations(value), {
    "type": "array", "items": {"anyOf": [VERIFIED.json() | {"required": ["verified"]}, METRIC.json()]},
}, description="Checks of the results; a failure makes the run exit 1.")


# --- evaluation ---------------------------------------------------------------------------------


def same_value(a: Any, b: Any) -> bool:
    """Equality for ``where``: numbers to a relative 1e-9, everything else exactly."""
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=_WHERE_REL, abs_tol=0.0)
    return a == b


def select_rows(rows: Sequence[Mapping[str, Any]], where: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Return the rows whose values equal every entry of *where*."""
    return [row for row in rows if all(key in row and same_value(row[key], value) for key, value in where.items())]


def describe_where(where: Mapping[str, Any]) -> str:
    """Write a where clause for a message: ``bytes=1.2 GB, algorithm=ring``."""
    return ", ".join(f"{key}={format_value(key, value)}" for key, value in where.items())


def _describe_expected(exp: Expectation, shown: str | None = None, limit: str | None = None) -> str:
    """``expected time_s <= 2.1 s where ...``; *shown* and *limit* replace the value's and the
    relative tolerance's texts (with more digits, when a failure needs them to show a difference)."""
    metric = exp.metric
    shown = format_value(metric, exp.value) if shown is None else shown
    if limit is None and exp.rel is not None:
        limit = f"{exp.rel * 100:g}%"
    if exp.check == "verified":
        text = "verified=true"
    elif exp.check in GATES:
        side = "above" if exp.check == "max_increase" else "below"
        text = f"{metric} at most {limit} {side} the baseline {shown}"
    elif exp.check == "approx":
        tolerances = []
        if exp.rel is not None:
            tolerances.append(f"rel {limit}")
        if exp.abs is not None:
            tolerances.append(f"abs {format_value(metric, exp.abs)}")
        text = f"{metric} ~ {shown} ({', '.join(tolerances)})"
    else:
        symbol = {"max": "<=", "min": ">=", "equals": "=="}[exp.check]
        text = f"{metric} {symbol} {shown}"
    return f"expected {text}" + (f" where {describe_where(exp.where)}" if exp.where else "")


def _no_match(exp: Expectation, rows: Sequence[Mapping[str, Any]]) -> str:
    """Explain why a where clause selected nothing, naming the values that do exist."""
    if not rows:
        return "the run produced no result rows"
    for key, value in exp.where.items():
        present = [row[key] for row in rows if key in row]
        if not present:
            return f"no row has a {key!r} key"
        if not any(same_value(v, value) for v in present):
            distinct = list(dict.fromkeys(format_value(key, v) for v in present))
            more = ", ..." if len(distinct) > 8 else ""
            return f"no row has {key}={format_value(key, value)} (rows have {key}: {', '.join(distinct[:8])}{more})"
    return f"no row matches {describe_where(exp.where)}"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _percent(got: float, expected: float) -> float | None:
    """The change from *expected* to *got* in percent, or None from 0."""
    return None if expected == 0 else (got - expected) / abs(expected) * 100


def _format_percent(percent: float) -> str:
    """``2.59%``: three significant digits; the sign is the caller's."""
    return f"{percent:.3g}%"


def _deviation(got: float, expected: float, magnitude: str | None = None) -> str:
    """`` (+2.59%)``: the signed change from *expected*; *magnitude* replaces its digits."""
    percent = _percent(got, expected)
    if percent is None:
        return ""
    if magnitude is None:
        if abs(percent) < 5e-5:
            return " (+0%)"
        magnitude = _format_percent(abs(percent))
    return f" ({'-' if percent < 0 else '+'}{magnitude})"


def _unit_of(key: str, value: float) -> tuple[str, Decimal]:
    """The unit :func:`format_value` writes *value* in (``us``; ``""`` for plain numbers) and its size, exactly."""
    kind = value_kind(key)
    _, _, unit = format_value(key, value).partition(" ")
    if kind in ("time", "size", "bandwidth") and unit:
        return unit, Decimal(repr(float(_PARSERS[kind](f"1 {unit}"))))
    return "", Decimal(1)


def _decimal(value: float, scale: Decimal = Decimal(1)) -> Decimal:
    """*value* (its shortest repr, so 93.72e-6 is 93.72e-6, not its binary expansion) in units of *scale*."""
    return Decimal(repr(value)) / scale


def _plain(number: Decimal) -> str:
    text = f"{number:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _significant_digits(number: Decimal) -> int:
    return len(number.normalize().as_tuple().digits)


def _beyond(value: Decimal, bound: Decimal, side: str) -> str:
    """*value* to the fewest significant digits, no fewer than *bound* has, that still show it
    ``above`` *bound* (or ``below`` it, or ``apart`` from it)."""
    for digits in range(min(_significant_digits(bound), 17), 28):
        shown = value.quantize(Decimal(1).scaleb(value.adjusted() - digits + 1), rounding=ROUND_HALF_EVEN) \
            if value else value
        if (shown > bound) if side == "above" else (shown < bound) if side == "below" else (shown != bound):
            return _plain(shown)
    return _plain(value)


def _visible(shown: str, bound: str, side: str) -> bool:
    """Whether the texts of two numbers (same unit) show the one ``above``/``below``/``apart`` from the other."""
    if shown.split(" ")[1:] != bound.split(" ")[1:]:
        return shown != bound  # different units: far apart
    try:
        a, b = Decimal(shown.split(" ")[0].rstrip("%")), Decimal(bound.split(" ")[0].rstrip("%"))
        return a > b if side == "above" else a < b if side == "below" else a != b
    except ArithmeticError:  # not numbers (inf, nan)
        return shown != bound


def passes(exp: Expectation, got: Any) -> bool:
    """Whether one row's value *got* passes *exp* (not ``verified``)."""
    if exp.check == "equals":
        return same_value(got, exp.value)
    if isinstance(got, bool) or not isinstance(got, int | float) or math.isnan(got):
        return False
    if exp.check == "max":
        return got <= exp.value
    if exp.check == "min":
        return got >= exp.value
    if exp.check == "max_increase":
        return got <= exp.value * (1 + exp.rel) * (1 + 1e-12)
    if exp.check == "max_decrease":
        return got >= exp.value * (1 - exp.rel) * (1 - 1e-12)
    allowed = max(exp.rel * abs(exp.value) if exp.rel is not None else 0.0, exp.abs or 0.0)
    # The bound is inclusive, and 12 us - 11 us must count as 1 us despite binary rounding.
    return abs(got - exp.value) <= allowed * (1 + 1e-9)


def _badness(exp: Expectation, got: Any) -> float:
    """How far *got* is from passing (larger is worse), to pick the row a message names."""
    if not isinstance(got, int | float) or isinstance(got, bool):
        return math.inf
    if exp.check in ("max", "max_increase"):
        return got - exp.value
    if exp.check in ("min", "max_decrease"):
        return exp.value - got
    if exp.check == "approx":
        return abs(got - exp.value)
    return 0.0 if same_value(got, exp.value) else math.inf


def _base_result(exp: Expectation) -> dict[str, Any]:
    out: dict[str, Any] = {"check": exp.check, "metric": exp.metric, "where": dict(exp.where), "expected": exp.value}
    if exp.rel is not None:
        out["rel"] = exp.rel
    if exp.abs is not None:
        out["abs"] = exp.abs
    return out


def evaluate(exp: Expectation, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Check one expectation against result rows; return its result dict (see module docstring)."""
    result = _base_result(exp)
    head = _describe_expected(exp)
    selected = select_rows(rows, exp.where)
    result["rows"] = len(selected)
    if not selected:
        result.update(passed=False, got=None, detail=f"{head}, but {_no_match(exp, rows)}")
        return result
    if exp.check == "verified":
        return _evaluate_verified(result, head, selected)
    values = [row.get(exp.metric) for row in selected]
    result["got"] = values[0] if len(values) == 1 else values
    if all(exp.metric not in row for row in selected):
        keys = ", ".join(dict.fromkeys(k for row in selected for k in row))
        result.update(passed=False, detail=f"{head}, but the rows have no {exp.metric!r} (keys: {keys})")
        return result
    failing = [v for v in values if not passes(exp, v)]
    result["passed"] = not failing
    worst = max(failing or values, key=lambda v: _badness(exp, v))
    if failing and _is_number(worst) and _is_number(exp.value):
        head, got = _failure_texts(exp, worst)
    else:
        got = format_value(exp.metric, worst)
        if exp.check in ("approx", *GATES) and _is_number(worst):
            got += _deviation(worst, exp.value)
    if len(values) > 1:
        got += f" (worst of {len(values)} rows" + (f", {len(failing)} failing)" if failing else ")")
    result["detail"] = f"{head}, got {got}"
    return result


def _failure_texts(exp: Expectation, worst: float) -> tuple[str, str]:
    """The head and the got text of a failed numeric expectation, with the digits that show why.

    Where the usual three or four digits would hide it (``expected time_s <= 93.7 us, got
    93.7 us``), the bound is written exactly and the value with the digits that put it on the
    failing side: ``<= 93.72 us, got 93.723 us``; so are a relative limit and the change that
    exceeds it: ``at most 2% above the baseline ..., got ... (+2.0004%)``.
    """
    metric = exp.metric
    got = format_value(metric, worst)
    if exp.check in ("max", "min", "equals"):
        side = {"max": "above", "min": "below"}.get(exp.check, "apart")
        shown = format_value(metric, exp.value)
        if math.isfinite(worst) and math.isfinite(exp.value) and not _visible(got, shown, side):
            unit, scale = _unit_of(metric, exp.value)
            bound = _decimal(exp.value, scale)
            suffix = f" {unit}" if unit else ""
            shown = _plain(bound) + suffix
            got = _beyond(_decimal(worst, scale), bound, side) + suffix
        return _describe_expected(exp, shown=shown), got
    limit = magnitude = None
    percent = _percent(worst, exp.value)
    if exp.rel is not None and percent is not None and math.isfinite(percent):
        limit, magnitude = f"{exp.rel * 100:g}%", _format_percent(abs(percent))
        if not _visible(magnitude, limit, "above"):
            exact = Decimal(repr(exp.rel)) * 100
            limit = _plain(exact) + "%"
            magnitude = _beyond(Decimal(repr(abs(percent))), exact, "above") + "%"
    if exp.check == "approx" and math.isfinite(worst):
        # Against ~ 12 us (abs 1 us), 13.0001 us, not 13 us: beyond the edge of the tolerance.
        allowed = max(exp.rel * abs(exp.value) if exp.rel is not None else 0.0, exp.abs or 0.0)
        edge = exp.value + allowed if worst > exp.value else exp.value - allowed
        side = "above" if worst > exp.value else "below"
        if not _visible(got, format_value(metric, edge), side):
            unit, scale = _unit_of(metric, edge)
            got = _beyond(_decimal(worst, scale), _decimal(edge, scale), side) + (f" {unit}" if unit else "")
    return _describe_expected(exp, limit=limit), got + _deviation(worst, exp.value, magnitude)


def _evaluate_verified(result: dict[str, Any], head: str, selected: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    checked = [row for row in selected if row.get("verified") is not None]
    failed = [row for row in checked if row.get("verified") is not True]
    result["got"] = not failed
    result["passed"] = not failed
    if not checked:
        result["detail"] = f"{head}: nothing to check, no row carries a verified result (payload: size?)"
    elif not failed:
        result["detail"] = f"{head}: all {len(checked)} rows verified"
    else:
        names = "; ".join(_row_name(row) for row in failed[:3]) + ("; ..." if len(failed) > 3 else "")
        result["detail"] = f"{head}, got {len(failed)} of {len(checked)} rows not verified ({names})"
    return result


def _row_name(row: Mapping[str, Any]) -> str:
    """A short name for a row: its identifying keys (not its measurements)."""
    parts = []
    for key, value in row.items():
        if key == "verified" or value is None or value_kind(key) in ("time", "bandwidth", "number"):
            continue
        parts.append(f"{key}={format_value(key, value)}")
    return ", ".join(parts[:5])


def evaluate_all(expectations: Sequence[Expectation], rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Check every expectation against *rows*, in order."""
    return [evaluate(exp, rows) for exp in expectations]
