"""Scenario loading: YAML -> raw dict -> validated, resolved :class:`~mpisim.scenario.model.Scenario`.

This is the only place where user input is checked. Each top-level key is popped and checked
in turn, in the style of demes' loader, and every problem becomes one
:class:`~mpisim.errors.ConfigError` whose ``str()`` is the line the CLI prints::

    bad.yaml: topology.inter.bandwidth: '10 Gbsp' is not a bandwidth (e.g. 100 Gbps, 12.5 GB/s)
    bad.yaml: line 7: invalid YAML: mapping values are not allowed here (column 12)
    bad.yaml: mpi.eager_limt: unknown key 'eager_limt' (did you mean 'eager_limit'?); allowed keys: ...

Overrides (``mpisim run s.yaml --set topology.nodes=16``) are applied to the raw dict before
validation, so an override is checked exactly like the file: values are read as YAML scalars or
flow collections (``16`` is a number, ``8 KiB`` a string, ``[1, 2]`` a list), never evaluated
as code. Missing intermediate mappings are created, and a topology given as a preset name
turns into ``{preset: NAME}`` so that ``--set topology.nodes=16`` keeps the preset.

:func:`dump` writes the resolved scenario back as plain data (SI numbers; an unlimited
``copy_bandwidth`` is the string ``"inf"``), the form ``mpisim check`` prints and
``results.json`` embeds; ``load(dump(s)) == s``.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import math
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import yaml

import mpisim.collectives
import mpisim.workloads  # noqa: F401  (importing registers the workload kinds)
from mpisim.collectives import registry
from mpisim.engine.limits import Limits
from mpisim.engine.units import (
    parse_bandwidth,
    parse_count,
    parse_per_byte,
    parse_size,
    parse_time,
    parse_whole,
    si_numbers,
)
from mpisim.errors import ConfigError
from mpisim.mpi.config import MpiConfig
from mpisim.mpi.ops import get_op
from mpisim.network.base import model_names
from mpisim.network.presets import resolve_topology
from mpisim.network.topology import TopologySpec, located, too_slow
from mpisim.report.plot_names import PLOT_NAMES
from mpisim.scenario import expect as expect_mod
from mpisim.scenario.model import (
    DEFAULT_FIDELITY,
    DEFAULT_MPI,
    DEFAULT_NAME,
    DEFAULT_NETWORK_MODEL,
    DEFAULT_PAYLOAD,
    DEFAULT_SEED,
    DEFAULT_SELECTOR,
    FAILURE_KINDS,
    FIDELITIES,
    LINK_PLOTS,
    PAYLOADS,
    SELECTORS,
    TOP_LEVEL_KEYS,
    AlgorithmDefaults,
    Expectation,
    NetworkSpec,
    Scenario,
    TraceSpec,
    WorkloadSpec,
    sweep_points,
)
from mpisim.workloads.base import get_workload

__all__ = ["apply_overrides", "dump", "load", "load_dict", "load_file", "loads", "parse_set", "read_yaml"]

_WORKLOAD_EXAMPLE = "{kind: collective, collective: allreduce, sizes: [1 MiB]}"


# --- YAML ---------------------------------------------------------------------------------------


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is an error.

    Plain PyYAML keeps the last value silently, which turns a copy-paste slip into a wrong run.
    """


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    first_line: dict[Any, int] = {}
    # Checked before merge keys (<<: *base) are flattened in: an explicit key may override one.
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            if key in first_line:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first given on line {first_line[key] + 1})", key_node.start_mark
                )
            first_line[key] = key_node.start_mark.line
        except TypeError:  # an unhashable key: construct_mapping below reports it
            break
    loader.flatten_mapping(node)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _yaml_error(err: yaml.YAMLError, file: str) -> ConfigError:
    """Turn a YAML error into one line: the line number as the path, then what went wrong."""
    if isinstance(err, yaml.MarkedYAMLError) and err.problem_mark is not None:
        mark = err.problem_mark
        problem = err.problem or err.context or "cannot parse"
        return ConfigError(f"invalid YAML: {problem} (column {mark.column + 1})", f"line {mark.line + 1}", file)
    return ConfigError(f"invalid YAML: {' '.join(str(err).split())}", "", file)


#: Limits on what a scenario file may hold. A scenario is a page of YAML; these are far above
#: any real one and far below what would exhaust the machine (a 650-byte alias bomb expands
#: to 10^10 nodes). The sizes count what the YAML *expands* to, aliases included.
MAX_FILE_BYTES = 1_000_000
MAX_DEPTH = 64
MAX_NODES = 200_000
MAX_TEXT_CHARS = 2_000_000
MAX_NUMBER_CHARS = 100


