"""What a run's numbers depend on, beyond the scenario: a fingerprint, and what differs between two runs.

A result is a function of the resolved scenario and of the code and data that turn it into
numbers. The resolved scenario already travels with every result (``scenario``, SI units,
defaults filled in); :func:`fingerprint` adds the rest:

* ``mpisim_version`` -- the package version;
* ``source`` -- a digest of the package's Python files, so two runs of one version built from
  different code are told apart;
* ``presets`` -- a digest of each topology preset file the scenario reads (its sweep's too), so
  an edited preset shows even where the scenario overrides nothing;
* ``algorithms`` -- a digest of the algorithm registry: every (collective, algorithm), what it
  requires, and the code of its generator.

:func:`input_changes` compares two (scenario, fingerprint) pairs and writes one line per input
that differs, the way a person would say it: ``topology.inter.bandwidth: 50 GB/s -> 45 GB/s
(-10%)``, ``workload.dtype: float32 -> float16``, ``preset dgx-h100: file changed``. A failing
gate quotes these lines, so a CI log says what changed, not only that a time moved.

Digests are SHA-256, shortened to 16 hex digits: enough to tell files apart, short to read.
"""

from __future__ import annotations

import hashlib
import inspect
import math
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from mpisim import __version__
from mpisim.collectives import registry  # importing the package registers every algorithm
from mpisim.engine.units import pretty_bandwidth, pretty_size, pretty_time
from mpisim.network import presets as preset_files

__all__ = ["IGNORED_KEYS", "algorithm_digests", "fingerprint", "flatten", "input_changes"]

_PACKAGE = Path(__file__).resolve().parents[1]

#: Top-level scenario keys that do not change a result's numbers: a baseline made under another
#: name, with other plots or other expectations, measures the same thing.
IGNORED_KEYS = frozenset({"units", "name", "description", "expect", "expect_failure", "report", "trace"})


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


@cache
def source_digest() -> str:
    """Digest of every ``.py`` file of the package, by relative path, in path order."""
    h = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        h.update(path.relative_to(_PACKAGE).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


@cache
def algorithm_digests() -> dict[str, str]:
    """``{"allreduce/ring": digest}`` for every registered algorithm: its requirements and code."""
    out = {}
    for algo in registry.available():
        try:
            code = inspect.getsource(algo.func)
        except (OSError, TypeError):  # built without sources: the qualified name is all there is
            code = f"{algo.func.__module__}.{algo.func.__qualname__}"
        out[f"{algo.collective}/{algo.name}"] = _digest(f"{sorted(algo.requires)}\n{code}".encode())
    return out


def _presets_read(scenario: Mapping[str, Any]) -> list[str]:
    """The preset names a resolved scenario (and each point of its sweep) reads."""
    names = {scenario.get("topology", {}).get("name")}
    for key, values in (scenario.get("sweep") or {}).items():
        if key in ("topology", "topology.preset"):
            names.update(v if isinstance(v, str) else (v or {}).get("preset") for v in values)
    known = set(preset_files.preset_names())
    return sorted(name for name in names if isinstance(name, str) and name in known)


def fingerprint(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """Return the fingerprint of everything besides *scenario* (a resolved, dumped scenario) that
    its numbers depend on (see the module docstring)."""
    directory = preset_files.preset_dir()  # read through the module: the directory the loader reads
    presets = {name: _digest((directory / f"{name}.yaml").read_bytes())  # type: ignore[operator]
               for name in _presets_read(scenario)}
    registry = "\n".join(f"{key} {value}" for key, value in sorted(algorithm_digests().items()))
    return {
        "mpisim_version": __version__,
        "source": source_digest(),
        "presets": presets,
        "algorithms": _digest(registry.encode()),
    }


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """``{"topology": {"inter": {"bandwidth": 5e10}}}`` -> ``{"topology.inter.bandwidth": 5e10}``.

    Lists stay whole values (``workload.sizes``): a list is one input.
    """
    if isinstance(tree, Mapping):
        out: dict[str, Any] = {}
        for key, value in tree.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: tree}


def _shown(key: str, value: Any) -> str:
    """Write *value* of dotted input *key* with its unit, judged from the key's last part."""
    if isinstance(value, list):
        return "[" + ", ".join(_shown(key, v) for v in value) + "]"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "null" if value is None else str(value)
    last = key.rsplit(".", 1)[-1]
    if "bandwidth" in last:
        return pretty_bandwidth(value)
    if "latency" in last or "overhead" in last or last in ("compute", "compute_s"):
        return pretty_time(value)
    if last in ("sizes", "eager_limit", "eager_limit_intra", "eager_limit_inter", "bucket_cap", "header_bytes"):
        return pretty_size(value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def _signed_change(old: Any, new: Any) -> str:
    numbers = (int, float)
    if (isinstance(old, numbers) and isinstance(new, numbers) and not isinstance(old, bool)
            and not isinstance(new, bool) and old and math.isfinite(old) and math.isfinite(new)):
        return f" ({(new - old) / abs(old) * 100:+.3g}%)"
    return ""


def input_changes(old_scenario: Mapping[str, Any], new_scenario: Mapping[str, Any],
                  old_fingerprint: Mapping[str, Any] | None = None,
                  new_fingerprint: Mapping[str, Any] | None = None,
                  old_algorithms: Mapping[str, str] | None = None) -> list[str]:
    """One line per input that differs from *old* to *new*, scenario keys first (in key order).

    *old_algorithms*, if given, is the old run's :func:`algorithm_digests`; the lines then name
    the algorithms whose code changed instead of saying only that the registry did.
    """
    def relevant(scenario: Mapping[str, Any]) -> dict[str, Any]:
        return flatten({k: v for k, v in scenario.items() if k not in IGNORED_KEYS})

    old, new = relevant(old_scenario), relevant(new_scenario)
    lines = []
    for key in dict.fromkeys([*old, *new]):
        if key not in new:
            lines.append(f"{key}: {_shown(key, old[key])} -> (not set)")
        elif key not in old:
            lines.append(f"{key}: (not set) -> {_shown(key, new[key])}")
        elif old[key] != new[key]:
            lines.append(f"{key}: {_shown(key, old[key])} -> {_shown(key, new[key])}"
                         f"{_signed_change(old[key], new[key])}")
    if old_fingerprint is not None and new_fingerprint is not None:
        lines.extend(_fingerprint_changes(old_fingerprint, new_fingerprint, old_algorithms))
    return lines


def _fingerprint_changes(old: Mapping[str, Any], new: Mapping[str, Any],
                         old_algorithms: Mapping[str, str] | None) -> Iterable[str]:
    if old.get("mpisim_version") != new.get("mpisim_version"):
        yield f"mpisim version: {old.get('mpisim_version')} -> {new.get('mpisim_version')}"
    old_presets, new_presets = old.get("presets") or {}, new.get("presets") or {}
    for name in sorted(set(old_presets) & set(new_presets)):
        if old_presets[name] != new_presets[name]:
            yield f"preset {name}: its file changed ({old_presets[name]} -> {new_presets[name]})"
    if old.get("algorithms") != new.get("algorithms"):
        if old_algorithms:
            now = algorithm_digests()
            changed = sorted(k for k in set(old_algorithms) | set(now) if old_algorithms.get(k) != now.get(k))
            shown = ", ".join(changed[:6]) + (", ..." if len(changed) > 6 else "")
            yield f"algorithm registry: {len(changed)} algorithm(s) added, removed or changed ({shown})"
        else:
            yield "algorithm registry: changed"
    if old.get("source") != new.get("source"):
        yield f"mpisim code: changed ({old.get('source')} -> {new.get('source')})"
