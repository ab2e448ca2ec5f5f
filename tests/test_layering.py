"""Layers import downward only (DESIGN.md), and no package holds a module-level import cycle.

The order, every arrow downward::

    cli -> (teaching, validation, calibrate, testing) -> scenario -> workloads -> compat -> collectives
        -> mpi -> report -> network -> engine -> errors

Every module under ``mpisim/`` belongs to exactly one layer: a sub-package at any depth belongs to its
top-level package (``workloads/training/`` is ``workloads``), a top-level module to the layer named in
``TOP_LEVEL``. A module that no layer claims fails the test, so a new package or file cannot slip by
unchecked. The layer check walks every ``import``, lazy ones inside functions included; the cycle check
counts only the imports that run when the module is first imported (module level, ``if TYPE_CHECKING``
blocks excluded), because those are the ones whose order can leave a half-initialised module behind.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mpisim"

BASE = {"errors", "__version__"}
BELOW_SCENARIO = BASE | {"engine", "network", "mpi", "collectives", "compat", "workloads", "report", "scenario"}
ALLOWED = {
    "errors": {"errors"},
    "engine": BASE | {"engine"},
    "network": BASE | {"engine", "network"},
    "mpi": BASE | {"engine", "network", "mpi"},
    "collectives": BASE | {"engine", "network", "mpi", "collectives"},
    # mpi4py's API over the simulated MPI, for unchanged programs (mpisim exec).
    "compat": BASE | {"engine", "network", "mpi", "collectives", "compat"},
    "workloads": BASE | {"engine", "network", "mpi", "collectives", "compat", "workloads"},
    # Reports are rendered from result records alone, so they can be re-made from results.json.
    "report": BASE | {"engine", "report"},
    "scenario": BELOW_SCENARIO,
    # Beside each other above scenario: each runs the simulator through scenarios, none knows the others.
    "calibrate": BELOW_SCENARIO | {"calibrate"},
    "teaching": BELOW_SCENARIO | {"teaching"},
    "validation": BELOW_SCENARIO | {"validation"},
    # The library's testing helpers and the pytest plugin built on them.
    "testing": BELOW_SCENARIO | {"testing"},
    # Commands: may call every layer.
    "cli": BELOW_SCENARIO | {"calibrate", "teaching", "validation", "testing", "cli"},
}

# Top-level modules (mpisim/<name>.py) and the layer each belongs to. ``__init__`` only re-exports
# names lazily (by string, through importlib), so it imports no layer at module level.
TOP_LEVEL = {
    "__init__": "errors",
    "errors": "errors",
    "__main__": "cli",
    "cli": "cli",
    "testing": "testing",
    "pytest_plugin": "testing",
}

# Module-level import cycles that already exist in packages owned by other engineers. Each entry names
# the package and why it is tolerated for now; remove the entry when the cycle is broken (the test
# below fails on an entry whose package no longer has a cycle, so the list cannot go stale).
KNOWN_CYCLES: dict[str, str] = {}


def module_name(path: Path) -> str:
    """``mpisim/workloads/training/plan.py`` -> ``mpisim.workloads.training.plan``; a package is its ``__init__``."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    """Every module of the package, recursively, by dotted name."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts}


MODULES = all_modules()


def layer_of(name: str) -> str | None:
    """The layer of a dotted mpisim module name (``None`` for names no layer claims)."""
    parts = name.split(".")
    if len(parts) == 1:  # the package itself, mpisim/__init__.py
        return TOP_LEVEL["__init__"]
    head = parts[1]
    if (PACKAGE / head).is_dir():
        return head
    return TOP_LEVEL.get(head, head if head in BASE else None)


