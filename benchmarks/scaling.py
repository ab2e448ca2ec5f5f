"""Scaling at collective fidelity: wall time and memory from 128 to 131072 ranks (issue 13).

Two size-only collectives on a fat tree (25 GB/s, 1 us, mpisim's default ``mpi:``), through the
scenario layer as ``mpisim run`` runs them, at ``fidelity: collective``, each rank count in a
fresh process (so each peak memory is its own):

* ``barrier-P``: a dissemination barrier, ceil(lg P) rounds of empty messages;
* ``ring-P``: a ring allreduce of 1.2 GB, 2(P-1) steps of 1.2 GB / P per hop.

Both run as step programs (``mpisim/collectives/fluid/mpi_ring.py``): no message is simulated;
the call replays its steps as a recurrence over the ranks, vectorised with numpy, and moves
the ring's bytes as one flow per hop. What is left grows with P: building the topology and the
world (links, one SimPy process and mailbox per rank), one collective call per rank (a few
events each), the hop costs (one route per hop and round: P lg P for the barrier, P for the
ring) and the recurrence itself (P per step, the steps until the ring is in steady state).

Target (the issue's): the barrier over 131072 ranks in <= 60 s. ``python -m benchmarks.scaling``
runs every case and then writes ``benchmarks/scaling.png`` and prints the table that
benchmarks/README.md shows.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from benchmarks.common import Figure, GiB, command, info, module_main, peak_rss, stopwatch, target

MODULE = "scaling"
RANKS = (128, 1024, 8192, 16384, 131072)
BARRIER_TARGET_S = 60.0
FAT_TREE = {"kind": "fat_tree", "bandwidth": "25 GB/s", "latency": "1 us"}
FIGURE = Path(__file__).with_name("scaling.png")


def scenario(kind: str, p: int) -> dict:
    """The scenario of one case, as the raw mapping a YAML file would hold."""
    workload = ({"kind": "collective", "collective": "barrier", "algorithm": "dissemination"} if kind == "barrier"
                else {"kind": "collective", "collective": "allreduce", "algorithm": "ring", "sizes": ["1.2 GB"]})
    return {"name": f"scaling-{kind}-{p}", "topology": {"nodes": p, "inter": FAT_TREE}, "network": "fairshare",
            "payload": "size", "fidelity": "collective", "trace": {"messages": False, "spans": False},
            "workload": workload}


def case(kind: str, p: int):
    def run() -> list[Figure]:
        from mpisim.scenario.load import load_dict
        from mpisim.scenario.run import run_scenario

        with stopwatch() as t:
            result = run_scenario(load_dict(scenario(kind, p)))
        cmd = command(MODULE, f"{kind}-{p}")
        label = f"{kind} at collective fidelity, {p} ranks"
        simulated = result.rows[-1]["time_s"]
        note = f"simulated {simulated * 1e3:.3f} ms"
        wall = (target(f"{label}: wall time", t["wall"], "s", BARRIER_TARGET_S, reproduce=cmd, note=note)
                if kind == "barrier" and p == max(RANKS)
                else info(f"{label}: wall time", t["wall"], "s", reproduce=cmd, note=note))
        return [wall, info(f"{label}: peak memory", peak_rss() / GiB, "GiB", reproduce=cmd)]

    return run


CASES = {f"{kind}-{p}": case(kind, p) for kind in ("barrier", "ring") for p in RANKS}


def table(figures: list[Figure]) -> list[Figure]:
    """Print the scaling table, write the figure; return the growth figures (wall per rank, 128 -> max)."""
    values: dict[tuple[str, int, str], float] = {}
    for f in figures:
        for kind in ("barrier", "ring"):
            for p in RANKS:
                for what in ("wall time", "peak memory"):
                    if f.name == f"{kind} at collective fidelity, {p} ranks: {what}":
                        values[kind, p, what] = f.value
    print("\n| ranks | barrier wall | barrier memory | ring wall | ring memory |\n|---|---|---|---|---|")
    for p in RANKS:
        cells = [f"{values.get((kind, p, what), float('nan')):.2f} {unit}"
                 for kind in ("barrier", "ring") for what, unit in (("wall time", "s"), ("peak memory", "GiB"))]
        print(f"| {p} | " + " | ".join(cells) + " |")
    _plot(values)
    out = []
    lo, hi = min(RANKS), max(RANKS)
    for kind in ("barrier", "ring"):
        if (kind, lo, "wall time") in values and (kind, hi, "wall time") in values:
            growth = values[kind, hi, "wall time"] / values[kind, lo, "wall time"]
            out.append(info(f"{kind}: wall time growth from {lo} to {hi} ranks ({hi // lo}x the ranks)", growth, "x",
                            reproduce=command(MODULE)))
    return out


def _plot(values: dict[tuple[str, int, str], float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_wall, ax_mem) = plt.subplots(1, 2, figsize=(9, 3.6))
    for kind, marker in (("barrier", "o"), ("ring", "s")):
        ranks = [p for p in RANKS if (kind, p, "wall time") in values]
        label = "dissemination barrier" if kind == "barrier" else "ring allreduce 1.2 GB"
        ax_wall.loglog(ranks, [values[kind, p, "wall time"] for p in ranks], marker=marker, label=label)
        ax_mem.loglog(ranks, [values[kind, p, "peak memory"] for p in ranks], marker=marker, label=label)
    ax_wall.axhline(BARRIER_TARGET_S, color="grey", linestyle=":", label="60 s target")
    ax_wall.set(xlabel="ranks", ylabel="wall time (s)", title="wall time, fidelity: collective")
    ax_mem.set(xlabel="ranks", ylabel="peak memory (GiB)", title="peak memory")
    for ax in (ax_wall, ax_mem):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    partial = FIGURE.with_suffix(".png.partial")
    fig.savefig(partial, dpi=110, format="png")
    plt.close(fig)
    os.replace(partial, FIGURE)  # a reader never sees half a figure


def main(argv: list[str] | None = None) -> int:
    return module_main(MODULE, __doc__, CASES, argv, derive=table)


if __name__ == "__main__":
    sys.exit(main())
