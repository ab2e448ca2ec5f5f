"""Point-to-point semantics and protocol timing, with exact expected times on the analytic model."""

from __future__ import annotations

import numpy as np
import pytest

from mpisim.errors import DeadlockError, InvalidRankError, InvalidTagError, TruncationError
from mpisim.mpi import ANY_SOURCE, ANY_TAG, SizePayload, Status
from mpisim.mpi.request import UNDEFINED
from tests.conftest import make_world, run_program

ALPHA, BW = 2e-6, 1e9
BETA = 1 / BW
H = 64


def test_eager_message_takes_alpha_plus_n_beta():
    """With the receive posted, an eager message completes alpha + n*beta after the send is posted."""
    n = 1000
    log = []

    def program(comm):
        if comm.rank == 0:
            yield from comm.send(np.zeros(n, np.int8), dest=1)
            log.append(("send done", comm.now))
        else:
            yield from comm.recv(source=0)
            log.append(("recv done", comm.now))

    run_program(make_world(alpha=ALPHA, bandwidth=BW), program)
    assert dict(log)["send done"] == 0.0
    assert dict(log)["recv done"] == pytest.approx(ALPHA + n * BETA, rel=1e-12)


def test_rendezvous_takes_three_alpha_plus_n_plus_2h_beta():
    """RTS, CTS and data: 3*alpha + (n + 2h)*beta from posting the send to the receive completing."""
    n = 10_000
    times = {}

    def program(comm):
        if comm.rank == 0:
            yield from comm.send(np.zeros(n, np.int8), dest=1)
            times["send"] = comm.now
        else:
            yield from comm.recv(source=0)
            times["recv"] = comm.now

    world = make_world(alpha=ALPHA, bandwidth=BW, eager_limit_inter=1024, header_bytes=H)
    run_program(world, program)
    assert times["recv"] == pytest.approx(3 * ALPHA + (n + 2 * H) * BETA, rel=1e-12)
    assert times["send"] == pytest.approx(times["recv"], rel=1e-12)
    protocols = [m.protocol for m in world.tracer.messages]
    assert protocols == ["rendezvous"]


@pytest.mark.parametrize(("n", "eager"), [(100, True), (10_000, False)])
def test_late_receive_delays_rendezvous_sender_but_not_eager(n, eager):
    late = 50e-6
    times = {}

    def program(comm):
        if comm.rank == 0:
            yield from comm.send(np.zeros(n, np.int8), dest=1)
            times["send"] = comm.now
        else:
            yield from comm.compute(late)
            yield from comm.recv(source=0)
            times["recv"] = comm.now

    run_program(make_world(alpha=ALPHA, bandwidth=BW, eager_limit_inter=1024, header_bytes=H), program)
    if eager:
        assert times["send"] == 0.0
        assert times["recv"] == late  # arrived long before; free copy (infinite copy bandwidth)
    else:
        # RTS waited in the unexpected queue; CTS and data follow the late receive.
        assert times["send"] == pytest.approx(late + 2 * ALPHA + (n + H) * BETA, rel=1e-12)
        assert times["recv"] == pytest.approx(times["send"], rel=1e-12)


def test_unexpected_eager_message_pays_the_copy():
    n, copy_bw, late = 4000, 1e8, 100e-6
    times = {}

    def program(comm):
        if comm.rank == 0:
            yield from comm.send(np.zeros(n, np.int8), dest=1)
            times["send"] = comm.now
            yield from comm.send(np.zeros(n, np.int8), dest=1, tag=1)
        else:
            yield from comm.recv(source=0, tag=1)  # posted early: matched on arrival
            times["posted"] = comm.now
            yield from comm.compute(late)
            yield from comm.recv(source=0, tag=0)  # arrived long ago: copied out of the unexpected queue
            times["unexpected"] = comm.now

    run_program(make_world(alpha=ALPHA, bandwidth=BW, copy_bandwidth=copy_bw), program)
    copy = n / copy_bw
    assert times["send"] == pytest.approx(copy)  # the blocking eager send pays its local copy
    # second message: two sender copies, then the wire; no receiver copy since it was posted
    assert times["posted"] == pytest.approx(2 * copy + ALPHA + n * BETA, rel=1e-12)
    assert times["unexpected"] == pytest.approx(times["posted"] + late + copy, rel=1e-12)


