"""Scenario loading: YAML -> raw dict -> validated, resolved :class:`~mpisim.scenario.model.Scenario`.

Input is read through one schema (:mod:`mpisim.scenario.schema`): every block of the file is
declared once with the reader of :mod:`mpisim.engine.reader`, next to the concept it configures,
and every problem becomes one :class:`~mpisim.errors.ConfigError` whose ``str()`` is the line
the CLI prints::

    bad.yaml: topology.inter.bandwidth: '10 Gbsp' is not a bandwidth (e.g. 100 Gbps, 12.5 GB/s)
    bad.yaml: line 7: invalid YAML: mapping values are not allowed here (column 12)
    bad.yaml: mpi.eager_limt: unknown key 'eager_limt' (did you mean 'eager_limit'?); allowed keys: ...

This module is the entry (:func:`load`, :func:`load_file`, :func:`loads`, :func:`load_dict`) and
the checks that need the whole scenario: an algorithm this topology cannot run, a training
layout that does not fit, an ``expect`` key or ``where`` value no row can have, every sweep
point. Reading YAML is :mod:`~mpisim.scenario.yamlio`, ``--set`` overrides
:mod:`~mpisim.scenario.overrides`, writing the resolved form back :mod:`~mpisim.scenario.dump`
(``load(dump(s)) == s``); their names are importable from here as before.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import mpisim.collectives
import mpisim.workloads  # noqa: F401  (importing registers the workload kinds)
from mpisim.collectives import registry
from mpisim.engine.reader import located
from mpisim.engine.units import si_numbers
from mpisim.errors import ConfigError
from mpisim.mpi.ops import get_op
from mpisim.network.presets import resolve_topology
from mpisim.network.topology import TopologySpec
from mpisim.scenario import blocks
from mpisim.scenario import expect as expect_mod
from mpisim.scenario.dump import dump
from mpisim.scenario.model import (
    DEFAULT_FIDELITY,
    DEFAULT_NAME,
    DEFAULT_PAYLOAD,
    DEFAULT_SEED,
    Expectation,
    Scenario,
    WorkloadSpec,
    sweep_points,
)
from mpisim.scenario.overrides import apply_overrides, parse_set, point_raw, replaced_sweep_axes
from mpisim.scenario.schema import SCENARIO, parse_workload
from mpisim.scenario.yamlio import read_file, read_scenario_file, read_yaml
from mpisim.workloads.base import get_workload

__all__ = [
    "apply_overrides", "dump", "load", "load_dict", "load_file", "loads", "parse_set",
    "point_raw", "read_scenario_file", "read_yaml", "replaced_sweep_axes",
]


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
    raw = read_file(Path(file), file)
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
            SCENARIO.mapping(raw)  # raises: says which keys a scenario holds
        written = raw
        overrides = list(overrides.items()) if isinstance(overrides, Mapping) else list(overrides)
        raw = apply_overrides(raw, overrides)
        # A resolved scenario (mpisim check, --json, results.json) says `units: SI`: its bare
        # numbers are seconds, bytes and bytes/s. Anywhere else a bare number is an error.
        units = raw.get("units")
        if units is not None:
            blocks.UNITS.read(units, "units")
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


def _get(raw: Mapping[str, Any], key: str, default: Any) -> Any:
    """Return ``raw[key]``, or *default* when the key is missing or null (``--set seed=null``)."""
    value = raw.get(key)
    return default if value is None else value


def _build(raw: Mapping[str, Any], file: str | None) -> Scenario:
    """Read every key of *raw* through its spec in :data:`~mpisim.scenario.schema.SCENARIO`,
    the topology first (the ``mpi`` defaults and the algorithms' requirements come from it)."""
    SCENARIO.mapping(raw)
    fields = SCENARIO.fields
    name = fields["name"].read(_get(raw, "name", Path(file).stem if file else DEFAULT_NAME), "name")
    description = fields["description"].read(_get(raw, "description", ""), "description")
    seed = fields["seed"].read(_get(raw, "seed", DEFAULT_SEED), "seed")

    if raw.get("topology") is None:
        raise ConfigError(fields["topology"].required or "", "topology")
    try:
        topology, preset_mpi = resolve_topology(raw["topology"])
    except ConfigError as err:
        raise located(err, "topology") from None
    mpi = blocks.parse_mpi(preset_mpi, raw.get("mpi"), topology.name)
    network = blocks.parse_network(raw.get("network"))
    algorithms = blocks.parse_algorithms(raw.get("algorithms"), topology.size, topology.device, topology)
    payload = fields["payload"].read(_get(raw, "payload", DEFAULT_PAYLOAD), "payload")
    fidelity = fields["fidelity"].read(_get(raw, "fidelity", DEFAULT_FIDELITY), "fidelity")
    report = blocks.parse_report(_get(raw, "report", {}))
    trace = blocks.parse_trace(raw.get("trace"), report)
    limits = blocks.parse_limits(raw.get("limits"))
    price = blocks.parse_price(raw.get("price"))
    workload = parse_workload(raw.get("workload"))
    sweep = blocks.parse_sweep(raw.get("sweep"))
    try:
        expectations = expect_mod.parse_expectations(raw.get("expect"), _row_key_check(workload, sweep))
    except ConfigError as err:
        raise ConfigError(err.message, f"expect{err.path}" if err.path.startswith("[") else "expect", err.file) from None
    expect_failure = raw.get("expect_failure")
    if expect_failure is not None:
        expect_failure = fields["expect_failure"].read(expect_failure, "expect_failure")
    check = fields["check"].read(_get(raw, "check", False), "check")
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
        check=check,
        report=report,
        limits=limits,
        price_per_gpu_hour=price,
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
        sweep = blocks.parse_sweep(raw.get("sweep"))
        base = {key: value for key, value in raw.items() if key != "sweep"}
        known: dict[str, list[Any]] | None = None
        for point in sweep_points(sweep) if sweep else [{}]:
            spec = parse_workload(apply_overrides(base, point).get("workload"))
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
        params.micro_batches(layout.replicas)
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




def _check_sweep_points(raw: Mapping[str, Any], scenario: Scenario, file: str | None) -> None:
    """Validate every grid point now, so a bad value fails before any point runs."""
    base = {key: value for key, value in raw.items() if key != "sweep"}
    for point in sweep_points(scenario.sweep):
        try:
            _build(apply_overrides(base, point), file)
        except ConfigError as err:
            where = ", ".join(f"{key}={value}" for key, value in point.items())
            raise ConfigError(f"{err.message} (in sweep point {where})", err.path) from None
