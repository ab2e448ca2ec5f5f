"""A scenario from command-line input: ``--limit``, the scenario ``mpisim exec`` runs, its consent checks.

The ``mpisim`` commands (:mod:`mpisim.cli`) only parse arguments and print; what they build from
those arguments is here, so that it can be called and tested without a command line:

* :func:`parse_limits` -- ``--limit wall_time=300s`` as a scenario override;
* :func:`run_overrides` -- every override of ``mpisim run``, after checking the options that go together;
* :func:`programs_to_run` -- the Python files a program scenario runs, each checked to lie in the
  scenario's folder (or allowed by ``--allow-program``);
* :func:`failure_document` -- the ``--json`` document of a run whose simulated program failed;
* :func:`exec_scenario` and :func:`apply_rank_count` -- the scenario of ``mpisim exec -n N``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mpisim import __version__
from mpisim.errors import ConfigError, MPIError
from mpisim.report.records import jsonable
from mpisim.report.text import plural
from mpisim.scenario.executors import parse_executor
from mpisim.scenario.fingerprint import fingerprint
from mpisim.scenario.load import dump, parse_set, point_raw, read_scenario_file, read_yaml
from mpisim.scenario.model import sweep_points
from mpisim.scenario.run import failure_kind
from mpisim.scenario.schema import parse_workload
from mpisim.workloads.program import check_program

__all__ = ["LIMIT_KEYS", "apply_rank_count", "exec_scenario", "failure_document", "parse_limits", "programs_to_run",
           "run_overrides"]


LIMIT_KEYS = ("simulated_time", "events", "wall_time")


def parse_limits(items: Sequence[str]) -> list[tuple[str, Any]]:
    """``--limit wall_time=300s`` -> ``("limits.wall_time", "300s")``; the scenario layer validates the value."""
    pairs = []
    for item in items:
        key = item.partition("=")[0].strip()
        if key not in LIMIT_KEYS:
            raise ConfigError(f"expected KEY=VALUE with KEY one of {', '.join(LIMIT_KEYS)}, got {item!r}", "--limit")
        pairs.extend(parse_set([f"limits.{item.strip()}"]))
    return pairs


def run_overrides(sets: Sequence[str], limits: Sequence[str], *, seed: int | None = None, payload: str | None = None,
                  jobs: int | None = None, executor: str | None = None, update_expect: bool = False
                  ) -> list[tuple[str, Any]]:
    """The overrides of ``mpisim run``: ``--set``, ``--limit``, ``--seed`` and ``--payload``, in that order.

    Checks the options that go together first, so bad input fails before anything runs:
    ``--update-expect`` records the file's own values (no overrides), ``--jobs`` is at least 1
    and excludes ``--executor``, whose value must parse. Raises ConfigError naming the option.
    """
    if update_expect and (sets or seed is not None or payload is not None):
        raise ConfigError("records the file's own values: run it without --set, --seed or --payload",
                          "--update-expect")
    overrides = parse_set(sets) + parse_limits(limits)
    if seed is not None:
        overrides.append(("seed", seed))
    if payload is not None:
        overrides.append(("payload", payload))
    if jobs is not None and jobs < 1:
        raise ConfigError(f"--jobs must be at least 1, got {jobs}", "--jobs")
    if executor is not None:
        parse_executor(executor)  # bad input fails before anything runs
        if jobs is not None:
            raise ConfigError("give --jobs N or --executor, not both (--jobs N is --executor local:N)", "--executor")
    return overrides


def programs_to_run(scenario: Any, allowed: Sequence[str]) -> list[Path]:
    """The Python files a scenario will run, each checked to lie in the scenario's folder tree.

    A scenario file can come from anyone; like pytest, which collects only under its rootdir,
    mpisim runs a program outside the scenario's folder only with ``--allow-program PATH``.
    Consent is decided from what will run, not from how the file spells it: every sweep point is
    resolved, so an axis over the whole ``workload:`` block (or any block that holds a program)
    is checked like ``workload.program``. Raises ConfigError (exit 2) naming the file and the switch.
    """
    specs = [scenario.workload.params] if scenario.workload.kind == "program" else []
    for point in sweep_points(scenario.sweep or {}):
        workload = parse_workload(point_raw(scenario, point).get("workload"))
        if workload.kind == "program":
            specs.append(workload.params)
    root = scenario.base_dir.resolve()
    consented = {Path(p).resolve() for p in allowed}
    files = []
    for spec in specs:
        file = (root / spec.path).resolve()
        if not file.is_relative_to(root) and file not in consented:
            raise ConfigError(f"{spec.path} is outside the scenario's folder {root}; running it needs your consent: "
                              f"--allow-program {file}", "workload.program", scenario.file or "")
        try:
            check_program(spec, root)  # a wrong function is refused before the "running" note
        except ConfigError as err:
            raise ConfigError(err.message, "workload.program", scenario.file or "") from None
        files.append(file)
    return sorted(set(files))


def failure_document(scenario: Any, exc: MPIError) -> dict[str, Any]:
    """The ``--json`` document of a run the simulated program failed: no rows, and ``failure``.

    ``failure`` has ``kind`` (deadlock, truncation, ...), ``error``, ``message``, ``ranks``
    and ``calls`` (the call each of those ranks was in, where known).
    """
    ranks = list(exc.ranks) or sorted({int(r) for r in re.findall(r"\brank (\d+)", str(exc))})
    failure = {"kind": failure_kind(exc), "error": type(exc).__name__, "message": str(exc),
               "ranks": ranks, "calls": list(exc.calls)}

    resolved = jsonable(dump(scenario))
    return jsonable({"mpisim_version": __version__, "scenario": resolved, "fingerprint": fingerprint(resolved),
                     "results": [], "expectations": [], "notes": [], "failure": failure})


def exec_scenario(topology: str, name: str, workload: dict[str, Any]) -> dict[str, Any]:
    """The scenario ``mpisim exec`` runs: *topology* (preset, YAML mapping or scenario file) and the program."""
    path = Path(topology)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        raw = read_scenario_file(path)
        if not isinstance(raw, dict):
            raise ConfigError("expected a scenario or topology mapping", "--topology", str(path))
        if "topology" in raw:  # a scenario file: its cluster and MPI settings, not its workload
            base = {k: v for k, v in raw.items() if k in ("topology", "network", "mpi", "algorithms", "payload",
                                                            "seed", "fidelity", "trace", "limits")}
        else:  # a topology file
            base = {"topology": raw}
    else:
        value = read_yaml(topology, "--topology")
        if not isinstance(value, str | dict):
            raise ConfigError(f"expected a preset name, a mapping or a scenario file, got {topology!r}", "--topology")
        base = {"topology": value}
    return {"name": name, **base, "workload": workload}


def apply_rank_count(raw: dict[str, Any], nodes: int, per_node: int, ranks: int,
                     overrides: Sequence[tuple[str, Any]], *, rail: bool = False, name: str = "") -> dict[str, Any]:
    """Size the topology for *ranks*: N / ranks_per_node nodes, or N ranks on a one-node machine.

    A *rail* network (one NIC per GPU, as on the DGX presets) ties ranks_per_node to the NICs,
    so there N must fill whole nodes unless ranks_per_node and inter.nics are both set.
    """
    topology = raw["topology"]
    topology = {"preset": topology} if isinstance(topology, str) else dict(topology)
    given = {key for key, _ in overrides}
    fixed = rail and "topology.inter.nics" not in given  # ranks_per_node must stay per_node

    def unfilled() -> ConfigError:
        if fixed:
            return ConfigError(f"-n {ranks} does not fill nodes of {per_node} ranks: {name or 'this topology'} has one "
                               f"NIC per rank on rails, so -n must be a multiple of {per_node} (or set both "
                               "topology.ranks_per_node=K and topology.inter.nics=K)", "-n", "mpisim exec")
        return ConfigError(f"-n {ranks} does not fill nodes of {per_node} ranks; give a multiple of {per_node} "
                           "or --set topology.ranks_per_node=K", "-n", "mpisim exec")

    if nodes == 1 and "topology.ranks_per_node" not in given:
        if fixed and ranks % per_node:
            raise unfilled()
        if fixed:
            topology["nodes"] = ranks // per_node
        else:
            topology["ranks_per_node"] = ranks
    elif ranks % per_node == 0:
        topology["nodes"] = ranks // per_node
    elif ranks < per_node and "topology.ranks_per_node" not in given and not fixed:
        topology.update(nodes=1, ranks_per_node=ranks)
    else:
        raise unfilled()
    if "topology.nodes" in given and nodes * per_node != ranks:
        raise ConfigError(f"-n {ranks} disagrees with --set topology.nodes ({plural(nodes, 'node')} x {per_node})",
                          "-n", "mpisim exec")
    return {**raw, "topology": topology}
