"""How NCCL's tree runs one channel across nodes: the chunks it cuts, and how fast its thread block moves them.

**One channel, one thread block.** NCCL runs every channel of a call on one CTA (thread block)
per GPU. In a tree allreduce that CTA splits its threads between the two sweeps
(src/device/all_reduce.h, ``runTreeSplit``: with LL and LL128 70 % reduce up, 30 % broadcast
down; the root runs both in one loop), and each sweep walks the channel's part of the vector
chunk by chunk (``for (elemOffset = 0; elemOffset < channelCount; elemOffset += chunkCount)``),
receiving, reducing and sending every chunk with its warps. The warps, not the links, set the
pace: NCCL measures it as a cap on the bus bandwidth one channel of a tree reaches
(src/graph/tuning.cc, ``perChMaxTreeBws`` for every protocol of a tree allreduce,
``perChMaxTreeLL128Bws`` for LL128, by GPU generation and by 1, 2 or more nodes)::

    busBw = min(busBw * .92, nChannels * perChMaxTreeBw)                  (Tree, AllReduce)
    busBw = min(busBw * 120/128, nChannels * perChMaxTreeLL128Bw)         (Tree, LL128)
    algBw = busBw * .5                                                   (a tree's ratio)

``nChannels`` there is the graph search's count, before ``ncclTopoPostset`` duplicates every
channel (src/graph/connect.cc, "Duplication should be complete now"; the tuning model runs on
the search's graphs, src/init.cc), so one capped channel is two thread blocks: each moves at
most ``cap / 2`` of bus bandwidth, ``cap / 4`` bytes of the vector per second through each
sweep (:func:`cta_rate`; LL128 on two Hopper nodes: 36.7 GB/s per channel, 9.2 GB/s per
block). On 2 x 8 H100 with 8 NICs that is 16 blocks, 147 GB/s of algorithm bandwidth: well
under the 8 NICs' 360 GB/s, so at mid sizes the blocks, not the network, pace a tree.

**Chunks** (src/enqueue.cc ``calcCollChunking``, per channel: the CBD scheduler calls it with
the channel's bytes and ``nChannels = 1``). A tree moves one buffer slot per step
(``chunkSteps = 1``): Simple's slot of its 4 MiB buffer (512 KiB), LL's half of its 64 KiB slot
(32 KiB of data, each 8-byte word carrying a flag), LL128's 600 KiB slot at 120 data bytes of
every 128 (576,000 bytes). LL128's chunk shrinks for calls too small to fill the pipeline:
halved while a channel has fewer than ``nsteps * 64 / ppn`` chunks (down to 72,000 bytes), then
while it has fewer than ``nsteps * 16 / ppn`` (down to 18,000), ``nsteps = 1 + log2(nodes) +
0.1 ppn``. :func:`tree_chunk` follows that staircase continuously (the chunk is the channel's
bytes over the count NCCL aims for, between the same bounds), so a bigger call never gets a
smaller chunk and no step of the staircase makes it faster.

**How mpisim charges it.** Each of mpisim's trees (two per channel of
:func:`~mpisim.collectives.nccl.topology.channel_count`, one channel per NIC) stands for one of
NCCL's thread blocks -- NCCL runs two per NIC (:func:`~mpisim.collectives.nccl.protocols.nccl_channels`),
fewer for calls too small to give each its threads' work. Every rank's up loop and down loop
(:func:`~mpisim.collectives.allreduce.tree_allreduce`) passes a chunk on no sooner than its
block could have produced it: ``chunk bytes x channel_pace`` after the chunk before (the first
``chunk x channel_pace`` after the loop starts). That is a rate, not a delay on each hop: the
warps stream a chunk's lines on as they arrive (LL and LL128 flag every line), so the chunk's
first bytes reach the next rank while its last are still being reduced, and the pipeline's fill
pays the block's time once, not per hop. The message path, its collective-fidelity twin
(:mod:`~mpisim.collectives.fluid.tree`) and the tuner (:func:`~mpisim.collectives.nccl.tuner.predict_tree`)
read the same :func:`tree_cut`.

Where mpisim applies them: across nodes, where its channels are NCCL's (one search channel per
NIC); the pace with LL and LL128 only. LL and LL128 are the protocols whose warps poll a flag in every line
they receive and write one into every line they send, so their blocks' instruction stream, not
the links, is what runs out (tuning.cc keys LL128 its own, lower table). Simple moves whole
chunks with bulk copies and one flag per chunk, and its trees are not charged the cap: the
large Simple-tree rows measure above it at the blocks mpisim knows of (H5, 2 x 8 H100, 8 GiB:
338.8 GB/s of bus bandwidth, where 16 blocks capped at 41.4 / 2 GB/s each allow 310), for NCCL
runs more blocks than two per NIC where it doubles them (connect.cc: "4 compute channels per
search channel" on Hopper below 16 channels; twice as many over unpack networks such as
GPUDirect-TCPX), which mpisim's channel count does not model. On one node NCCL's search finds as
many channels as NVLink carries (up to 32), which mpisim's single channel stands for: their
caps are beyond NVLink's rate, and their chunks are cut from parts mpisim does not know, so a
tree on one node keeps segments of DBT_SEGMENT. The GPU generation comes from the topology's
``gpu`` or its shipped preset's name (:func:`~mpisim.collectives.nccl.protocols.gpu_generation`); a cluster whose GPU is not known gets
no cap (its chunks are still NCCL's). The LL tree's further ``busBw / 3.8`` of tuning.cc is an empirical
factor with no mechanism named and stays out (:func:`~mpisim.collectives.nccl.protocols.tree_protocol`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mpisim.collectives.nccl.protocols import NCCL_THREAD_THRESHOLD, NCCL_THREADS, NCCL_TREE_ALGBW_RATIO
from mpisim.collectives.nccl.protocols import gpu_generation as generation
from mpisim.collectives.nccl.topology import MAX_CHANNELS, channel_count, node_members
from mpisim.collectives.trees import DBT_SEGMENT
from mpisim.mpi.comm import Comm

GB = 1e9

#: NCCL's cap on one tree channel's bus bandwidth in an allreduce, every protocol, by GPU
#: generation, on 1 node, 2 nodes and more (src/graph/tuning.cc ``perChMaxTreeBws``).
PER_CHANNEL_TREE_BUSBW = {
    "volta": (26.5 * GB, 18.5 * GB, 10.0 * GB),
    "ampere": (24.0 * GB, 23.6 * GB, 17.8 * GB),
    "hopper": (38.7 * GB, 41.4 * GB, 36.0 * GB),
    "blackwell": (70.0 * GB, 42.8 * GB, 24.0 * GB),
}
#: ... and with LL128 (tuning.cc ``perChMaxTreeLL128Bws``), after its 120/128 share of the line.
PER_CHANNEL_TREE_LL128_BUSBW = {
    "volta": (20.0 * GB, 20.0 * GB, 20.0 * GB),
    "ampere": (20.0 * GB, 20.0 * GB, 20.0 * GB),
    "hopper": (36.7 * GB, 36.7 * GB, 29.0 * GB),
    "blackwell": (55.6 * GB, 31.67 * GB, 20.0 * GB),
}
#: The protocols whose thread blocks pace a tree: LL and LL128, whose warps poll a flag in every
#: line they receive and write one into every line they send (module docstring: not Simple).
PACED_PROTOCOLS = ("LL", "LL128")
#: LL128's data bytes per 128-byte line (device.h ``NCCL_LL128_DATAELEMS / NCCL_LL128_LINEELEMS``).
LL128_SHARE = 120 / 128
#: Thread blocks per capped search channel (connect.cc duplicates every channel); a tree's
#: algorithm bandwidth per unit of bus bandwidth is NCCL_TREE_ALGBW_RATIO (tuning.cc ``ratio *= .5``).
BLOCKS_PER_SEARCH_CHANNEL = 2

#: A tree's chunk per protocol (src/enqueue.cc ``calcCollChunking``, ``chunkSteps = 1``; src/init.cc
#: default buffers over NCCL_STEPS slots): Simple 4 MiB / 8; LL (512 threads x 8 lines x 16 B) / 8,
#: half of it data; LL128 (640 threads x 120 x 8 B) / 8, 120 of every 128 bytes data.
LL_CHUNK = 8 * 512 * 16 // 2
LL128_CHUNK = 120 * 640 * 8 // 16 * 15
SIMPLE_CHUNK = DBT_SEGMENT
#: LL128's smallest chunks after each of calcCollChunking's two halving loops (576,000 halved
#: while above 131,072, then while above 32,768).
LL128_FLOOR_FEW = 72_000
LL128_FLOOR = 18_000

def channel_busbw(gen: str, protocol: str, nodes: int) -> float:
    """NCCL's cap on one tree search channel's bus bandwidth (bytes/s) with *protocol* on *nodes* nodes."""
    column = 0 if nodes <= 1 else 1 if nodes == 2 else 2
    cap = PER_CHANNEL_TREE_BUSBW[gen][column]
    if protocol == "LL128":
        cap = min(cap * LL128_SHARE, PER_CHANNEL_TREE_LL128_BUSBW[gen][column])
    return cap


def cta_rate(gen: str, protocol: str, nodes: int) -> float:
    """Bytes of the vector one thread block passes through each sweep of a tree per second (module docstring)."""
    return channel_busbw(gen, protocol, nodes) / BLOCKS_PER_SEARCH_CHANNEL * NCCL_TREE_ALGBW_RATIO


def tree_chunk(protocol: str, channel_bytes: float, nodes: int, ppn: int) -> int:
    """NCCL's tree chunk (bytes) for a channel of *channel_bytes*, its staircase made continuous (module docstring)."""
    if protocol == "LL":
        return LL_CHUNK
    if protocol != "LL128":
        return SIMPLE_CHUNK
    nsteps = 1 + int(math.log2(max(1, nodes))) + 0.1 * ppn
    few = min(LL128_CHUNK, max(LL128_FLOOR_FEW, channel_bytes / (nsteps * 64 / ppn)))
    return max(1, int(min(few, max(LL128_FLOOR, channel_bytes / (nsteps * 16 / ppn)))))


