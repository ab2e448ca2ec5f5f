"""Allreduce: combine every rank's vector element-wise and give the result to every rank.

Rank r contributes x_r and every rank returns ``x0 op x1 op ... op x(p-1)``. The algorithms
here span the classic design space:

* **parameter server** -- everyone sends to one reducer, which sends the result back. Simple,
  and its link carries (p-1)·n bytes each way: it does not scale.
* **reduce + bcast** -- a binomial reduce to rank 0, then a binomial broadcast.
* **recursive doubling** -- lg p exchanges of the whole vector: few messages, best for short
  vectors; keeps rank order, so any associative op works (MPICH's choice for user ops).
* **Rabenseifner** -- reduce-scatter by recursive halving, allgather by recursive doubling:
  lg p messages each way and about 2n bytes per rank (MPICH's choice for long vectors).
* **ring** -- reduce-scatter and allgather around a ring: 2(p-1) messages but every link busy
  at every step with n/p bytes; bandwidth-optimal (Baidu, Horovod, NCCL).
* **double binary tree** -- NCCL's tree: two complementary binary trees, each reducing and
  broadcasting half of the vector in pipelined segments.
* **hierarchical** -- reduce-scatter inside each node, allreduce between nodes among ranks with
  the same local rank, allgather inside each node: the slow inter-node links carry n/q bytes
  per rank instead of n (q ranks per node).

Pipelined algorithms (parameter server, double binary tree) pace their segments so that a
link carries one segment of a stream at a time (see each docstring): the ``analytic`` network
lets any number of transfers cross a link at full speed, and the ``fairshare`` network
shares the link among them, so a burst of segments would not pipeline on either.
"""

from __future__ import annotations

import math

from mpisim.collectives import registry
from mpisim.collectives.bcast import binomial_bcast, credit, segments
from mpisim.collectives.costmodel import ceil_lg, floor_lg, lg, pof2_at_most
from mpisim.collectives.fluid.mpi_ring import RING_ALLREDUCE, RingPhase, fluid_mpi_ring, listed_blocks
from mpisim.collectives.fluid.mpi_ring import fluid as fluid_ring
from mpisim.collectives.fluid.tree import DOUBLE_BINARY_TREE
from mpisim.collectives.reduce import (
    binomial_reduce,
    halving_ranges,
    participant,
    participant_rank,
    recursive_halving,
)
from mpisim.collectives.registry import algorithm
from mpisim.collectives.ring import allgather_steps, reduce_scatter_steps
from mpisim.collectives.trees import DBT_SEGMENT, double_binary_tree
from mpisim.engine.sim import Proc
from mpisim.errors import MPIError
from mpisim.mpi.comm import Comm
from mpisim.mpi.ops import Op
from mpisim.mpi.payload import Payload

#: Segment size (bytes) of the parameter server: each worker's vector travels in 4 MiB pieces
#: (NCCL's default buffer size), so the server can send segment j back while segment j+1 arrives.
PS_SEGMENT = 4 * 2**20


# ---------------------------------------------------------------------------------------- costs


def parameter_server_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """(p-1)(k·T + T_last) + (p-1)nγ for k = ⌈n/s⌉ segments of s = min(PS_SEGMENT, n) bytes.

    T = α + sβ for a full segment, T_last = α + s_last·β for the last one (s_last = n - (k-1)s).
    The single-port count: the server receives p-1 segments a round, one after another, while
    it sends the previous round's results back, and the last round's results wait for its port
    and then take (p-1)T_last. With equal segments this is (k+1)(p-1)(α + sβ), with one segment
    (n <= s) the classic 2(p-1)(α + nβ) + (p-1)nγ. With one worker (p = 2): (k-1)(T + α) +
    2T_last + nγ -- the credit for segment j+1 leaves when segment j arrives, and with no other
    worker's segment to arrive meanwhile its α is waited for once per segment after the first.
    Exact on a single-port contention-free network with γ = 0.
    """
    s = min(PS_SEGMENT, n)
    k = max(1, math.ceil(n / PS_SEGMENT))
    seg, last = alpha + s * beta, alpha + (n - (k - 1) * s) * beta
    if p == 2:
        return (k - 1) * (seg + alpha) + 2 * last + n * gamma
    return (p - 1) * (k * seg + last) + (p - 1) * n * gamma


