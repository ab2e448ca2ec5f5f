"""Smoothness sweeps: the model's time moves with its inputs the way hardware does, no jumps.

A capacity plan compares points a few percent apart (200G against 400G rails, one bucket
size against another), so a model whose time jumps by 15 % when a bandwidth moves by 0.25 %
cannot answer it, whatever its agreement with one measured row. This module sweeps, finely
around each preset's own value,

* the inter-node bandwidth (380 to 500 Gb/s around the 400 Gb/s NICs) for ``nccl_ring``,
  ``nccl_tree`` and ``nvls`` on 8 x ``dgx-h100`` (64 GPUs), and 180 to 250 Gb/s around
  200 Gb/s for the MPI ``ring`` and ``rabenseifner`` on 16 ``ib-hdr`` nodes;
* the message size (about 1 % apart around 256 MiB) on the same clusters,

and records the times in ``reports/validation-sweeps.json`` with a figure beside it. The
validation report renders a table from the JSON: for each series, whether it is monotone and
the largest change of time between neighbouring points per percent of input change.

Usage::

    python -m mpisim.validation.sweeps            # run the sweeps (a few minutes), write JSON + PNG
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from mpisim.scenario import load, run_scenario
from mpisim.scenario.run import write_atomic

DEFAULT_JSON = Path("reports") / "validation-sweeps.json"
DEFAULT_FIGURE = Path("reports") / "validation-sweeps.png"
COMMAND = "python -m mpisim.validation.sweeps"

MiB = 2**20
GPU_BANDWIDTHS_GBPS = (380, 392, 396, 398, 399, 400, 401, 402, 404, 408, 450, 500)
CPU_BANDWIDTHS_GBPS = (180, 190, 196, 198, 199, 200, 201, 202, 204, 208, 225, 250)
SIZES_MIB = (240, 248, 252, 254, 255, 256, 257, 258, 260, 264, 272)

#: (series name, preset, nodes, algorithm, MPI algorithm or NCCL-style)
SERIES = (
    ("nccl_ring on 8 x dgx-h100", "dgx-h100", 8, "nccl_ring", GPU_BANDWIDTHS_GBPS),
    ("nccl_tree on 8 x dgx-h100", "dgx-h100", 8, "nccl_tree", GPU_BANDWIDTHS_GBPS),
    ("nvls on 8 x dgx-h100", "dgx-h100", 8, "nvls", GPU_BANDWIDTHS_GBPS),
    ("ring on 16 x ib-hdr", "ib-hdr", 16, "ring", CPU_BANDWIDTHS_GBPS),
    ("rabenseifner on 16 x ib-hdr", "ib-hdr", 16, "rabenseifner", CPU_BANDWIDTHS_GBPS),
)
BASE_SIZE = 256 * MiB


def point_time(preset: str, nodes: int, algorithm: str, nbytes: int, bandwidth_gbps: float | None = None) -> float:
    """Simulate one allreduce of *nbytes* (float32, size-only) and return its time in seconds."""
    topology: dict[str, Any] = {"preset": preset, "nodes": nodes}
    if bandwidth_gbps is not None:
        topology["inter"] = {"bandwidth": bandwidth_gbps * 1e9 / 8}
    raw = {"units": "SI", "topology": topology, "payload": "size", "trace": {"messages": False, "spans": False},
           "workload": {"kind": "collective", "collective": "allreduce", "algorithm": algorithm,
                        "sizes": [nbytes], "dtype": "float32"}}
    return run_scenario(load(raw)).rows[0]["time_s"]


def run_sweeps(log: Any = None) -> dict[str, Any]:
    """Run every series over bandwidth and over size; return the JSON document."""
    out: dict[str, Any] = {"command": COMMAND, "size_bytes": BASE_SIZE, "series": []}
    for name, preset, nodes, algorithm, bandwidths in SERIES:
        by_bw = [point_time(preset, nodes, algorithm, BASE_SIZE, bw) for bw in bandwidths]
        by_size = [point_time(preset, nodes, algorithm, size * MiB) for size in SIZES_MIB]
        out["series"].append({"name": name, "preset": preset, "nodes": nodes, "algorithm": algorithm,
                              "bandwidth_gbps": list(bandwidths), "time_by_bandwidth_s": by_bw,
                              "size_mib": list(SIZES_MIB), "time_by_size_s": by_size})
        if log is not None:
            print(f"{name}: done", file=log)
    return out


#: A reversal smaller than this is not counted against monotonicity: max-min fair sharing is not
#: monotone in general, and where NVLink and the NICs are within a few percent of each other
#: the ring's time wobbles by up to 0.15 % (the property tests allow 0.5 %, see
#: tests/validation/test_metamorphic.py).
MONOTONE_SLACK = 5e-3


def steps(inputs: Sequence[float], times: Sequence[float], rising: bool) -> tuple[bool, float]:
    """Return (monotone, largest |relative time change| per unit of relative input change) of a series.

    *rising*: time must grow with the input (size), else fall (bandwidth); a reversal within
    :data:`MONOTONE_SLACK` does not count.
    """
    monotone, worst = True, 0.0
    for (x0, t0), (x1, t1) in zip(zip(inputs, times, strict=True), zip(inputs[1:], times[1:], strict=True), strict=False):
        dt = (t1 - t0) / t0
        if (dt < -MONOTONE_SLACK) if rising else (dt > MONOTONE_SLACK):
            monotone = False
        worst = max(worst, abs(dt) / abs((x1 - x0) / x0))
    return monotone, worst


def table(document: Mapping[str, Any]) -> list[str]:
    """Return the Markdown table of the sweeps: monotone or not, and the largest step per input step."""
    lines = ["| series | bandwidth sweep monotone* | max time change per 1 % of bandwidth | "
             "size sweep monotone* | max time change per 1 % of size |",
             "| :--- | :---: | ---: | :---: | ---: |"]
    for s in document["series"]:
        bw_ok, bw_step = steps(s["bandwidth_gbps"], s["time_by_bandwidth_s"], rising=False)
        size_ok, size_step = steps(s["size_mib"], s["time_by_size_s"], rising=True)
        lines.append(f"| {s['name']} | {'yes' if bw_ok else 'NO'} | {bw_step:.2f} % | "
                     f"{'yes' if size_ok else 'NO'} | {size_step:.2f} % |")
    return lines


def plot(document: Mapping[str, Any], path: Path) -> None:
    """Draw both sweeps of every series, time relative to the series' own middle point."""
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    ax_bw, ax_size = fig.subplots(1, 2)
    for s in document["series"]:
        bw = s["time_by_bandwidth_s"]
        mid = bw[len(bw) // 2]
        ref = s["bandwidth_gbps"][len(bw) // 2]
        ax_bw.plot([b / ref for b in s["bandwidth_gbps"]], [t / mid for t in bw], marker="o", ms=3, label=s["name"])
        sz = s["time_by_size_s"]
        ax_size.plot([m / 256 for m in s["size_mib"]], [t / sz[len(sz) // 2] for t in sz], marker="o", ms=3,
                     label=s["name"])
    ax_bw.set_xlabel("inter-node bandwidth / the preset's")
    ax_bw.set_ylabel("time / time at the preset's bandwidth")
    ax_bw.set_title("allreduce 256 MiB: bandwidth swept")
    ax_size.set_xlabel("message size / 256 MiB")
    ax_size.set_ylabel("time / time at 256 MiB")
    ax_size.set_title("size swept at the preset's bandwidth")
    for ax in (ax_bw, ax_size):
        ax.grid(alpha=0.3)
    ax_size.legend(fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output", type=Path, default=DEFAULT_JSON, help="where to write the JSON")
    args = parser.parse_args(argv)
    document = run_sweeps(log=sys.stderr)
    write_atomic(args.output, json.dumps(document, indent=1) + "\n")
    plot(document, args.output.with_suffix(".png"))
    print("\n".join(table(document)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
