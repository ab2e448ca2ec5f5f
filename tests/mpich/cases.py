"""The cases compared with real MPICH: which algorithms, rank counts, counts, dtypes and roots.

Shared by the generator (``python -m tests.mpich.generate``, which runs each case under
``mpiexec`` with mpi4py and MPICH's algorithm forced by its ``MPIR_CVAR_<COLL>_INTRA_ALGORITHM``
control variable) and by the test that replays every case in mpisim. Results are compared as
SHA-256 digests of each rank's output bytes: bit for bit, without storing the arrays.
"""

from __future__ import annotations

import hashlib

import numpy as np

#: mpisim (collective, algorithm) -> MPICH's name for the same algorithm (its CVAR value).
#: Left out: gather/scatter ``linear`` and allreduce ``reduce_bcast`` (MPICH 5 has no such
#: choice), reduce_scatter ``reduce_then_scatter`` (MPICH's pre-2005 scheme), barrier (no data).
MPICH_NAMES: dict[tuple[str, str], str] = {
    ("allreduce", "ring"): "ring",
    ("allreduce", "recursive_doubling"): "recursive_doubling",
    ("allreduce", "rabenseifner"): "reduce_scatter_allgather",
    ("reduce", "binomial"): "binomial",
    ("reduce", "rabenseifner"): "reduce_scatter_gather",
    ("reduce_scatter", "recursive_halving"): "recursive_halving",
    ("reduce_scatter", "pairwise"): "pairwise",
    ("bcast", "binomial"): "binomial",
    ("bcast", "scatter_recursive_doubling_allgather"): "scatter_recursive_doubling_allgather",
    ("bcast", "scatter_ring_allgather"): "scatter_ring_allgather",
    ("allgather", "ring"): "ring",
    ("allgather", "recursive_doubling"): "recursive_doubling",
    ("allgather", "bruck"): "brucks",
    ("alltoall", "pairwise"): "pairwise",
    ("alltoall", "bruck"): "brucks",
    ("alltoall", "linear"): "scattered",  # every pair at once, in MPICH's scattered order
    ("gather", "binomial"): "binomial",
    ("scatter", "binomial"): "binomial",
}

RANKS = (3, 4, 5, 8)
DTYPES = ("float32", "float64")
ROOTED = frozenset({"bcast", "reduce", "gather", "scatter"})
#: Elements each rank contributes per peer in the data-movement collectives.
BLOCK = 5


def counts_for(collective: str, p: int) -> tuple[int, ...]:
    """Each rank's buffer count: fewer elements than ranks, a multiple of p, and a count p does not divide."""
    if collective in ("allreduce", "reduce", "reduce_scatter", "bcast"):
        return (2, 6 * p, 6 * p + 1 + p // 2)
    if collective in ("alltoall", "scatter"):
        return (p * BLOCK,)
    return (BLOCK,)  # allgather, gather: each rank's own contribution


def roots_for(collective: str, p: int) -> range:
    return range(p) if collective in ROOTED else range(1)


#: Magnitudes of the inputs: exact decimal literals, so no power is computed at run time.
SCALES = np.array([1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6])


def rank_input(collective: str, p: int, rank: int, count: int, dtype: str) -> np.ndarray:
    """Rank *rank*'s input: magnitudes from 1e-6 to 1e6 with +-1e16 spikes, so summation order shows.

    Built from the raw 64-bit words of a seeded PCG64 with integer arithmetic only: numpy keeps
    its bit generators' streams fixed across releases but not its distributions'
    (``standard_normal``, ``integers``), and golden.json must not drift with numpy.
    """
    words = np.random.PCG64(np.random.SeedSequence([p, rank, count, len(collective)])).random_raw(3 * count)
    mantissa, scale, spike = words[:count], words[count:2 * count], words[2 * count:]
    x = ((mantissa >> np.uint64(11)).astype(np.float64) * 2.0**-53 * 2.0 - 1.0) * SCALES[scale % np.uint64(13)]
    spikes = spike % np.uint64(4) == 0
    x[spikes] = np.where(spike[spikes] & np.uint64(4), 1e16, -1e16)
    if dtype == "float32":
        x[spikes] /= 1e8  # keep float32 spikes finite and still dominant
    return x.astype(dtype)


def split_counts(count: int, p: int) -> list[int]:
    """np.array_split's block sizes: how mpisim cuts reduce_scatter results and scatter inputs."""
    base, extra = divmod(count, p)
    return [base + 1 if i < extra else base for i in range(p)]


def case_key(collective: str, algorithm: str, p: int, dtype: str, count: int, root: int) -> str:
    return f"{collective}/{algorithm}/p{p}/{dtype}/n{count}/root{root}"


def digest(result: np.ndarray | None) -> str | None:
    """First 16 hex digits of the SHA-256 of the result's bytes (None where MPI returns nothing)."""
    if result is None:
        return None
    return hashlib.sha256(np.ascontiguousarray(result).tobytes()).hexdigest()[:16]
