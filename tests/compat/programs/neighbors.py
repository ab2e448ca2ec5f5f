"""Neighbourhood collectives on a periodic and a non-periodic Cartesian grid, an MPI-1 graph and a distributed graph (a ring)."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

for periodic in (True, False):
    cart = comm.Create_cart([size], periods=[periodic])
    src, dst = cart.Shift(0, 1)
    got = np.full(2, -1, dtype="i")
    cart.Neighbor_allgather(np.array([10 * rank], dtype="i"), got)
    sent = np.array([100 + rank, 200 + rank], dtype="i")
    swapped = np.full(2, -1, dtype="i")
    cart.Neighbor_alltoall(sent, swapped)
    objs = cart.neighbor_allgather({"r": rank})
    print("cart periodic" if periodic else "cart open", (src, dst), got.tolist(), swapped.tolist(),
          [o and o["r"] for o in objs], cart.Get_topology() == MPI.CART)
    cart.Free()

index = [2 * (i + 1) for i in range(size)]
edges = [x for i in range(size) for x in ((i - 1) % size, (i + 1) % size)]
graph = comm.Create_graph(index, edges)
nb = graph.Get_neighbors(rank)
ga = np.zeros(len(nb), dtype="d")
graph.Neighbor_allgather(np.array([rank + 0.5]), ga)
print("graph", graph.Get_topology() == MPI.GRAPH, graph.Get_dims(), nb, ga.tolist(), graph.Get_neighbors_count(rank))

dist = comm.Create_dist_graph_adjacent([(rank - 1) % size, (rank - 2) % size], [(rank + 1) % size, (rank + 2) % size])
counts = dist.Get_dist_neighbors_count()
sources, dests, _ = dist.Get_dist_neighbors()
recv = np.zeros(3, dtype="i")
dist.Neighbor_alltoallv([np.array([rank, 7 * rank], dtype="i"), [1, 1], [0, 1], MPI.INT], [recv, [1, 1], [2, 0], MPI.INT])
got2 = dist.neighbor_alltoall([f"{rank}->{d}" for d in dests])
print("dist", dist.Get_topology() == MPI.DIST_GRAPH, counts[:2], sources, dests, recv.tolist(), got2)
ig = np.zeros(2, dtype="i")
dist.Ineighbor_allgather(np.array([rank], dtype="i"), ig).Wait()
print("dist allgather", ig.tolist())
