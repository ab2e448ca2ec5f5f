"""What a program may do with its buffers and objects around a call, as under mpiexec.

Each program asserts what MPICH with mpi4py gives (each was run under both); a failed
assertion fails the run with the rank's traceback, which the test shows.
"""

from __future__ import annotations

import pytest

from tests.compat.test_mpi4py_api import ok

#: Elements per rank: eager (below laptop-shm's 4 KiB eager limit) and rendezvous.
SIZES = [4, 4096]


@pytest.mark.parametrize("count", SIZES)
def test_send_buffers_changed_after_a_blocking_collective_returns_do_not_change_its_result(tmp_path, count):
    # A leaf of a gather returns once its block has left; the root may receive it later. MPI
    # lets the leaf change its buffer at once: the root must still get what was sent.
    ok(tmp_path, f"""\
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        r, p, n = comm.rank, comm.size, {count}
        counts = [n] * p
        out = np.zeros(n * p)
        calls = {{
            "Reduce": lambda mine: comm.Reduce(mine, out[:n], op=MPI.SUM, root=0),
            "Gather": lambda mine: comm.Gather(mine, out, root=0),
            "Gatherv": lambda mine: comm.Gatherv(mine, [out, counts, None, MPI.DOUBLE], root=0),
            "Allgather": lambda mine: comm.Allgather(mine, out),
            "Allgatherv": lambda mine: comm.Allgatherv(mine, [out, counts, None, MPI.DOUBLE]),
            "Alltoall": lambda mine: comm.Alltoall(np.tile(mine, p), out),
        }}
        for name, call in calls.items():
            mine = np.zeros(n)
            for step in range(3):
                mine[:] = r + 10 * step
                call(mine)
                mine[:] = -1.0   # allowed the moment the call returns
                want = np.repeat(np.arange(p, dtype=float) + 10 * step, n)
                if name == "Reduce":
                    want = np.full(n, want.sum() / n)
                    got = out[:n]
                else:
                    got = out
                if r == 0 or name.startswith("All"):
                    assert np.array_equal(got, want), (name, step, got[::n])
        data = np.arange(n * p, dtype=float)
        got = np.zeros(n)
        for step in range(3):
            comm.Scatter(data if r == 0 else None, got, root=0)
            data[:] = -1.0
            assert np.array_equal(got, np.arange(r * n, (r + 1) * n, dtype=float)), (step, got[:2])
            data[:] = np.arange(n * p, dtype=float)
        """)


def test_lowercase_collectives_return_copies_never_the_callers_object(tmp_path):
    out = ok(tmp_path, """\
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        r, p = comm.rank, comm.size
        x = [r]
        same = {
            "bcast": comm.bcast(x, root=0) is x,
            "scatter": comm.scatter([x] * p if r == 0 else None, root=0) is x,
            "allgather": comm.allgather(x)[r] is x,
            "alltoall": comm.alltoall([x] * p)[r] is x,
            "gather": (comm.gather(x, root=0) or [None] * p)[r] is x,
            "reduce": comm.reduce(x, op=MPI.MAX, root=0) is x,
            "allreduce": comm.allreduce(x, op=MPI.MAX) is x,
        }
        assert not any(same.values()), same
        item = [r, 0]
        got = comm.allgather(item)
        item.append("changed")   # the caller's object changes; the result must not
        assert got == [[k, 0] for k in range(p)], got
        print("ok", r)
        """)
    assert sorted(out.split("\n")) == ["", "ok 0", "ok 1", "ok 2", "ok 3"]
