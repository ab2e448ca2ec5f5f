"""The resolved scenario written back as plain data: what ``mpisim check`` prints and ``results.json`` embeds.

Numbers are SI (seconds, bytes, bytes/s) and the document says ``units: SI``, so that loading
it reads bare numbers as SI values; an unlimited ``copy_bandwidth`` is the string ``"inf"``.
``load(dump(s)) == s`` for every scenario (the tests check it on every shipped one).
"""

from __future__ import annotations

import copy
from dataclasses import asdict
from typing import Any

from mpisim.mpi.config import MpiConfig
from mpisim.scenario import expect as expect_mod
from mpisim.scenario.model import DEFAULT_FIDELITY, Expectation, Scenario
from mpisim.workloads.base import get_workload

__all__ = ["dump"]



def _dump_mpi(mpi: MpiConfig) -> dict[str, Any]:
    values: dict[str, Any] = asdict(mpi)
    if values["eager_limit_intra"] == values["eager_limit_inter"]:
        # One key, so that a later override of eager_limit (a sweep, --set) still applies to both.
        values = {"eager_limit": values.pop("eager_limit_intra"), **values}
        del values["eager_limit_inter"]
    if values["copy_bandwidth"] == float("inf"):
        values["copy_bandwidth"] = "inf"
    if not values["rendezvous_overhead"]:
        del values["rendezvous_overhead"]  # absent means none: resolved scenarios stay as they were
    return values


def _dump_expectation(exp: Expectation) -> dict[str, Any]:
    if exp.check == "verified":
        out: dict[str, Any] = {"verified": True}
        if exp.where:
            out["where"] = dict(exp.where)
        return out
    out = {"metric": exp.metric}
    if exp.where:
        out["where"] = dict(exp.where)
    if exp.check in expect_mod.GATES:
        out.update({"baseline": exp.value, exp.check: exp.rel})
        return out
    out[exp.check] = exp.value
    if exp.rel is not None:
        out["rel"] = exp.rel
    if exp.abs is not None:
        out["abs"] = exp.abs
    return out


def dump(scenario: Scenario) -> dict[str, Any]:
    """Return the resolved scenario as plain data (SI numbers), loadable again by :func:`load`."""
    workload = get_workload(scenario.workload.kind)
    params = {key: value for key, value in workload.dump(scenario.workload.params).items() if key != "kind"}
    out: dict[str, Any] = {
        "units": "SI",
        "name": scenario.name,
        "description": scenario.description,
        "seed": scenario.seed,
        "topology": scenario.topology.to_dict(),
        "network": {"model": scenario.network.model,
                    **({"ports": scenario.network.ports} if scenario.network.ports is not None else {})},
        "mpi": _dump_mpi(scenario.mpi),
        "algorithms": {"selector": scenario.algorithms.selector, **scenario.algorithms.per_collective},
        "payload": scenario.payload,
        **({"fidelity": scenario.fidelity} if scenario.fidelity != DEFAULT_FIDELITY else {}),
        "trace": asdict(scenario.trace),
        "workload": {"kind": scenario.workload.kind, **params},
    }
    if scenario.price_per_gpu_hour is not None:
        out["price"] = {"per_gpu_hour": scenario.price_per_gpu_hour}
    if scenario.sweep:
        out["sweep"] = copy.deepcopy(scenario.sweep)
    if scenario.expect:
        out["expect"] = [_dump_expectation(exp) for exp in scenario.expect]
    if scenario.expect_failure:
        out["expect_failure"] = scenario.expect_failure
    if scenario.check:
        out["check"] = True
    out["report"] = copy.deepcopy(scenario.report)
    if scenario.limits.any:
        out["limits"] = {key: value for key, value in asdict(scenario.limits).items() if value is not None}
    return out
