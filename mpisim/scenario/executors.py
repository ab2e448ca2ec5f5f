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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mpisim.errors import ConfigError

__all__ = ["ExecutorSpec", "parse_executor", "run_on_dask"]


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
        import distributed
    except ImportError:
        raise ConfigError("the dask executor needs Dask distributed: pip install 'mpisim[dask]'", path) from None
    return distributed


def _run_with_modules(run_task: Callable[[Any], Any], modules: Sequence[str], task: Any) -> Any:
    """Dask worker entry point: import the plugin modules (workload kinds), then run the task."""
    import importlib

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
            # NOTE: one thread per worker: a point is CPU-bound Python, so more threads in one
            # process would only take turns on the GIL.
            cluster = distributed.LocalCluster(threads_per_worker=1, processes=True, dashboard_address=None)
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
