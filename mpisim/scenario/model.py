"""What a validated scenario is: frozen dataclasses in SI units, and every default in one place.

A scenario file is read in two steps (:mod:`mpisim.scenario.load`): YAML becomes a plain
dict (the *raw* scenario, with unit strings such as ``"64 KiB"``), and the raw dict is checked
and resolved into a :class:`Scenario`. Everything below the scenario layer receives only the
resolved objects and trusts them, so nothing is validated twice.

The resolved scenario keeps its raw dict (``Scenario.raw``) because two things start again
from it: a ``sweep`` applies each grid point's dotted overrides to the raw dict and validates
the result as a new scenario, and a sweep worker process receives the raw dict (plain data,
cheap to pickle) rather than the resolved objects.

Defaults, all here:

==============  =============================================================================
key             default
==============  =============================================================================
name            the scenario file's stem (``scenario`` when there is no file)
seed            0
network         ``{model: fairshare}``
mpi             :class:`~mpisim.mpi.config.MpiConfig`'s defaults, then the topology preset's
                ``mpi:`` block, then the scenario's ``mpi:`` block
algorithms      ``{selector: mpich}``; a collective not named there runs ``auto``
payload         ``data`` (real numpy buffers; ``size`` moves byte counts only)
trace           ``{messages: true, spans: true, links: false}``; links turn on by themselves
                when ``report.plots`` asks for ``link_utilisation``
sweep           none; expect: none; report: ``{}``; description: ``""``; expect_failure: none
check           false (true: an mpi4py program runs under the checker, :mod:`mpisim.compat.check`)
limits          none (``{simulated_time, events, wall_time}``: see :mod:`mpisim.engine.limits`)
==============  =============================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpisim.engine.limits import Limits
from mpisim.mpi.config import MpiConfig
from mpisim.network.topology import TopologySpec

DEFAULT_SEED = 0
DEFAULT_NETWORK_MODEL = "fairshare"
DEFAULT_PAYLOAD = "data"
DEFAULT_SELECTOR = "mpich"
DEFAULT_MPI = MpiConfig()
DEFAULT_NAME = "scenario"

PAYLOADS = ("data", "size")
#: How finely collectives are timed: every message (``message``), or ``collective``: NCCL-style
#: rings as one pipelined flow per hop (mpisim.collectives.nccl, "Collective fidelity"), NCCL's
#: trees as one flow per edge (mpisim.collectives.fluid.tree), MPI rings and the dissemination
#: barrier as step programs (mpisim.collectives.fluid.mpi_ring) and the other MPI algorithms'
#: size-only messages on the direct path (mpisim.mpi.world, "Collective fidelity"); ``auto``
#: (the default): collective where validated against the message path and messages are not
#: the question, message otherwise (mpisim.scenario.fidelity).
FIDELITIES = ("auto", "message", "collective")
DEFAULT_FIDELITY = "auto"
SELECTORS = ("mpich", "model", "nccl")  # rule sets of mpisim.collectives.select

#: The plot that needs link records; asking for it turns link tracing on.
LINK_PLOTS = frozenset({"link_utilisation", "link_utilization"})

#: What ``expect_failure`` may name: the simulated program is expected to fail this way.
FAILURE_KINDS = (
    "deadlock",
    "truncation",
    "invalid_rank",
    "invalid_tag",
    "collective_mismatch",
    "algorithm_requirement",
    "limit_reached",  # a run limit stopped it (limits:)
    "unstarted_call",  # a program's blocking call written without `yield from`
    "mpi_error",  # any MPI error at all
)

#: The top-level keys of a scenario, in the order ``dump`` writes them.
TOP_LEVEL_KEYS = (
    "name",
    "description",
    "seed",
    "topology",
    "network",
    "mpi",
    "algorithms",
    "fidelity",
    "payload",
    "trace",
    "limits",
    "workload",
    "price",
    "sweep",
    "expect",
    "expect_failure",
    "check",
    "report",
    "units",
)


@dataclass(frozen=True)
class NetworkSpec:
    """Which network model moves the bytes: ``fairshare`` (contention) or ``analytic`` (none)."""

    model: str = DEFAULT_NETWORK_MODEL
    #: Messages a rank may send (and receive) at once; None: no limit. ``ports: 1`` is the
    #: textbooks' single-port network (see mpisim.network.ports).
    ports: int | None = None


@dataclass(frozen=True)
class AlgorithmDefaults:
    """Algorithms used by collective calls that do not name one, and the ``auto`` rule set.

    ``per_collective`` maps a collective to an algorithm name (``{"allreduce": "ring"}``);
    a collective missing from it, or mapped to ``auto``, is chosen by ``selector``.
    """

    selector: str = DEFAULT_SELECTOR
    per_collective: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TraceSpec:
    """Which records the tracer keeps (counters stay exact either way)."""

    messages: bool = True
    spans: bool = True
    links: bool = False


@dataclass(frozen=True)
class WorkloadSpec:
    """The workload kind and the params object its registered ``parse`` returned."""

    kind: str
    params: Any


@dataclass(frozen=True)
class Expectation:
    """One entry of ``expect:``, with its values parsed to SI.

    ``check`` is ``approx``, ``max``, ``min``, ``equals``, or ``verified`` (every row with a
    non-null ``verified`` must be true). ``where`` restricts the rows looked at. ``value`` is the
    expected value (approx/equals), the bound (max/min), or ``True`` for ``verified``.
    """

    check: str
    metric: str
    value: Any
    where: dict[str, Any] = field(default_factory=dict)
    rel: float | None = None
    abs: float | None = None


@dataclass(frozen=True)
class Scenario:
    """A validated, resolved scenario: SI units, defaults filled in, ready to run.

    ``raw`` (the dict it was built from, after ``--set`` overrides) and ``file`` (where it came
    from) are kept for sweeps and messages but take no part in equality.
    """

    name: str
    topology: TopologySpec
    workload: WorkloadSpec
    seed: int = DEFAULT_SEED
    description: str = ""
    network: NetworkSpec = field(default_factory=NetworkSpec)
    mpi: MpiConfig = DEFAULT_MPI
    algorithms: AlgorithmDefaults = field(default_factory=AlgorithmDefaults)
    payload: str = DEFAULT_PAYLOAD
    fidelity: str = DEFAULT_FIDELITY
    trace: TraceSpec = field(default_factory=TraceSpec)
    sweep: dict[str, list[Any]] = field(default_factory=dict)
    expect: tuple[Expectation, ...] = ()
    expect_failure: str | None = None
    check: bool = False  # check: true -- an mpi4py program runs under the correctness checker
    report: dict[str, Any] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    price_per_gpu_hour: float | None = None  # price: {per_gpu_hour: 2.5}: training rows gain a cost
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    file: str | None = field(default=None, compare=False, repr=False)

    @property
    def base_dir(self) -> Path:
        """The directory relative paths in the scenario are read from: the file's, else the cwd."""
        return Path(self.file).resolve().parent if self.file else Path.cwd()

    @property
    def ranks(self) -> int:
        """Number of ranks of the cluster."""
        return self.topology.size


def sweep_points(sweep: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Return the grid of a sweep, in grid order: the last key varies fastest.

    ``{"topology.nodes": [2, 4], "network.model": ["analytic", "fairshare"]}`` gives four
    points, ``{"topology.nodes": 2, "network.model": "analytic"}`` first. An empty sweep is
    one point with no overrides.
    """
    points: list[dict[str, Any]] = [{}]
    for key, values in sweep.items():
        points = [{**point, key: value} for point in points for value in values]
    return points