def test_overheads_are_charged_per_message():
    o_s, o_r, n = 3e-6, 5e-6, 100
    times = {}

    def program(comm):
        if comm.rank == 0:
            yield from comm.send(np.zeros(n, np.int8), dest=1)
            times["send"] = comm.now
        else:
            yield from comm.recv(source=0)
            times["recv"] = comm.now

    run_program(make_world(alpha=ALPHA, bandwidth=BW, send_overhead=o_s, recv_overhead=o_r), program)
    assert times["send"] == pytest.approx(o_s)
    assert times["recv"] == pytest.approx(o_s + ALPHA + n * BETA + o_r, rel=1e-12)


# ---------------------------------------------------------------------- matching


def test_any_source_and_status():
    def program(comm):
        if comm.rank == 0:
            got = []
            for _ in range(2):
                st = Status()
                buf = yield from comm.recv(source=ANY_SOURCE, tag=ANY_TAG, status=st)
                got.append((st.source, st.tag, st.count, int(buf[0])))
            return sorted(got)
        yield from comm.compute(comm.rank * 1e-6)
        yield from comm.send(np.full(3, comm.rank * 10, np.int32), dest=0, tag=comm.rank + 4)
        return None

    out = run_program(make_world(3), program)
    assert out[0] == [(1, 5, 3, 10), (2, 6, 3, 20)]


def test_tags_select_messages_out_of_order():
    """A receive for tag 2 skips an earlier message with tag 1, which a later receive takes."""

    def program(comm):
        if comm.rank == 0:
            yield from comm.send(np.array([1]), dest=1, tag=1)
            yield from comm.send(np.array([2]), dest=1, tag=2)
            return None
        second = yield from comm.recv(source=0, tag=2)
        first = yield from comm.recv(source=0, tag=1)
        return int(first[0]), int(second[0])

    assert run_program(make_world(), program)[1] == (1, 2)


def test_non_overtaking_even_when_a_later_message_is_physically_faster():
    """A large eager message followed by a tiny one: the tiny one arrives first but must match second."""
    big = 60_000

    def program(comm):
        if comm.rank == 0:
            yield from comm.send(np.ones(big, np.int8), dest=1, tag=0)
            yield from comm.send(np.array([7], np.int8), dest=1, tag=0)
            return None
        a = yield from comm.recv(source=0, tag=ANY_TAG)
        t_a = comm.now
        b = yield from comm.recv(source=0, tag=ANY_TAG)
        return a.size, b.size, t_a

    sizes_a, sizes_b, t_a = run_program(make_world(alpha=ALPHA, bandwidth=BW), program)[1]
    assert (sizes_a, sizes_b) == (big, 1)
    # The tiny one's packet crosses the link ahead of the big one's remaining bytes (the
    # analytic network interleaves a packet rather than queue it), which then land 1 B later.
    assert t_a == pytest.approx(ALPHA + (big + 1) * BETA)


def test_dup_gives_a_separate_matching_context():
    def program(comm):
        other = yield from comm.dup()
        if comm.rank == 0:
            yield from other.send(np.array([2]), dest=1)  # sent first, on the duplicate
            yield from comm.send(np.array([1]), dest=1)
            return None
        a = yield from comm.recv(source=0)  # must not take the duplicate's message
        b = yield from other.recv(source=0)
        return int(a[0]), int(b[0])

    assert run_program(make_world(), program)[1] == (1, 2)


def test_split_groups_by_color_and_orders_by_key():
    def program(comm):
        sub = yield from comm.split(color=comm.rank % 2, key=-comm.rank)
        # inside each part, ranks are ordered by descending world rank (key = -rank)
        total = 0
        if sub.rank == 0:
            for _ in range(sub.size - 1):
                buf = yield from sub.recv()
                total += int(buf[0])
        else:
            yield from sub.send(np.array([comm.rank]), dest=0)
        return comm.rank, sub.rank, sub.size, total

    out = run_program(make_world(5), program)
    assert [o[:3] for o in out] == [(0, 2, 3), (1, 1, 2), (2, 1, 3), (3, 0, 2), (4, 0, 3)]
    assert out[4][3] == 0 + 2 and out[3][3] == 1


def test_split_messages_do_not_match_parent_receives():
    def program(comm):
        sub = yield from comm.split(color=0, key=comm.rank)
        if comm.rank == 0:
            yield from sub.send(np.array([5]), dest=1)
            yield from comm.send(np.array([6]), dest=1)
            return None
        a = yield from comm.recv(source=0)
        b = yield from sub.recv(source=0)
        return int(a[0]), int(b[0])

    assert run_program(make_world(2), program)[1] == (6, 5)


