"""NCCL's NVLSTree across nodes, as NCCL runs it: the in-switch reduction streaming into a tree per head.

**What NCCL runs** (src/device/all_reduce.h, ``RunWorkColl<..., NCCL_ALGO_NVLS_TREE, ...>``).
Every NVLS channel splits its part of the vector into one chunk per *head*, and each GPU's
warps work on four streams at once: *scatter* (its data into the NVLS buffers), *reduce* (a
head loads its chunk through the switch, ``multimem.ld_reduce``, which sums every GPU's copy,
and sends the sum up its tree across nodes), *broadcast* (a head receives the tree's result
and stores it through the switch, ``multimem.st``, which writes it into every GPU of the
node) and *gather*. Chunk i+1 is reduced in the switch while chunk i is on the network and
chunk i-1 is multicast: the in-switch stages and the network stream, they do not take turns.

**Heads.** The heads are the GPUs with a NIC of their own, one per NIC, at most
``NCCL_MAX_NVLS_ARITY`` = 32 (src/include/device.h; src/graph/search.cc: "NVLS search only
tries to find NIC:GPU combinations to compute the heads", ``maxChannels = min(32, GPUs)``).
Head h of every node joins head h of every other node in a double binary tree over its NIC
(src/graph/connect.cc, ``connectNvls``). A node of 8 H100s with 8 NICs has 8 heads; a rack
of 64 GB200s with 64 NICs has 32: half its NICs carry the call, each twice the bytes.

**Time** (:func:`predict_nvls_tree`, and the call itself, :func:`stream`, which runs the same
three streams). From the end of the launch: the switch's two stages share each GPU's NVLink
port (``port``: the reduce-scatter and the multicast of the whole vector); the trees of head
h carry its n/H bytes (two halves, one per tree) over its rail (``tree``: every edge's bytes
at once, at the busiest edge's share of its links, plus the first wave's way up and down the
tree); and a head passes
data on no faster than NCCL's cap per head (``cap``: ``perChMaxNVLSTreeBw``, src/graph/tuning.cc
``busBw = nHeads x min(..., perChMaxNVLSTreeBw)``: Hopper 57.7 GB/s on 2 nodes and 45.5 on
more, Blackwell 96 and 80, what the warps a channel gives its reduce and broadcast streams
sustain). What the streams cannot overlap is one wave of chunks -- NCCL keeps nChannels x
nHeads chunks in flight (:func:`wave`) -- through the stages that are not the slowest: the
first wave is reduced in the switch before it leaves (``fill_rs``), the last one still goes
up and down the tree after the port's work (``fill_tree``) and through the multicast after
the tree's (``fill_mc``)::

    T = max(port + fill_tree, fill_rs + max(tree, cap) + fill_mc)

Every term is a continuous, non-decreasing function of the size (the chunk follows NCCL's
staircase continuously), so the time has no steps and a bigger call is never faster; a
slower link only lengthens terms.

**NVLS + CollNet** (``nvls`` where the fabric reduces, ``inter.in_network_reduction``) streams
the same way, with each head's part crossing its NIC once each way instead of a tree and no
NVLSTree cap.
"""

from __future__ import annotations

from collections.abc import Sequence

from mpisim.collectives.calls import world_table
from mpisim.collectives.nccl.protocols import Protocol, gpu_generation, protocols
from mpisim.collectives.nccl.topology import _LAYOUTS, in_network_reduction, nvls_groups, rail_trees
from mpisim.collectives.nccl.tuner import (
    Choice,
    _hop_costs,
    _hop_costs_unshared,
    _nvls_in_node,
    _tree_hop_costs,
    launch,
    register_predictor,
    switch_floor,
)
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.ops import Op
from mpisim.mpi.payload import Payload, SizePayload

KiB = 1024
GB = 1e9

#: Most heads an NVLS communicator has on one node (src/include/device.h NCCL_MAX_NVLS_ARITY).
NVLS_MAX_ARITY = 32
#: NCCL's cap on an NVLSTree's bus bandwidth per head, by GPU generation, on 2 nodes and on
#: more (src/graph/tuning.cc ``perChMaxNVLSTreeBws``, columns N2 and N4; Hopper and Blackwell).
PER_HEAD_BUSBW = {"hopper": (57.7 * GB, 45.5 * GB), "blackwell": (96.0 * GB, 80.0 * GB)}
#: NVLink rate per GPU and direction from which a switch is NVLink5 (Blackwell): NVLink4
#: (Hopper) carries 450 GB/s, NVLink5 900.
NVLINK5_RATE = 900 * GB


