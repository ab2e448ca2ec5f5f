"""Real data and size-only payloads produce identical timelines.

Time may depend on byte counts only, never on the numbers: for every algorithm, a run with
DataPayload buffers and a run with SizePayload stand-ins of the same count and dtype must
give the same MessageRecord list (every message, its protocol and its times) and the same
CollectiveRecord list. The configurations mix eager and rendezvous messages, uneven blocks,
reduction cost, per-message overheads and both network models.
"""

from __future__ import annotations

import numpy as np
import pytest

from mpisim.collectives import registry
from mpisim.mpi import SizePayload
from tests.collectives.helpers import run_collective

CONFIGS = {
    # small uneven count, all eager, with reduction cost and CPU overheads
    "small-eager": (13, {"reduce_cost": 1e-10, "send_overhead": 2e-7, "recv_overhead": 3e-7}),
    # 80 KB buffers against a 16 KiB eager limit: large blocks go by rendezvous
    "rendezvous": (20_011, {"eager_limit_inter": 16 * 1024, "reduce_cost": 1e-10}),
    # contention: the fair-share model with a copy bandwidth
    "fairshare": (4_099, {"model": "fairshare", "eager_limit_inter": 4096, "copy_bandwidth": 5e9}),
}


def algo_id(algo: registry.Algorithm) -> str:
    return f"{algo.collective}-{algo.name}"


def rank_counts(algo: registry.Algorithm) -> list[int]:
    """A power of two and, where allowed, a rank count that is not one."""
    return [4, 6] if algo.allows(6) else [4, 8]


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("algo", registry.available(), ids=algo_id)
def test_data_and_size_runs_have_identical_records(algo, config):
    count, world_kwargs = CONFIGS[config]
    for p in rank_counts(algo):
        rng = np.random.default_rng(p)
        if algo.collective == "barrier":
            data_inputs = size_inputs = None
        else:
            data_inputs = [rng.integers(-1000, 1000, count, dtype=np.int32) for _ in range(p)]
            size_inputs = [SizePayload(count, np.int32) for _ in range(p)]
        data_out, data_world = run_collective(algo, data_inputs, p, root=p - 1, **world_kwargs)
        size_out, size_world = run_collective(algo, size_inputs, p, root=p - 1, **world_kwargs)
        assert data_world.tracer.messages, f"p={p}: no messages recorded"
        assert data_world.tracer.messages == size_world.tracer.messages, f"p={p}"
        assert data_world.tracer.collectives == size_world.tracer.collectives, f"p={p}"
        # Same shapes of results, too: None where MPI returns nothing, equal counts elsewhere.
        for data, size in zip(data_out, size_out, strict=True):
            assert (data is None) == (size is None)
            if size is not None:
                assert len(data) == size.count
