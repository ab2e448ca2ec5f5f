"""A blocking call written without ``yield from`` is reported with the rank, the file and the line, never lost silently."""

from __future__ import annotations

import numpy as np
import pytest

from mpisim.errors import DeadlockError, MPIError, UnstartedCallError
from mpisim.mpi.request import Request
from mpisim.mpi.usercomm import BLOCKING, UserComm
from tests.conftest import make_world, run_program

HERE = "test_pending.py"


def user_world(p: int = 2):
    world = make_world(p)
    world.comm_class = UserComm
    return world


def test_a_send_without_yield_from_is_named_before_the_deadlock_it_causes():
    def program(comm):
        if comm.rank == 0:
            comm.send(np.zeros(4), dest=1)  # the bug: nothing is sent
        else:
            yield from comm.recv(source=0)
        yield from comm.barrier()

    with pytest.raises(DeadlockError) as info:
        run_program(user_world(), program)
    first, hint, deadlock = str(info.value).split("\n")[:3]
    assert first.startswith(f"rank 0 called comm.send(...) at {HERE}:")
    assert first.endswith("without `yield from`: the call never ran")
    assert hint == "  (write: yield from comm.send(np.zeros(4), dest=1))"
    assert deadlock.startswith("deadlock: 2 rank(s) blocked")


def test_a_run_that_ends_with_calls_that_never_ran_fails_naming_each():
    def program(comm):
        comm.barrier()
        sub = comm.dup()  # noqa: F841 -- the bug: a pending call, never run
        yield from comm.compute(1e-6)

    with pytest.raises(UnstartedCallError) as info:
        run_program(user_world(), program)
    lines = str(info.value).split("\n")
    assert [line.split(" at ")[0] for line in lines if not line.startswith("  ")] == [
        "rank 0 called comm.barrier(...)", "rank 0 called comm.dup(...)",
        "rank 1 called comm.barrier(...)", "rank 1 called comm.dup(...)"]
    assert "  (write: sub = yield from comm.dup())" in lines


def test_using_a_pending_call_as_its_result_or_yielding_it_names_the_line():
    def as_result(comm):
        new = comm.dup()
        yield from new.send(np.zeros(1), dest=0)

    with pytest.raises(MPIError, match=rf"rank \d: \.send of comm\.dup\(\.\.\.\) at {HERE}:\d+, a call that has not "
                                       r"run: write `result = yield from comm\.dup\(\.\.\.\)`"):
        run_program(user_world(), as_result)

    def plain_yield(comm):
        yield comm.barrier()

    with pytest.raises(MPIError, match=rf"comm\.barrier\(\.\.\.\) at {HERE}:\d+ was yielded with `yield`; "
                                       "a blocking call runs with `yield from`"):
        run_program(user_world(), plain_yield)


def test_a_call_runs_once():
    def program(comm):
        call = comm.barrier()
        yield from call
        yield from call

    with pytest.raises(MPIError, match=rf"comm\.barrier\(\.\.\.\) at {HERE}:\d+ has already run"):
        run_program(user_world(), program)


def test_started_and_overlapped_calls_run_and_request_waits_are_checked_too():
    def program(comm):
        x = np.full(3, comm.rank + 1.0)
        task = comm.start(comm.allreduce(x))  # a pending call handed to start: it runs
        later = comm.allreduce(x * 2)        # kept, run below
        yield from comm.compute(1e-6)
        total = yield task
        doubled = yield from later
        req = comm.isend(x, dest=1 - comm.rank)
        got = yield from comm.recv(source=1 - comm.rank)
        req.Wait()  # the bug: never waited
        return total.tolist(), doubled.tolist(), got.tolist()

    with pytest.raises(UnstartedCallError, match=rf"rank 0 called req\.Wait\(\.\.\.\) at {HERE}:\d+ without"):
        run_program(user_world(), program)

    def fixed(comm):
        req = comm.isend(np.zeros(1), dest=1 - comm.rank)
        yield from comm.recv(source=1 - comm.rank)
        assert (yield from req.Wait()) is True
        assert (yield from Request.Waitall([req])) is True

    run_program(user_world(), fixed)


def test_every_blocking_method_is_checked_and_plain_communicators_stay_bare_generators():
    assert {"send", "Send", "recv", "Recv", "sendrecv", "Sendrecv", "wait", "waitall", "probe", "compute",
            "barrier", "Barrier", "allreduce", "Allreduce", "bcast", "Bcast", "dup", "Dup", "split", "Split",
            "gather", "Gather", "scatter", "Scatter", "alltoall", "Alltoall", "reduce_scatter",
            "Reduce_scatter_block"} <= set(BLOCKING)
    kinds = {}

    def program(comm):
        kinds[comm.rank] = type(comm.barrier()).__name__
        yield from comm.barrier()
        sub = yield from comm.split(0)
        kinds["sub"] = type(sub).__name__
        kinds["sub call"] = type(sub.barrier()).__name__
        yield from sub.barrier()

    run_program(make_world(2), program)
    assert kinds == {0: "generator", 1: "generator", "sub": "Comm", "sub call": "generator"}
    kinds.clear()
    with pytest.raises(UnstartedCallError):
        run_program(user_world(), program)
    assert kinds == {0: "PendingCall", 1: "PendingCall", "sub": "UserComm", "sub call": "PendingCall"}