def imported_names(path: Path, *, module_level_only: bool = False) -> set[str]:
    """The dotted mpisim names that *path* imports: ``from a.b import c`` gives ``a.b`` and ``a.b.c``.

    With *module_level_only*, imports inside functions, classes and ``if TYPE_CHECKING:`` are skipped.
    Relative imports are resolved against the module's own package.
    """
    tree = ast.parse(path.read_text(), str(path))
    own = module_name(path).split(".") if PACKAGE in path.parents else []
    package = own if path.name == "__init__.py" else own[:-1]
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # ``from pkg import sub`` imports the submodule; ``from pkg import name`` imports pkg itself.
            submodules = {f"{module}.{a.name}" for a in node.names} & MODULES.keys()
            names.update(submodules)
            if len(submodules) < len(node.names):
                names.add(module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        if module_level_only:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
                return
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                for child in node.orelse:
                    visit(child)
                return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {n for n in names if n == "mpisim" or n.startswith("mpisim.")}


def imported_layers(path: Path) -> set[str]:
    """The layers that *path* imports, at any depth (lazy imports inside functions included)."""
    layers = set()
    for name in imported_names(path):
        parts = name.split(".")
        if len(parts) > 1:
            layers.add(layer_of(name) or parts[1])
    return layers


def test_every_module_belongs_to_a_layer():
    unclaimed = sorted(name for name in MODULES if layer_of(name) not in ALLOWED)
    assert not unclaimed, f"modules no layer claims (add them to ALLOWED or TOP_LEVEL): {unclaimed}"


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_layers_below_it(layer):
    files = {name: path for name, path in MODULES.items() if layer_of(name) == layer}
    assert files, f"no modules in layer {layer}"
    wrong = {}
    for name, path in files.items():
        extra = imported_layers(path) - ALLOWED[layer]
        if extra:
            wrong[name] = sorted(extra)
    assert not wrong, f"layer {layer} imports layers above it: {wrong}"


def module_graph() -> dict[str, set[str]]:
    """Module-level import edges between mpisim modules (only names that are modules count)."""
    return {name: imported_names(path, module_level_only=True) & MODULES.keys() - {name}
            for name, path in MODULES.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(found)


def cycles_by_package() -> dict[str, list[list[str]]]:
    """Each cycle under the layer (top-level package) its modules belong to."""
    grouped: dict[str, list[list[str]]] = {}
    for component in cycles(module_graph()):
        owners = {layer_of(m) for m in component}
        grouped.setdefault("+".join(sorted(o or "?" for o in owners)), []).append(component)
    return grouped


def test_no_module_level_import_cycle():
    found = {pkg: comps for pkg, comps in cycles_by_package().items() if pkg not in KNOWN_CYCLES}
    assert not found, f"module-level import cycles (break them, or import inside the function): {found}"


def test_known_cycles_still_exist():
    """An allow-list entry whose cycle is gone must be removed, so the list only ever shrinks."""
    stale = sorted(set(KNOWN_CYCLES) - set(cycles_by_package()))
    assert not stale, f"these packages no longer have an import cycle; remove them from KNOWN_CYCLES: {stale}"


def test_the_walk_sees_lazy_imports(tmp_path):
    """The layer check would catch an upward import hidden inside a function."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from mpisim.cli import main\n    import mpisim.report.plots\n")
    assert imported_layers(probe) == {"cli", "report"}
    assert imported_names(probe, module_level_only=True) == set()


def test_the_cycle_check_finds_a_cycle():
    """Tarjan's walk finds a three-module cycle and ignores the tail that leads into it."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]


def test_the_walk_covers_subpackages_and_top_level_modules():
    assert layer_of("mpisim.workloads.training.schedule") == "workloads"
    assert layer_of("mpisim.pytest_plugin") == "testing"
    assert any(name.startswith("mpisim.workloads.training.") for name in MODULES)


# --- imports inside functions ---------------------------------------------------------------------

#: The most imports a module may defer into a function body. Each one hides a dependency from a reader
#: of the module's head, so it must earn its place: a heavy optional dependency (matplotlib, scipy,
#: Dask), a cost that most commands never pay, or an import cycle inside a layer.
MAX_LAZY_IMPORTS = 15


def lazy_imports(path: Path) -> list[tuple[int, bool]]:
    """Each import inside a function of *path*: its line, and whether a comment gives its reason.

    The reason is a ``#`` comment on the import's own lines, or on the line above the group of
    imports it belongs to (``# Lazy: matplotlib ...`` over two ``from`` lines covers both).
    """
    source = path.read_text()
    lines = source.splitlines()
    found = {}
    for func in ast.walk(ast.parse(source, str(path))):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.Import | ast.ImportFrom) and node.lineno not in found:
                own = lines[node.lineno - 1:node.end_lineno]
                above = node.lineno - 2
                while above >= 0 and lines[above].lstrip().startswith(("from ", "import ")):
                    above -= 1
                found[node.lineno] = any("#" in line for line in own) or (
                    above >= 0 and lines[above].lstrip().startswith("#"))
    return sorted(found.items())


def test_few_imports_inside_functions_each_with_its_reason():
    every = {f"{name}:{line}": reason for name, path in MODULES.items() for line, reason in lazy_imports(path)}
    unexplained = sorted(where for where, reason in every.items() if not reason)
    assert not unexplained, f"imports inside functions without a comment saying why: {unexplained}"
    assert len(every) <= MAX_LAZY_IMPORTS, (
        f"{len(every)} imports inside functions (at most {MAX_LAZY_IMPORTS}): {sorted(every)}; import at module "
        "level unless the dependency is heavy and optional, or the import would close a cycle")


def test_the_lazy_import_count_sees_nested_functions_and_reasons(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import os\n\ndef f():\n    # Lazy: scipy is slow to import.\n    import scipy\n"
                     "    from numpy import linalg\n\n    def g():\n        import json\n    return g\n")
    assert lazy_imports(probe) == [(5, True), (6, True), (9, False)]
