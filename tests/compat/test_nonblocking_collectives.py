"""Nonblocking collectives run their algorithm beside the rank's program: overlap hides their time, Wait/Test complete them.

(What they compute is checked against MPICH's output in :mod:`tests.compat.test_mpich_programs`.)
"""

from __future__ import annotations

import pytest

from tests.compat.test_mpi4py_api import ok, run

OVERLAP = """\
    import numpy as np
    import mpisim
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    data, out = np.ones(1 << 18), np.empty(1 << 18)
    def timed(step):
        comm.Barrier()
        t0 = MPI.Wtime()
        step()
        return MPI.Wtime() - t0
    alone = timed(lambda: comm.Allreduce(data, out))
    def blocking():
        comm.Allreduce(data, out)
        mpisim.compute(WORK)
    def overlapped():
        req = comm.Iallreduce(data, out)
        mpisim.compute(WORK)
        req.Wait()
    b, nb = timed(blocking), timed(overlapped)
    if comm.rank == 0:
        print(repr(alone), repr(b), repr(nb))
    """


@pytest.mark.parametrize("work_vs_allreduce", [3.0, 0.5])
def test_computation_overlaps_a_nonblocking_allreduce(tmp_path, work_vs_allreduce):
    # First measure the allreduce alone, then compute a multiple of it beside Iallreduce.
    alone = float(ok(tmp_path, OVERLAP.replace("WORK", "0.0")).split()[0])
    out = ok(tmp_path, OVERLAP.replace("WORK", repr(work_vs_allreduce * alone)))
    alone, blocking, overlapped = map(float, out.split())
    work = work_vs_allreduce * alone
    assert blocking == pytest.approx(alone + work, rel=1e-6)  # one after the other
    # Side by side: the longer of the two, never less, and well under their sum (the
    # collective's messages share the rank's links with nothing else here).
    assert max(alone, work) <= overlapped * (1 + 1e-9)
    assert overlapped < 0.9 * (alone + work)


def test_mismatched_nonblocking_collectives_are_reported(tmp_path):
    code, _, err = run(tmp_path, """\
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        a = np.zeros(4)
        req = comm.Ibcast(a, root=0) if comm.rank == 0 else comm.Iallreduce(np.ones(4), a)
        req.Wait()
        """, 2)
    assert code != 0
    assert "mismatched collectives" in err and "allreduce" in err and "bcast" in err, err


def test_a_rank_that_never_waits_for_its_partner_is_a_deadlock_naming_the_collective(tmp_path):
    code, _, err = run(tmp_path, """\
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        if comm.rank == 0:
            comm.Ibarrier().Wait()
        """, 2)
    assert code != 0
    assert "deadlock" in err and "rank 0: blocked in wait(ibarrier())" in err, err


def test_test_polls_until_done_and_waitall_mixes_messages_and_collectives(tmp_path):
    ok(tmp_path, """\
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        r, p = comm.rank, comm.size
        req = comm.Ibarrier()
        polls = 0
        while not req.Test():
            polls += 1
        assert req == MPI.REQUEST_NULL
        got = np.zeros(1)
        reqs = [comm.Isend(np.array([float(r)]), (r + 1) % p), comm.Irecv(got, (r - 1) % p),
                comm.Iallreduce(np.array([1.0]), out := np.zeros(1))]
        MPI.Request.Waitall(reqs)
        assert got[0] == (r - 1) % p and out[0] == p, (got, out)
        """, 3)


def test_a_nonblocking_neighbourhood_exchange_reaches_the_neighbours_only(tmp_path):
    # a 1-D open chain of 4: the end ranks have one neighbour, PROC_NULL blocks stay as they were
    out = ok(tmp_path, """\
        import numpy as np
        from mpi4py import MPI
        cart = MPI.COMM_WORLD.Create_cart([4], periods=[False])
        got = np.full(2, -1, dtype="i")
        cart.Ineighbor_alltoall(np.array([cart.rank, cart.rank], dtype="i"), got).Wait()
        print(cart.rank, got.tolist())
        """, 4, "--tag-output")
    lines = sorted(out.splitlines())
    assert lines == ["[0] 0 [-1, 1]", "[1] 1 [0, 2]", "[2] 2 [1, 3]", "[3] 3 [2, -1]"]