def _check_limits(root: yaml.Node) -> None:
    """Refuse a YAML tree that is too deep, expands too far, holds an absurdly long number or refers to itself.

    Sizes are counted with every alias expanded, memoised per node, so an alias bomb is
    measured in the time it takes to read, not to expand it. The walk is iterative: a deeply
    nested file must not exhaust Python's stack either.
    """
    expanded: dict[int, tuple[int, int, int]] = {}  # id(node) -> (values, characters, depth) once expanded
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        line = f"line {node.start_mark.line + 1}"
        if isinstance(node, yaml.ScalarNode):
            if (len(node.value) > MAX_NUMBER_CHARS and node.style is None
                    and node.tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")):
                raise ConfigError(f"a number of {len(node.value)} characters (at most {MAX_NUMBER_CHARS})", line)
            expanded[id(node)] = (1, len(node.value), 1)
            continue
        children = node.value if isinstance(node, yaml.SequenceNode) else [part for pair in node.value for part in pair]
        if children_done:
            nodes = 1 + sum(expanded[id(child)][0] for child in children)
            chars = sum(expanded[id(child)][1] for child in children)
            depth = 1 + max((expanded[id(child)][2] for child in children), default=0)
            if depth > MAX_DEPTH:
                raise ConfigError(f"invalid YAML: nested more than {MAX_DEPTH} levels deep", line)
            if nodes > MAX_NODES or chars > MAX_TEXT_CHARS:
                raise ConfigError(
                    f"invalid YAML: expands to more than {MAX_NODES:,} values or {MAX_TEXT_CHARS:,} characters "
                    "(aliases repeat what they point to)", line)
            expanded[id(node)] = (nodes, chars, depth)
            open_nodes.discard(id(node))
            continue
        if id(node) in expanded:
            continue
        if id(node) in open_nodes:
            raise ConfigError("invalid YAML: an alias refers to a value that contains it", line)
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in expanded)


def read_yaml(text: str, file: str = "") -> Any:
    """Parse YAML *text*, rejecting duplicate keys and what exceeds the limits above. Raises ConfigError naming the line."""
    loader = _StrictLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise ConfigError(f"invalid YAML: nested more than {MAX_DEPTH} levels deep", "", file) from None
        if node is None:
            return None
        try:
            _check_limits(node)
        except ConfigError as err:
            raise err.in_file(file) if file else err from None
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        raise _yaml_error(err, file) from None
    finally:
        loader.dispose()


def _read_file(path: Path, file: str) -> Any:
    try:
        info = path.stat()
        if stat.S_ISDIR(info.st_mode):
            raise ConfigError("is a directory, not a scenario file", "", file)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError("is not a regular file (a scenario is a YAML file)", "", file)
        if info.st_size > MAX_FILE_BYTES:
            raise ConfigError(f"is {info.st_size:,} bytes; a scenario file may have at most {MAX_FILE_BYTES:,}", "", file)
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("no such file", "", file) from None
    except IsADirectoryError:
        raise ConfigError("is a directory, not a scenario file", "", file) from None
    except UnicodeDecodeError:
        raise ConfigError("is not UTF-8 text", "", file) from None
    except OSError as err:
        raise ConfigError(f"cannot read: {err.strerror or err}", "", file) from None
    return read_yaml(text, file)


def read_scenario_file(path: str | os.PathLike[str]) -> Any:
    """Return the raw YAML content of a scenario file, unvalidated. Raises ConfigError if unreadable."""
    return _read_file(Path(path), os.fspath(path))


# --- overrides ----------------------------------------------------------------------------------


def parse_set(items: Iterable[str]) -> list[tuple[str, Any]]:
    """Read ``--set`` arguments ``dotted.key=value`` into (key, value) pairs, values as YAML.

    ``"topology.nodes=16"`` -> ``("topology.nodes", 16)``; ``"mpi.eager_limit=8 KiB"`` ->
    ``("mpi.eager_limit", "8 KiB")``. Raises ConfigError (path ``--set``) for a malformed item.
    """
    pairs = []
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            raise ConfigError(f"expected dotted.key=value, got {item!r}", "--set")
        try:
            value = read_yaml(text) if text.strip() else None  # the file's limits apply to --set values too
        except ConfigError as err:
            raise ConfigError(f"cannot read the value {text[:60]!r} as YAML: {err.message}", f"--set {key}") from None
        pairs.append((key, value))
    return pairs


