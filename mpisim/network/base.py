"""The one interface between the MPI layer and the network: ``transfer(src, dst, nbytes)``.

A network model moves *nbytes* from rank *src* to rank *dst* and returns (as a SimPy
process generator) when the last byte has arrived. Everything else -- routes, link
capacities, contention -- stays behind this interface, as ASTRA-sim keeps its network
backends behind ``sim_send``/``sim_recv``. Models are registered by name so a scenario can
pick one with ``network: {model: fairshare}``.

A model may also offer the same transfer as a call-back, ``post(src, dst, nbytes, fn, arg)``:
start it now and call ``fn(arg)`` when the last byte has arrived (or return True at once,
without calling, when the transfer is over immediately). It is the same transfer with the
same timing; the MPI layer uses it when present because it needs no generator per message,
and falls back to running ``transfer`` otherwise.

Beyond moving bytes, a model declares what else it can answer, so that callers (the
collective-fidelity paths, the ``model`` selector) ask a question instead of testing its class:

* :meth:`NetworkModel.path_costs` -- a :class:`PathCosts` of one pair: latency, bottleneck
  rate and hops of the route a message between them takes, before any contention;
* :attr:`NetworkModel.capabilities` -- a :class:`Capabilities` record: whether concurrent
  transfers share a link at once, max-min fairly (so flows standing for a collective's
  messages time as the messages would); whether it takes a batch of transfers in one call
  (``post_all``); whether it takes weighted flows (one flow standing for several equal ones).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from mpisim.engine.sim import Proc, Simulation
    from mpisim.network.topology import Topology


@dataclass(frozen=True, slots=True)
class PathCosts:
    """What a message from one rank to another meets alone on the network: the route's costs.

    ``latency`` is the sum of its links' latencies (s), ``bottleneck`` its slowest link's rate
    (bytes/s; infinite for a rank to itself), ``hops`` the number of links it crosses.
    """

    latency: float
    bottleneck: float
    hops: int

    @property
    def seconds_per_byte(self) -> float:
        """1 / bottleneck: the β of an α-β model for this pair (0 for a rank to itself)."""
        return 0.0 if self.bottleneck == float("inf") else 1.0 / self.bottleneck


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a network model can do beyond ``transfer`` and ``post`` (see the module docstring).

    ``max_min_sharing``: transfers on one link at once share it max-min fairly, as
    collective-fidelity flows assume (the ``analytic`` model serves them in turn; a
    port-limited network holds a rank's transfers back). ``post_all``: ``post_all(transfers,
    done)`` starts a batch and tells only its last arrival. ``weighted``: ``post(...,
    weight=k)`` takes one flow standing for k equal ones.
    """

    max_min_sharing: bool = False
    post_all: bool = False
    weighted: bool = False


class NetworkModel(Protocol):
    """What the MPI layer may ask of a network."""

    sim: Simulation
    topology: Topology
    capabilities: Capabilities

    def transfer(self, src: int, dst: int, nbytes: int) -> Proc[None]:
        """Move *nbytes* from rank *src* to rank *dst*; return when the last byte arrives."""
        ...

    def path_costs(self, src: int, dst: int) -> PathCosts:
        """Return the costs of the path a message from rank *src* to rank *dst* takes, alone."""
        ...


def route_costs(topology: Topology, src: int, dst: int) -> PathCosts:
    """The PathCosts of *topology*'s route from rank *src* to rank *dst* (what the built-in models answer)."""
    summary = getattr(topology, "route_summary", None)
    if summary is not None:  # a built Topology: no Route kept for a pair asked about once
        return PathCosts(*summary(src, dst))
    route = topology.route(src, dst)
    return PathCosts(route.latency, route.bottleneck, len(route.links))


NetworkFactory = Callable[["Simulation", "Topology"], NetworkModel]

MODELS: dict[str, NetworkFactory] = {}


def register_model(name: str) -> Callable[[NetworkFactory], NetworkFactory]:
    """Register a network model class (or factory) under *name*."""

    def decorate(factory: NetworkFactory) -> NetworkFactory:
        if name in MODELS:
            raise ValueError(f"duplicate network model {name!r}")
        MODELS[name] = factory
        return factory

    return decorate
