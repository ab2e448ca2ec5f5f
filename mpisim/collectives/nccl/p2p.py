"""NCCL's point-to-point operations: send/recv between GPUs, and alltoall as grouped send/recv.

NCCL has no all-to-all algorithm of its own. An all-to-all -- nccl-tests' ``alltoall_perf``,
PyTorch's ``all_to_all_single``, a mixture-of-experts token exchange -- is a group of
point-to-point calls, ``ncclGroupStart(); for every peer: ncclSend, ncclRecv;
ncclGroupEnd()``, which NCCL launches as one kernel that moves every peer's block at once
(``src/enqueue.cc``: the group's p2p tasks are scheduled round by round, round k sending to
rank r+k and receiving from r-k, and spread over the p2p channels, all in flight together).
What mpisim models:

* **One launch, every peer at once.** The call pays the protocol's base latency (NCCL's
  kernel launch and set-up: p2p operations have no ``baseLat`` of their own in
  ``tuning.cc``; the ring's value per protocol stands in for it), then rank r posts the
  receive from every r-k and the send of block r+k to rank r+k, for k = 1 .. p-1, in NCCL's
  round order, and all of them move at once.
* **The protocol by size, as NCCL picks it for p2p**: ``LL`` for a peer's message of at most
  ``NCCL_P2P_LL_THRESHOLD`` (16 KiB, ``src/enqueue.cc``), ``Simple`` above. p2p operations
  do not go through the tuner (``tuning.cc`` has no SendRecv model).
* **PXN across nodes.** With PXN (NCCL 2.12+, on by default: ``NCCL_PXN_DISABLE=0`` in
  ``src/graph/paths.cc``; ``NCCL_P2P_PXN_LEVEL=2`` in ``ncclTopoGetNetDev``,
  ``src/graph/search.cc``), a message for a GPU of another node uses the NIC that sits on
  the *destination's* rail: the NIC of the local GPU with the destination's local index. If
  that is not the sender's own NIC, the sender writes the data over NVLink into a buffer of
  the GPU attached to that NIC (the "proxy rank", whose proxy thread drives the NIC), and the
  NIC sends it from there (``PATH_PXN``: "rail-local, aggregated network send/recv"). Every
  message therefore leaves through the NIC of its destination's rail and arrives on the
  same rail: a rail-optimized fabric carries no message through its spine, and NIC j of a
  node carries exactly the blocks for (and from) local rank j of the other nodes. The
  chunks are pipelined through the proxy's buffer, so mpisim moves each message as one
  transfer over both legs (:meth:`~mpisim.network.topology.Topology.pxn_route`): the node's
  fabric to the proxy GPU, then the proxy's NIC to the destination.
* **Left out**: the cap on p2p channels and peers in flight (``NCCL_MAX_P2P_NCHANNELS``,
  ``NCCL_NCHANNELS_PER_NET_PEER``), the step-by-step credits of each connection (a message is
  a flow, as NCCL's deep chunk pipeline behaves), and the proxy thread's CPU time.

Point-to-point messages between two GPUs (:func:`send`, :func:`recv`) take the same path and
protocol: a pipeline-parallel activation sent to the next stage on another node leaves
through the NIC of the receiver's rail.

**Traffic** (m nodes of q GPUs, n bytes per rank, blocks of b = n/p): NIC j of every node
sends q(m-1) blocks and receives q(m-1) blocks; GPU i's fabric port sends its q-1 blocks for
its own node plus (q-1)(m-1) blocks relayed to other rails, and receives as many.
tests/validation/test_gpu_traffic.py holds the simulation to these counts.

**Cost**: base + h + α + L(n/p)β/e, with L the blocks that cross the most loaded link (h and
e: the protocol's latency and bandwidth share; α the route's latency, β the link's seconds per
byte). On a ``full`` topology every block has its path to itself (L = 1: one message's time
after the launch); on one DGX node a GPU's NVLink port carries its q-1 blocks; across nodes
each NIC moves q(m-1) blocks each way, so the time approaches q(m-1)(n/p)β_NIC --
((m-1)/m)·n over one NIC's bandwidth. The analytic model's links serve the blocks in turn,
the fair-share model's at once; the last block finishes at the same time.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from mpisim.collectives.nccl import topology, tuner
from mpisim.collectives.nccl.protocols import Protocol, protocols
from mpisim.collectives.nccl.tuner import Choice
from mpisim.collectives.registry import algorithm
from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.payload import Payload

#: NCCL_P2P_LL_THRESHOLD (src/enqueue.cc): a peer's message up to this size rides LL, above it Simple.
P2P_LL_THRESHOLD = 16 * 1024


def p2p_protocol(comm: Comm, nbytes: int) -> Protocol:
    """Return the protocol of an NCCL point-to-point message of *nbytes*: LL up to 16 KiB, else Simple, with PXN."""
    table = protocols(comm.world.topology.spec)
    protocol = table["LL" if nbytes <= P2P_LL_THRESHOLD else "Simple"]
    return Protocol(protocol.name, protocol.base, dataclasses.replace(protocol.wire, pxn=True))


def send(comm: Comm, buf: Any, dest: int, tag: int = 0) -> Proc[None]:
    """``ncclSend``: launch, then send *buf* to rank *dest* with NCCL's p2p protocol, across nodes by PXN.

    The send is complete once its data is handed to the connection (NCCL's kernel ends when
    the last chunk is posted); the receiver's :func:`recv` returns when the data has landed.
    """
    protocol = p2p_protocol(comm, _nbytes(buf))
    yield from comm.compute(protocol.base, f"ncclSend launch ({protocol.name})")
    yield from comm.with_wire(protocol.wire).send(buf, dest, tag)


def recv(comm: Comm, buf: Any, source: int, tag: int = 0) -> Proc[Any]:
    """``ncclRecv``: launch, then receive into *buf* (its size sets the protocol, as ncclRecv's count does) from *source*."""
    protocol = p2p_protocol(comm, _nbytes(buf))
    yield from comm.compute(protocol.base, f"ncclRecv launch ({protocol.name})")
    return (yield from comm.recv(buf, source=source, tag=tag))


def _nbytes(buf: Any) -> int:
    return buf.nbytes


# ---------------------------------------------------------------------------------------- alltoall


def _peer_costs(comm: Comm, protocol: Protocol, block: float) -> list[float]:
    """Time of each of the call's p(p-1) messages of *block* bytes once launched, all in flight at once.

    Latency (protocol + route) plus the wire bytes over the route's bottleneck, each link's
    bandwidth divided among the messages crossing it: on either network model a link's
    capacity is shared by the blocks crossing it (a GPU's NVLink port carries all of its
    blocks for its own node and those relayed to other rails).
    """
    world = comm.world
    topology = world.topology
    wire = protocol.wire
    p = comm.size
    hops = [(comm.group[r], comm.group[(r + k) % p]) for r in range(p) for k in range(1, p)]
    routes = [topology.pxn_route(a, b) for a, b in hops]
    load = tuner.link_loads(routes)
    costs = []
    for (a, b), route in zip(hops, routes, strict=True):
        if not route.links:
            costs.append(0.0)
            continue
        kind = topology.path_kind(a, b)
        rate = min(link.effective_bandwidth / load.get(link.index, 1) for link in route.links)
        costs.append(wire.latency(kind) + route.latency + wire.wire_bytes(max(1, round(block)), kind) / rate)
    return costs


def predict_alltoall(comm: Comm, protocol: Protocol, nbytes: int) -> float:
    """Predicted time of ``nccl_p2p`` alltoall of *nbytes* per rank: base + the slowest message (see _peer_costs)."""
    p = comm.size
    if p == 1:
        return 0.0
    return protocol.base + max(_peer_costs(comm, protocol, nbytes / p))


def choose(comm: Comm, nbytes: int) -> Choice:
    """Return the choice of an ``nccl_p2p`` alltoall of *nbytes* per rank: protocol, predicted time, channels, block.

    Channels are the NICs the blocks spread over (one rail per destination local rank); the
    chunk is one peer's block.
    """
    protocol = p2p_protocol(comm, nbytes // comm.size)
    return Choice("nccl_p2p", protocol, predict_alltoall(comm, protocol, nbytes), topology.channel_count(comm),
                  nbytes // comm.size)


@algorithm("alltoall", "nccl_p2p",
           reference="NCCL src/enqueue.cc (grouped p2p), src/graph/paths.cc + search.cc (PXN); nccl-tests alltoall.cu",
           plan=choose)
def nccl_p2p_alltoall(comm: Comm, buf: Payload, choice: Choice) -> Proc[Payload]:
    """NCCL alltoall: grouped send/recv to every peer at once; across nodes through the destination's rail (PXN).

    One launch, then rank r sends block r+k to rank r+k and receives from rank r-k for every
    k = 1 .. p-1, all at once, with NCCL's p2p protocol (LL up to 16 KiB per peer, Simple
    above). A block for another node leaves through the NIC of its destination's rail,
    relayed over NVLink by the GPU on that rail when it is not the sender's own (PXN; the
    module docstring says what is modelled).

    Cost: base + h + α + L(n/p)β/e, L the blocks on the most loaded link (1 on a ``full``
    topology; q(m-1) on each NIC across m nodes of q ranks).
    """
    p, r = comm.size, comm.rank
    if p == 1:
        return buf
    yield from tuner.launch(comm, choice)
    wired = comm.with_wire(choice.protocol.wire)
    blocks = buf.split(p)
    sources = [(r - k) % p for k in range(1, p)]
    recvs = [wired.irecv(source=source, tag=0) for source in sources]
    sends = [wired.isend(blocks[(r + k) % p], dest=(r + k) % p, tag=0) for k in range(1, p)]
    got = yield from wired.waitall(recvs + sends)
    received = list(blocks)  # received[r] is the block a rank keeps for itself
    for source, block in zip(sources, got[: p - 1], strict=True):
        received[source] = block
    return type(buf).concat(received)

