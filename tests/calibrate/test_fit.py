"""Fits against the published rows (C1-C4) and against mpisim's own output (round trip)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from mpisim.calibrate import nccl, osu
from mpisim.calibrate.fit import fit
from mpisim.calibrate.model import get, put, si_value
from mpisim.calibrate.run import calibrate
from mpisim.network.presets import load_preset
from tests.calibrate.writers import mpisim_rows, nccl_text, osu_text

# Each test fits a preset: tens of simulated runs per fit, a minute of the suite in all.
pytestmark = pytest.mark.slow

DATA = Path(__file__).parent / "data"


def files(prefix: str) -> list[str]:
    return sorted(str(p) for p in DATA.glob(f"{prefix}*.txt"))


@functools.cache
def published(prefix: str, base: str, nodes: int | None = None):
    """The fit of a published row's files (each is fitted once per test session)."""
    return calibrate(files(prefix), base, nodes=nodes)


def params(result):
    return {fp.param.name: fp for fp in result.params}


@pytest.fixture(scope="module")
def c4():
    return published("c4", "cloud-100g-tcp")


@pytest.mark.parametrize(("prefix", "base", "nodes", "tolerance"), [
    ("c2", "ib-hdr", None, 0.05),
    ("c3", "roce-100g", None, 0.05),
    ("c1", "dgx-a100", 1, 0.10),
])
def test_published_rows_are_reproduced(prefix, base, nodes, tolerance):
    result = published(prefix, base, nodes)
    assert len(result.points) == {"c1": 5, "c2": 3, "c3": 2}[prefix]
    for point in result.points:
        assert abs(point.error) <= tolerance, (point.point, point.error)
    assert not result.warnings


def test_c2_reports_what_its_points_cannot_identify():
    # Two eager ping-pongs see the wire latency and the overheads only as a sum: the overheads
    # keep ib-hdr's value and say why; the NVLink-free shared-memory fabric is not touched.
    got = params(published("c2", "ib-hdr"))
    overheads = got["mpi.send_overhead + mpi.recv_overhead"]
    assert not overheads.fitted and "cannot tell it from inter.latency" in overheads.reason
    assert got["inter.efficiency"].fitted
    assert got["inter.efficiency"].value == pytest.approx(23477e6 / 25e9, rel=0.002)  # C2: 23477 MB/s of 25 GB/s
    assert any("c2_osu_mbw_mr.txt:4" in name for name in got["inter.efficiency"].determined_by)


def test_c1_fits_nvlink_and_ll_and_keeps_the_rest():
    got = params(published("c1", "dgx-a100", 1))
    assert got["intra.efficiency"].fitted and got["intra.protocols.LL.latency"].fitted
    assert not got["base_latency.LL"].fitted  # one rank count: a per-call cost moves as the per-hop one does
    assert 0.75 < got["intra.efficiency"].value < 0.82  # C1: 234.89 GB/s busbw of 300 GB/s NVLink3


def test_c4_tcp_fit_reproduces_the_bibw_cap(c4):
    got = params(c4)
    cap = got["inter.host_bandwidth"]
    assert cap.base is None and cap.fitted  # the base has no cap; C4b's bibw asks for one
    assert 0.95 * 5826.52e6 < cap.value < 1.1 * 5939.5e6
    by_test = {p.series.test: p for p in c4.points if p.series.test in ("bandwidth", "bibw")}
    assert abs(by_test["bibw"].error) < 0.05 and abs(by_test["bandwidth"].error) < 0.05
    assert by_test["bibw"].base_error > 0.9  # without the cap the base predicts twice the measured bibw


def test_c4_points_within_5_percent_but_the_4_mib_ping_pong_which_is_flagged(c4):
    # The TCP ping-pong's slope from 1 to 4 MiB (6.9 GB/s) is steeper than what streaming
    # (5.94 GB/s) and bibw (5.83 GB/s) allow through one host cap: no choice of the model's
    # parameters meets all three within 5 %. The fit says so instead of hiding it.
    for point in c4.points:
        if point.series.test == "latency" and point.point.nbytes == 4 * 2**20:
            assert 0.05 < abs(point.error) < 0.08
            assert any("c4_osu_latency.txt:8" in w and "cannot follow" in w for w in c4.warnings)
        else:
            assert abs(point.error) <= 0.05, (point.point, point.error)
    assert max(abs(p.error) for p in c4.points) < max(abs(p.base_error) for p in c4.points) / 10


