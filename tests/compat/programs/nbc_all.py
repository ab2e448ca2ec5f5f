"""Every nonblocking collective on buffers, each checked against the blocking one's result."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
r, p = comm.Get_rank(), comm.Get_size()

b = np.zeros(3, dtype="i")
if r == 1:
    b[:] = [7, 8, 9]
comm.Ibcast(b, root=1).Wait()
print("Ibcast", b.tolist())

out = np.zeros(2, dtype="d")
comm.Ireduce(np.array([r, 2.0 * r]), out if r == 0 else None, op=MPI.SUM, root=0).Wait()
if r == 0:
    print("Ireduce", out.tolist())

out = np.zeros(2, dtype="l")
comm.Iallreduce(np.array([r + 1, -r]), out, op=MPI.PROD).Wait()
print("Iallreduce", out.tolist())

g = np.full(p, -1, dtype="i") if r == p - 1 else None
comm.Igather(np.array([100 + r], dtype="i"), g, root=p - 1).Wait()
if r == p - 1:
    print("Igather", g.tolist())

s = np.zeros(2, dtype="d")
comm.Iscatter(np.arange(2.0 * p) if r == 0 else None, s, root=0).Wait()
print("Iscatter", s.tolist())

ag = np.zeros(2 * p, dtype="i")
comm.Iallgather(np.array([r, r * r], dtype="i"), ag).Wait()
print("Iallgather", ag.tolist())

at = np.zeros(p, dtype="i")
comm.Ialltoall(np.arange(p, dtype="i") + 10 * r, at).Wait()
print("Ialltoall", at.tolist())

counts = [i + 1 for i in range(p)]
displs = [sum(counts[:i]) for i in range(p)]
gv = np.zeros(sum(counts), dtype="d")
comm.Iallgatherv(np.full(r + 1, float(r)), [gv, counts, displs, MPI.DOUBLE]).Wait()
print("Iallgatherv", gv.tolist())

rv = np.zeros(r + 1, dtype="d")
send = [np.arange(sum(counts), dtype="d"), counts, displs, MPI.DOUBLE] if r == 0 else None
comm.Iscatterv(send, rv, root=0).Wait()
print("Iscatterv", rv.tolist())

sc = np.zeros(1, dtype="i")
comm.Iscan(np.array([r + 1], dtype="i"), sc, op=MPI.SUM).Wait()
ex = np.full(1, -7, dtype="i")
comm.Iexscan(np.array([r + 1], dtype="i"), ex, op=MPI.SUM).Wait()
print("Iscan", int(sc[0]), "Iexscan", int(ex[0]) if r else "undefined")

rsb = np.zeros(1, dtype="i")
comm.Ireduce_scatter_block(np.arange(p, dtype="i") * (r + 1), rsb, op=MPI.SUM).Wait()
print("Ireduce_scatter_block", int(rsb[0]))

two = [comm.Iallreduce(np.array([r], dtype="i"), x, op=MPI.SUM) for x in (np.zeros(1, "i"), np.zeros(1, "i"))]
three = comm.Ibarrier()
MPI.Request.Waitall([*two, three])
print("outstanding together", [t == MPI.REQUEST_NULL for t in two])
