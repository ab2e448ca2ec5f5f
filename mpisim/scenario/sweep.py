"""Sweeps: run a scenario at every point of a grid, in parallel, resumably.

::

    sweep:
      topology.nodes: [2, 4, 8, 16]
      network.model: [analytic, fairshare]

is a grid of 8 points (the last key varies fastest). Each point is the scenario's raw dict
with the point's dotted overrides applied, validated again as a scenario of its own (all points
are validated when the scenario is loaded, so a bad value fails before anything runs).

**Parallel.** Points are independent, so they run in a pool of worker processes, one per CPU
by default, or on a Dask cluster (:mod:`mpisim.scenario.executors`). A task is plain data -- the raw dict, the file name and the overrides -- so it
pickles cheaply and works with the ``spawn`` start method (used everywhere, so behaviour does
not depend on the platform's default). Workload kinds registered outside mpisim (a test's or a
user's plugin) are registered in the workers too, by importing the modules that defined them.

**Deterministic.** Every point runs in fresh worlds seeded from the scenario, and the final
rows are put in grid order whatever order the points finished in, so ``--jobs 1`` and
``--jobs 64`` give byte-identical output.

**Resumable.** Each finished point is appended to a results file (JSON lines) as soon as it
completes. A line is keyed by the point's overrides and a hash of the point's resolved
scenario, so ``--resume`` skips exactly the points that were finished for this same scenario
-- an edited topology or MPI setting changes the hash and the point runs again -- and a line
cut short by a crash is ignored. Extending a sweep's value list keeps the finished points.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib
import json
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from mpisim import errors
from mpisim.errors import ConfigError, WorkerLost
from mpisim.report.records import jsonable
from mpisim.scenario.executors import parse_executor, run_on_dask
from mpisim.scenario.expect import describe_where
from mpisim.scenario.files import write_atomic
from mpisim.scenario.load import dump, load_dict, point_raw
from mpisim.scenario.model import Scenario, sweep_points
from mpisim.scenario.run import PointResult, ProgressFn, run_point
from mpisim.workloads.base import workloads

__all__ = ["PointTask", "default_results_file", "point_key", "read_results_file", "run_sweep"]

#: Keys of the resolved scenario that do not change what a point computes.
_NOT_HASHED = ("name", "description", "sweep", "expect", "expect_failure", "report")


@dataclass(frozen=True)
class PointTask:
    """One grid point, as plain data a worker process can receive."""

    index: int
    point: dict[str, Any]
    raw: dict[str, Any]
    file: str | None
    key: str
    scenario_hash: str


def point_key(point: Mapping[str, Any]) -> str:
    """Return the canonical text of a point's overrides (sorted-key JSON)."""
    return json.dumps(jsonable(dict(point)), sort_keys=True, separators=(",", ":"))


