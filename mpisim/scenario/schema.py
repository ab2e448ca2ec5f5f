"""The scenario file's one schema: every block's reader, assembled, and the JSON Schema made from it.

Each block is declared once with :mod:`mpisim.engine.reader` where its concept lives:

=================  ==============================================
``topology``       :data:`mpisim.network.topology.TOPOLOGY` (fabrics, protocols) and presets
``network`` ...    :mod:`mpisim.scenario.blocks` (network, mpi, algorithms, report, trace,
                   limits, sweep, and the top-level scalars)
``workload``       each kind's ``schema`` (:mod:`mpisim.workloads`), chosen by ``kind``
``expect``         :data:`mpisim.scenario.expect.EXPECT`
=================  ==============================================

:data:`SCENARIO` is the top-level block: :mod:`mpisim.scenario.load` reads every key through
its spec (in the order the keys depend on each other: the topology first, since the ``mpi``
defaults and the algorithms' requirements come from it), and :func:`json_schema` publishes
the same declarations as JSON Schema, draft 2020-12, which is what ``mpisim schema`` prints.
An editor that knows the schema completes keys and flags typos as you write; with the YAML
language server, put this line at the top of a scenario file::

    # yaml-language-server: $schema=scenario.schema.json

The JSON Schema checks shapes, names and required keys; what needs the whole scenario (an
algorithm that needs a power-of-two rank count, a layout that does not fit the topology) is
left to ``mpisim check``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mpisim import __version__
from mpisim.engine.reader import Block, Custom, Spec, located, short
from mpisim.errors import ConfigError
from mpisim.network.presets import preset_names
from mpisim.network.topology import TOPOLOGY
from mpisim.scenario import blocks
from mpisim.scenario.expect import EXPECT
from mpisim.scenario.model import TOP_LEVEL_KEYS, WorkloadSpec
from mpisim.workloads.base import get_workload, workloads

__all__ = ["SCENARIO", "json_schema", "parse_workload", "render"]

WORKLOAD_EXAMPLE = "{kind: collective, collective: allreduce, sizes: [1 MiB]}"


# --- topology: a preset name, a preset with overrides, or inline --------------------------------


def _optional(rule: Any) -> Any:
    """*rule* without its ``required`` lists: a preset's overrides may give any part of a block."""
    if isinstance(rule, dict):
        return {key: _optional(value) for key, value in rule.items() if key != "required"}
    if isinstance(rule, list):
        return [_optional(value) for value in rule]
    return rule


def _topology_rule() -> dict[str, Any]:
    inline = TOPOLOGY.json()
    preset = {"type": "string", "description": "A preset name (mpisim list topologies) or a preset file (.yaml).",
              "examples": preset_names()}
    with_preset = _optional(inline)
    with_preset["properties"] = {"preset": preset, **with_preset["properties"], "mpi": blocks.MPI.json()}
    with_preset["required"] = ["preset"]
    return {"anyOf": [preset, with_preset, inline]}


TOPOLOGY_FIELD = Custom(lambda value, path: value, _topology_rule,
                        required="this key is required: a preset name (see 'mpisim list topologies') or a mapping",
                        description="The cluster: a preset name, {preset: NAME, <overrides>}, or an inline topology.")


# --- workload: a kind, then that kind's block ---------------------------------------------------


def parse_workload(raw: Any) -> WorkloadSpec:
    """Read the ``workload:`` block: its ``kind``, then the rest through that kind's parser."""
    if raw is None:
        raise ConfigError(f"this key is required, e.g. {WORKLOAD_EXAMPLE}", "workload")
    if not isinstance(raw, Mapping):
        raise ConfigError(f"expected a mapping such as {WORKLOAD_EXAMPLE}, got {short(raw)}", "workload")
    kind = raw.get("kind")
    if kind is None:
        raise ConfigError("this key is required: collective, p2p, training or program", "workload.kind")
    try:
        workload = get_workload(kind) if isinstance(kind, str) else None
    except KeyError as err:
        raise ConfigError(str(err.args[0]), "workload.kind") from None
    if workload is None:
        raise ConfigError(f"expected a workload kind name, got {short(kind)}", "workload.kind")
    try:
        params = workload.parse({key: value for key, value in raw.items() if key != "kind"})
    except ConfigError as err:
        raise located(err, "workload") from None
    return WorkloadSpec(kind, params)


def _workload_rule() -> dict[str, Any]:
    kinds = workloads()
    cases = []
    for workload in kinds:
        shape = workload.schema.json() if workload.schema is not None else {"type": "object"}
        shape.setdefault("properties", {})["kind"] = {"const": workload.kind}
        cases.append({"if": {"properties": {"kind": {"const": workload.kind}}, "required": ["kind"]}, "then": shape})
    return {
        "type": "object",
        "required": ["kind"],
        "properties": {"kind": {"enum": [workload.kind for workload in kinds],
                                "description": "; ".join(f"{w.kind}: {w.summary}" for w in kinds)}},
        "allOf": cases,
    }


WORKLOAD_FIELD = Custom(lambda value, path: parse_workload(value), _workload_rule,
                        required=f"this key is required, e.g. {WORKLOAD_EXAMPLE}",
                        description="What every rank runs; kind picks the block's keys.")


# --- the scenario -------------------------------------------------------------------------------

_FIELDS: dict[str, Spec] = {
    "name": blocks.NAME,
    "description": blocks.DESCRIPTION,
    "seed": blocks.SEED,
    "topology": TOPOLOGY_FIELD,
    "network": blocks.NETWORK,
    "mpi": blocks.MPI,
    "algorithms": blocks.ALGORITHMS,
    "fidelity": blocks.FIDELITY,
    "payload": blocks.PAYLOAD,
    "trace": blocks.TRACE,
    "limits": blocks.LIMITS,
    "workload": WORKLOAD_FIELD,
    "price": blocks.PRICE,
    "sweep": blocks.SWEEP,
    "expect": EXPECT,
    "expect_failure": blocks.EXPECT_FAILURE,
    "check": blocks.CHECK,
    "report": blocks.REPORT,
    "units": blocks.UNITS,
}
assert tuple(_FIELDS) == TOP_LEVEL_KEYS, "the schema lists the scenario's keys in model.TOP_LEVEL_KEYS order"

#: The whole scenario file. Its keys are checked (with did-you-mean) before any block is read.
SCENARIO = Block(_FIELDS, expected=f"a mapping of scenario keys ({', '.join(TOP_LEVEL_KEYS)})")


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of scenario files, made from :data:`SCENARIO`."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "mpisim scenario",
        "description": f"A scenario file of mpisim {__version__}: a cluster, a network model and a workload "
                       "(see the README's scenario format). Sizes, times and rates are strings with units.",
        **SCENARIO.json(),
    }


def render() -> str:
    """The JSON Schema as text, as ``mpisim schema`` prints it (sorted keys: the same bytes every run)."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
