"""Workloads: what each rank runs -- microbenchmarks, data-parallel training, user programs.

Importing this package registers every workload kind.
"""

from mpisim.workloads import collective, p2p, program, training  # noqa: F401  (registration)
from mpisim.workloads.base import (
    RunContext,
    Workload,
    WorkloadOutput,
    get_workload,
    register_workload,
    workloads,
)

__all__ = ["RunContext", "Workload", "WorkloadOutput", "get_workload", "register_workload", "workloads"]
