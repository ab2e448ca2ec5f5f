"""Findings explain what the data shows: causes of a gap to the closed form, distinct algorithms only."""

from __future__ import annotations

import re

import pytest

from mpisim.report.findings import algorithm_findings, closed_form_findings
from mpisim.scenario import load_dict, run_scenario


def run(topology, algorithms, sizes):
    return run_scenario(load_dict({
        "name": "x", "topology": topology, "payload": "size", "fidelity": "message",  # findings read the messages
        "workload": {"kind": "collective", "collective": "allreduce", "algorithm": algorithms, "sizes": sizes,
                     "dtype": "float32"}}))


@pytest.fixture(scope="module")
def ib_hdr():
    """8 ranks on HDR InfiniBand (12 KiB eager limit); 128 KiB cuts the ring into 16 KiB blocks."""
    return run({"preset": "ib-hdr", "nodes": 8}, ["ring", "rabenseifner", "auto"], ["128 KiB"])


def test_a_gap_to_the_closed_form_is_explained_by_rendezvous(ib_hdr):
    ring = next(f for f in closed_form_findings(ib_hdr) if f.startswith("**ring:**"))
    assert "because 112 of its 112 messages (16 KiB) are above the 12 KiB eager limit and go by rendezvous" in ring
    # The handshakes account for the gap: 2 latencies x 14 sequential steps.
    estimate, gap = (float(x) for x in re.search(r"= ([0-9.]+) us of the ([0-9.]+) us gap", ring).groups())
    assert estimate == pytest.approx(gap, rel=0.02), ring


def test_an_algorithm_is_never_compared_with_itself(ib_hdr):
    findings = algorithm_findings(ib_hdr)
    auto = next(r["algorithm"] for r in ib_hdr.rows if r["requested"] == "auto")
    assert any(f.startswith("**auto for allreduce on 8 ranks** picks") and auto in f for f in findings), findings
    for finding in findings:
        for winner, rivals in re.findall(r"\*\*(\w+)\*\* is fastest, [^(]*\(([^)]*)\)", finding):
            assert winner not in rivals.split(", "), finding


def test_on_a_multi_level_topology_the_formula_says_what_it_assumes():
    result = run({"preset": "dgx-h100", "nodes": 2}, ["rabenseifner"], ["64 MiB"])
    text = closed_form_findings(result)[0]
    assert "faster than its closed form" in text
    assert "multi-level topology the formula charges every hop the slowest path" in text and "upper bound" in text


def test_eager_vs_rendezvous_teaches_the_crossover_the_model_computes():
    """The scenario's header states the crossover n = (2L + 2h/B) C; the run and the findings agree."""
    from pathlib import Path

    from mpisim.report.findings import p2p_findings
    from mpisim.scenario import load_file

    path = Path(__file__).resolve().parents[2] / "scenarios" / "eager-vs-rendezvous.yaml"
    header = path.read_text()
    result = run_scenario(load_file(path), jobs=1)
    mpi, net = result.scenario["mpi"], result.records[0].network
    crossover = (2 * net["pair_latency_s"] + 2 * mpi["header_bytes"] * net["pair_beta_s_per_B"]) * mpi["copy_bandwidth"]
    assert f"n = {round(crossover)} B" in header
    by = {}
    for row in result.rows:
        by.setdefault(row["bytes"], {})[row["protocol"]] = row["latency_s"]
    for size, both in by.items():
        if size > 0 and len(both) == 2:
            assert (both["eager"] < both["rendezvous"]) == (size < crossover), (size, both)
    findings = " ".join(p2p_findings(result))
    assert "the latency drops, because at this size eager's copy" in findings
    assert "**Eager and rendezvous cross between 4 KiB and 6 KiB:**" in findings
    assert "latency jumps" not in header.split("name:")[0], "the header must not claim a jump the table does not show"


def test_a_bus_bandwidth_above_the_rings_is_explained():
    """NVLS reduces in the switch: at 64 MiB its bus bandwidth beats the ring's, and the report says why."""
    result = run({"preset": "dgx-h100", "nodes": 1}, ["nccl_ring", "nvls"], ["16 MiB", "64 MiB"])
    busbw = {(r["algorithm"], r["bytes"]): r["busbw_GBps"] for r in result.rows}
    assert busbw["nvls", 64 * 2**20] > 1.05 * busbw["nccl_ring", 64 * 2**20]
    assert busbw["nvls", 16 * 2**20] < busbw["nccl_ring", 16 * 2**20]
    # Only the size where NVLS beats the ring gets the sentence.
    [finding] = [f for f in algorithm_findings(result) if "above the ring's" in f]
    assert finding.startswith("**allreduce/nvls at 64 MiB on 8 ranks**") and "NVLink SHARP" in finding


