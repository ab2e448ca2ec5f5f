"""Process topologies under ``mpisim exec``: distributed graphs (weights, the collective ``Create_dist_graph``),
the topology communicators' edges and casts, and the neighbourhood collectives' data and time.

What MPICH 5.0.2 + mpi4py 4.1.2 print for the same calls is in ``programs/dist_graph.n*.out``
(:mod:`tests.compat.test_mpich_programs`); the expectations here quote MPICH where they come from it.
"""

from __future__ import annotations

import pytest

from mpisim.compat.mpi4py.distgraph import UNWEIGHTED, WEIGHTS_EMPTY, adjacent, named_edges, weights_of
from mpisim.errors import InvalidRankError, MPIError
from mpisim.mpi.constants import ERR_TOPOLOGY, PROC_NULL
from tests.compat.test_mpi4py_api import ok

# ---- weights, as mpi4py reads them and MPICH checks them


def test_weights_none_and_unweighted_mean_no_weights():
    assert weights_of(None, 3) is None
    assert weights_of(UNWEIGHTED, 3) is None


def test_weights_empty_is_a_weighted_graph_without_edges():
    assert weights_of(WEIGHTS_EMPTY, 0) == []
    # mpi4py: ValueError("empty weights but nonzero degree")
    with pytest.raises(ValueError, match="empty weights but nonzero degree"):
        weights_of(WEIGHTS_EMPTY, 1)


def test_weights_need_one_per_edge():
    assert weights_of([3, 4], 2) == [3, 4]
    with pytest.raises(ValueError, match="expecting 2 items, got 1"):  # mpi4py's chkarray
        weights_of([3], 2)


def test_adjacent_graph_is_weighted_when_the_source_weights_are_given():
    # MPICH + mpi4py: Create_dist_graph_adjacent([], [0], WEIGHTS_EMPTY, [5]) -> (0, 1, True), ([], [0], ([], [5]))
    assert adjacent([], [0], WEIGHTS_EMPTY, [5], size=2, rank=0) == ([], [0], ([], [5]))
    # MPICH + mpi4py: Create_dist_graph_adjacent([0], [], [4], None) -> ([0], [], ([4], []))
    assert adjacent([0], [], [4], None, size=2, rank=0) == ([0], [], ([4], []))
    # MPICH decides from the source weights: ([], [0], None, [7]) is unweighted
    assert adjacent([], [0], None, [7], size=2, rank=0) == ([], [0], None)
    assert adjacent(None, None, None, None, size=2, rank=0) == ([], [], None)


def test_adjacent_refuses_unweighted_on_one_side_as_mpich_does():
    # MPICH: "Must specify MPI_UNWEIGHTED for both or neither weight arguments", an MPI_ERR_TOPOLOGY
    with pytest.raises(MPIError, match="UNWEIGHTED for both or neither") as err:
        adjacent([0], [0], None, [5], size=1, rank=0)
    assert err.value.Get_error_class() == ERR_TOPOLOGY
    with pytest.raises(MPIError, match="UNWEIGHTED for both or neither"):
        adjacent([0], [0], [5], UNWEIGHTED, size=1, rank=0)


def test_ranks_outside_the_communicator_are_refused():
    with pytest.raises(InvalidRankError):
        adjacent([2], [], None, None, size=2, rank=0)
    with pytest.raises(InvalidRankError):
        named_edges([0], [1], [5], None, size=2, rank=1)
    assert adjacent([PROC_NULL], [], None, None, size=2, rank=0) == ([PROC_NULL], [], None)


def test_named_edges_pair_each_destination_with_its_source_and_weight():
    edges, weighted = named_edges([1, 0], [2, 1], [0, 1, 1], [7, 8, 9], size=2, rank=0)
    assert edges == [(1, 0, 7), (1, 1, 8), (0, 1, 9)] and weighted
    # mpi4py: degrees need one entry per source, destinations one per edge
    with pytest.raises(ValueError, match="expecting 1 items, got 2"):
        named_edges([0], [1, 2], [0], None, size=1, rank=0)
    with pytest.raises(ValueError, match="expecting 2 items, got 1"):
        named_edges([0], [2], [0], None, size=1, rank=0)


# ---- the collective Create_dist_graph


