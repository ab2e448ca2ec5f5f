"""Topology presets: every file loads, builds, routes, cites its sources; overrides; calibration."""

from __future__ import annotations

import itertools
import random
import re

import pytest
import yaml

from mpisim.engine.units import parse_time
from mpisim.errors import ConfigError, TopologyError, UnitError
from mpisim.network import presets
from mpisim.network.presets import deep_merge, list_presets, load_preset, preset_names, resolve_topology
from mpisim.network.topology import build_topology

REQUIRED = {
    "seed-1gbps",
    "laptop-shm",
    "ethernet-10g",
    "ethernet-25g-tcp",
    "roce-100g",
    "ib-edr",
    "ib-hdr",
    "ib-ndr",
    "pcie-gen4-8gpu",
    "dgx-a100",
    "dgx-h100",
}


def test_required_presets_exist():
    assert set(preset_names()) >= REQUIRED


@pytest.mark.parametrize("name", preset_names())
def test_preset_loads_builds_and_routes_between_any_two_ranks(name):
    spec, mpi = resolve_topology(name)
    assert spec.name == name
    assert spec.description
    assert isinstance(mpi, dict)
    topology = build_topology(spec)
    pairs = list(itertools.product(range(topology.size), repeat=2))
    if len(pairs) > 2000:
        pairs = random.Random(0).sample(pairs, 2000)
    for src, dst in pairs:
        route = topology.route(src, dst)
        if src == dst:
            assert route.links == ()
            continue
        assert route.latency > 0, (src, dst)
        assert 0 < route.bottleneck < float("inf"), (src, dst)


@pytest.mark.parametrize("name", preset_names())
def test_every_number_in_a_preset_cites_its_source(name):
    """Each line that sets a number carries a '#' comment naming where the number comes from."""
    text = (presets.preset_dir() / f"{name}.yaml").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0].startswith("#"), "the file opens with a comment saying what it is"
    assert any("source" in line.lower() for line in lines if line.startswith("#")), "header names its sources"
    for number, line in enumerate(lines, 1):
        content = line.split("#", 1)[0]
        key, _, value = content.partition(":")
        if key.strip() in ("description", "name") or not re.search(r"\d", value):
            continue
        comment = line.partition("#")[2].strip()
        assert len(comment) >= 10, (
            f"{name}.yaml line {number} sets a number without a source comment: {line!r}"
        )


@pytest.mark.parametrize("name", preset_names())
def test_preset_mpi_defaults_use_known_keys(name):
    allowed = {
        "eager_limit",
        "eager_limit_intra",
        "eager_limit_inter",
        "header_bytes",
        "send_overhead",
        "recv_overhead",
        "copy_bandwidth",
        "reduce_cost",
    }
    assert set(load_preset(name).get("mpi", {})) <= allowed


def test_list_presets_gives_one_line_per_preset():
    listed = list_presets()
    assert [name for name, _ in listed] == preset_names()
    for name, summary in listed:
        assert summary and "\n" not in summary, name


def test_unknown_preset_names_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown topology preset 'ib-hdrr'; known: .*ib-hdr"):
        load_preset("ib-hdrr")
    with pytest.raises(ConfigError) as info:
        resolve_topology({"preset": "nope"})
    assert info.value.path == "preset"


def test_load_preset_returns_a_fresh_copy():
    load_preset("ib-hdr")["inter"]["bandwidth"] = "1 bps"
    assert load_preset("ib-hdr")["inter"]["bandwidth"] == "200 Gbps"


# --- resolve_topology --------------------------------------------------------------------


def test_preset_by_name_returns_its_mpi_defaults():
    spec, mpi = resolve_topology("ib-hdr")
    assert (spec.nodes, spec.inter.kind, spec.inter.bandwidth) == (2, "star", 25e9)
    assert mpi["eager_limit_inter"] == "12 KiB"


def test_preset_overrides_are_deep_merged():
    spec, mpi = resolve_topology({"preset": "ib-hdr", "nodes": 16, "inter": {"bandwidth": "100 Gbps"}})
    base, base_mpi = resolve_topology("ib-hdr")
    assert spec.nodes == 16
    assert spec.inter.bandwidth == 12.5e9
    assert spec.inter.latency == base.inter.latency  # untouched keys keep the preset's values
    assert spec.inter.efficiency == base.inter.efficiency
    assert spec.name == "ib-hdr"
    assert mpi == base_mpi


def test_preset_overrides_can_change_the_mpi_defaults():
    _, mpi = resolve_topology({"preset": "ib-hdr", "mpi": {"send_overhead": "1 us"}})
    assert mpi["send_overhead"] == "1 us"
    assert mpi["eager_limit_inter"] == "12 KiB"


def test_inline_topology():
    raw = {"nodes": 3, "inter": {"kind": "ring", "bandwidth": "1 GB/s", "latency": "2 us"}}
    spec, mpi = resolve_topology(raw)
    assert (spec.name, spec.nodes, spec.inter.kind, mpi) == ("inline", 3, "ring", {})
    assert raw == {"nodes": 3, "inter": {"kind": "ring", "bandwidth": "1 GB/s", "latency": "2 us"}}


def test_inline_topology_rejects_mpi_settings():
    with pytest.raises(ConfigError) as info:
        resolve_topology({"nodes": 1, "mpi": {"eager_limit": "4 KiB"}})
    assert info.value.path == "mpi"


