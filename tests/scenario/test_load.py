"""Scenario loading: the valid and invalid corpora, dump/load round trips, overrides, defaults."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

import tests.scenario.fake_workloads  # noqa: F401  (registers the fake_pingpong workload)
from mpisim.errors import ConfigError, TopologyError, UnitError
from mpisim.mpi.config import MpiConfig
from mpisim.network.presets import load_preset
from mpisim.scenario import apply_overrides, dump, load, load_dict, loads, parse_set
from mpisim.scenario.model import DEFAULT_MPI, Scenario, sweep_points

CASES = Path(__file__).resolve().parent.parent / "scenario_cases"
VALID = sorted((CASES / "valid").glob("*.yaml"))
INVALID = sorted((CASES / "invalid").glob("*.yaml"))

STAR = {"nodes": 2, "inter": {"kind": "star", "bandwidth": "1 GB/s", "latency": "1 us"}}
FAKE = {"kind": "fake_pingpong", "sizes": ["1 KiB"]}


def scenario(**raw) -> Scenario:
    return load_dict({"topology": STAR, "workload": FAKE, **raw}, file="t.yaml")


# --- corpora ------------------------------------------------------------------------------------


def test_corpora_are_not_empty():
    assert len(VALID) >= 5
    assert len(INVALID) >= 30


SHIPPED = sorted((CASES.parent.parent / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", VALID + SHIPPED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_valid_scenario_loads_and_round_trips_through_dump(path):
    """demes' load-dump-load: the resolved form loads to an equal scenario, also via YAML text."""
    loaded = load(path)
    assert loaded.name == (yaml.safe_load(path.read_text()).get("name") or path.stem)
    resolved = dump(loaded)
    assert load(resolved) == loaded
    assert loads(yaml.safe_dump(resolved)) == loaded
    assert dump(load(resolved)) == resolved


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_scenario_fails_with_its_declared_message(path):
    first_line = path.read_text().splitlines()[0]
    assert first_line.startswith("# error: "), "an invalid case declares its error on line 1"
    declared = first_line.removeprefix("# error: ")
    with pytest.raises(ConfigError) as info:
        load(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), "the message starts with the file"
    assert declared in message
    assert "\n" not in message


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_scenario_error_names_the_field(path):
    """Every error carries a path (a field, or a line number for YAML), except the two whole-file ones."""
    with pytest.raises(ConfigError) as info:
        load(path)
    if path.stem in ("empty", "top-level-list"):
        assert info.value.path == ""
    else:
        assert info.value.path
        assert str(info.value) == f"{path}: {info.value.path}: {info.value.message}"


# --- defaults and resolution --------------------------------------------------------------------


def test_defaults_fill_in():
    s = scenario()
    assert s.name == "t"
    assert (s.seed, s.payload, s.network.model, s.algorithms.selector) == (0, "data", "fairshare", "mpich")
    assert s.mpi == DEFAULT_MPI
    assert (s.trace.messages, s.trace.spans, s.trace.links) == (True, True, False)
    assert s.expect == () and s.sweep == {} and s.report == {} and s.expect_failure is None
    assert load_dict({"topology": STAR, "workload": FAKE}).name == "scenario"


def test_null_means_the_default():
    s = scenario(name=None, seed=None, payload=None, network=None, mpi=None, report=None, description=None,
                 expect=None, sweep=None, expect_failure=None, trace=None, algorithms=None)
    assert s == scenario()
    assert s.name == "t"


def test_units_are_parsed_to_si():
    s = scenario(mpi={"eager_limit": "8 KiB", "send_overhead": "1.5 us", "reduce_cost": "0.1 ns/B",
                      "copy_bandwidth": "100 Gbps"})
    assert s.mpi.eager_limit_intra == s.mpi.eager_limit_inter == 8192
    assert s.mpi.send_overhead == 1.5e-6
    assert s.mpi.reduce_cost == 1e-10
    assert s.mpi.copy_bandwidth == 12.5e9
    assert s.topology.inter.bandwidth == 1e9


def test_preset_mpi_defaults_apply_then_the_scenarios():
    preset = load_preset("ib-hdr")["mpi"]
    s = load_dict({"topology": "ib-hdr", "workload": FAKE, "mpi": {"eager_limit_inter": "1 KiB"}})
    assert s.mpi.eager_limit_intra == 4096 == MpiConfig(eager_limit_intra=4096).eager_limit_intra
    assert s.mpi.eager_limit_inter == 1024
    assert s.mpi.send_overhead == pytest.approx(1e-7) and "send_overhead" in preset


def test_scenario_eager_limit_overrides_both_preset_limits_and_specific_keys_win():
    s = load_dict({"topology": "ib-hdr", "workload": FAKE, "mpi": {"eager_limit": "1 MiB"}})
    assert s.mpi.eager_limit_intra == s.mpi.eager_limit_inter == 2**20
    s = scenario(mpi={"eager_limit": "1 MiB", "eager_limit_intra": "1 KiB"})
    assert (s.mpi.eager_limit_intra, s.mpi.eager_limit_inter) == (1024, 2**20)


