"""Training workload: one data-parallel iteration of a 300M-parameter model on 64 GPUs.

The scenario a capacity planner would write: 8 DGX H100 nodes (the ``dgx-h100`` preset: 8
GPUs per node on NVSwitch, 8 NDR NICs per node on a rail-optimised fabric), a 300M-parameter
model in float32 (1.2 GB of gradients), 300 ms of compute, PyTorch-DDP gradient buckets of
25 MiB reduced while the backward pass still runs, the allreduce algorithm chosen by
``auto``, size-only payloads. It runs through the scenario layer, exactly as ``mpisim run``
would run it, with per-message records off.

Target: one iteration simulated in under 10 s of wall time.
"""

from __future__ import annotations

import sys

from benchmarks.common import command, info, module_main, stopwatch, target

MODULE = "training"
WALL_TARGET = 10.0


def scenario_dict() -> dict:
    """The training scenario, as a raw mapping (what a YAML file would hold)."""
    return {
        "name": "bench-train-300m-64",
        "topology": {"preset": "dgx-h100", "nodes": 8},
        "payload": "size",
        "trace": {"messages": False, "spans": False},
        "workload": {"kind": "training", "params": "300M", "dtype": "float32", "compute": "300 ms",
                     "sync": "auto", "iterations": 1},
    }


def train_300m_64() -> list:
    """Run one iteration; return its wall time and what it simulated."""
    from mpisim.scenario.load import load_dict
    from mpisim.scenario.run import run_scenario

    cmd = command(MODULE, "train-300m-64")
    scenario = load_dict(scenario_dict())
    with stopwatch() as t:
        result = run_scenario(scenario)
    row = result.rows[0]
    return [
        target("300M-parameter data-parallel iteration, 64 GPUs (8 x dgx-h100), size-only: wall time",
               t["wall"], "s", WALL_TARGET, reproduce=cmd,
               note=f"{row['buckets']} buckets, allreduce {row['algorithm']}"),
        info("simulated iteration time", row["iteration_time_s"] * 1e3, "ms", reproduce=cmd,
             note=f"exposed communication {row['exposed_comm_s'] * 1e3:.2f} ms, "
                  f"scaling efficiency {row['scaling_efficiency']:.3f}"),
    ]


CASES = {"train-300m-64": train_300m_64}


def main(argv: list[str] | None = None) -> int:
    return module_main(MODULE, __doc__, CASES, argv)


if __name__ == "__main__":
    sys.exit(main())
