"""MPI's pipelined trees as a fluid (mpisim.collectives.fluid.pipeline): the replay where nothing is shared,
the whole run where the period is extrapolated, and the same answer every time."""

from __future__ import annotations

import pytest

from mpisim.collectives.fluid import pipeline as fluid_pipeline
from mpisim.collectives.fluid import tree as fluid_tree
from mpisim.collectives.trees import binary_tree, double_binary_tree
from mpisim.engine.sim import Simulation
from mpisim.mpi import MpiConfig, World
from mpisim.network.models import make_model
from mpisim.network.topology import FabricSpec, TopologySpec, build_topology

SEGMENT = 64 * 1024


def _comm(kind: str, p: int = 8, **mpi):
    topology = build_topology(TopologySpec(name="test", nodes=p, ranks_per_node=1,
                                           inter=FabricSpec(kind, 25e9, 1e-6)))
    sim = Simulation(seed=0)
    world = World(sim, topology, make_model("fairshare", sim, topology),
                  MpiConfig(eager_limit_intra=16 * 1024, eager_limit_inter=16 * 1024, **mpi))
    return world.comm_world(0)


def _program(comm, trees):
    edges = fluid_tree._mpi_edges(comm, trees)
    by_tree = [[e for e in edges if e.tree == t] for t in range(len(trees))]
    program = []
    for tree, tree_edges in zip(trees, by_tree, strict=True):
        up = {e.src: fluid_pipeline.PipelineEdge(e.costs, e.credit, e.links) for e in tree_edges if e.up}
        down = {e.dst: fluid_pipeline.PipelineEdge(e.costs, e.credit, e.links) for e in tree_edges if not e.up}
        program.append((tree.links, tree.segments, up, down))
    return program, by_tree


def _capacity(comm):
    return lambda link: comm.world.topology.links[link].effective_bandwidth


@pytest.mark.parametrize("mpi", [{}, {"send_overhead": 1e-6, "recv_overhead": 0.5e-6, "reduce_cost": 1e-11,
                                      "rendezvous_overhead": 2e-6}], ids=["bare", "overheads"])
def test_a_tree_whose_links_carry_one_stream_each_is_the_max_plus_replay(mpi):
    """One binary tree on a full network: no two transfers share a link, so the fluid is the replay's recurrence."""
    comm = _comm("full", **mpi)
    p, k = comm.size, 40
    tree = fluid_tree.Tree([binary_tree(p, r) for r in range(p)], None, (SEGMENT,) * (k - 1) + (SEGMENT // 3,),
                           window=1)
    program, (edges,) = _program(comm, [tree])
    assert max(e.pairs for e in edges) == 1
    fluid = fluid_pipeline.pipeline_time(program, 1, comm.world.config.reduce_cost, _capacity(comm))
    assert fluid == pytest.approx(fluid_tree.replay(tree, edges, comm.world.config.reduce_cost, k), rel=1e-12)


def test_the_period_stands_for_the_segments_it_does_not_run(monkeypatch):
    """On a star the four streams of a NIC fall into phase: K segments and the period give the whole run."""
    comm = _comm("star")
    p, k = comm.size, 300
    links = [double_binary_tree(p, r) for r in range(p)]
    trees = [fluid_tree.Tree([tree[t] for tree in links], None, (SEGMENT,) * k, window=1) for t in (0, 1)]
    program, _ = _program(comm, trees)
    capacity = _capacity(comm)
    whole, _ = fluid_pipeline._run(program, k, 1, 0.0, capacity)
    runs = []
    run = fluid_pipeline._run
    monkeypatch.setattr(fluid_pipeline, "_run", lambda program, rounds, *args: runs.append(rounds) or run(program, rounds, *args))
    fast = fluid_pipeline.pipeline_time(program, 1, 0.0, capacity)
    assert max(runs) < k  # it did extrapolate
    assert fast == pytest.approx(whole, rel=1e-9)
    # Each segment shares its NIC with three others for most of its way: about 4 x its bytes a period.
    period = (whole - fluid_pipeline._run(program, k - 100, 1, 0.0, capacity)[0]) / 100
    assert 4 * SEGMENT / 25e9 < period < 4 * SEGMENT / 25e9 + 8e-6
    assert fluid_pipeline.pipeline_time(program, 1, 0.0, capacity) == fast  # the same answer every time
