"""Layers import downward only (DESIGN.md): a walk over every ``import`` in the package, lazy ones included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mpisim"

BASE = {"errors", "__version__"}
ALLOWED = {
    "engine": BASE | {"engine"},
    "network": BASE | {"engine", "network"},
    "mpi": BASE | {"engine", "network", "mpi"},
    "collectives": BASE | {"engine", "network", "mpi", "collectives"},
    # mpi4py's API over the simulated MPI, for unchanged programs (mpisim exec).
    "compat": BASE | {"engine", "network", "mpi", "collectives", "compat"},
    "workloads": BASE | {"engine", "network", "mpi", "collectives", "compat", "workloads"},
    # Reports are rendered from result records alone, so they can be re-made from results.json.
    "report": BASE | {"engine", "report"},
    "scenario": BASE | {"engine", "network", "mpi", "collectives", "compat", "workloads", "report", "scenario"},
    # Beside scenario: it runs the simulator through scenarios, and nothing below knows of it.
    "calibrate": BASE | {"engine", "network", "mpi", "collectives", "compat", "workloads", "report", "scenario",
                         "calibrate"},
}


def imported_layers(path: Path) -> set[str]:
    """The mpisim sub-packages (or top-level modules) that *path* imports, at any depth."""
    layers = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names if node.module == "mpisim"]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "mpisim" and len(parts) > 1:
                layers.add(parts[1])
    return layers


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_layers_below_it(layer):
    files = sorted((PACKAGE / layer).glob("*.py"))
    assert files, f"no modules in mpisim/{layer}"
    wrong = {}
    for path in files:
        extra = imported_layers(path) - ALLOWED[layer]
        if extra:
            wrong[path.name] = sorted(extra)
    assert not wrong, f"mpisim/{layer} imports layers above it: {wrong}"


def test_the_walk_sees_lazy_imports():
    """The check would catch an upward import hidden inside a function."""
    probe = PACKAGE.parent / "tests" / "_layering_probe.py"
    probe.write_text("def f():\n    from mpisim.cli import main\n    import mpisim.report.plots\n")
    try:
        assert imported_layers(probe) == {"cli", "report"}
    finally:
        probe.unlink()
