"""Intercommunicator Reduce, Gather, Scatter, Alltoall (buffers and objects): even world ranks are group 0, whose rank 0 is every root."""
import numpy as np
from mpi4py import MPI

w = MPI.COMM_WORLD
color = w.rank % 2
local = w.Split(color, w.rank)
inter = local.Create_intercomm(0, w, 1 - color, tag=7)
lr, ls, rs = local.rank, local.size, inter.Get_remote_size()
out = []
if color == 0:  # group 0's rank 0 is every root
    root = MPI.ROOT if lr == 0 else MPI.PROC_NULL
    r = np.full(3, -1, "i4")
    g = np.full(2 * rs, -1, "i4")
    inter.Reduce(None, r, MPI.SUM, root)
    inter.Gather(None, g, root)
    inter.Scatter(np.arange(2 * rs, dtype="f8") if lr == 0 else None, None, root)
    out += [r.tolist(), g.tolist()]
    out.append(inter.reduce(None, MPI.SUM, root))
    out.append(inter.gather(None, root))
    out.append(inter.scatter([i * 10 for i in range(rs)] if lr == 0 else None, root))
else:
    inter.Reduce(np.full(3, lr + 1, "i4"), None, MPI.SUM, 0)
    inter.Gather(np.full(2, lr, "i4"), None, 0)
    s = np.zeros(2, "f8")
    inter.Scatter(None, s, 0)
    out.append(s.tolist())
    out.append(inter.reduce(lr, MPI.SUM, 0))
    out.append(inter.gather(("a", lr), 0))
    out.append(inter.scatter(None, 0))
a = np.zeros(rs, "i4")
inter.Alltoall(np.arange(rs, dtype="i4") + 100 * w.rank, a)
out.append(a.tolist())
out.append(inter.alltoall([(w.rank, j) for j in range(rs)]))
print(w.rank, out)
