"""The scenario's own blocks, each declared once as a :class:`~mpisim.engine.reader.Spec` and read through it.

``mpi``, ``network``, ``algorithms``, ``report``, ``trace``, ``limits``, ``sweep`` and the
top-level scalars live here; ``topology`` is declared by :mod:`mpisim.network.topology`, each
workload kind by its module in :mod:`mpisim.workloads`, ``expect`` by
:mod:`mpisim.scenario.expect`. :mod:`mpisim.scenario.schema` assembles them into the one
scenario spec whose JSON Schema ``mpisim schema`` prints.

What a spec cannot say alone (``eager_limit`` setting both sides, an algorithm that this
topology's rank count rules out) the ``parse_*`` functions below add after reading.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import asdict, replace
from typing import Any

from mpisim.collectives import registry
from mpisim.engine.limits import Limits
from mpisim.engine.reader import Block, Choice, Custom, Flag, Spec, Text, Unit, Whole, located, short
from mpisim.engine.units import (
    parse_bandwidth,
    parse_count,
    parse_per_byte,
    parse_size,
    parse_time,
    parse_whole,
)
from mpisim.errors import ConfigError
from mpisim.mpi.config import MpiConfig
from mpisim.network.models import model_names
from mpisim.network.topology import TopologySpec, too_slow
from mpisim.report.plot_names import PLOT_NAMES
from mpisim.scenario.model import (
    DEFAULT_MPI,
    DEFAULT_NETWORK_MODEL,
    DEFAULT_SELECTOR,
    FAILURE_KINDS,
    FIDELITIES,
    LINK_PLOTS,
    PAYLOADS,
    SELECTORS,
    TOP_LEVEL_KEYS,
    AlgorithmDefaults,
    NetworkSpec,
    TraceSpec,
)

# --- top-level scalars --------------------------------------------------------------------------


def _read_seed(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"expected a whole number >= 0, got {short(value)}", path)
    return value


NAME = Text("expected a non-empty string, got {short}", nonempty=True,
            description="The scenario's name; defaults to the file's stem.")
DESCRIPTION = Text("expected a string, got {short}", description="What the scenario shows, in a sentence or two.")
SEED = Custom(_read_seed, {"type": "integer", "minimum": 0}, description="Seed of every random choice (default 0).")
PAYLOAD = Choice(PAYLOADS, description="data: real buffers, verified against numpy; size: sizes only (faster).")
FIDELITY = Choice(FIDELITIES, description="auto (default): collective where validated and messages are not the "
                                          "question; message: every message is timed; collective: one flow per step.")
CHECK = Flag("expected true or false, got {short}",
             description="Run an mpi4py program under the correctness checker (mpisim exec --check): requests "
                         "never completed, send buffers modified early, ANY_SOURCE races, non-commutative ops.")
EXPECT_FAILURE = Choice(FAILURE_KINDS, description="The simulated program is expected to fail this way.")
UNITS = Choice(("SI",), "expected SI (bare numbers are SI values, as in a resolved scenario), got {short}",
               description="SI: bare numbers are seconds, bytes and bytes/s (a resolved scenario says so).")

# --- mpi ----------------------------------------------------------------------------------------

MPI_EXAMPLE = "{eager_limit: 64 KiB, send_overhead: 0.2 us}"
MPI = Block({
    "eager_limit": Unit(parse_size, "64 KiB", integer=True, description="Eager/rendezvous switch, both sides."),
    "eager_limit_intra": Unit(parse_size, "64 KiB", integer=True, description="Eager limit inside a node."),
    "eager_limit_inter": Unit(parse_size, "16 KiB", integer=True, description="Eager limit between nodes."),
    "header_bytes": Unit(parse_size, "64 B", integer=True, description="Envelope bytes sent with each message."),
    "send_overhead": Unit(parse_time, "0.2 us", description="CPU time of a send (o_s)."),
    "recv_overhead": Unit(parse_time, "0.2 us", description="CPU time of a receive (o_r)."),
    "copy_bandwidth": Unit(parse_bandwidth, "10 GB/s", description="Memory copy rate of eager buffers; inf: free."),
    "reduce_cost": Unit(parse_per_byte, "0.1 ns/B", description="Reduction cost per byte (gamma)."),
    "rendezvous_overhead": Unit(parse_time, "1 us", description="Extra cost of a rendezvous handshake."),
}, expected=f"a mapping such as {MPI_EXAMPLE}", description="MPI library costs and protocol limits.")


def parse_mpi(preset_mpi: Mapping[str, Any], scenario_mpi: Any, preset: str) -> MpiConfig:
    """Apply MpiConfig's defaults, then the preset's ``mpi:`` block, then the scenario's.

    Within one block, ``eager_limit`` sets both limits and a specific ``eager_limit_intra`` or
    ``eager_limit_inter`` next to it wins for its side.
    """
    values = asdict(DEFAULT_MPI)
    blocks = [(MPI.mapping(preset_mpi, "topology.mpi"), "topology.mpi", f" (in topology preset {preset!r})")]
    if scenario_mpi is not None:
        blocks.append((MPI.mapping(scenario_mpi, "mpi"), "mpi", ""))
    for block, path, origin in blocks:
        parsed = {}
        for key, value in block.items():
            try:
                parsed[key] = MPI.fields[key].read(value, f"{path}.{key}")
            except ConfigError as err:
                raise type(err)(err.message + origin, err.path) from None
        if parsed.get("copy_bandwidth") == 0:
            raise ConfigError("copy_bandwidth must be positive ('inf' makes copies free), got 0", f"{path}.copy_bandwidth")
        if too_slow(parsed.get("copy_bandwidth", math.inf), "copy_bandwidth"):
            raise ConfigError(too_slow(parsed["copy_bandwidth"], "copy_bandwidth"), f"{path}.copy_bandwidth")
        if "eager_limit" in parsed:
            both = parsed.pop("eager_limit")
            values["eager_limit_intra"] = values["eager_limit_inter"] = both
        values.update(parsed)
    return MpiConfig(**values)


# --- network ------------------------------------------------------------------------------------

NETWORK_BLOCK = Block({
    "model": Choice(model_names, description="fairshare: links shared max-min fairly; analytic: no contention."),
    "ports": Whole(lambda value: parse_whole(value, maximum=1_000_000), 1, below="at least 1 message at a time, got {number}",
                   description="Messages a rank's port carries at once (default: unlimited)."),
}, expected="a mapping such as {model: fairshare}")
NETWORK = Custom(lambda value, path: parse_network(value),
                 lambda: {"anyOf": [{"enum": model_names()}, NETWORK_BLOCK.json()]},
                 description="The network model: a name (fairshare | analytic ...) or {model, ports}.")


def parse_network(raw: Any) -> NetworkSpec:
    if raw is None:
        return NetworkSpec()
    if isinstance(raw, str):  # shorthand: network: analytic
        raw = {"model": raw}
    fields = NETWORK_BLOCK.read(raw, "network")
    return NetworkSpec(fields.get("model", DEFAULT_NETWORK_MODEL), fields.get("ports"))


# --- algorithms ---------------------------------------------------------------------------------


def _algorithm_names(collective: str) -> list[str]:
    return [algo.name for algo in registry.available(collective)] + ["auto"]


ALGORITHM_NAME = Text("expected an algorithm name or auto, got {short}")
ALGORITHMS = Block({
    "selector": Choice(SELECTORS, description="The rule set auto uses: mpich, nccl (GPU default) or model."),
    **{collective: Custom(lambda value, path: ALGORITHM_NAME.read(value, path),
                          lambda collective=collective: {"enum": _algorithm_names(collective)},
                          description=f"The {collective} algorithm every {collective} uses, or auto.")
       for collective in registry.COLLECTIVES},
}, expected="a mapping such as {selector: mpich, allreduce: ring}",
    description="Which algorithm each collective uses; auto picks by the selector's rules.")


def default_selector(device: str) -> str:
    """The ``auto`` rule set when a scenario names none: NCCL's tuning where the ranks are GPUs, MPICH's elsewhere.

    GPU teams run NCCL; a GPU cluster planned with MPICH's CPU rules would, for example, pick
    Rabenseifner for a 300M-parameter sync on 1024 H100s, which no training job does.
    """
    return "nccl" if device == "gpu" else DEFAULT_SELECTOR


def parse_algorithms(raw: Any, ranks: int, device: str = "cpu", topology: TopologySpec | None = None) -> AlgorithmDefaults:
    if raw is None:
        return AlgorithmDefaults(selector=default_selector(device))
    fields = ALGORITHMS.read(raw, "algorithms")
    selector = fields.pop("selector", default_selector(device))
    chosen = {}
    for collective in registry.COLLECTIVES:  # registry order, so equal inputs give equal dicts
        if collective not in fields:
            continue
        name, path = fields[collective], f"algorithms.{collective}"
        if name != "auto":
            try:
                algo = registry.get(collective, name)
            except ConfigError as err:
                raise located(err, path) from None
            if "power_of_two" in algo.requires and ranks & (ranks - 1):
                raise ConfigError(
                    f"{collective} algorithm {name!r} needs a power-of-two number of ranks; the topology has {ranks}",
                    path,
                )
            problem = algo.why_not_on(topology) if topology is not None else ""
            if problem:
                raise ConfigError(problem, path)
        chosen[collective] = name
    return AlgorithmDefaults(selector, chosen)


# --- report and trace ---------------------------------------------------------------------------

FIGURE = Choice(sorted(PLOT_NAMES), "unknown figure {short}; {hint}known: {choices}")
REPORT = Block({
    "plots": Custom(lambda value, path: _read_plots(value, path), {"type": "array", "items": FIGURE.json()},
                    description="Figures of the Markdown report."),
}, expected="a mapping such as {plots: [timeline]}", description="What the report (-o DIR) holds.")


def _read_plots(value: Any, path: str) -> list[str]:
    if not isinstance(value, list):
        raise ConfigError(f"expected a list of figure names, got {short(value)}", path)
    return [FIGURE.read(name, f"{path}[{i}]") for i, name in enumerate(value)]


def parse_report(raw: Any) -> dict[str, Any]:
    """Validate ``report: {plots: [timeline, link_utilisation, ...]}``: known keys, known figure names."""
    REPORT.read(raw, "report")
    return dict(raw)


TRACE = Block({key: Flag("expected true or false, got {short}", description=what) for key, what in (
    ("messages", "Record every message (timeline, trace.json)."),
    ("spans", "Record each rank's collective spans."),
    ("links", "Record link utilisation (on when a link plot is asked for)."),
)}, expected="a mapping such as {messages: true, spans: false, links: false}", description="What the run records.")


def parse_trace(raw: Any, report: Mapping[str, Any]) -> TraceSpec:
    plots = report.get("plots") or []
    wants_links = isinstance(plots, list) and any(plot in LINK_PLOTS for plot in plots if isinstance(plot, str))
    defaults = replace(TraceSpec(), links=True) if wants_links else TraceSpec()
    if raw is None:
        return defaults
    values = asdict(defaults)
    for key, value in TRACE.mapping(raw, "trace").items():  # null is not a default here: a flag is a flag
        values[key] = TRACE.fields[key].read(value, f"trace.{key}")
    return TraceSpec(**values)


# --- limits -------------------------------------------------------------------------------------


def _limit(parse: Any, example: str, what: str) -> Spec:
    def read(value: Any, path: str) -> Any:
        parsed = Unit(parse).read(value, path)
        if not parsed > 0:
            raise ConfigError(f"expected a limit greater than 0, got {short(value)}", path)
        return parsed
    return Custom(read, {"type": ["string", "number"], "examples": [example]}, description=what)


LIMITS = Block({
    "simulated_time": _limit(parse_time, "10 s", "Stop when simulated time reaches this."),
    "events": _limit(parse_count, "50M", "Stop after this many events."),
    "wall_time": _limit(parse_time, "300 s", "Stop after this much real time."),
}, expected="a mapping such as {simulated_time: 10 s, events: 50000000, wall_time: 300 s}",
    description="Stop a run that goes on too long; the run exits 1 and says where it was.")


def parse_limits(raw: Any) -> Limits:
    """``limits: {simulated_time: 10 s, events: 50000000, wall_time: 300 s}``, each optional."""
    return Limits() if raw is None else Limits(**LIMITS.read(raw, "limits"))


def _read_price(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(f"expected a price per GPU-hour greater than 0, e.g. 2.5, got {short(value)}", path)
    return float(value)


PRICE = Block({
    "per_gpu_hour": Custom(_read_price, {"type": "number", "exclusiveMinimum": 0},
                           required="this key is required, e.g. per_gpu_hour: 2.5",
                           description="What one GPU-hour costs (any currency): rows with gpu_hours gain cost."),
}, expected="a mapping such as {per_gpu_hour: 2.5}",
    description="What compute costs: training rows that give gpu_hours (workload tokens:) gain cost.")


def parse_price(raw: Any) -> float | None:
    """``price: {per_gpu_hour: 2.5}``: the price of one GPU-hour, or None."""
    if raw is None:
        return None
    fields = PRICE.read(raw, "price")
    if "per_gpu_hour" not in fields:
        raise ConfigError("this key is required, e.g. per_gpu_hour: 2.5", "price.per_gpu_hour")
    return fields["per_gpu_hour"]


# --- sweep --------------------------------------------------------------------------------------

_UNSWEPT = ("sweep", "expect", "expect_failure")
_SWEPT_HEADS = [key for key in TOP_LEVEL_KEYS if key not in _UNSWEPT]


#: The most points a sweep may have. A study sweeps a few dozen; every point is validated when the
#: scenario loads, so 10^6 points would take minutes before anything runs, 10^9 all the memory.
MAX_SWEEP_POINTS = 10_000


def parse_sweep(raw: Any) -> dict[str, list[Any]]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"expected a mapping such as {{topology.nodes: [2, 4, 8]}}, got {short(raw)}", "sweep")
    sweep = {}
    for key, values in raw.items():
        path = f"sweep.{key}"
        if not isinstance(key, str) or not key or any(not part for part in key.split(".")):
            raise ConfigError(f"expected a dotted key such as topology.nodes, got {short(key)}", "sweep")
        if key.split(".")[0] not in _SWEPT_HEADS:
            raise ConfigError(f"cannot sweep over {key!r}; a swept key starts with one of {', '.join(_SWEPT_HEADS)}", path)
        if not isinstance(values, list) or not values:
            raise ConfigError(f"expected a non-empty list of values, got {short(values)}", path)
        sweep[key] = copy.deepcopy(values)
    points = math.prod(len(values) for values in sweep.values())
    if points > MAX_SWEEP_POINTS:
        axes = " x ".join(str(len(values)) for values in sweep.values())
        raise ConfigError(f"a grid of {axes} = {points:,} points (at most {MAX_SWEEP_POINTS:,}: every point is "
                          "validated before the run and runs as a scenario of its own); sweep fewer values", "sweep")
    return sweep


SWEEP = Custom(lambda value, path: parse_sweep(value), {
    "type": "object",
    "propertyNames": {"pattern": rf"^({'|'.join(_SWEPT_HEADS)})(\.[^.]+)*$"},
    "additionalProperties": {"type": "array", "minItems": 1},
}, description="A grid over dotted keys, e.g. {topology.nodes: [2, 4, 8]}; every point runs.")
