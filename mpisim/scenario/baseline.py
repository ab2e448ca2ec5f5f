"""Baselines: refreshing a scenario's expected values from a run, and saying what changed since.

``mpisim run FILE --update-expect`` writes this run's values into the file's ``expect:`` block.
The file is edited in place, scalar by scalar: PyYAML's composer gives each value's exact span
in the text, and only those characters change, so comments, layout, quoting and key order are
left byte for byte (a YAML round trip, even a careful one, re-flows what it re-writes). What
moves:

* a gate's ``baseline`` (``{metric, baseline: 7.33 ms, max_increase: 2%}``) whenever this
  run's value, written with the baseline's own digits, reads differently: a baseline is, by
  definition, the value of the last accepted run, faster or slower;
* ``approx``, ``max``, ``min`` and ``equals`` only when this run fails them: they are claims a
  person wrote (often a published measurement), kept while they hold. A crossed bound moves to
  the value this run got (the worst selected row).

A value keeps its unit and spacing (``7.33 ms`` becomes ``7.52 ms``, ``1.2GB`` stays without
a space) and gets at least four significant digits, rounded the way that passes: a ``max`` up
(93.723 us: ``max: 93.73 us``), a ``min`` down (22.9264: ``min: 22.92``), a baseline or an
``approx`` value to the nearest, with more digits where a tight tolerance needs them
(``max_increase: 0%``). So the updated file passes this run, and a second update of the same
results is a no-op. An entry that selects several rows (or none) is not rewritten, and the
update says so.

Beside a scenario with gates lives its **baseline file**, ``<stem>.baseline.json``: the resolved
scenario, :func:`~mpisim.scenario.fingerprint.fingerprint` and rows of the run the baselines
came from. ``--update-expect`` writes it together with the baseline values (or when it is
missing). When a gate fails, :func:`explain_failed_gates` compares this run's inputs with that
file's and names each difference in the gate's message::

    expected time_s at most 2% above the baseline 7.33 ms, got 8.14 ms (+11.1%);
    inputs that differ from the baseline's: topology.inter.bandwidth: 50 GB/s -> 45 GB/s (-10%)
"""

from __future__ import annotations

import decimal
import difflib
import json
import math
import os
import re
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mpisim.engine.units import parse_bandwidth, parse_size, parse_time
from mpisim.errors import ConfigError, printable
from mpisim.report.records import RunResult, jsonable
from mpisim.scenario.expect import GATES, evaluate_all, parse_value, passes, value_kind
from mpisim.scenario.files import write_atomic
from mpisim.scenario.fingerprint import algorithm_digests, input_changes
from mpisim.scenario.load import load_file, loads
from mpisim.scenario.model import Expectation

__all__ = ["BASELINE_SUFFIX", "ExpectUpdate", "baseline_document", "baseline_path", "explain_failed_gates",
           "load_baseline", "read_baseline", "update_expect"]

BASELINE_SUFFIX = ".baseline.json"
#: A rewritten value gets at least this many significant digits (0.005 % at worst: far inside
#: any tolerance a gate or approx uses).
MIN_DIGITS = 4

_NUMBER = re.compile(r"^(?P<number>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(?P<space>\s*)(?P<unit>.*?)\s*$")
_PLAIN_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_.+-]*$")
_UNIT_SCALE = {"time": parse_time, "size": parse_size, "bandwidth": parse_bandwidth}


def baseline_path(scenario_file: str | os.PathLike[str]) -> Path:
    """``scenarios/nightly.yaml`` -> ``scenarios/nightly.baseline.json``."""
    path = Path(scenario_file)
    return path.with_name(path.stem + BASELINE_SUFFIX)


#: A baseline holds a scenario and its rows: a few hundred kB at most.
MAX_BASELINE_BYTES = 50_000_000


def read_baseline(scenario_file: str | os.PathLike[str]) -> tuple[dict[str, Any] | None, str]:
    """Return the baseline file of a scenario as data, or None and why not (``""``: there is none).

    Only a regular file is opened (a FIFO planted there would block the run for ever), of a
    bounded size; damaged JSON, JSON nested past the parser's depth and a document of another
    shape are reported as such, not as a missing file.
    """
    path = baseline_path(scenario_file)
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            return None, "is not a regular file"
        if info.st_size > MAX_BASELINE_BYTES:
            return None, f"is {info.st_size:,} bytes (at most {MAX_BASELINE_BYTES:,})"
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, ""
    except (OSError, ValueError, RecursionError) as err:
        return None, f"cannot be read ({type(err).__name__})"
    if not (isinstance(data, dict) and isinstance(data.get("scenario"), dict)):
        return None, "is not a baseline document (no scenario mapping)"
    return data, ""