def test_only_a_bus_bandwidth_above_the_rings_best_is_explained_and_once():
    """Where latency sets the times (256 KiB on 2 nodes), a faster tree simply has the higher
    busbw: no sentence. Above the ring's best (NVLS on one node at 64 MiB) the sentence comes
    once, though ``auto`` picked the same algorithm."""
    result = run({"preset": "dgx-h100", "nodes": 2}, ["nccl_ring", "nccl_tree", "auto"], ["256 KiB", "64 MiB"])
    busbw = {(r["requested"], r["bytes"]): r["busbw_GBps"] for r in result.rows}
    assert busbw["nccl_tree", 256 * 2**10] > 1.05 * busbw["nccl_ring", 256 * 2**10]
    assert busbw["nccl_tree", 256 * 2**10] < busbw["nccl_ring", 64 * 2**20]
    # (At 64 MiB the tree may beat the LL128 ring, paced at NCCL's rate per channel across nodes.)
    assert not [f for f in algorithm_findings(result) if "above the ring's" in f and "at 256 KiB" in f]
    result = run({"preset": "dgx-h100", "nodes": 1}, ["nccl_ring", "nvls", "auto"], ["64 MiB"])
    assert {r["algorithm"] for r in result.rows if r["requested"] == "auto"} == {"nvls"}
    [finding] = [f for f in algorithm_findings(result) if "above the ring's" in f]
    assert finding.startswith("**allreduce/nvls at 64 MiB on 8 ranks**")


def _rows(picks_by_preset, requested=None):
    from mpisim.report.records import RunResult

    rows = [{"collective": "allreduce", "algorithm": algorithm, "requested": requested or algorithm, "ranks": 16,
             "bytes": size, "time_s": size * 1.875 / (busbw * 1e9), "busbw_GBps": busbw,
             "algbw_GBps": busbw / 1.875, "topology.preset": preset}
            for preset, picks in picks_by_preset.items() for size, algorithm, busbw in picks]
    return RunResult(scenario={"name": "x", "sweep": {"topology.preset": list(picks_by_preset)}}, rows=rows)


MiB, GiB = 2**20, 2**30


def test_beyond_the_ring_is_not_claimed_against_another_size():
    """auto over two presets: the tree ran at sizes where the ring did not, so there is nothing like to compare."""
    from mpisim.report.findings import beyond_ring_findings

    result = _rows({"dgx-h100": [(MiB, "nccl_tree", 36.06), (16 * MiB, "nccl_ring", 282.9), (GiB, "nccl_tree", 394.4)],
                    "dgx-a100": [(MiB, "nccl_ring", 18.76), (16 * MiB, "nccl_tree", 119.2), (GiB, "nccl_tree", 248.5)]},
                   requested="auto")
    assert beyond_ring_findings(result) == []
    assert not [f for f in algorithm_findings(result) if "above the ring's" in f]


def test_beyond_the_ring_compares_the_same_size_at_the_same_sweep_point():
    from mpisim.report.findings import beyond_ring_findings

    result = _rows({"dgx-h100": [(16 * MiB, "nccl_ring", 282.9), (GiB, "nccl_ring", 270.0), (GiB, "nccl_tree", 394.4)],
                    "dgx-a100": [(GiB, "nccl_tree", 248.5)]})  # no ring at this point: the h100's ring is no yardstick
    assert beyond_ring_findings(result) == [
        "**allreduce/nccl_tree at 1 GiB on 16 ranks (dgx-h100)** shows a bus bandwidth of 394.4 GB/s, above the "
        "ring's 270 GB/s at the same size: between nodes the tree sends each node's partial sums up once and the "
        "result down once, so on few nodes its NICs carry fewer bytes than the ring's 2(p-1)/p n (NCCL's "
        "maintainers note that on 2 nodes the tree can exceed the network bound). Bus bandwidth counts the ring's "
        "traffic, so it can exceed the links' rate while no link carries more than its capacity."]
    # Above the ring at its size, but not above the best the ring reaches at this point: no sentence, as before.
    result = _rows({"dgx-h100": [(16 * MiB, "nccl_ring", 282.9), (GiB, "nccl_ring", 200.0), (GiB, "nccl_tree", 250.0)]})
    assert beyond_ring_findings(result) == []


def test_a_tie_is_called_a_tie_not_1_00x_faster():
    """On the teaching network at 1 MiB, Rabenseifner and the ring differ by 0.4%: a tie."""
    result = run_scenario(load_dict({
        "name": "x", "topology": {"nodes": 4, "ranks_per_node": 1,
                                  "inter": {"kind": "full", "bandwidth": "1 GB/s", "latency": "1 us"}},
        "network": {"model": "analytic"}, "payload": "size",
        "workload": {"kind": "collective", "collective": "allreduce", "algorithm": ["ring", "rabenseifner"],
                     "sizes": ["1 MiB"]}}))
    times = {r["algorithm"]: r["time_s"] for r in result.rows}
    assert 1 < times["ring"] / times["rabenseifner"] < 1.005
    [finding] = algorithm_findings(result)
    assert "1.00x" not in finding and "**rabenseifner** ties with ring (within 0.5%)" in finding


def test_a_deadlock_reports_findings_start_with_the_failure_not_link_utilisation():
    from pathlib import Path

    from mpisim.report.findings import all_findings
    from mpisim.scenario import load_file

    scenario = Path(__file__).resolve().parents[2] / "scenarios" / "head-to-head-deadlock.yaml"
    result = run_scenario(load_file(scenario))
    assert result.failure is not None and result.failure.get("kind") == "deadlock"
    findings = all_findings(result, list(result.records), list(result.records))
    assert findings[0].startswith("**The simulated program failed")