# ---------------------------------------------------------------------- the head-to-head exchange


def head_to_head(n):
    def program(comm):
        peer = 1 - comm.rank
        yield from comm.send(np.zeros(n, np.int8), dest=peer)
        buf = yield from comm.recv(source=peer)
        return buf.size

    return program


def test_head_to_head_sends_are_fine_below_the_eager_limit():
    assert run_program(make_world(eager_limit_inter=4096), head_to_head(4096)) == [4096, 4096]


def test_head_to_head_sends_deadlock_above_the_eager_limit():
    with pytest.raises(DeadlockError) as err:
        run_program(make_world(eager_limit_inter=4096), head_to_head(4097))
    text = str(err.value)
    assert "rank 0: blocked in send(dest=1, tag=0, 4097 B, rendezvous)" in text
    assert "rank 1: blocked in send(dest=0, tag=0, 4097 B, rendezvous)" in text
    assert "cycle of waits: rank 0 -> rank 1 -> rank 0" in text


def test_the_same_exchange_with_sendrecv_or_isend_runs():
    n = 100_000

    def with_sendrecv(comm):
        peer = 1 - comm.rank
        buf = yield from comm.sendrecv(np.full(n, comm.rank, np.int8), dest=peer, source=peer)
        return int(buf[0])

    def with_isend(comm):
        peer = 1 - comm.rank
        req = comm.isend(np.full(n, comm.rank, np.int8), dest=peer)
        buf = yield from comm.recv(source=peer)
        yield from comm.wait(req)
        return int(buf[0])

    assert run_program(make_world(eager_limit_inter=4096), with_sendrecv) == [1, 0]
    assert run_program(make_world(eager_limit_inter=4096), with_isend) == [1, 0]


def test_deadlock_on_a_receive_names_the_missing_sender():
    def program(comm):
        if comm.rank == 1:
            yield from comm.recv(source=0, tag=3)

    with pytest.raises(DeadlockError, match=r"rank 1: blocked in recv\(source=0, tag=3\) -- waiting for a message from rank 0 \(it has finished\)"):
        run_program(make_world(), program)


# ---------------------------------------------------------------------- synchronous sends, probes, requests


def test_ssend_completes_only_once_matched():
    """A small ssend goes eagerly, as MPICH's does: its data waits at the receiver, which answers the match with an ack."""
    late = 20e-6
    times = {}

    def program(comm):
        if comm.rank == 0:
            yield from comm.ssend(np.zeros(8, np.int8), dest=1)
            times["ssend"] = comm.now
        else:
            yield from comm.compute(late)
            yield from comm.recv(source=0)

    run_program(make_world(alpha=ALPHA, bandwidth=BW, header_bytes=H), program)
    assert times["ssend"] == pytest.approx(late + ALPHA + H * BETA, rel=1e-12)


def test_large_ssend_is_a_rendezvous():
    """Past the eager limit the synchronous send is the rendezvous: RTS, CTS, then the data."""
    late, n = 20e-6, 100_000
    times = {}

    def program(comm):
        if comm.rank == 0:
            yield from comm.ssend(np.zeros(n, np.int8), dest=1)
            times["ssend"] = comm.now
        else:
            yield from comm.compute(late)
            yield from comm.recv(source=0)

    run_program(make_world(alpha=ALPHA, bandwidth=BW, header_bytes=H, eager_limit_inter=1024), program)
    assert times["ssend"] == pytest.approx(late + 2 * ALPHA + (n + H) * BETA, rel=1e-12)


def test_ssend_to_itself_completes_with_its_receive():
    """MPICH's self path: the synchronous send and the posted receive complete at one instant."""
    times = {}

    def program(comm):
        req = comm.irecv(source=0, tag=1)
        yield from comm.compute(5e-6)
        yield from comm.ssend(np.zeros(8, np.int8), dest=0, tag=1)
        times["ssend"] = comm.now
        assert req.triggered
        yield from comm.wait(req)

    run_program(make_world(1, alpha=ALPHA, bandwidth=BW, header_bytes=H, recv_overhead=1e-6), program)
    assert times["ssend"] >= 5e-6 + 1e-6


