"""Collective calls advanced as one batch (mpisim.collectives.bulk) against one process per rank.

The batch must be the per-rank path bit for bit: every rank's entry and exit, every
collective record in the order the per-rank path appends them, the bytes on every link and
the message counters -- with repeated calls, uneven blocks, shared-memory and network hops in
one ring, both network models, and point-to-point traffic from outside the call slowing its
flows (the ranks that wait for a late flow).
"""

from __future__ import annotations

import numpy as np
import pytest

import mpisim.collectives  # noqa: F401  (installs the collective runner)
from mpisim.collectives import bulk
from mpisim.mpi.payload import SizePayload
from mpisim.network.topology import FabricSpec
from mpisim.workloads.collective import _Point, _rank_program
from tests.conftest import make_world

MPI = {"send_overhead": 1e-6, "recv_overhead": 0.5e-6, "copy_bandwidth": 8e9, "rendezvous_overhead": 1e-6}


def _world(model: str, p: int):
    world = make_world(p, ranks_per_node=4, intra=FabricSpec("shm", 20e9, 0.3e-6), model=model, **MPI)
    world.fidelity = "collective"
    return world


def _traffic(comm):
    """A large message from rank 0 to rank 4 across the network, sharing the ring's links."""
    if comm.rank == 0:
        yield from comm.send(SizePayload(2**22, np.dtype(np.uint8)), dest=4, tag=7)
    else:
        yield from comm.recv(source=0, tag=7)


def _run(batch: bool, collective: str, count: int, iterations: int, model: str, p: int, traffic: bool):
    world = _world(model, p)
    point = _Point(collective, "dissemination" if collective == "barrier" else "ring", "sum", 0, iterations,
                   count, np.dtype(np.float32), False, 0)
    spans = [[] for _ in range(p)]
    if traffic:
        world.launch(_traffic, ranks=[0, 4])
    if batch:
        buf = None if collective == "barrier" else SizePayload(count, np.dtype(np.float32))
        driver = bulk.bulk_driver(world, collective, point.algorithm, buf, "sum", 0, iterations, spans)
        assert driver is not None
        world.launch_batch(driver)
    else:
        world.launch(_rank_program, point, [None] * p, spans, [])
    world.run()
    return (spans, list(world.tracer.collectives), list(world.network.link_bytes), world.tracer.message_count,
            world.tracer.message_bytes, world.env.now)


@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reduce_scatter", "barrier"])
@pytest.mark.parametrize("model", ["fairshare", "analytic"])
@pytest.mark.parametrize(("count", "p", "iterations", "traffic"),
                         [(1000, 8, 1, False), (300_001, 12, 3, False), (2**20 + 3, 16, 2, True), (7, 12, 2, True)])
def test_batch_is_the_per_rank_path_bit_for_bit(collective, model, count, p, iterations, traffic):
    per_rank = _run(False, collective, count, iterations, model, p, traffic)
    batch = _run(True, collective, count, iterations, model, p, traffic)
    assert batch == per_rank
    spans = batch[0]
    assert all(len(s) == iterations for s in spans)
    assert all(exit_ >= enter for s in spans for enter, exit_ in s)


def test_no_batch_where_it_cannot_stand_for_the_ranks():
    """Message fidelity, and an algorithm whose twin has no batch form, keep one process per rank."""
    world = _world("fairshare", 8)
    buf = SizePayload(1000, np.dtype(np.float32))
    assert bulk.bulk_driver(world, "allreduce", "recursive_doubling", buf, "sum", 0, 1, []) is None
    world.fidelity = "message"
    world = _world("fairshare", 8)
    world.fidelity = "message"
    assert bulk.bulk_driver(world, "allreduce", "ring", buf, "sum", 0, 1, []) is None
