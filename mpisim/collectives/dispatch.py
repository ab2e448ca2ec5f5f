"""How a collective call runs: pick the algorithm, check the call, time it, record it.

``comm.allreduce(buf, op=SUM, algorithm="ring")`` ends up in :func:`run_collective`, which

1. resolves the algorithm: the call's ``algorithm=``, else the scenario's default for that
   collective, else ``auto`` (a rule set in :mod:`mpisim.collectives.select`); and for a GPU
   library's algorithm, the library's choice (NCCL's protocol, channels and chunk: the
   algorithm's registered ``plan``);
2. checks that every member made the same call (collective, root, count, op) -- MPI leaves a
   mismatch undefined; mpisim reports it, naming both ranks;
3. checks the algorithm's declared requirements (power-of-two ranks, commutative op);
4. runs the algorithm's generator on the communicator's collective context, handing it the
   library's choice (``choice=``) -- or, at ``fidelity: collective`` where the algorithm's
   registered twin applies (size-only data, ...), the twin, which times the call as a whole
   (:mod:`mpisim.collectives.fluid`), so algorithm bodies never branch on fidelity;
5. records a :class:`~mpisim.engine.records.CollectiveRecord` with the algorithm that ran and
   the library's choice (protocol, channels, chunk bytes).

Steps 1 and 2 read nothing of the calling rank: every rank of a call resolves the same
algorithm and writes the same signature. They are worked out once per call shape
(communicator, collective, requested algorithm, size, op, root, datatype size) and world, as
a :class:`PreparedCall`, and looked up by the other ranks and by later calls of that shape (a
training run's equal buckets) -- on 16384 ranks that is one resolution where there were
16384. The selector, the algorithm and a workload's row all read that one object, so they
agree by construction.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from mpisim.collectives import registry, select
from mpisim.collectives.calls import world_table
from mpisim.engine.records import CollectiveRecord
from mpisim.engine.sim import Proc
from mpisim.errors import InvalidRootError, MPIError
from mpisim.mpi.comm import Comm
from mpisim.mpi.ops import SUM, Op, get_op
from mpisim.mpi.payload import DataPayload, Payload, SizePayload

#: Collectives whose nccl-tests "size" is the whole gathered array (count per rank x ranks).
WHOLE_ARRAY = frozenset({"allgather", "gather"})
ROOTED = frozenset({"bcast", "reduce", "gather", "scatter"})
REDUCING = frozenset({"reduce", "allreduce", "reduce_scatter"})


class AlgorithmRequirementError(MPIError):
    """An algorithm was asked to run where its declared requirements do not hold."""


def size_of_call(collective: str, nbytes: int, p: int) -> int:
    """Return the nccl-tests size of a call whose per-rank buffer has *nbytes*."""
    return nbytes * p if collective in WHOLE_ARRAY else nbytes


def resolve(comm: Comm, collective: str, algorithm: str | None, nbytes: int, op: Op, *,
            itemsize: int = 4) -> registry.Algorithm:
    """Return the algorithm a call will run (resolving ``auto`` with the world's rule set).

    *itemsize* is the datatype's size in bytes: MPICH's rules count elements, not bytes.
    """
    name = algorithm or comm.world.algorithms.get(collective) or "auto"
    if name == "auto":
        return select.choose(comm, collective, nbytes, op, comm.world.selector, itemsize=itemsize)
    algo = registry.get(collective, name)
    problem = algo.why_not(comm.size, op.commutative)
    if problem:
        raise AlgorithmRequirementError(f"rank {comm.world_rank}: {problem}")
    return algo


@dataclass(frozen=True, slots=True)
class PreparedCall:
    """A call shape resolved once: what every rank of the call runs, and what its record says.

    ``choice`` is the GPU library's choice for the call (an NCCL-style algorithm's protocol,
    channels and chunk; :class:`mpisim.collectives.nccl.tuner.Choice`), ``None`` for MPI's
    algorithms and on one rank. ``op`` is kept so that its ``id`` in the memo's key stays its own.
    """

    algorithm: registry.Algorithm
    size: int
    signature: str
    op: Op
    choice: Any = None
    #: The world's fidelity for this call shape: ``collective`` where the world asks for it and,
    #: under ``fidelity: auto``, the algorithm's twin is validated for the call
    #: (:mod:`mpisim.collectives.fluid.validated`); ``message`` otherwise. Size-only data is
    #: still checked per call (real data always takes the message path).
    fidelity: str = "message"


#: Per world: the PreparedCall of each call shape (module docstring).
_PREPARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def prepare(comm: Comm, collective: str, algorithm: str | None, nbytes: int, op: Op, root: int = 0,
            itemsize: int = 4) -> PreparedCall:
    """Return the PreparedCall of a call whose per-rank buffer has *nbytes*: the same on every rank, so resolved once.

    The key holds what :func:`resolve` reads besides the communicator's ranks (its context
    names them): the world's default algorithm and rule set, in case a caller changes them
    between calls. A collective that takes no op runs with SUM's, and one without a root with 0,
    so that a caller that passes them anyway (a workload's row) meets the call's own entry.
    """
    op = op if collective in REDUCING else SUM
    root = root if collective in ROOTED else 0
    world = comm.world
    cache = world_table(_PREPARED, world)
    key = (comm.context, collective, algorithm, world.algorithms.get(collective), world.selector, nbytes,
           id(op), root, itemsize)
    prepared = cache.get(key)
    if prepared is None:
        size = size_of_call(collective, nbytes, comm.size)
        algo = resolve(comm, collective, algorithm, size, op, itemsize=itemsize)
        parts = [] if collective == "barrier" else [f"{nbytes} B"]
        parts += [f"root={root}"] if collective in ROOTED else []
        parts += [f"op={op.name}"] if collective in REDUCING else []
        signature = f"{collective}({', '.join([*parts, f'algorithm={algo.name}'])})"
        choice = algo.plan(comm, size) if algo.plan is not None and comm.size > 1 else None
        prepared = cache[key] = PreparedCall(algo, size, signature, op, choice, call_fidelity(comm, algo, size))
    return prepared


def call_fidelity(comm: Comm, algo: registry.Algorithm, size: int) -> str:
    """The fidelity a call of *algo* on *comm* runs at (see :attr:`PreparedCall.fidelity`)."""
    world = comm.world
    if world.fidelity != "collective":
        return "message"
    if world.validated_only and algo.fluid is not None and not algo.fluid.validated(comm, size):
        return "message"
    return "collective"


def _snapshot(buf: Any) -> Payload:
    """The caller's buffer as the payload the algorithm moves.

    A payload is the caller's promise that the data will not change under the call (the
    workloads' buffers, ``in_place`` buffers the algorithm owns). A plain array is copied: MPI
    lets a caller change its send buffer the moment a blocking collective returns, while the
    blocks it sent eagerly may still be on their way to ranks that have not finished -- a
    gather's leaf returns as soon as its block has left, and must not change what the root
    receives. A real MPI library copies eager data out of the buffer for the same reason.
    """
    if buf.__class__ is SizePayload or buf.__class__ is DataPayload or isinstance(buf, Payload):
        return buf
    return DataPayload(np.array(buf, copy=True))


def run_collective(comm: Comm, collective: str, algorithm: str | None, *, buf: Any = None,
                   op: Op | str = SUM, root: int = 0) -> Proc[Any]:
    """Run one collective call on *comm* (see the module docstring)."""
    op = get_op(op)
    payload: Payload | None = None if buf is None else _snapshot(buf)
    nbytes = payload.nbytes if payload is not None else 0
    if payload is None and collective != "barrier":
        raise MPIError(f"rank {comm.world_rank}: {collective} needs a buffer on every rank")
    if collective in ROOTED and not 0 <= root < comm.size:
        raise InvalidRootError(f"rank {comm.world_rank}: {collective}(root={root}) is not a rank of a communicator "
                               f"of size {comm.size}")
    itemsize = payload.dtype.itemsize if payload is not None else 1
    prepared = prepare(comm, collective, algorithm, nbytes, op, root, itemsize)
    algo, choice = prepared.algorithm, prepared.choice
    call = comm.next_collective(prepared.signature)
    state = comm.world.states[comm.world_rank]
    outer = state.collective
    if outer is None or outer[0] is not comm:  # one collective inside another on the same communicator (mpi4py's
        state.collective = (comm, call, prepared.signature)  # allreduce of objects) is reported as the outer one
    kwargs: dict[str, Any] = {}
    if collective != "barrier":
        kwargs["buf"] = payload
    if collective in REDUCING:
        kwargs["op"] = op
    if collective in ROOTED:
        kwargs["root"] = root
    if algo.plan is not None:
        kwargs["choice"] = choice
    t_enter = comm.now
    run = algo.func
    twin = algo.fluid
    if twin is not None and prepared.fidelity == "collective" and twin.applies(comm.coll, payload):
        run = twin.run
    result = yield from run(comm.coll, **kwargs)
    state.collective = outer
    library = (None, None, None) if choice is None else (choice.protocol.name, choice.channels, choice.chunk_bytes)
    comm.world.tracer.collective(CollectiveRecord(collective, algo.name, comm.world_rank, prepared.size, t_enter,
                                                  comm.now, call, *library))
    if result is not None and buf is not None and not isinstance(buf, Payload):
        return result.to_user()
    return result


Comm._collective_runner = run_collective
