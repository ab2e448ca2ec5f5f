"""Sweeps: a 40-point sweep on 2 worker processes against 1; a 64-point sweep on Dask.

A sweep's points are independent simulations, so ``mpisim run`` runs them in a pool of worker
processes (:mod:`mpisim.scenario.sweep`). The scenario here is a capacity question asked 40
times: a ring allreduce of 64 MiB over 128 ranks on the ``ib-hdr`` preset rebuilt as a fat
tree, with the per-message send overhead swept over 40 values. All points cost about the
same, so a perfect split gives 2x on 2 cores; what is lost is starting the workers (each
imports mpisim and numpy) and the tail where one worker has finished and the other has not.
Both runs must give identical rows.

The ``dask-sweep-64`` case runs the same question at 64 points on a Dask ``LocalCluster`` of
2 single-threaded workers (``--executor dask``, the cluster's start-up included) against 1
worker (``--executor local:1``); the rows must be identical.

Targets: the 40-point sweep at least 1.7x faster with 2 workers than with 1; the 64-point
sweep at least 1.7x faster on the 2-worker Dask cluster than on 1 worker.
"""

from __future__ import annotations

import os
import resource
import sys

from benchmarks.common import Figure, command, info, module_main, stopwatch, target

MODULE = "sweeps"
POINTS = 40
SPEEDUP_TARGET = 1.7


def scenario_dict(points: int = POINTS) -> dict:
    """The swept scenario, as a raw mapping (what a YAML file would hold)."""
    overheads = [f"{0.05 * (i + 1):.2f} us" for i in range(points)]
    return {
        "name": f"bench-sweep-{points}",
        "topology": {"preset": "ib-hdr", "nodes": 128, "inter": {"kind": "fat_tree"}},
        "network": {"model": "fairshare"},
        "payload": "size",
        "trace": {"messages": False, "spans": False},
        "workload": {"kind": "collective", "collective": "allreduce", "algorithm": "ring",
                     "sizes": ["64 MiB"], "dtype": "float32"},
        "sweep": {"mpi.send_overhead": overheads},
    }


def sweep_2_vs_1() -> list[Figure]:
    """Run the sweep with 1 and then 2 workers; return both times, the speed-up and the row check."""
    from mpisim.scenario.load import load_dict
    from mpisim.scenario.run import run_scenario

    cmd = command(MODULE, "sweep-40")
    scenario = load_dict(scenario_dict())
    with stopwatch() as one:
        serial = run_scenario(scenario, jobs=1)
    with stopwatch() as two:
        parallel = run_scenario(scenario, jobs=2)
    same = serial.rows == parallel.rows
    return [
        info(f"{POINTS}-point sweep, 1 worker", one["wall"], "s", reproduce=cmd),
        info(f"{POINTS}-point sweep, 2 workers", two["wall"], "s", reproduce=cmd,
             note=f"{os.cpu_count()} CPUs on this machine"),
        target("sweep speed-up, 2 workers / 1", one["wall"] / two["wall"], "x", SPEEDUP_TARGET, at_least=True,
               reproduce=cmd),
        Figure("sweep rows identical with 1 and 2 workers", float(same), "", "1", same, cmd),
    ]


DASK_POINTS = 64


def _children_cpu() -> float:
    """Processor seconds of this process's finished child processes (a LocalCluster's workers)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def dask_sweep_64() -> list[Figure]:
    """Run the 64-point sweep on 1 local worker and on a 2-worker Dask LocalCluster.

    Besides wall times, the processor time of each run (the Dask run's: this process, which
    holds the scheduler and the nannies, plus the workers): on a machine shared with other work
    the wall times move with the load, while a processor-time ratio near 1 says that Dask did
    little work of its own and that a low speed-up was time spent waiting for a core.
    """
    from mpisim.scenario.load import load_dict
    from mpisim.scenario.run import run_scenario

    cmd = command(MODULE, "dask-sweep-64")
    scenario = load_dict(scenario_dict(DASK_POINTS))
    load = os.getloadavg()[0]
    with stopwatch() as one:
        serial = run_scenario(scenario, executor="local:1")
    workers_before = _children_cpu()
    with stopwatch() as two:
        on_dask = run_scenario(scenario, executor="dask")  # a LocalCluster: one worker per CPU
    dask_cpu = two["cpu"] + _children_cpu() - workers_before
    same = serial.rows == on_dask.rows
    return [
        info(f"{DASK_POINTS}-point sweep, 1 worker", one["wall"], "s", reproduce=cmd),
        info(f"{DASK_POINTS}-point sweep, Dask LocalCluster", two["wall"], "s", reproduce=cmd,
             note=f"{os.cpu_count()} single-threaded workers, cluster start-up included"),
        target("Dask sweep speed-up, 2 workers / 1", one["wall"] / two["wall"], "x", SPEEDUP_TARGET, at_least=True,
               reproduce=cmd, note=f"load average {load:.1f} before the runs"),
        info("Dask sweep processor time / 1 worker's", dask_cpu / one["cpu"], "x", reproduce=cmd,
             note=f"{dask_cpu:.1f} s (client and workers) vs {one['cpu']:.1f} s"),
        Figure("Dask sweep rows identical to 1 worker's", float(same), "", "1", same, cmd),
    ]


CASES = {"sweep-40": sweep_2_vs_1, "dask-sweep-64": dask_sweep_64}


def main(argv: list[str] | None = None) -> int:
    return module_main(MODULE, __doc__, CASES, argv)


if __name__ == "__main__":
    sys.exit(main())
