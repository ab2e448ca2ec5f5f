"""Scale: big collectives with size-only payloads on the fair-share network.

A ring allreduce over p ranks sends p*2(p-1) messages, so 1024 ranks make two million
messages (each a rendezvous: request-to-send, clear-to-send, data, FIN, all flows in the
fair-share model). The cases:

* ``ring-allreduce-P`` -- 1.2 GB (300M float32) over P = 128, 256, 512, 1024 ranks, one per
  node, on a two-level fat tree of InfiniBand HDR (the ``ib-hdr`` preset with
  ``inter.kind: fat_tree``: 32 nodes per leaf switch, non-blocking spines);
* ``dissemination-barrier-16384`` and ``binomial-bcast-16384`` -- 16384 ranks on the same kind
  of fat tree (512 leaves), the bcast moving 1.2 GB from rank 0.

Records of individual messages and spans are off (counters stay exact), as a capacity-planning
run would have them. Each case reports wall time (building the topology included), SimPy
events processed and events per second, messages, and peak memory; the module then reports
how wall time grows from 128 to 1024 ranks against the p*2(p-1) growth of the message count.

Targets: ring allreduce over 1024 ranks in under 60 s and under 2 GiB peak memory; barrier and
bcast over 16384 ranks in under 60 s each.
"""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.common import (
    Figure,
    GiB,
    command,
    info,
    module_main,
    peak_rss,
    preset_topology,
    quiet_world,
    stopwatch,
    target,
)

MODULE = "scale"
NBYTES = 1_200_000_000  # 300M float32
WALL_TARGET = 60.0
MEMORY_TARGET = 2 * GiB
RING_SIZES = (128, 256, 512, 1024)


def fat_tree_world(p: int, preset_mpi: bool = True):
    """A world of *p* ranks, one per node, on the ib-hdr preset rebuilt as a two-level fat tree.

    The MPI parameters are the preset's (12 KiB eager limit, 0.1 us of CPU per message sent
    and received); without *preset_mpi*, mpisim's defaults (no per-message overhead).
    """
    topology, mpi = preset_topology("ib-hdr", **{"nodes": p, "inter.kind": "fat_tree"})
    return quiet_world(topology, "fairshare", mpi if preset_mpi else None)


def run_collective(collective: str, algorithm: str, p: int, nbytes: int) -> dict[str, float]:
    """Build the world, run one collective call on every rank, return the measurements."""
    import mpisim.collectives  # noqa: F401  (registers the algorithms)
    from mpisim.mpi import SizePayload

    with stopwatch() as total:
        world = fat_tree_world(p)
        payload = SizePayload(nbytes // 4, np.float32)

        def program(comm):
            yield from comm.world.synchronize(comm.world_rank)
            if collective == "barrier":
                yield from comm.barrier(algorithm=algorithm)
            elif collective == "bcast":
                yield from comm.bcast(payload, root=0, algorithm=algorithm)
            else:
                yield from comm.allreduce(payload, algorithm=algorithm)

        world.launch(program)
        with stopwatch() as loop:
            world.run()
    records = world.tracer.collectives
    return {
        "wall": total["wall"],
        "loop": loop["wall"],
        "events": world.events_processed,
        "messages": world.tracer.message_count,
        "sim_time": max(r.t_exit for r in records) - min(r.t_enter for r in records),
        "peak": peak_rss(),
    }


def case_figures(label: str, case: str, m: dict[str, float], wall_target: float,
                 memory_target: float | None = None) -> list[Figure]:
    cmd = command(MODULE, case)
    figures = [
        target(f"{label}: wall time", m["wall"], "s", wall_target, reproduce=cmd,
               note=f"simulated {m['sim_time'] * 1e3:.2f} ms, event loop {m['loop']:.1f} s"),
        info(f"{label}: messages", m["messages"], "", reproduce=cmd),
        info(f"{label}: SimPy events per second", m["events"] / m["loop"], "events/s", reproduce=cmd,
             note=f"{m['events']:,} events, {m['loop'] / max(m['messages'], 1) * 1e6:.1f} us per message"),
    ]
    if memory_target is None:
        figures.append(info(f"{label}: peak memory", m["peak"] / GiB, "GiB", reproduce=cmd))
    else:
        figures.append(target(f"{label}: peak memory", m["peak"] / GiB, "GiB", memory_target / GiB, reproduce=cmd))
    return figures


def ring_case(p: int):
    def run() -> list[Figure]:
        m = run_collective("allreduce", "ring", p, NBYTES)
        label = f"ring allreduce 1.2 GB, {p} ranks, fat tree"
        if p == max(RING_SIZES):
            return case_figures(label, f"ring-allreduce-{p}", m, WALL_TARGET, MEMORY_TARGET)
        figures = case_figures(label, f"ring-allreduce-{p}", m, float("inf"))
        figures[0] = info(figures[0].name, figures[0].value, "s", reproduce=figures[0].reproduce, note=figures[0].note)
        return figures

    return run


def barrier_16384() -> list[Figure]:
    m = run_collective("barrier", "dissemination", 16384, 0)
    return case_figures("dissemination barrier, 16384 ranks, fat tree", "dissemination-barrier-16384", m, WALL_TARGET)


def bcast_16384() -> list[Figure]:
    m = run_collective("bcast", "binomial", 16384, NBYTES)
    return case_figures("binomial bcast 1.2 GB, 16384 ranks, fat tree", "binomial-bcast-16384", m, WALL_TARGET)


def growth(figures: list[Figure]) -> list[Figure]:
    """Wall-time growth of the ring allreduce from the smallest to the largest rank count."""
    walls = {}
    for f in figures:
        for p in RING_SIZES:
            if f.name == f"ring allreduce 1.2 GB, {p} ranks, fat tree: wall time":
                walls[p] = f.value
    lo, hi = min(RING_SIZES), max(RING_SIZES)
    if lo not in walls or hi not in walls:
        return []
    messages = (hi * 2 * (hi - 1)) / (lo * 2 * (lo - 1))
    wall = walls[hi] / walls[lo]
    note = (f"messages grow {messages:.1f}x (p*2(p-1)); wall per message changes {wall / messages:.2f}x"
            f" ({', '.join(f'{p}: {walls[p]:.1f} s' for p in sorted(walls))})")
    return [info(f"ring allreduce wall-time growth, {lo} -> {hi} ranks", wall, "x", note=note,
                 reproduce=f"{command(MODULE, f'ring-allreduce-{lo}')} and --case ring-allreduce-{hi}")]


CASES = {f"ring-allreduce-{p}": ring_case(p) for p in RING_SIZES}
CASES["dissemination-barrier-16384"] = barrier_16384
CASES["binomial-bcast-16384"] = bcast_16384


def main(argv: list[str] | None = None) -> int:
    return module_main(MODULE, __doc__, CASES, argv, derive=growth)


if __name__ == "__main__":
    sys.exit(main())
