"""RMA windows cost their bytes over the network model; matched probes take their message from everyone else.

(What the calls compute is checked against MPICH's output in :mod:`tests.compat.test_mpich_programs`,
programs ``rma.py`` and ``mprobe.py``.)
"""

from __future__ import annotations

import pytest

from tests.compat.test_mpi4py_api import ok, run

TIMED = """\
    import numpy as np
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    win = MPI.Win.Allocate(1 << 24, comm=comm)
    out = []
    for n in (1 << 20, 1 << 21, 1 << 22):
        data = np.ones(n, dtype=np.uint8)
        comm.Barrier()
        if comm.rank == 0:
            t0 = MPI.Wtime()
            win.Lock(1)
            win.OP(data, 1)
            win.Unlock(1)
            out.append(MPI.Wtime() - t0)
        comm.Barrier()
    if comm.rank == 0:
        print(*map(repr, out))
    win.Free()
    """


@pytest.mark.parametrize("op", ["Put", "Get", "Accumulate"])
def test_a_one_sided_operation_costs_its_bytes_linearly(tmp_path, op):
    t1, t2, t4 = map(float, ok(tmp_path, TIMED.replace("OP", op), 2).split())
    # The lock and ack round trips are the same for every size: what grows is the data's
    # time on the route, proportional to its bytes.
    assert t1 < t2 < t4
    assert t4 - t2 == pytest.approx(2 * (t2 - t1), rel=1e-6)


def test_put_and_get_of_the_same_bytes_take_the_same_time_on_a_symmetric_route(tmp_path):
    put = ok(tmp_path, TIMED.replace("OP", "Put"), 2).split()
    get = ok(tmp_path, TIMED.replace("OP", "Get"), 2).split()
    assert [float(x) for x in put] == pytest.approx([float(x) for x in get], rel=1e-9)


LOCKED = """\
    import numpy as np
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    win = MPI.Win.Allocate(1 << 22, comm=comm)
    comm.Barrier()
    t0 = MPI.Wtime()
    if comm.rank:
        win.Lock(0, MPI.KIND)
        win.Put(np.ones(1 << 22, dtype=np.uint8), 0)
        win.Unlock(0)
    took = comm.allreduce(MPI.Wtime() - t0, op=MPI.MAX)
    if comm.rank == 0:
        print(repr(took))
    win.Free()
    """


def test_exclusive_locks_take_turns_and_shared_locks_do_not_wait_for_each_other(tmp_path):
    exclusive = float(ok(tmp_path, LOCKED.replace("KIND", "LOCK_EXCLUSIVE")))
    shared = float(ok(tmp_path, LOCKED.replace("KIND", "LOCK_SHARED")))
    one = float(ok(tmp_path, LOCKED.replace("KIND", "LOCK_EXCLUSIVE"), 2))  # a single origin
    # Three origins, one after the other: three times a lone origin's epoch, less the lock
    # requests of the second and third, which reached the target while the first held it.
    assert 2.9 * one < exclusive < 3 * one
    assert shared < exclusive


def test_a_lock_never_released_is_a_deadlock_naming_the_lock(tmp_path):
    code, _, err = run(tmp_path, """\
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        win = MPI.Win.Allocate(8, comm=comm)
        if comm.rank == 0:
            win.Lock(1)
        comm.Barrier()
        if comm.rank == 1:
            win.Lock(1)
        """, 2)
    assert code != 0
    assert "deadlock" in err and "Win.Lock(1)" in err, err


def test_a_put_outside_the_target_window_is_refused(tmp_path):
    code, _, err = run(tmp_path, """\
        import numpy as np
        from mpi4py import MPI
        win = MPI.Win.Allocate(16, disp_unit=8, comm=MPI.COMM_WORLD)
        win.Fence()
        win.Put(np.ones(2), 1, target=1)
        win.Fence()
        """, 2)
    assert code != 0
    assert "bytes 8..24 are outside rank 1's window of 16 B" in err, err


def test_a_matched_message_is_received_by_its_handle_only(tmp_path):
    out = ok(tmp_path, """\
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        if comm.rank == 1:
            comm.send("first", dest=0, tag=1)
            comm.send("second", dest=0, tag=2)
        else:
            status = MPI.Status()
            msg = comm.mprobe(source=1, tag=1, status=status)
            later = comm.recv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
            print(later, status.Get_tag(), msg.recv(), bool(msg), comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG))
        """, 2)
    assert out.split() == ["second", "2", "first", "False", "False"]


def test_a_matched_receive_too_small_is_a_truncation_and_a_used_handle_is_refused(tmp_path):
    out = ok(tmp_path, """\
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        if comm.rank == 1:
            comm.Send(np.arange(8.0), dest=0)
        else:
            msg = comm.Mprobe(1)
            try:
                msg.Recv(np.empty(4))
            except MPI.Exception as err:
                print(err.Get_error_class() == MPI.ERR_TRUNCATE)
            try:
                msg.Recv(np.empty(8))
            except MPI.Exception as err:
                print("MESSAGE_NULL" in str(err))
        """, 2)
    assert out.split() == ["True", "True"]


def test_fromcode_info_and_alloc_mem_as_mpi4py_has_them(tmp_path):
    out = ok(tmp_path, """\
        from mpi4py import MPI
        mem = MPI.Alloc_mem(16)
        mem[:] = 7
        info = MPI.Info.Create()
        info.Set("no_locks", "true")
        win = MPI.Win.Create(mem, 1, info, MPI.COMM_WORLD)
        win.Fence()
        win.Fence()
        print(MPI.Datatype.fromcode("d") == MPI.DOUBLE, bytes(mem[:2]) == b"\\x07\\x07", info.Get("no_locks"),
              bool(MPI.INFO_NULL), len(info))
        win.Free()
        MPI.Free_mem(mem)
        """, 2)
    assert out.split() == ["True", "True", "true", "False", "1"] * 2
