"""Hundreds of malformed scenarios through `mpisim run`: every one exits 2 with one line naming the field.

Each example starts from a valid scenario and breaks one thing -- a wrong type, a bad unit, an
unknown key, a missing field, an impossible topology, an unknown algorithm, broken YAML -- and
knows which field path the error must name. The CLI runs in-process, so this stays fast.
"""

from __future__ import annotations

import copy
import os
import string
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tests.scenario.fake_workloads  # noqa: F401  (registers the fake_pingpong workload)
from mpisim.cli import main
from mpisim.collectives.registry import COLLECTIVES

BASE: dict[str, Any] = {
    "name": "fuzz",
    "seed": 1,
    "topology": {
        "nodes": 4,
        "ranks_per_node": 2,
        "intra": {"kind": "shm", "bandwidth": "20 GB/s", "latency": "0.2 us"},
        "inter": {"kind": "star", "bandwidth": "100 Gbps", "latency": "1.5 us"},
    },
    "network": {"model": "analytic"},
    "mpi": {"eager_limit": "64 KiB", "send_overhead": "0.1 us", "reduce_cost": "0.1 ns/B"},
    "algorithms": {"selector": "mpich"},
    "payload": "data",
    "trace": {"links": False},
    "workload": {"kind": "fake_pingpong", "sizes": ["1 KiB", "1 MiB"]},
    "expect": [{"metric": "time_s", "where": {"bytes": "1 KiB"}, "approx": "2 us", "rel": 0.5}, {"verified": True}],
    "report": {"plots": ["timeline"]},
}

# Words that happen to be valid values somewhere (a model, a kind, "inf" bandwidth) are left out.
VALID_WORDS = {"analytic", "fairshare", "block", "shm", "pcie", "nvswitch", "full", "star", "ring", "rail", "mpich",
               "model", "data", "size", "deadlock", "program", "training", "inf", "infinity", "cpu", "gpu"}
letters = st.text(string.ascii_letters, min_size=1, max_size=8).filter(lambda s: s.lower() not in VALID_WORDS)
junk_structures = st.one_of(st.lists(st.integers(), max_size=3), st.dictionaries(letters, st.integers(), max_size=2))
bad_units = {
    "time": ["s/B", "sec", "usec", "GB", "Gbps", "min", "hours"],
    "size": ["Kb", "Gb", "GB/s", "bytes", "KIB", "mb", "pages"],
    "bandwidth": ["Gbsp", "gbps", "GB", "Gbit", "MiBps", "b/sec", "Gb/sec"],
    "per_byte": ["ns", "s", "ns/b", "GB/s", "ns/KB"],
}


def bad_quantity(kind: str) -> st.SearchStrategy[Any]:
    """A value that is not a *kind*: a number with a wrong unit, a negative number, words, junk."""
    wrong_unit = st.builds(lambda n, u: f"{n} {u}", st.integers(1, 999), st.sampled_from(bad_units[kind]))
    negative = st.builds(lambda n, u: f"-{n} {u}".strip(), st.integers(1, 99),
                         st.sampled_from({"time": ["us", ""], "size": ["KiB", ""], "bandwidth": ["GB/s", ""],
                                          "per_byte": ["ns/B", ""]}[kind]))
    return st.one_of(wrong_unit, negative, letters, st.booleans(), junk_structures, st.integers(max_value=-1))


