"""What mpi4py's own test files found missing: each behaviour checked against what mpi4py 4.1.2 does under MPICH.

The expected values come from running the same lines under MPICH 5.0.2 with the real mpi4py
(MPICH's integer handles, mpi4py's exception types and messages).
"""

from __future__ import annotations

from tests.compat.test_mpi4py_api import ok


def test_user_ops_have_32_slots_per_rank_and_mpich_integer_handles(tmp_path):
    ok(tmp_path, """\
        from mpi4py import MPI
        def add(a, b, t):
            pass
        first = MPI.Op.Create(add)
        assert first.toint() == 0x98000000 - 2**32 and MPI.SUM.toint() == 0x58000003
        assert MPI.OP_NULL.toint() == 0x18000000 and MPI.Op.fromint(0x58000003) is MPI.SUM
        ops = [first] + [MPI.Op.Create(add) for _ in range(31)]
        assert len({op.toint() for op in ops}) == 32
        try:
            MPI.Op.Create(add)
        except RuntimeError as err:
            assert "too many user-defined reduction operations" in str(err)
        else:
            raise AssertionError("a 33rd live user op was created")
        ops.pop().Free()
        again = MPI.Op.Create(add)  # a freed slot is free again
        clone = MPI.Op.fromint(again.toint())
        assert clone == again and clone is not again and not clone.is_predefined
        for refused in (clone.__reduce__, lambda: clone(1, 2)):
            try:
                refused()
            except ValueError:
                pass
            else:
                raise AssertionError("a handle rebuilt from an int has no function")
        for op in ops + [again]:
            op.Free()
        assert not again and again == MPI.OP_NULL
        for permanent in (MPI.SUM, MPI.OP_NULL):
            try:
                permanent.Free()
            except MPI.Exception as err:
                assert err.Get_error_class() == MPI.ERR_OP
            else:
                raise AssertionError("a predefined op was freed")
        """, 2)


def test_reduce_local_hands_the_user_function_the_datatype_the_call_named(tmp_path):
    ok(tmp_path, """\
        from mpi4py import MPI
        seen = []
        def bor(a, b, dt):
            seen.append(dt)
            for i in range(len(a)):
                b[i] = a[i] | b[i]
        op = MPI.Op.Create(bor)
        out = bytearray([4] * 3)
        op.Reduce_local([bytearray([2] * 3), MPI.BYTE], [out, MPI.BYTE])
        assert out == bytearray([6] * 3) and seen == [MPI.BYTE]
        op.Free()
        """, 1)


def test_a_synchronous_send_to_itself_completes_its_receive_first(tmp_path):
    ok(tmp_path, """\
        from mpi4py import MPI
        comm = MPI.COMM_SELF.Dup()
        reqs = [comm.irecv(source=0, tag=i) for i in range(3)]
        for i in (2, 0):
            comm.ssend("abc", dest=0, tag=i)
        idxs, objs = MPI.Request.waitsome(reqs)  # MPICH: both receives the ssends matched are complete
        assert sorted(idxs) == [0, 2] and objs == ["abc", "abc"], (idxs, objs)
        comm.ssend("x", dest=0, tag=1)
        assert MPI.Request.waitsome(reqs) == ([1], ["x"])
        comm.Free()
        """, 1)


def test_lowercase_recv_with_a_buffer_warns_and_truncates_past_it(tmp_path):
    ok(tmp_path, """\
        import warnings
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                comm.recv(bytearray(0), MPI.PROC_NULL)
            except UserWarning as warning:
                assert "'buf' argument is deprecated" in str(warning)
            else:
                raise AssertionError("no UserWarning")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            req = comm.isend("42", comm.rank)
            assert comm.recv(bytearray(128), comm.rank) == "42"
            req.wait()
            req = comm.isend("x" * 500, comm.rank)
            try:
                comm.recv(64, comm.rank)
            except MPI.Exception as err:
                assert err.Get_error_class() == MPI.ERR_TRUNCATE
            else:
                raise AssertionError("a 500-character pickle fitted in 64 bytes")
            req.wait()
        """, 2)


def test_communicator_lock_tables_hold_the_lowercase_collectives_locks(tmp_path):
    ok(tmp_path, """\
        import threading
        from mpi4py import MPI
        comm = MPI.COMM_WORLD.Dup()
        table = MPI._comm_lock_table(comm)
        assert table == {}
        comm.bcast(None, root=0)
        comm.allgather(comm.rank)
        assert sorted(table) == ["allgather", "bcast"]
        assert isinstance(table["bcast"], type(threading.Lock()))
        assert MPI._comm_lock(comm, "bcast") is table["bcast"]
        assert MPI._comm_lock_table(MPI.COMM_WORLD) is not table
        comm.Free()
        """, 2)


