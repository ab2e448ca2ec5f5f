"""A 1-D heat-diffusion stencil with halo exchange: the everyday pattern of MPI programs.

The domain is a periodic line of cells, cut into one slab per rank. Each step, a rank needs
one cell from each neighbour (its *halo*), so it posts two non-blocking receives and two
non-blocking sends, waits for all four, and then updates its cells:
``new[i] = (old[i-1] + 2 old[i] + old[i+1]) / 4``. Posting the receives first and using
non-blocking calls is what makes this deadlock-free for any message size (compare
head_to_head.py, which blocks in ``send``).

The stencil conserves the total heat, so after the last step the ranks check it with an
allreduce. Rank 0's returned mapping becomes columns of the result row.

Arguments (``args:`` in the scenario, all optional): ``cells`` per rank (default 1024),
``steps`` (default 10), ``compute`` per step (default ``2 us``).
"""

import numpy as np

from mpisim.engine.units import parse_count, parse_time


def main(comm, args=None):
    """Run the stencil on every rank; return the heat totals (rank 0's mapping fills the row)."""
    args = args or {}
    cells = parse_count(args.get("cells", 1024))
    steps = parse_count(args.get("steps", 10))
    compute = parse_time(args.get("compute", "2 us"))
    left, right = (comm.rank - 1) % comm.size, (comm.rank + 1) % comm.size

    # Integer-valued start: one hot slab on rank 0, so the total is exact (a power-of-two scale).
    u = np.zeros(cells + 2)  # u[0] and u[-1] are the halo cells
    if comm.rank == 0:
        u[1:-1] = 1024.0
    start = float(u[1:-1].sum())

    for _ in range(steps):
        requests = [
            comm.irecv(source=left, tag=0),   # becomes u[0]
            comm.irecv(source=right, tag=1),  # becomes u[-1]
            comm.isend(u[1:2], dest=left, tag=1),
            comm.isend(u[-2:-1], dest=right, tag=0),
        ]
        from_left, from_right, _, _ = yield from comm.waitall(requests)
        u[0], u[-1] = from_left[0], from_right[0]
        u[1:-1] = (u[:-2] + 2 * u[1:-1] + u[2:]) / 4
        yield from comm.compute(compute, "stencil")

    totals = yield from comm.allreduce(np.array([start, float(u[1:-1].sum())]))
    return {"steps": steps, "heat_before": float(totals[0]), "heat_after": float(totals[1]),
            "conserved": bool(np.isclose(totals[0], totals[1], rtol=1e-12))}
