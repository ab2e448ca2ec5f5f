"""Run every benchmark and print each figure, its target, PASS/FAIL and the command to reproduce it.

    python -m benchmarks                 # everything (several minutes)
    python -m benchmarks --only scale    # one module: engine_overhead, scale, scenario_run,
                                         # realdata, sweeps, training, gpu, fairshare_bench,
                                         # exec_pingpong, hybrid, fidelity, scaling, million,
                                         # planning
    python -m benchmarks --list          # the modules and their cases

Each case runs in a fresh process (so its peak memory is its own), one after the other (so
cases do not compete for the cores). The targets, from the "Performance and scale" issue, on
a 2-core machine with 24 GiB:

1. engine overhead: mpisim's wall time per eager message within 5x a bare SimPy ping-pong;
2. scale (size-only, fair share): ring allreduce of 1.2 GB over 1024 ranks on a fat tree in
   under 60 s and 2 GiB; dissemination barrier and binomial bcast over 16384 ranks in under
   60 s each; and how wall time grows from 128 to 1024 ranks;
   and the same ring through ``mpisim run`` with default MPI parameters (scenario_run): 1024
   ranks in at most 30 s, per message at most 3x a bare SimPy message;
3. real data: ring allreduce of 300M float32 per rank over 8 ranks in at most 1.5x the inputs'
   memory and 3x numpy's time for the same additions; an oversized run refused up front;
4. sweeps: a 40-point sweep at least 1.7x faster on 2 cores than on 1, and a 64-point sweep on a
   2-worker Dask LocalCluster at least 1.7x faster than on 1 worker, rows identical;
5. training: one iteration of the 300M-parameter data-parallel scenario on 64 GPUs in < 10 s;
6. gpu: nccl_ring 256 MiB on 512 GPUs in <= 5 s and a 7B bf16 data-parallel iteration on 128
   GPUs in <= 10 s, nccl_tree and nvls at 1 GiB on 16 nodes in <= 5 s each (fidelity: collective).
7. hybrid: one hybrid-parallel iteration of GPT-3 175B on 1536 GPUs in <= 60 s, of a 1T model
   on 3072 GPUs in <= 120 s, and a 64-point 70B layout sweep on 1024 GPUs in <= 10 minutes.
8. fidelity (``fidelity: collective``, issue 13): the 1024-rank ring through ``mpisim run`` in
   <= 2 s, a 300M data-parallel iteration on 1024 GPUs in <= 5 s and on 16384 GPUs in <= 60 s
   and < 4 GiB, double_binary_tree 1 GiB on 128 ranks in <= 10 s.
9. scaling (``fidelity: collective``): a dissemination barrier and a ring allreduce from 128 to
   131072 ranks, wall time and memory; the barrier over 131072 ranks in <= 60 s.
10. million (processor time, issue 32): a 1.2 GB ring allreduce at collective fidelity from 16384 to
   1048576 ranks (the curve: time, memory, growth exponent), <= 60 s and 8 GB at 1048576; auto
   allreduce and bcast on 131072 ranks run or are refused up front; message fidelity per message
   (ring steps, 256 to 4096 ranks) against a bare SimPy ring, events per message flat.
11. planning (processor time, issue 32): the published at-scale rows T11-T14 (Llama 3 405B on 8,192
   and 16,384 H100s, 131K context; BLOOM 176B on 384 A100s) through ``mpisim run``, with peak memory.

Exit status 0 when every target is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

from benchmarks import (
    engine_overhead,
    exec_pingpong,
    fairshare_bench,
    fidelity,
    gpu,
    hybrid,
    million,
    planning,
    realdata,
    scale,
    scaling,
    scenario_run,
    sweeps,
    training,
)
from benchmarks.common import Figure, GiB, print_figures, run_isolated

#: (module name, its cases, figures derived from several of its cases), in report order.
MODULES = [
    ("engine_overhead", engine_overhead.CASES, None),
    ("scale", scale.CASES, scale.growth),
    ("scenario_run", scenario_run.CASES, None),
    ("realdata", realdata.CASES, None),
    ("sweeps", sweeps.CASES, None),
    ("training", training.CASES, None),
    ("gpu", gpu.CASES, None),
    ("fairshare_bench", {"cost-per-event": fairshare_bench.cost_per_event}, None),
    ("exec_pingpong", exec_pingpong.CASES, None),
    ("hybrid", hybrid.CASES, None),
    ("planning", planning.CASES, None),
    ("fidelity", fidelity.CASES, None),
    ("scaling", scaling.CASES, scaling.table),
    ("million", million.CASES, million.curve),
]


def machine() -> str:
    """One line describing the machine the figures were measured on."""
    import os

    memory = ""
    try:
        with open("/proc/meminfo") as f:
            total = int(f.readline().split()[1]) * 1024
        memory = f", {total / GiB:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs{memory}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=[m for m, _, _ in MODULES],
                        help="run only this module (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the modules and their cases, run nothing")
    args = parser.parse_args(argv)
    if args.list:
        for module, cases, _ in MODULES:
            print(f"{module}: {', '.join(cases)}")
        return 0
    print(f"mpisim benchmarks on {machine()}")
    figures: list[Figure] = []
    started = time.perf_counter()
    for module, cases, derive in MODULES:
        if args.only and module not in args.only:
            continue
        print(f"\n== {module}")
        found: list[Figure] = []
        for case in cases:
            case_figures = run_isolated(module, case)
            print_figures(case_figures)
            found.extend(case_figures)
        if derive is not None:
            derived = derive(found)
            print_figures(derived)
            found.extend(derived)
        figures.extend(found)
    held = [f for f in figures if f.passed is not None]
    failed = [f for f in held if not f.passed]
    print(f"\n== summary ({time.perf_counter() - started:.0f} s)")
    for figure in held:
        print(figure.line())
    print(f"{len(held) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