def set_path(raw: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    node = raw
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value


def delete_path(raw: dict[str, Any], path: tuple[Any, ...]) -> None:
    node = raw
    for part in path[:-1]:
        node = node[part]
    del node[path[-1]]


def dotted(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


# --- mutations: each returns (raw dict or YAML text, substring the error's path must contain) -----

QUANTITIES = [
    (("topology", "intra", "bandwidth"), "bandwidth"),
    (("topology", "inter", "bandwidth"), "bandwidth"),
    (("topology", "intra", "latency"), "time"),
    (("topology", "inter", "latency"), "time"),
    (("mpi", "eager_limit"), "size"),
    (("mpi", "header_bytes"), "size"),
    (("mpi", "send_overhead"), "time"),
    (("mpi", "recv_overhead"), "time"),
    (("mpi", "copy_bandwidth"), "bandwidth"),
    (("mpi", "reduce_cost"), "per_byte"),
    (("workload", "sizes", 1), "size"),
    (("expect", 0, "approx"), "time"),
    (("expect", 0, "where", "bytes"), "size"),
]


@st.composite
def bad_unit(draw):
    path, kind = draw(st.sampled_from(QUANTITIES))
    raw = copy.deepcopy(BASE)
    set_path(raw, path, draw(bad_quantity(kind)))
    return raw, dotted(path)


WRONG_TYPES = [
    (("seed",), st.one_of(letters, st.floats(allow_nan=False), st.booleans(), junk_structures, st.integers(max_value=-1))),
    (("name",), st.one_of(st.integers(), st.booleans(), junk_structures, st.just(""))),
    (("payload",), st.one_of(st.integers(), letters.filter(lambda s: s not in ("data", "size")), junk_structures)),
    (("network",), st.one_of(st.integers(), st.lists(st.integers(), max_size=2), letters)),
    (("network", "model"), st.one_of(st.integers(), letters, junk_structures)),
    (("topology", "nodes"), st.one_of(letters, st.booleans(), junk_structures, st.floats(0.1, 0.9))),
    (("topology", "ranks_per_node"), st.one_of(letters, st.booleans(), junk_structures)),
    (("topology", "placement"), st.one_of(st.integers(), letters, junk_structures)),
    (("topology", "inter"), st.one_of(st.integers(), letters, st.lists(st.integers(), max_size=2))),
    (("topology", "intra", "kind"), st.one_of(st.integers(), letters, junk_structures)),
    (("topology", "inter", "efficiency"), st.one_of(letters, st.floats(1.01, 100), st.floats(-5, 0), junk_structures)),
    (("mpi",), st.one_of(st.integers(), letters, st.lists(st.integers(), max_size=2))),
    (("algorithms",), st.one_of(st.integers(), letters, st.lists(st.integers(), max_size=2))),
    (("algorithms", "selector"), st.one_of(st.integers(), letters, junk_structures)),
    (("trace", "links"), st.one_of(st.integers(), letters, junk_structures)),
    (("report",), st.one_of(st.integers(min_value=1), letters, st.lists(st.integers(), min_size=1, max_size=2))),
    (("workload",), st.one_of(st.integers(), letters, st.lists(st.integers(), max_size=2))),
    (("workload", "kind"), st.one_of(st.integers(), letters, junk_structures)),
    (("workload", "sizes"), st.one_of(st.integers(), letters, st.just([]))),
    (("expect",), st.one_of(st.integers(), letters, st.dictionaries(letters, st.integers(), min_size=1, max_size=2))),
    (("expect", 0), st.one_of(st.integers(), letters, st.lists(st.integers(), max_size=2))),
    (("expect", 0, "rel"), st.one_of(letters, st.floats(max_value=-0.001), junk_structures)),
    (("expect", 1, "verified"), st.one_of(st.just(False), st.integers(), letters)),
    (("expect_failure",), st.one_of(st.integers(), letters, junk_structures)),
    (("sweep",), st.one_of(st.integers(), letters, st.lists(st.integers(), max_size=2))),
]


@st.composite
def wrong_type(draw):
    index = draw(st.integers(0, len(WRONG_TYPES) - 1))
    path, values = WRONG_TYPES[index]
    raw = copy.deepcopy(BASE)
    set_path(raw, path, draw(values))
    return raw, dotted(path)


KEY_LEVELS = [(), ("topology",), ("topology", "intra"), ("topology", "inter"), ("network",), ("mpi",),
              ("algorithms",), ("trace",), ("workload",), ("expect", 0), ("expect", 1)]


@st.composite
def unknown_key(draw):
    level = draw(st.sampled_from(KEY_LEVELS))
    key = draw(st.from_regex(r"[a-z]{1,8}_zz", fullmatch=True))
    raw = copy.deepcopy(BASE)
    set_path(raw, (*level, key), draw(st.one_of(st.integers(), letters)))
    return raw, dotted((*level, key))


MISSING = [
    (("topology",), "topology"),
    (("workload",), "workload"),
    (("workload", "kind"), "workload.kind"),
    (("workload", "sizes"), "workload.sizes"),
    (("topology", "nodes"), "topology.nodes"),
    (("topology", "inter"), "topology.inter"),
    (("topology", "intra"), "topology.intra"),
    (("topology", "inter", "bandwidth"), "topology.inter.bandwidth"),
    (("topology", "inter", "latency"), "topology.inter.latency"),
    (("topology", "intra", "kind"), "topology.intra.kind"),
    (("expect", 0, "metric"), "expect[0].metric"),
    (("expect", 0, "rel"), "expect[0]"),
]


@st.composite
def missing_field(draw):
    path, where = draw(st.sampled_from(MISSING))
    raw = copy.deepcopy(BASE)
    delete_path(raw, path)
    return raw, where


@st.composite
def impossible_topology(draw):
    raw = copy.deepcopy(BASE)
    topology = raw["topology"]
    case = draw(st.sampled_from(["nodes", "ranks", "bandwidth", "rail", "oversubscription", "efficiency", "kind"]))
    if case == "nodes":
        topology["nodes"] = draw(st.integers(-5, 0))
        return raw, "topology.nodes"
    if case == "ranks":
        topology["ranks_per_node"] = draw(st.integers(-5, 0))
        return raw, "topology.ranks_per_node"
    if case == "bandwidth":
        fabric = draw(st.sampled_from(["intra", "inter"]))
        topology[fabric]["bandwidth"] = draw(st.sampled_from([0, "0 GB/s", "-10 Gbps", -1.5, "0 bps"]))
        return raw, f"topology.{fabric}.bandwidth"
    if case == "rail":
        ranks = draw(st.integers(2, 8))
        nics = draw(st.integers(1, 16).filter(lambda n: n != ranks))
        topology["ranks_per_node"] = ranks
        topology["inter"] = {"kind": "rail", "nics": nics, "bandwidth": "200 Gbps", "latency": "1 us"}
        return raw, "topology.inter.nics"
    if case == "oversubscription":
        topology["inter"].update(kind="fat_tree", oversubscription=draw(st.sampled_from([0.5, "1:2", 0, -1])))
        return raw, "topology.inter.oversubscription"
    if case == "efficiency":
        topology["inter"]["efficiency"] = draw(st.sampled_from([0, 1.5, "150%", -0.2]))
        return raw, "topology.inter.efficiency"
    topology["inter"]["kind"] = draw(st.sampled_from(["mesh", "torus3d", "Star", "dragonfly"]))
    return raw, "topology.inter.kind"


@st.composite
def unknown_algorithm(draw):
    raw = copy.deepcopy(BASE)
    collective = draw(st.sampled_from(COLLECTIVES))
    name = draw(st.from_regex(r"zz_[a-z]{1,10}", fullmatch=True))
    if draw(st.booleans()):
        raw["algorithms"][collective] = name
        return raw, f"algorithms.{collective}"
    raw["algorithms"][name] = "ring"
    return raw, f"algorithms.{name}"


@st.composite
def bad_sweep(draw):
    raw = copy.deepcopy(BASE)
    case = draw(st.sampled_from(["not_list", "empty", "key", "point"]))
    if case == "not_list":
        raw["sweep"] = {"topology.nodes": draw(st.one_of(st.integers(), letters))}
        return raw, "sweep.topology.nodes"
    if case == "empty":
        raw["sweep"] = {"seed": []}
        return raw, "sweep.seed"
    if case == "key":
        key = draw(st.sampled_from(["sweep.x", "expect.0.rel", "nodes", "topology..nodes"]))
        raw["sweep"] = {key: [1, 2]}
        return raw, "sweep"
    raw["sweep"] = {"topology.nodes": [2, draw(st.integers(-3, 0))]}
    return raw, "topology.nodes"


BREAKERS = ["key: value: other", "\tindented: with a tab", 'quoted: "never closed', "@reserved: indicator", "broken: [1, 2",
            "{flow: mapping", "name: fuzz"]


@st.composite
def broken_yaml(draw):
    lines = yaml.safe_dump(BASE, sort_keys=False).splitlines()
    at = draw(st.integers(0, len(lines)))
    lines.insert(at, draw(st.sampled_from(BREAKERS)))
    return "\n".join(lines) + "\n", "line "


malformed = st.one_of(bad_unit(), wrong_type(), unknown_key(), missing_field(), impossible_topology(),
                      unknown_algorithm(), bad_sweep(), broken_yaml())


def test_the_base_scenario_is_valid(tmp_path, capsys):
    path = tmp_path / "base.yaml"
    path.write_text(yaml.safe_dump(BASE))
    assert main(["check", str(path)]) == 0, capsys.readouterr().err


@pytest.mark.slow  # 300 generated scenarios
@settings(max_examples=int(os.environ.get("MPISIM_FUZZ_EXAMPLES", "300")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=malformed)
def test_malformed_scenarios_exit_2_with_one_line_naming_the_field(case, capsys):
    content, where = case
    text = content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bad.yaml"
        path.write_text(text)
        code = main(["run", str(path)])
        captured = capsys.readouterr()
    assert code == 2, (text, captured.out, captured.err)
    assert captured.out == ""
    assert "Traceback" not in captured.err
    assert captured.err.count("\n") == 1 and captured.err.endswith("\n"), captured.err
    assert captured.err.startswith(f"{path}: "), captured.err
    field_path = captured.err[len(f"{path}: "):].split(": ")[0]
    assert field_path.startswith(where), (where, captured.err)
