"""Halo exchange on a 2-D periodic Cartesian grid: each rank swaps edge rows and columns with its 4 neighbours.

The grid comes from Compute_dims and Create_cart; Shift gives the neighbours and Sendrecv
swaps the halos without deadlock. Each rank's block holds its rank number, so the halo values
say who the neighbours are.
"""

import numpy as np
from mpi4py import MPI

world = MPI.COMM_WORLD
dims = MPI.Compute_dims(world.Get_size(), 2)
cart = world.Create_cart(dims, periods=[True, True], reorder=False)
rank = cart.Get_rank()
n = 4
block = np.full((n + 2, n + 2), -1.0)
block[1:-1, 1:-1] = rank
for direction in (0, 1):
    source, dest = cart.Shift(direction, 1)
    if direction == 0:  # rows: contiguous slices
        recv = np.empty(n + 2)
        cart.Sendrecv(np.ascontiguousarray(block[-2, :]), dest=dest, sendtag=0, recvbuf=recv, source=source, recvtag=0)
        block[0, :] = recv
        cart.Sendrecv(np.ascontiguousarray(block[1, :]), dest=source, sendtag=1, recvbuf=recv, source=dest, recvtag=1)
        block[-1, :] = recv
    else:  # columns: copied into contiguous buffers, as a C code would pack them
        recv = np.empty(n + 2)
        cart.Sendrecv(np.ascontiguousarray(block[:, -2]), dest=dest, sendtag=2, recvbuf=recv, source=source, recvtag=2)
        block[:, 0] = recv
        cart.Sendrecv(np.ascontiguousarray(block[:, 1]), dest=source, sendtag=3, recvbuf=recv, source=dest, recvtag=3)
        block[:, -1] = recv
up, down = int(block[0, 2]), int(block[-1, 2])
left, right = int(block[2, 0]), int(block[2, -1])
print(f"rank {rank} at {cart.Get_coords(rank)} of {dims}: up {up}, down {down}, left {left}, right {right}")
cart.Free()