def generation(comm: Comm) -> str:
    """NCCL's GPU generation of *comm*'s cluster for its NVLS constants: ``hopper`` or ``blackwell``.

    NCCL keys them by compute capability. The topology's ``gpu`` or its preset's name gives it where
    known (:func:`~mpisim.collectives.nccl.protocols.gpu_generation`); otherwise the NVLink generation does, which comes with the GPU's: an
    NVSwitch port of 900 GB/s per direction is NVLink5, Blackwell's.
    """
    spec = comm.world.topology.spec
    known = gpu_generation(spec)
    if known in ("hopper", "blackwell"):
        return known
    return "blackwell" if spec.intra is not None and spec.intra.bandwidth >= NVLINK5_RATE else "hopper"


def head_count(comm: Comm, groups: Sequence[Sequence[int]]) -> int:
    """How many heads each node has: one per GPU with a NIC of its own, at most NVLS_MAX_ARITY."""
    spec = comm.world.topology.spec
    nics = spec.inter.nics if spec.inter is not None else 1
    return max(1, min(NVLS_MAX_ARITY, len(groups[0]), nics))


def nvls_channels(comm: Comm, groups: Sequence[Sequence[int]]) -> int:
    """How many channels NCCL runs an NVLSTree call on (src/transport/nvls.cc, ``ncclNvlsTuning``).

    Hopper: NVLS_NCHANNELS_SM90 = 16. Blackwell across nodes: 32, or as its NVLSTree tuning
    sets by NIC rate and GPUs per node (``ncclNvlsTreeSm100Tuning``).
    """
    if generation(comm) == "hopper":
        return 16
    spec = comm.world.topology.spec
    nic = spec.inter.bandwidth / GB if spec.inter is not None else 0.0
    nodes, ppn = len(groups), len(groups[0])
    if nodes == 2 and nic >= 48:
        return 32
    if nic >= 96:
        return 24 if ppn <= 8 else 32
    return 24 if nic >= 48 else 32


def max_chunk(comm: Comm, groups: Sequence[Sequence[int]], tree: bool = True) -> int:
    """NCCL's largest chunk: NVLSTree's min(nvlsChunkSize, nvlsTreeMaxChunkSize), NVLS's nvlsChunkSize.

    The NVLS chunk is 128 KiB and the tree's the same, 64 KiB from 4 nodes on; Blackwell's
    NVLSTree tuning sets 64 KiB on 2 nodes with 16 or more GPUs per node (src/transport/nvls.cc,
    src/enqueue.cc ``calcCollChunking``).
    """
    nodes, ppn = len(groups), len(groups[0])
    if not tree:
        return 128 * KiB
    if nodes >= 4:
        return 64 * KiB
    if nodes == 2 and ppn >= 16 and generation(comm) == "blackwell":
        return 64 * KiB
    return 128 * KiB


def wave(comm: Comm, groups: Sequence[Sequence[int]], heads: int, nbytes: float, tree: bool = True) -> float:
    """Bytes of the vector in one wave of chunks: every channel's chunk for every head, or the whole call.

    NCCL's ``concurrentOps = nChannels x nHeads`` chunks are in flight at once (src/enqueue.cc,
    ``calcCollChunking``), and it halves the chunk, down to 32 KiB, as the call gets smaller
    than a few waves (below 4 x concurrentOps x chunk, and below 1 x). Here the chunk follows
    that staircase continuously, ``n / (4 x concurrentOps)`` between 32 KiB and the largest,
    so the time has no steps.
    """
    ops = nvls_channels(comm, groups) * heads
    chunk = min(max_chunk(comm, groups, tree), max(32 * KiB, nbytes / (4 * ops)))
    return min(ops * chunk, nbytes)


def cap_time(comm: Comm, nbytes: float, heads: int, nodes: int) -> float:
    """Seconds NCCL's per-head cap allows the call: its bus bytes, 2(p-1)/p x n, at heads x cap."""
    p = comm.size
    cap = PER_HEAD_BUSBW[generation(comm)][0 if nodes <= 2 else 1]
    return 2 * (p - 1) / p * nbytes / (heads * cap)


def head_links(groups: Sequence[Sequence[int]], heads: int, size: int) -> list[list[tuple[int | None, list[int]]]]:
    """The two trees of every head h: local rank h of every node, over rail h."""
    return [tree for h in range(heads) for tree in rail_trees(groups, h, size)]


