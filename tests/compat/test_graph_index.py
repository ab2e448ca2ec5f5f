"""``Create_graph``'s index array in both forms mpi4py accepts, as MPICH + mpi4py 4.1.2 print them."""

import pytest

from mpisim.compat.mpi4py.topology import graph_index_edges
from mpisim.errors import InvalidArgumentError


def test_leading_zero_offsets_are_the_standard_form():
    # MPICH + mpi4py: COMM_SELF.Create_graph([0, 2], [0, 0]).index == [2], Get_dims() == (1, 2)
    assert graph_index_edges([0, 2], [0, 0], size=1, rank=0) == ([2], [0, 0])
    assert graph_index_edges([0, 1], [0], size=1, rank=0) == ([1], [0])


def test_mpi_form_is_kept():
    assert graph_index_edges([1], [0], size=1, rank=0) == ([1], [0])
    assert graph_index_edges([2, 3], [0, 1, 0], size=2, rank=0) == ([2, 3], [0, 1, 0])


def test_too_many_nodes_still_refused():
    with pytest.raises(InvalidArgumentError):
        graph_index_edges([1, 2], [0, 1], size=1, rank=0)


def test_cartcomm_dim_is_ndim(tmp_path):
    from tests.compat.test_mpi4py_api import ok

    # MPICH + mpi4py 4.1.2 at 2 ranks print "2 2 2" on each rank.
    out = ok(tmp_path, """\
        from mpi4py import MPI
        c = MPI.COMM_WORLD.Create_cart([MPI.COMM_WORLD.Get_size(), 1])
        if MPI.COMM_WORLD.rank == 0:
            print(c.dim, c.ndim, c.Get_dim())
        """, 2)
    assert out == "2 2 2\n"


def test_cart_map_graph_map_and_graph_edges_match_mpich(tmp_path):
    from tests.compat.test_mpi4py_api import ok

    # The lines MPICH + mpi4py 4.1.2 print at 3 ranks (sorted), UNDEFINED being -32766.
    out = ok(tmp_path, """\
        from mpi4py import MPI
        w = MPI.COMM_WORLD
        print(w.rank, w.Cart_map([1]), w.Cart_map([2], [True]), w.Graph_map([1], [0]),
              w.Graph_map([0, 2], [0, 1]), MPI.UNDEFINED)
        g = w.Create_graph([1, 2], [1, 0])
        if g != MPI.COMM_NULL:
            print(w.rank, g.inoutedges, g.inedges, g.outedges)
        """, 3)
    assert sorted(out.splitlines()) == [
        "0 ([1], [1]) [1] [1]", "0 0 0 0 0 -32766", "1 ([0], [0]) [0] [0]",
        "1 -32766 1 -32766 -32766 -32766", "2 -32766 -32766 -32766 -32766 -32766"]


def test_comm_handles_round_trip_to_the_same_communicator_and_type(tmp_path):
    from tests.compat.test_mpi4py_api import ok

    # MPICH + mpi4py 4.1.2 at 2 ranks print "True Cartcomm True Cartcomm True" on each rank.
    out = ok(tmp_path, """\
        from mpi4py import MPI
        c = MPI.COMM_WORLD.Create_cart([MPI.COMM_WORLD.size])
        n = MPI.Comm.fromint(c.toint()); f = MPI.Comm.f2py(c.py2f())
        if MPI.COMM_WORLD.rank == 0:
            print(n == c, type(n).__name__, f == c, type(f).__name__, c.toint() == c.py2f())
        """, 2)
    assert out == "True Cartcomm True Cartcomm True\n"