def test_probe_then_receive_with_the_probed_size():
    def program(comm):
        if comm.rank == 0:
            yield from comm.send(np.arange(6, dtype=np.int16), dest=1, tag=9)
            return None
        assert not comm.iprobe(source=0, tag=9)
        st = yield from comm.probe(source=0, tag=ANY_TAG)
        assert comm.iprobe(source=0, tag=9)
        buf = yield from comm.recv(np.empty(st.count, np.int16), source=st.source, tag=st.tag)
        return st.tag, st.count, buf.tolist()

    assert run_program(make_world(), program)[1] == (9, 6, [0, 1, 2, 3, 4, 5])


def test_waitany_waitall_and_test():
    def program(comm):
        if comm.rank == 0:
            yield from comm.compute(5e-6)
            yield from comm.send(np.array([1]), dest=1, tag=1)
            yield from comm.compute(5e-6)
            yield from comm.send(np.array([0]), dest=1, tag=0)
            return None
        reqs = [comm.irecv(source=0, tag=0), comm.irecv(source=0, tag=1)]
        assert comm.test(reqs[0]) == (False, None)
        index, first = yield from comm.waitany(reqs)
        values = yield from comm.waitall(reqs)
        return index, int(first[0]), [int(v[0]) for v in values]

    assert run_program(make_world(), program)[1] == (1, 1, [0, 1])


# ---------------------------------------------------------------------- errors


def test_truncation_names_both_ranks_and_sizes():
    def program(comm):
        if comm.rank == 0:
            yield from comm.send(np.zeros(10, np.int32), dest=1, tag=4)
        else:
            yield from comm.recv(np.zeros(5, np.int32), source=0, tag=4)

    with pytest.raises(TruncationError, match=r"rank 1 posted recv\(source=0, tag=4\) with room for 20 B, but rank 0 sent 40 B"):
        run_program(make_world(), program)


def test_invalid_rank_and_tag():
    def bad_rank(comm):
        yield from comm.send(np.zeros(1), dest=2)

    def bad_tag(comm):
        yield from comm.recv(source=0, tag=-5)

    with pytest.raises(InvalidRankError, match=r"rank 0: send\(dest=2\): invalid rank for a communicator of size 2 \(valid: 0..1\)"):
        run_program(make_world(), bad_rank)
    with pytest.raises(InvalidTagError, match=r"recv\(source=0, tag=-5\): tags must be in 0..536870911 \(MPI_TAG_UB\) or ANY_TAG"):
        run_program(make_world(), bad_tag)


def test_messages_never_received_are_reported():
    def program(comm):
        if comm.rank == 0:
            yield from comm.send(np.zeros(3, np.int8), dest=1, tag=8)

    world = make_world()
    run_program(world, program)
    assert world.unmatched == ["rank 1 never received the message from rank 0 to rank 1 (tag 8, 3 B, eager)"]


# ---------------------------------------------------------------------- one code path


def test_data_and_size_only_payloads_give_identical_records():
    def program(comm, size_only):
        p, r = comm.size, comm.rank
        for n in (10, 5000, 300_000):
            buf = SizePayload(n, np.float32) if size_only else np.ones(n, np.float32)
            got = yield from comm.sendrecv(buf, dest=(r + 1) % p, source=(r - 1) % p)
            assert got.nbytes == 4 * n

    records = []
    for size_only in (False, True):
        world = make_world(4, eager_limit_inter=8192)
        run_program(world, program, size_only)
        records.append(world.tracer.messages)
    assert records[0] == records[1]
    assert len(records[0]) == 12


def _truncating(completion, receive_first):
    """Rank 1 receives 4 doubles into room for 2, by *completion*; the message arrives before or after."""
    caught = []

    def program(comm):
        if comm.rank == 0:
            if receive_first:
                yield comm.env.timeout(1e-3)
            yield from comm.send(np.arange(4.0), dest=1, tag=2)
        else:
            if not receive_first:
                yield comm.env.timeout(1e-3)  # the eager message is already waiting
            room = np.zeros(2)
            try:
                if completion == "recv":
                    yield from comm.recv(room, source=0, tag=2)
                elif completion == "test":
                    req = comm.irecv(room, source=0, tag=2)
                    while not comm.test(req)[0]:
                        yield comm.env.timeout(1e-4)
                else:
                    req = comm.irecv(room, source=0, tag=2)
                    if completion == "wait":
                        yield from comm.wait(req)
                    elif completion == "waitall":
                        yield from comm.waitall([req])
                    else:
                        yield from comm.waitany([req])
            except TruncationError as err:
                caught.append(str(err))

    run_program(make_world(), program)
    return caught


