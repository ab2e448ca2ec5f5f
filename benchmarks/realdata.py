"""Real data: a ring allreduce of 300M float32 (1.2 GB per rank) over 8 ranks, with numpy buffers.

Every rank's 1.2 GB gradient lives in this one process, so the inputs alone are 9.6 GB. The
run hands each buffer over with ``in_place`` (``MPI_IN_PLACE``): the ring reduces each
arriving block straight into the receiver's buffer and copies each finished block into it,
so the result is left in the inputs and nothing of their size is ever allocated again. Its
wall time is compared with numpy doing the very same element-wise additions on the same
buffers (the (p-1) x p block additions of the reduce-scatter), measured in the same run, and
its peak memory with the inputs' size. The results are checked element by element against
the closed-form sum (inputs are small integers, so float32 sums are exact in any order).

Before allocating anything the run asks :func:`mpisim.collectives.memory.check_memory`
whether it fits; the ``refuse`` case shows a run that does not fit being refused up front,
with the estimate, before a byte is allocated.

Targets: peak memory at most 1.5x the ranks' input buffers; wall time at most 3x numpy's.
"""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.common import (
    Figure,
    GiB,
    command,
    current_rss,
    info,
    module_main,
    peak_rss,
    stopwatch,
    target,
)

MODULE = "realdata"
RANKS = 8
COUNT = 300_000_000  # float32 elements per rank: 1.2 GB
PERIOD = 251  # inputs: x_r[i] = i % PERIOD + r, so every sum is a small exact integer
CHUNK = 1 << 22
MEMORY_TARGET = 1.5
TIME_TARGET = 3.0


def fill(x: np.ndarray, rank: int) -> None:
    """Write rank *rank*'s input into *x* in chunks (no temporary of x's size)."""
    pattern = (np.arange(CHUNK + PERIOD) % PERIOD).astype(x.dtype)
    for start in range(0, x.size, CHUNK):
        stop = min(start + CHUNK, x.size)
        offset = start % PERIOD
        np.add(pattern[offset:offset + stop - start], rank, out=x[start:stop])


def verify(x: np.ndarray, p: int) -> bool:
    """True if *x* holds sum_r (i % PERIOD + r) at every index i (checked in chunks)."""
    pattern = (np.arange(CHUNK + PERIOD) % PERIOD).astype(np.float64) * p + p * (p - 1) / 2
    for start in range(0, x.size, CHUNK):
        stop = min(start + CHUNK, x.size)
        offset = start % PERIOD
        if not np.array_equal(x[start:stop], pattern[offset:offset + stop - start]):
            return False
    return True


def numpy_additions(xs: list[np.ndarray]) -> None:
    """The element-wise additions of a ring reduce-scatter, done directly with numpy, in place."""
    from mpisim.mpi.payload import split_offsets

    p = len(xs)
    offsets = split_offsets(xs[0].size, p)
    for k in range(p - 1):
        for r in range(p):
            i = (r - k - 1) % p
            lo, hi = offsets[i], offsets[i + 1]
            np.add(xs[(r - 1) % p][lo:hi], xs[r][lo:hi], out=xs[r][lo:hi])


def ring_allreduce_real(p: int = RANKS, count: int = COUNT) -> list[Figure]:
    """Run the in-place ring allreduce on real buffers; return time, memory and check figures."""
    import mpisim.collectives  # noqa: F401
    from benchmarks.common import quiet_world
    from mpisim.collectives.memory import check_memory, estimate_collective
    from mpisim.mpi.payload import in_place
    from mpisim.network.topology import FabricSpec, TopologySpec, build_topology

    cmd = command(MODULE, "ring-allreduce-8x300M")
    nbytes = count * 4
    estimate = estimate_collective("allreduce", "ring", p, nbytes, in_place=True)
    check_memory(estimate)  # refuses with the estimate if it cannot fit

    xs = [np.empty(count, np.float32) for _ in range(p)]
    for rank, x in enumerate(xs):
        fill(x, rank)
    inputs = sum(x.nbytes for x in xs)

    spec = TopologySpec("8 nodes", nodes=p, inter=FabricSpec("fat_tree", 25e9, 1.5e-6, 0.95))
    world = quiet_world(build_topology(spec), "fairshare")
    results: list = [None] * p

    def program(comm):
        results[comm.rank] = yield from comm.allreduce(in_place(xs[comm.rank]), algorithm="ring")

    world.launch(program)
    with stopwatch() as sim:
        world.run()
    in_buffers = all(np.shares_memory(res.array, x) for res, x in zip(results, xs, strict=True))
    correct = all(verify(x, p) for x in xs)
    with stopwatch() as reference:
        numpy_additions(xs)
    peak = peak_rss()
    return [
        info("estimated payload memory (checked before allocating)", estimate.total / GiB, "GiB", reproduce=cmd,
             note=estimate.description),
        info("ranks' input buffers", inputs / GiB, "GiB", reproduce=cmd, note=f"{p} x {count:,} float32"),
        target("peak memory / input buffers", peak / inputs, "x", MEMORY_TARGET, reproduce=cmd,
               note=f"peak RSS {peak / GiB:.2f} GiB"),
        info("numpy: the same element-wise additions", reference["wall"], "s", reproduce=cmd),
        info("mpisim: ring allreduce, real data", sim["wall"], "s", reproduce=cmd,
             note=f"simulated {world.env.now * 1e3:.1f} ms"),
        target("wall time / numpy additions", sim["wall"] / reference["wall"], "x", TIME_TARGET, reproduce=cmd),
        Figure("results equal the exact sums and lie in the input buffers", float(correct and in_buffers), "",
               "1", correct and in_buffers, cmd),
    ]


def refuse() -> list[Figure]:
    """Ask for a run that cannot fit (not in place, 32 ranks, numpy check) and show it refused early."""
    from mpisim.collectives.memory import (
        MemoryLimitError,
        available_memory,
        check_memory,
        estimate_collective,
    )

    cmd = command(MODULE, "refuse")
    before = current_rss()
    estimate = estimate_collective("allreduce", "ring", 32, COUNT * 4, verify=True)
    try:
        check_memory(estimate)
    except MemoryLimitError as err:
        grew = current_rss() - before
        return [
            info("oversized run: estimated payload memory", estimate.total / GiB, "GiB", reproduce=cmd,
                 note=f"available {(available_memory() or 0) / GiB:.1f} GiB"),
            Figure("oversized run refused up front, before allocating", float(grew) / 2**20, "MiB allocated",
                   "refused, < 64 MiB", grew < 64 * 2**20, cmd, str(err)),
        ]
    return [Figure("oversized run refused up front", 0.0, "", "refused", False, cmd,
                   f"not refused: estimate {estimate.total / GiB:.1f} GiB fits this machine")]


CASES = {"ring-allreduce-8x300M": ring_allreduce_real, "refuse": refuse}


def main(argv: list[str] | None = None) -> int:
    return module_main(MODULE, __doc__, CASES, argv)


if __name__ == "__main__":
    sys.exit(main())