def test_unlimited_copy_bandwidth_dumps_as_inf_and_loads_back():
    s = scenario(mpi={"copy_bandwidth": "inf"})
    assert math.isinf(s.mpi.copy_bandwidth)
    assert dump(s)["mpi"]["copy_bandwidth"] == "inf"
    assert load(dump(s)) == s


def test_link_plot_turns_link_tracing_on_unless_told_otherwise():
    assert scenario(report={"plots": ["link_utilisation"]}).trace.links
    assert not scenario(report={"plots": ["link_utilisation"]}, trace={"links": False}).trace.links
    assert not scenario(report={"plots": ["timeline"]}).trace.links


def test_network_accepts_a_model_name_as_shorthand():
    assert scenario(network="analytic").network.model == "analytic"


def test_scenario_equality_ignores_where_it_came_from():
    a = load_dict({"topology": STAR, "workload": FAKE, "name": "x"}, file="a.yaml")
    b = load_dict({"topology": STAR, "workload": FAKE, "name": "x"}, file="b/c.yaml")
    assert a == b
    assert a != load_dict({"topology": STAR, "workload": FAKE, "name": "x", "seed": 1})


# --- overrides ----------------------------------------------------------------------------------


def test_parse_set_reads_yaml_values_and_never_evaluates():
    pairs = parse_set(["topology.nodes=16", "mpi.eager_limit=8 KiB", "workload.sizes=[1 KiB, 2 KiB]",
                       "name=__import__('os')", "network={model: analytic}", "description="])
    assert pairs == [
        ("topology.nodes", 16),
        ("mpi.eager_limit", "8 KiB"),
        ("workload.sizes", ["1 KiB", "2 KiB"]),
        ("name", "__import__('os')"),
        ("network", {"model": "analytic"}),
        ("description", None),
    ]


@pytest.mark.parametrize("item", ["nodes", "=3", "a..b=1", "x=[1, 2"])
def test_parse_set_rejects_malformed_items(item):
    with pytest.raises(ConfigError) as info:
        parse_set([item])
    assert info.value.path.startswith("--set")


def test_overrides_create_intermediate_mappings_and_keep_the_input():
    raw = {"topology": "ib-hdr", "workload": FAKE}
    out = apply_overrides(raw, [("topology.nodes", 16), ("network.model", "analytic"), ("mpi.eager_limit", "8 KiB")])
    assert out["topology"] == {"preset": "ib-hdr", "nodes": 16}
    assert out["network"] == {"model": "analytic"}
    assert out["mpi"] == {"eager_limit": "8 KiB"}
    assert raw == {"topology": "ib-hdr", "workload": FAKE}, "the input is not modified"


def test_override_of_a_preset_name_keeps_the_preset():
    s = load_dict({"topology": "ib-hdr", "workload": FAKE}, overrides=[("topology.nodes", 16)])
    assert s.topology.name == "ib-hdr" and s.topology.nodes == 16
    assert s.mpi.eager_limit_inter == 12 * 1024, "the preset's MPI defaults still apply"


def test_override_indexes_lists():
    s = scenario(expect=[{"metric": "time_s", "max": "1 s"}])
    s2 = load_dict(s.raw, overrides={"expect.0.max": "2 s"})
    assert s2.expect[0].value == 2.0


def test_override_through_a_scalar_is_an_error_naming_the_path():
    with pytest.raises(ConfigError) as info:
        load_dict({"topology": STAR, "workload": FAKE, "payload": "data"}, overrides=[("payload.kind", "x")])
    assert info.value.path == "payload.kind"


def test_overrides_are_validated_like_the_file():
    with pytest.raises(UnitError) as info:
        load_dict({"topology": STAR, "workload": FAKE}, file="s.yaml", overrides=[("topology.inter.bandwidth", "10 Gbsp")])
    assert str(info.value) == "s.yaml: topology.inter.bandwidth: '10 Gbsp' is not a bandwidth (e.g. 100 Gbps, 12.5 GB/s)"


# --- specific errors ----------------------------------------------------------------------------


def test_error_classes_are_kept():
    with pytest.raises(TopologyError):
        scenario(topology={**STAR, "nodes": 0})
    with pytest.raises(UnitError):
        scenario(mpi={"eager_limit": "lots"})


def test_unknown_key_lists_the_allowed_keys():
    with pytest.raises(ConfigError) as info:
        scenario(mpi={"eagerlimit": 1})
    assert info.value.path == "mpi.eagerlimit"
    assert "allowed keys: eager_limit, eager_limit_intra, eager_limit_inter, header_bytes" in info.value.message


def test_preset_mpi_errors_name_the_preset(monkeypatch):
    import mpisim.network.presets as presets

    real = presets.load_preset

    def broken(name):
        raw = real(name)
        raw["mpi"]["eager_limit_inter"] = "12 KB/s"
        return raw

    monkeypatch.setattr(presets, "load_preset", broken)
    with pytest.raises(ConfigError) as info:
        load_dict({"topology": "ib-hdr", "workload": FAKE})
    assert info.value.path == "topology.mpi.eager_limit_inter"
    assert "(in topology preset 'ib-hdr')" in info.value.message


