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
