"""The generator Comm under mpi4py's names: uppercase calls fill the caller's buffers, requests wait like mpi4py's.

Each program checks its results against numpy; times are checked where the two spellings of
one call must cost the same.
"""

from __future__ import annotations

import numpy as np
import pytest

from mpisim.errors import MPIError
from mpisim.mpi import MAX, SUM, UNDEFINED, SizePayload, Status
from mpisim.mpi.constants import MAX_TAG, TAG_UB
from mpisim.mpi.payload import IN_PLACE
from mpisim.mpi.request import Request
from tests.conftest import make_world, run_program


def test_uppercase_collectives_fill_the_callers_buffers():
    p = 4

    def program(comm):
        r = comm.rank
        x = np.arange(6.0) + 10 * r
        every = np.stack([np.arange(6.0) + 10 * k for k in range(p)])

        out = np.empty(6)
        assert (yield from comm.Allreduce(x, out, op=SUM)) is None
        assert np.array_equal(out, every.sum(axis=0))

        inplace = x.copy()
        yield from comm.Allreduce(IN_PLACE, inplace, op=MAX)
        assert np.array_equal(inplace, every.max(axis=0))

        b = np.arange(5.0) if r == 2 else np.zeros(5)
        yield from comm.Bcast(b, root=2)
        assert np.array_equal(b, np.arange(5.0))

        total = np.zeros(6) if r == 1 else None
        yield from comm.Reduce(x, total, op=SUM, root=1)
        if r == 1:
            assert np.array_equal(total, every.sum(axis=0))

        mine = x.copy()
        yield from comm.Reduce(IN_PLACE if r == 0 else mine, mine if r == 0 else None, root=0)
        if r == 0:
            assert np.array_equal(mine, every.sum(axis=0))

        gathered = np.empty(p * 6) if r == 3 else None
        yield from comm.Gather(x, gathered, root=3)
        if r == 3:
            assert np.array_equal(gathered, every.reshape(-1))

        part = np.empty(3)
        yield from comm.Scatter(np.arange(3.0 * p) if r == 0 else None, part, root=0)
        assert np.array_equal(part, np.arange(3.0 * r, 3.0 * r + 3))

        allg = np.zeros(p * 2)
        allg[2 * r:2 * r + 2] = [r, -r]
        yield from comm.Allgather(IN_PLACE, allg)
        assert np.array_equal(allg, np.array([[k, -k] for k in range(p)], float).reshape(-1))

        sent = np.array([100 * r + j for j in range(p)], float)
        got = np.empty(p)
        yield from comm.Alltoall(sent, got)
        assert np.array_equal(got, [100 * k + r for k in range(p)])

        blocks = np.arange(2.0 * p) * (r + 1)
        mine2 = np.empty(2)
        yield from comm.Reduce_scatter_block(blocks, mine2, op=SUM)
        assert np.array_equal(mine2, (np.arange(2.0 * p) * sum(range(1, p + 1)))[2 * r:2 * r + 2])

        yield from comm.Barrier()
        return True

    assert run_program(make_world(p), program) == [True] * p


def test_recv_fills_and_requests_wait_with_mpi4pys_names():
    def program(comm):
        if comm.rank == 0:
            yield from comm.Ssend(np.arange(4.0), dest=1, tag=5)
            reqs = [comm.Isend(np.full(2, float(t)), dest=1, tag=t) for t in (1, 2)]
            assert (yield from Request.Waitall(reqs)) is True
            assert comm.Get_attr(TAG_UB) == MAX_TAG
            return None
        buf = np.zeros(4)
        status = Status()
        assert (yield from comm.Probe(source=0, tag=5)) is not None
        yield from comm.Recv(buf, source=0, tag=5, status=status)
        assert buf.tolist() == [0.0, 1.0, 2.0, 3.0] and status.Get_source() == 0 and status.Get_tag() == 5
        a, b = np.zeros(2), np.zeros(2)
        reqs = [comm.Irecv(b, source=0, tag=2), comm.Irecv(a, source=0, tag=1)]
        statuses = [Status(), Status()]
        first = yield from Request.Waitany(reqs, statuses[0])
        assert first in (0, 1)
        values = yield from Request.waitall(reqs, statuses)
        assert a.tolist() == [1.0, 1.0] and b.tolist() == [2.0, 2.0]
        assert [s.Get_tag() for s in statuses] == [2, 1] and len(values) == 2
        assert Request.Testall(reqs) and reqs[0].Test()
        assert (yield from reqs[1].Wait()) is True
        assert (yield from Request.waitany([])) == (UNDEFINED, None)
        return buf.sum()

    assert run_program(make_world(), program)[1] == 6.0


