"""Golden tests: every shipped scenario runs and its summary matches tests/golden/<name>.json.

The summary holds the result rows, expectation outcomes, failure kind, notes and per-world
totals -- no wall-clock time, no version -- and numbers are compared to a relative 1e-9.
Each scenario must also pass its own ``expect:`` block; one that declares
``expect_failure: <kind>`` must fail exactly that way. And ``--update-expect`` from that same run
must leave the file (and its baseline file, if it has one) byte for byte as it is: nothing changed.

After a deliberate change to the numbers, rewrite the files with ``pytest --update-golden``
and say in the change why they moved.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mpisim.scenario import load_file, run_scenario
from mpisim.scenario.baseline import baseline_path, update_expect
from mpisim.testing import assert_expectations, assert_tree_close

ROOT = Path(__file__).resolve().parents[1]
SCENARIO_DIR = ROOT / "scenarios"
GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
SCENARIOS = sorted(SCENARIO_DIR.glob("*.yaml"))


@pytest.mark.slow  # every shipped scenario, run in full
@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_golden(path, request, tmp_path):
    scenario = load_file(path)
    result = run_scenario(scenario, jobs=1)
    _check_update_expect_round_trip(path, result, tmp_path)
    if scenario.expect_failure is not None:
        assert result.failure is not None, f"{path.name} declares expect_failure: {scenario.expect_failure} but ran"
        assert scenario.expect_failure in (result.failure["kind"], "mpi_error")
    else:
        assert result.failure is None
    assert_expectations(result)

    summary = json.loads(json.dumps(result.summary, sort_keys=True))
    golden = GOLDEN_DIR / f"{path.stem}.json"
    if request.config.getoption("--update-golden"):
        GOLDEN_DIR.mkdir(exist_ok=True)
        golden.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    assert golden.exists(), f"no golden file for {path.name}; create it with: pytest tests/test_golden.py --update-golden"
    assert_tree_close(summary, json.loads(golden.read_text()), rel=1e-9)


def _check_update_expect_round_trip(path, result, tmp_path):
    """--update-expect on a copy, from this run: both files come out byte-identical."""
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    if baseline_path(path).exists():
        shutil.copy(baseline_path(path), baseline_path(copy))
    update = update_expect(copy, result)
    assert update.changes == [] and update.skipped == [], update.changes + update.skipped
    assert copy.read_bytes() == path.read_bytes()
    if baseline_path(path).exists():
        assert baseline_path(copy).read_bytes() == baseline_path(path).read_bytes()


def test_every_golden_file_belongs_to_a_scenario():
    """A renamed or deleted scenario must take its golden file with it."""
    orphans = sorted(p.name for p in GOLDEN_DIR.glob("*.json") if not (SCENARIO_DIR / f"{p.stem}.yaml").exists())
    assert orphans == []