def reduce_bcast_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """⌈lg p⌉(2α + 2nβ + nγ) (exact for p a power of two)."""
    return ceil_lg(p) * (2 * alpha + 2 * n * beta + n * gamma)


def recursive_doubling_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """lg p(α + nβ + nγ) for p a power of two, else at most (⌊lg p⌋ + 2)(α + nβ) + (⌊lg p⌋ + 1)nγ.

    The bound charges the fold and the final send one step each. The simulation can be up to
    one α + nβ faster: a participant that did not fold sends its first exchange at once, and
    that eager message is already waiting when its folded partner gets to it.
    """
    if p & (p - 1) == 0:
        return lg(p) * (alpha + n * beta + n * gamma)
    return (floor_lg(p) + 2) * (alpha + n * beta) + (floor_lg(p) + 1) * n * gamma


def rabenseifner_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """2 lg p·α + 2((p-1)/p)nβ + ((p-1)/p)nγ for p a power of two.

    Otherwise (p' = the largest power of two below p): (2⌊lg p⌋ + 2)α + (2(p'-1)/p' + 2)nβ
    + (1 + (p'-1)/p')nγ -- MPICH's comment, with (p'-1)/p' where it writes (p-1)/p (the
    blocks are n/p' long). Exact for every p when p' divides the count.
    """
    if p & (p - 1) == 0:
        return 2 * lg(p) * alpha + 2 * (p - 1) / p * n * beta + (p - 1) / p * n * gamma
    q = pof2_at_most(p)
    return (2 * floor_lg(p) + 2) * alpha + (2 * (q - 1) / q + 2) * n * beta + (1 + (q - 1) / q) * n * gamma


def ring_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """2(p-1)α + 2((p-1)/p)nβ + ((p-1)/p)nγ."""
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * n * beta + (p - 1) / p * n * gamma


