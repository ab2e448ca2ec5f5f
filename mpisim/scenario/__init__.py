"""The scenario layer: YAML in, validated and resolved Scenario out, and the runner that plays it.

* :mod:`~mpisim.scenario.model` -- the frozen dataclasses and every default;
* :mod:`~mpisim.scenario.schema` -- the one schema every block is read through, and the JSON
  Schema made from it (``mpisim schema``); the scenario's own blocks are in
  :mod:`~mpisim.scenario.blocks`;
* :mod:`~mpisim.scenario.load` -- YAML (:mod:`~mpisim.scenario.yamlio`) -> raw dict ->
  :class:`Scenario`, ``--set`` overrides (:mod:`~mpisim.scenario.overrides`), :func:`dump` of
  the resolved form (:mod:`~mpisim.scenario.dump`);
* :mod:`~mpisim.scenario.expect` -- the ``expect:`` block;
* :mod:`~mpisim.scenario.run` -- :func:`run_scenario`;
* :mod:`~mpisim.scenario.sweep` -- grids of points, in parallel and resumable;
* :mod:`~mpisim.scenario.invocation` -- a run as ``mpisim run``/``exec``/``check``/``report`` ask for
  it (estimate, notes, progress, outputs); :mod:`~mpisim.scenario.command_line` builds scenarios
  and overrides from command-line input, :mod:`~mpisim.scenario.catalog` lists what a scenario can
  name, :mod:`~mpisim.scenario.files` writes files atomically.
"""

from mpisim.scenario import baseline, expect  # noqa: F401  (what the pytest plugin reaches through the package)
from mpisim.scenario.load import apply_overrides, dump, load, load_dict, load_file, loads, parse_set
from mpisim.scenario.model import Expectation, Scenario
from mpisim.scenario.run import run_point, run_scenario

__all__ = [
    "Expectation",
    "Scenario",
    "apply_overrides",
    "dump",
    "load",
    "load_dict",
    "load_file",
    "loads",
    "parse_set",
    "run_point",
    "run_scenario",
]