def test_create_dist_graph_gives_each_rank_the_edges_anyone_named_in_sender_order(tmp_path):
    # A random multigraph (self-loops and repeated edges included), each edge named by a random rank:
    # every rank must end up with its in- and out-edges and their weights, grouped by the rank that
    # named them, in rank order, each group in the order it was named.
    out = ok(tmp_path, """\
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        r, p = comm.rank, comm.size
        rng = np.random.default_rng(5)
        edges = [(int(rng.integers(p)), int(rng.integers(p)), int(rng.integers(100)), int(rng.integers(p)))
                 for _ in range(40)]          # (source, destination, weight, the rank that names it)
        mine = [(s, d, w) for s, d, w, who in edges if who == r]
        sources = [s for s, _, _ in mine]
        g = comm.Create_dist_graph(sources, [1] * len(mine), [d for _, d, _ in mine], [w for _, _, w in mine])
        src, dst, (sw, dw) = g.Get_dist_neighbors()
        want_in = [(s, w) for who in range(p) for s, d, w, n in edges if n == who and d == r]
        want_out = [(d, w) for who in range(p) for s, d, w, n in edges if n == who and s == r]
        assert list(zip(src, sw)) == want_in, (list(zip(src, sw)), want_in)
        assert list(zip(dst, dw)) == want_out, (list(zip(dst, dw)), want_out)
        assert g.Get_dist_neighbors_count() == (len(want_in), len(want_out), True)
        total = comm.allreduce(len(src))
        if r == 0:
            print(total)
        """, 4)
    assert out == "40\n"


def test_create_dist_graph_sends_its_edges_through_the_network(tmp_path):
    # Building the graph costs messages (a reduce-scatter and one message per peer with edges), so time;
    # the adjacent form and Cartesian grids cost none.
    out = ok(tmp_path, """\
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        r, p = comm.rank, comm.size
        comm.Barrier()
        t0 = MPI.Wtime()
        comm.Create_dist_graph_adjacent([(r - 1) % p], [(r + 1) % p])
        comm.Create_cart([p])
        t1 = MPI.Wtime()
        comm.Create_dist_graph([r], [1], [(r + 1) % p])
        t2 = MPI.Wtime()
        if r == 0:
            print(t1 - t0 == 0.0, t2 - t1 > 0.0)
        """, 4)
    assert out == "True True\n"


def test_an_unweighted_rank_makes_its_graph_unweighted(tmp_path):
    # MPICH sets is_weighted from each rank's own weights argument.
    out = ok(tmp_path, """\
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        r = comm.rank
        g = comm.Create_dist_graph([r], [1], [1 - r], [9] if r == 0 else MPI.UNWEIGHTED)
        print(r, g.Get_dist_neighbors())
        """, 2)
    assert sorted(out.splitlines()) == ["0 ([1], [1], ([0], [9]))", "1 ([0], [0], None)"]


# ---- topology communicators


def test_graph_neighbors_is_a_list_property_and_edges_follow_it(tmp_path):
    # MPICH + mpi4py at 3 ranks, ring graph: rank 0 prints "[2, 1] 2 (2, 2) ([2, 1], [2, 1]) 2 2"
    out = ok(tmp_path, """\
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        p = comm.size
        g = comm.Create_graph([2 * (i + 1) for i in range(p)], [x for i in range(p) for x in ((i - 1) % p, (i + 1) % p)])
        print(comm.rank, g.neighbors, g.nneighbors, g.degrees, g.inoutedges, g.indegree, g.outdegree)
        """, 3)
    assert sorted(out.splitlines())[0] == "0 [2, 1] 2 (2, 2) ([2, 1], [2, 1]) 2 2"


def test_a_topology_survives_intracomm_and_dup_and_other_casts_are_type_errors(tmp_path):
    out = ok(tmp_path, """\
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        cart = comm.Create_cart([comm.size], [True])
        plain = MPI.Intracomm(cart)
        again = MPI.Cartcomm(plain)
        print(plain.Get_topology() == MPI.CART, again.dims, type(cart.Dup()).__name__, cart.Dup().dims)
        for cls in (MPI.Graphcomm, MPI.Distgraphcomm):
            try:
                cls(cart)
            except TypeError as err:
                print(err)
        try:
            MPI.Topocomm(comm)
        except TypeError as err:
            print(err)
        print(MPI.Distgraphcomm(MPI.COMM_NULL) == MPI.COMM_NULL)
        """, 1)
    assert out.splitlines() == ["True [1] Cartcomm [1]", "expecting a general graph communicator",
                                "expecting a distributed graph communicator", "expecting a topology communicator",
                                "True"]


def test_cart_sub_splits_by_the_dropped_coordinates(tmp_path):
    # A 2 x 3 grid (rank = 3 * row + column): keeping the columns' dimension gives the 2 rows of 3.
    out = ok(tmp_path, """\
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        cart = comm.Create_cart([2, 3], [False, True])
        row = cart.Sub([False, True])
        col = cart.Sub([True, False])
        none = cart.Sub([False, False])
        print(comm.rank, row.dims, row.periods, row.rank, row.coords, col.dims, col.rank, col.inoutedges,
              none.size, none.dims)
        """, 6)
    lines = sorted(out.splitlines())
    assert lines[4] == "4 [3] [1] 1 [1] [2] 1 ([0, -1], [0, -1]) 1 []"
    assert lines[0] == "0 [3] [1] 0 [0] [2] 0 ([-1, 1], [-1, 1]) 1 []"