def _edges(comm: Comm, groups: Sequence[Sequence[int]], heads: int, wire) -> tuple[float, float]:
    """(latency, seconds per byte) of the slowest of the heads' tree edges, both ways, all at once."""
    layouts = world_table(_LAYOUTS, comm.world)
    key = ("nvls_tree edges", comm.group, heads, wire)
    cached = layouts.get(key)
    if cached is None:
        hops = [(r, parent) for links in head_links(groups, heads, comm.size)
                for r, (parent, _) in enumerate(links) if parent is not None]
        costs = _hop_costs(comm, hops + [(b, a) for a, b in hops], wire)
        cached = layouts[key] = (max(lat for lat, _ in costs), max(per_byte for _, per_byte in costs))
    return cached


def stream_terms(comm: Comm, protocol: Protocol, nbytes: int, fabric_reduces: bool = False) -> dict[str, float]:
    """The terms of the module docstring's time for a call of *nbytes*, in seconds (launch excluded).

    ``port``: the in-switch reduce-scatter and multicast together on a GPU's NVLink port;
    ``tree``: the heads' trees over their whole parts; ``cap``: NCCL's cap per head;
    ``fill_rs``, ``fill_tree``, ``fill_mc``: one wave (:func:`wave`) through the reduce-scatter
    alone, up and down the tree, and through the multicast. Where the fabric reduces
    (*fabric_reduces*, NVLS + CollNet) each head's part crosses its NIC once each way instead of
    a tree, and NCCL's NVLSTree cap does not apply.
    """
    groups = nvls_groups(comm)
    assert groups is not None and len(groups) > 1
    m = len(groups)
    heads = head_count(comm, groups)
    intra, _ = _nvls_in_node(comm, protocol, nbytes)
    w = wave(comm, groups, heads, nbytes, not fabric_reduces)
    first, _ = _nvls_in_node(comm, protocol, w)
    simple = protocols(comm.world.topology.spec)["Simple"].wire

    def build():
        return head_links(groups, heads, comm.size)

    terms = {"port": intra - protocol.base, "fill_rs": (first - protocol.base) / 2, "fill_mc": (first - protocol.base) / 2}
    if fabric_reduces:
        (latency, per_byte), = _hop_costs_unshared(comm, [(groups[0][0], groups[1][0])], simple)
        return terms | {"tree": latency + nbytes / heads * per_byte, "cap": 0.0,
                        "fill_tree": latency + w / heads * per_byte}
    key = f"nvls_tree/{heads}"
    fill_tree = _tree_fill(comm, build, w / heads / 2, simple, key)
    latency, per_byte = _edges(comm, groups, heads, simple)
    # The edges carry every byte at once; what the first wave adds is its way up and down the
    # tree less its own bytes on the busiest edge (a tree has at least one hop up and one down).
    tail = fill_tree - w / heads / 2 * per_byte
    return terms | {"tree": latency + nbytes / heads / 2 * per_byte + tail, "tree_tail": tail,
                    "cap": cap_time(comm, nbytes, heads, m), "fill_tree": fill_tree}


def _tree_fill(comm: Comm, build, share: float, wire, key: str) -> float:
    """Seconds for *share* bytes to go up every head's tree and back down, at each hop's own rate, in one piece."""
    paths, costs = _tree_hop_costs(comm, build, wire, key)
    gamma = comm.world.config.reduce_cost
    first = max(sum(up[0] + share * (up[1] + gamma) + down[0] + share * down[1] for up, down in hops)
                for hops in paths)
    return first + max(share * (per_byte - alone) for _, alone, per_byte in costs)


def finish(terms: dict[str, float]) -> float:
    """The call's time after its launch from its terms: max(port + fill_tree, fill_rs + max(tree, cap) + fill_mc)."""
    return max(terms["port"] + terms["fill_tree"],
               terms["fill_rs"] + max(terms["tree"], terms["cap"]) + terms["fill_mc"])


def predict_nvls_tree(comm: Comm, protocol: Protocol, nbytes: int) -> float:
    """Predicted time of ``nvls_tree`` (NCCL's NVLSTree): the streams of the module docstring.

    On one node (where NCCL never runs it) it is the in-node NVLS call.
    """
    p = comm.size
    if p == 1:
        return 0.0
    groups = nvls_groups(comm)
    if groups is None or len(groups) == 1:
        return _nvls_in_node(comm, protocol, nbytes)[0]
    return protocol.base + finish(stream_terms(comm, protocol, nbytes))


