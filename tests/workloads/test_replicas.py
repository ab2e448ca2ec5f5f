"""Folded data-parallel replicas (mpisim.workloads.training.replicas) against the full run.

``fold: auto`` simulates replica 0 and times its data-parallel collectives on a fresh world;
``fold: tp`` simulates every replica (tensor-parallel groups still folded). Where nothing else
shares the collective's links while it runs, the two are the same run up to rounding.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from mpisim.scenario import load_dict
from mpisim.scenario.run import run_point
from tests.workloads.test_hybrid import row, scenario

PHASES = ("iteration_time_s", "compute_s", "bubble_s", "tp_comm_s", "pp_comm_s", "dp_comm_s", "exposed_comm_s")


def hybrid(parallel: dict[str, int], zero: int, overlap: bool, sync: str | None = None,
           inter: dict[str, Any] | None = None) -> dict[str, Any]:
    nodes = max(1, math.prod(parallel.values()) // 8)
    topology = {"preset": "dgx-h100", "nodes": nodes, **({"inter": inter} if inter else {})}
    raw = scenario(topology, parallel=parallel, batch={"global": 4 * parallel["dp"]}, zero=zero,
                   overlap={"dp": overlap}, **({"sync": sync} if sync else {}))
    raw["network"] = {"model": "fairshare"}
    return raw


def both(raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(folded, every replica simulated) rows of one scenario."""
    return row(raw), row({**raw, "workload": {**raw["workload"], "fold": "tp"}})


@pytest.mark.parametrize(("parallel", "zero", "overlap"), [
    ({"tp": 8, "pp": 2, "dp": 2}, 0, False),
    ({"tp": 8, "pp": 2, "dp": 2}, 1, True),
    ({"tp": 8, "pp": 2, "dp": 4}, 1, False),
    ({"tp": 8, "dp": 8}, 0, True),
    ({"tp": 8, "dp": 4}, 3, False),
    ({"tp": 2, "pp": 2, "dp": 4}, 1, False),
    ({"tp": 1, "pp": 2, "dp": 8}, 1, True),
])
def test_folded_replicas_give_the_full_runs_iteration_and_phases(parallel, zero, overlap):
    folded, full = both(hybrid(parallel, zero, overlap))
    assert folded["simulated_ranks"] == full["simulated_ranks"] // parallel["dp"]
    for key in PHASES:
        assert folded[key] == pytest.approx(full[key], rel=1e-9, abs=1e-15), key


@pytest.mark.parametrize("raw", [
    # tp 2 puts two replicas in a node: stage 1's ring allreduce starts while its last backward
    # send to stage 0 is still on the links the ring uses.
    hybrid({"tp": 2, "pp": 2, "dp": 4}, 0, False, sync="ring"),
    # The overlapped reduce-scatter crosses nodes while the stage's pipeline sends do: both
    # take turns on the rank's NCCL proxy thread (mpisim.mpi.proxy).
    hybrid({"tp": 8, "pp": 2, "dp": 4}, 1, True),
], ids=["shared-links", "shared-proxy"])
def test_a_sync_sharing_a_resource_with_a_pipeline_send_is_the_one_difference(raw):
    # The full run shares the links or the proxy thread; the folded delay was timed on an idle
    # fabric, so the send finishes sooner (pp_comm_s smaller), and that is the only difference:
    # the iteration moves by no more than the sends' own extra time (at most all of it, when
    # the delayed send is on the critical path), a small share of the iteration.
    folded, full = both(raw)
    delay = full["pp_comm_s"] - folded["pp_comm_s"]
    assert delay > 0
    assert abs(full["iteration_time_s"] - folded["iteration_time_s"]) <= delay * (1 + 1e-9)
    assert delay < 2e-3 * full["iteration_time_s"]


def test_a_blocking_spine_simulates_every_replica_and_says_so():
    # Replicas' syncs meet on the shared uplinks at times that differ per stage and replica.
    raw = hybrid({"tp": 8, "pp": 2, "dp": 4}, 1, True, inter={"oversubscription": 2})
    out = run_point(load_dict(raw))
    assert out.rows[0]["simulated_ranks"] == out.rows[0]["ranks"] == 64  # tp groups are not folded there either
    assert any("every replica simulated" in note and "blocking" in note for note in out.notes)


def test_overlapped_zero3_streams_are_not_folded():
    # The parameter gathers and gradient reduce-scatters share the NIC at a phase the run decides.
    raw = hybrid({"tp": 8, "dp": 4}, 3, True)
    folded, full = both(raw)
    assert folded == full


@pytest.mark.parametrize(("parallel", "zero", "overlap"), [
    ({"tp": 8, "dp": 2}, 1, False),  # each node is one replica: 8 GPUs on 4 NICs
    ({"tp": 8, "pp": 2, "dp": 2}, 0, False),  # each node is one stage of one replica
])
def test_shared_nics_within_one_replicas_stage_fold_exactly(parallel, zero, overlap):
    # Two GPUs share each NIC, but both belong to the same replica and stage: replica 0 is
    # simulated with its own sharing, and each stage's measurement runs both sharers at once.
    raw = hybrid(parallel, zero, overlap, inter={"kind": "fat_tree", "nics": 4})
    folded, full = both(raw)
    assert folded["simulated_ranks"] == full["simulated_ranks"] // parallel["dp"]
    for key in PHASES:
        assert folded[key] == pytest.approx(full[key], rel=1e-9, abs=1e-15), key


@pytest.mark.parametrize("parallel", [{"tp": 2, "dp": 8}, {"tp": 4, "pp": 2, "dp": 2}],
                         ids=["two-replicas-per-nic", "two-stages-per-nic"])
def test_nics_shared_across_replicas_or_stages_simulate_every_replica_and_say_so(parallel):
    # Local rank j uses NIC j % 4: GPUs 0 and 4 of a node share NIC 0. With tp 2 they are in
    # different replicas; with tp 4 pp 2, in different stages, whose syncs overlap in time.
    raw = hybrid(parallel, 1, False, inter={"kind": "fat_tree", "nics": 4})
    out = run_point(load_dict(raw))
    assert out.rows[0]["simulated_ranks"] > out.rows[0]["ranks"] // parallel["dp"]  # more than one replica
    assert any("every replica simulated" in note and "share a NIC" in note for note in out.notes)
