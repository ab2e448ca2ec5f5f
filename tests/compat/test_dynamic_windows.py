"""Dynamic RMA windows (``Win.Create_dynamic``, ``Attach``, ``Detach``): targets named by address.

The expected lines are what MPICH 5 with mpi4py 4 printed for the same program at 3 ranks.
"""

from __future__ import annotations

from tests.compat.test_mpi4py_api import ok, run

PROGRAM = """\
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
r, p = comm.rank, comm.size
win = MPI.Win.Create_dynamic(comm=comm)
print(r, "flavor", win.Get_attr(MPI.WIN_CREATE_FLAVOR) == MPI.WIN_FLAVOR_DYNAMIC, win.attrs[:2])
buf = np.zeros(4, dtype="i4")
other = np.full(2, 7, dtype="i4")
win.Attach(buf)
win.Attach(other)
addrs = comm.allgather((MPI.Get_address(buf), MPI.Get_address(other)))
win.Fence()
t = (r + 1) % p
win.Put(np.full(2, r + 1, dtype="i4"), t, (addrs[t][0] + 4, 2, MPI.INT))
win.Fence()
got = np.zeros(2, dtype="i4")
win.Lock(t, MPI.LOCK_SHARED)
win.Get(got, t, addrs[t][1])
win.Accumulate(np.ones(1, dtype="i4"), t, MPI.Aint_add(addrs[t][1], 4), op=MPI.SUM)
win.Unlock(t)
win.Fence()
print(r, buf.tolist(), got.tolist(), other.tolist())
win.Detach(buf); win.Detach(other)
win.Free()
"""

MPICH = """\
0 [0, 3, 3, 0] [7, 7] [7, 8]
0 flavor True (0, 0)
1 [0, 1, 1, 0] [7, 7] [7, 8]
1 flavor True (0, 0)
2 [0, 2, 2, 0] [7, 7] [7, 8]
2 flavor True (0, 0)"""


def test_put_get_accumulate_at_attached_addresses_as_mpich(tmp_path):
    out = ok(tmp_path, PROGRAM, 3)
    assert "\n".join(sorted(out.splitlines())) == MPICH


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