# --- round trip: mpisim's own output, fitted back -------------------------------------------------


def _truth(base: str, values: dict[str, object]) -> dict:
    preset = load_preset(base)
    for key, value in values.items():
        put(preset, key, value)
    return preset


def _check_round_trip(result, truth, base, kinds):
    fitted = params(result)
    for name, kind in kinds.items():
        fp = fitted[name]
        assert fp.fitted, (name, fp.reason)
        expected = si_value(kind, get(truth, name.split(" + ")[0]))
        assert fp.value == pytest.approx(expected, rel=0.01), name
    for fp in result.params:  # what the data cannot identify stays at the base, which equals the truth there
        if not fp.fitted and fp.base is not None:
            assert fp.value == pytest.approx(fp.base, rel=1e-12)
            assert get(truth, fp.param.keys[0]) == get(load_preset(base), fp.param.keys[0])


def test_round_trip_osu_latency_and_bandwidth():
    truth = _truth("ib-hdr", {"inter.latency": "1.9 us", "inter.efficiency": 0.85, "mpi.send_overhead": "0.3 us",
                              "mpi.recv_overhead": "0.3 us", "mpi.copy_bandwidth": "3 GB/s",
                              "mpi.eager_limit_inter": "8 KiB"})
    series = []
    for test in ("latency", "bandwidth"):
        sizes = (["0 B"] if test == "latency" else []) + [f"{4**i} B" for i in range(12)]
        rows = mpisim_rows(truth, {"kind": "p2p", "test": test, "sizes": sizes}, 2, 1)
        series.append(osu.parse(osu_text(test, rows), f"osu_{test}.txt"))
    result = fit(series, load_preset("ib-hdr"), "ib-hdr", nodes=2, ranks_per_node=1)
    _check_round_trip(result, truth, "ib-hdr", {
        "inter.latency": "time", "inter.efficiency": "fraction", "mpi.send_overhead + mpi.recv_overhead": "time",
        "mpi.copy_bandwidth": "bandwidth"})
    # The knee: 4 KiB went eagerly and 16 KiB by rendezvous; the base's 12 KiB fits that, and is kept.
    (eager,) = result.eager
    assert (eager.value, eager.fitted) == (12288, False) and "between 4096 B (eager) and 16384 B" in eager.reason
    assert max(result.errors(False)) < 0.005  # OSU prints two decimals: the only noise


def test_round_trip_finds_a_moved_knee():
    truth = _truth("ib-hdr", {"mpi.eager_limit_inter": "64 KiB"})
    rows = mpisim_rows(truth, {"kind": "p2p", "test": "latency", "sizes": [f"{4**i} B" for i in range(11)]}, 2, 1)
    result = fit([osu.parse(osu_text("latency", rows), "osu_latency.txt")], load_preset("ib-hdr"), "ib-hdr",
                 nodes=2, ranks_per_node=1)
    (eager,) = result.eager
    assert eager.fitted and eager.value == 65536 and "between 65536 B (eager) and 262144 B" in eager.reason


def test_round_trip_nccl_allreduce_on_one_dgx():
    truth = _truth("dgx-a100", {"intra.efficiency": 0.72, "intra.protocols.LL.latency": "2.4 us",
                                "intra.protocols.LL.efficiency": 0.16, "intra.protocols.Simple.latency": "11 us"})
    workload = {"kind": "collective", "collective": "allreduce", "algorithm": "auto",
                "sizes": {"min": "8 B", "max": "512 MiB", "factor": 4}}
    rows = mpisim_rows(truth, workload, 1, 8)
    series = nccl.parse(nccl_text("all_reduce_perf", rows, 8, ["box"]), "all_reduce_perf.txt")
    assert (series.ranks, series.nodes) == (8, 1)
    result = fit([series], load_preset("dgx-a100"), "dgx-a100", nodes=1, ranks_per_node=8)
    _check_round_trip(result, truth, "dgx-a100", {
        "intra.efficiency": "fraction", "intra.protocols.LL.latency": "time", "intra.protocols.LL.efficiency": "fraction",
        "intra.protocols.Simple.latency": "time"})


