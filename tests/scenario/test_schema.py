"""The one schema: the reader that validates scenarios and the JSON Schema made from it agree.

``mpisim schema`` publishes the JSON Schema (draft 2020-12) so editors check scenario files as
they are written. These tests hold it to the loader: every shipped scenario (and its resolved
form) validates; the invalid cases it can judge from shapes and names alone it refuses, at the
field the loader names; and a misspelt key in any block is refused by both.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
from pathlib import Path

import jsonschema
import pytest

import tests.scenario.fake_workloads  # noqa: F401  (registers fake_pingpong, which test cases use)
from mpisim.cli import main
from mpisim.engine.reader import Block, Choice, ListOf, Unit, Whole, join
from mpisim.engine.units import parse_size, parse_whole
from mpisim.errors import ConfigError
from mpisim.scenario.load import dump, load_dict, load_file
from mpisim.scenario.schema import json_schema
from mpisim.scenario.yamlio import read_yaml

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "scenarios").glob("*.yaml")) + sorted((ROOT / "scenarios" / "validation").glob("*.yaml"))
INVALID = sorted((ROOT / "tests" / "scenario_cases" / "invalid").glob("*.yaml"))
VALIDATOR = jsonschema.Draft202012Validator(json_schema())

#: Invalid cases whose fault is a shape, a name or a missing key: the JSON Schema alone refuses them.
SHAPE_ERRORS = [
    "bad-name", "bad-payload", "bad-seed", "empty", "expect-failure-unknown", "expect-two-checks",
    "expect-unknown-key", "expect-verified-false", "missing-kind", "missing-topology", "missing-workload",
    "mpi-in-inline-topology", "mpi-typo", "report-not-mapping", "sweep-not-list", "sweep-over-expect",
    "top-level-list", "trace-not-bool", "unknown-algorithm", "unknown-collective", "unknown-fabric", "unknown-kind",
    "unknown-network-model", "unknown-selector", "unknown-top-level-key",
]


def schema_errors(raw: object) -> list[jsonschema.ValidationError]:
    return list(VALIDATOR.iter_errors(raw))


def dotted(path: str) -> str:
    """The loader's path in the JSON Schema's spelling: ``expect[0].rel`` -> ``expect.0.rel``."""
    return re.sub(r"\[(\d+)\]", r".\1", path)


def test_the_published_schema_is_valid_draft_2020_12():
    schema = json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_mpisim_schema_prints_it():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["schema"]) == 0
    assert json.loads(out.getvalue()) == json.loads(json.dumps(json_schema()))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_shipped_scenario_validates(path):
    raw = read_yaml(path.read_text(), str(path))
    assert not schema_errors(raw), [e.message for e in schema_errors(raw)][:3]
    # Its resolved form (mpisim check, results.json) is a scenario too.
    resolved = dump(load_file(path))
    assert not schema_errors(resolved), [e.message for e in schema_errors(resolved)][:3]


def test_shipped_scenarios_are_found():
    assert len(SHIPPED) >= 20 and any(p.parent.name == "validation" for p in SHIPPED)


@pytest.mark.parametrize("name", SHAPE_ERRORS)
def test_shape_errors_are_refused_by_the_schema_too(name):
    path = ROOT / "tests" / "scenario_cases" / "invalid" / f"{name}.yaml"
    assert schema_errors(read_yaml(path.read_text(), str(path)))


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_where_the_schema_refuses_a_case_it_points_where_the_loader_does(path):
    try:
        raw = read_yaml(path.read_text(), str(path))
    except ConfigError:
        return  # broken YAML: nothing for a schema to see
    errors = schema_errors(raw)
    with pytest.raises(ConfigError) as info:
        load_file(path)
    if not errors:
        return  # a value's unit or the whole scenario is wrong: the loader's business alone
    loader = dotted(info.value.path)
    places = {".".join(str(part) for part in e.absolute_path) for e in errors}
    assert any(loader == place or loader.startswith(f"{place}.") or not place for place in places), (loader, places)


BASE = {
    "topology": {"nodes": 2, "inter": {"kind": "star", "bandwidth": "1 GB/s", "latency": "1 us"}},
    "mpi": {"eager_limit": "64 KiB"},
    "network": {"model": "fairshare"},
    "algorithms": {"selector": "mpich"},
    "trace": {"messages": True},
    "limits": {"events": 1000000},
    "report": {"plots": []},
    "workload": {"kind": "collective", "collective": "allreduce", "sizes": ["1 KiB"]},
    "expect": [{"metric": "time_s", "max": "1 s"}],
}
#: A path to a mapping of BASE (or of a workload put in place of BASE's), and that workload.
BLOCKS = [
    ((), None), (("topology",), None), (("topology", "inter"), None), (("mpi",), None), (("network",), None),
    (("algorithms",), None), (("trace",), None), (("limits",), None), (("report",), None), (("workload",), None),
    (("expect", 0), None),
    (("workload",), {"kind": "p2p", "sizes": ["1 KiB"]}),
    (("workload",), {"kind": "program", "program": "x.py:main"}),
    (("workload",), {"kind": "training", "params": "1M", "compute": "1 ms"}),
    (("workload", "compression"), {"kind": "training", "params": "1M", "compute": "1 ms", "compression": {"topk": 0.1}}),
    (("workload", "parallel"), {"kind": "training", "model": {"params": "1M"}, "compute": "1 ms", "parallel": {"tp": 1}}),
]


@pytest.mark.parametrize(("where", "workload"), BLOCKS, ids=lambda v: ".".join(map(str, v)) if isinstance(v, tuple) else "")
def test_a_misspelt_key_in_any_block_is_refused_by_both_at_that_block(where, workload):
    raw = copy.deepcopy(BASE)
    if workload is not None:
        raw["workload"] = copy.deepcopy(workload)
        del raw["expect"]  # its metric is a column of collective rows
    assert not schema_errors(raw)
    load_dict(raw)  # the base scenario is valid
    block = raw
    for part in where:
        block = block[part]
    block["bogus_key"] = 1
    with pytest.raises(ConfigError, match="unknown key 'bogus_key'") as info:
        load_dict(raw)
    loader = dotted(info.value.path)
    assert loader == ".".join(map(str, (*where, "bogus_key")))
    assert any(e.validator in ("additionalProperties", "unevaluatedProperties", "anyOf", "oneOf")
               for e in schema_errors(raw))


# --- the reader's kinds ---------------------------------------------------------------------------


def test_join_places_keys_and_indices():
    assert join("", "mpi") == "mpi"
    assert join("mpi", "eager_limit") == "mpi.eager_limit"
    assert join("expect", "[2]") == "expect[2]"


def test_a_block_checks_keys_with_did_you_mean_and_names_the_missing_one():
    block = Block({"nodes": Whole(parse_whole, required="this key is required"), "name": Choice(("a", "b"))},
                  expected="a mapping such as {nodes: 2}")
    assert block.read({"nodes": "4", "name": "a"}, "topology") == {"nodes": 4, "name": "a"}
    assert block.read({"nodes": 4, "name": None}, "topology") == {"nodes": 4}  # null: the default
    with pytest.raises(ConfigError) as info:
        block.read({"nodez": 2}, "topology")
    assert str(info.value) == "topology.nodez: unknown key 'nodez' (did you mean 'nodes'?); allowed keys: nodes, name"
    with pytest.raises(ConfigError) as info:
        block.read({}, "topology")
    assert str(info.value) == "topology.nodes: this key is required"
    with pytest.raises(ConfigError) as info:
        block.read([1], "topology")
    assert str(info.value) == "topology: expected a mapping such as {nodes: 2}, got [1]"


def test_a_choice_offers_the_close_name_and_the_schema_lists_them():
    choice = Choice(("ring", "tree"), "unknown {short}; {hint}known: {choices}")
    with pytest.raises(ConfigError, match=r"^x: unknown 'rign'; did you mean 'ring'\? known: ring, tree$"):
        choice.read("rign", "x")
    assert choice.json() == {"enum": ["ring", "tree"]}


def test_a_list_reads_each_item_at_its_index_and_keeps_the_units_error():
    sizes = ListOf(Unit(parse_size, "1 KiB", integer=True), empty="expected at least one size")
    assert sizes.read(["1 KiB", "2 KiB"], "sizes") == [1024, 2048]
    with pytest.raises(ConfigError) as info:
        sizes.read(["1 KiB", "2 Kib"], "sizes")
    assert info.value.path == "sizes[1]" and "is not a size" in info.value.message
    with pytest.raises(ConfigError, match="expected at least one size"):
        sizes.read([], "sizes")
    assert sizes.json()["items"]["type"] == ["string", "integer"]