def double_binary_tree_cost(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """2D(α + sβ + sγ) + 4(k-1)(α + sβ), D = ⌈lg p⌉, each tree carrying n/2 bytes in k segments of s.

    k = ⌈n/(2·DBT_SEGMENT)⌉ and s = min(DBT_SEGMENT, n/2). The first segment climbs D levels
    (reduced on the way) and comes back down D levels; after it, a rank that is interior in
    one tree and a leaf in the other sends four segments per round (to its parent and two
    children in one tree, to its parent in the other) through its one port -- 2n bytes in
    all, NCCL's "tree bus bandwidth x 1/2". A single-port estimate: on the contention-free
    network the four streams overlap and long vectors take about 0.8nβ (not nβ/2: messages
    between two ranks are delivered in the order sent, so a credit can wait behind a segment).
    """
    if p == 1:
        return 0.0
    s = min(DBT_SEGMENT, n / 2)
    k = max(1, math.ceil(n / 2 / DBT_SEGMENT))
    depth = ceil_lg(p)
    return 2 * depth * (alpha + s * beta + s * gamma) + 4 * (k - 1) * (alpha + s * beta)


# ---------------------------------------------------------------------------------------- algorithms


@algorithm("allreduce", "parameter_server", cost=parameter_server_cost, exact=registry.never,
           reference="Li et al. 2014 (parameter server); Sergeev & Del Balso 2018 (Horovod) for the comparison")
def parameter_server_allreduce(comm: Comm, buf: Payload, op: Op) -> Proc[Payload]:
    """Parameter server: every rank sends its vector to rank 0, which reduces it and sends it back.

    Vectors travel in segments of PS_SEGMENT bytes. The server waits for segment j from every
    worker, reduces it in rank order (x0 op x1 op ... -- any associative op works) and sends
    the result back at once, so results flow out while the next segments flow in. Flow
    control: as soon as segment j has arrived from a worker (and from the workers before it), the
    server grants that worker a zero-byte credit for segment j+1, and a worker sends segment
    j+1 only once it holds that credit; the credit travels while the other workers' segments
    arrive, so the server's link never waits for it. (A burst of all segments would share the links -- or, on the contention-free
    network, cross them all at once -- and arrive together, with nothing left to overlap.)

    Cost: (p-1)(k·T + T_last) + (p-1)nγ, T = α + sβ for a full segment (see
    parameter_server_cost, which also gives p = 2): the single-port count, (p-1)·n bytes
    through the server's port in each direction. Not exact on a contention-free multi-port
    network, where the workers' messages overlap.

    For large n (many segments, k·α small beside nβ) that is (p-1)nβ + (p-1)nγ: the server's
    one port carries every worker's n bytes, so the time grows with p, where the ring's
    2(p-1)/p·nβ stays below 2nβ.
    """
    p, r = comm.size, comm.rank
    segs = segments(buf, PS_SEGMENT)
    k = len(segs)
    # Segment j and its result carry tag 2j, the credit for segment j tag 2j + 1.
    if r != 0:
        results = [comm.irecv(source=0, tag=2 * j) for j in range(k)]
        sends = []
        for j in range(k):
            if j > 0:
                yield from comm.recv(source=0, tag=2 * j + 1)
            sends.append(comm.isend(segs[j], dest=0, tag=2 * j))
        yield from comm.waitall(sends)
        return type(buf).concat((yield from comm.waitall(results)))
    sends = []
    for j in range(k):
        requests = [comm.irecv(source=w, tag=2 * j) for w in range(1, p)]
        incoming = []
        for w, request in enumerate(requests, start=1):
            incoming.append((yield from comm.wait(request)))
            if j + 1 < k:  # worker w may send its next segment while the others' arrive
                sends.append(comm.isend(credit(), dest=w, tag=2 * j + 3))
        # segs[j] = x0 op x1 op ... op x(w-1) before worker w's segment is folded in.
        for x in incoming:
            segs[j] = yield from comm.reduce_local(op, segs[j], x)
        sends.extend(comm.isend(segs[j], dest=w, tag=2 * j) for w in range(1, p))
    yield from comm.waitall(sends)
    return type(buf).concat(segs)


@algorithm("allreduce", "reduce_bcast", cost=reduce_bcast_cost, exact=registry.power_of_two,
           reference="MPICH-1 allreduce (reduce + bcast); Thakur, Rabenseifner & Gropp 2005")
def reduce_bcast_allreduce(comm: Comm, buf: Payload, op: Op) -> Proc[Payload]:
    """Reduce + broadcast: a binomial reduce to rank 0, then a binomial broadcast from rank 0.

    The binomial reduce rooted at rank 0 keeps rank order, so any associative op works.

    Cost: ⌈lg p⌉(2α + 2nβ + nγ): ⌈lg p⌉(α + nβ + nγ) up, ⌈lg p⌉(α + nβ) down. Exact for
    p a power of two; otherwise both trees are shallower.
    """
    result = yield from binomial_reduce(comm, buf, op, root=0)
    return (yield from binomial_bcast(comm, buf if result is None else result, root=0))


def fold(comm: Comm, buf: Payload, op: Op, rem: int) -> Proc[Payload]:
    """Fold p ranks onto a power of two: each even rank below 2·rem hands its vector to the odd rank above.

    The odd rank combines ``even op odd`` (rank order kept) and takes part in what follows;
    the even rank sits out until :func:`unfold` returns the result to it (MPICH's fix-up for
    p not a power of two; nothing happens when rem = 0).
    """
    r = comm.rank
    if r < 2 * rem:
        if r % 2 == 0:
            yield from comm.send(buf, dest=r + 1)
        else:
            incoming = yield from comm.recv(source=r - 1)
            buf = yield from comm.reduce_local(op, incoming, buf)
    return buf


def unfold(comm: Comm, buf: Payload, rem: int) -> Proc[Payload]:
    """Undo :func:`fold`: each odd rank below 2·rem sends the finished vector to the even rank below it."""
    r = comm.rank
    if r < 2 * rem:
        if r % 2 == 0:
            buf = yield from comm.recv(source=r + 1)
        else:
            yield from comm.send(buf, dest=r - 1)
    return buf


@algorithm("allreduce", "recursive_doubling", cost=recursive_doubling_cost, exact=registry.power_of_two,
           reference="Thakur, Rabenseifner & Gropp 2005; MPICH allreduce_intra_recursive_doubling.c")
def recursive_doubling_allreduce(comm: Comm, buf: Payload, op: Op) -> Proc[Payload]:
    """Recursive doubling: lg p exchanges of the whole vector with partners 1, 2, 4, ... apart.

    Fold (p not a power of two; p' = the largest power of two below p, rem = p - p'): each
    even rank below 2·rem sends its vector to the odd rank above it and waits. The p'
    participants then swap partial results with participant q XOR mask for mask = 1, 2, 4,
    ..., each combining lower ranks' data on the left -- so after step k a participant holds
    the reduction of a contiguous run of ranks, in rank order, and non-commutative ops work
    (MPICH combines ``incoming op mine`` for commutative ops; so does mpisim, for the same
    rounding). Finally the odd ranks below 2·rem send the result back to their even partners.

    Cost: lg p(α + nβ + nγ) for p a power of two; otherwise at most (⌊lg p⌋ + 2)(α + nβ) +
    (⌊lg p⌋ + 1)nγ (see recursive_doubling_cost).
    """
    p, r = comm.size, comm.rank
    rem = p - pof2_at_most(p)
    q = participant(r, rem, odd_folds=False)
    buf = yield from fold(comm, buf, op, rem)
    mask = 1
    # After the step at distance mask, buf is the reduction over the 2·mask participants that agree with q above it.
    while q >= 0 and mask < p - rem:
        peer = participant_rank(q ^ mask, rem, odd_folds=False)
        incoming = yield from comm.sendrecv(buf, dest=peer, source=peer)
        a, b = (incoming, buf) if op.commutative or peer < r else (buf, incoming)
        buf = yield from comm.reduce_local(op, a, b)
        mask <<= 1
    return (yield from unfold(comm, buf, rem))


@algorithm("allreduce", "rabenseifner", cost=rabenseifner_cost, requires={"commutative"},
           reference="Rabenseifner 2004; Thakur, Rabenseifner & Gropp 2005; MPICH allreduce_intra_reduce_scatter_allgather.c")
def rabenseifner_allreduce(comm: Comm, buf: Payload, op: Op) -> Proc[Payload]:
    """Rabenseifner's allreduce: reduce-scatter by recursive halving, allgather by recursive doubling.

    Fold as in recursive doubling (each even rank below 2·rem hands its vector to the odd
    rank above it). The p' participants reduce-scatter by recursive halving, which leaves one
    fully reduced block per participant, then undo the halving steps in reverse order
    (distance p'/2, ..., 2, 1), each partner sending the blocks it holds and receiving the
    other's, until everyone has every block. The odd ranks below 2·rem finally send the
    result to their even partners.

    Cost: 2 lg p·α + 2((p-1)/p)nβ + ((p-1)/p)nγ for p a power of two, plus a fold and an
    unfold (α + nβ each, and nγ) otherwise (see rabenseifner_cost); exact for every p on a
    multi-port network. On one port, once two or more ranks do not fold, they run ahead into
    the ports of ranks still folding.
    """
    p, r = comm.size, comm.rank
    pof2 = pof2_at_most(p)
    rem = p - pof2
    q = participant(r, rem, odd_folds=False)
    buf = yield from fold(comm, buf, op, rem)
    if q >= 0:
        blocks = buf.split(pof2)
        yield from recursive_halving(comm, blocks, op, q, lambda x: participant_rank(x, rem, odd_folds=False))
        ranges, mask = halving_ranges(q, pof2), pof2 // 2
        # Before the step at distance mask, q holds the fully reduced blocks of ranges[step + 1].
        for step in reversed(range(len(ranges) - 1)):
            (lo, hi), (klo, khi) = ranges[step], ranges[step + 1]
            olo, ohi = (lo, klo) if klo > lo else (khi, hi)
            peer = participant_rank(q ^ mask, rem, odd_folds=False)
            run = yield from comm.sendrecv(type(buf).concat(blocks[klo:khi]), dest=peer, source=peer)
            blocks[olo:ohi] = run.split(ohi - olo)
            mask >>= 1
        buf = type(buf).concat(blocks)
    return (yield from unfold(comm, buf, rem))


@algorithm("allreduce", "ring", cost=ring_cost, requires={"commutative"},
           reference="Patarasuk & Yuan 2009; Chan et al. 2007; MPICH allreduce_intra_ring.c", fluid=RING_ALLREDUCE)
def ring_allreduce(comm: Comm, buf: Payload, op: Op) -> Proc[Payload]:
    """Ring allreduce: a ring reduce-scatter followed by a ring allgather, as MPICH does it.

    The vector is cut into p blocks of ceil(count/p) elements, the last ones short or empty
    (MPICH's ``allreduce_intra_ring.c``). In each of p-1 reduce-scatter steps every rank
    sends one block to its right neighbour and adds the block arriving from its left
    neighbour into its own copy; block b starts its trip at rank b+1 and ends complete at
    rank b. p-1 allgather steps (MPICH's ring allgatherv) then pass the finished blocks
    around the ring. Block cut and rotation are MPICH's, so float sums agree with MPICH's
    bit for bit.

    Cost: 2(p-1)α + 2((p-1)/p)nβ + ((p-1)/p)nγ; exact for every p when p divides the count
    (otherwise the largest block, ceil(count/p) elements, sets each step's time).
    """
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    blocks = buf.split_ceil(p)

    # Reduce-scatter. Step k sends block (r - k - 1) and adds the incoming block (r - k - 2)
    # into this rank's copy; after step p - 2 rank r holds block r complete.
    # (sendrecv_reduce = sendrecv + reduce_local; on an in-place buffer it reduces where the block lands.)
    for k in range(p - 1):
        send_i, recv_i = (r - k - 1) % p, (r - k - 2) % p
        blocks[recv_i] = yield from comm.sendrecv_reduce(blocks[send_i], right, blocks[recv_i], left, op)

    # Allgather. Rank r starts out owning the finished block r. Each block is received into
    # its place (recvbuf), so an in-place buffer ends up holding the result.
    for k in range(p - 1):
        send_i, recv_i = (r - k) % p, (r - k - 1) % p
        blocks[recv_i] = yield from comm.sendrecv(blocks[send_i], dest=right, source=left, recvbuf=blocks[recv_i])

    return type(buf).concat(blocks)


# ---------------------------------------------------------------------------------------- double binary tree

UP, DOWN = 0, 1


#: Trees that may run at once between two ranks (NCCL-style channels run two trees each).
MAX_TREES = 64


def _tag(tree: int, phase: int, j: int, is_credit: bool = False) -> int:
    """Tag of segment j's data (or credit) in one tree and phase: distinct for every stream between two ranks."""
    return ((j * MAX_TREES + tree) * 2 + phase) * 2 + is_credit


def _send_credited(comm: Comm, seg: Payload, dests: list[int], tree: int, phase: int, j: int,
                   pending: list, window: int) -> Proc[None]:
    """Send segment j to each of *dests* once it has granted a credit for it (the first *window* need none)."""
    for dest in dests:
        if j >= window:
            yield from comm.recv(source=dest, tag=_tag(tree, phase, j, is_credit=True))
        pending.append(comm.isend(seg, dest=dest, tag=_tag(tree, phase, j)))


def tree_allreduce(comm: Comm, half: Payload, op: Op, parent: int | None, children: list[int],
                   tree: int, window: int = 1, segment: int | None = None,
                   channel_pace: float = 0.0) -> Proc[Payload]:
    """Allreduce *half* over one binary tree: pipelined reduce up to the root and broadcast down.

    Non-root ranks run the two directions as concurrent streams (as NCCL splits a tree's
    threads between "up" and "down"); the root turns each reduced segment around itself.
    The vector moves in segments of *segment* bytes (DBT_SEGMENT's value at the call when not
    given: a lesson sets it to show the pipeline on a few elements). A sender may have *window* segments on an
    edge that the receiver has not taken yet: the receiver grants a credit for segment j+window
    when segment j has arrived. With one slot (MPI's double binary tree) each segment waits for
    the credit round of the one before; NCCL's connections have NCCL_STEPS slots, so the
    credits stay ahead of the data.

    *channel_pace* (seconds per byte; 0 for none) is how fast the GPU library's thread block
    passes data through each loop: a loop passes segment j on no sooner than ``bytes x
    channel_pace`` after it passed segment j-1, the first that long after the loop began
    (:mod:`~mpisim.collectives.nccl.treechannel`). A rate, not a delay per hop: a segment that
    arrives later than that goes on at once.
    """
    segs = segments(half, DBT_SEGMENT if segment is None else segment)
    k, pending, result = len(segs), [], list(segs)
    env = comm.env

    def paced(last: float, seg: Payload) -> Proc[None]:
        """Wait until the thread block could have produced *seg*: its bytes x channel_pace after *last*."""
        due = last + seg.nbytes * channel_pace
        if due > env.now:
            yield env.timeout(due - env.now)

    def up() -> Proc[None]:
        last = env.now
        for j in range(k):
            parts = yield from comm.waitall([comm.irecv(source=c, tag=_tag(tree, UP, j)) for c in children])
            if j + window < k:
                pending.extend(comm.isend(credit(), dest=c, tag=_tag(tree, UP, j + window, True)) for c in children)
            # In-order: left subtree op mine op right subtree.
            acc = segs[j]
            for i, part in enumerate(parts):
                a, b = (part, acc) if i == 0 else (acc, part)
                acc = yield from comm.reduce_local(op, a, b)
            if channel_pace:
                yield from paced(last, acc)
            if parent is None:
                result[j] = acc
                yield from _send_credited(comm, acc, children, tree, DOWN, j, pending, window)
            else:
                yield from _send_credited(comm, acc, [parent], tree, UP, j, pending, window)
            last = env.now

    def down() -> Proc[None]:
        last = env.now
        for j in range(k):
            result[j] = yield from comm.recv(source=parent, tag=_tag(tree, DOWN, j))
            if j + window < k:
                pending.append(comm.isend(credit(), dest=parent, tag=_tag(tree, DOWN, j + window, True)))
            if channel_pace:
                yield from paced(last, result[j])
            yield from _send_credited(comm, result[j], children, tree, DOWN, j, pending, window)
            last = env.now

    if parent is None:
        yield from up()
    else:
        yield comm.env.all_of([comm.env.process(up()), comm.env.process(down())])
    yield from comm.waitall(pending)
    return type(half).concat(result)


@algorithm("allreduce", "double_binary_tree", cost=double_binary_tree_cost, requires={"commutative"},
           exact=registry.never,
           reference="Sanders, Speck & Träff 2009 (two-tree algorithms); NCCL 2.4 double binary trees (src/graph/trees.cc)",
           fluid=DOUBLE_BINARY_TREE)
def double_binary_tree_allreduce(comm: Comm, buf: Payload, op: Op) -> Proc[Payload]:
    """Double binary tree (NCCL): two complementary trees each allreduce half of the vector.

    Tree 0 is NCCL's in-order binary tree over the ranks (rank 0 at the top with a single
    child; odd ranks are leaves); tree 1 is the same shape mirrored (p even) or shifted by one
    rank (p odd), so a rank that is interior in one tree is a leaf in the other. Each tree takes one half of the vector in segments of DBT_SEGMENT bytes: every
    rank combines the segments arriving from its children with its own and passes the
    result up; the root's reduced segments come back down the same tree. All four streams
    (two trees, up and down) run at once and pipeline; a rank sends segment j+1 on a link
    only after the receiver has granted a zero-byte credit for it (sent when segment j
    arrived), so one segment per stream is on a link at a time.

    Cost: 2⌈lg p⌉(α + sβ + sγ) + 4(k-1)(α + sβ) for k segments of s bytes per tree (see
    double_binary_tree_cost); a single-port estimate, about 2nβ for long vectors.

    At ``fidelity: collective``, with size-only data and MPI's own messages (no GPU wire), the
    two trees run as one flow per edge, their segments and credits timed as MPI messages
    without being sent (:mod:`~mpisim.collectives.fluid.tree`; with several segments a tree,
    the program runs as a fluid until its period shows: :mod:`~mpisim.collectives.fluid.pipeline`).
    The fluid shares links as the ``fairshare`` network does; on another network (``analytic``
    serves a link's transfers in turn: 4 % apart at 16 MiB on 8 ranks of a star; ``ports``
    hold a rank's messages back: 35 % apart with one port) the messages stay. So they do with a
    ``rendezvous_overhead``: a pair's socket then carries its rendezvous messages one at a
    time, which makes the streams' rates unequal, and then an even split of a link is not the
    fair share (fluid_pipeline's docstring has the figures).
    """
    trees = double_binary_tree(comm.size, comm.rank)
    halves = buf.split(2)
    streams = [comm.env.process(tree_allreduce(comm, halves[t], op, *trees[t], t)) for t in (0, 1)]
    yield comm.env.all_of(streams)
    return type(buf).concat([s.value for s in streams])


# ---------------------------------------------------------------------------------------- hierarchical


def ring_reduce_scatter_blocks(comm: Comm, blocks: list[Payload], op: Op) -> Proc[None]:
    """The reduce-scatter half of ring allreduce, in place: rank r ends with block (r+1) mod p reduced."""
    if fluid_ring(comm, blocks[0]):
        yield from fluid_mpi_ring(comm, listed_blocks(blocks), (RingPhase(comm.size - 1, 0, True),))
        return
    yield from reduce_scatter_steps(comm, blocks, op)


def ring_allgather_blocks(comm: Comm, blocks: list[Payload]) -> Proc[None]:
    """The allgather half of ring allreduce, in place: rank r starts out owning block (r+1) mod p."""
    if fluid_ring(comm, blocks[0]):
        yield from fluid_mpi_ring(comm, listed_blocks(blocks), (RingPhase(comm.size - 1, -1, False),))
        return
    yield from allgather_steps(comm, blocks)


@algorithm("allreduce", "hierarchical", requires={"commutative"},
           reference="Jia et al. 2018 (hierarchical allreduce); Horovod hierarchical allreduce; NCCL CollNet/tree")
def hierarchical_allreduce(comm: Comm, buf: Payload, op: Op) -> Proc[Payload]:
    """Hierarchical allreduce: ring reduce-scatter in each node, ring allreduce across nodes, ring allgather.

    With q ranks of this communicator on each of m nodes (local rank l = position among its
    node's ranks): the q ranks of a node reduce-scatter the vector into q blocks, leaving
    block (l+1) mod q on local rank l; the m ranks with the same local rank, one per node,
    allreduce that block among themselves (so only n/q bytes per rank cross the inter-node
    network, and only between same-local-rank peers); then each node allgathers its blocks.
    The node and cross-node communicators come from the topology (``comm.sub``, no messages).

    Raises MPIError if the nodes do not all hold the same number of this communicator's ranks.

    Cost, with one α and β everywhere: 2(q + m - 2)α + 2((p-1)/p)nβ + ((p-1)/p)nγ -- the
    ring's bytes with fewer messages; with one rank per node (q = 1) it is the ring allreduce.
    Its gain comes from the layout (q, m) and from intra-node links being faster than the
    network, neither of which a cost function of (p, n, α, β, γ) can see, so no cost
    function is registered and the ``model`` rule set does not consider it.
    """
    p, r = comm.size, comm.rank
    nodes: dict[int, list[int]] = {}
    for x in range(p):
        nodes.setdefault(comm.node_of(x), []).append(x)
    if len({len(members) for members in nodes.values()}) > 1:
        held = ", ".join(f"node {node}: {len(members)}" for node, members in sorted(nodes.items()))
        raise MPIError(f"rank {comm.world_rank}: hierarchical allreduce needs the same number of ranks "
                       f"on every node; this communicator has {held}")
    local = nodes[comm.node_of(r)]
    local_rank = local.index(r)
    node_comm = comm.sub(local, "hierarchical/node")
    rail_comm = comm.sub([members[local_rank] for _, members in sorted(nodes.items())], "hierarchical/rail")
    blocks = buf.split(len(local))
    yield from ring_reduce_scatter_blocks(node_comm, blocks, op)
    mine = (local_rank + 1) % len(local)
    blocks[mine] = yield from ring_allreduce(rail_comm, blocks[mine], op)
    yield from ring_allgather_blocks(node_comm, blocks)
    return type(buf).concat(blocks)
