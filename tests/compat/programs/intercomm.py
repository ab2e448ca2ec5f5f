"""Intercommunicators: Create_intercomm between even and odd ranks, point-to-point across, collectives, Merge."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
color = rank % 2
local = comm.Split(color, rank)
inter = local.Create_intercomm(0, comm, 1 - color, tag=12)
lr, ls, rs = inter.Get_rank(), inter.Get_size(), inter.Get_remote_size()
print("inter", color, lr, ls, rs, inter.Is_inter(), inter.Get_remote_group().Get_size())

# Point-to-point: local rank i talks to remote rank i (where it exists).
if lr < rs:
    status = MPI.Status()
    got = inter.sendrecv(f"{color}:{lr}", dest=lr, sendtag=5, source=lr, recvtag=5, status=status)
    print("across", got, status.Get_source(), status.Get_tag())
    buf = np.zeros(3, dtype="i")
    req = inter.Irecv(buf, source=lr, tag=6)
    inter.Send(np.full(3, 10 * rank, dtype="i"), dest=lr, tag=6)
    st = MPI.Status()
    req.Wait(st)
    print("buffers", buf.tolist(), st.Get_source())

# Collectives: each group gets the other's contributions.
out = np.zeros(2)
inter.Allreduce(np.array([rank, 1.0]), out, op=MPI.SUM)
print("allreduce", out.tolist())
print("allreduce obj", inter.allreduce(rank, op=MPI.MAX))
gathered = np.zeros(rs, dtype="i")
inter.Allgather(np.array([rank], dtype="i"), gathered)
print("allgather", gathered.tolist(), inter.allgather(f"r{rank}"))
data = np.zeros(2, dtype="d")
if color == 0:
    root = MPI.ROOT if lr == 0 else MPI.PROC_NULL
    if lr == 0:
        data[:] = [3.5, 4.5]
else:
    root = 0
inter.Bcast(data, root=root)
obj = inter.bcast({"from": "even leader"} if color == 0 and lr == 0 else None, root=root)
print("bcast", data.tolist(), obj)
inter.Barrier()

merged = inter.Merge(high=bool(color))
print("merged", merged.Get_rank(), merged.Get_size(), merged.allgather(rank))
merged.Free()
inter.Free()
