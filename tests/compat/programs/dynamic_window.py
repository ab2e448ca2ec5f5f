"""A dynamic RMA window: two regions attached per rank, Put/Get/Accumulate at their addresses (sent with allgather)."""
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
win.Detach(buf)
win.Detach(other)
win.Free()