def load_baseline(scenario_file: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Return the baseline file of a scenario as data, or None when there is none or it is unreadable."""
    return read_baseline(scenario_file)[0]


def baseline_document(result: RunResult) -> dict[str, Any]:
    """The content of a baseline file: what produced the baseline values, and the rows they came from."""
    return jsonable({
        "about": "inputs of the run the expect: baselines were taken from (mpisim run FILE --update-expect)",
        "scenario": {k: v for k, v in result.scenario.items() if k != "expect"},
        "fingerprint": result.fingerprint,
        "algorithms": algorithm_digests(),
        "results": result.rows,
    })


def has_gates(raw_expect: Any) -> bool:
    """Whether a raw ``expect:`` list holds a one-sided gate."""
    return isinstance(raw_expect, list) and any(isinstance(e, Mapping) and "baseline" in e for e in raw_expect)


def explain_failed_gates(result: RunResult, scenario_file: str | os.PathLike[str] | None) -> None:
    """Add to each failed gate of *result* the inputs that differ from its baseline file's.

    Each such expectation gains ``changed_inputs`` (a list of lines, empty when nothing
    differs) and its ``detail`` a sentence naming them. Without a baseline file the detail says
    how to make one. Modifies *result* in place.
    """
    failed = [exp for exp in result.expectations if exp.get("check") in GATES and not exp.get("passed")]
    if not failed or scenario_file is None:
        return
    base, problem = read_baseline(scenario_file)
    name = baseline_path(scenario_file).name
    if base is not None:
        try:
            changes = [printable(line) for line in input_changes(
                base["scenario"], result.scenario, base.get("fingerprint"), result.fingerprint, base.get("algorithms"))]
        except (TypeError, KeyError, AttributeError, ValueError, RecursionError):
            base, problem = None, "is from another version or damaged"
    if base is None:
        for exp in failed:
            if problem:
                exp["detail"] += (f"; the baseline file {name} {problem}, so inputs cannot be compared "
                                  "(mpisim run FILE --update-expect rewrites it)")
            else:
                exp["detail"] += (f"; no baseline file {name} to compare inputs with "
                                  "(mpisim run FILE --update-expect writes one)")
        return
    for exp in failed:
        exp["changed_inputs"] = list(changes)
        if changes:
            exp["detail"] += "; inputs that differ from the baseline's: " + "; ".join(changes)
        else:
            exp["detail"] += "; no input differs from the baseline's (same scenario, presets and code)"


# --- rewriting values ---------------------------------------------------------------------------


def _significant(number: str) -> int:
    """Significant digits written in *number*: ``7.33`` -> 3, ``0.0120`` -> 3, ``1200`` -> 2."""
    mantissa = re.split(r"[eE]", number.lstrip("+-"))[0]
    digits = mantissa.replace(".", "").lstrip("0")
    if "." not in mantissa:
        digits = digits.rstrip("0")
    return max(1, len(digits))


_ROUNDING = {"up": decimal.ROUND_CEILING, "down": decimal.ROUND_FLOOR, "nearest": decimal.ROUND_HALF_EVEN}


def _with_digits(x: float, digits: int, direction: str = "nearest") -> str:
    """*x* with *digits* significant digits, rounded ``up``, ``down`` or to the ``nearest``; in
    plain notation between 1e-4 and 1e15, trailing zeros dropped."""
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    exact = decimal.Decimal(x)
    plain = -4 <= exact.adjusted() < 15
    # In plain notation every digit before the point is kept: 11.86 at one digit is 12, not 10.
    step = decimal.Decimal(1).scaleb(min(0, exact.adjusted() - digits + 1) if plain else exact.adjusted() - digits + 1)
    rounded = exact.quantize(step, rounding=_ROUNDING[direction])
    if plain:
        text = f"{rounded:f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    mantissa, _, exponent = f"{rounded:.{digits - 1}e}".partition("e")
    mantissa = mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa
    # A dot and a signed exponent: YAML reads 1.5e-5 as a number, 1.5e5 or 1e-5 as a string.
    return f"{mantissa if '.' in mantissa else mantissa + '.0'}e{exponent}"


def _scale(kind: str, unit: str) -> float | None:
    """How many SI units one *unit* is (``ms`` -> 1e-3), or None if *unit* is not one of *kind*."""
    if not unit:
        return 1.0
    parse = _UNIT_SCALE.get(kind)
    if parse is None:
        return None
    try:
        return float(parse(f"1 {unit}"))
    except ConfigError:
        return None


#: Which way a rewritten value is rounded so that it passes: a ``max`` up, a ``min`` down;
#: values with a tolerance (approx, a gate's baseline) and ``equals`` to the nearest.
_DIRECTION = {"max": "up", "min": "down"}


def _read_back(text: str, metric: str) -> Any:
    """What the scenario loader reads from the scalar *text* written for *metric* (None if nothing)."""
    value: Any = text
    if _NUMBER.match(text) and not _NUMBER.match(text)["unit"]:
        try:
            value = yaml.safe_load(text)  # as the file will read it: 12.5 is a float, 1e5 a string
        except yaml.YAMLError:
            return None
    try:
        return parse_value(metric, value, numeric=True)
    except ConfigError:
        return None


def rewrite_scalar(written: str, metric: str, value: Any, check: str = "approx",
                   holds: Callable[[Any], bool] | None = None) -> str | None:
    """The text replacing *written* (the *check* value of row key *metric*) by *value*; None if
    it stays as written.

    Numbers keep their unit and spacing and get at least :data:`MIN_DIGITS` significant digits
    (more if written with more). With *holds* (whether a value, as the loader reads it back,
    passes the expectation), the text is one that passes: a ``max`` rounded up, a ``min`` down,
    others to the nearest, with more digits where that is what it takes; None if no text does.
    A value that passes as written and reads the same at its written digits (``7.33 ms`` for
    7.3312e-3 s) stays as written.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        new = str(value)
        return None if new == written else new
    match = _NUMBER.match(written)
    kind = value_kind(metric)
    scale = _scale(kind, match["unit"]) if match else None
    if match is None or scale is None:
        return None  # a value mpisim cannot rewrite in its own words; the caller says so
    scaled = value / scale
    digits = _significant(match["number"])
    current = _read_back(written, metric)
    if (float(_with_digits(scaled, digits)) == float(match["number"])
            and (holds is None or (current is not None and holds(current)))):
        return None
    direction = _DIRECTION.get(check, "nearest")
    if kind in ("size", "count") and not match["unit"]:
        rounding = {"up": math.ceil, "down": math.floor}.get(direction, round)
        candidates = [str(rounding(scaled))]
    else:
        candidates = [_with_digits(scaled, d, direction) for d in range(max(digits, MIN_DIGITS), 18)]
    for number in dict.fromkeys(candidates):
        text = f"{number}{match['space']}{match['unit']}"
        if holds is None:
            return text
        read = _read_back(text, metric)
        if read is not None and holds(read):
            return text
    return None


@dataclass
class ExpectUpdate:
    """What :func:`update_expect` did to a scenario file."""

    path: Path
    old_text: str
    new_text: str
    changes: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    baseline_written: Path | None = None

    @property
    def changed(self) -> bool:
        """Whether the scenario file's text changed."""
        return self.new_text != self.old_text

    def diff(self) -> str:
        """A unified diff of the scenario file, old to new ('' when unchanged)."""
        name = str(self.path)
        return "".join(difflib.unified_diff(self.old_text.splitlines(keepends=True),
                                            self.new_text.splitlines(keepends=True), name, name))


def _expect_nodes(text: str) -> list[yaml.Node] | None:
    """The entry nodes of the document's top-level ``expect:`` list, or None if there is none."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if not isinstance(root, yaml.MappingNode):
        return None
    for key, value in root.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "expect" and isinstance(value, yaml.SequenceNode):
            return list(value.value)
    return None


def _value_node(entry: yaml.Node, key: str) -> yaml.ScalarNode | None:
    if not isinstance(entry, yaml.MappingNode):
        return None
    for k, v in entry.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            return v if isinstance(v, yaml.ScalarNode) else None
    return None


def _new_value(exp: Mapping[str, Any], check: str) -> tuple[Any, str]:
    """The value *exp* should be written with after this run, or (None, why not)."""
    got = exp.get("got")
    if exp.get("rows", 0) == 0 or got is None:
        return None, "selects no row"
    if isinstance(got, list):
        if check in ("max", "min") and all(isinstance(v, int | float) and not isinstance(v, bool) for v in got):
            return (max(got) if check == "max" else min(got)), ""
        return None, f"selects {len(got)} rows; give it a where that selects one"
    return got, ""


def _holds(exp: Mapping[str, Any]) -> Callable[[Any], bool] | None:
    """Whether a new value of *exp* (a result dict) would pass against every row it selected."""
    got = exp.get("got")
    gots = got if isinstance(got, list) else [got]
    if exp.get("check") not in ("approx", "max", "min", "equals", *GATES):
        return None

    def holds(value: Any) -> bool:
        new = Expectation(exp["check"], exp["metric"], value, dict(exp.get("where") or {}), exp.get("rel"),
                          exp.get("abs"))
        return all(passes(new, v) for v in gots)

    return holds


def update_expect(path: str | os.PathLike[str], result: RunResult) -> ExpectUpdate:
    """Rewrite the expectations of the scenario file at *path* from *result* (a run of that file,
    without overrides) and, for a scenario with gates, its baseline file; see the module docstring.

    Files are written atomically, and only when their content changes. Raises ConfigError if
    the rewritten file would not load (it always should) or cannot be written.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    update = ExpectUpdate(path, text, text)
    nodes = _expect_nodes(text) or []
    edits: list[tuple[int, int, str]] = []
    for i, (node, exp) in enumerate(zip(nodes, result.expectations, strict=False)):
        check = exp.get("check")
        key = "baseline" if check in GATES else check
        if check in ("verified", "expect_failure") or key is None:
            continue
        is_gate = check in GATES
        if not is_gate and exp.get("passed"):
            continue  # a claim that still holds is kept as written
        label = f"expect[{i}] {key}"
        value, why = _new_value(exp, check)
        scalar = _value_node(node, key)
        if value is None or scalar is None:
            update.skipped.append(f"{label}: not updated: {why or 'its value is not a plain scalar'}")
            continue
        start, end = scalar.start_mark.index, scalar.end_mark.index
        quote = text[start] if scalar.style in ("'", '"') else ""
        replacement = rewrite_scalar(scalar.value, exp["metric"], value, check, _holds(exp))
        if replacement is None:
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if number and not _NUMBER.match(scalar.value):
                update.skipped.append(f"{label}: not updated: cannot rewrite {scalar.value!r} in its own unit")
            elif number and not exp.get("passed"):
                update.skipped.append(f"{label}: not updated: no value written in {scalar.value!r}'s unit passes")
            continue
        if not quote and not _NUMBER.match(replacement) and not _PLAIN_WORD.match(replacement):
            quote = '"'
        new = f"{quote}{replacement}{quote}" if quote != '"' else json.dumps(replacement)
        edits.append((start, end, new))
        update.changes.append(f"{label}: {scalar.value} -> {replacement}")
    new_text = text
    for start, end, new in sorted(edits, reverse=True):
        new_text = new_text[:start] + new + new_text[end:]
    update.new_text = new_text
    if update.changed:
        loads(new_text, str(path))  # the edited file must still be a valid scenario
        # A scenario reached through a link is the user's own file elsewhere: edit that file, in
        # its mode; replacing the link with a copy would leave the real file stale.
        _write(write_atomic, path.resolve(), new_text)
    raw = yaml.safe_load(new_text) or {}
    gate_changed = any(" baseline: " in line for line in update.changes)
    target = baseline_path(path)
    if has_gates(raw.get("expect")) and (gate_changed or not target.exists()):
        document = json.dumps(baseline_document(result), indent=2, sort_keys=True, allow_nan=False) + "\n"
        old = target.read_text(encoding="utf-8") if target.is_file() else None  # a FIFO there is replaced, not read
        if document != old:
            _write(write_atomic, target, document)
            update.baseline_written = target
    return update


def _write(write_atomic: Any, path: Path, text: str) -> None:
    try:
        write_atomic(path, text)
    except OSError as err:
        raise ConfigError(f"cannot write: {err.strerror or err}", "", str(path)) from None


def still_failing(path: str | os.PathLike[str], rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Check the (updated) file's expectations against *rows* again; return those that fail."""
    return [exp for exp in evaluate_all(load_file(path).expect, rows) if not exp["passed"]]
