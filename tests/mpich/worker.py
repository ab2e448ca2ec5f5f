"""One (collective, algorithm) case set under real MPI: ``mpiexec -n P python -m tests.mpich.worker COLL ALGO``.

MPICH's algorithm is forced by the environment (see :mod:`tests.mpich.generate`). Rank 0
prints one JSON object: case key -> list of per-rank digests, or ``"refused"`` where MPICH
would not run the forced algorithm on that case and fell back to another: with
``MPIR_CVAR_COLLECTIVE_FALLBACK=print`` it says so on stderr, which each call captures.
(``=error`` cannot be used: MPI_Init's own allgather would fail on non-powers of two.)
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import numpy as np
from mpi4py import MPI

from tests.mpich.cases import DTYPES, case_key, counts_for, digest, rank_input, roots_for, split_counts


def run(comm: MPI.Comm, collective: str, x: np.ndarray, root: int) -> np.ndarray | None:
    p, r = comm.size, comm.rank
    if collective == "allreduce":
        out = np.empty_like(x)
        comm.Allreduce(x, out, MPI.SUM)
        return out
    if collective == "reduce":
        out = np.empty_like(x) if r == root else None
        comm.Reduce(x, out, MPI.SUM, root=root)
        return out
    if collective == "reduce_scatter":
        counts = split_counts(len(x), p)
        out = np.empty(counts[r], x.dtype)
        comm.Reduce_scatter(x, out, counts, MPI.SUM)
        return out
    if collective == "bcast":
        comm.Bcast(x, root=root)
        return x
    if collective == "allgather":
        out = np.empty(len(x) * p, x.dtype)
        comm.Allgather(x, out)
        return out
    if collective == "alltoall":
        out = np.empty_like(x)
        comm.Alltoall(x, out)
        return out
    if collective == "gather":
        out = np.empty(len(x) * p, x.dtype) if r == root else None
        comm.Gather(x, out, root=root)
        return out
    if collective == "scatter":
        out = np.empty(len(x) // p, x.dtype)
        comm.Scatter(x if r == root else None, out, root=root)
        return out
    raise ValueError(collective)


def main(collective: str, algorithm: str) -> None:
    comm = MPI.COMM_WORLD
    p = comm.size
    results: dict[str, object] = {}
    for dtype in DTYPES:
        for count in counts_for(collective, p):
            for root in roots_for(collective, p):
                x = rank_input(collective, p, comm.rank, count, dtype)
                with tempfile.TemporaryFile() as captured:
                    saved = os.dup(2)
                    os.dup2(captured.fileno(), 2)
                    try:
                        mine = digest(run(comm, collective, x, root))
                    finally:
                        os.dup2(saved, 2)
                        os.close(saved)
                    captured.seek(0)
                    if b"not usable" in captured.read():
                        mine = "refused"
                everyone = comm.gather(mine, root=0)
                if comm.rank == 0:
                    key = case_key(collective, algorithm, p, dtype, count, root)
                    results[key] = "refused" if "refused" in everyone else everyone
    if comm.rank == 0:
        print(json.dumps(results, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
