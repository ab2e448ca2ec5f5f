"""The pytest plugin, as a CI pipeline uses it: the shipped nightly gate, its baseline, and three
deliberate changes that each fail naming the changed input and the signed change.

Each case runs a small test file in a scratch pytest session (pytester) over a copy of
``scenarios/nightly-300m-64gpu.yaml`` and its baseline file.
"""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from mpisim.scenario.baseline import baseline_path

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
NIGHTLY = ROOT / "scenarios" / "nightly-300m-64gpu.yaml"

TEST_FILE = '''
from mpisim.testing import assert_expectations

def test_nightly(mpisim_run):
    assert_expectations(mpisim_run("nightly-300m-64gpu.yaml"{overrides}))
'''


def _plugin_args() -> list[str]:
    """Load the plugin by name unless the installed entry point already does."""
    installed = any(ep.value == "mpisim.pytest_plugin" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "mpisim.pytest_plugin"]


@pytest.fixture
def nightly(pytester):
    """A scratch directory with the nightly scenario and its baseline file."""
    shutil.copy(NIGHTLY, pytester.path / NIGHTLY.name)
    shutil.copy(baseline_path(NIGHTLY), baseline_path(pytester.path / NIGHTLY.name))
    return pytester


def _run(pytester, overrides: str = "", *args: str):
    pytester.makepyfile(test_nightly=TEST_FILE.format(overrides=overrides))
    return pytester.runpytest(*_plugin_args(), "-p", "no:cacheprovider", *args)


def test_the_shipped_nightly_passes_its_gates(nightly):
    result = _run(nightly)
    result.assert_outcomes(passed=1)


@pytest.mark.slow  # three full pytest runs of the nightly scenario
@pytest.mark.parametrize(
    ("overrides", "changed", "signed"),
    [
        # 10 % less bandwidth on the preset's inter-node links: the sync gets slower.
        (', **{"topology.inter.bandwidth": "360 Gbps"}',
         "topology.inter.bandwidth: 50 GB/s -> 45 GB/s (-10%)", "got 12.5 ms (+5.2"),
        # Another algorithm: the flat ring crosses the nodes' NICs one at a time.
        (', **{"workload.sync": "ring"}', "workload.sync: hierarchical -> ring", "(+344%"),
        # Half the bytes: faster than the baseline by far more than 2 %, which fails too.
        (', **{"workload.dtype": "float16"}', "workload.dtype: float32 -> float16", "(-48.8%"),
    ],
    ids=["preset-bandwidth-10pc", "algorithm", "dtype"],
)
def test_a_deliberate_change_fails_naming_the_input(nightly, overrides, changed, signed):
    result = _run(nightly, overrides)
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    gates = [line for line in text.splitlines() if "inputs that differ from the baseline's" in line]
    # Only that input (besides the code, which commits change): a baseline left stale by a
    # change of the inputs elsewhere (a preset's new key) would list more.
    code = ("mpisim code: changed", "algorithm registry: ")
    listed = [[item for item in line.split("inputs that differ from the baseline's: ")[1].strip().split("; ")
               if not item.startswith(code)] for line in gates]
    assert gates and all(items == [changed] for items in listed), gates
    assert any(signed in line and "comm_time_s" in line and "the baseline 11.9 ms" in line for line in gates)


def test_a_changed_preset_file_is_named(tmp_path, monkeypatch):
    """Editing the preset itself (not overriding it) names both the value and the file."""
    from mpisim.network import presets
    from mpisim.scenario import load_file, run_scenario

    copy = tmp_path / "topologies"
    shutil.copytree(presets.preset_dir(), copy)
    text = (copy / "dgx-h100.yaml").read_text()
    assert "400 Gbps" in text
    (copy / "dgx-h100.yaml").write_text(text.replace("400 Gbps", "360 Gbps"))
    monkeypatch.setattr(presets, "preset_dir", lambda: copy)
    for path in (NIGHTLY, baseline_path(NIGHTLY)):
        shutil.copy(path, tmp_path / path.name)
    result = run_scenario(load_file(tmp_path / NIGHTLY.name))
    failed = [exp for exp in result.expectations if not exp["passed"]]
    assert [exp["check"] for exp in failed] == ["max_increase"]
    assert "topology.inter.bandwidth: 50 GB/s -> 45 GB/s (-10%)" in failed[0]["changed_inputs"]
    assert any(line.startswith("preset dgx-h100: its file changed") for line in failed[0]["changed_inputs"])


def test_mpisim_update_refreshes_a_stale_baseline(nightly):
    path = nightly.path / NIGHTLY.name
    stale = path.read_text().replace("baseline: 11.86 ms", "baseline: 10 ms")
    path.write_text(stale)
    _run(nightly).assert_outcomes(failed=1)
    result = _run(nightly, "", "--mpisim-update")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*mpisim baselines*", "-*baseline: 10 ms*", "+*baseline: 11.86 ms*"])
    assert path.read_text() == NIGHTLY.read_text()  # back to the shipped file, byte for byte
    _run(nightly).assert_outcomes(passed=1)


def test_modelled_times_are_junit_properties(nightly):
    result = _run(nightly, "", "--junitxml=report.xml")
    result.assert_outcomes(passed=1)
    tree = ET.parse(nightly.path / "report.xml")
    props = {p.get("name"): float(p.get("value")) for p in tree.iter("property")}
    name = "mpisim.nightly-300m-64gpu[algorithm=hierarchical,ranks=64,bytes=1.2 GB].comm_time_s"
    assert props[name] == pytest.approx(11.86e-3, rel=1e-3)
    assert any(key.endswith(".iteration_time_s") for key in props)


def test_a_dict_scenario_runs(pytester):
    pytester.makepyfile(test_dict='''
def test_dict(mpisim_run):
    result = mpisim_run({"topology": "seed-1gbps", "payload": "size",
                         "workload": {"kind": "collective", "collective": "allreduce",
                                      "algorithm": "ring", "sizes": ["1.2 GB"]}},
                        **{"topology.nodes": 10})
    assert abs(result.rows[0]["time_s"] - 2.16) < 0.01
''')
    pytester.runpytest(*_plugin_args(), "-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_the_readme_example_runs(nightly):
    """README "Regression tests in CI": its pytest file passes against the shipped scenario."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Regression tests in CI", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    (nightly.path / "scenarios").mkdir()
    for name in (NIGHTLY.name, baseline_path(NIGHTLY).name):
        (nightly.path / name).rename(nightly.path / "scenarios" / name)
    nightly.makepyfile(test_readme_example=block)
    nightly.runpytest(*_plugin_args(), "-p", "no:cacheprovider").assert_outcomes(passed=2)
