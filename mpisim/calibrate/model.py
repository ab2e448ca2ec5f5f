"""The model side of a fit: a preset's parameters, and what mpisim predicts for each series.

A fit never uses a formula of its own: every prediction is an mpisim run of the workload that
measures what the file measured (``osu_latency`` -> the ``p2p`` latency test between two
nodes, ``all_reduce_perf`` on 8 GPUs -> the ``allreduce`` collective with ``algorithm: auto``
on one node of 8 GPUs), on the candidate preset, with size-only payloads. So the fitted preset
reproduces the points through exactly the code that will later use it, protocol switches,
NCCL's protocol choice and contention included.

:class:`Param` names one physically meaningful quantity of a preset: the wire latency between
nodes, the per-message CPU overheads, the host's per-byte cost of an eager message, a link's
achievable fraction of line rate, a GPU protocol's per-hop latency and bandwidth share, the
host stack's cap on send + receive together. Parameters are positive, and the fit moves
them in log space (a step is a ratio, so a latency of 1 us and a bandwidth of 25 GB/s are
moved alike).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mpisim.calibrate.measurements import Series
from mpisim.engine.units import parse_bandwidth, parse_size, parse_time
from mpisim.errors import ConfigError
from mpisim.scenario.load import load_dict
from mpisim.scenario.run import run_scenario

#: Series calibrate reads but mpisim has no workload for (their points stay out of the fit).
NOT_MODELLED = {"sendrecv": "mpisim has no sendrecv-ring workload"}


@dataclass(frozen=True)
class Param:
    """A preset quantity the fit may move. *keys*: dotted paths in the preset, scaled together."""

    keys: tuple[str, ...]
    kind: str  # time | bandwidth | fraction
    meaning: str

    @property
    def name(self) -> str:
        return " + ".join(self.keys)


#: Candidates, in the order the identifiability check considers them: when two parameters move
#: the predictions alike, the earlier one is fitted and the later one kept at the base's value.
CPU_PARAMS = (
    Param(("inter.efficiency",), "fraction", "achievable fraction of the NIC's line rate"),
    Param(("inter.latency",), "time", "one-way wire latency between nodes"),
    Param(("mpi.send_overhead", "mpi.recv_overhead"), "time",
          "per-message CPU overheads, sender and receiver scaled together"),
    Param(("mpi.copy_bandwidth",), "bandwidth", "host cost per byte of an eager message"),
    Param(("inter.host_bandwidth",), "bandwidth", "host stack's cap on sent + received bytes"),
    Param(("mpi.rendezvous_overhead",), "time", "time a large message holds its connection before its data"),
    Param(("intra.efficiency",), "fraction", "achievable fraction of the node's memory bandwidth"),
    Param(("intra.latency",), "time", "one-way latency inside a node"),
)
GPU_PARAMS = (
    Param(("intra.efficiency",), "fraction", "achievable fraction of NVLink / PCIe line rate"),
    Param(("inter.efficiency",), "fraction", "achievable fraction of the NIC's line rate"),
    *(Param((f"{fabric}.protocols.{proto}.{what}",), kind, f"{proto} {text} on the {where} fabric")
      for fabric, where in (("intra", "intra-node"), ("inter", "inter-node"))
      for proto in ("LL", "LL128", "Simple")
      for what, kind, text in (("latency", "time", "latency per hop"), ("efficiency", "fraction", "bandwidth share"))),
    *(Param((f"base_latency.{proto}",), "time", f"{proto} fixed cost per collective call")
      for proto in ("LL", "LL128", "Simple")),
    Param(("inter.latency",), "time", "one-way wire latency between nodes"),
)
#: The eager limit is a threshold, not a smooth parameter: it is found from the latency curve's knee.
EAGER_KEYS = {"inter": "mpi.eager_limit_inter", "intra": "mpi.eager_limit_intra"}


def get(raw: Mapping[str, Any], key: str) -> Any:
    """Return the value at dotted *key* of a preset mapping, or None."""
    node: Any = raw
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def put(raw: dict[str, Any], key: str, value: Any) -> None:
    """Set dotted *key* of a preset mapping, creating mappings on the way."""
    parts = key.split(".")
    node = raw
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


PARSERS = {"time": parse_time, "bandwidth": parse_bandwidth, "fraction": float, "size": parse_size}


def si_value(kind: str, raw: Any) -> float:
    """The SI value of a preset entry of *kind* (unit strings as presets write them)."""
    return float(PARSERS[kind](raw))


def unit_text(kind: str, value: float) -> Any:
    """An entry mpisim reads back exactly: ``1.42e-06 s``, ``2.13e9 B/s``, a fraction, ``12288 B``."""
    value = float(value)
    if kind == "time":
        return f"{value!r} s"
    if kind == "bandwidth":
        return f"{value!r} B/s"
    if kind == "size":
        return f"{int(value)} B"
    return float(value)


@dataclass(frozen=True)
class Shape:
    """The cluster a measurement ran on: nodes x ranks per node."""

    nodes: int
    ranks_per_node: int


def shape_of(series: Series, nodes: int, ranks_per_node: int) -> Shape:
    """Where *series* ran. p2p tests: two ranks on two nodes (one node with --nodes 1);
    ``osu_mbw_mr``: *pairs* ranks per node; nccl-tests: what the file lists; OSU collectives:
    the caller's --nodes x --ranks-per-node."""
    if series.test in ("latency", "bandwidth", "bibw"):
        return Shape(2, 1) if nodes >= 2 else Shape(1, 2)
    if series.test == "mbw_mr":
        return Shape(2, series.pairs) if nodes >= 2 else Shape(1, 2 * series.pairs)
    if series.ranks is not None:
        file_nodes = series.nodes or nodes
        if series.ranks % file_nodes:
            return Shape(nodes, ranks_per_node)
        return Shape(file_nodes, series.ranks // file_nodes)
    return Shape(nodes, ranks_per_node)


def path_kind(shape: Shape) -> str:
    """``inter`` if the series crosses nodes, else ``intra``."""
    return "inter" if shape.nodes > 1 else "intra"


def scenario(series: Series, preset: Mapping[str, Any], shape: Shape) -> dict[str, Any]:
    """The mpisim scenario that measures what *series* measured, on *preset*."""
    topology = {k: copy.deepcopy(v) for k, v in preset.items() if k != "mpi"}
    topology.update(nodes=shape.nodes, ranks_per_node=shape.ranks_per_node)
    sizes = [f"{p.nbytes} B" for p in series.points]
    if series.metric in ("latency_s", "bandwidth_Bps"):
        workload: dict[str, Any] = {"kind": "p2p", "test": series.test, "sizes": sizes}
        if series.test == "mbw_mr":
            workload["pairs"] = series.pairs
    else:
        workload = {"kind": "collective", "collective": series.test, "algorithm": "auto", "sizes": sizes,
                    "dtype": series.dtype}
    return {
        "name": "calibrate", "topology": topology, "mpi": copy.deepcopy(dict(preset.get("mpi") or {})),
        "payload": "size", "workload": workload, "trace": {"messages": False, "spans": False, "links": False},
    }


def predict(series: Series, preset: Mapping[str, Any], shape: Shape) -> list[float]:
    """mpisim's value for every point of *series* on *preset* (seconds or bytes/s)."""
    try:
        loaded = load_dict(scenario(series, preset, shape))
    except ConfigError as err:
        # The scenario is calibrate's own; the user wrote the file and the command line, so name those.
        where = "the file's '# Rank' lines" if series.ranks is not None else "--nodes and --ranks-per-node"
        raise ConfigError(f"cannot simulate this measurement on {shape.nodes} node(s) x {shape.ranks_per_node} "
                          f"rank(s) per node: {err.message} (the run's shape comes from {where})", "",
                          series.file) from None
    result = run_scenario(loaded)
    return [float(row[series.metric]) for row in result.rows]


def with_values(base: Mapping[str, Any], params: Sequence[Param], values: Sequence[float],
                eager: Mapping[str, int] | None = None) -> dict[str, Any]:
    """A copy of preset *base* with each parameter's keys scaled to *values* (SI).

    A parameter with several keys keeps their ratio: its value is the first key's, and the
    others move by the same factor.
    """
    preset = copy.deepcopy(dict(base))
    for param, value in zip(params, values, strict=True):
        first = si_value(param.kind, get(base, param.keys[0]))
        for key in param.keys:
            own = si_value(param.kind, get(base, key))
            scaled = value if key == param.keys[0] else own * value / first
            put(preset, key, unit_text(param.kind, scaled))
    for key, limit in (eager or {}).items():
        put(preset, key, unit_text("size", limit))
    return preset


def present(base: Mapping[str, Any], param: Param) -> bool:
    """True if *base* sets every key of *param* to a positive value (log space needs one)."""
    for key in param.keys:
        raw = get(base, key)
        if raw is None:
            return False
        try:
            value = si_value(param.kind, raw)
        except (ValueError, TypeError):
            return False
        if not (0 < value < math.inf):
            return False
    return True