def apply_overrides(raw: Mapping[str, Any], overrides: Iterable[tuple[str, Any]] | Mapping[str, Any]) -> dict[str, Any]:
    """Return a deep copy of *raw* with each dotted override applied, in order.

    Intermediate mappings are created as needed; a topology (or network) given as a name
    becomes a mapping first (``topology: ib-hdr`` + ``topology.nodes=16`` ->
    ``{preset: ib-hdr, nodes: 16}``). A numeric part indexes a list (``expect.0.rel``).
    Raises ConfigError when a part of the path is a scalar that cannot hold a key.
    """
    out = copy.deepcopy(dict(raw))
    items = overrides.items() if isinstance(overrides, Mapping) else overrides
    for key, value in items:
        sweep = out.get("sweep")
        if key.startswith("sweep.") and len(key) > len("sweep."):
            # Sweep axes are dotted keys themselves: sweep.topology.nodes sets the axis "topology.nodes".
            out["sweep"] = {**(sweep if isinstance(sweep, Mapping) else {}), key[len("sweep."):]: copy.deepcopy(value)}
            continue
        if isinstance(sweep, Mapping) and key in sweep:
            # One value for a swept key replaces that axis (replaced_sweep_axes says so to the user).
            rest = {axis: values for axis, values in sweep.items() if axis != key}
            if rest:
                out["sweep"] = rest
            else:
                del out["sweep"]
        _set_dotted(out, key, copy.deepcopy(value))
    return out


def replaced_sweep_axes(raw: Mapping[str, Any], overrides: Iterable[tuple[str, Any]]) -> list[str]:
    """Return a line for each override that replaces one of *raw*'s sweep axes with a single value."""
    sweep = raw.get("sweep")
    if not isinstance(sweep, Mapping):
        return []
    return [f"--set {key}={value} replaces the sweep over {key} ({sweep[key]}): one value runs"
            for key, value in overrides if key in sweep]


_SHORTHANDS = {"topology": "preset", "network": "model"}


def _set_dotted(raw: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node: Any = raw
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        where = ".".join(parts[: i + 1])
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ConfigError(f"cannot set {key}: no item {part} in a list of {len(node)}", where)
            index: Any = int(part)
        elif isinstance(node, dict):
            index = part
        else:
            raise ConfigError(f"cannot set {key}: {'.'.join(parts[:i])} is {node!r}, not a mapping", where)
        if last:
            node[index] = value
            return
        child = node[index] if isinstance(node, list) else node.get(index)
        if child is None:
            child = node[index] = {}
        elif isinstance(child, str) and i == 0 and part in _SHORTHANDS:
            child = node[index] = {_SHORTHANDS[part]: child}
        node = child


# --- entry points -------------------------------------------------------------------------------


def load(source: str | os.PathLike[str] | Mapping[str, Any], overrides: Iterable[tuple[str, Any]] | Mapping[str, Any] = ()) -> Scenario:
    """Load a scenario from a file path or from a raw mapping (such as :func:`dump`'s output).

    Raises ConfigError (one line, ``file: path: message``) for anything invalid.
    """
    if isinstance(source, Mapping):
        return load_dict(source, overrides=overrides)
    return load_file(source, overrides)


def load_file(path: str | os.PathLike[str], overrides: Iterable[tuple[str, Any]] | Mapping[str, Any] = ()) -> Scenario:
    """Read, override and validate the scenario file at *path*."""
    file = os.fspath(path)
    raw = _read_file(Path(file), file)
    return load_dict(raw, file=file, overrides=overrides)


def loads(text: str, file: str = "<string>", overrides: Iterable[tuple[str, Any]] | Mapping[str, Any] = ()) -> Scenario:
    """Validate a scenario given as YAML text (*file* names it in messages)."""
    return load_dict(read_yaml(text, file), file=file, overrides=overrides)


def load_dict(raw: Any, file: str | None = None, overrides: Iterable[tuple[str, Any]] | Mapping[str, Any] = (),
              *, sweep_point: bool = False) -> Scenario:
    """Validate a raw scenario mapping, after applying *overrides* (dotted key -> value).

    *file* is where the mapping came from: it names the scenario by default, prefixes error
    messages, and is the directory relative paths (``program: my.py:main``) are read from.
    *sweep_point* says *raw* is one point of a sweep (:func:`point_raw`): its ``expect:`` block
    speaks for every point, so its ``where`` values are not held against this point's rows.
    Raises ConfigError (attributed to *file*) for anything invalid.
    """
    display = file or ""
    try:
        if raw is None:
            raise ConfigError("the file is empty; a scenario needs at least topology and workload")
        if not isinstance(raw, Mapping):
            raise ConfigError(f"expected a mapping of scenario keys ({', '.join(TOP_LEVEL_KEYS)}), got {_short(raw)}")
        written = raw
        overrides = list(overrides.items()) if isinstance(overrides, Mapping) else list(overrides)
        raw = apply_overrides(raw, overrides)
        # A resolved scenario (mpisim check, --json, results.json) says `units: SI`: its bare
        # numbers are seconds, bytes and bytes/s. Anywhere else a bare number is an error.
        units = raw.get("units")
        if units not in (None, "SI"):
            raise ConfigError(f"expected SI (bare numbers are SI values, as in a resolved scenario), got {_short(units)}",
                              "units")
        with si_numbers() if units == "SI" else contextlib.nullcontext():
            scenario = _build(raw, file)
            if scenario.sweep:
                _check_sweep_points(raw, scenario, file)
            if not sweep_point:
                _check_where_values(scenario.expect, raw, written if overrides else None)
    except ConfigError as err:
        if display and not err.file:
            raise err.in_file(display) from None
        raise
    return scenario


# --- the scenario, key by key -------------------------------------------------------------------


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:50]}...{text[-7:]}"


