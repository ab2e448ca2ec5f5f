"""Three small scenarios, run and rendered once per test session: an algorithm comparison, OSU, training.

Each fixture returns the output directory of ``write_outputs`` (results.json, CSV, report.md,
figures/, trace.json). They are small enough to render in a few seconds together.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mpisim.report.render import write_outputs
from mpisim.scenario import load_dict, run_scenario

STAR = {"nodes": 4, "ranks_per_node": 1, "inter": {"kind": "star", "bandwidth": "10 GB/s", "latency": "2 us"}}

COMPARE = {
    "name": "compare",
    "description": "ring against parameter server on a star",
    "topology": STAR,
    "trace": {"links": True},
    "workload": {"kind": "collective", "collective": "allreduce", "algorithm": ["ring", "parameter_server"],
                 "sizes": ["1 KiB", "64 KiB", "1 MiB"], "dtype": "int32"},
    "expect": [{"verified": True}],
}
OSU = {
    "name": "osu",
    "topology": {"nodes": 2, "inter": {"kind": "star", "bandwidth": "25 GB/s", "latency": "1.5 us"}},
    "mpi": {"eager_limit": "8 KiB"},
    "payload": "size",
    "workload": {"kind": "p2p", "test": ["latency", "bandwidth"], "sizes": ["0 B", "1 KiB", "8 KiB", "8193 B", "1 MiB"]},
}
TRAINING = {
    "name": "training",
    "topology": {"nodes": 2, "inter": {"kind": "star", "bandwidth": "10 Gbps", "latency": "5 us"}},
    "payload": "size",
    "workload": {"kind": "training", "params": "8M", "dtype": "float32", "compute": "20 ms", "sync": "ring",
                 "bucket_cap": "8 MiB"},
    "sweep": {"topology.inter.bandwidth": ["10 Gbps", "100 Gbps"], "topology.nodes": [1, 2, 4]},
}
SCENARIOS = {"compare": COMPARE, "osu": OSU, "training": TRAINING}


def render(raw: dict[str, Any], out_dir: Path) -> Path:
    """Run *raw* and write its report into *out_dir*."""
    result = run_scenario(load_dict(raw))
    write_outputs(result, out_dir)
    return out_dir


@pytest.fixture(scope="session")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Output directories of the three scenarios, by name."""
    base = tmp_path_factory.mktemp("reports")
    return {name: render(raw, base / name) for name, raw in SCENARIOS.items()}