def test_round_trip_osu_collectives_on_eight_nodes():
    # osu_allreduce (MPI_FLOAT), osu_allgather and osu_alltoall (per-rank sizes), osu_bcast: MPICH's
    # algorithms over the star, fitted back to the wire latency and efficiency that made them.
    truth = _truth("ib-hdr", {"inter.latency": "2.5 us", "inter.efficiency": 0.8})
    titles = {"allreduce": "Allreduce", "allgather": "Allgather", "bcast": "Broadcast",
              "alltoall": "All-to-All Personalized Exchange"}
    series = []
    for coll, title in titles.items():
        per_rank = [4 * 4**i for i in range(9)]
        scale = 8 if coll in ("allgather", "alltoall") else 1
        dtype = "float32" if coll == "allreduce" else "uint8"
        rows = mpisim_rows(truth, {"kind": "collective", "collective": coll, "algorithm": "auto", "dtype": dtype,
                                   "sizes": [f"{s * scale} B" for s in per_rank]}, 8, 1)
        datatype = "MPI_FLOAT" if dtype == "float32" else "MPI_CHAR"
        text = (f"# OSU MPI {title} Latency Test v7.3\n# Datatype: {datatype}.\n# Size       Avg Latency(us)\n"
                + "".join(f"{s:<10d}{r['time_s'] * 1e6:>14.2f}\n" for s, r in zip(per_rank, rows, strict=True)))
        series.append(osu.parse(text, f"osu_{coll}.txt", ranks=8))
    result = fit(series, load_preset("ib-hdr"), "ib-hdr", nodes=8, ranks_per_node=1)
    fitted = params(result)
    assert fitted["inter.latency"].value == pytest.approx(2.5e-6, rel=0.01)
    assert fitted["inter.efficiency"].value == pytest.approx(0.8, rel=0.01)
    assert max(result.errors(False)) < 0.005


def test_holdout_predicts_the_points_it_left_out():
    truth = _truth("ib-hdr", {"inter.latency": "2.2 us", "mpi.copy_bandwidth": "4 GB/s"})
    rows = mpisim_rows(truth, {"kind": "p2p", "test": "latency", "sizes": [f"{2**i} B" for i in range(0, 20, 2)]}, 2, 1)
    series = [osu.parse(osu_text("latency", rows), "osu_latency.txt")]
    result = fit(series, load_preset("ib-hdr"), "ib-hdr", nodes=2, ranks_per_node=1, holdout=0.2)
    held = [p for p in result.points if p.held_out]
    assert len(held) == 2 and len(result.points) == 10
    assert max(result.errors(True)) < 0.01  # the truth is in the model: unseen points are predicted too
    again = fit(series, load_preset("ib-hdr"), "ib-hdr", nodes=2, ranks_per_node=1, holdout=0.2)
    assert [p.point for p in again.points if p.held_out] == [p.point for p in held]  # seeded: the same draw


def test_c4_says_which_measurements_disagree(c4):
    # The ping-pong's slope from 1 to 4 MiB beats the host cap bibw shows: named, with both files.
    (line,) = [w for w in c4.warnings if "cannot outrun" in w]
    assert line.startswith("c4_osu_latency.txt:7-8") and "c4b_osu_bibw.txt:3" in line and "6.91 GB/s" in line


def test_host_capped_round_trip_has_no_disagreement():
    # mpisim's own ping-pong, bw and bibw on a host-capped cluster are consistent by construction:
    # the check must stay quiet, and the cap is fitted back.
    truth = _truth("cloud-100g-tcp", {"inter.host_bandwidth": "6 GB/s"})
    series = []
    for test in ("latency", "bandwidth", "bibw"):
        sizes = ["0 B", "1 KiB", "64 KiB", "1 MiB", "4 MiB"] if test == "latency" else ["4 MiB"]
        rows = mpisim_rows(truth, {"kind": "p2p", "test": test, "sizes": sizes}, 2, 1)
        series.append(osu.parse(osu_text(test, rows), f"osu_{test}.txt"))
    result = fit(series, load_preset("cloud-100g-tcp"), "cloud-100g-tcp", nodes=2, ranks_per_node=1)
    assert not [w for w in result.warnings if "cannot outrun" in w]
    assert params(result)["inter.host_bandwidth"].value == pytest.approx(6e9, rel=0.01)
