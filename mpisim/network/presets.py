"""Cluster presets: named YAML topologies, each number citing where it comes from.

A preset is a file ``topologies/<name>.yaml`` holding the topology fields of
:meth:`TopologySpec.from_dict <mpisim.network.topology.TopologySpec.from_dict>` with unit
strings, plus two optional keys:

* ``description`` -- one line for ``mpisim list topologies``;
* ``mpi`` -- defaults for the scenario's ``mpi:`` block that belong to this hardware (eager
  limits of the MPI library usually run on it, per-message overheads). They are passed
  through raw; the scenario layer merges them under its own ``mpi:`` block and validates them.

A scenario names a topology in one of three ways, all handled by :func:`resolve_topology`::

    topology: ib-hdr                                   # a preset
    topology: {preset: ib-hdr, nodes: 16, inter: {bandwidth: 100 Gbps}}   # preset + overrides
    topology: {nodes: 4, inter: {kind: star, bandwidth: 10 Gbps, latency: 20 us}}  # inline

Overrides are deep-merged over the preset: a nested mapping replaces only the keys it names,
so ``inter: {bandwidth: 100 Gbps}`` keeps the preset's latency and efficiency.

The preset directory is ``topologies/`` next to the package in a source checkout, or the copy
that the wheel installs inside the package (``mpisim/_data/topologies``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from mpisim.engine.reader import Text
from mpisim.errors import ConfigError
from mpisim.network.topology import TopologySpec, build_topology, located

_PRESET_NAME = Text("expected a preset name, got {value!r}")

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def preset_dir() -> Path | None:
    """Return the directory holding the preset files, or None if there is none."""
    for candidate in (_PACKAGE_DIR.parent / "topologies", _PACKAGE_DIR / "_data" / "topologies"):
        if candidate.is_dir():
            return candidate
    return None


def preset_names() -> list[str]:
    """Return the names of all presets, sorted."""
    directory = preset_dir()
    if directory is None:
        return []
    return sorted(path.stem for path in directory.glob("*.yaml"))


def is_preset_file(name: str) -> bool:
    """Return True if *name* names a preset file (``mycluster.yaml``) rather than a built-in preset."""
    return name.endswith((".yaml", ".yml"))


def preset_stem(name: str) -> str:
    """Return the preset's name as results show it: ``mycluster`` for ``path/to/mycluster.yaml``."""
    return Path(name).stem if is_preset_file(name) else name


def load_preset(name: str) -> dict[str, Any]:
    """Return preset *name* as its raw mapping (unit strings, ``description``, ``mpi``).

    *name* is a built-in preset (``ib-hdr``) or the path of a preset file of the same form
    ending in ``.yaml`` (``mycluster.yaml``, as ``mpisim calibrate`` writes), relative to the
    working directory. Each call returns a fresh copy, so callers may modify it.
    Raises ConfigError if there is no such preset or its file is not a YAML mapping.
    """
    if is_preset_file(name):
        path = Path(name)
        if not path.is_file():
            raise ConfigError(f"no topology preset file {name!r} (a path ending in .yaml names a file)")
    else:
        names = preset_names()
        if name not in names:
            raise ConfigError(f"unknown topology preset {name!r}; known: {', '.join(names) or '(none)'}")
        path = preset_dir() / f"{name}.yaml"  # type: ignore[operator]  # preset_names() found it
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ConfigError(f"topology preset {name!r} is not valid YAML: {err}".replace("\n", " ")) from None
    if not isinstance(raw, dict):
        raise ConfigError(f"topology preset {name!r} must be a YAML mapping, got {type(raw).__name__}")
    return raw


def list_presets() -> list[tuple[str, str]]:
    """Return ``(name, one-line summary)`` for every preset, sorted by name.

    The summary is the preset's ``description``, or, when it has none, the built topology's
    :meth:`~mpisim.network.topology.Topology.summary`.
    """
    out = []
    for name in preset_names():
        spec, _ = resolve_topology(name)
        out.append((name, spec.description or build_topology(spec).summary()))
    return out


def presets_with_in_switch_reduction() -> list[str]:
    """Return the presets whose NVSwitch reduces in the switch (``intra.in_switch_reduction``: NVLS), sorted.

    Read from the preset files, so a new preset with the flag is listed without a code change.
    """
    names = []
    for name in preset_names():
        try:
            intra = load_preset(name).get("intra")
        except ConfigError:
            continue
        if isinstance(intra, Mapping) and intra.get("in_switch_reduction") is True:
            names.append(name)
    return names


def resolve_topology(raw: str | Mapping[str, Any]) -> tuple[TopologySpec, dict[str, Any]]:
    """Turn a scenario's ``topology`` value into a validated spec and the preset's MPI defaults.

    *raw* is a preset name, a mapping ``{preset: NAME, <overrides>}``, or an inline topology
    mapping. Returns the spec and the preset's raw ``mpi`` mapping (empty for inline
    topologies and presets without one), which the scenario layer merges into its ``mpi:``.

    Raises ConfigError (paths relative to the ``topology`` value, e.g. ``inter.bandwidth`` or
    ``preset``) for unknown presets and invalid fields, TopologyError for impossible clusters.
    """
    if isinstance(raw, str):
        name, merged = raw, load_preset(raw)
    elif isinstance(raw, Mapping):
        if "preset" in raw:
            name = _PRESET_NAME.read(raw["preset"], "preset")
            try:
                base = load_preset(name)
            except ConfigError as err:
                raise located(err, "preset") from None
            overrides = {key: value for key, value in raw.items() if key != "preset"}
            merged = deep_merge(base, overrides)
        else:
            name, merged = "inline", copy.deepcopy(dict(raw))
            if "mpi" in merged:
                raise ConfigError(
                    "mpi settings belong in the scenario's mpi: block, not in the topology", "mpi"
                )
    else:
        raise ConfigError(f"expected a preset name or a topology mapping, got {raw!r}")
    mpi = merged.pop("mpi", None) or {}
    if not isinstance(mpi, Mapping):
        raise ConfigError(f"expected a mapping of MPI settings, got {mpi!r}", "mpi")
    return TopologySpec.from_dict(merged, name=preset_stem(name)), dict(mpi)


def deep_merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of *base* with *overrides* applied; nested mappings merge key by key."""
    out = copy.deepcopy(dict(base))
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out
