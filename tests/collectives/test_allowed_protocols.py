"""A fabric's ``allowed_protocols``: NCCL chooses only among them, as under ``NCCL_PROTO``.

AWS's EFA plugin forces ``NCCL_PROTO=simple`` where the EFA cannot deliver 128-byte lines in
order (p4d, p4de; aws-ofi-nccl src/platform-aws.cpp). NCCL's tuner then never picks LL or
LL128 (tuning.cc ``protoEnable``), so a restricted fabric is never faster than the same
fabric unrestricted: the tuner only loses options.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from mpisim.collectives import nccl
from mpisim.scenario import dump, load, run_scenario
from mpisim.scenario.run import new_world_factory

KiB, MiB = 2**10, 2**20
SIZES = (8 * KiB, 256 * KiB, MiB, 16 * MiB)


def _raw(allowed: list[str] | None, algorithm: str = "auto", sizes=(8,), fidelity: str = "message") -> dict:
    inter: dict = {"latency": "10 us"}
    if allowed is not None:
        inter["allowed_protocols"] = allowed
    return {"units": "SI", "topology": {"preset": "dgx-a100", "nodes": 2, "inter": inter},
            "algorithms": {"selector": "nccl"}, "payload": "size", "fidelity": fidelity,
            "trace": {"messages": False, "spans": False},
            "workload": {"kind": "collective", "collective": "allreduce", "algorithm": algorithm,
                         "sizes": list(sizes)}}


def _comm(allowed: list[str] | None):
    new_world, _ = new_world_factory(load(_raw(allowed)))
    return new_world().comm_world(0).coll


@pytest.mark.parametrize("allowed", [["Simple"], ["LL", "Simple"], ["LL128", "Simple"]])
def test_the_tuner_and_auto_choose_only_allowed_protocols(allowed):
    comm = _comm(allowed)
    assert nccl.enabled_protocols(comm.world.topology.spec) == tuple(p for p in nccl.PROTOCOLS if p in allowed)
    for nbytes in (8, *SIZES, 256 * MiB):
        for algorithm in ("nccl_ring", "nccl_tree"):
            assert nccl.tune(comm, algorithm, nbytes).protocol.name in allowed
        assert nccl.best(comm, nbytes).protocol.name in [*allowed, "NVLS"]


def test_unrestricted_the_same_fabric_picks_ll_and_ll128():
    """The restriction bites: without it NCCL's tree takes LL for a small call and LL128 for some mid size."""
    comm = _comm(None)
    chosen = {nccl.tune(comm, "nccl_tree", nbytes).protocol.name for nbytes in SIZES}
    assert nccl.tune(comm, "nccl_tree", 8 * KiB).protocol.name == "LL"
    assert "LL128" in chosen


@pytest.mark.parametrize("fidelity", ["message", "collective"])
def test_simple_only_is_never_faster_than_unrestricted_under_auto(fidelity):
    """``auto`` times its candidates and runs the fastest: taking protocols away can only cost time."""
    free = run_scenario(load(_raw(None, "auto", SIZES, fidelity))).rows
    simple = run_scenario(load(_raw(["Simple"], "auto", SIZES, fidelity))).rows
    assert [row["protocol"] for row in simple] == ["Simple"] * len(SIZES)
    for a, b in zip(free, simple, strict=True):
        assert b["time_s"] >= a["time_s"] * (1 - 1e-12), (a["bytes"], a["protocol"], a["time_s"], b["time_s"])
    assert simple[0]["time_s"] > free[0]["time_s"]  # 8 KiB: LL was chosen and is faster


@pytest.mark.parametrize("fidelity", ["message", "collective"])
@pytest.mark.parametrize("algorithm", ["nccl_ring", "nccl_tree"])
def test_a_restricted_tuner_only_loses_options(algorithm, fidelity):
    """NCCL's tuner on a Simple-only fabric: its predicted time is never below the unrestricted one's,
    and where the unrestricted tuner chose Simple anyway the call is the very same (time to the bit)."""
    free_comm, simple_comm = _comm(None), _comm(["Simple"])
    for nbytes in SIZES:
        assert (nccl.tune(simple_comm, algorithm, nbytes).predicted
                >= nccl.tune(free_comm, algorithm, nbytes).predicted * (1 - 1e-12))
    free = run_scenario(load(_raw(None, algorithm, SIZES, fidelity))).rows
    simple = run_scenario(load(_raw(["Simple"], algorithm, SIZES, fidelity))).rows
    assert [row["protocol"] for row in simple] == ["Simple"] * len(SIZES)
    assert any(row["protocol"] != "Simple" for row in free)
    for a, b in zip(free, simple, strict=True):
        if a["protocol"] == "Simple":
            assert b["time_s"] == a["time_s"]


def test_the_key_round_trips_through_the_scenario_dump():
    scenario = load(_raw(["Simple", "LL"]))
    assert scenario.topology.inter.allowed_protocols == ("LL", "Simple")  # NCCL's order
    dumped = dump(scenario)
    assert dumped["topology"]["inter"]["allowed_protocols"] == ["LL", "Simple"]
    assert load(dumped).topology == scenario.topology
    assert "allowed_protocols" not in dump(load(_raw(None)))["topology"]["inter"]


@pytest.mark.parametrize(("value", "message"), [
    (["LL"], "topology.inter.allowed_protocols: must include Simple"),
    (["Simple", "NVLS"], "topology.inter.allowed_protocols[1]: expected one of LL, LL128, Simple"),
    ("Simple", "topology.inter.allowed_protocols: expected a list of protocols such as [Simple]"),
    ([], "topology.inter.allowed_protocols: expected at least one protocol"),
])
def test_a_bad_value_is_one_clear_line_and_exit_2(tmp_path, value, message):
    path = tmp_path / "bad.yaml"
    raw = _raw(None)
    raw["topology"]["inter"]["allowed_protocols"] = value
    path.write_text(yaml.safe_dump(raw))
    proc = subprocess.run([sys.executable, "-m", "mpisim", "run", str(path)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in proc.stderr, proc.stderr