@pytest.mark.parametrize("receive_first", [True, False], ids=["receive-first", "message-first"])
@pytest.mark.parametrize("completion", ["recv", "wait", "waitall", "waitany", "test"])
def test_truncation_raises_in_every_completion_call_in_either_order(completion, receive_first):
    """MPI_ERR_TRUNCATE is an error whichever came first; it is never handed back as the received data."""
    caught = _truncating(completion, receive_first)
    assert len(caught) == 1 and "with room for 16 B, but rank 0 sent 32 B" in caught[0]


def test_uppercase_receives_fill_the_callers_array_as_mpi4py_does():
    """Recv/Irecv/Sendrecv write into the array passed in; lowercase recv returns a new one."""
    seen = {}

    def program(comm):
        peer = 1 - comm.rank
        if comm.rank == 0:
            yield from comm.Send(np.arange(4.0), dest=1, tag=1)
            yield from comm.send(np.arange(4.0) * 10, dest=1, tag=2)
            yield from comm.Send(np.arange(3.0), dest=1, tag=3)
        else:
            buf = np.zeros(4)
            assert (yield from comm.Recv(buf, source=0, tag=1)) is None
            seen["Recv"] = buf.copy()
            other = np.zeros(4)
            got = yield from comm.recv(other, source=0, tag=2)
            seen["recv"], seen["recv left buf"] = got, other.copy()
            status = Status()
            part = np.full(4, -1.0)
            req = comm.Irecv(part, source=0, tag=3, status=status)
            yield from comm.wait(req)
            seen["Irecv"], seen["count"] = part.copy(), (status.Get_count(), status.Get_count(np.float64), status.count)
        into = np.zeros(2)
        yield from comm.Sendrecv(np.full(2, comm.rank + 0.5), dest=peer, recvbuf=into, source=peer)
        seen[f"Sendrecv {comm.rank}"] = into.copy()

    run_program(make_world(), program)
    np.testing.assert_array_equal(seen["Recv"], [0, 1, 2, 3])
    np.testing.assert_array_equal(seen["recv"], [0, 10, 20, 30])
    np.testing.assert_array_equal(seen["recv left buf"], [0, 0, 0, 0])
    np.testing.assert_array_equal(seen["Irecv"], [0, 1, 2, -1])
    assert seen["count"] == (24, 3, 3)  # mpi4py: Get_count() in bytes, Get_count(MPI.DOUBLE) in elements
    np.testing.assert_array_equal(seen["Sendrecv 0"], [1.5, 1.5])
    np.testing.assert_array_equal(seen["Sendrecv 1"], [0.5, 0.5])


def test_recv_into_a_short_array_is_a_truncation():
    def program(comm):
        if comm.rank == 0:
            yield from comm.Send(np.arange(4.0), dest=1)
        else:
            yield from comm.Recv(np.zeros(2), source=0)

    with pytest.raises(TruncationError):
        run_program(make_world(), program)


def test_start_runs_a_blocking_call_concurrently_with_compute():
    """An allreduce started with comm.start overlaps a compute span: the rank waits only for what is left."""
    import mpisim.collectives  # noqa: F401  (registers the collective runner)

    ends = {}

    def program(comm, overlap):
        sync = comm.allreduce(SizePayload(1_000_000, np.float32), algorithm="ring")
        if overlap:
            task = comm.start(sync)
            yield from comm.compute(1e-3)
            yield task
        else:
            yield from sync
            yield from comm.compute(1e-3)
        ends[overlap] = comm.now

    for overlap in (False, True):
        run_program(make_world(alpha=1e-6, bandwidth=1e9), lambda comm, o=overlap: program(comm, o))
    sync_time = ends[False] - 1e-3
    assert sync_time > 1e-3  # 2 x 4 MB / 1 GB/s x 1/2: longer than the compute
    assert ends[True] == pytest.approx(sync_time, rel=1e-9)  # the compute hides entirely under the sync


def test_status_get_count_counts_bytes_unless_given_a_datatype_as_in_mpi4py():
    status = Status()
    status.nbytes, status.count = 20, 5
    assert status.Get_count() == 20
    assert status.Get_count(np.int32) == 5
    assert status.Get_count(np.float64) == UNDEFINED  # 20 B is not a whole number of float64s
