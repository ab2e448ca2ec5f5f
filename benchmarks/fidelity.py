"""Collective fidelity: the MPI algorithms' size-only messages on the direct path (issue 13 item 2).

At ``fidelity: collective`` the messages inside collective calls skip the rendezvous
handshake's flows (its RTS and CTS become delays, the FIN goes) and keep no records
(mpisim.mpi.world, "Collective fidelity"). Each case runs through the scenario layer as
``mpisim run`` would, and prints the simulated time beside the wall time:

* ``ring-1024``: ring allreduce of 1.2 GB over 1024 ranks on a fat tree (25 GB/s, 1 us,
  default ``mpi:``), the ``scenario_run`` case at collective fidelity, through ``mpisim run
  FILE --json`` in a child process; target <= 2 s;
* ``train-300m-1024``: one data-parallel iteration of the 300M-parameter model (the
  ``training`` module's scenario) on 128 x dgx-h100 (1024 GPUs); target <= 5 s;
* ``train-300m-16384``: the same iteration on 2048 x dgx-h100 (16384 GPUs); targets <= 60 s
  and < 4 GiB;
* ``dbt-128``: ``double_binary_tree`` allreduce of 1 GiB over 128 ranks on the same fat tree;
  target <= 10 s.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import ROOT, Figure, GiB, command, info, module_main, peak_rss, stopwatch, target
from benchmarks.scenario_run import SCENARIO
from benchmarks.training import scenario_dict

MODULE = "fidelity"
FAT_TREE = {"kind": "fat_tree", "bandwidth": "25 GB/s", "latency": "1 us"}


def ring_1024() -> list[Figure]:
    p = 1024
    cmd = command(MODULE, "ring-1024")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"ring-{p}.yaml"
        path.write_text(SCENARIO.format(p=p) + "fidelity: collective\n")
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "mpisim", "run", str(path), "--json"], cwd=ROOT,
                              capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
    name = f"mpisim run: ring allreduce 1.2 GB, {p} ranks, fat tree, default mpi, fidelity collective: wall time"
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return [Figure(name, float(done.returncode), "exit code", "0", False, cmd, tail[:200])]
    messages = p * 2 * (p - 1)
    return [target(name, wall, "s", 2.0, reproduce=cmd,
                   note=f"{messages:,} messages, {wall / messages * 1e6:.1f} us each")]


def _run(raw: dict):
    from mpisim.scenario.load import load_dict
    from mpisim.scenario.run import run_scenario

    scenario = load_dict(raw)
    with stopwatch() as t:
        result = run_scenario(scenario)
    return result.rows[0], t["wall"]


def _train_300m(nodes: int, wall_target: float, memory_target: float | None = None) -> list[Figure]:
    """One 300M data-parallel iteration on *nodes* x dgx-h100 at collective fidelity."""
    gpus = nodes * 8
    raw = scenario_dict()
    raw.update(name=f"bench-train-300m-{gpus}", fidelity="collective", topology={"preset": "dgx-h100", "nodes": nodes})
    row, wall = _run(raw)
    cmd = command(MODULE, f"train-300m-{gpus}")
    figures = [
        target(f"300M data-parallel iteration, {gpus} GPUs ({nodes} x dgx-h100), fidelity collective: wall time",
               wall, "s", wall_target, reproduce=cmd, note=f"{row['buckets']} buckets, allreduce {row['algorithm']}"),
        info("simulated iteration time", row["iteration_time_s"] * 1e3, "ms", reproduce=cmd,
             note=f"exposed communication {row['exposed_comm_s'] * 1e3:.2f} ms"),
    ]
    if memory_target is not None:
        figures.append(target("same: peak memory", peak_rss() / GiB, "GiB", memory_target, reproduce=cmd))
    return figures


def train_300m_1024() -> list[Figure]:
    return _train_300m(128, 5.0)


def train_300m_16384() -> list[Figure]:
    return _train_300m(2048, 60.0, 4.0)


def dbt_128() -> list[Figure]:
    raw = {"name": "bench-dbt-128", "topology": {"nodes": 128, "inter": FAT_TREE}, "network": "fairshare",
           "payload": "size", "fidelity": "collective", "trace": {"messages": False, "spans": False},
           "workload": {"kind": "collective", "collective": "allreduce", "algorithm": "double_binary_tree",
                        "sizes": ["1 GiB"]}}
    row, wall = _run(raw)
    return [target("double_binary_tree allreduce 1 GiB, 128 ranks, fat tree, fidelity collective: wall time",
                   wall, "s", 10.0, reproduce=command(MODULE, "dbt-128"),
                   note=f"simulated {row['time_s'] * 1e3:.2f} ms, busbw {row['busbw_GBps']:.1f} GB/s")]


CASES = {"ring-1024": ring_1024, "train-300m-1024": train_300m_1024, "train-300m-16384": train_300m_16384,
         "dbt-128": dbt_128}


def main(argv: list[str] | None = None) -> int:
    return module_main(MODULE, __doc__, CASES, argv)


if __name__ == "__main__":
    sys.exit(main())
