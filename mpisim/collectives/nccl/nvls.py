"""NCCL's in-switch (NVLS) allreduces: the switch reduces and multicasts; across nodes a tree per rail or the fabric.

``nvls`` is NCCL's NVLS: inside a node the NVSwitch reduces each block and multicasts the
result. Across nodes NCCL runs it only where the network's switches reduce too (SHARP,
``inter.in_network_reduction``: NVLS + CollNet), each GPU's reduced block going up to the
fabric once and coming back reduced once. ``nvls_tree`` is NCCL's NVLSTree, what its tuner
offers across nodes otherwise: the same in-node phases with a double binary tree per head
(one GPU per NIC) between nodes. Across nodes both run as NCCL runs them, the in-switch
reduction streaming into the network and the network into the multicast
(:mod:`~mpisim.collectives.nccl.nvlstree`).
"""

from __future__ import annotations

from mpisim.collectives.nccl.nvlstree import stream, switch_reduce_scatter
from mpisim.collectives.nccl.topology import in_network_reduction, nvls_groups
from mpisim.collectives.nccl.tuner import Choice, launch, planner, switch_floor
from mpisim.collectives.registry import algorithm
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.ops import Op
from mpisim.mpi.payload import Payload


@algorithm("allreduce", "nvls", requires={"commutative", "in_switch_reduction"},
           reference="NCCL 2.17+ NVLS (NVLink SHARP: multimem.ld_reduce / multimem.st); NVIDIA NVSwitch gen 3",
           plan=planner("nvls", "allreduce"))
def nvls_allreduce(comm: Comm, buf: Payload, op: Op, choice: Choice) -> Proc[Payload]:
    """In-switch (NVLS) allreduce; across nodes the network's switches reduce too (SHARP), or as nvls_tree.

    Inside a node as :func:`nvls_tree_allreduce`. Across nodes with ``in_network_reduction``
    (NVLS + CollNet) each head's part crosses its NIC once up and once down, streamed
    (:func:`~mpisim.collectives.nccl.nvlstree.stream`); without it this is NVLSTree, which
    NCCL's tuner runs there instead (the ``nccl`` selector and ``auto`` then name it ``nvls_tree``).
    """
    return (yield from _nvls(comm, buf, op, choice, in_network_reduction(comm)))


@algorithm("allreduce", "nvls_tree", requires={"commutative", "in_switch_reduction"},
           reference="NCCL 2.18+ NVLSTree (NVLS in the node, a tree per NIC between nodes); src/device/all_reduce.h",
           plan=planner("nvls_tree", "allreduce"))
def nvls_tree_allreduce(comm: Comm, buf: Payload, op: Op, choice: Choice) -> Proc[Payload]:
    """NCCL's NVLSTree allreduce: blocks reduced in each node's switch, a tree per NIC between nodes.

    Across nodes: :func:`~mpisim.collectives.nccl.nvlstree.stream`. Inside a node (where NCCL
    runs NVLS instead): blocks reduced on their way through the switch, results multicast.

    Rank r sends block j of its vector to rank j, for every j != r, and adds the p-1 blocks it
    receives into its own block r; then it sends the reduced block r to every rank. On an
    NVSwitch with in_switch_reduction these messages ride the NVLS protocol, which charges each
    GPU port the n(p+1)/p bytes the switch's reduction and multicast leave on it; elsewhere
    they are plain Simple-protocol messages (the module docstring says why). A scenario naming
    ``nvls`` on a topology without in_switch_reduction is refused before it runs (the
    ``in_switch_reduction`` requirement, :meth:`~mpisim.collectives.registry.Algorithm.why_not_on`).

    Cost: base + 2(h + α + (p-1)(n/p)β/e) + ((p-1)/p)nγ on a switch whose ports the p-1 blocks
    share (see predict_nvls). At ``fidelity: collective`` with size-only data the heads' trees
    across nodes run as one flow per edge (:mod:`~mpisim.collectives.fluid.tree`); the in-node
    exchanges, 2(q-1) messages a rank, stay messages.
    """
    return (yield from _nvls(comm, buf, op, choice, False))


def _nvls(comm: Comm, buf: Payload, op: Op, choice: Choice, fabric_reduces: bool) -> Proc[Payload]:
    p = comm.size
    if p == 1:
        return buf
    groups = nvls_groups(comm) or [list(range(p))]
    if len(groups) > 1:  # across nodes: the in-switch stages streaming into the heads' trees or the fabric
        return (yield from stream(comm, buf, op, choice, groups, fabric_reduces))
    yield from launch(comm, choice)
    t0 = comm.env.now
    wired = comm.with_wire(choice.protocol.wire)
    members = next(group for group in groups if comm.rank in group)
    j = members.index(comm.rank)
    blocks = buf.split(len(members))
    peers = [(i, r) for i, r in enumerate(members) if r != comm.rank]
    mine = yield from switch_reduce_scatter(comm, wired, op, blocks, peers, j)
    # Multicast: the reduced block j reaches every rank of the node.
    sends = [wired.isend(mine, dest=r, tag=1) for _, r in peers]
    received = yield from wired.waitall([wired.irecv(source=r, tag=1) for _, r in peers])
    yield from wired.waitall(sends)
    for (i, _), block in zip(peers, received, strict=True):
        blocks[i] = block
    blocks[j] = mine
    # The switch chips' adds stream with the ports' work: the call ends no sooner than they do.
    alu_end = t0 + switch_floor(comm, choice.protocol, buf.nbytes)
    if alu_end > comm.env.now:
        yield comm.env.timeout(alu_end - comm.env.now)
    return type(buf).concat(blocks)