def predict_nvls(comm: Comm, protocol: Protocol, nbytes: int) -> float:
    """Predicted time of ``nvls``: the in-node exchanges, and between nodes the switches' reduction or a tree per rail.

    In a node of q ranks: two exchanges of q-1 blocks of n/q bytes (a rank's port carries its
    q-1 blocks: at once on the ``fairshare`` network, in turn on the analytic one) and q-1
    reductions. Across m nodes, each rank's reduced block of n/q bytes is reduced with its
    counterparts on the other nodes: where the fabric reduces (``in_network_reduction``, NCCL's
    NVLS + CollNet) each head's part crosses its NIC up once and comes back once, streamed as
    NVLSTree's trees are (:func:`stream_terms`); elsewhere this is ``nvls_tree``, NCCL's NVLSTree
    (:func:`predict_nvls_tree`).
    """
    groups = nvls_groups(comm)
    if groups is not None and len(groups) > 1 and in_network_reduction(comm):
        return protocol.base + finish(stream_terms(comm, protocol, nbytes, fabric_reduces=True))
    return predict_nvls_tree(comm, protocol, nbytes)


register_predictor("allreduce", "nvls", predict_nvls)
register_predictor("allreduce", "nvls_tree", predict_nvls_tree)


# ---------------------------------------------------------------------------------------- the call



def switch_reduce_scatter(comm: Comm, wired: Comm, op: Op, blocks: list[Payload], peers: list[tuple[int, int]],
                          j: int) -> Proc[Payload]:
    """NVLS's reduce-scatter through the switch: block i of every rank of the node goes to the
    node's rank i (*peers* are (i, rank) of the others), which reduces them into its block *j*."""
    sends = [wired.isend(blocks[i], dest=r, tag=0) for i, r in peers]
    incoming = yield from wired.waitall([wired.irecv(source=r, tag=0) for _, r in peers])
    mine = blocks[j]
    for part in incoming:
        mine = yield from comm.reduce_local(op, part, mine)
    yield from wired.waitall(sends)
    return mine

def stream(comm: Comm, buf: Payload, op: Op, choice: Choice, groups: Sequence[Sequence[int]],
           fabric_reduces: bool = False) -> Proc[Payload]:
    """Run one NVLSTree allreduce across nodes as three streams (see the module docstring).

    After the launch each rank starts at once its reduce-scatter through the switch (block i
    of its vector to local rank i: the real data) and its multicast (its block to every other
    rank of the node), which share its NVLink port as streaming makes them; one wave later
    (``fill_rs``) the heads' trees start: head h's part of the vector over rail h, two halves,
    each edge's share one message each way, all at once, and the first wave's way up and down
    the tree on top (``tree_tail``) -- a handful of messages a head, the same at every fidelity
    (with *fabric_reduces*, one exchange along the rail: each NIC once each way). A rank is
    done ``fill_tree`` after its port's work, and a head no sooner than ``fill_mc`` after its
    trees and after NCCL's cap; the node is done when its every rank is (a block needs its
    head's tree).

    The numbers: block j of the result is block j of every node's in-switch sum, added in
    node order (the streams carry the bytes; the sums meet in a table, as a switch's sum
    would), so every rank holds the same result.
    """
    env = comm.env
    yield from launch(comm, choice)
    t0 = env.now
    terms = stream_terms(comm, choice.protocol, buf.nbytes, fabric_reduces)
    wired = comm.with_wire(choice.protocol.wire)
    node = next(k for k, group in enumerate(groups) if comm.rank in group)
    members = groups[node]
    j = members.index(comm.rank)
    heads = head_count(comm, groups)
    blocks = buf.split(len(members))
    peers = [(i, r) for i, r in enumerate(members) if r != comm.rank]
    seq = _call_number(comm)
    sizes = SizePayload(buf.count, buf.dtype)

    def reduce_scatter() -> Proc[Payload]:
        return (yield from switch_reduce_scatter(comm, wired, op, blocks, peers, j))

    def multicast() -> Proc[None]:
        mine = sizes.split_block(len(members), j)
        sends = [wired.isend(mine, dest=r, tag=1) for _, r in peers]
        yield from wired.waitall([wired.irecv(source=r, tag=1) for _, r in peers])
        yield from wired.waitall(sends)

    def trees() -> Proc[float]:
        yield env.timeout(terms["fill_rs"])  # the first wave is reduced in the switch before it leaves
        if fabric_reduces:
            if j < heads:  # up to the switches and back: the load of one exchange along the rail
                simple = comm.with_wire(protocols(comm.world.topology.spec)["Simple"].wire, shared=True)
                m = len(groups)
                yield from simple.sendrecv(sizes.split_block(heads, j), dest=groups[(node + 1) % m][j], sendtag=2,
                                           source=groups[(node - 1) % m][j], recvtag=2)
        elif j < heads:
            # Every edge carries its half of the head's part both ways, all at once; the first
            # wave's way up and down the tree comes on top (tree_tail).
            simple = comm.with_wire(protocols(comm.world.topology.spec)["Simple"].wire, shared=True)
            halves = sizes.split_block(heads, j).split(2)
            requests = []
            for t, (parent, children) in enumerate(tree[comm.rank] for tree in rail_trees(groups, j, comm.size)):
                up, down = 10 + 2 * t, 11 + 2 * t
                if parent is not None:
                    requests += [simple.isend(halves[t], dest=parent, tag=up), simple.irecv(source=parent, tag=down)]
                for child in children:
                    requests += [simple.isend(halves[t], dest=child, tag=down), simple.irecv(source=child, tag=up)]
            yield from simple.waitall(requests)
            yield env.timeout(terms["tree_tail"])
        return env.now

    rs, mc, tr = env.process(reduce_scatter()), env.process(multicast()), env.process(trees())
    mine = yield rs
    sums = _node_sums(comm, seq, len(groups), len(members))
    _add(sums[j], node, mine, op)
    yield mc
    # The switch chips' adds stream with the port's work (switchalu): it ends no sooner than they do.
    port_end = max(env.now, t0 + switch_floor(comm, choice.protocol, buf.nbytes))
    done = port_end + terms["fill_tree"]  # the last wave still goes up and down the tree
    tree_end = yield tr
    if j < heads:
        done = max(done, tree_end + terms["fill_mc"], t0 + terms["fill_rs"] + terms["cap"] + terms["fill_mc"])
    if done > env.now:
        yield env.timeout(done - env.now)
    # The node is done when its every rank is: each block needs its head's tree.
    barrier = _node_barrier(comm, seq, node, len(members))
    barrier["left"] -= 1
    if barrier["left"] == 0:
        barrier["event"].succeed()
    yield barrier["event"]
    yield env.all_of([entry["done"] for entry in sums])
    _release(comm, seq)
    return type(buf).concat([entry["done"].value for entry in sums])


