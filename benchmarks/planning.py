"""Capacity planning answered in seconds: hybrid-parallel training at 8,192 to 16,384 GPUs.

Each case runs one shipped validation scenario through the scenario layer, as ``mpisim run``
would, and prints the GPU count, the processor seconds the run took (process time, not wall:
the machine may be shared) and the peak resident memory:

* T11: Llama 3 405B on 8,192 H100 (tp 8, pp 16, dp 64);
* T12: the same on 16,384 H100 (dp 128);
* T13: the same at 131k context with cp 16 on 16,384 H100;
* T14: BLOOM 176B on 384 A100.

Where the fabric lets replicas fold (:mod:`mpisim.workloads.training.replicas`) only replica 0
is simulated and its data-parallel collectives are timed once per stage on the whole fabric, so
processor time no longer grows with dp.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from benchmarks.common import command, info, module_main, peak_rss

MODULE = "planning"
_ROOT = Path(__file__).resolve().parent.parent / "scenarios" / "validation"


def _case(stem: str):
    def run() -> list:
        from mpisim.scenario.load import load_file
        from mpisim.scenario.run import run_scenario

        t0 = time.process_time()
        path = next(_ROOT.rglob(f"{stem}.yaml"))  # validation/ (T11-T13) or its at-scale/ folder (T14)
        rows = run_scenario(load_file(str(path))).rows
        cpu = time.process_time() - t0
        row = rows[0]
        return [info(f"{stem}: {row['ranks']} GPUs, one iteration: processor time", cpu, "s",
                     reproduce=command(MODULE, stem.split("-")[0]),
                     note=f"simulated {row['iteration_time_s']:.3f} s per iteration, "
                          f"{row['simulated_ranks']} GPUs simulated, peak {peak_rss() / 2**30:.2f} GiB")]
    return run


CASES = {stem.split("-")[0]: _case(stem) for stem in (
    "t11-llama3-405b-8192xh100", "t12-llama3-405b-16384xh100",
    "t13-llama3-405b-131k-cp16-16384xh100", "t14-bloom-176b-384xa100")}


def main(argv: list[str] | None = None) -> int:
    return module_main(MODULE, __doc__, CASES, argv)


if __name__ == "__main__":
    sys.exit(main())
