"""NCCL's in-switch (NVLS) allreduce: the switch reduces and multicasts; across nodes a tree per rail."""

from __future__ import annotations

from collections.abc import Sequence

from mpisim.collectives.allreduce import tree_allreduce
from mpisim.collectives.fluid import validated
from mpisim.collectives.fluid.nccl_ring import fluid
from mpisim.collectives.fluid.tree import Tree, fluid_trees
from mpisim.collectives.nccl.protocols import protocols
from mpisim.collectives.nccl.topology import nvls_groups, rail_trees
from mpisim.collectives.nccl.tuner import Choice, launch, planner
from mpisim.collectives.registry import algorithm
from mpisim.collectives.trees import NCCL_STEPS
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.ops import Op
from mpisim.mpi.payload import Payload


def _rail_trees_of(comm: Comm, buf: Payload, groups: Sequence[Sequence[int]]) -> list[Tree]:
    """The trees of an ``nvls`` call across nodes: two per rail j, each over half of block j."""
    simple = protocols(comm.world.topology.spec)["Simple"].wire
    trees = []
    for j, block in enumerate(buf.split(len(groups[0]))):
        links = rail_trees(groups, j, comm.size)
        trees += [Tree.over(links[t], simple, half, j) for t, half in enumerate(block.split(2))]
    return trees


@algorithm("allreduce", "nvls", requires={"commutative", "in_switch_reduction"},
           reference="NCCL 2.17+ NVLS (NVLink SHARP: multimem.ld_reduce / multimem.st); NVIDIA NVSwitch gen 3",
           plan=planner("nvls", "allreduce"))
def nvls_allreduce(comm: Comm, buf: Payload, op: Op, choice: Choice) -> Proc[Payload]:
    """In-switch (NVLS) allreduce: blocks reduced on their way through the switch, results multicast.

    Rank r sends block j of its vector to rank j, for every j != r, and adds the p-1 blocks it
    receives into its own block r; then it sends the reduced block r to every rank. On an
    NVSwitch with in_switch_reduction these messages ride the NVLS protocol, which charges each
    GPU port the n(p+1)/p bytes the switch's reduction and multicast leave on it; elsewhere
    they are plain Simple-protocol messages (the module docstring says why). A scenario naming
    ``nvls`` on a topology without in_switch_reduction is refused before it runs (the
    ``in_switch_reduction`` requirement, :meth:`~mpisim.collectives.registry.Algorithm.why_not_on`).

    Cost: base + 2(h + α + (p-1)(n/p)β/e) + ((p-1)/p)nγ on a switch whose ports the p-1 blocks
    share (see predict_nvls). At ``fidelity: collective`` with size-only data the rail trees
    across nodes run as one flow per edge (:mod:`~mpisim.collectives.fluid.tree`); the in-node
    exchanges, 2(q-1) messages a rank, stay messages.
    """
    p = comm.size
    if p == 1:
        return buf
    yield from launch(comm, choice)
    wired = comm.with_wire(choice.protocol.wire)
    groups = nvls_groups(comm) or [list(range(p))]
    members = next(group for group in groups if comm.rank in group)
    j = members.index(comm.rank)
    blocks = buf.split(len(members))
    peers = [(i, r) for i, r in enumerate(members) if r != comm.rank]
    # Reduce-scatter through the switch: block i of every rank of the node goes to its rank i.
    sends = [wired.isend(blocks[i], dest=r, tag=0) for i, r in peers]
    incoming = yield from wired.waitall([wired.irecv(source=r, tag=0) for _, r in peers])
    mine = blocks[j]
    for part in incoming:
        mine = yield from comm.reduce_local(op, part, mine)
    yield from wired.waitall(sends)
    if len(groups) > 1 and comm.world.fidelity == "collective" and fluid(comm, buf) and (
            not comm.world.validated_only or validated.rail_trees(comm, buf.nbytes)):
        # At collective fidelity the rail trees run as flows (the in-node exchanges stay messages).
        yield from fluid_trees(comm, lambda: _rail_trees_of(comm, buf, groups), ("nvls", buf.count, buf.dtype.str))
    elif len(groups) > 1:
        # Between nodes: local rank j of every node allreduces block j over rail j (NVLS + tree).
        simple = comm.with_wire(protocols(comm.world.topology.spec)["Simple"].wire, shared=True)
        trees = [tree[comm.rank] for tree in rail_trees(groups, j, p)]
        halves = mine.split(2)
        streams = [comm.env.process(tree_allreduce(simple, halves[t], op, *trees[t], t, NCCL_STEPS)) for t in (0, 1)]
        yield comm.env.all_of(streams)
        mine = type(buf).concat([stream.value for stream in streams])
    # Multicast: the reduced block j reaches every rank of the node.
    sends = [wired.isend(mine, dest=r, tag=1) for _, r in peers]
    received = yield from wired.waitall([wired.irecv(source=r, tag=1) for _, r in peers])
    yield from wired.waitall(sends)
    for (i, _), block in zip(peers, received, strict=True):
        blocks[i] = block
    blocks[j] = mine
    return type(buf).concat(blocks)
