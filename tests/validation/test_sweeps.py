"""The smoothness sweeps committed in reports/: what this code computes, monotone, about 1 % per 1 %."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mpisim.validation import sweeps

DOCUMENT = json.loads((Path(__file__).resolve().parents[2] / sweeps.DEFAULT_JSON).read_text(encoding="utf-8"))
SERIES = {s["name"]: s for s in DOCUMENT["series"]}
def test_the_committed_numbers_are_what_this_code_computes():
    """Re-run the cheapest point (nvls, 400 Gb/s) and compare it with the JSON, exactly."""
    series = SERIES["nvls on 8 x dgx-h100"]
    i = series["bandwidth_gbps"].index(400)
    fresh = sweeps.point_time(series["preset"], series["nodes"], series["algorithm"], DOCUMENT["size_bytes"], 400)
    assert fresh == series["time_by_bandwidth_s"][i], f"stale {sweeps.DEFAULT_JSON}; regenerate it with {sweeps.COMMAND}"


@pytest.mark.parametrize("name", list(SERIES))
def test_more_data_takes_longer_and_by_about_its_share(name):
    series = SERIES[name]
    monotone, worst = sweeps.steps(series["size_mib"], series["time_by_size_s"], rising=True)
    assert monotone
    assert worst <= 3.0  # per 1 % of size; above 1 only where a pipeline adds a segment


@pytest.mark.parametrize("name", list(SERIES))
def test_a_faster_network_is_not_slower_and_a_1_percent_change_moves_time_by_at_most_1_percent(name):
    series = SERIES[name]
    bandwidths, times = series["bandwidth_gbps"], series["time_by_bandwidth_s"]
    monotone, _ = sweeps.steps(bandwidths, times, rising=False)
    # x % more bandwidth saves at most x % of the time (all of it only if every byte waits on the
    # network), beyond the wobble of max-min sharing (nccl_tree's message path: segments of two
    # trees that meet on a NIC in another order, 0.002 % of the call at 402 Gb/s).
    for (b0, t0), (b1, t1) in zip(zip(bandwidths, times, strict=True), zip(bandwidths[1:], times[1:], strict=True),
                                  strict=False):
        assert t1 >= t0 * b0 / b1 * (1 - sweeps.MONOTONE_SLACK), (b0, t0, b1, t1)
    assert monotone  # within sweeps.MONOTONE_SLACK
    # Around the preset's own value (+-0.5 %) the series moves by less than 1 %: no jump at it.
    middle = len(times) // 2
    assert abs(times[middle + 1] / times[middle - 1] - 1) < 0.01
