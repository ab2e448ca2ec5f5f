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
