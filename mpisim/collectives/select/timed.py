"""``auto`` timing its candidates: the simulation's own fastest, where running them is cheap.

NCCL's tuner picks the (algorithm, protocol) of least *predicted* time, and so does the
``nccl`` rule set (:func:`mpisim.collectives.nccl.tuner.best`). The predictions are closed forms
of the mechanisms the simulation runs, not the simulation itself: near a crossover they can
rank two algorithms the other way round from what the simulation then times, and ``auto``
would run the slower one -- and, one size further, the faster one again, so that a larger
message took less time than a smaller one.

Where it is cheap, ``auto`` therefore times each candidate alone on a scratch world of the
same cluster and settings (:attr:`~mpisim.mpi.world.World.scratch`), with each of its
protocols (the tuner's protocol choice is a prediction too), and runs the fastest, so
that the time it reports is the least of the candidates' times at every size, and, as each
candidate's time grows with the message, never falls as the message grows. Cheap means: the
call spans the whole world (a scratch world holds the same ranks), and either the world runs
collective fidelity everywhere (a twin times each candidate in a few events) or the call is
small on a small world (:data:`MESSAGE_PATH_BYTES`, :data:`MESSAGE_PATH_RANKS`). Elsewhere the
predictions decide, as in NCCL.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mpisim.collectives.nccl.tuner import FORCED_PROTOCOLS, protocol_names
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.ops import Op
from mpisim.mpi.payload import SizePayload

#: On the message path, calls up to this size ...
MESSAGE_PATH_BYTES = 64 * 2**20
#: ... on worlds up to this many ranks are timed.
MESSAGE_PATH_RANKS = 64


def cheap(comm: Comm, nbytes: int) -> bool:
    """True if ``auto`` may time this call's candidates on scratch worlds (see the module docstring)."""
    world = comm.world
    if world.scratch is None or comm.size != world.size or comm.size < 2:
        return False
    if world.fidelity == "collective" and not world.validated_only:
        return True
    return nbytes <= MESSAGE_PATH_BYTES and comm.size <= MESSAGE_PATH_RANKS


def time_alone(comm: Comm, name: str, protocol: str, nbytes: int, op: Op, itemsize: int) -> float:
    """Simulated time of one allreduce of *name* with *protocol* over *nbytes* (each rank's buffer), alone on a scratch world."""
    world = comm.world.scratch()  # type: ignore[misc]
    world.memo.table(FORCED_PROTOCOLS)[(comm.group, name, nbytes, "allreduce")] = protocol
    dtype = np.dtype({1: np.uint8, 2: np.float16, 8: np.float64}.get(itemsize, np.float32))
    count = nbytes // dtype.itemsize
    finish: list[float] = []

    def program(c: Comm) -> Proc[None]:
        yield from c.allreduce(SizePayload(count, dtype), op=op, algorithm=name)
        finish.append(c.now)

    world.launch(program)
    world.run()
    return max(finish)


def fastest(comm: Comm, names: Sequence[str], nbytes: int, op: Op, itemsize: int) -> str:
    """The allreduce candidate of least simulated time, over each one's protocols (ties to the first).

    Timed once per world and call shape; the winning protocol is fixed for the call
    (:data:`~mpisim.collectives.nccl.tuner.FORCED_PROTOCOLS`), so the call runs what was timed.
    """
    table = comm.world.memo.table("select.timed")
    key = (comm.group, tuple(names), nbytes, op.name, itemsize)
    name = table.get(key)
    if name is None:
        timed = [(time_alone(comm, n, proto, nbytes, op, itemsize), i, j, n, proto)
                 for i, n in enumerate(names) for j, proto in enumerate(protocol_names(comm, n))]
        *_, name, protocol = min(timed)
        table[key] = name
        comm.world.memo.table(FORCED_PROTOCOLS)[(comm.group, name, nbytes, "allreduce")] = protocol
    return name