def scenario_hash(scenario: Scenario) -> str:
    """Return a short hash of what a resolved scenario computes (not its name, expectations...)."""
    resolved = {key: value for key, value in dump(scenario).items() if key not in _NOT_HASHED}
    text = json.dumps(jsonable(resolved), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def default_results_file(scenario: Scenario, out_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where a sweep's finished points go: ``DIR/sweep.jsonl`` with an output directory, else
    ``<scenario stem>.sweep.jsonl`` in the current directory."""
    if out_dir is not None:
        return Path(out_dir) / "sweep.jsonl"
    stem = Path(scenario.file).stem if scenario.file else scenario.name
    return Path(f"{stem}.sweep.jsonl")


def _tasks(scenario: Scenario) -> list[PointTask]:
    tasks = []
    for index, point in enumerate(sweep_points(scenario.sweep)):
        raw = point_raw(scenario, point)
        resolved = load_dict(raw, file=scenario.file, sweep_point=True)
        tasks.append(PointTask(index, point, raw, scenario.file, point_key(point), scenario_hash(resolved)))
    return tasks


def read_results_file(path: str | os.PathLike[str]) -> tuple[dict[tuple[str, str], PointResult], bool]:
    """Return the finished points in a results file, keyed by (point key, scenario hash).

    The second value is True when the file held lines that could not be read (a line cut short
    by a crash); such lines are skipped. A missing file holds no points.
    """
    done: dict[tuple[str, str], PointResult] = {}
    damaged = False
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return done, False
    for line in text.splitlines(keepends=True):
        try:
            if not line.endswith("\n"):
                raise ValueError("unterminated line")
            entry = json.loads(line)
            done[(entry["key"], entry["hash"])] = PointResult.from_dict(entry["result"])
        except (ValueError, KeyError, TypeError):
            damaged = True
    return done, damaged


def _plugin_modules() -> list[str]:
    """Modules outside mpisim that registered workload kinds; workers must import them too."""
    modules = {w.run.__module__ for w in workloads()}
    return sorted(m for m in modules if not m.startswith("mpisim.") and m not in ("__main__", "__mp_main__"))


#: In a pool worker: where it says which point it starts (pid, task index), so that the parent
#: can name the point of a worker that dies (see _worker_lost).
_STARTED: Any = None


def _init_worker(modules: list[str], started: Any = None) -> None:
    global _STARTED
    _STARTED = started
    # Ctrl-C goes to the whole process group; the parent alone decides what to do about it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for module in modules:
        importlib.import_module(module)


def _run_task(task: PointTask) -> PointResult | tuple[str, str, str, str, str]:
    """Worker entry point: validate and run one point.

    A ConfigError comes back as data: exceptions cross process boundaries as
    ``cls(*args)``, which would lose its field path.
    """
    try:
        return run_point(load_dict(task.raw, file=task.file, sweep_point=True), task.point)
    except ConfigError as err:
        return ("ConfigError", type(err).__name__, err.message, err.path, err.file)


def _raise_if_error(outcome: PointResult | tuple[str, str, str, str, str]) -> PointResult:
    if isinstance(outcome, tuple):
        _, cls_name, message, path, file = outcome
        cls = getattr(errors, cls_name, ConfigError)
        raise cls(message, path, file)
    return outcome


class _ResultsLog:
    """Appends finished points to the results file, one flushed JSON line each."""

    def __init__(self, path: Path | None, done: Mapping[tuple[str, str], PointResult], resume: bool, damaged: bool):
        self.handle: IO[str] | None = None
        if path is None:
            return
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.is_symlink():
                raise ConfigError(f"{path} is a symbolic link; mpisim writes the sweep's finished points only "
                                  "to a regular file (remove the link)", "sweep")
            if resume and damaged:
                # Drop the unreadable tail now, so that new lines do not follow half a line.
                lines = [self._line(key, h, result) for (key, h), result in done.items()]
                write_atomic(path, "".join(lines))
            if not resume:
                # A new file, not the old one truncated: a hard link planted at this name must
                # not carry the writes into the file it shares with somewhere else.
                path.unlink(missing_ok=True)
            # O_NOFOLLOW: a symbolic link planted at this name must not redirect the write elsewhere.
            flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_APPEND if resume else os.O_EXCL)
            fd = os.open(path, flags, 0o644)
            if os.fstat(fd).st_nlink > 1:
                os.close(fd)
                raise ConfigError(f"{path} has other hard links; mpisim appends the sweep's finished points only "
                                  "to a file of its own (remove it, or run without --resume)", "sweep")
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise ConfigError(f"{path} is a symbolic link; mpisim writes the sweep's finished points only "
                                  "to a regular file (remove the link)", "sweep") from None
            raise self._cannot_write(err) from None
        self.handle = os.fdopen(fd, "a", encoding="utf-8")

    def _cannot_write(self, err: OSError) -> ConfigError:
        return ConfigError(f"cannot write the sweep's results file {self.path}: {err.strerror or err} "
                           "(give -o DIR on a writable disk)", "sweep")

    @staticmethod
    def _line(key: str, scenario_hash: str, result: PointResult) -> str:
        entry = {"key": key, "hash": scenario_hash, "result": result.to_dict()}
        return json.dumps(entry, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n"

    def append(self, task: PointTask, result: PointResult) -> None:
        if self.handle is not None:
            try:
                self.handle.write(self._line(task.key, task.scenario_hash, result))
                self.handle.flush()
            except OSError:  # a full disk: the run's results are still returned, not lost
                with contextlib.suppress(OSError):
                    self.handle.close()
                self.handle = None  # only --resume loses: the points already run stay in the results

    def close(self) -> None:
        if self.handle is not None:
            with contextlib.suppress(OSError):
                self.handle.close()


def run_sweep(
    scenario: Scenario,
    *,
    jobs: int | None = None,
    results_file: str | os.PathLike[str] | None = None,
    resume: bool = False,
    progress: ProgressFn | None = None,
    executor: str | None = None,
) -> list[PointResult]:
    """Run every grid point of *scenario*'s sweep; return the point results in grid order.

    See :func:`mpisim.scenario.run.run_scenario` for the parameters; *executor*
    (``local[:N]`` or ``dask[:ADDRESS]``, see :mod:`mpisim.scenario.executors`) replaces *jobs*. Raises the first error
    of any point (ConfigError, MPIError) after stopping the others; points finished before it
    stay in *results_file*.
    """
    spec = parse_executor(executor) if executor is not None else None
    if spec is not None and spec.kind == "local":
        jobs = spec.workers
    tasks = _tasks(scenario)
    path = Path(results_file) if results_file is not None else None
    done, damaged = read_results_file(path) if (resume and path is not None) else ({}, False)
    results: dict[int, PointResult] = {}
    for task in tasks:
        if (task.key, task.scenario_hash) in done:
            results[task.index] = done[(task.key, task.scenario_hash)]
    todo = [task for task in tasks if task.index not in results]
    report = progress or (lambda done_count, total: None)
    report(len(results), len(tasks))
    log = _ResultsLog(path, done, resume, damaged)
    try:

        def finish(task: PointTask, result: PointResult) -> None:
            results[task.index] = result
            log.append(task, result)
            report(len(results), len(tasks))

        workers = min(jobs or os.cpu_count() or 1, len(todo))
        if spec is not None and spec.kind == "dask":
            if todo:
                run_on_dask(todo, spec.address, _run_task, lambda task, outcome: finish(task, _raise_if_error(outcome)),
                            _plugin_modules())
        elif workers <= 1:
            for task in todo:
                finish(task, _raise_if_error(_run_task(task)))
        else:
            _run_pool(todo, workers, finish)
    finally:
        log.close()
    return [results[task.index] for task in tasks]


def _run_started(task: PointTask) -> PointResult | tuple[str, str, str, str, str]:
    """Pool worker entry point: say which point this process starts, then run it."""
    if _STARTED is not None:
        _STARTED.put((os.getpid(), task.index))
    return _run_task(task)


def _run_pool(todo: list[PointTask], workers: int, finish: Callable[[PointTask, PointResult], None]) -> None:
    context = multiprocessing.get_context("spawn")
    started = context.SimpleQueue()
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker,
                               initargs=(_plugin_modules(), started))
    pending: dict[Future[Any], PointTask] = {pool.submit(_run_started, task): task for task in todo}
    seen: dict[int, Any] = {}  # pid -> worker process: a broken pool may forget its workers
    try:
        while pending:
            seen.update(getattr(pool, "_processes", None) or {})  # NOTE: no public list before 3.14 (as in _stop)
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            seen.update(getattr(pool, "_processes", None) or {})
            # Record in grid order among points that finished together, so the results file
            # does not depend on which of them the pool reported first.
            for future in sorted(finished, key=lambda f: pending[f].index):
                task = pending.pop(future)
                try:
                    outcome = future.result()
                except BrokenProcessPool:
                    tasks = {t.index: t for t in (task, *pending.values())}
                    raise _worker_lost(tasks.get(_dead_point(seen, started), task), len(tasks) - 1) from None
                finish(task, _raise_if_error(outcome))
    except BaseException:
        _stop(pool)
        raise
    pool.shutdown(wait=True)


def _dead_point(workers: dict[int, Any], started: Any) -> int | None:
    """The index of the point the dead worker was running: the last one it said it started.

    A broken pool terminates its other workers itself (SIGTERM): the one that died first is
    the one whose end was anything else.
    """
    running: dict[int, int] = {}
    with contextlib.suppress(Exception):  # the dead worker may have left the queue half-written
        while not started.empty():
            pid, index = started.get()
            running[pid] = index
    ours = {pid: process for pid, process in workers.items() if pid in running}
    for process in ours.values():
        process.join(timeout=1.0)  # the pool is ending the others: their codes come at once
    # The pool's own thread may reap a worker while this one waits on it; the exit code then
    # shows up on the shared process object a moment later, so give it that moment.
    deadline = time.monotonic() + 1.0
    while any(p.exitcode is None for p in ours.values()) and time.monotonic() < deadline:
        time.sleep(0.01)
    ended = {pid: process.exitcode for pid, process in ours.items() if process.exitcode is not None}
    culprits = [pid for pid, code in ended.items() if code != -signal.SIGTERM] or list(ended)
    return running[culprits[0]] if len(culprits) == 1 else None


def _worker_lost(task: PointTask, others: int) -> WorkerLost:
    """The error of a worker process that died under *task*, in one line naming its point.

    When a worker dies the pool breaks and every unfinished point fails with it: the one named
    is the dead worker's (or, if that cannot be told, the first unfinished in grid order).
    """
    where = describe_where(task.point) or f"point {task.index + 1}"
    rest = f"; {others} other unfinished point(s) stopped with it" if others else ""
    return WorkerLost(f"sweep point {where}: its worker process died before finishing (killed by a signal, or "
                      f"by the system when out of memory){rest}; the finished points are kept (rerun with --resume)")


def _stop(pool: ProcessPoolExecutor) -> None:
    """Stop a pool now: cancel queued points and end the workers running the others."""
    pool.shutdown(wait=False, cancel_futures=True)
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14+
    if terminate is not None:
        terminate()
        return
    # NOTE: before 3.14 the executor offers no public way to end running workers.
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        with contextlib.suppress(Exception):
            process.terminate()
