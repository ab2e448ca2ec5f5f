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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from mpisim.engine.sim import Proc, Simulation
    from mpisim.network.topology import Topology


class NetworkModel(Protocol):
    """What the MPI layer may ask of a network."""

    sim: Simulation
    topology: Topology

    def transfer(self, src: int, dst: int, nbytes: int) -> Proc[None]:
        """Move *nbytes* from rank *src* to rank *dst*; return when the last byte arrives."""
        ...


NetworkFactory = Callable[["Simulation", "Topology"], NetworkModel]

_MODELS: dict[str, NetworkFactory] = {}


def register_model(name: str) -> Callable[[NetworkFactory], NetworkFactory]:
    """Register a network model class (or factory) under *name*."""

    def decorate(factory: NetworkFactory) -> NetworkFactory:
        if name in _MODELS:
            raise ValueError(f"duplicate network model {name!r}")
        _MODELS[name] = factory
        return factory

    return decorate


def model_names() -> list[str]:
    """Return the registered network model names, sorted."""
    _load_builtin_models()
    return sorted(_MODELS)


def make_model(name: str, sim: Simulation, topology: Topology, ports: int | None = None) -> NetworkModel:
    """Instantiate the network model registered as *name*, limited to *ports* messages per rank if given.

    Raises ``KeyError`` naming the known models if *name* is not registered.
    """
    _load_builtin_models()
    try:
        factory = _MODELS[name]
    except KeyError:
        raise KeyError(f"unknown network model {name!r}; known: {', '.join(sorted(_MODELS))}") from None
    model = factory(sim, topology)
    if ports is None:
        return model
    from mpisim.network.ports import PortLimitedNetwork

    return PortLimitedNetwork(model, ports)


def _load_builtin_models() -> None:
    # Importing the modules registers them; done lazily to keep import order simple.
    from mpisim.network import analytic, fairshare  # noqa: F401
