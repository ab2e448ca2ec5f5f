"""mpisim's own event loop (engine.sim.run_until_idle) processes exactly what SimPy's ``env.run()`` does.

run_until_idle inlines SimPy's ``step()`` and takes events due now from two lanes instead of
the heap (engine.sim.Environment). Both are optimisations that must change nothing: the same
events, in the same order, so the same results. Here every run is made twice, once with the
custom loop and once with plain ``env.run()`` (which calls ``Environment.step`` once per
event), and everything observable is compared: each rank's steps in the order they happened
(one shared log), the message records in the order they were recorded, the number of events
processed, and for shipped scenarios their whole results.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import simpy

import mpisim.mpi.world as world_module
from mpisim.engine.sim import run_until_idle
from mpisim.mpi import ANY_SOURCE, SizePayload
from mpisim.network.topology import FabricSpec
from mpisim.scenario import load_file, run_scenario
from tests.conftest import make_world

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def plain_run(env: simpy.Environment) -> int:
    """``env.run()``, counting the events it processes (one ``step()`` each)."""
    count = 0
    step = env.step

    def counted_step() -> None:
        nonlocal count
        step()  # raises EmptySchedule, which ends env.run(), when nothing is left
        count += 1

    env.step = counted_step  # type: ignore[method-assign]
    env.run()
    return count


def program(comm, log: list) -> Any:
    """Eager and rendezvous messages, wildcards, non-blocking pairs and collectives, each step logged."""
    rank, size = comm.rank, comm.size
    right, left = (rank + 1) % size, (rank - 1) % size
    for nbytes in (8, 100_000):
        req = comm.isend(np.full(nbytes // 8, rank, np.float64), dest=right, tag=1)
        data = yield from comm.recv(source=left, tag=1)
        yield from comm.wait(req)
        log.append((rank, comm.now, "ring", nbytes, float(data[0])))
    if rank == 0:
        for _ in range(size - 1):
            data = yield from comm.recv(source=ANY_SOURCE, tag=2)
            log.append((rank, comm.now, "any", float(data[0])))
    else:
        yield from comm.compute(rank * 1e-6)
        yield from comm.send(np.full(4, rank, np.float64), dest=0, tag=2)
    total = yield from comm.allreduce(np.full(1000, rank, np.float64))
    log.append((rank, comm.now, "allreduce", float(total[0])))
    for algorithm in ("ring", "recursive_doubling"):
        yield from comm.allreduce(SizePayload(1 << 20), algorithm=algorithm)
        log.append((rank, comm.now, algorithm))
    yield from comm.bcast(SizePayload(300_000), root=1)
    yield from comm.barrier()
    log.append((rank, comm.now, "done"))


def run_once(model: str, fidelity: str) -> tuple[list, list, int]:
    world = make_world(8, model=model, ranks_per_node=2, intra=FabricSpec("shm", 20e9, 0.2e-6),
                       eager_limit_inter=4096, eager_limit_intra=4096)
    world.fidelity = fidelity
    world.tracer.record_messages = True
    log: list = []
    world.launch(program, log)
    world.run()
    return log, list(world.tracer.messages), world.events_processed


@pytest.mark.parametrize("model", ["fairshare", "analytic"])
@pytest.mark.parametrize("fidelity", ["message", "collective"])
def test_custom_loop_and_env_run_process_the_same_events_in_the_same_order(model, fidelity, monkeypatch):
    custom = run_once(model, fidelity)
    monkeypatch.setattr(world_module, "run_until_idle", plain_run)
    plain = run_once(model, fidelity)
    assert custom[0] == plain[0]  # every rank's steps, interleaved as they happened
    assert custom[1] == plain[1]  # message records, in recording order
    assert custom[2] == plain[2] > 1000  # events processed
    assert len(custom[0]) == 8 * 6 + 7  # six steps per rank, and rank 0 hears from seven


@pytest.mark.parametrize("name", ["eager-vs-rendezvous", "head-to-head-deadlock", "osu-ib-hdr", "300m-ring"])
def test_shipped_scenarios_give_the_same_results_under_env_run(name, monkeypatch):
    def once() -> tuple[dict, list[int]]:
        worlds: list = []
        result = run_scenario(load_file(SCENARIOS / f"{name}.yaml"), worlds=worlds).to_dict()
        result.pop("meta")  # the wall time
        return result, [w.events_processed for w in worlds]

    custom = once()
    monkeypatch.setattr(world_module, "run_until_idle", plain_run)
    plain = once()
    assert custom == plain
    assert all(n > 0 for n in custom[1])


def test_the_counting_loop_counts_what_run_until_idle_counts():
    """The reference loop above is itself right: on a bare SimPy workload both counts agree."""
    def make() -> simpy.Environment:
        from mpisim.engine.sim import Environment

        env = Environment()

        def proc(k: int):
            for i in range(5):
                yield env.timeout(k * 0.5 + i)

        for k in range(4):
            env.process(proc(k))
        return env

    assert run_until_idle(make()) == plain_run(make()) == 4 * (1 + 5 + 1)


@pytest.mark.parametrize("model", ["fairshare", "analytic"])
def test_a_request_counted_when_it_succeeds_changes_nothing_but_the_event_count(model, monkeypatch):
    """engine.sim.succeed_now counts a request that only an AllDone waits for, not for it alone,
    at once instead of through the queue: the same steps, in the same order, with fewer events
    (the sends and receives of the ring allreduce's sendrecv steps)."""
    import mpisim.mpi.protocols as protocols_module

    shortcut = run_once(model, "message")

    def through_the_queue(_env: simpy.Environment, event: simpy.Event, value: Any) -> None:
        event.succeed(value)

    monkeypatch.setattr(world_module, "succeed_now", through_the_queue)
    monkeypatch.setattr(protocols_module, "succeed_now", through_the_queue)
    queued = run_once(model, "message")
    assert shortcut[0] == queued[0]  # every rank's steps, interleaved as they happened
    assert shortcut[1] == queued[1]  # message records, in recording order
    assert shortcut[2] < queued[2]  # fewer events processed


@pytest.mark.parametrize("model", ["fairshare", "analytic"])
def test_calls_sharing_a_queue_entry_change_nothing_but_the_event_count(model, monkeypatch):
    """engine.sim.call_later and call_now give calls for one instant, made one after another, one
    queue entry (a send's and a receive's CPU overhead, the sender's step on a clear-to-send):
    the same steps, records and results as one entry per call, with fewer events. The MPI
    overheads are on, so the sends' and receives' timed steps of ranks in step meet."""
    import mpisim.engine.sim as sim_module
    import mpisim.mpi.protocols as protocols_module
    from mpisim.engine.events import Call

    def once() -> tuple:
        world = make_world(8, model=model, ranks_per_node=2, intra=FabricSpec("shm", 20e9, 0.2e-6),
                           eager_limit_inter=4096, eager_limit_intra=4096, send_overhead=1e-7, recv_overhead=1e-7)
        world.tracer.record_messages = True
        log: list = []
        world.launch(program, log)
        world.run()
        return log, list(world.tracer.messages), world.env.now, world.events_processed

    shared = once()

    def own_entry_later(env, fn, arg, delay):
        Call(env, fn, arg, delay)

    def own_entry_now(env, fn, arg):
        Call(env, fn, arg)

    for module in (sim_module, protocols_module, world_module):
        if hasattr(module, "call_later"):
            monkeypatch.setattr(module, "call_later", own_entry_later)
        if hasattr(module, "call_now"):
            monkeypatch.setattr(module, "call_now", own_entry_now)
    own = once()
    assert shared[:3] == own[:3]
    assert len(shared[0]) == 8 * 6 + 7
    assert shared[3] < own[3]
