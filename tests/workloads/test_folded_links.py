"""Folded tensor-parallel groups still show the NVLink traffic of their collectives (issue 30, item 5)."""

from __future__ import annotations

import pytest

from mpisim.scenario import load, run_scenario


def _training(fold: str) -> dict:
    return {"topology": {"preset": "dgx-h100", "nodes": 2}, "payload": "size", "fidelity": "collective",
            "trace": {"messages": False, "spans": False},
            "workload": {"kind": "training", "model": "llama2-7b", "parallel": {"tp": 8, "pp": 2},
                         "batch": {"global": 8, "micro": 1}, "fold": fold, "compute": {"efficiency": 0.5}}}


def _class_bytes(fold: str) -> dict[str, int]:
    (world,) = run_scenario(load(_training(fold))).records
    out: dict[str, int] = {}
    for link in world.link_totals:
        out[link["kind"]] = out.get(link["kind"], 0) + link["nbytes"]
    return out


def test_a_folded_run_credits_its_tp_collectives_to_nvlink_as_the_unfolded_run_moves_them():
    folded, full = _class_bytes("auto"), _class_bytes("none")
    assert folded.get("nvlink", 0) > 0
    # Every tp group's collectives are credited: the NVLink bytes of the run that simulates
    # every GPU, within what the pipeline's own messages add to NVLink there (none: pp crosses nodes).
    assert folded["nvlink"] == pytest.approx(full["nvlink"], rel=0.02)


def _dp_training(fold: str) -> dict:
    return {"topology": {"preset": "dgx-h100", "nodes": 4}, "payload": "size", "fidelity": "collective",
            "trace": {"messages": False, "spans": False},
            "workload": {"kind": "training", "model": "llama2-7b", "parallel": {"tp": 8},
                         "batch": {"global": 8, "micro": 1}, "zero": 1, "fold": fold,
                         "compute": {"efficiency": 0.5}}}


def _link_bytes(fold: str) -> dict[str, tuple[str, int]]:
    (world,) = run_scenario(load(_dp_training(fold))).records
    return {link["link"]: (link["kind"], link["nbytes"]) for link in world.link_totals}


def test_folded_replicas_credit_every_replicas_bytes_to_its_own_links():
    # Four replicas of tp 8, one per node, no pipeline: the NICs carry only the data-parallel
    # sync, NVLink only the tensor-parallel collectives. Replica 0 of tp rank 0 alone is
    # simulated, yet every node's NICs and NVLink ports show what the run that simulates
    # every GPU moves over them.
    folded, full = _link_bytes("auto"), _link_bytes("none")
    assert {kind for kind, _ in full.values()} == {"net", "nvlink"}
    assert folded.keys() == full.keys()
    for link, (_, nbytes) in full.items():
        assert folded[link][1] == pytest.approx(nbytes, rel=1e-9), link
