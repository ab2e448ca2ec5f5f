"""Shared fixtures: small worlds on a contention-free `full` network, and a way to run programs on them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import mpisim.collectives  # noqa: F401  (installs the collective runner on Comm)
from mpisim.engine.sim import Simulation
from mpisim.mpi import MpiConfig, World
from mpisim.network.models import make_model
from mpisim.network.topology import FabricSpec, TopologySpec, build_topology


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite tests/golden/*.json from current results")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Schedule the modules marked ``first`` first (a stable sort: the rest keep their order).

    The suite runs on parallel workers, one test file at a time each (``--dist loadfile``); a
    file whose module fixture runs for minutes (every validation scenario) must start at once,
    or it starts last and the other workers wait for it.
    """
    items.sort(key=lambda item: item.get_closest_marker("first") is None)


def make_world(
    p: int = 2,
    *,
    alpha: float = 1e-6,
    bandwidth: float = 1e9,
    model: str = "analytic",
    ranks_per_node: int = 1,
    intra: FabricSpec | None = None,
    record_links: bool = False,
    **mpi: Any,
) -> World:
    """A world of *p* ranks where every pair of nodes has a direct link (latency alpha, bandwidth)."""
    nodes = p // ranks_per_node
    spec = TopologySpec(
        name="test",
        nodes=nodes,
        ranks_per_node=ranks_per_node,
        intra=intra if ranks_per_node > 1 else None,
        inter=FabricSpec("full", bandwidth, alpha) if nodes > 1 else None,
    )
    topology = build_topology(spec)
    sim = Simulation(seed=0)
    sim.tracer.record_links = record_links
    network = make_model(model, sim, topology)
    defaults = {"eager_limit_intra": 64 * 1024, "eager_limit_inter": 64 * 1024}
    defaults.update(mpi)
    return World(sim, topology, network, MpiConfig(**defaults))


def run_program(world: World, program: Callable[..., Any], *args: Any) -> list[Any]:
    """Run ``program(comm, *args)`` on every rank; return each rank's return value."""
    procs = world.launch(program, *args)
    world.run()
    return [proc.value for proc in procs]


@pytest.fixture
def world_factory() -> Callable[..., World]:
    return make_world
