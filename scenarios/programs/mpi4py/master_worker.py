"""Master/worker: rank 0 hands out tasks to whichever worker asks first (ANY_SOURCE, Status).

Which worker gets which task depends on timing; the results do not: the master prints the
sum of squares of the tasks and how many were done.

Usage: master_worker.py [TASKS]  (default 20)
"""

import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
TASK, STOP = 1, 2
tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 20
if rank == 0:
    todo, total, done = list(range(tasks)), 0, 0
    status = MPI.Status()
    active = size - 1
    while active:
        result = comm.recv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
        worker = status.Get_source()
        if result is not None:
            total += result
            done += 1
        if todo:
            comm.send(todo.pop(0), dest=worker, tag=TASK)
        else:
            comm.send(None, dest=worker, tag=STOP)
            active -= 1
    print(f"master: {done} tasks done, sum of squares {total}")
else:
    comm.send(None, dest=0)
    status = MPI.Status()
    while True:
        task = comm.recv(source=0, tag=MPI.ANY_TAG, status=status)
        if status.Get_tag() == STOP:
            break
        comm.send(task * task, dest=0)
