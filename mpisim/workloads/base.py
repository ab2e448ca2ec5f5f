"""What a workload is: a registered kind that parses its YAML block and runs on fresh worlds.

A workload (``collective``, ``p2p``, ``training``, ``program``) is registered by kind with

* ``parse(raw) -> params``: validate the scenario's ``workload:`` mapping into a frozen params
  object, raising :class:`~mpisim.errors.ConfigError` with a path relative to ``workload``
  (``sizes[2]``); units are parsed here, once;
* ``dump(params) -> dict``: the resolved form (SI numbers) that ``mpisim check`` prints and
  ``results.json`` embeds, loadable again by ``parse``;
* ``schema``: the block's :class:`~mpisim.engine.reader.Spec` (a Block), which ``parse`` reads through
  and ``mpisim schema`` publishes (None for a kind that declares no shape);
* ``run(params, ctx) -> WorkloadOutput``: play the workload. ``ctx.new_world()`` returns a
  fresh :class:`~mpisim.mpi.world.World` (new simulation, same topology and settings) for
  each independent measurement point, so points never disturb one another.

Rows follow the ``--json`` contract in DESIGN.md (e.g. collective rows carry ``collective,
algorithm, ranks, bytes, time_s, algbw_GBps, busbw_GBps, verified``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from mpisim.engine.reader import Spec
from mpisim.mpi.world import World


@dataclass
class RunContext:
    """What a workload may use to run: fresh worlds and the scenario-level settings."""

    new_world: Callable[[], World]
    payload: str = "data"  # "data": real numpy buffers; "size": size-only payloads
    seed: int = 0
    base_dir: Path = field(default_factory=Path.cwd)  # the scenario file's directory (for program paths)
    log: TextIO | None = None
    check: bool = False  # check: true -- programs run under the correctness checker (mpisim.compat.check)

    @property
    def data(self) -> bool:
        """True when payloads carry real numbers."""
        return self.payload == "data"


@dataclass
class WorkloadOutput:
    """Rows for the results table, plus the worlds whose records reports are drawn from."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    worlds: list[tuple[str, World]] = field(default_factory=list)  # (label, world) per measured point
    notes: list[str] = field(default_factory=list)  # e.g. messages never received


@dataclass(frozen=True)
class Workload:
    """A registered workload kind."""

    kind: str
    summary: str
    parse: Callable[[dict[str, Any]], Any]
    dump: Callable[[Any], dict[str, Any]]
    run: Callable[[Any, RunContext], WorkloadOutput]
    #: The keys of its result rows (besides swept keys), so ``mpisim check`` can catch a
    #: misspelt ``expect`` metric before a run; None where the rows are open-ended (programs).
    columns: tuple[str, ...] | None = None
    #: Given parsed params, every value some row keys can take (``{"algorithm": ("ring",)}``),
    #: so ``mpisim check`` can refuse ``where: {algorithm: rign}``; keys left out can hold anything.
    where_values: Callable[[Any], Mapping[str, Sequence[Any]]] | None = None
    #: The shape of its ``workload:`` block (``kind`` aside), read by ``parse`` and published as JSON Schema.
    schema: Spec | None = None


_WORKLOADS: dict[str, Workload] = {}


def register_workload(kind: str, summary: str, *, parse: Callable, dump: Callable, run: Callable,
                      columns: tuple[str, ...] | None = None,
                      where_values: Callable[[Any], Mapping[str, Sequence[Any]]] | None = None,
                      schema: Spec | None = None) -> Workload:
    """Register a workload kind (*columns*: its row keys, None if open-ended; *where_values*,
    *schema*: see :class:`Workload`). Raises ValueError on a duplicate kind."""
    if kind in _WORKLOADS:
        raise ValueError(f"duplicate workload kind {kind!r}")
    workload = Workload(kind, summary, parse, dump, run, columns, where_values, schema)
    _WORKLOADS[kind] = workload
    return workload


def get_workload(kind: str) -> Workload:
    """Return the workload registered as *kind*; KeyError lists the known kinds."""
    try:
        return _WORKLOADS[kind]
    except KeyError:
        raise KeyError(f"unknown workload kind {kind!r}; known: {', '.join(sorted(_WORKLOADS))}") from None


def workloads() -> list[Workload]:
    """Return every registered workload, sorted by kind."""
    return [_WORKLOADS[k] for k in sorted(_WORKLOADS)]
