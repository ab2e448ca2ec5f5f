"""A GPU library's choice (NCCL's protocol, channels, chunk) is resolved once per call shape, at dispatch.

The algorithm runs with it, the call's CollectiveRecord names it, and the ``collective``
workload's row reads the same object: three readers, one answer, and the tuner asked once
however many ranks and calls of that shape there are.
"""

from __future__ import annotations

import numpy as np
import pytest

from mpisim.collectives import nccl
from mpisim.collectives.nccl import tuner
from mpisim.mpi import SizePayload
from mpisim.scenario import load, run_scenario
from mpisim.scenario.run import new_world_factory
from tests.conftest import run_program

MiB = 2**20


def _scenario(algorithm: str, sizes: list[int]):
    return load({"units": "SI", "topology": {"preset": "dgx-h100", "nodes": 2}, "payload": "size",
                 "workload": {"kind": "collective", "collective": "allreduce", "algorithm": algorithm,
                              "sizes": sizes}})


def _run(algorithm: str, nbytes: int, calls: int = 1):
    new_world, _ = new_world_factory(_scenario("nccl_ring", [8]))
    world = new_world()

    def program(comm):
        for _ in range(calls):
            yield from comm.allreduce(SizePayload(nbytes // 4, np.float32), algorithm=algorithm)

    run_program(world, program)
    return world


@pytest.mark.parametrize("algorithm", ["nccl_ring", "nccl_tree", "nvls"])
@pytest.mark.parametrize("nbytes", [4096, 64 * MiB])
def test_every_rank_records_the_tuners_choice(algorithm, nbytes):
    world = _run(algorithm, nbytes)
    want = nccl.tune(world.comm_world(0).coll, algorithm, nbytes)
    records = world.tracer.collectives
    assert len(records) == world.size
    assert {(r.protocol, r.channels, r.chunk_bytes) for r in records} == \
        {(want.protocol.name, want.channels, want.chunk_bytes)}
    assert want.channels == 8  # one per NIC (rings, trees), one rail per local rank (nvls)


def test_mpi_algorithms_record_no_library_choice():
    world = _run("ring", 4 * MiB)
    assert {(r.protocol, r.channels, r.chunk_bytes) for r in world.tracer.collectives} == {(None, None, None)}


def test_the_tuner_is_asked_once_per_call_shape(monkeypatch):
    asked = []
    tune = tuner.tune
    monkeypatch.setattr(tuner, "tune", lambda *args: asked.append(args[1:]) or tune(*args))
    world = _run("nccl_ring", 4 * MiB, calls=3)
    assert len(world.tracer.collectives) == 3 * world.size
    assert asked == [("nccl_ring", 4 * MiB, "allreduce")]


def test_the_workload_row_names_the_recorded_choice():
    row = run_scenario(_scenario("nccl_tree", [16 * MiB])).rows[0]
    world = _run("nccl_tree", 16 * MiB)
    record = world.tracer.collectives[0]
    assert (row["protocol"], row["channels"], row["chunk_bytes"]) == (record.protocol, record.channels,
                                                                      record.chunk_bytes)
