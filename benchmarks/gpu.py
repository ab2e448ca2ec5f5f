"""GPU clusters fast enough to sweep: NCCL-style collectives at ``fidelity: collective``.

The targets of the GPU-clusters issue, each through the scenario layer as ``mpisim run``
would run it (size-only payloads, no per-message records), on dgx-h100 nodes:

* ``nccl_ring`` allreduce of 256 MiB on 512 GPUs (64 nodes): <= 5 s of wall time;
* one data-parallel iteration of a 7B-parameter bf16 model, ``sync: auto`` (NCCL's rule set
  on a GPU preset), on 128 GPUs (16 nodes): <= 10 s;
* ``nccl_tree`` and ``nvls`` allreduce of 1 GiB on 16 nodes: <= 5 s each (their trees as one
  flow per tree edge, :mod:`mpisim.collectives.fluid.tree`).
"""

from __future__ import annotations

import sys

from benchmarks.common import command, module_main, stopwatch, target

MODULE = "gpu"


def _collective(nodes: int, algorithm: str, size: str, fidelity: str) -> dict:
    return {"name": f"bench-{algorithm}", "topology": {"preset": "dgx-h100", "nodes": nodes}, "payload": "size",
            "fidelity": fidelity, "trace": {"messages": False, "spans": False},
            "workload": {"kind": "collective", "collective": "allreduce", "algorithm": algorithm, "sizes": [size],
                         "dtype": "float32"}}


def _run(raw: dict):
    from mpisim.scenario.load import load_dict
    from mpisim.scenario.run import run_scenario

    scenario = load_dict(raw)
    with stopwatch() as t:
        result = run_scenario(scenario)
    return result.rows[0], t["wall"]


def ring_512() -> list:
    row, wall = _run(_collective(64, "nccl_ring", "256 MiB", "collective"))
    return [target("nccl_ring allreduce 256 MiB, 512 GPUs (64 x dgx-h100), fidelity collective: wall time",
                   wall, "s", 5.0, reproduce=command(MODULE, "ring-512"),
                   note=f"simulated {row['time_s'] * 1e3:.3f} ms, busbw {row['busbw_GBps']:.1f} GB/s")]


def train_7b_128() -> list:
    raw = {"name": "bench-7b-128", "topology": {"preset": "dgx-h100", "nodes": 16}, "payload": "size",
           "fidelity": "collective", "trace": {"messages": False, "spans": False},
           "workload": {"kind": "training", "params": "7B", "dtype": "bfloat16", "compute": "2 s", "sync": "auto",
                        "bucket_cap": "100 MiB"}}
    row, wall = _run(raw)
    return [target("7B bf16 data-parallel iteration, 128 GPUs (16 x dgx-h100), sync auto: wall time",
                   wall, "s", 10.0, reproduce=command(MODULE, "train-7b-128"),
                   note=f"{row['buckets']} buckets via {row['algorithm']}, comm {row['comm_time_s'] * 1e3:.1f} ms")]


def tree_nvls_16() -> list:
    out = []
    for algorithm in ("nccl_tree", "nvls"):
        row, wall = _run(_collective(16, algorithm, "1 GiB", "collective"))
        out.append(target(f"{algorithm} allreduce 1 GiB, 128 GPUs (16 x dgx-h100), fidelity collective: wall time",
                          wall, "s", 5.0, reproduce=command(MODULE, "tree-nvls-16"),
                          note=f"simulated {row['time_s'] * 1e3:.3f} ms, busbw {row['busbw_GBps']:.1f} GB/s"))
    return out


CASES = {"ring-512": ring_512, "train-7b-128": train_7b_128, "tree-nvls-16": tree_nvls_16}


def main(argv: list[str] | None = None) -> int:
    return module_main(MODULE, __doc__, CASES, argv)


if __name__ == "__main__":
    sys.exit(main())
