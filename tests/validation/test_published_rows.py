"""The calibration rows of published.md (C1-C8): every one within 15 %, the median under 8 %, C8 within 10 %.

The validation scenarios (scenarios/validation/*.yaml) reproduce each measurement's setup and
state the measured values in their ``expect:`` blocks; ``mpisim.validation`` runs them and
writes reports/validation.md. These tests hold the predictions to the tolerances and the
committed report to what the documented command generates.
"""

from __future__ import annotations

import statistics

import pytest

from mpisim.scenario import load_file
from mpisim.validation import published as validation

pytestmark = pytest.mark.first  # its fixture runs every validation scenario: minutes

ROWS = ("C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8a", "C8b", "C8c")


@pytest.fixture(scope="module")
def generated():
    """The report's text and the checks behind it, generated once for the module."""
    return validation.generate()


@pytest.mark.slow  # the generated fixture runs every validation scenario
def test_every_calibration_row_is_reproduced(generated):
    _, checks = generated
    assert sorted({c.row for c in checks if c.calibration}) == list(ROWS)


@pytest.mark.slow  # the generated fixture runs every validation scenario
@pytest.mark.parametrize("row", [*ROWS, "H1", "H2", "H3", "H5", "H10"])
def test_row_within_fifteen_percent(generated, row):
    """published.md's rows, and the other published rows (H...) except H4's small size, below."""
    _, checks = generated
    for check in (c for c in checks if c.row == row):
        assert abs(check.error) <= validation.TOLERANCE, (
            f"{check.scenario} at {check.point}: measured {check.measured:.6g}, predicted "
            f"{check.predicted:.6g} ({check.error:+.1%})"
        )


@pytest.mark.slow  # the generated fixture runs every validation scenario
def test_multinode_bandwidth_points_within_fifteen_percent(generated):
    """Across nodes, every point but H4's known misses is within 15 %.

    H4's points are the known misses: its 1 MiB ring (40 ranks, latency-bound) and its 1 GiB
    tree (the simulation's credit hold); the report's multi-node section says why, and this test
    would see any new one. Rows H6-H13 (NCCL's own choice on 2 to 128 nodes: AWS p5 and p4de, two
    GB200 racks, HGX H100 clusters on InfiniBand and RoCE) are the measurements the GPU-fabric work
    is to meet -- mid sizes across nodes, trees and NVLS across nodes -- and are held to the
    report, not yet to 15 %.
    """
    _, checks = generated
    multinode = [c for c in checks if c.multinode]
    fabric_rows = {"H6", "H7", "H8", "H9", "H11", "H12", "H13"}
    assert {c.row for c in multinode} >= {"C7", "H3", "H4", "H5"} | fabric_rows
    known = {("H4", "1 MiB", "nccl_ring, LL"), ("H4", "1 GiB", "nccl_tree, Simple")}
    misses = {(c.row, c.point, c.model) for c in multinode
              if abs(c.error) > validation.TOLERANCE and c.row not in fabric_rows}
    assert misses <= known, [(c.row, c.point, c.model, f"{c.error:+.1%}") for c in multinode]


@pytest.mark.slow  # the generated fixture runs every validation scenario
def test_report_has_the_multinode_section_with_its_summary(generated):
    text, checks = generated
    median, worst = validation.multinode_summary(checks)
    section = text.split("## Multi-node GPU collectives", 1)[1].split("\n## ", 1)[0]
    assert f"median absolute error {median * 100:.1f} %, worst {abs(worst.error) * 100:.1f} %" in section
    for check in (c for c in checks if c.multinode):
        assert f"| {check.row} | {check.hardware} | {check.nodes} nodes x {check.ranks} ranks | {check.point} |" in section


@pytest.mark.slow  # the generated fixture runs every validation scenario
def test_megatron_rows_within_ten_percent_with_one_efficiency(generated):
    """Hybrid-parallel training (C8a-c, Megatron-LM Table 1): TFLOP/s per GPU within 10 %, one efficiency."""
    _, checks = generated
    c8 = [c for c in checks if c.row.startswith("C8")]
    assert len(c8) == 3 and all(abs(c.error) <= 0.10 for c in c8), [(c.row, f"{c.error:+.1%}") for c in c8]
    efficiencies = {load_file(path).workload.params.efficiency for path in validation.validation_scenarios()
                    if path.name.startswith("c8")}
    assert len(efficiencies) == 1


@pytest.mark.slow  # the generated fixture runs every validation scenario
def test_median_error_under_eight_percent(generated):
    _, checks = generated
    median = statistics.median(abs(c.error) for c in checks if c.calibration)
    assert median < validation.MEDIAN_TOLERANCE
    assert validation.summary(checks)[0] == median


@pytest.mark.slow  # the generated fixture runs every validation scenario
def test_committed_report_is_what_the_command_generates(generated):
    text, _ = generated
    committed = validation.validation_dir().parents[1] / validation.DEFAULT_OUTPUT
    assert committed.read_text(encoding="utf-8") == text, f"stale report; regenerate it with: {validation.COMMAND}"


@pytest.mark.slow  # the generated fixture runs every validation scenario
def test_report_states_the_summary_line(generated):
    text, checks = generated
    median, worst = validation.summary(checks)
    assert f"median absolute error {median * 100:.1f} %, worst {abs(worst.error) * 100:.1f} %" in text


@pytest.mark.parametrize("path", validation.validation_scenarios(), ids=lambda p: p.stem)
def test_scenario_names_its_row_and_states_measurements(path):
    """Each scenario's description starts with its row, and its expectations are the measured values."""
    scenario = load_file(path)
    row, hardware, benchmark, source = scenario.description.split(" | ")
    assert row.upper() == path.stem.split("-")[0].upper() and hardware and benchmark and source
    assert row in ROWS or row.startswith(("H", "T"))  # T: training rows on the default compute model
    assert scenario.name == path.stem
    assert scenario.expect and all(e.check == "approx" and e.rel == validation.TOLERANCE for e in scenario.expect)


def test_error_is_relative_to_the_measurement():
    check = validation.Check("C0", "s", "h", "b", "src", "1 B", "time_s", measured=2.0, predicted=2.5, model="m")
    assert check.error == pytest.approx(0.25)
