"""A sweep has a bound: 10^6 or 10^9 points are refused in one line, at once, in bounded memory."""

from __future__ import annotations

import time

import pytest

from tests.hostile.helpers import cli, one_line_exit_2


@pytest.mark.parametrize("axes", [(1000, 1000), (1000, 1000, 1000)])
def test_a_huge_sweep_is_refused_before_any_point_is_built(tmp_path, axes):
    file = tmp_path / "s.yaml"
    sweep = "".join(f"  {key}: [{', '.join(str(i + 1) for i in range(n))}]\n"
                    for key, n in zip(("topology.nodes", "seed", "workload.iterations"), axes, strict=False))
    file.write_text("topology: {preset: ib-hdr, nodes: 2}\n"
                    "workload: {kind: collective, collective: allreduce, sizes: [1 KiB]}\nsweep:\n" + sweep)
    started = time.perf_counter()
    code, _, err = cli("check", str(file))
    one_line_exit_2(code, err, f"{file}: sweep: a grid of {' x '.join(map(str, axes))}", "at most 10,000")
    assert time.perf_counter() - started < 10
