"""The MPI module's calls, each checked inside a small program against numpy or the closed form.

Each program asserts what mpi4py would give; a failed assertion fails the run with the
rank's traceback, which the test shows.
"""

from __future__ import annotations

import contextlib
import io
import textwrap

import pytest

from mpisim.cli import main


def run(tmp_path, source: str, ranks: int = 4, *extra: str) -> tuple[int, str, str]:
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent(source))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["exec", "-n", str(ranks), *extra, str(path)])
    return code, out.getvalue(), err.getvalue()


def ok(tmp_path, source: str, ranks: int = 4, *extra: str) -> str:
    code, out, err = run(tmp_path, source, ranks, *extra)
    assert code == 0, err
    return out


def test_maxloc_and_minloc_on_pair_buffers(tmp_path):
    ok(tmp_path, """\
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        r = comm.rank
        pair = np.zeros(2, dtype=MPI.DOUBLE_INT.dtype)
        pair["value"] = [(r * 3) % 4, -r]
        pair["index"] = r
        out = np.zeros_like(pair)
        comm.Allreduce([pair, MPI.DOUBLE_INT], [out, MPI.DOUBLE_INT], op=MPI.MAXLOC)
        values = [(k * 3) % 4 for k in range(comm.size)]
        assert out["value"][0] == max(values) and out["index"][0] == values.index(max(values)), out
        assert out["value"][1] == 0 and out["index"][1] == 0, out      # ties: the lowest rank
        comm.Allreduce([pair, MPI.DOUBLE_INT], [out, MPI.DOUBLE_INT], op=MPI.MINLOC)
        assert out["value"][1] == -(comm.size - 1) and out["index"][1] == comm.size - 1
        """)


def test_a_truncated_receive_raises_mpi_exception_the_program_can_catch(tmp_path):
    out = ok(tmp_path, """\
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        if comm.rank == 0:
            comm.Send(np.zeros(8), dest=1)
        elif comm.rank == 1:
            try:
                comm.Recv(np.zeros(4), source=0)
            except MPI.Exception as err:
                print("caught", type(err).__name__)
        """, 2)
    assert out == "caught TruncationError\n"


def test_buffers_of_every_kind_and_specs(tmp_path):
    ok(tmp_path, """\
        import array, mmap
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        if comm.rank == 0:
            comm.Send([np.arange(10, dtype="i"), 3, MPI.INT], dest=1, tag=1)        # the first 3
            comm.Send(array.array("d", [1.5, 2.5]), dest=1, tag=2)
            m = mmap.mmap(-1, 16)
            m.write(b"0123456789abcdef")
            comm.Send([m, MPI.BYTE], dest=1, tag=3)
            comm.Send([np.arange(4, dtype="d"), MPI.BYTE], dest=1, tag=4)           # 32 bytes
        elif comm.rank == 1:
            a = np.full(5, -1, dtype="i")
            st = MPI.Status()
            comm.Recv([a, MPI.INT], source=0, tag=1, status=st)
            assert a.tolist() == [0, 1, 2, -1, -1] and st.Get_count(MPI.INT) == 3 and st.Get_count() == 12
            b = array.array("d", [0.0, 0.0])
            comm.Recv(b, source=0, tag=2)
            assert b.tolist() == [1.5, 2.5]
            c = bytearray(16)
            comm.Recv(c, source=0, tag=3)
            assert bytes(c) == b"0123456789abcdef"
            d = np.zeros((2, 2))                                                    # 2-D, contiguous
            comm.Probe(source=0, tag=4, status=st)
            assert st.Get_count(MPI.DOUBLE) == 4
            comm.Recv(d, source=0, tag=4)
            assert d.tolist() == [[0, 1], [2, 3]]
        """, 2)


def test_noncommutative_user_op_sees_the_ranks_in_order(tmp_path):
    ok(tmp_path, """\
        from mpi4py import MPI
        def concat(a, b, datatype):
            return a + b
        CAT = MPI.Op.Create(concat, commute=False)
        comm = MPI.COMM_WORLD
        got = comm.reduce(str(comm.rank), op=CAT, root=2)
        assert got == ("".join(map(str, range(comm.size))) if comm.rank == 2 else None), got
        assert comm.allreduce([comm.rank], op=MPI.SUM) == list(range(comm.size))
        """, 5)


def test_communicators_requests_and_environment(tmp_path):
    out = ok(tmp_path, """\
        import numpy as np
        from mpi4py import MPI

        class Mine(MPI.Intracomm):
            def twice(self):
                return 2 * self.Get_rank()

        comm = Mine(MPI.COMM_WORLD)
        assert comm.twice() == 2 * MPI.COMM_WORLD.rank and comm.size == 4
        assert MPI.COMM_SELF.Get_size() == 1 and MPI.COMM_SELF.Get_rank() == 0
        assert MPI.COMM_SELF.allreduce(5) == 5
        node = comm.Split_type(MPI.COMM_TYPE_SHARED)
        assert node.Get_size() == 2, node.Get_size()                 # 2 ranks per simulated node
        names = comm.allgather(MPI.Get_processor_name())
        assert names[0] == names[1] != names[2] == names[3], names
        nobody = comm.Split(MPI.UNDEFINED if comm.rank == 3 else 0)
        assert (nobody == MPI.COMM_NULL) == (comm.rank == 3)
        assert comm.Get_attr(MPI.TAG_UB) >= 32767
        reqs = [comm.Irecv(np.zeros(1), source=(comm.rank - 1) % 4), MPI.REQUEST_NULL,
                comm.Isend(np.ones(1) * comm.rank, dest=(comm.rank + 1) % 4)]
        done = set()
        while len(done) < 2:
            i = MPI.Request.Waitany(reqs)
            done.add(i)
        assert done == {0, 2} and reqs[0] == MPI.REQUEST_NULL
        assert MPI.Request.Waitany(reqs) == MPI.UNDEFINED
        t = MPI.Wtime()
        comm.Barrier()
        assert MPI.Wtime() > t and MPI.Wtick() > 0 and MPI.Is_initialized()
        dims = MPI.Compute_dims(12, 2)
        assert dims == [4, 3], dims
        if comm.rank == 0:
            print("ok")
        """, 4, "--topology", "{preset: ib-hdr, ranks_per_node: 2}")
    assert out == "ok\n"


def test_messages_never_received_name_the_line_that_sent_them(tmp_path):
    code, _, err = run(tmp_path, """\
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        if comm.rank == 0:
            comm.send("lost", dest=1, tag=5)
        """, 2)
    assert code == 0
    assert "rank 1 never received the message from rank 0 to rank 1 (tag 5" in err
    assert "sent at prog.py:4" in err


@pytest.mark.parametrize("call", ["comm.Spawn('x')", "MPI.File.Open(comm, 'x')", "comm.Connect('port')"])
def test_unsupported_calls_name_the_call_and_the_rank(tmp_path, call):
    code, _, err = run(tmp_path, f"""\
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        a, b = np.zeros(1), np.zeros(1)
        if comm.rank == 1:
            {call}
        comm.Barrier()
        """, 2)
    assert code == 1
    name = call.split("(")[0].replace("comm.", "Comm.").replace("MPI.", "")
    assert f"rank 1: MPI.{name.split('.')[0] if name.startswith('File') else name}" in err
    assert "is not supported by mpisim exec" in err
