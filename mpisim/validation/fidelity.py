"""Fidelity equivalence: every algorithm at ``fidelity: collective`` against ``fidelity: message``.

At collective fidelity the size-only messages inside collective calls take the MPI layer's
direct path (mpisim.mpi.world, "Collective fidelity": the rendezvous handshake is timed, not
sent, and nothing is recorded), NCCL rings run as pipelined flows (mpisim.collectives.nccl),
and tree algorithms as one flow per tree edge (mpisim.collectives.fluid_tree). This module runs every registered algorithm both ways over a grid
of topologies, sizes and rank counts, and records each pair of simulated times with the wall
time of each run:

* topologies ``full``, ``star``, ``fat_tree`` and ``rail`` (one rank per node, 25 GB/s,
  1 us) with 8 and 64 ranks, and 4 x ``dgx-h100`` (32 GPUs, where the GPU algorithms run too);
* sizes 1 KiB, 1 MiB and 1 GiB (each rank's buffer, float32), fair-share network; with 64
  ranks 64 MiB stands in for 1 GiB (the pipelined and tree algorithms take minutes per run
  there at message fidelity, and 64 MiB is as far into the bandwidth regime);
* the GPU presets at scale (``--gpu``): ``dgx-h100`` with 8 to 128 nodes (64 to 1,024 GPUs),
  NCCL's algorithms (``nccl_ring``, ``nccl_tree``, ``nvls``) at 1 MiB, 16 MiB and 1.2 GB -- the
  cases where a twin's pipeline model meets many nodes, and where ``fidelity: auto`` must know
  whether the twin holds (mpisim.collectives.fluid.validated reads its verdicts from here).

The times agree within 2 % where the handshake's links carry nothing else; where they differ,
it is because the message path's RTS, CTS and FIN flows share links with data (a header
waits behind other traffic there, and data gives up a little bandwidth to it). Usage::

    python -m mpisim.validation.fidelity        # the whole grid (several minutes), writes the JSON
    python -m mpisim.validation.fidelity --gpu  # the GPU presets at scale (hours at 1,024 GPUs; resumes)

``python -m mpisim.validation`` renders the report's "Fidelity" table from that JSON;
tests/validation/test_fidelity_equivalence.py runs a fast subset of the same grid.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mpisim.collectives import registry
from mpisim.scenario import load, run_scenario
from mpisim.scenario.run import write_atomic

DEFAULT_JSON = Path("reports") / "validation-fidelity.json"
DEFAULT_GPU_JSON = Path("reports") / "validation-fidelity-gpu.json"
COMMAND = "python -m mpisim.validation.fidelity"
TOLERANCE = 0.02

KiB, MiB, GiB = 2**10, 2**20, 2**30
SIZES = (KiB, MiB, GiB)
#: The largest size with 64 ranks (see the module docstring).
LARGE_64 = 64 * MiB
RANKS = (8, 64)
FABRICS = ("full", "star", "fat_tree", "rail")
#: The GPU cluster: 4 x dgx-h100 (32 GPUs), where the NCCL-style algorithms run as well.
GPU_CASE = "dgx-h100 x 4"
GPU_ALGORITHMS = frozenset({"nccl_ring", "nccl_tree", "nvls", "nvls_tree", "nccl_p2p"})
#: The GPU presets at scale: (preset, nodes) with 64 to 1,024 GPUs, and what runs there.
GPU_SCALE_NODES = (8, 16, 32, 64, 128)
GPU_SCALE_ALGORITHMS = ("nccl_ring", "nccl_tree", "nvls")
GPU_SCALE_SIZES = (MiB, 16 * MiB, 1_200_000_000)


def topology(case: str) -> dict[str, Any]:
    """The scenario topology of a case name (``fat_tree, 64 ranks`` or ``dgx-h100 x 4``)."""
    if case == GPU_CASE:
        return {"preset": "dgx-h100", "nodes": 4}
    if case.startswith("dgx-"):
        preset, nodes = case.split(" x ")
        return {"preset": preset, "nodes": int(nodes)}
    kind, ranks = case.split(", ")
    return {"nodes": int(ranks.split()[0]), "inter": {"kind": kind, "bandwidth": 25e9, "latency": 1e-6}}


def cases() -> list[str]:
    """Every case of the grid, in report order."""
    return [f"{kind}, {p} ranks" for kind in FABRICS for p in RANKS] + [GPU_CASE]


def gpu_scale_cases() -> list[str]:
    """The GPU cases at scale, smallest first (each is much slower than the one before)."""
    return [f"dgx-h100 x {nodes}" for nodes in GPU_SCALE_NODES]


def sizes(case: str) -> tuple[int, ...]:
    """The buffer sizes run on *case*."""
    if case.startswith("dgx-") and case != GPU_CASE:
        return GPU_SCALE_SIZES
    return (KiB, MiB, LARGE_64) if case.endswith(", 64 ranks") else SIZES


def algorithms(case: str) -> list[registry.Algorithm]:
    """The registered algorithms that run on *case* (GPU ones on the GPU cluster only)."""
    p = 32 if case == GPU_CASE else int(case.split(", ")[1].split()[0])
    return [a for a in registry.available()
            if a.allows(p) and (case == GPU_CASE or a.name not in GPU_ALGORITHMS)]


def _scenario(case: str, algorithm: registry.Algorithm, sizes: Sequence[int], fidelity: str) -> dict[str, Any]:
    workload: dict[str, Any] = {"kind": "collective", "collective": algorithm.collective,
                                "algorithm": algorithm.name}
    if algorithm.collective != "barrier":
        workload["sizes"] = list(sizes)
    return {"units": "SI", "topology": topology(case), "network": "fairshare", "payload": "size",
            "fidelity": fidelity, "trace": {"messages": False, "spans": False}, "workload": workload}


def compare(case: str, algorithm: registry.Algorithm, sizes: Sequence[int] = SIZES) -> list[dict[str, Any]]:
    """Run *algorithm* on *case* at both fidelities; one row per size (a barrier has one row, 0 B).

    Each row holds both simulated times, their relative difference and the wall time of each
    fidelity's run (which covers all *sizes*).
    """
    times: dict[str, list[dict[str, Any]]] = {}
    wall: dict[str, float] = {}
    for fidelity in ("message", "collective"):
        scenario = load(_scenario(case, algorithm, sizes, fidelity))
        t0 = time.perf_counter()
        times[fidelity] = run_scenario(scenario).rows
        wall[fidelity] = time.perf_counter() - t0
    out = []
    for detailed, fast in zip(times["message"], times["collective"], strict=True):
        out.append({"case": case, "collective": algorithm.collective, "algorithm": algorithm.name,
                    "bytes": int(detailed.get("bytes", 0)), "message_s": detailed["time_s"],
                    "collective_s": fast["time_s"], "difference": fast["time_s"] / detailed["time_s"] - 1,
                    "wall_message_s": wall["message"], "wall_collective_s": wall["collective"]})
    return out


def run_grid(save: Callable[[list[dict[str, Any]]], None] | None = None, gpu: bool = False,
             rows: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Every algorithm on every case (see the module docstring); *save* gets the rows after each case.

    With *gpu*, the GPU presets at scale instead (:func:`gpu_scale_cases`), one row saved at a
    time: their message-fidelity runs take minutes to hours. *rows* are kept and their
    (case, algorithm, bytes) not run again, so an interrupted grid resumes.
    """
    compare(GPU_CASE, registry.get("barrier", "dissemination"))  # warm up, so the first row's wall time is fair
    rows = list(rows or [])
    done = {(r["case"], r["algorithm"], r["bytes"]) for r in rows}
    if gpu:
        for case in gpu_scale_cases():
            for size in GPU_SCALE_SIZES:
                for name in GPU_SCALE_ALGORITHMS:
                    if (case, name, size) in done:
                        continue
                    rows.extend(compare(case, registry.get("allreduce", name), (size,)))
                    print(f"{case}: allreduce {name} {size} B", file=sys.stderr, flush=True)
                    if save is not None:
                        save(rows)
        return rows
    for case in cases():
        for algorithm in algorithms(case):
            rows.extend(compare(case, algorithm, sizes(case)))
            print(f"{case}: {algorithm.collective} {algorithm.name}", file=sys.stderr, flush=True)
        if save is not None:
            save(rows)
    return rows


