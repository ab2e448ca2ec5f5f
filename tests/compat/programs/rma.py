"""RMA windows: Create/Allocate, Put/Get/Accumulate under Fence, Lock/Unlock counters, atomics, PSCW, shared memory."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

# Win.Create over the program's own array: a ring of puts, then gets from the left, under fences.
mine = np.full(4, -1.0)
win = MPI.Win.Create(mine, disp_unit=mine.itemsize, comm=comm)
win.Fence()
win.Put(np.arange(4.0) + 10 * rank, (rank + 1) % size)
win.Fence()
print("after put", mine.tolist())
left = np.zeros(2)
win.Get([left, MPI.DOUBLE], (rank - 1) % size, target=(1, 2, MPI.DOUBLE))
win.Fence()
print("got", left.tolist())
win.Accumulate(np.ones(4) * (rank + 1), 0, op=MPI.SUM)
win.Fence()
if rank == 0:
    print("accumulated", mine.tolist())
win.Free()

# Win.Allocate: every rank bumps a counter at rank 0 under an exclusive lock.
counter = MPI.Win.Allocate(8, disp_unit=8, comm=comm)
mem = np.frombuffer(counter.tomemory(), dtype="i8")
mem[:] = 0
comm.Barrier()
for _ in range(3):
    counter.Lock(0, MPI.LOCK_EXCLUSIVE)
    counter.Accumulate(np.array([rank + 1], dtype="i8"), 0, op=MPI.SUM)
    counter.Unlock(0)
comm.Barrier()
if rank == 0:
    print("counter", int(mem[0]), "expected", 3 * size * (size + 1) // 2)
counter.Free()

# Atomics: a ticket dispenser with Fetch_and_op, then compare-and-swap, shared locks.
tickets = MPI.Win.Allocate(8 if rank == 0 else 0, disp_unit=8, comm=comm)
if rank == 0:
    np.frombuffer(tickets.tomemory(), dtype="i8")[:] = 100
comm.Barrier()
got = np.zeros(1, dtype="i8")
tickets.Lock(0, MPI.LOCK_SHARED)
tickets.Fetch_and_op(np.array([1], dtype="i8"), got, 0, 0, MPI.SUM)
tickets.Unlock(0)
every = sorted(comm.allgather(int(got[0])))
print("tickets", every)
comm.Barrier()
old = np.zeros(1, dtype="i8")
tickets.Lock(0)
tickets.Compare_and_swap(np.array([-rank], dtype="i8"), np.array([100 + size], dtype="i8"), old, 0, 0)
tickets.Unlock(0)
winners = comm.allgather(int(old[0]) == 100 + size)
print("one winner", winners.count(True))
tickets.Free()

# Post-start-complete-wait: each rank writes its rank into its right neighbour.
cell = np.full(1, -1, dtype="i")
pscw = MPI.Win.Create(cell, disp_unit=cell.itemsize, comm=comm)
group = comm.Get_group()
right, leftn = group.Incl([(rank + 1) % size]), group.Incl([(rank - 1) % size])
pscw.Post(leftn)
pscw.Start(right)
pscw.Put(np.array([rank], dtype="i"), (rank + 1) % size)
pscw.Complete()
pscw.Wait()
print("pscw from left", int(cell[0]))
pscw.Free()

# Shared memory: one segment per rank, read directly by the neighbour.
shm = MPI.Win.Allocate_shared(3 * 8, disp_unit=8, comm=comm)
np.frombuffer(shm.tomemory(), dtype="d")[:] = rank + 0.25
shm.Fence()
buf, unit = shm.Shared_query((rank + 1) % size)
print("shared", np.frombuffer(buf, dtype="d").tolist(), unit)
shm.Fence()
shm.Free()
