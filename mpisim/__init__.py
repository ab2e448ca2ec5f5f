"""mpisim: a discrete-event simulator of MPI communication and its cost.

Describe a cluster and a workload in YAML, then run it::

    import mpisim
    result = mpisim.run_scenario(mpisim.load("scenarios/ring-allreduce.yaml"))
    for row in result.rows:
        print(row["bytes"], row["time_s"], row["verified"])

or from the shell: ``mpisim run scenarios/ring-allreduce.yaml``. The names below are the
public API; they are imported on first use, so ``import mpisim.engine.units`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "Scenario": "mpisim.scenario.model",
    "load": "mpisim.scenario.load",
    "loads": "mpisim.scenario.load",
    "dump": "mpisim.scenario.load",
    "run_scenario": "mpisim.scenario.run",
    "RunResult": "mpisim.report.records",
    "Simulation": "mpisim.engine.sim",
    "MpiConfig": "mpisim.mpi.config",
    "World": "mpisim.mpi.world",
    "ConfigError": "mpisim.errors",
    "UnitError": "mpisim.errors",
    "TopologyError": "mpisim.errors",
    "UnknownAlgorithm": "mpisim.errors",
    "MPIError": "mpisim.errors",
    "DeadlockError": "mpisim.errors",
    "TruncationError": "mpisim.errors",
    # what programs use (workload kind: program)
    "Comm": "mpisim.mpi.comm",
    "SizePayload": "mpisim.mpi.payload",
    "DataPayload": "mpisim.mpi.payload",
    "in_place": "mpisim.mpi.payload",
    "IN_PLACE": "mpisim.mpi.payload",
    "Status": "mpisim.mpi.request",
    "Request": "mpisim.mpi.request",
    "ANY_SOURCE": "mpisim.mpi.constants",
    "ANY_TAG": "mpisim.mpi.constants",
    "PROC_NULL": "mpisim.mpi.constants",
    "UNDEFINED": "mpisim.mpi.constants",
    "TAG_UB": "mpisim.mpi.constants",
    "MAX_TAG": "mpisim.mpi.constants",
    "SUM": "mpisim.mpi.ops",
    "PROD": "mpisim.mpi.ops",
    "MAX": "mpisim.mpi.ops",
    "MIN": "mpisim.mpi.ops",
    "Op": "mpisim.mpi.ops",
    # teaching: mpisim.explain("bcast", "binomial", ranks=6, root=2) -> a Lesson (steps, rounds, figures)
    "explain": "mpisim.teaching.lesson",
    "Lesson": "mpisim.teaching.lesson",
    # what unchanged mpi4py programs may call (a no-op under a real MPI)
    "compute": "mpisim.compat.ranks",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    """Import a public name on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mpisim' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
