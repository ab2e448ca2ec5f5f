"""Where a sweep's points run: a local process pool, or a Dask cluster.

``--executor`` names it:

* ``local`` runs the points in worker processes on this machine, one per CPU; ``local:N``
  uses *N* (``local:1`` runs them here, one after the other). ``--jobs N`` is ``local:N``.
* ``dask:ADDRESS`` sends each point to the Dask distributed scheduler at *ADDRESS* (for
  example ``dask:tcp://10.0.0.5:8786``), whose workers run it. ``dask`` (or ``dask:``) with no
  address starts a ``LocalCluster`` on this machine, one single-threaded worker process per CPU.

A point is the same plain-data task whichever executor runs it, and the sweep puts the results
in grid order and appends them to the same results file, so every executor gives byte-identical
rows and ``--resume`` works across them (start on a laptop, resume on a cluster).

Dask is an optional dependency (``pip install 'mpisim[dask]'``): it is imported only when a
``dask`` executor is asked for, and its absence is then one line of bad input, not a traceback.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mpisim.errors import ConfigError

__all__ = ["LOCAL_CLUSTER_CONFIG", "ExecutorSpec", "parse_executor", "run_on_dask"]


@dataclass(frozen=True)
class ExecutorSpec:
    """A parsed ``--executor``: ``kind`` is ``local`` (``workers``: None = one per CPU) or
    ``dask`` (``address``: None = start a LocalCluster)."""

    kind: str
    workers: int | None = None
    address: str | None = None


def parse_executor(text: str, path: str = "--executor") -> ExecutorSpec:
    """Parse ``local``, ``local:N``, ``dask`` or ``dask:ADDRESS``; ConfigError names *path*."""
    kind, _, rest = text.strip().partition(":")
    if kind == "local":
        if not rest:
            return ExecutorSpec("local")
        try:
            workers = int(rest)
        except ValueError:
            workers = 0
        if workers < 1:
            raise ConfigError(f"expected local:N with N a whole number of at least 1, got {text!r}", path)
        return ExecutorSpec("local", workers=workers)
    if kind == "dask":
        return ExecutorSpec("dask", address=rest or None)
    raise ConfigError(f"expected local, local:N, dask or dask:ADDRESS, got {text!r}", path)


def _import_distributed(path: str) -> Any:
    try:
        import distributed  # lazy: an optional extra (mpisim[dask]), seconds to import
    except ImportError:
        raise ConfigError("the dask executor needs Dask distributed: pip install 'mpisim[dask]'", path) from None
    return distributed


#: Dask settings for the LocalCluster this module starts (not for a cluster at an address: its
#: owner set it up). Each worker runs its task in one thread while its event loop thread wakes on
#: timers; every wake-up takes the GIL from the point, which is pure Python. By default the loop
#: wakes about 160 times a second: the statistical profiler every 10 ms, the event-loop health
#: check every 20 ms, the memory monitor every 100 ms and the system monitor every 500 ms.
#: Measured over sweep points, that loop used 3.1 % to 3.6 % of the point's own CPU time; with
#: these settings and no memory limit (below) it uses 0.6 %, and the client process (scheduler
#: and nannies) half the CPU it did. No dashboard is started, so nothing reads the profiles or
#: the monitor's samples; the GIL monitor (if gilknocker is installed) would poll every 1 ms.
LOCAL_CLUSTER_CONFIG = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.admin.system-monitor.gil.enabled": False,
}


def _start_local_cluster(distributed: Any) -> Any:
    """Start a LocalCluster for a sweep: one single-threaded worker process per CPU."""
    import dask  # lazy: an optional extra, as distributed above

    # Nannies hand their Dask settings to the worker processes they start, so the settings
    # need to hold only while the cluster is being made; the caller's own settings are left alone.
    with dask.config.set(LOCAL_CLUSTER_CONFIG):
        # NOTE: one thread per worker: a point is CPU-bound Python, so more threads in one
        # process would only take turns on the GIL. memory_limit=0: no memory monitor and no
        # spilling; a point holds a few MB, and the local pool puts no limit on it either.
        return distributed.LocalCluster(threads_per_worker=1, processes=True, dashboard_address=None,
                                        memory_limit=0)


def _run_with_modules(run_task: Callable[[Any], Any], modules: Sequence[str], task: Any) -> Any:
    """Dask worker entry point: import the plugin modules (workload kinds), then run the task."""
    for module in modules:
        importlib.import_module(module)
    return run_task(task)


def run_on_dask(
    todo: Sequence[Any],
    address: str | None,
    run_task: Callable[[Any], Any],
    finish: Callable[[Any, Any], None],
    modules: Sequence[str],
    path: str = "--executor",
) -> None:
    """Run each task of *todo* on a Dask cluster and call ``finish(task, outcome)`` as each ends.

    *run_task* must be importable by the workers (a module-level function) and return plain
    data. Tasks that finish together are passed to *finish* in their order in *todo*, so the
    results file does not depend on which of them the scheduler reported first. On an error
    (including one raised by *finish*) the remaining tasks are cancelled before it propagates.
    """
    distributed = _import_distributed(path)
    cluster = None
    try:
        if address is None:
            cluster = _start_local_cluster(distributed)
            client = distributed.Client(cluster)
        else:
            client = distributed.Client(address)
    except OSError as exc:
        if cluster is not None:
            cluster.close()
        raise ConfigError(f"cannot reach the Dask scheduler at {address}: {exc}", path) from None
    try:
        order = {}
        futures = []
        for position, task in enumerate(todo):
            # pure=False: a point is never deduplicated with another one that looks the same.
            future = client.submit(_run_with_modules, run_task, list(modules), task, pure=False)
            order[future.key] = position
            futures.append(future)
        tasks = {future.key: task for future, task in zip(futures, todo, strict=True)}
        try:
            for batch in distributed.as_completed(futures).batches():
                for future in sorted(batch, key=lambda f: order[f.key]):
                    finish(tasks[future.key], future.result())
        except BaseException:
            client.cancel(futures)
            raise
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
