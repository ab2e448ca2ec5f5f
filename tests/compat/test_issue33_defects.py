"""The defects issue 33 lists, each reproduced as the issue shows it (each failed before its fix)."""

from __future__ import annotations

import contextlib
import io
import json
import textwrap

from mpisim.cli import main
from tests.compat.test_mpi4py_api import ok, run


def test_gather_in_place_with_a_counted_receive_spec_counts_each_ranks_block(tmp_path):
    # mpi4py's demo/osu_gather.py: the root's [buf, n, MPI.BYTE] is n bytes from each rank
    out = ok(tmp_path, """\
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        r, p, n = comm.rank, comm.size, 4
        buf = np.zeros(n * p, dtype="b")
        if r == 0:
            comm.Gather(MPI.IN_PLACE, [buf, n, MPI.BYTE], root=0)
            print(buf.tolist())
        else:
            comm.Gather([np.full(n, r, dtype="b"), n, MPI.BYTE], None, root=0)
        """, 3)
    assert out == "[0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]\n"


def test_range_incl_takes_float_bounds_as_mpi4py_does(tmp_path):
    out = ok(tmp_path, """\
        from mpi4py import MPI
        group = MPI.COMM_WORLD.Get_group()
        size = group.Get_size()
        every = group.Range_incl([(0, (size - 1) / 1, 1)])
        odd = group.Range_excl([(0.0, size - 1, 2)])
        if MPI.COMM_WORLD.rank == 0:
            print(every.Get_size(), odd.Translate_ranks(None, group))
        """, 4)
    assert out == "4 [1, 3]\n"


def test_every_rank_has_its_own_process_id(tmp_path):
    out = ok(tmp_path, """\
        import os
        from mpi4py import MPI
        pids = MPI.COMM_WORLD.allgather(os.getpid())
        if MPI.COMM_WORLD.rank == 0:
            print(len(set(pids)))
        """, 4)
    assert out == "4\n"


def test_typedict_has_mpi4pys_57_keys_with_mpichs_names(tmp_path):
    out = ok(tmp_path, """\
        import numpy as np
        from mpi4py import MPI
        if MPI.COMM_WORLD.rank == 0:
            t = MPI._typedict
            print(len(t), t["f8"].Get_name(), t["e"].Get_name(), t["i4"].Get_name(), t["c16"].Get_name(),
                  t[np.dtype("float16").char] is MPI.FLOAT16_T, MPI.LONG_LONG.Get_name(), MPI.SIGNED_INT == MPI.INT)
        """, 1)
    assert out == "57 MPI_DOUBLE MPIX_C_FLOAT16 MPI_INT32_T MPI_C_DOUBLE_COMPLEX True MPI_LONG_LONG_INT True\n"


def test_a_script_without_py_runs_as_mpiexec_runs_it(tmp_path):
    path = tmp_path / "hello_noext"
    path.write_text("from mpi4py import MPI\nprint(MPI.COMM_WORLD.rank)\n")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["exec", "-n", "2", str(path)])
    assert code == 0, err.getvalue()
    assert sorted(out.getvalue().split()) == ["0", "1"]


def test_measured_compute_charges_each_rank_its_own_time_only(tmp_path):
    # 4 ranks x 50 ms of work, then a barrier: about 55 ms, not the 4 x 50 ms of all ranks' work
    out = ok(tmp_path, """\
        import time
        from mpi4py import MPI
        t = time.perf_counter()
        while time.perf_counter() - t < 0.05:
            pass
        MPI.COMM_WORLD.Barrier()
        if MPI.COMM_WORLD.rank == 0:
            print(MPI.Wtime())
        """, 4, "--compute", "measured")
    assert 0.05 <= float(out) < 0.12


def _mpi_times(tmp_path, source: str, ranks: int) -> list[float]:
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent(source))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(["exec", "-n", str(ranks), "--json", str(path)]) == 0, err.getvalue()
    return json.loads(out.getvalue())["results"][0]["mpi_time_s"]


def test_declared_compute_is_not_time_in_mpi_calls(tmp_path):
    times = _mpi_times(tmp_path, """\
        import mpisim
        from mpi4py import MPI
        if MPI.COMM_WORLD.rank == 0:
            mpisim.compute(0.01)
        MPI.COMM_WORLD.Barrier()
        """, 2)
    assert times[0] < 1e-5  # rank 0 computed, then found rank 1 already waiting
    assert times[1] >= 0.01  # rank 1 waited in the barrier for rank 0's 10 ms


def test_get_vendor_and_the_status_and_comm_setters(tmp_path):
    out = ok(tmp_path, """\
        from mpi4py import MPI
        s = MPI.Status()
        s.source, s.tag, s.error = 3, 7, MPI.ERR_OTHER
        s.Set_elements(MPI.INT, 5)
        s.Set_cancelled(True)
        copy = MPI.Status(s)
        comm = MPI.COMM_WORLD.Dup()
        comm.name = "mine"
        if comm.rank == 0:
            print(MPI.get_vendor()[0], s.Get_source(), s.Get_tag(), s.Get_error() == MPI.ERR_OTHER,
                  s.Get_count(MPI.INT), s.Get_count(), s.Is_cancelled(), copy == s, comm.Get_name())
        """, 2)
    assert out == "MPICH 3 7 True 5 20 True True mine\n"