@pytest.mark.parametrize(
    ("raw", "error", "path"),
    [
        ({"preset": "ib-hdr", "inter": {"bandwidth": "fast"}}, UnitError, "inter.bandwidth"),
        ({"preset": "ib-hdr", "nodez": 4}, ConfigError, "nodez"),
        ({"preset": "dgx-a100", "inter": {"nics": 4}}, TopologyError, "inter.nics"),
        ({"preset": "laptop-shm", "nodes": 2}, TopologyError, "inter"),
        ({"preset": 3}, ConfigError, "preset"),
        (42, ConfigError, ""),
        ({"preset": "ib-hdr", "mpi": "fast"}, ConfigError, "mpi"),
    ],
)
def test_resolve_errors_carry_relative_paths(raw, error, path):
    with pytest.raises(error) as info:
        resolve_topology(raw)
    assert info.value.path == path


def test_deep_merge_leaves_its_inputs_alone():
    base = {"inter": {"kind": "star", "latency": "1 us"}, "nodes": 2}
    merged = deep_merge(base, {"inter": {"latency": "2 us"}, "ranks_per_node": 4})
    assert merged == {"inter": {"kind": "star", "latency": "2 us"}, "nodes": 2, "ranks_per_node": 4}
    assert base == {"inter": {"kind": "star", "latency": "1 us"}, "nodes": 2}


def test_installed_layout_is_found(tmp_path, monkeypatch):
    """A wheel puts the presets in <package>/_data/topologies; use them when no checkout copy exists."""
    package = tmp_path / "site" / "mpisim"
    data = package / "_data" / "topologies"
    data.mkdir(parents=True)
    (data / "tiny.yaml").write_text("# tiny; sources: none needed\nnodes: 1  # one node\n", encoding="utf-8")
    monkeypatch.setattr(presets, "_PACKAGE_DIR", package)
    assert presets.preset_dir() == data
    assert preset_names() == ["tiny"]
    assert resolve_topology("tiny")[0].nodes == 1


# --- calibration: the presets reproduce the published rows they cite -----------------------


def _mpi_time(mpi: dict, key: str) -> float:
    return parse_time(mpi.get(key, 0))


def test_seed_moves_1_2_gb_in_1_2_seconds():
    spec, mpi = resolve_topology("seed-1gbps")
    route = build_topology(spec).route(0, 9)
    assert spec.nodes == 10
    assert route.bottleneck == 1e9
    assert 1.2e9 / route.bottleneck + route.latency == pytest.approx(1.2, abs=1e-5)
    assert _mpi_time(mpi, "send_overhead") == _mpi_time(mpi, "recv_overhead") == 0


@pytest.mark.parametrize(
    ("name", "measured_latency", "measured_bandwidth"),
    [
        ("ib-hdr", 1.62e-6, 23477e6),  # C2: osu_latency 0 B, osu_mbw_mr
        ("roce-100g", 1.67e-6, 12254e6),  # C3: osu_latency 1 B, osu_bw 256 MiB
        ("ethernet-25g-tcp", 19.17e-6, None),  # C4: osu_latency 0 B
    ],
)
def test_network_presets_match_their_rows(name, measured_latency, measured_bandwidth):
    spec, mpi = resolve_topology(name)
    route = build_topology(spec).route(0, 1)
    small = _mpi_time(mpi, "send_overhead") + route.latency + _mpi_time(mpi, "recv_overhead")
    assert small == pytest.approx(measured_latency, rel=0.02)
    if measured_bandwidth is not None:
        assert route.bottleneck == pytest.approx(measured_bandwidth, rel=0.01)


@pytest.mark.parametrize(
    ("name", "busbw"),
    [("dgx-a100", 234.89e9), ("dgx-h100", 370e9)],  # C1 at 16 GiB; maintainers' H100 ring figure
)
def test_gpu_presets_match_nvlink_bus_bandwidth(name, busbw):
    spec, _ = resolve_topology({"preset": name, "nodes": 1})
    assert build_topology(spec).route(0, 7).bottleneck == pytest.approx(busbw, rel=0.01)


def test_dgx_nics_follow_the_effective_per_nic_figures():
    for name, per_nic in (("dgx-a100", 24e9), ("dgx-h100", 47e9)):
        spec, _ = resolve_topology(name)
        route = build_topology(spec).route(3, 8 + 3)  # same rail on two nodes
        assert route.bottleneck == pytest.approx(per_nic, rel=0.001)
        assert spec.inter.nics == spec.ranks_per_node == 8


def test_2026_dgx_presets_differ_from_h100_where_the_hardware_does():
    """H200 keeps H100's NVLink4 and NICs; B200's NVLink5 doubles the per-GPU rate, the NICs stay 400 Gb/s."""
    def links(name):
        spec, _ = resolve_topology(name)
        topology = build_topology(spec)
        return topology.route(0, 7).bottleneck, topology.route(3, 8 + 3).bottleneck

    h100, h200, b200 = links("dgx-h100"), links("dgx-h200"), links("dgx-b200")
    assert h200 == h100
    assert b200[0] == pytest.approx(2 * h100[0]) and b200[1] == h100[1]


def test_a_preset_file_path_is_a_preset(tmp_path, monkeypatch):
    from mpisim.network.presets import load_preset
    raw = load_preset("ib-hdr")
    raw["inter"]["latency"] = "2 us"
    (tmp_path / "mycluster.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    spec, mpi = resolve_topology("mycluster.yaml")
    assert spec.name == "mycluster" and spec.inter.latency == 2e-6 and mpi["eager_limit_inter"] == "12 KiB"
    with pytest.raises(ConfigError, match=r"no topology preset file 'missing\.yaml'"):
        resolve_topology("missing.yaml")
