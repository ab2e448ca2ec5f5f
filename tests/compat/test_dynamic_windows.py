"""Dynamic RMA windows: an address no region covers is refused (programs/dynamic_window.py checks the data against MPICH)."""

from __future__ import annotations

from tests.compat.test_mpi4py_api import run


def test_an_address_in_no_attached_region_is_an_error_naming_the_target(tmp_path):
    code, _, err = run(tmp_path, """\
        import numpy as np
        from mpi4py import MPI
        win = MPI.Win.Create_dynamic(comm=MPI.COMM_WORLD)
        win.Fence()
        if MPI.COMM_WORLD.rank == 0:
            win.Put(np.ones(2), 1, 64)
        win.Fence()
        """, 2)
    assert code == 1 and "no region rank 1 attached" in err
