"""World.message_cost gives the time the message path takes for a lone message (eager, rendezvous, intra, inter)."""

from __future__ import annotations

import numpy as np
import pytest

from mpisim.network.topology import FabricSpec
from tests.conftest import make_world, run_program

# Two nodes of two ranks: 0 -> 1 stays in a node (shared memory), 0 -> 2 crosses the network.
MPI = {"eager_limit_intra": 16 * 1024, "eager_limit_inter": 4 * 1024, "header_bytes": 64,
       "send_overhead": 0.7e-6, "recv_overhead": 0.4e-6, "copy_bandwidth": 5e9, "rendezvous_overhead": 3e-6}


def _world(model: str):
    return make_world(4, alpha=1.5e-6, bandwidth=12.5e9, model=model, ranks_per_node=2,
                      intra=FabricSpec("shm", 40e9, 0.3e-6), **MPI)


@pytest.mark.parametrize("model", ["fairshare", "analytic"])
@pytest.mark.parametrize("dest", [1, 2], ids=["intra", "inter"])
@pytest.mark.parametrize("nbytes", [0, 2000, 10_000, 1_000_000], ids=["empty", "eager", "mid", "rendezvous"])
@pytest.mark.parametrize("t_recv", [0.0, 80e-6], ids=["posted", "late"])
def test_message_cost_is_the_message_paths_time(model, dest, nbytes, t_recv):
    """The receive completes when MessageCost.complete says, with its receive posted first or late."""
    done = {}

    def program(comm):
        if comm.rank == 0:
            yield from comm.send(np.zeros(nbytes, np.int8), dest=dest)
        elif comm.rank == dest:
            yield from comm.compute(t_recv)
            yield from comm.recv(source=0)
            done["recv"] = comm.now

    world = _world(model)
    run_program(world, program)
    cost = world.message_cost(0, dest, nbytes)
    kind = world.topology.path_kind(0, dest)
    assert cost.rendezvous == (nbytes > (MPI["eager_limit_inter"] if kind == "inter" else MPI["eager_limit_intra"]))
    assert done["recv"] == pytest.approx(cost.complete(0.0, t_recv), rel=1e-12, abs=1e-18)
    if t_recv == 0.0:
        assert done["recv"] == pytest.approx(cost.lone, rel=1e-12, abs=1e-18)
    protocols = {m.protocol for m in world.tracer.messages}
    assert protocols == {"rendezvous" if cost.rendezvous else "eager"}


def test_the_data_share_stretches_only_the_bytes():
    world = _world("fairshare")
    cost = world.message_cost(0, 2, 1_000_000)
    assert cost.complete(0.0, 0.0, share=3.0) - cost.lone == pytest.approx(2 * 1_000_000 / 12.5e9, rel=1e-12)
