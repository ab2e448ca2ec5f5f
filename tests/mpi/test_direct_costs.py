"""World.direct_costs: the direct path's own timing of a message, in closed form.

Step programs timed as recurrences (mpisim.collectives.fluid.mpi_ring) rely on it, so it is held
to the simulated direct path: a lone message of n bytes, its receive posted at a chosen time,
eager and rendezvous, inside a node and between nodes, with every MPI overhead switched on.
"""

from __future__ import annotations

import numpy as np
import pytest

from mpisim.mpi.payload import SizePayload
from mpisim.network.topology import FabricSpec
from tests.conftest import make_world

MPI = {"send_overhead": 1.5e-6, "recv_overhead": 0.7e-6, "copy_bandwidth": 5e9, "rendezvous_overhead": 2e-6,
       "eager_limit_intra": 8192, "eager_limit_inter": 4096}


def _predicted(world, src, dst, nbytes, t_send, t_recv):
    """(send complete, receive complete) from World.direct_costs, as its docstring states them."""
    c, cfg = world.direct_costs(src, dst), world.config
    copy = cfg.copy_time(nbytes)
    wire = c.latency + nbytes * c.beta
    if nbytes <= c.eager_limit:
        sent = t_send + cfg.send_overhead + copy
        arrival = sent + wire
        received = arrival + cfg.recv_overhead if arrival >= t_recv else t_recv + cfg.recv_overhead + copy
        return sent, received
    matched = max(t_send + cfg.send_overhead + c.rts, t_recv)
    landed = matched + c.cts + c.rendezvous_overhead + wire
    return landed, landed + cfg.recv_overhead


@pytest.mark.parametrize("nbytes", [0, 1000, 6000, 2**20])
@pytest.mark.parametrize("dst", [1, 2], ids=["same node", "other node"])
@pytest.mark.parametrize("t_recv", [0.0, 50e-6], ids=["receive first", "receive late"])
def test_a_lone_message_takes_what_direct_costs_says(nbytes, dst, t_recv):
    world = make_world(4, ranks_per_node=2, intra=FabricSpec("shm", 20e9, 0.3e-6), model="fairshare", **MPI)
    world.fidelity = "collective"
    times = {}

    def program(comm):
        coll = comm.coll  # an algorithm's context: its size-only messages take the direct path
        if comm.rank == 0:
            yield from coll.send(SizePayload(nbytes, np.dtype(np.uint8)), dest=dst)
            times["sent"] = comm.now
        elif comm.rank == dst:
            yield from comm.compute(t_recv)
            yield from coll.recv(source=0)
            times["received"] = comm.now

    world.launch(program)
    world.run()
    sent, received = _predicted(world, 0, dst, nbytes, 0.0, t_recv)
    assert times["sent"] == pytest.approx(sent, rel=1e-12, abs=1e-18)
    assert times["received"] == pytest.approx(received, rel=1e-12, abs=1e-18)


def test_the_eager_limit_and_the_rendezvous_overhead_follow_the_path():
    world = make_world(4, ranks_per_node=2, intra=FabricSpec("shm", 20e9, 0.3e-6), **MPI)
    inside, between = world.direct_costs(0, 1), world.direct_costs(0, 2)
    assert (inside.eager_limit, between.eager_limit) == (8192, 4096)
    assert (inside.rendezvous_overhead, between.rendezvous_overhead) == (0.0, 2e-6)
    assert between.latency > inside.latency and between.rts > between.latency
