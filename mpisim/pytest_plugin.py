"""The mpisim pytest plugin: scenarios as tests, baselines refreshed from pytest, times in JUnit.

Installed with mpisim (entry point ``pytest11``), it gives every test the ``mpisim_run``
fixture, a function that runs a scenario -- a file path, or a dict written like a scenario
file -- and returns its :class:`~mpisim.report.records.RunResult`::

    from mpisim.testing import assert_expectations

    def test_nightly_gradient_sync(mpisim_run):
        result = mpisim_run("scenarios/nightly-300m-64gpu.yaml")
        assert_expectations(result)        # the gates, with the inputs that changed if one fails

    def test_the_same_on_half_the_nodes(mpisim_run):
        result = mpisim_run({"topology": {"preset": "dgx-h100", "nodes": 4},
                             "payload": "size",
                             "workload": {"kind": "collective", "collective": "allreduce",
                                          "algorithm": "nccl_ring", "sizes": ["1.2 GB"]}})
        assert result.rows[0]["time_s"] < 10e-3

Keyword arguments are dotted overrides, as ``mpisim run --set`` takes them
(``mpisim_run(path, **{"topology.nodes": 4})``). A relative path is read from the directory
pytest runs in (its ``rootdir``-independent current directory), as the command would.

``pytest --mpisim-update`` runs each scenario *file* the fixture is given, without overrides,
and rewrites its ``expect:`` values from that run exactly as ``mpisim run FILE --update-expect``
does (gate baselines, and failing values; comments and layout kept; ``<stem>.baseline.json``
beside it). The tests then check the refreshed file, and the end of the session lists what
moved, as a diff. Review it and commit it like any other change.

Every modelled time of every row (the row keys ending in ``_s``) goes into the JUnit XML
report (``--junitxml``) as a property of the test, named ``mpisim.<scenario>[<row>].<key>``
(``mpisim.nightly-300m-64gpu[ranks=64].comm_time_s``), so a CI system can chart timings per
commit without parsing logs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from mpisim.report.records import RunResult


def _scenario() -> Any:
    """``mpisim.scenario``, imported on first use: pytest loads this plugin in every session of an
    environment where mpisim is installed (about 0.6 s of imports), and most sessions never ask for it."""
    import mpisim.scenario  # lazy: see the docstring (0.6 s that most pytest sessions never need)

    return mpisim.scenario

__all__ = ["mpisim_run", "property_name", "timing_properties"]

_UPDATES = pytest.StashKey[list]()

#: Row keys that identify a row (rather than measure it), in the order a property name shows them.
_IDENTITY_KEYS = ("collective", "algorithm", "test", "ranks", "bytes", "dtype")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mpisim")
    group.addoption("--mpisim-update", action="store_true", default=False,
                    help="rewrite the expect: values of scenario files run through the mpisim_run fixture "
                         "from this run (as mpisim run FILE --update-expect) and list the diffs")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_UPDATES] = []


def property_name(scenario: str, row: Mapping[str, Any], key: str, index: int) -> str:
    """``mpisim.<scenario>[<identifying keys of row>].<key>``; the row's index when nothing identifies it."""
    describe_where = _scenario().expect.describe_where
    ident = {k: row[k] for k in row if "." in k}  # swept keys first: they are what varies
    ident.update({k: row[k] for k in _IDENTITY_KEYS if k in row and row[k] is not None})
    label = describe_where(ident).replace(", ", ",") if ident else f"row {index}"
    return f"mpisim.{scenario}[{label}].{key}"


def timing_properties(result: RunResult) -> list[tuple[str, float]]:
    """(name, seconds) for every modelled time in *result*'s rows, in row order."""
    value_kind = _scenario().expect.value_kind
    name = str(result.scenario.get("name", "scenario"))
    out = []
    for i, row in enumerate(result.rows):
        for key, value in row.items():
            if value_kind(key) == "time" and isinstance(value, int | float) and not isinstance(value, bool):
                out.append((property_name(name, row, key, i), value))
    return out


@pytest.fixture
def mpisim_run(request: pytest.FixtureRequest) -> Callable[..., RunResult]:
    """Run a scenario (file path or dict) with optional dotted overrides; return its RunResult.

    With ``--mpisim-update``, a file run without overrides has its expectations rewritten from
    the run first, and the result returned is checked against the rewritten file.
    """
    update = request.config.getoption("--mpisim-update")

    def run(source: str | os.PathLike[str] | Mapping[str, Any], /, **overrides: Any) -> RunResult:
        scenario = _scenario()
        load_dict, load_file, run_scenario = scenario.load_dict, scenario.load_file, scenario.run_scenario
        pairs = [(key.replace("__", "."), value) for key, value in overrides.items()]
        if isinstance(source, Mapping):
            result = run_scenario(load_dict(source, overrides=pairs), jobs=1)
        else:
            result = run_scenario(load_file(source, pairs), jobs=1)
            if update and not pairs:
                result = _update(request.config, Path(source), result)
        # NOTE: what the record_property fixture does, without its warning under junit_family
        # xunit2 (pytest's default), which writes the properties all the same.
        request.node.user_properties.extend((name, repr(seconds)) for name, seconds in timing_properties(result))
        return result

    return run


def _update(config: pytest.Config, path: Path, result: RunResult) -> RunResult:
    """Rewrite *path*'s expectations from *result*; return *result* checked against the new file."""
    scenario = _scenario()
    explain_failed_gates, update_expect = scenario.baseline.explain_failed_gates, scenario.baseline.update_expect
    evaluate_all, load_file = scenario.expect.evaluate_all, scenario.load_file
    done = update_expect(path, result)
    if done.changed or done.baseline_written or done.skipped:
        config.stash[_UPDATES].append(done)
    scenario = load_file(path)
    result.expectations = evaluate_all(scenario.expect, result.rows) + [
        exp for exp in result.expectations if exp.get("check") == "expect_failure"]
    explain_failed_gates(result, path)
    return result


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    updates = config.stash.get(_UPDATES, [])
    if not config.getoption("--mpisim-update", default=False):
        return
    terminalreporter.section("mpisim baselines")
    if not updates:
        terminalreporter.write_line("every scenario's expectations hold as written; nothing to update")
        return
    for done in updates:
        if done.changed:
            terminalreporter.write(done.diff())
        if done.baseline_written is not None:
            terminalreporter.write_line(f"wrote {done.baseline_written}")
        for line in done.skipped:
            terminalreporter.write_line(f"{done.path}: {line}")
