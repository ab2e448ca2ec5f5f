"""MPI 4 communicator calls mpi4py's test_comm.py exercises: hardware split types, Idup, Create_from_group, pickling.

Each printed line is what MPICH 5 with mpi4py 4 prints for the same program on one node.
"""

from __future__ import annotations

from tests.compat.test_mpi4py_api import ok


def test_split_types_idup_parent_and_create_from_group_as_mpich(tmp_path):
    out = ok(tmp_path, """\
        import pickle
        from mpi4py import MPI
        w = MPI.COMM_WORLD
        info = MPI.Info.Create()
        info.Set("mpi_hw_resource_type", "mpi_shared_memory")
        node = w.Split_type(MPI.COMM_TYPE_HW_GUIDED, info=info)
        other = w.Split_type(MPI.COMM_TYPE_RESOURCE_GUIDED, info=MPI.Info.Create())
        unguided = w.Split_type(MPI.COMM_TYPE_HW_UNGUIDED, info=MPI.Info.Create())
        dup, req = w.Idup()
        req.Wait()
        parent = MPI.Comm.Get_parent()
        comm = MPI.Intracomm.Create_from_group(w.Get_group(), "org.example")
        copy = pickle.loads(pickle.dumps(MPI.Intracomm(w)))
        if w.rank == 0:
            print(node.size, other == MPI.COMM_NULL, unguided == MPI.COMM_NULL, dup.size, dup.Compare(w) == MPI.CONGRUENT)
            print(type(parent).__name__, parent == MPI.COMM_NULL, comm.size, copy == w, copy is not w)
            print(pickle.loads(pickle.dumps(MPI.COMM_WORLD)) is MPI.COMM_WORLD)
        """, 3)
    assert out == "3 True True 3 True\nIntercomm True 3 True True\nTrue\n"