def test_the_default_topology_switches_protocol_where_mpich_does(tmp_path):
    # MPICH 5.0.2's shared-memory cells: a head-to-head Send pair completes at 8112 B, not at 8113 B
    program = """\
        import sys
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        n, other = int(sys.argv[1]), 1 - comm.rank
        comm.Send(np.zeros(n, dtype="B"), dest=other)
        comm.Recv(np.zeros(n, dtype="B"), source=other)
        """
    path = tmp_path / "h2h.py"
    path.write_text(textwrap.dedent(program))
    for n, completes in ((8000, True), (8112, True), (8113, False)):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["exec", "-n", "2", str(path), str(n)])
        assert (code == 0) == completes, (n, err.getvalue())
    assert "with an eager limit of at least 8113 B (mpi.eager_limit_intra is 8112 B here)" in err.getvalue()


def test_a_deadlock_that_no_eager_limit_explains_gets_no_eager_hint(tmp_path):
    code, _, err = run(tmp_path, """\
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        comm.recv(source=1 - comm.rank)
        """, 2)
    assert code != 0 and "deadlock" in err
    assert "eager limit" not in err


def test_a_buffered_send_larger_than_the_attached_buffer_is_mpichs_error(tmp_path):
    code, _, err = run(tmp_path, """\
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        MPI.Attach_buffer(bytearray(1000))
        if comm.rank == 0:
            comm.Bsend(np.zeros(1000, dtype="B"), dest=1)
        """, 2)
    assert code != 0
    assert "Insufficient space in Bsend buffer; requested 1000; total buffer size is 1000" in err


def test_a_buffered_send_returns_before_its_rendezvous_receive_is_posted(tmp_path):
    out = ok(tmp_path, """\
        import numpy as np
        import mpisim
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        n = 1 << 20
        MPI.Attach_buffer(bytearray(n + MPI.BSEND_OVERHEAD))
        if comm.rank == 0:
            t0 = MPI.Wtime()
            comm.Bsend(np.zeros(n, dtype="B"), dest=1)
            print(MPI.Wtime() - t0)
            MPI.Detach_buffer()
        else:
            mpisim.compute(0.01)  # the receive comes 10 ms later
            comm.Recv(np.zeros(n, dtype="B"), source=0)
        """, 2)
    assert float(out) < 1e-6


def test_none_is_in_place_where_mpi4py_reads_it_so(tmp_path):
    # mpi4py 4: a None send buffer is MPI.IN_PLACE (MPICH 5 + mpi4py 4.1 print these lines at 3 ranks)
    out = ok(tmp_path, """\
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        r, p = comm.rank, comm.size
        a = np.full(2, r + 1.0)
        comm.Allreduce(None, a, MPI.SUM)
        g = np.full(2 * p, -1.0)
        g[2 * r:2 * r + 2] = r
        if r == 0:
            comm.Gather(None, g, root=0)
        else:
            comm.Gather(g[2 * r:2 * r + 2].copy(), None, root=0)
        s = np.arange(2 * p, dtype="f8") if r == 0 else np.zeros(2)
        comm.Scatter(s if r == 0 else None, None if r == 0 else s, root=0)
        print(r, a.tolist(), g.tolist() if r == 0 else "-", s[:2].tolist())
        """, 3)
    assert sorted(out.splitlines()) == ["0 [6.0, 6.0] [0.0, 0.0, 1.0, 1.0, 2.0, 2.0] [0.0, 1.0]",
                                        "1 [6.0, 6.0] - [2.0, 3.0]", "2 [6.0, 6.0] - [4.0, 5.0]"]


def test_isendrecv_status_is_the_receives_as_the_standard_says(tmp_path):
    # MPI 4.0 section 3.7.7: the status of an Isendrecv is its receive's (MPICH 5.0.2 leaves it
    # undefined, so this one is checked against the standard, not against MPICH's output)
    out = ok(tmp_path, """\
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        rank, size = comm.rank, comm.size
        recv, status = np.zeros(3, dtype="i"), MPI.Status()
        comm.Isendrecv(np.full(3, rank, dtype="i"), (rank + 1) % size, 7, recv, MPI.ANY_SOURCE).Wait(status)
        print(rank, recv.tolist(), status.Get_source(), status.Get_tag(), status.Get_count(MPI.INT))
        """, 3)
    assert sorted(out.splitlines()) == ["0 [2, 2, 2] 2 7 3", "1 [0, 0, 0] 0 7 3", "2 [1, 1, 1] 1 7 3"]