def check_keys(raw: Mapping[Any, Any], allowed: Iterable[str], path: str = "") -> None:
    """Raise ConfigError for the first key of *raw* not in *allowed*, listing the allowed keys."""
    allowed = list(allowed)
    for key in raw:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            where = f"{path}.{key}" if path else str(key)
            raise ConfigError(f"unknown key {key!r}{hint}; allowed keys: {', '.join(allowed)}", where)


def _mapping(value: Any, path: str, example: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"expected a mapping such as {example}, got {_short(value)}", path)
    return value


def _choice(value: Any, choices: Iterable[str], path: str) -> str:
    choices = list(choices)
    if not isinstance(value, str) or value not in choices:
        raise ConfigError(f"expected one of {', '.join(choices)}, got {_short(value)}", path)
    return value


def _get(raw: Mapping[str, Any], key: str, default: Any) -> Any:
    """Return ``raw[key]``, or *default* when the key is missing or null (``--set seed=null``)."""
    value = raw.get(key)
    return default if value is None else value


def _build(raw: Mapping[str, Any], file: str | None) -> Scenario:
    check_keys(raw, TOP_LEVEL_KEYS)
    name = _get(raw, "name", Path(file).stem if file else DEFAULT_NAME)
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"expected a non-empty string, got {_short(name)}", "name")
    description = _get(raw, "description", "")
    if not isinstance(description, str):
        raise ConfigError(f"expected a string, got {_short(description)}", "description")
    seed = _get(raw, "seed", DEFAULT_SEED)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"expected a whole number >= 0, got {_short(seed)}", "seed")

    if raw.get("topology") is None:
        raise ConfigError("this key is required: a preset name (see 'mpisim list topologies') or a mapping", "topology")
    try:
        topology, preset_mpi = resolve_topology(raw["topology"])
    except ConfigError as err:
        raise located(err, "topology") from None
    mpi = _resolve_mpi(preset_mpi, raw.get("mpi"), topology.name)
    network = _parse_network(raw.get("network"))
    algorithms = _parse_algorithms(raw.get("algorithms"), topology.size, topology.device, topology)
    payload = _choice(_get(raw, "payload", DEFAULT_PAYLOAD), PAYLOADS, "payload")
    fidelity = _choice(_get(raw, "fidelity", DEFAULT_FIDELITY), FIDELITIES, "fidelity")
    report = _parse_report(_get(raw, "report", {}))
    trace = _parse_trace(raw.get("trace"), report)
    limits = _parse_limits(raw.get("limits"))
    workload = _parse_workload(raw.get("workload"))
    sweep = _parse_sweep(raw.get("sweep"))
    try:
        expectations = expect_mod.parse_expectations(raw.get("expect"), _row_key_check(workload, sweep))
    except ConfigError as err:
        raise ConfigError(err.message, f"expect{err.path}" if err.path.startswith("[") else "expect", err.file) from None
    expect_failure = raw.get("expect_failure")
    if expect_failure is not None:
        expect_failure = _choice(expect_failure, FAILURE_KINDS, "expect_failure")
    _check_algorithms_fit(workload, topology)
    _check_layout_fits(workload, topology.size)
    return Scenario(
        name=name,
        description=description,
        seed=seed,
        topology=topology,
        network=network,
        mpi=mpi,
        algorithms=algorithms,
        payload=payload,
        fidelity=fidelity,
        trace=trace,
        workload=workload,
        sweep=sweep,
        expect=expectations,
        expect_failure=expect_failure,
        report=report,
        limits=limits,
        raw=copy.deepcopy(dict(raw)),
        file=file,
    )


