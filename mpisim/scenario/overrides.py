"""``--set`` overrides and sweep points: dotted keys applied to the raw scenario before it is read.

Overrides (``mpisim run s.yaml --set topology.nodes=16``) are applied to the raw dict before
validation, so an override is checked exactly like the file: values are read as YAML scalars or
flow collections (``16`` is a number, ``8 KiB`` a string, ``[1, 2]`` a list), never evaluated
as code. Missing intermediate mappings are created, and a topology given as a preset name
turns into ``{preset: NAME}`` so that ``--set topology.nodes=16`` keeps the preset. A sweep
point is the same thing: the raw scenario minus ``sweep``, plus one value per swept key.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from mpisim.errors import ConfigError
from mpisim.scenario.yamlio import read_yaml

if TYPE_CHECKING:
    from mpisim.scenario.model import Scenario

__all__ = ["apply_overrides", "parse_set", "point_raw", "replaced_sweep_axes"]



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




def point_raw(scenario: Scenario, point: Mapping[str, Any]) -> dict[str, Any]:
    """Return the raw scenario of one sweep point: the raw dict minus ``sweep``, plus the overrides."""
    base = {key: value for key, value in scenario.raw.items() if key != "sweep"}
    return apply_overrides(base, point)


