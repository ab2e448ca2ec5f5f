"""A user op's operands are MPI.buffer byte buffers: a slice takes any buffer of as many bytes."""

import array

from mpi4py import MPI


def mysum(invec, inoutvec, datatype):
    if datatype is None:  # the lowercase calls: Python objects
        return [x + y for x, y in zip(invec, inoutvec, strict=True)]
    a = array.array("i", bytes(invec))
    b = array.array("i", bytes(inoutvec))
    inoutvec[:] = array.array("i", [x + y for x, y in zip(a, b, strict=True)])
    seen.append((type(invec).__name__, len(invec), len(inoutvec), datatype == MPI.INT))


seen = []


comm = MPI.COMM_WORLD
rank = comm.Get_rank()
op = MPI.Op.Create(mysum, commute=True)
a = array.array("i", [i * (rank + 1) for i in range(3)])
b = array.array("i", [0] * 3)
comm.Allreduce([a, MPI.INT], [b, MPI.INT], op)
print("allreduce", b.tolist())
print("objects", comm.allreduce([rank, 1], op=op))
local = array.array("i", [1, 2, 3])
op.Reduce_local([array.array("i", [10, 20, 30]), MPI.INT], [local, MPI.INT])
print("reduce_local", local.tolist(), seen[-1])
op.Free()
