"""Handles as mpi4py's own test suite uses them: null objects, pickling, statuses of completed requests, zero-size messages."""

from __future__ import annotations

from tests.compat.test_mpi4py_api import ok


def test_null_handles_pickles_and_error_handlers(tmp_path):
    ok(tmp_path, """\
        import pickle
        from mpi4py import MPI
        assert not MPI.Op() and MPI.Op() == MPI.OP_NULL and MPI.SUM.is_predefined
        assert pickle.loads(pickle.dumps(MPI.MAX)) is MPI.MAX
        copy = pickle.loads(pickle.dumps(MPI.Op(MPI.SUM)))
        assert copy is not MPI.SUM and copy == MPI.SUM
        def keep(a, b, t):
            return b
        mine = MPI.Op.Create(keep, commute=True)
        assert not mine.is_predefined and pickle.loads(pickle.dumps(mine)).Is_commutative()
        try:
            MPI.OP_NULL(1, 2)
        except ValueError:
            pass
        else:
            raise AssertionError("OP_NULL called")
        assert not MPI.Group() and MPI.Group() == MPI.GROUP_NULL and MPI.GROUP_EMPTY.Get_size() == 0
        assert pickle.loads(pickle.dumps(MPI.GROUP_NULL)) is MPI.GROUP_NULL
        world = MPI.COMM_WORLD.Get_group()
        assert world.Translate_ranks([MPI.PROC_NULL, 1, 1], world) == [MPI.PROC_NULL, 1, 1]
        comm = MPI.COMM_WORLD.Dup()
        assert comm.Get_errhandler() == MPI.ERRORS_RETURN
        comm.Set_errhandler(MPI.ERRORS_ARE_FATAL)
        assert comm.Get_errhandler() == MPI.ERRORS_ARE_FATAL and MPI.COMM_WORLD.Get_errhandler() == MPI.ERRORS_RETURN
        """, 2)


def test_statuses_of_null_and_completed_requests(tmp_path):
    ok(tmp_path, """\
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        r, p = comm.rank, comm.size
        s = MPI.Status()
        s.source = 5
        assert MPI.REQUEST_NULL.Get_status(s) and s.source == MPI.ANY_SOURCE and s.Get_count() == 0
        statuses = []
        got = np.zeros(1)
        reqs = [comm.Isend(np.array([float(r)]), (r + 1) % p, tag=3), comm.Irecv(got, (r - 1) % p, tag=3)]
        MPI.Request.Waitall(reqs, statuses)
        assert len(statuses) == 2 and statuses[1].Get_source() == (r - 1) % p and statuses[1].Get_tag() == 3
        assert MPI.Request.Testsome([MPI.REQUEST_NULL]) is None and MPI.Request.Get_status_all(reqs)
        reqs = [comm.irecv(source=(r - 1) % p, tag=4), comm.isend(r, (r + 1) % p, tag=4)]
        done, values = MPI.Request.waitsome(reqs)
        while len(done) < 2:
            more, vals = MPI.Request.testsome(reqs)
            done, values = done + (more or []), values + (vals or [])
        assert (r - 1) % p in values, values
        """, 3)


def test_zero_size_messages_with_none_as_the_buffer(tmp_path):
    ok(tmp_path, """\
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        null_b, null_v = [None, MPI.INT], [None, (0, None), MPI.INT]
        comm.Sendrecv(null_b, comm.rank, 0, null_b, comm.rank, 0)
        comm.Bcast(null_b)
        comm.Allreduce(null_b, null_b)
        comm.Gatherv(null_b, null_v)
        comm.Alltoallv(null_v, null_v)
        """, 3)


def test_a_cancelled_receive_matches_nothing_and_says_so(tmp_path):
    ok(tmp_path, """\
        from mpi4py import MPI
        comm = MPI.COMM_SELF
        req = comm.irecv(source=0, tag=1)
        req.Cancel()
        s = MPI.Status()
        assert req.Get_status(s) and s.Is_cancelled()
        req.Wait()
        comm.send("for the next receive", dest=0, tag=1)
        assert comm.recv(source=0, tag=1) == "for the next receive"
        req = comm.issend("synchronous", dest=0, tag=2)
        req.Cancel()  # a send goes on: its receive still gets it
        assert not req.Get_status()
        assert comm.recv(source=0, tag=2) == "synchronous"
        while not req.Get_status():  # each look lets simulated time pass, as Test does
            pass
        req.Wait()
        """, 1)