def _row_key_check(workload: WorkloadSpec, sweep: Mapping[str, Any]) -> expect_mod.KeyCheck | None:
    """Refuse an ``expect`` metric or ``where`` key that no row of this workload has (a typo caught before the run)."""
    columns = get_workload(workload.kind).columns
    if columns is None:
        return None
    known = {*columns, *sweep}

    def check(key: str) -> None:
        if "." in key and not sweep:
            return  # a swept key (dotted); one sweep point's scenario no longer lists the sweep
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(f"{key!r} is not a column of {workload.kind} rows; {hint}"
                              f"columns: {', '.join(sorted(known))}")

    return check


def _row_values(raw: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The values some row keys can take over every point of *raw*'s sweep (see
    :attr:`~mpisim.workloads.base.Workload.where_values`), swept keys included; {} when unknown."""
    try:
        sweep = _parse_sweep(raw.get("sweep"))
        base = {key: value for key, value in raw.items() if key != "sweep"}
        known: dict[str, list[Any]] | None = None
        for point in sweep_points(sweep) if sweep else [{}]:
            spec = _parse_workload(apply_overrides(base, point).get("workload"))
            hook = get_workload(spec.kind).where_values
            values = {key: list(found) for key, found in (hook(spec.params) if hook else {}).items()}
            for key, value in point.items():  # every row of a point carries its swept values
                if isinstance(value, Mapping | list):
                    continue
                values[key] = [expect_mod.parse_value(key, value)]
            # A key is known only if every point knows it; its values are all the points' together.
            known = values if known is None else {key: known[key] + values[key] for key in known if key in values}
    except (TypeError, ValueError):  # ConfigError among them
        return {}  # the scenario is validated elsewhere; here only what can be known is used
    return known or {}


def _check_where_values(expectations: Iterable[Expectation], raw: Mapping[str, Any],
                        written: Mapping[str, Any] | None) -> None:
    """Refuse a ``where`` (or ``equals``) value that no row of this scenario can have:
    ``where: {algorithm: rign}`` would select nothing, and fail only after the whole run.

    With overrides (*written* is the file's own scenario), a value either scenario can
    produce is accepted: ``--set workload.algorithm=ring`` on a file whose gates name another
    algorithm is an experiment, whose run says which gate selected no row.
    """
    expectations = list(expectations)
    if not any(exp.where or exp.check == "equals" for exp in expectations):
        return
    known = _row_values(raw)
    if written is not None:
        original = _row_values(written)
        known = {key: values + original[key] for key, values in known.items() if key in original}
    if not known:
        return
    for i, exp in enumerate(expectations):
        asked = [(f"where.{key}", key, value) for key, value in exp.where.items()]
        if exp.check == "equals":
            asked.append(("equals", exp.metric, exp.value))
        for path, key, value in asked:
            values = known.get(key)
            if values is None or any(expect_mod.same_value(v, value) for v in values):
                continue
            shown = list(dict.fromkeys(expect_mod.format_value(key, v) for v in values))
            close = difflib.get_close_matches(str(value), shown, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(f"no row of this scenario has {key}={expect_mod.format_value(key, value)}; {hint}"
                              f"its rows have {key}: {', '.join(shown)}", f"expect[{i}].{path}")


def _check_layout_fits(workload: WorkloadSpec, ranks: int) -> None:
    """Refuse, before the run, a hybrid-parallel layout or batch that these ranks cannot hold."""
    params = workload.params
    if workload.kind != "training" or not hasattr(params, "layout"):
        return
    try:
        layout = params.layout(ranks)
        params.micro_batches(layout.dp)
    except ConfigError as err:
        raise err.at("workload") from None


def _check_algorithms_fit(workload: WorkloadSpec, topology: TopologySpec) -> None:
    """Refuse, before the run, an algorithm whose requirements this topology does not meet: its
    rank count (power of two), the op (commutative) or its hardware (in-switch reduction)."""
    params, ranks = workload.params, topology.size
    if workload.kind == "collective":
        collective, names, path = params.collective, params.algorithms, "workload.algorithm"
        commutative = get_op(params.op).commutative
    elif workload.kind == "training" and params.sync not in (None, "parameter_server"):
        collective, names, path, commutative = "allreduce", (params.sync,), "workload.sync", True
    else:
        return
    for i, name in enumerate(names):
        if name == "auto":
            continue
        where = f"{path}[{i}]" if len(names) > 1 else path
        algo = registry.get(collective, name)
        problem = algo.why_not(ranks, commutative)
        if problem:
            raise ConfigError(f"{problem} (this topology has {ranks} ranks)", where)
        problem = algo.why_not_on(topology)
        if problem:
            raise ConfigError(problem, where)


_MPI_PARSERS = {
    "eager_limit": parse_size,
    "eager_limit_intra": parse_size,
    "eager_limit_inter": parse_size,
    "header_bytes": parse_size,
    "send_overhead": parse_time,
    "recv_overhead": parse_time,
    "copy_bandwidth": parse_bandwidth,
    "reduce_cost": parse_per_byte,
    "rendezvous_overhead": parse_time,
}


def _resolve_mpi(preset_mpi: Mapping[str, Any], scenario_mpi: Any, preset: str) -> MpiConfig:
    """Apply MpiConfig's defaults, then the preset's ``mpi:`` block, then the scenario's.

    Within one block, ``eager_limit`` sets both limits and a specific ``eager_limit_intra`` or
    ``eager_limit_inter`` next to it wins for its side.
    """
    values = asdict(DEFAULT_MPI)
    example = "{eager_limit: 64 KiB, send_overhead: 0.2 us}"
    blocks = [(preset_mpi, "topology.mpi", f" (in topology preset {preset!r})")]
    if scenario_mpi is not None:
        blocks.append((_mapping(scenario_mpi, "mpi", example), "mpi", ""))
    for block, path, origin in blocks:
        check_keys(block, _MPI_PARSERS, path)
        parsed = {}
        for key, value in block.items():
            try:
                parsed[key] = _MPI_PARSERS[key](value)
            except ConfigError as err:
                raise type(err)(err.message + origin, f"{path}.{key}") from None
        if parsed.get("copy_bandwidth") == 0:
            raise ConfigError("copy_bandwidth must be positive ('inf' makes copies free), got 0", f"{path}.copy_bandwidth")
        if too_slow(parsed.get("copy_bandwidth", math.inf), "copy_bandwidth"):
            raise ConfigError(too_slow(parsed["copy_bandwidth"], "copy_bandwidth"), f"{path}.copy_bandwidth")
        if "eager_limit" in parsed:
            both = parsed.pop("eager_limit")
            values["eager_limit_intra"] = values["eager_limit_inter"] = both
        values.update(parsed)
    return MpiConfig(**values)


def _parse_network(raw: Any) -> NetworkSpec:
    if raw is None:
        return NetworkSpec()
    if isinstance(raw, str):  # shorthand: network: analytic
        raw = {"model": raw}
    raw = _mapping(raw, "network", "{model: fairshare}")
    check_keys(raw, ("model", "ports"), "network")
    model = _choice(_get(raw, "model", DEFAULT_NETWORK_MODEL), model_names(), "network.model")
    ports = raw.get("ports")
    if ports is not None:
        try:
            ports = parse_whole(ports, maximum=1_000_000)
        except ConfigError as err:
            raise err.at("network.ports") from None
        if ports < 1:
            raise ConfigError(f"at least 1 message at a time, got {ports}", "network.ports")
    return NetworkSpec(model, ports)


def default_selector(device: str) -> str:
    """The ``auto`` rule set when a scenario names none: NCCL's tuning where the ranks are GPUs, MPICH's elsewhere.

    GPU teams run NCCL; a GPU cluster planned with MPICH's CPU rules would, for example, pick
    Rabenseifner for a 300M-parameter sync on 1024 H100s, which no training job does.
    """
    return "nccl" if device == "gpu" else DEFAULT_SELECTOR


def _parse_algorithms(raw: Any, ranks: int, device: str = "cpu", topology: TopologySpec | None = None) -> AlgorithmDefaults:
    if raw is None:
        return AlgorithmDefaults(selector=default_selector(device))
    raw = _mapping(raw, "algorithms", "{selector: mpich, allreduce: ring}")
    check_keys(raw, ("selector", *registry.COLLECTIVES), "algorithms")
    selector = _choice(_get(raw, "selector", default_selector(device)), SELECTORS, "algorithms.selector")
    chosen = {}
    for collective in registry.COLLECTIVES:  # registry order, so equal inputs give equal dicts
        if collective not in raw:
            continue
        name, path = raw[collective], f"algorithms.{collective}"
        if not isinstance(name, str):
            raise ConfigError(f"expected an algorithm name or auto, got {_short(name)}", path)
        if name != "auto":
            try:
                algo = registry.get(collective, name)
            except ConfigError as err:
                raise located(err, path) from None
            if "power_of_two" in algo.requires and ranks & (ranks - 1):
                raise ConfigError(
                    f"{collective} algorithm {name!r} needs a power-of-two number of ranks; the topology has {ranks}",
                    path,
                )
            problem = algo.why_not_on(topology) if topology is not None else ""
            if problem:
                raise ConfigError(problem, path)
        chosen[collective] = name
    return AlgorithmDefaults(selector, chosen)


def _parse_report(raw: Any) -> dict[str, Any]:
    """Validate ``report: {plots: [timeline, link_utilisation, ...]}``: known keys, known figure names."""
    report = dict(_mapping(raw, "report", "{plots: [timeline]}"))
    check_keys(report, ("plots",), "report")
    plots = report.get("plots")
    if plots is None:
        return report
    if not isinstance(plots, list):
        raise ConfigError(f"expected a list of figure names, got {_short(plots)}", "report.plots")
    for i, name in enumerate(plots):
        if name not in PLOT_NAMES:
            close = difflib.get_close_matches(str(name), sorted(PLOT_NAMES), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(f"unknown figure {_short(name)}; {hint}known: {', '.join(sorted(PLOT_NAMES))}",
                              f"report.plots[{i}]")
    return report


def _parse_trace(raw: Any, report: Mapping[str, Any]) -> TraceSpec:
    plots = report.get("plots") or []
    wants_links = isinstance(plots, list) and any(plot in LINK_PLOTS for plot in plots if isinstance(plot, str))
    defaults = replace(TraceSpec(), links=True) if wants_links else TraceSpec()
    if raw is None:
        return defaults
    raw = _mapping(raw, "trace", "{messages: true, spans: false, links: false}")
    check_keys(raw, ("messages", "spans", "links"), "trace")
    values = asdict(defaults)
    for key, value in raw.items():
        if not isinstance(value, bool):
            raise ConfigError(f"expected true or false, got {_short(value)}", f"trace.{key}")
        values[key] = value
    return TraceSpec(**values)


def _parse_limits(raw: Any) -> Limits:
    """``limits: {simulated_time: 10 s, events: 50000000, wall_time: 300 s}``, each optional."""
    if raw is None:
        return Limits()
    raw = _mapping(raw, "limits", "{simulated_time: 10 s, events: 50000000, wall_time: 300 s}")
    check_keys(raw, ("simulated_time", "events", "wall_time"), "limits")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if value is None:
            continue
        try:
            parsed = parse_count(value) if key == "events" else parse_time(value)
        except ConfigError as err:
            raise located(err, f"limits.{key}") from None
        if not parsed > 0:
            raise ConfigError(f"expected a limit greater than 0, got {_short(value)}", f"limits.{key}")
        values[key] = parsed
    return Limits(**values)


def _parse_workload(raw: Any) -> WorkloadSpec:
    if raw is None:
        raise ConfigError(f"this key is required, e.g. {_WORKLOAD_EXAMPLE}", "workload")
    raw = _mapping(raw, "workload", _WORKLOAD_EXAMPLE)
    kind = raw.get("kind")
    if kind is None:
        raise ConfigError("this key is required: collective, p2p, training or program", "workload.kind")
    try:
        workload = get_workload(kind) if isinstance(kind, str) else None
    except KeyError as err:
        raise ConfigError(str(err.args[0]), "workload.kind") from None
    if workload is None:
        raise ConfigError(f"expected a workload kind name, got {_short(kind)}", "workload.kind")
    rest = {key: value for key, value in raw.items() if key != "kind"}
    try:
        params = workload.parse(rest)
    except ConfigError as err:
        raise located(err, "workload") from None
    return WorkloadSpec(kind, params)


def _parse_sweep(raw: Any) -> dict[str, list[Any]]:
    if raw is None:
        return {}
    raw = _mapping(raw, "sweep", "{topology.nodes: [2, 4, 8]}")
    sweep = {}
    for key, values in raw.items():
        path = f"sweep.{key}"
        if not isinstance(key, str) or not key or any(not part for part in key.split(".")):
            raise ConfigError(f"expected a dotted key such as topology.nodes, got {_short(key)}", "sweep")
        head = key.split(".")[0]
        if head not in TOP_LEVEL_KEYS or head in ("sweep", "expect", "expect_failure"):
            allowed = [k for k in TOP_LEVEL_KEYS if k not in ("sweep", "expect", "expect_failure")]
            raise ConfigError(f"cannot sweep over {key!r}; a swept key starts with one of {', '.join(allowed)}", path)
        if not isinstance(values, list) or not values:
            raise ConfigError(f"expected a non-empty list of values, got {_short(values)}", path)
        sweep[key] = copy.deepcopy(values)
    return sweep


def _check_sweep_points(raw: Mapping[str, Any], scenario: Scenario, file: str | None) -> None:
    """Validate every grid point now, so a bad value fails before any point runs."""
    base = {key: value for key, value in raw.items() if key != "sweep"}
    for point in sweep_points(scenario.sweep):
        try:
            _build(apply_overrides(base, point), file)
        except ConfigError as err:
            where = ", ".join(f"{key}={value}" for key, value in point.items())
            raise ConfigError(f"{err.message} (in sweep point {where})", err.path) from None


def point_raw(scenario: Scenario, point: Mapping[str, Any]) -> dict[str, Any]:
    """Return the raw scenario of one sweep point: the raw dict minus ``sweep``, plus the overrides."""
    base = {key: value for key, value in scenario.raw.items() if key != "sweep"}
    return apply_overrides(base, point)


# --- dump ---------------------------------------------------------------------------------------


def _dump_mpi(mpi: MpiConfig) -> dict[str, Any]:
    values: dict[str, Any] = asdict(mpi)
    if values["eager_limit_intra"] == values["eager_limit_inter"]:
        # One key, so that a later override of eager_limit (a sweep, --set) still applies to both.
        values = {"eager_limit": values.pop("eager_limit_intra"), **values}
        del values["eager_limit_inter"]
    if values["copy_bandwidth"] == float("inf"):
        values["copy_bandwidth"] = "inf"
    if not values["rendezvous_overhead"]:
        del values["rendezvous_overhead"]  # absent means none: resolved scenarios stay as they were
    return values


def _dump_expectation(exp: Expectation) -> dict[str, Any]:
    if exp.check == "verified":
        out: dict[str, Any] = {"verified": True}
        if exp.where:
            out["where"] = dict(exp.where)
        return out
    out = {"metric": exp.metric}
    if exp.where:
        out["where"] = dict(exp.where)
    if exp.check in expect_mod.GATES:
        out.update({"baseline": exp.value, exp.check: exp.rel})
        return out
    out[exp.check] = exp.value
    if exp.rel is not None:
        out["rel"] = exp.rel
    if exp.abs is not None:
        out["abs"] = exp.abs
    return out


def dump(scenario: Scenario) -> dict[str, Any]:
    """Return the resolved scenario as plain data (SI numbers), loadable again by :func:`load`."""
    workload = get_workload(scenario.workload.kind)
    params = {key: value for key, value in workload.dump(scenario.workload.params).items() if key != "kind"}
    out: dict[str, Any] = {
        "units": "SI",
        "name": scenario.name,
        "description": scenario.description,
        "seed": scenario.seed,
        "topology": scenario.topology.to_dict(),
        "network": {"model": scenario.network.model,
                    **({"ports": scenario.network.ports} if scenario.network.ports is not None else {})},
        "mpi": _dump_mpi(scenario.mpi),
        "algorithms": {"selector": scenario.algorithms.selector, **scenario.algorithms.per_collective},
        "payload": scenario.payload,
        **({"fidelity": scenario.fidelity} if scenario.fidelity != DEFAULT_FIDELITY else {}),
        "trace": asdict(scenario.trace),
        "workload": {"kind": scenario.workload.kind, **params},
    }
    if scenario.sweep:
        out["sweep"] = copy.deepcopy(scenario.sweep)
    if scenario.expect:
        out["expect"] = [_dump_expectation(exp) for exp in scenario.expect]
    if scenario.expect_failure:
        out["expect_failure"] = scenario.expect_failure
    out["report"] = copy.deepcopy(scenario.report)
    if scenario.limits.any:
        out["limits"] = {key: value for key, value in asdict(scenario.limits).items() if value is not None}
    return out