@dataclass(frozen=True, slots=True)
class TreeCut:
    """How one of mpisim's trees moves its share: segments of *segment* bytes, each rank's loop at
    least ``bytes x channel_pace`` seconds per segment (0: no cap)."""

    segment: int
    channel_pace: float = 0.0


def tree_cut(comm: Comm, protocol: str, nbytes: int) -> TreeCut:
    """The chunk and the thread blocks' pace of an ``nccl_tree`` call of *nbytes* (each rank's buffer).

    NCCL runs ``blocks`` thread blocks (two per NIC, fewer while each would have less than its
    threads' share of work: enqueue.cc ``while (nBytes < nc * nt * threadThreshold) nc--``,
    taken continuously so that a bigger call is never faster), each over ``nbytes / blocks``;
    mpisim's ``2 x channels`` trees carry the same bytes, each at ``blocks / (2 x channels)``
    of one block's rate. A GPU of unknown generation, or Simple: NCCL's chunk, no cap. One node
    (whose channels mpisim does not know, module docstring): segments of DBT_SEGMENT, no cap.
    """
    members = node_members(comm)
    nodes, ppn = len(members), len(members[0])
    trees = 2 * channel_count(comm)
    spec = comm.world.topology.spec
    if nodes == 1 or spec.inter is None or protocol not in NCCL_THREADS:
        return TreeCut(DBT_SEGMENT)
    most = min(trees, MAX_CHANNELS)
    work = NCCL_THREADS[protocol] * NCCL_THREAD_THRESHOLD[protocol]
    blocks = min(float(most), max(1.0, nbytes / work))
    chunk = tree_chunk(protocol, nbytes / blocks, nodes, ppn)
    gen = generation(spec)
    if gen is None or protocol not in PACED_PROTOCOLS:
        return TreeCut(chunk)
    rate = cta_rate(gen, protocol, nodes) * blocks / trees
    return TreeCut(chunk, 1.0 / rate)
