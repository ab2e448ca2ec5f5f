"""Workload tests: parse, dump round trips, and runs on tiny worlds built like the scenario layer builds them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mpisim.workloads.base import RunContext
from tests.conftest import make_world

REPO = Path(__file__).resolve().parents[2]
PROGRAMS = REPO / "scenarios" / "programs"


def context(p: int = 2, *, payload: str = "data", seed: int = 0, base_dir: Path = REPO, **world: Any) -> RunContext:
    """A RunContext whose every measurement point gets a fresh ``make_world(p, **world)``."""
    return RunContext(new_world=lambda: make_world(p, **world), payload=payload, seed=seed, base_dir=base_dir)