def test_uppercase_and_lowercase_cost_the_same_and_size_only_payloads_pass_through():
    """Allreduce(x, out) is allreduce(x) plus a local copy: the same messages, the same simulated time."""
    def lower(comm, payload):
        yield from comm.allreduce(payload, algorithm="ring")
        return comm.now

    def upper(comm, payload):
        out = payload if isinstance(payload, SizePayload) else np.empty_like(payload)
        yield from comm.Allreduce(payload, out, algorithm="ring")
        return comm.now

    data = np.ones(1 << 16, dtype=np.float32)
    times = {(f.__name__, kind): run_program(make_world(4), f, buf)
             for f in (lower, upper) for kind, buf in (("data", data), ("size", SizePayload(1 << 16, np.float32)))}
    assert len({tuple(t) for t in times.values()}) == 1, times


def test_dup_and_split_are_collectives_with_the_same_cost_shape():
    """Both exchange one small row per member in ceil(lg p) rounds; neither returns before the others call it."""
    def program(comm):
        if comm.rank == 0:
            yield from comm.compute(1e-3)  # rank 0 arrives late: the others must wait for it
        d = yield from comm.Dup()
        t_dup = comm.now
        s = yield from comm.Split(comm.rank % 2, key=-comm.rank)
        none = yield from comm.split(UNDEFINED if comm.rank == 1 else 0)
        return t_dup, d.size, s.size, s.rank, none is None

    world = make_world(4)
    out = run_program(world, program)
    assert all(t_dup > 1e-3 for t_dup, *_ in out[1:]), "dup waited for the late rank"
    assert [tuple(o[1:4]) for o in out] == [(4, 2, 1), (4, 2, 1), (4, 2, 0), (4, 2, 0)]
    assert [o[4] for o in out] == [False, True, False, False]
    assert world.tracer.message_count == 3 * 4 * 2, "each call: p ranks x ceil(lg p) rounds of one message"


def test_members_calling_dup_and_split_in_different_orders_is_an_error():
    def program(comm):
        if comm.rank == 0:
            yield from comm.dup()
        else:
            yield from comm.split(0)

    with pytest.raises(MPIError, match=r"rank \d: (dup|split) is this rank's call #1 deriving a communicator, but "
                                       r"rank \d's is (split|dup)"):
        run_program(make_world(2), program)


def test_a_freed_communicator_names_the_call_made_on_it():
    def program(comm):
        d = yield from comm.Dup()
        d.Free()
        yield from d.send(np.zeros(1), dest=0)

    with pytest.raises(MPIError, match=r"rank \d: comm.send on a freed communicator \(after Free\(\) it is MPI_COMM_NULL\)"):
        run_program(make_world(2), program)
    with pytest.raises(MPIError, match="COMM_WORLD cannot be freed"):
        run_program(make_world(1), lambda comm: (yield from comm.Free()))


def test_in_place_where_mpi_does_not_allow_it_is_a_named_error():
    def program(comm):
        yield from comm.Gather(IN_PLACE, np.zeros(4) if comm.rank == 0 else None, root=0)

    with pytest.raises(MPIError, match=r"rank 1: Gather: IN_PLACE is the root's send buffer only"):
        run_program(make_world(2), program)