def test_workload_errors_are_prefixed_with_workload():
    with pytest.raises(ConfigError) as info:
        scenario(workload={"kind": "fake_pingpong", "sizes": ["1 KiB", "two"]})
    assert info.value.path == "workload.sizes[1]"


def test_yaml_errors_name_the_line():
    with pytest.raises(ConfigError) as info:
        loads("topology: ib-hdr\nworkload:\n  kind: [oops\n", file="x.yaml")
    assert str(info.value).startswith("x.yaml: line ")
    assert "invalid YAML" in str(info.value)


def test_yaml_merge_keys_may_be_overridden_but_duplicates_are_errors():
    text = (
        "topology: {nodes: 2, ranks_per_node: 2, intra: &star {kind: shm, bandwidth: 1 GB/s, latency: 1 us},\n"
        "           inter: {<<: *star, kind: star, latency: 2 us}}\n"
        "workload: {kind: fake_pingpong, sizes: [1 B]}\n"
    )
    inter = loads(text).topology.inter
    assert (inter.kind, inter.bandwidth, inter.latency) == ("star", 1e9, 2e-6)
    with pytest.raises(ConfigError, match=r"line 3: invalid YAML: duplicate key 'nodes' \(first given on line 2\)"):
        loads("topology:\n  {nodes: 2,\n   nodes: 3}\n")


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError) as info:
        load(tmp_path / "nope.yaml")
    assert str(info.value) == f"{tmp_path / 'nope.yaml'}: no such file"


def test_every_sweep_point_is_validated_at_load_time():
    with pytest.raises(ConfigError) as info:
        scenario(sweep={"network.model": ["analytic", "packet"]})
    assert info.value.path == "network.model"
    assert "(in sweep point network.model=packet)" in info.value.message


def test_a_where_value_is_held_against_every_sweep_point_not_one():
    """A sweep point's scenario carries the whole sweep's expect: block; only the whole refuses values."""
    from mpisim.scenario.load import point_raw

    raw = {"topology": STAR, "payload": "size", "sweep": {"workload.algorithm": ["ring", "recursive_doubling"]},
           "workload": {"kind": "collective", "collective": "allreduce", "algorithm": "ring", "sizes": ["1 KiB"]},
           "expect": [{"metric": "time_s", "where": {"algorithm": "recursive_doubling"}, "max": "1 s"}]}
    whole = load_dict(raw, file="t.yaml")
    point = point_raw(whole, {"workload.algorithm": "ring"})
    assert load_dict(point, file="t.yaml", sweep_point=True).workload.params.algorithms == ("ring",)
    with pytest.raises(ConfigError) as info:
        load_dict(point, file="t.yaml")  # alone, this scenario runs ring only
    assert info.value.path == "expect[0].where.algorithm"
    assert info.value.message == ("no row of this scenario has algorithm=recursive_doubling; "
                                  "its rows have algorithm: ring")


def test_sweep_points_are_in_grid_order_last_key_fastest():
    assert sweep_points({"a": [1, 2], "b": ["x", "y", "z"]}) == [
        {"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 1, "b": "z"},
        {"a": 2, "b": "x"}, {"a": 2, "b": "y"}, {"a": 2, "b": "z"},
    ]
    assert sweep_points({}) == [{}]


def test_expect_failure_kinds():
    assert scenario(expect_failure="deadlock").expect_failure == "deadlock"
    with pytest.raises(ConfigError, match="expect_failure"):
        scenario(expect_failure="crash")


@pytest.mark.parametrize(("topology", "algorithms", "selector"), [
    ("dgx-a100", None, "nccl"),            # ranks are GPUs: NCCL's tuning
    ("{preset: dgx-h100, nodes: 2}", None, "nccl"),
    ("ib-hdr", None, "mpich"),             # CPU ranks: MPICH's rules
    ("dgx-a100", "{selector: mpich}", "mpich"),  # what the scenario names wins
    ("dgx-a100", "{allreduce: ring}", "nccl"),
])
def test_auto_follows_the_device_unless_the_scenario_names_a_rule_set(topology, algorithms, selector):
    text = f"topology: {topology}\nworkload: {{kind: collective, collective: allreduce, sizes: [32 KiB]}}\n"
    if algorithms:
        text += f"algorithms: {algorithms}\n"
    assert loads(text).algorithms.selector == selector


def test_a_32_kib_allreduce_on_a_dgx_a100_costs_what_nccl_measures():
    """Row C1: NCCL measures 43.8 us at 32 KiB on one DGX A100; the MPI rules gave 18.8 us."""
    from mpisim.scenario import run_scenario

    scenario = loads("topology: {preset: dgx-a100, nodes: 1}\npayload: size\n"
                     "workload: {kind: collective, collective: allreduce, sizes: [32 KiB]}\n")
    (row,) = run_scenario(scenario).rows
    assert row["algorithm"].startswith("nccl") or row["algorithm"] == "nvls"
    assert row["time_s"] == pytest.approx(43.8e-6, rel=0.05)
