"""Running a scenario: fresh worlds for the workload, records collected, expectations checked.

:func:`run_scenario` is the library's "do it" call (``mpisim run`` is a thin shell around it)::

    from mpisim.scenario import load, run_scenario
    result = run_scenario(load("scenarios/ring-allreduce.yaml"))
    result.rows[0]["time_s"], result.passed

For every measurement the workload asks for a new world (``RunContext.new_world``): a new
:class:`~mpisim.engine.sim.Simulation` seeded with the scenario's seed, the topology built from
its spec, the network model, the MPI settings and the default algorithms. Worlds never share
state, so points cannot disturb one another and a sweep point run in another process gives the
same numbers as one run here.

**Trace volume.** A ring allreduce over 1024 ranks sends two million messages; keeping a
record of each would cost gigabytes. So when the scenario leaves ``trace.messages`` or
``trace.spans`` unset, a world of more than :data:`~mpisim.scenario.tracing.LARGE_WORLD_RANKS` ranks keeps no records of
that kind (the counters ``message_count`` and ``message_bytes`` stay exact), and the point says
so in a note. Setting the key, e.g. ``--set trace.messages=true``, keeps the records whatever
the size.

A simulated program that fails (deadlock, truncation, ...) raises its
:class:`~mpisim.errors.MPIError` out of :func:`run_scenario`, unless the scenario says it
expects exactly that (``expect_failure: deadlock``); then the failure is recorded in the result
and checked like any other expectation.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from mpisim import __version__
from mpisim.compat.ranks import ProgramExit
from mpisim.engine.limits import Budget, wall_clock_watchdog
from mpisim.engine.sim import Simulation
from mpisim.engine.trace import Tracer
from mpisim.errors import ConfigError, MPIError
from mpisim.mpi.world import World
from mpisim.network.models import make_model
from mpisim.network.topology import build_topology
from mpisim.report.records import RunResult, WorldRecords, jsonable
from mpisim.scenario import tracing
from mpisim.scenario.baseline import explain_failed_gates
from mpisim.scenario.estimate import run_estimate
from mpisim.scenario.expect import describe_where, evaluate_all
from mpisim.scenario.fidelity import resolve as resolve_fidelity
from mpisim.scenario.files import (
    write_atomic,  # re-exported: the writer lived here, callers import it from here
)
from mpisim.scenario.fingerprint import fingerprint
from mpisim.scenario.load import dump
from mpisim.scenario.model import FAILURE_KINDS, TOP_LEVEL_KEYS, Scenario
from mpisim.scenario.observe import link_totals, network_summary
from mpisim.workloads.base import RunContext, WorkloadOutput, get_workload

__all__ = ["PointResult", "failure_kind", "new_world_factory", "run_point", "run_scenario", "write_atomic"]

#: Called with (points done, points in total) as a sweep progresses.
ProgressFn = Callable[[int, int], None]



def failure_kind(err: MPIError) -> str:
    """Name the way a simulated program failed: ``DeadlockError`` -> ``deadlock``, etc.

    The name is the exception class's, in snake case without ``Error``, for the first class in
    its hierarchy that :data:`~mpisim.scenario.model.FAILURE_KINDS` lists; ``mpi_error`` otherwise.
    """
    for cls in type(err).__mro__:
        name = cls.__name__.removesuffix("Error")
        kind = "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")
        if kind in FAILURE_KINDS:
            return kind
    return "mpi_error"


@dataclass
class PointResult:
    """What one grid point (or a scenario without a sweep) produced."""

    point: dict[str, Any] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    records: list[WorldRecords] = field(default_factory=list)
    failure: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form, as one line of a sweep's results file."""
        return jsonable(
            {
                "point": self.point,
                "rows": self.rows,
                "notes": self.notes,
                "records": [world.to_dict() for world in self.records],
                "failure": self.failure,
            }
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PointResult:
        """Rebuild from :meth:`to_dict`'s form."""
        return cls(
            point=dict(data.get("point") or {}),
            rows=list(data.get("rows") or []),
            notes=list(data.get("notes") or []),
            records=[WorldRecords.from_dict(world) for world in data.get("records") or []],
            failure=data.get("failure"),
        )


def new_world_factory(scenario: Scenario, log: TextIO | None = None,
                      created: list[World] | None = None) -> tuple[Callable[[], World], list[World]]:
    """Return a function making fresh worlds for *scenario*, and the list it appends them to
    (*created*, if given: a caller watching the run's progress reads it).

    Each world keeps the records :func:`~mpisim.scenario.tracing.trace_records` allows for its size.
    """
    created = [] if created is None else created
    # One budget for every world of this run (point): events and wall time add up across them.
    run_budget = Budget(scenario.limits) if scenario.limits.any else None

    resolved = resolve_fidelity(scenario)

    def new_world(scratch: bool = False) -> World:
        topology = build_topology(scenario.topology)
        messages, spans = tracing.trace_records(scenario, topology.size)
        explicit = tracing.explicit_trace_keys(scenario)
        budget = None if explicit & {"messages", "spans"} else tracing.RECORD_BUDGET
        if scratch:  # a world that times one call alone (World.scratch): it records nothing
            messages = spans = False
        tracer = Tracer(messages=messages, spans=spans, links=scenario.trace.links and not scratch, log=log,
                        budget=budget)
        sim = Simulation(scenario, seed=scenario.seed, tracer=tracer)
        if run_budget is not None:
            sim.env.budget = run_budget
        network = make_model(scenario.network.model, sim, topology, scenario.network.ports)
        world = World(
            sim,
            topology,
            network,
            scenario.mpi,
            algorithms=dict(scenario.algorithms.per_collective),
            selector=scenario.algorithms.selector,
            fidelity=resolved.fidelity,
            validated_only=resolved.validated_only,
        )
        if scratch:
            return world
        world.scratch = lambda: new_world(scratch=True)
        created.append(world)
        return world

    return new_world, created


def _trace_note(scenario: Scenario, worlds: list[World]) -> str | None:
    """Say that large worlds dropped records the scenario did not ask about, and how to keep them."""
    largest = max((world.size for world in worlds), default=0)
    if any(world.tracer.over_budget for world in worlds):
        return (f"records dropped where a world made more than {tracing.RECORD_BUDGET:,} of one kind (messages, spans, "
                "collectives, links; counters stay exact); to keep them all use --set trace.messages=true --set trace.spans=true")
    if largest <= tracing.LARGE_WORLD_RANKS:
        return None
    explicit = tracing.explicit_trace_keys(scenario)
    dropped = [key for key in ("messages", "spans") if key not in explicit and getattr(scenario.trace, key)]
    if not dropped:
        return None
    kinds = " and ".join(key.removesuffix("s") for key in dropped)
    sets = " ".join(f"--set trace.{key}=true" for key in dropped)
    return (f"{largest} ranks: {kinds} records not kept for worlds of more than {tracing.LARGE_WORLD_RANKS} ranks "
            f"(counters stay exact); to keep them use {sets}")


def _world_records(label: str, world: World, point: Mapping[str, Any],
                   network: dict[str, float] | None = None) -> WorldRecords:
    tracer = world.tracer
    return WorldRecords(
        label=label,
        point=dict(point),
        messages=list(tracer.messages),
        spans=list(tracer.spans),
        collectives=list(tracer.collectives),
        links=list(tracer.links),
        message_count=tracer.message_count,
        message_bytes=tracer.message_bytes,
        t_end=world.sim.now,
        unmatched=list(world.unmatched),
        link_totals=link_totals(world),
        network=network_summary(world) if network is None else dict(network),
    )


def _workload_error(err: ConfigError) -> ConfigError:
    """Locate a ConfigError raised while a workload ran: paths are relative to ``workload``."""
    head = err.path.split(".")[0].split("[")[0]
    if head in TOP_LEVEL_KEYS:
        return err
    moved = err.at("workload")
    return type(err)(moved.message, moved.path, moved.file)


def run_point(scenario: Scenario, point: Mapping[str, Any] | None = None, log: TextIO | None = None,
              worlds: list[World] | None = None, keep_failure: bool = False) -> PointResult:
    """Run *scenario*'s workload once (one sweep point, or the whole scenario without a sweep).

    *point* holds the sweep overrides that produced *scenario*; every row gets them as extra keys.
    Each world the workload makes is appended to *worlds*, if given, as it is made.
    Raises the workload's MPIError unless ``scenario.expect_failure`` is set or *keep_failure*
    (the caller writes a report of the failed run: its timeline up to where it stopped), and ConfigError
    for input problems only found while running (e.g. a program file that does not exist).
    """
    point = dict(point or {})
    new_world, created = new_world_factory(scenario, log, worlds)
    ctx = RunContext(new_world=new_world, payload=scenario.payload, seed=scenario.seed, base_dir=scenario.base_dir, log=log,
                     check=scenario.check)
    failure = None
    try:
        # The limit holds in every phase: planning and building worlds as well as the event loop.
        with wall_clock_watchdog(scenario.limits.wall_time):
            output = get_workload(scenario.workload.kind).run(scenario.workload.params, ctx)
    except ConfigError as err:
        raise _workload_error(err) from None
    except MPIError as err:
        if scenario.expect_failure is None and not (keep_failure and _reportable(err)):
            raise
        failure = {"kind": failure_kind(err), "error": type(err).__name__, "message": str(err), "point": point}
        # The worlds the workload made are still here: a deadlock's timeline is worth drawing.
        label = "world" if scenario.expect_failure else scenario.name  # an unexpected failure: the program's name
        output = WorkloadOutput(worlds=[(f"{label} {i}" if i or scenario.expect_failure else label, world)
                                        for i, world in enumerate(created)])
    # Every world of a point has the same topology: measure alpha, beta, gamma once.
    network = network_summary(output.worlds[0][1]) if output.worlds else {}
    prefix = f"[{describe_where(point)}] " if point else ""
    notes = [prefix + note for note in output.notes]
    trace_note = _trace_note(scenario, created)
    if trace_note:
        notes.append(prefix + trace_note)
    for _, world in output.worlds:
        notes.extend(prefix + note for note in world.unmatched if prefix + note not in notes)
    fidelity = resolve_fidelity(scenario)
    return PointResult(
        point=point,
        rows=jsonable([{**point, **row, **_cost(row, scenario.price_per_gpu_hour),
                       "fidelity": row.get("fidelity", fidelity.label)} for row in output.rows]),
        notes=notes,
        records=[_world_records(label, world, point, network) for label, world in output.worlds],
        failure=failure,
    )


def _reportable(err: MPIError) -> bool:
    """A failure worth a report of its run: not a program's own exit status (``sys.exit(3)``, ``Abort``), kept as it is."""
    return not isinstance(err, ProgramExit)


def _cost(row: dict[str, Any], per_gpu_hour: float | None) -> dict[str, Any]:
    """A training row's cost (``price: {per_gpu_hour}`` x its GPU-hours), where it has both; the
    scenario's price replaces a device's list price (:mod:`mpisim.workloads.training.planner`)."""
    hours = row.get("gpu_hours")
    if per_gpu_hour is None or not isinstance(hours, int | float):
        return {}
    return {"cost": hours * per_gpu_hour, "price_per_gpu_hour": per_gpu_hour}


def _failure_expectation(expected: str, points: list[PointResult]) -> dict[str, Any]:
    """Check ``expect_failure``: every point must have failed in the expected way."""
    kinds = [p.failure["kind"] if p.failure else None for p in points]
    passed = all(kind is not None and (expected == "mpi_error" or kind == expected) for kind in kinds)
    got: Any = kinds[0] if len(kinds) == 1 else kinds
    if passed:
        detail = f"expected the program to fail with {expected}, and it did"
    elif all(kind is None for kind in kinds):
        detail = f"expected the program to fail with {expected}, but it completed"
    else:
        shown = ", ".join(kind or "completed" for kind in kinds)
        detail = f"expected the program to fail with {expected}, got {shown}"
    return {
        "check": "expect_failure",
        "metric": "failure",
        "where": {},
        "expected": expected,
        "got": got,
        "passed": passed,
        "detail": detail,
        "rows": len(points),
    }


def assemble(scenario: Scenario, points: list[PointResult], wall_time: float = 0.0) -> RunResult:
    """Combine point results (in grid order) into one RunResult and check the expectations."""
    rows = [row for p in points for row in p.rows]
    expectations = evaluate_all(scenario.expect, rows)
    if scenario.expect_failure:
        expectations.append(_failure_expectation(scenario.expect_failure, points))
    failure = next((p.failure for p in points if p.failure), None)
    resolved = jsonable(dump(scenario))
    result = RunResult(
        scenario=resolved,
        rows=rows,
        expectations=jsonable(expectations),
        notes=[note for p in points for note in p.notes] + ([f"fidelity: {resolve_fidelity(scenario).reason}"] if rows else []),
        records=[world for p in points for world in p.records],
        failure=failure,
        meta={"mpisim_version": __version__, "wall_time_s": wall_time},
        fingerprint=fingerprint(resolved),
    )
    explain_failed_gates(result, scenario.file)
    return result


def run_scenario(
    scenario: Scenario,
    *,
    jobs: int | None = 1,
    results_file: str | os.PathLike[str] | None = None,
    resume: bool = False,
    progress: ProgressFn | None = None,
    log: TextIO | None = None,
    executor: str | None = None,
    worlds: list[World] | None = None,
    keep_failure: bool = False,
    estimated: bool = False,
) -> RunResult:
    """Run *scenario* (every grid point of its sweep, if it has one) and check its expectations.

    Parameters
    ----------
    jobs
        Sweep points run in this many worker processes (``None``: one per CPU); 1 runs them
        here, one after the other. Results are the same either way. Workers are started with
        ``spawn``, so a script that asks for more than one must guard its entry point with
        ``if __name__ == "__main__":`` (as any multiprocessing program must).
    results_file
        Sweeps only: append each finished point to this JSON-lines file as it completes.
    resume
        Sweeps only: skip the points *results_file* already holds for this scenario.
    progress
        Sweeps only: called with (points done, points in total) after each point.
    log
        Without a sweep: write the simulation's event log here.
    executor
        Sweeps only: ``local[:N]`` (a process pool; overrides *jobs*) or ``dask[:ADDRESS]`` (a
        Dask cluster; a LocalCluster without an address). See :mod:`mpisim.scenario.executors`.
    worlds
        Without a sweep: each world the run makes is appended here as it is made, so another
        thread can show the run's progress (its ``sim.now``, ``env.events_done``, ranks done).
    keep_failure
        Without a sweep: a failure of the simulated program (deadlock, truncation, an exception)
        is recorded in the result (``result.failure``) as if the scenario expected it, so that
        its report can be written; the caller says it failed.
    estimated
        The caller has just estimated the run (:func:`~mpisim.scenario.estimate.run_estimate`):
        a capacity plan of a million buckets is not planned twice against the same wall-time limit.

    Raises MPIError when the simulated program fails and the scenario did not expect it, and
    ConfigError for input problems found only while running.
    """
    t_start = time.perf_counter()
    # Without a sweep, the estimate and the run share the limit's one clock; each sweep point has its own.
    limit = scenario.limits.wall_time
    try:
        with wall_clock_watchdog(None if scenario.sweep else limit):
            if not estimated:
                with wall_clock_watchdog(limit):
                    run_estimate(scenario)  # refuses, before anything is allocated, what cannot fit in memory
            if scenario.sweep:
                from mpisim.scenario.sweep import run_sweep  # sweep.py builds on this module

                points = run_sweep(scenario, jobs=jobs, results_file=results_file, resume=resume, progress=progress,
                                   executor=executor)
            else:
                points = [run_point(scenario, log=log, worlds=worlds, keep_failure=keep_failure)]
    except ConfigError as err:
        if scenario.file and not err.file:
            raise err.in_file(scenario.file) from None
        raise
    return assemble(scenario, points, time.perf_counter() - t_start)
