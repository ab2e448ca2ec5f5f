"""Prefix reductions: Scan and Exscan on buffers, scan and exscan on objects, with values each rank prints.

Floats are printed in hex, so a run under MPICH and one under mpisim agree only if both add
the same numbers in the same order (MPICH's recursive doubling, not a left-to-right sum). The
user ops are not symmetric in their arguments, so they show the order of the operands too.
"""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
out = []


def hexes(a):
    return " ".join(float(v).hex() for v in np.asarray(a).reshape(-1))


x = np.array([0.1 * rank + 1e-9 * i for i in range(6)])
s = np.zeros(6)
comm.Scan(x, s, op=MPI.SUM)
out.append(f"Scan {hexes(s)}")
e = np.full(6, -7.0)  # MPI leaves rank 0's Exscan result undefined; MPICH leaves the buffer alone
comm.Exscan([x, MPI.DOUBLE], [e, MPI.DOUBLE], op=MPI.SUM)
out.append(f"Exscan {hexes(e) if rank else 'rank 0'}")
inplace = x.copy()
comm.Scan(MPI.IN_PLACE, inplace)
out.append(f"Scan IN_PLACE {hexes(inplace)}")

v = np.array([(rank * 7) % 5 - 2, (rank * 3) % 4, rank + 1], dtype="i")
for name, op in (("MAX", MPI.MAX), ("MIN", MPI.MIN), ("PROD", MPI.PROD)):
    r = np.zeros(3, dtype="i")
    comm.Scan([v, MPI.INT], [r, MPI.INT], op=op)
    q = np.full(3, -99, dtype="i")
    comm.Exscan([v, 3, MPI.INT], [q, 3, MPI.INT], op=op)
    out.append(f"{name} Scan {r.tolist()} Exscan {q.tolist() if rank else 'rank 0'}")


def matmul(invec, inoutvec, datatype):  # associative, not commutative: 2x2 integer matrices
    a = np.frombuffer(invec, dtype="l").reshape(2, 2)
    b = np.frombuffer(inoutvec, dtype="l").reshape(2, 2)
    b[...] = (a @ b) % 1000003


def lopsided(invec, inoutvec, datatype):  # not even associative: shows where each operand goes
    a = np.frombuffer(invec, dtype="d")
    b = np.frombuffer(inoutvec, dtype="d")
    b[:] = a - 0.5 * b


MATMUL = MPI.Op.Create(matmul, commute=False)
m = np.array([[1, rank + 1], [rank, 2 * rank + 3]], dtype="l")
r, q = np.zeros((2, 2), dtype="l"), np.zeros((2, 2), dtype="l")
comm.Scan(m, r, op=MATMUL)
comm.Exscan(m, q, op=MATMUL)
out.append(f"matmul Scan {r.tolist()} Exscan {q.tolist() if rank else 'rank 0'}")
for commute in (False, True):
    LOPSIDED = MPI.Op.Create(lopsided, commute=commute)
    r, q = np.zeros(6), np.zeros(6)
    comm.Scan(x, r, op=LOPSIDED)
    comm.Exscan(x, q, op=LOPSIDED)
    out.append(f"lopsided commute={commute} Scan {hexes(r)} Exscan {hexes(q) if rank else 'rank 0'}")
    LOPSIDED.Free()

out.append(f"scan {comm.scan(rank + 1)} exscan {comm.exscan(rank + 1)}")
out.append(f"scan float {comm.scan(0.1 * rank + 1e-9).hex()} list {comm.scan([rank])}")
out.append(f"exscan max {comm.exscan((rank * 7) % 5, op=MPI.MAX)} prod {comm.exscan(rank + 2, op=MPI.PROD)}")
PAREN = MPI.Op.Create(lambda a, b, datatype: f"({a}{b})", commute=False)
out.append(f"scan paren {comm.scan(str(rank), op=PAREN)} exscan paren {comm.exscan(str(rank), op=PAREN)}")
for line in out:
    print(f"rank {rank}: {line}")
