"""Matched probes: Mprobe/Improbe then Message.Recv/Irecv/recv/irecv, sizes learned before allocating, PROC_NULL."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

if rank != 0:
    comm.Send(np.arange(rank * 3, dtype="d"), dest=0, tag=rank)
    comm.send({"from": rank, "items": list(range(rank))}, dest=0, tag=100 + rank)
    comm.Send(np.full(rank + 1, rank, dtype="i"), dest=0, tag=200)
else:
    for src in range(1, size):
        status = MPI.Status()
        msg = comm.Mprobe(src, MPI.ANY_TAG, status)
        n = status.Get_count(MPI.DOUBLE)
        buf = np.empty(n)
        msg.Recv(buf)
        print("buffer from", status.Get_source(), "tag", status.Get_tag(), "count", n, buf.tolist(), bool(msg))
    got = {}
    for src in range(1, size):
        status = MPI.Status()
        msg = comm.mprobe(source=src, tag=100 + src, status=status)
        got[status.source] = msg.irecv().wait() if src % 2 else msg.recv()
    print("objects", [got[k] for k in sorted(got)])
    seen = []
    while len(seen) < size - 1:
        status = MPI.Status()
        msg = comm.Improbe(MPI.ANY_SOURCE, 200, status)
        if msg is None:
            continue
        buf = np.empty(status.Get_count(MPI.INT), dtype="i")
        msg.Irecv(buf).Wait()
        seen.append((status.Get_source(), buf.tolist()))
    print("improbed", sorted(seen))

none = comm.mprobe(source=MPI.PROC_NULL)
print("proc_null", none.recv(), none == MPI.MESSAGE_NO_PROC or none is not None)
comm.Barrier()
print("after barrier", comm.Improbe(MPI.ANY_SOURCE, MPI.ANY_TAG))
