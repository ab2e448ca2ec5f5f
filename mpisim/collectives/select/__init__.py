"""``auto``: choosing an algorithm for a call, by one of two documented rule sets.

``mpich``
    The decision rules of MPICH's default tuning (``maint/tuning/coll/mpir/generic.json``;
    thresholds in ../shared COSTS.md section 2): by message size, rank count (power of two
    or not) and op commutativity. E.g. allreduce: up to 8 B recursive doubling; otherwise
    Rabenseifner when the op is built in and there are at least as many elements as the
    largest power of two <= p, else recursive doubling.

``model``
    NCCL-style: evaluate every applicable algorithm's closed-form cost with this
    communicator's measured alpha (worst path latency plus per-message overheads), beta
    (slowest path) and gamma, and take the cheapest; ties go to an algorithm whose formula is
    exact on this many ranks, then to the name that sorts first.

``nccl``
    For GPU collectives, as NCCL's tuner chooses: an allreduce runs the (algorithm, protocol)
    with the least predicted time among ``nccl_ring``, ``nccl_tree`` and, where the NVSwitch
    reduces in the switch, ``nvls`` (:func:`mpisim.collectives.nccl.tuner.best`); the algorithm
    then picks the same protocol itself. Allgather, reduce-scatter and broadcast run
    ``nccl_ring``, alltoall ``nccl_p2p`` (grouped send/recv, as NCCL has no other); the
    other collectives follow the ``mpich`` rules.

One module per rule set: :mod:`.mpich`, :mod:`.model`, :mod:`.nccl`. Whatever is chosen is
recorded in the call's CollectiveRecord.
"""


from __future__ import annotations

from mpisim.collectives import registry
from mpisim.collectives.select import model, mpich, nccl
from mpisim.collectives.select.model import network_parameters
from mpisim.collectives.select.mpich import MPICH_RULES
from mpisim.mpi.comm import Comm
from mpisim.mpi.ops import Op

__all__ = ["MPICH_RULES", "RULE_SETS", "choose", "network_parameters"]

RULE_SETS = ("mpich", "model", "nccl")


def choose(comm: Comm, collective: str, nbytes: int, op: Op, rule_set: str = "mpich", *,
           itemsize: int = 4) -> registry.Algorithm:
    """Return the algorithm that ``auto`` picks for this call under *rule_set*.

    *itemsize* is the bytes per element of the call's datatype (rules that count elements use it).
    """
    p = comm.size
    spec = comm.world.topology.spec
    candidates = [a for a in registry.available(collective) if a.allows(p, op.commutative) and a.runs_on(spec)]
    if not candidates:
        raise registry.UnknownAlgorithm(f"no registered {collective} algorithm can run on {p} ranks with op {op.name}")
    if rule_set == "model":
        return model.choose(comm, nbytes, candidates)
    if rule_set == "nccl":
        name = nccl.choose(comm, collective, nbytes, op, itemsize)
        if name is not None:
            return registry.get(collective, name)
    name = mpich.choose(collective, p, nbytes, op, itemsize)
    by_name = {a.name: a for a in candidates}
    if name in by_name:
        return by_name[name]
    return candidates[0]