_CALLS = "nvls_tree.calls"
_SUMS = "nvls_tree.sums"
_NODES = "nvls_tree.nodes"


def _call_number(comm: Comm) -> int:
    """This rank's count of NVLSTree calls on *comm* so far: the same call on every rank."""
    calls = comm.world.memo.table(_CALLS)
    seq = calls.get((comm.context, comm.rank), 0)
    calls[(comm.context, comm.rank)] = seq + 1
    return seq


def _node_sums(comm: Comm, seq: int, nodes: int, q: int) -> list[dict]:
    """The call's q sums, one per block, each waiting for every node's in-switch sum of that block."""
    table = comm.world.memo.table(_SUMS)
    key = (comm.context, seq)
    entry = table.get(key)
    if entry is None:
        entry = table[key] = {"readers": 0, "blocks": [
            {"parts": [None] * nodes, "left": nodes, "done": comm.env.event()} for _ in range(q)]}
    return entry["blocks"]


def _add(entry: dict, node: int, part: Payload, op: Op) -> None:
    entry["parts"][node] = part
    entry["left"] -= 1
    if entry["left"] == 0:
        total = entry["parts"][0]
        for other in entry["parts"][1:]:
            total = total.combine(other, op)
        entry["parts"] = None
        entry["done"].succeed(total)


def _release(comm: Comm, seq: int) -> None:
    """Forget the call's sums once every rank has read them."""
    table = comm.world.memo.table(_SUMS)
    key = (comm.context, seq)
    table[key]["readers"] += 1
    if table[key]["readers"] == comm.size:
        del table[key]


def _node_barrier(comm: Comm, seq: int, node: int, q: int) -> dict:
    """The call's barrier on *node*: it fires when the last of the node's q ranks is done."""
    table = comm.world.memo.table(_NODES)
    key = (comm.context, seq, node)
    entry = table.get(key)
    if entry is None:
        entry = table[key] = {"left": q, "event": comm.env.event()}
    if entry["left"] == 1:
        del table[key]  # every rank of the node holds the entry; the table need not
    return entry
