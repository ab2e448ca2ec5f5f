"""The network models by name: what a scenario's ``network: {model: ...}`` picks.

Each model registers itself (``base.register_model``) when its module is imported; this module
imports the built-in ones, so every name is known once it is loaded, and wraps a model in the
port limit (``network: {ports: N}``) when the scenario asks for one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mpisim.network import analytic, fairshare  # noqa: F401  (importing registers the built-in models)
from mpisim.network.base import MODELS, NetworkModel
from mpisim.network.ports import PortLimitedNetwork

if TYPE_CHECKING:
    from mpisim.engine.sim import Simulation
    from mpisim.network.topology import Topology


def model_names() -> list[str]:
    """Return the registered network model names, sorted."""
    return sorted(MODELS)


def make_model(name: str, sim: Simulation, topology: Topology, ports: int | None = None) -> NetworkModel:
    """Instantiate the network model registered as *name*, limited to *ports* messages per rank if given.

    Raises ``KeyError`` naming the known models if *name* is not registered.
    """
    try:
        factory = MODELS[name]
    except KeyError:
        raise KeyError(f"unknown network model {name!r}; known: {', '.join(sorted(MODELS))}") from None
    model = factory(sim, topology)
    return model if ports is None else PortLimitedNetwork(model, ports)