# ----------------------------------------------------------------------------------------- rendering


def _size(nbytes: int) -> str:
    return "-" if nbytes == 0 else f"{nbytes // GiB} GiB" if nbytes >= GiB else \
        f"{nbytes // MiB} MiB" if nbytes >= MiB else f"{nbytes // KiB} KiB"


def _time(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.2f} us"


def table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The report's Fidelity table: one line per algorithm and case, each size's times and difference."""
    within = sum(abs(r["difference"]) <= TOLERANCE for r in rows)
    worst = max(rows, key=lambda r: abs(r["difference"]))
    grouped: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for r in rows:
        grouped.setdefault((r["collective"], r["algorithm"], r["case"]), []).append(r)
    lines = [
        f"**{within} of {len(rows)} rows within {TOLERANCE:.0%}; largest difference {worst['difference']:+.2%} "
        f"({worst['collective']} {worst['algorithm']}, {worst['case']}, {_size(worst['bytes'])}).** "
        "Each cell: message-fidelity time / collective-fidelity time (difference). Speed-up: wall time "
        "of the message-fidelity run over the collective-fidelity run, both covering the three sizes "
        "(below about 50 ms of wall time it is mostly start-up and noise).",
        "",
        "| collective | algorithm | case | 1 KiB | 1 MiB | 1 GiB (64 MiB with 64 ranks) | wall (message) | speed-up |",
        "|---|---|---|---|---|---|---:|---:|",
    ]
    for (collective, algorithm, case), group in grouped.items():
        cells = []
        for r in group:
            flag = " **" if abs(r["difference"]) > TOLERANCE else ""
            cells.append(f"{_time(r['message_s'])} / {_time(r['collective_s'])} ({r['difference']:+.2%}){flag}")
        cells += [""] * (3 - len(cells))  # a barrier has one size
        first = group[0]
        speedup = first["wall_message_s"] / first["wall_collective_s"] if first["wall_collective_s"] > 0 else 1.0
        lines.append(f"| {collective} | {algorithm} | {case} | {' | '.join(cells)} | "
                     f"{first['wall_message_s']:.2f} s | {speedup:.1f}x |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Run the grid and write its JSON. Returns 0."""
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, default=DEFAULT_JSON, help="where to write the JSON")
    parser.add_argument("--gpu", action="store_true",
                        help="the GPU presets at scale (64 to 1,024 GPUs), resuming the rows already in the JSON")
    args = parser.parse_args(argv)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    if args.gpu and args.output == DEFAULT_JSON:
        args.output = DEFAULT_GPU_JSON
    kept = json.loads(args.output.read_text())["rows"] if args.gpu and args.output.exists() else []

    def save(rows: list[dict[str, Any]]) -> None:
        write_atomic(args.output, json.dumps({"command": COMMAND, "tolerance": TOLERANCE, "rows": rows}, indent=1) + "\n")

    rows = run_grid(save, gpu=args.gpu, rows=kept)
    print(f"{sum(abs(r['difference']) <= TOLERANCE for r in rows)} of {len(rows)} rows within {TOLERANCE:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