def test_communicator_buffers_automatic_buffers_and_flushes(tmp_path):
    ok(tmp_path, """\
        import pickle
        from mpi4py import MPI
        comm = MPI.COMM_WORLD.Dup()
        r, p = comm.rank, comm.size
        small = MPI.Alloc_mem(100 + MPI.BSEND_OVERHEAD)
        comm.Attach_buffer(small)  # the communicator's own, used before the process's
        try:
            comm.bsend(b"x" * 1000, (r + 1) % p)
        except MPI.Exception as err:
            assert err.Get_error_class() == MPI.ERR_BUFFER
        else:
            raise AssertionError("1000 B fitted in a 100 B communicator buffer")
        comm.Flush_buffer()
        assert comm.Detach_buffer() is small
        comm.Attach_buffer(MPI.BUFFER_AUTOMATIC)
        comm.bsend(b"y" * 100000, (r + 1) % p)
        assert len(comm.recv(source=(r - 1) % p)) == 100000
        assert comm.Iflush_buffer().Wait()
        assert comm.Detach_buffer() == MPI.BUFFER_AUTOMATIC and int(MPI.BUFFER_AUTOMATIC) == -2
        assert pickle.loads(pickle.dumps(MPI.BUFFER_AUTOMATIC)) is MPI.BUFFER_AUTOMATIC
        MPI.Attach_buffer(None)  # None is automatic too
        MPI.Flush_buffer()
        MPI.Iflush_buffer().Wait()
        assert MPI.Detach_buffer() is MPI.BUFFER_AUTOMATIC
        comm.Free()
        """, 2)


def test_comm_null_is_named_and_a_non_communicator_is_refused(tmp_path):
    ok(tmp_path, """\
        from mpi4py import MPI
        assert MPI.COMM_NULL.Get_name() == "MPI_COMM_NULL"
        for bad in ((1, 2, 3), 7, "world"):
            try:
                MPI.Comm(bad)
            except TypeError:
                pass
            else:
                raise AssertionError(f"MPI.Comm({bad!r}) made a communicator")
        assert MPI.Intracomm(MPI.COMM_WORLD) == MPI.COMM_WORLD and MPI.Comm() == MPI.COMM_NULL
        """, 1)


def test_error_handler_handles_free_to_null_and_windows_refuse_other_objects(tmp_path):
    ok(tmp_path, """\
        from mpi4py import MPI
        win = MPI.Win.Create(bytearray(8), comm=MPI.COMM_WORLD)
        for obj in (win, MPI.COMM_WORLD):
            first = obj.Get_errhandler()
            obj.Set_errhandler(MPI.ERRORS_ARE_FATAL)
            got = obj.Get_errhandler()
            assert got == MPI.ERRORS_ARE_FATAL
            got.Free()  # frees the handle it returned, not the handler
            assert got == MPI.ERRHANDLER_NULL and MPI.ERRORS_ARE_FATAL != MPI.ERRHANDLER_NULL
            assert obj.Get_errhandler() == MPI.ERRORS_ARE_FATAL
            obj.Set_errhandler(first)
            first.Free()
            assert first == MPI.ERRHANDLER_NULL and obj.Get_errhandler() == MPI.ERRORS_RETURN
        MPI.ERRORS_RETURN.Free()  # a predefined constant stays itself
        assert MPI.ERRORS_RETURN != MPI.ERRHANDLER_NULL
        for bad in ((1, 2, 3), MPI.COMM_WORLD):
            try:
                MPI.Win(bad)
            except TypeError:
                pass
            else:
                raise AssertionError(f"MPI.Win({bad!r}) made a window")
        assert MPI.Win(win) == win and MPI.Win() == MPI.WIN_NULL
        win.Free()
        """, 2)


def test_persistent_request_handles_are_the_same_request(tmp_path):
    ok(tmp_path, """\
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        preq = comm.Send_init(b"", MPI.PROC_NULL, 0)
        copies = [MPI.Prequest(preq), MPI.Prequest.fromhandle(preq.handle), MPI.Prequest.fromint(preq.toint()),
                  MPI.Prequest.f2py(preq.py2f())]
        assert all(type(c) is MPI.Prequest and c == preq for c in copies)
        assert preq.toint() == 0xAC000000 - 2**32 and MPI.Request(preq) == preq
        assert type(MPI.Request(preq)) is MPI.Request
        copies[0].Start()  # starting a handle starts the request
        assert preq.Test() and not MPI.Prequest(MPI.REQUEST_NULL)
        other = comm.Send_init(b"", MPI.PROC_NULL, 1)
        assert other != preq and MPI.Prequest(other) != preq
        for wrong in (MPI.Grequest, ):
            try:
                wrong(preq)
            except TypeError:
                pass
            else:
                raise AssertionError("a persistent request became a generalized one")
        preq.Free()
        other.Free()
        """, 2)


def test_generalized_requests_complete_when_the_program_says(tmp_path):
    ok(tmp_path, """\
        from mpi4py import MPI
        freed = []
        def query(status, source):
            status.source, status.tag = source, 5
        greq = MPI.Grequest.Start(query, lambda source: freed.append(source), None, args=(3,))
        assert greq and not greq.Test()
        greq.Complete()
        status = MPI.Status()
        greq.Wait(status)
        assert (status.source, status.tag, freed, bool(greq)) == (3, 5, [3], False)
        assert not MPI.Grequest(MPI.REQUEST_NULL)
        """, 1)


def test_status_memory_and_hardware_info(tmp_path):
    ok(tmp_path, """\
        from mpi4py import MPI
        status = MPI.Status()
        status.source, status.tag, status.error = 11, 22, 33
        mem = status.tomemory()
        assert list(mem) == [0, 0, 11, 22, 33] and mem.itemsize == 4  # MPICH's five ints
        mem[2], mem[3], mem[4] = 111, 222, 333
        assert (status.source, status.tag, status.error) == (111, 222, 333)
        info = MPI.Get_hw_resource_info()
        assert isinstance(info, MPI.Info) and info.Get_nkeys() == 0  # MPICH 5.0.2 reports none
        """, 1)