# ---- neighbourhood collectives


def test_neighbor_alltoall_on_a_general_graph_takes_what_the_same_messages_take_by_hand(tmp_path):
    # MPICH runs a neighbourhood alltoall as one round of isends and irecvs: the same messages
    # sent by hand must take the same simulated time, and deliver the same blocks.
    out = ok(tmp_path, """\
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        r, p = comm.rank, comm.size
        g = comm.Create_dist_graph([r], [2], [(r + 1) % p, (r + 3) % p])
        src, dst, _ = g.Get_dist_neighbors()
        n = 1 << 16
        send = np.arange(len(dst) * n, dtype="d") + 1e6 * r
        got = np.zeros(len(src) * n)
        comm.Barrier(); t0 = MPI.Wtime()
        g.Neighbor_alltoall(send, got)
        t_ngh = MPI.Wtime() - t0
        by_hand = np.zeros(len(src) * n)
        comm.Barrier(); t0 = MPI.Wtime()
        reqs = [comm.Irecv(by_hand[k * n:(k + 1) * n], s, tag=7) for k, s in enumerate(src)]
        reqs += [comm.Isend(send[k * n:(k + 1) * n], d, tag=7) for k, d in enumerate(dst)]
        MPI.Request.Waitall(reqs)
        t_hand = MPI.Wtime() - t0
        assert np.array_equal(got, by_hand)
        for k, s in enumerate(src):  # block k from sources[k]: its block for me, in its destinations' order
            theirs = [(s + 1) % p, (s + 3) % p].index(r)
            assert got[k * n] == 1e6 * s + theirs * n
        if r == 0:
            print(t_ngh > 0, abs(t_ngh - t_hand) <= 1e-9 * t_hand)
        """, 4)
    assert out == "True True\n"


def test_neighbor_time_grows_with_the_bytes(tmp_path):
    out = ok(tmp_path, """\
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        g = comm.Create_dist_graph_adjacent([(comm.rank - 1) % comm.size], [(comm.rank + 1) % comm.size])
        times = []
        for n in (1, 1 << 10, 1 << 16, 1 << 20):
            comm.Barrier(); t0 = MPI.Wtime()
            g.Neighbor_allgather(np.ones(n), np.zeros(n))
            times.append(MPI.Wtime() - t0)
        if comm.rank == 0:
            print(all(a < b for a, b in zip(times, times[1:])))
        """, 3)
    assert out == "True\n"


def test_neighbor_alltoallw_leaves_the_bytes_off_a_grid_edge_alone(tmp_path):
    # A non-periodic line of 3: rank 0 has no left neighbour; its first block keeps its -1.
    out = ok(tmp_path, """\
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        cart = comm.Create_cart([comm.size], [False])
        send = np.array([10 * comm.rank, 10 * comm.rank + 1], dtype="i")
        recv = np.full(2, -1, dtype="i")
        cart.Neighbor_alltoallw([send, ([1, 1], [0, 4]), [MPI.INT, MPI.INT]],
                                [recv, ([1, 1], [0, 4]), [MPI.INT, MPI.INT]])
        print(comm.rank, recv.tolist())
        """, 3)
    # Block 0 goes back (to the left), block 1 forward: rank r gets r-1's forward block and r+1's backward one.
    assert sorted(out.splitlines()) == ["0 [-1, 10]", "1 [1, 20]", "2 [11, -1]"]


def test_a_count_in_a_neighbour_buffer_counts_each_block(tmp_path):
    # mpi4py: [buf, 3, type] gives 3 elements per neighbour (test_cco_ngh_buf's as_mpi_c(3)).
    out = ok(tmp_path, """\
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        r, p = comm.rank, comm.size
        g = comm.Create_dist_graph_adjacent([(r - 1) % p, (r + 1) % p], [(r + 1) % p, (r - 1) % p])
        got = np.full((2, 3), -1, dtype="i")
        g.Neighbor_allgatherv([np.full(3, r, dtype="i"), 3, MPI.INT], [got, 3, MPI.INT])
        a2a = np.full((2, 3), -1, dtype="i")
        g.Neighbor_alltoall([np.repeat(np.array([[r], [-r]], dtype="i"), 3, axis=1), MPI.INT], [a2a, 3, MPI.INT])
        print(r, got.tolist(), a2a.tolist())
        """, 3)
    assert sorted(out.splitlines())[0] == "0 [[2, 2, 2], [1, 1, 1]] [[2, 2, 2], [-1, -1, -1]]"
