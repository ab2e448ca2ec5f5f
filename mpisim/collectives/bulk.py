"""Collective calls advanced as one batch: every rank of a call entering at one instant, no process per rank.

At ``fidelity: collective`` a twin times a call once, when its last rank has joined
(:mod:`mpisim.collectives.calls`), but each rank still runs as a SimPy process that enters the
call, waits on its own event and is woken when its call returns: on a million ranks that is a
million processes, each holding its chain of generator frames, and half a dozen events each,
for a call whose timing is one vectorised computation.

When all ranks enter the same call at the same instant -- a collective workload's
synchronised entry -- nothing in that chain is needed: :func:`bulk_driver` stands in for the
p rank programs with **one** process. For each repetition it numbers the call on every rank
(as :meth:`~mpisim.mpi.comm.Comm.next_collective` does), starts the twin's batch form
(:attr:`~mpisim.collectives.registry.FluidTwin.bulk`: entry times as one array, one
completion computation for the group, flows posted as the per-rank path posts them), and is
called back once per rank at that rank's exit, where it writes the rank's record and span. The
callbacks come in the order the per-rank path would wake the processes, and the next
repetition starts after the last exit by the same number of same-instant scheduling hops as
the ranks' synchronised re-entry, so results, records and their order are those of the
per-rank path, bit for bit (tests/collectives/test_bulk.py).

Where a batch cannot stand for the ranks -- real data, message fidelity, a twin without a
batch form, ranks entering at instants of their own (programs, training) -- the per-rank path
runs: :func:`bulk_driver` returns None and the caller launches its rank programs.
"""

from __future__ import annotations

from typing import Any

from mpisim.collectives import dispatch
from mpisim.engine.events import Call
from mpisim.engine.records import CollectiveRecord
from mpisim.engine.sim import Proc
from mpisim.mpi.ops import get_op
from mpisim.mpi.payload import Payload

__all__ = ["bulk_driver"]


def bulk_driver(world: Any, collective: str, algorithm: str | None, buf: Payload | None, op: str, root: int,
                iterations: int, spans: list[list[tuple[float, float]]]) -> Proc[None] | None:
    """The one process that runs *iterations* calls of *collective* on every rank of *world*'s
    ``COMM_WORLD``, each entered by all ranks at one instant; None where the batch does not apply.

    ``spans[rank]`` gets each call's (entry, exit) as a rank program would append it. Launch
    the driver with :meth:`~mpisim.mpi.world.World.launch_batch`.
    """
    comm = world.comm_world(0)
    nbytes = 0 if buf is None else buf.nbytes
    itemsize = 1 if buf is None else buf.dtype.itemsize
    prepared = dispatch.prepare(comm, collective, algorithm, nbytes, get_op(op), root, itemsize)
    twin = prepared.algorithm.fluid
    if twin is None or twin.bulk is None or prepared.fidelity != "collective" or not twin.applies(comm.coll, buf):
        return None
    return _drive(world, collective, prepared, twin.bulk, buf, iterations, spans)


def _drive(world: Any, collective: str, prepared: dispatch.PreparedCall, bulk: Any, buf: Payload | None,
           iterations: int, spans: list[list[tuple[float, float]]]) -> Proc[None]:
    p = world.size
    comms = [world.comm_world(r) for r in range(p)]
    choice = prepared.choice
    library = (None, None, None) if choice is None else (choice.protocol.name, choice.channels, choice.chunk_bytes)
    for _ in range(iterations):
        numbers = [c.next_collective(prepared.signature) for c in comms]
        call = _Call(world, p, spans, numbers,
                     (collective, prepared.algorithm.name, prepared.size, library))
        bulk(comms[0].coll, buf, call.leave)
        yield call.done
    for state in world.states:
        state.finished = True


class _Call:
    """One batched call in progress: its entry instant, and the ranks that have left it."""

    def __init__(self, world: Any, p: int, spans: list[list[tuple[float, float]]], numbers: list[int],
                 record: tuple) -> None:
        self.env, self.tracer, self.p, self.spans, self.numbers = world.env, world.tracer, p, spans, numbers
        self.collective, self.name, self.size, self.library = record
        self.t_enter = world.env.now
        self.left = 0
        self.done = world.env.event()

    def leave(self, rank: int) -> None:
        """Rank *rank*'s call returns now: its record and span, as its rank program would write them."""
        now = self.env.now
        self.tracer.collective(CollectiveRecord(self.collective, self.name, rank, self.size, self.t_enter, now,
                                                self.numbers[rank], *self.library))
        self.spans[rank].append((self.t_enter, now))
        self.left += 1
        if self.left == self.p:
            # The per-rank path re-enters two same-instant hops after its last exit (the
            # rank's wake-up, then the synchronised entry's release): so does the batch.
            Call(self.env, _succeed, self.done)


def _succeed(event: Any) -> None:
    event.succeed()
