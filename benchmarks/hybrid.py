"""Hybrid-parallel LLM training answered in seconds: the targets of the hybrid-parallel issue.

Each case runs through the scenario layer as ``mpisim run`` would (size-only payloads, no
per-message records, ``fidelity: collective``), on dgx-h100 nodes, with tensor parallelism 8
(one node per tensor-parallel group, so groups are folded: one simulated GPU each):

* GPT-3 175B (96 layers, hidden 12288), tp 8, pp 8, dp 24 on 1536 GPUs, global batch 1536,
  micro-batch 1: one iteration in <= 60 s of wall time;
* a 1T model (128 layers, hidden 25600), tp 8, pp 64, dp 6 on 3072 GPUs, global batch 1536:
  <= 120 s;
* the same GPT-3 175B at 65536 GPUs (tp 8, pp 8, dp 1024, global batch 8192: 8192 simulated
  GPUs): <= 120 s and < 4 GiB, the top of the 1 000 to 100 000 GPUs capacity planning asks about;
* a 64-point layout sweep for Llama-3-70B on 1024 GPUs (pp x ZeRO x micro-batch x schedule x
  recomputation, tp 8): <= 10 minutes on the 2-core machine (points run on every core).
"""

from __future__ import annotations

import sys

from benchmarks.common import command, module_main, peak_rss, stopwatch, target

MODULE = "hybrid"


def _scenario(nodes: int, workload: dict, sweep: dict | None = None) -> dict:
    raw = {"name": "bench-hybrid", "topology": {"preset": "dgx-h100", "nodes": nodes}, "payload": "size",
           "fidelity": "collective", "trace": {"messages": False, "spans": False},
           "workload": {"kind": "training", "compute": {"efficiency": 0.5}, "recompute": "full", "zero": 1,
                        "memory_check": "mark", **workload}}
    if sweep:
        raw["sweep"] = sweep
    return raw


def _run(raw: dict, jobs: int | None = None):
    from mpisim.scenario.load import load_dict
    from mpisim.scenario.run import run_scenario

    with stopwatch() as t:
        result = run_scenario(load_dict(raw), jobs=jobs)
    return result.rows, t["wall"]


def gpt3_175b() -> list:
    rows, wall = _run(_scenario(192, {"model": "gpt3-175b", "parallel": {"tp": 8, "pp": 8},
                                      "batch": {"global": 1536, "micro": 1}}))
    row = rows[0]
    return [target("GPT-3 175B, tp 8 x pp 8 x dp 24, 1536 GPUs, one iteration: wall time", wall, "s", 60.0,
                   reproduce=command(MODULE, "gpt3-175b"),
                   note=f"simulated {row['iteration_time_s']:.2f} s per iteration, {row['simulated_ranks']} GPUs "
                        f"simulated, peak {peak_rss() / 2**30:.2f} GiB")]


def gpt3_175b_65536() -> list:
    rows, wall = _run(_scenario(8192, {"model": "gpt3-175b", "parallel": {"tp": 8, "pp": 8},
                                       "batch": {"global": 8192, "micro": 1}}))
    row = rows[0]
    cmd = command(MODULE, "gpt3-175b-65536")
    return [target("GPT-3 175B, tp 8 x pp 8 x dp 1024, 65536 GPUs, one iteration: wall time", wall, "s", 120.0,
                   reproduce=cmd, note=f"simulated {row['iteration_time_s']:.3f} s per iteration, "
                                       f"{row['simulated_ranks']} GPUs simulated"),
            target("same: peak memory", peak_rss() / 2**30, "GiB", 4.0, reproduce=cmd)]


def one_trillion() -> list:
    model = {"layers": 128, "hidden": 25600, "heads": 160, "seq": 2048, "vocab": 51200}
    rows, wall = _run(_scenario(384, {"model": model, "parallel": {"tp": 8, "pp": 64},
                                      "batch": {"global": 1536, "micro": 1}}))
    row = rows[0]
    return [target("1T (128 layers, h 25600), tp 8 x pp 64 x dp 6, 3072 GPUs, one iteration: wall time", wall, "s",
                   120.0, reproduce=command(MODULE, "one-trillion"),
                   note=f"simulated {row['iteration_time_s']:.2f} s per iteration, {row['simulated_ranks']} GPUs "
                        f"simulated, peak {peak_rss() / 2**30:.2f} GiB")]


def sweep_70b() -> list:
    sweep = {"workload.parallel.pp": [1, 2, 4, 8], "workload.zero": [0, 1], "workload.batch.micro": [1, 2],
             "workload.schedule": ["1f1b", "gpipe"], "workload.recompute": ["full", "selective"]}
    raw = _scenario(128, {"model": "llama3-70b", "parallel": {"tp": 8}, "batch": {"global": 1024, "micro": 1}},
                    sweep)
    raw["workload"]["memory_check"] = "mark"
    rows, wall = _run(raw)
    fits = sum(1 for row in rows if row.get("fits"))
    return [target("Llama-3-70B layout sweep, 64 points, 1024 GPUs: wall time", wall, "s", 600.0,
                   reproduce=command(MODULE, "sweep-70b"), note=f"{len(rows)} rows, {fits} layouts fit 80 GiB")]


CASES = {"gpt3-175b": gpt3_175b, "gpt3-175b-65536": gpt3_175b_65536, "one-trillion": one_trillion, "sweep-70b": sweep_70b}


def main(argv: list[str] | None = None) -> int:
    return module_main(MODULE, __doc__, CASES, argv)


if __name__ == "__main__":
    sys.exit(main())
