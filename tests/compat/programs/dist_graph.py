"""Distributed graphs built collectively (Create_dist_graph), weights, topology casts, Cartcomm.Sub, and the
neighbourhood collectives on them, w-form included; printed so that MPICH's run-to-run edge order does not show."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

# Every rank names edges between other ranks: (r+1) -> every k (weight 10r+k), and r -> r+2 (weight 10r+size).
sources, degrees = [(rank + 1) % size, rank], [size, 1]
destinations = [*range(size), (rank + 2) % size]
weights = [10 * rank + k for k in range(size + 1)]
g = comm.Create_dist_graph(sources, degrees, destinations, weights)
src, dst, (sw, dw) = g.Get_dist_neighbors()
print("general", g.Get_dist_neighbors_count(), g.degrees, sorted(zip(src, sw, strict=True)), sorted(zip(dst, dw, strict=True)))

# Each block carries (sender, destination, sender's count of earlier edges to that destination): block k must
# come from sources[k], and two edges between the same pair match in order.
seen = {}
send = np.zeros((len(dst), 3), dtype="i")
for k, d in enumerate(dst):
    send[k] = (rank, d, seen.get(d, 0))
    seen[d] = seen.get(d, 0) + 1
recv = np.full((len(src), 3), -1, dtype="i")
g.Neighbor_alltoall(send, recv)
nth = {}
ordered = True
for k, s in enumerate(src):
    ordered &= recv[k].tolist() == [s, rank, nth.get(s, 0)]
    nth[s] = nth.get(s, 0) + 1
gathered = np.full(len(src), -1, dtype="i")
g.Ineighbor_allgather(np.array([100 + rank], dtype="i"), gathered).Wait()
print("general exchange", ordered, gathered.tolist() == [100 + s for s in src])
g.Free()

u = comm.Create_dist_graph([rank], [1], [(rank + 1) % size])
print("unweighted", u.Get_dist_neighbors(), u.inoutedges, u.indegree, u.outdegree)
e = comm.Create_dist_graph([], [], [], MPI.WEIGHTS_EMPTY)
print("empty", e.Get_dist_neighbors_count(), e.Get_dist_neighbors())

a = comm.Create_dist_graph_adjacent([(rank - 1) % size], [(rank + 1) % size], [7], [8])
print("adjacent", a.Get_dist_neighbors_count(), a.Get_dist_neighbors(), a.inedges, a.outedges)
b = comm.Create_dist_graph_adjacent(None, [(rank + 1) % size], MPI.WEIGHTS_EMPTY, [5])
print("one-sided", b.Get_dist_neighbors_count(), b.Get_dist_neighbors())
try:
    comm.Create_dist_graph_adjacent([0], [0], MPI.WEIGHTS_EMPTY, MPI.WEIGHTS_EMPTY)
except ValueError as err:
    print("ValueError", err)
try:
    comm.Create_dist_graph([0], [1, 2], [0])
except ValueError as err:
    print("ValueError", err)

# Neighbor_alltoallw on the adjacent ring: a float64 and an int32 block per neighbour, byte displacements.
sbuf = np.array([rank + 0.5], dtype="d")
rbuf = np.zeros(1, dtype="d")
a.Neighbor_alltoallw([sbuf, ([1], [0]), [MPI.DOUBLE]], [rbuf, ([1], [0]), [MPI.DOUBLE]])
ibuf = np.zeros(2, dtype="i")
a.Ineighbor_alltoallw([np.array([rank, -rank], dtype="i"), ([2], [0]), [MPI.INT]],
                      [ibuf, ([2], [0]), [MPI.INT]]).Wait()
print("alltoallw", rbuf.tolist(), ibuf.tolist())

# Casts: the topology is the communicator's; another kind is mpi4py's TypeError.
cart = comm.Create_cart([size, 1], [True, False])
graph = comm.Create_graph([2 * (i + 1) for i in range(size)], [x for i in range(size) for x in ((i - 1) % size, (i + 1) % size)])
for cls in (MPI.Topocomm, MPI.Cartcomm, MPI.Graphcomm, MPI.Distgraphcomm):
    for name, other in (("world", comm), ("cart", cart), ("graph", graph), ("dist", a), ("intra(cart)", MPI.Intracomm(cart))):
        try:
            made = cls(other)
            shown = f"{type(made).__name__} {made.Get_topology()}"
        except TypeError as err:
            shown = f"TypeError {err}"
        if rank == 0:
            print("cast", cls.__name__, name, shown)
print("graph", graph.neighbors, graph.nneighbors, graph.degrees, graph.inoutedges, type(graph.Dup()).__name__)
print("null", type(comm.Create_cart([])).__name__, MPI.Cartcomm() == MPI.COMM_NULL)

for remain in ([True, False], [False, True], [False, False]):
    sub = cart.Sub(remain)
    print("sub", remain, type(sub).__name__, sub.size, sub.rank, sub.dims, sub.periods, sub.coords, sub.inoutedges)
d = cart.Dup()
print("dup", type(d).__name__, d.Get_topology() == MPI.CART, d.dims, type(cart.Split(0, rank)).__name__)
