"""NCCL's in-switch (NVLS) allreduces: the switch reduces and multicasts; across nodes a tree per rail or the fabric.

``nvls`` is NCCL's NVLS: inside a node the NVSwitch reduces each block and multicasts the
result. Across nodes NCCL runs it only where the network's switches reduce too (SHARP,
``inter.in_network_reduction``: NVLS + CollNet), each GPU's reduced block going up to the
fabric once and coming back reduced once. ``nvls_tree`` is NCCL's NVLSTree, what its tuner
offers across nodes otherwise: the same in-node phases with a double binary tree per rail
between them (local rank j of every node over NIC j).
"""

from __future__ import annotations

from collections.abc import Sequence

from mpisim.collectives.nccl.nvlstree import stream
from mpisim.collectives.nccl.protocols import protocols
from mpisim.collectives.nccl.topology import in_network_reduction, nvls_groups
from mpisim.collectives.nccl.tuner import Choice, launch, planner
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
    (NVLS + CollNet) each rank's reduced block crosses its NIC once up and once down, streamed
    (:func:`_switch_allreduce`); without it this is NVLSTree, which NCCL's tuner runs there
    instead (the ``nccl`` selector and ``auto`` then name it ``nvls_tree``).
    """
    return (yield from _nvls(comm, buf, op, choice, in_network_reduction(comm)))


@algorithm("allreduce", "nvls_tree", requires={"commutative", "in_switch_reduction"},
           reference="NCCL 2.18+ NVLSTree (NVLS in the node, a tree per NIC between nodes); src/device/all_reduce.h",
           plan=planner("nvls_tree", "allreduce"))
def nvls_tree_allreduce(comm: Comm, buf: Payload, op: Op, choice: Choice) -> Proc[Payload]:
    """NCCL's NVLSTree allreduce: blocks reduced in each node's switch, a tree per NIC between nodes.

    Inside a node: blocks reduced on their way through the switch, results multicast.

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
    return (yield from _nvls(comm, buf, op, choice, False))


def _nvls(comm: Comm, buf: Payload, op: Op, choice: Choice, fabric_reduces: bool) -> Proc[Payload]:
    p = comm.size
    if p == 1:
        return buf
    groups = nvls_groups(comm) or [list(range(p))]
    if len(groups) > 1 and not fabric_reduces:
        return (yield from stream(comm, buf, op, choice, groups))
    yield from launch(comm, choice)
    wired = comm.with_wire(choice.protocol.wire)
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
    if len(groups) > 1 and fabric_reduces:
        mine = yield from _switch_allreduce(comm, mine, op, groups, j)
    # Multicast: the reduced block j reaches every rank of the node.
    sends = [wired.isend(mine, dest=r, tag=1) for _, r in peers]
    received = yield from wired.waitall([wired.irecv(source=r, tag=1) for _, r in peers])
    yield from wired.waitall(sends)
    for (i, _), block in zip(peers, received, strict=True):
        blocks[i] = block
    blocks[j] = mine
    return type(buf).concat(blocks)


def _switch_allreduce(comm: Comm, mine: Payload, op: Op, groups: Sequence[Sequence[int]], j: int) -> Proc[Payload]:
    """Block j reduced by the network's switches (SHARP) with local rank j of every other node.

    Each NIC carries the block once up and the reduced block once down, streamed through the
    switches' aggregation tree: the load of one exchange with a rail neighbour, which is what
    runs here (node k sends to node k+1 and receives from node k-1 over rail j). The switches'
    sum needs every node's block: the result is ready when the last node's exchange is done,
    and is the contributions combined in node order (so every rank gets the same numbers).
    """
    m = len(groups)
    k = next(i for i, group in enumerate(groups) if comm.rank in group)
    simple = comm.with_wire(protocols(comm.world.topology.spec)["Simple"].wire, shared=True)
    yield from simple.sendrecv(mine, dest=groups[(k + 1) % m][j], sendtag=2, source=groups[(k - 1) % m][j], recvtag=2)
    # The switch: one aggregation per (call, rail), keyed by this rank's count of such calls.
    calls = comm.world.memo.table("nvls.collnet.calls")
    seq = calls.get((comm.context, comm.rank), 0)
    calls[(comm.context, comm.rank)] = seq + 1
    switch = comm.world.memo.table("nvls.collnet.switch")
    entry = switch.setdefault((comm.context, seq, j), {"parts": [None] * m, "left": m, "done": comm.env.event()})
    entry["parts"][k] = mine
    entry["left"] -= 1
    if entry["left"] == 0:
        total = entry["parts"][0]
        for part in entry["parts"][1:]:
            total = total.combine(part, op)
        entry["done"].succeed(total)
        del switch[(comm.context, seq, j)]
    return (yield entry["done"])
