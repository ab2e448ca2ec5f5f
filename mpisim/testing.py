"""Helpers for checking mpisim results in pytest, the same checks ``mpisim run`` makes.

A scenario's ``expect:`` block already says what must hold; these helpers run a scenario file
from a test and turn failed expectations into readable assertion errors::

    from mpisim.testing import assert_close, assert_expectations, assert_verified, run_scenario_file

    def test_ring_allreduce_scales():
        result = run_scenario_file("scenarios/ring-allreduce.yaml", **{"topology.nodes": 8})
        assert_expectations(result)          # the file's own expect: block
        assert_verified(result)              # every result matched numpy
        big = [row for row in result.rows if row["bytes"] == 2**30][0]
        assert_close(big["busbw_GBps"], 21.3, rel=0.02)

Numbers in rows are SI (seconds, bytes, bytes per second) except the ``*_GBps`` columns,
which are GB/s as nccl-tests prints them.

In a pytest suite the ``mpisim_run`` fixture of :mod:`mpisim.pytest_plugin` (installed with
mpisim) runs scenarios too, puts their modelled times into the JUnit report and refreshes
baselines with ``pytest --mpisim-update``; a failed gate's message names the inputs that differ
from its baseline's (``topology.inter.bandwidth: 50 GB/s -> 45 GB/s (-10%)``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from mpisim.report.records import RunResult
from mpisim.scenario.load import load_file
from mpisim.scenario.run import run_scenario

__all__ = ["assert_close", "assert_expectations", "assert_tree_close", "assert_verified", "run_scenario_file"]


def run_scenario_file(path: str | os.PathLike[str], *, jobs: int = 1, **overrides: Any) -> RunResult:
    """Load the scenario file at *path*, apply *overrides*, run it and return the result.

    Overrides are dotted keys as with ``mpisim run --set``. Keyword names cannot contain dots,
    so write them with double underscores, or pass a dict::

        run_scenario_file("s.yaml", seed=3, payload="size", topology__nodes=8)
        run_scenario_file("s.yaml", **{"topology.nodes": 8, "mpi.eager_limit": "8 KiB"})

    Sweep points run in this process unless *jobs* says otherwise. Raises ConfigError for an
    invalid scenario and MPIError when the simulated program fails unexpectedly.
    """
    pairs = [(key.replace("__", "."), value) for key, value in overrides.items()]
    return run_scenario(load_file(path, pairs), jobs=jobs)


def assert_expectations(result: RunResult) -> None:
    """Assert that every expectation of the scenario passed, listing the failures otherwise.

    >>> assert_expectations(result)   # doctest: +SKIP
    AssertionError: 1 of 2 expectations failed:
      expected time_s ~ 2.16 s (rel 1%) where bytes=1.2 GB, got 2.21 s (+2.3%)
    """
    failed = result.failed_expectations
    if failed:
        lines = "\n".join(f"  {exp.get('detail', exp)}" for exp in failed)
        raise AssertionError(f"{len(failed)} of {len(result.expectations)} expectations failed:\n{lines}")


def assert_verified(result: RunResult) -> None:
    """Assert that every row carrying a ``verified`` result is true, and that some row does.

    Rows have ``verified: null`` in size-only mode, where there is nothing to compare; a result
    without any verified row fails here, because a test asking for verification wants data.
    """
    checked = [row for row in result.rows if row.get("verified") is not None]
    if not checked:
        raise AssertionError("no row carries a verified result (was the scenario run with payload: size?)")
    wrong = [row for row in checked if row.get("verified") is not True]
    if wrong:
        shown = "\n".join(f"  {row}" for row in wrong[:5])
        raise AssertionError(f"{len(wrong)} of {len(checked)} rows are not verified:\n{shown}")


def assert_close(value: float, expected: float, *, rel: float = 1e-9, abs: float = 0.0) -> None:
    """Assert ``|value - expected| <= max(rel * |expected|, abs)``, saying by how much it missed.

    >>> assert_close(2.21, 2.16, rel=0.01)
    Traceback (most recent call last):
    AssertionError: 2.21 is not within rel 1% of 2.16 (off by +2.31%)
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise AssertionError(f"{value!r} is not a number (expected about {expected!r})")
    allowed = max(rel * math.fabs(expected), abs)
    if math.fabs(value - expected) <= allowed:
        return
    tolerance = " or ".join(t for t in (f"rel {rel * 100:g}%" if rel else "", f"abs {abs:g}" if abs else "") if t)
    off = f" (off by {(value - expected) / math.fabs(expected) * 100:+.3g}%)" if expected else ""
    raise AssertionError(f"{value!r} is not within {tolerance or 'exact equality'} of {expected!r}{off}")


def assert_tree_close(actual: Any, expected: Any, *, rel: float = 1e-9, path: str = "") -> None:
    """Assert that two JSON-like trees are equal, numbers to a relative *rel* (demes' dict_isclose).

    Mappings must have the same keys and lists the same length; the message names the first
    path where they differ (``rows[3].time_s``).
    """
    where = path or "(root)"
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            raise AssertionError(f"{where}: expected a mapping, got {actual!r}")
        if set(actual) != set(expected):
            missing, extra = sorted(set(expected) - set(actual)), sorted(set(actual) - set(expected))
            raise AssertionError(f"{where}: keys differ; missing {missing}, unexpected {extra}")
        for key in expected:
            assert_tree_close(actual[key], expected[key], rel=rel, path=f"{path}.{key}" if path else str(key))
        return
    if isinstance(expected, Sequence) and not isinstance(expected, str):
        if not isinstance(actual, Sequence) or isinstance(actual, str) or len(actual) != len(expected):
            raise AssertionError(f"{where}: expected a list of {len(expected)}, got {actual!r:.200}")
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_tree_close(a, e, rel=rel, path=f"{path}[{i}]")
        return
    numbers = (int, float)
    if isinstance(expected, numbers) and not isinstance(expected, bool):
        if isinstance(actual, bool) or not isinstance(actual, numbers):
            raise AssertionError(f"{where}: expected {expected!r}, got {actual!r}")
        if not math.isclose(actual, expected, rel_tol=rel, abs_tol=0.0):
            raise AssertionError(f"{where}: expected {expected!r}, got {actual!r} (rel {rel:g})")
        return
    if actual != expected:
        raise AssertionError(f"{where}: expected {expected!r}, got {actual!r}")
