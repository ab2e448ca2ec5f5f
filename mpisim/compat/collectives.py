"""The collectives mpi4py has beyond the algorithm registry: per-rank counts and Python objects.

The registry's algorithms (:mod:`mpisim.collectives`) move equal blocks of one numpy array.
mpi4py adds two families, built here from the same simulated point-to-point messages on the
communicator's collective context, the way MPICH and mpi4py build them:

* **v-collectives** (``Gatherv, Scatterv, Allgatherv, Alltoallv``): each rank's block has its
  own count. ``gatherv``/``scatterv`` are MPICH's linear algorithms (the root posts one
  receive, or one send, per rank and waits for all: ``(p-1)(alpha) + n beta`` at the root);
  ``allgatherv`` is MPICH's ring (``p-1`` steps, each rank forwarding the block it got last
  step: ``(p-1) alpha + (n - n_r) beta``); ``alltoallv`` is MPICH's "scattered" algorithm
  (every receive and send posted at once, then one wait).
* **pickled objects** (lowercase ``bcast, gather, scatter, allgather, alltoall, reduce,
  allreduce``): each object is pickled (protocol 5, as mpi4py does) and travels as bytes, so
  the simulated message is exactly as long as mpi4py's. The byte counts are exchanged first
  with the registry's collective of fixed size, then the bytes with the matching v-collective,
  which is how mpi4py's ``PyMPI_gather`` and friends work. ``reduce`` is mpi4py's binomial tree
  (``PyMPI_reduce_p2p``): each inner node receives its children's partial results and applies
  the op in rank order, so a non-commutative op sees ``x0 op x1 op ... op x(p-1)``;
  ``allreduce`` is that reduce followed by ``bcast``, as in mpi4py.
* **prefix reductions** (``Scan, Exscan`` on buffers, ``scan, exscan`` on objects): MPICH's
  recursive doubling (``MPIR_Scan_intra_recursive_doubling`` and its ``Exscan`` twin) for
  buffers and mpi4py's transcription of it (``PyMPI_scan_p2p``, ``PyMPI_exscan_p2p``) for
  objects, step for step, so floats round as under MPICH and a non-commutative op sees its
  operands in the same order (see :func:`scan_buffers`).

The blocks sent are the caller's own memory, marked writable: as for a ``Send``, the MPI layer
copies an eager message's data as it leaves and a rendezvous message's as it is delivered, so
a caller may change its buffers the moment the call returns, as MPI allows, without changing
what slower ranks still receive.

Each call is registered as a collective of its communicator (signature checked across the
members, named in deadlock reports) and recorded in the trace.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Generator
from typing import Any

import numpy as np

from mpisim.engine.records import CollectiveRecord
from mpisim.errors import InvalidRootError
from mpisim.mpi.comm import Comm
from mpisim.mpi.ops import Op
from mpisim.mpi.payload import DataPayload, Payload, fill, in_place

Proc = Generator[Any, Any, Any]

#: Tags on the collective context, apart from the ones algorithms use.
TAG_GATHERV, TAG_SCATTERV, TAG_ALLGATHERV, TAG_ALLTOALLV, TAG_REDUCE = 9101, 9102, 9103, 9104, 9105
TAG_SCAN, TAG_EXSCAN = 9106, 9107

PICKLE_PROTOCOL = pickle.HIGHEST_PROTOCOL


def dumps(obj: Any) -> np.ndarray:
    """*obj* pickled, as the uint8 array that travels."""
    return np.frombuffer(pickle.dumps(obj, PICKLE_PROTOCOL), dtype=np.uint8)


def loads(data: Any) -> Any:
    """The object a received message holds (*data*: a uint8 array or payload)."""
    array = data.array if isinstance(data, DataPayload) else data
    return pickle.loads(memoryview(np.ascontiguousarray(array)))


def check_root(comm: Comm, call: str, root: int) -> None:
    """Refuse a *root* outside *comm* as MPICH does (``MPI_ERR_ROOT``), before anything is sent."""
    if not 0 <= root < comm.size:
        raise InvalidRootError(f"rank {comm.world_rank}: {call}(root={root}) is not a rank of a communicator of "
                               f"size {comm.size}")


def collective(comm: Comm, name: str, signature: str, nbytes: int, body: Proc) -> Proc:
    """Run *body* as one collective call of *comm*: checked, named in reports, recorded."""
    call = comm.next_collective(signature)
    state = comm.world.states[comm.world_rank]
    outer = state.collective
    if outer is None or outer[0] is not comm:  # inside another collective of comm: reported as that one
        state.collective = (comm, call, signature)
    t_enter = comm.now
    result = yield from body
    state.collective = outer
    comm.world.tracer.collective(CollectiveRecord(name, "mpi4py", comm.world_rank, nbytes, t_enter, comm.now, call))
    return result


# ---------------------------------------------------------------- v-collectives


def _outgoing(block: np.ndarray) -> DataPayload:
    """A block of the caller's memory to send: writable, so the MPI layer copies it as a ``Send`` would.

    (A read-only block -- a pickle's bytes -- cannot change under the call and travels as it is.)
    """
    return DataPayload(block, writable=block.flags.writeable)


def _blocks(array: np.ndarray, counts: list[int], displs: list[int]) -> list[np.ndarray]:
    return [array[d:d + c] for c, d in zip(counts, displs, strict=True)]


def gatherv(comm: Comm, send: np.ndarray, recv: np.ndarray | None, counts: list[int] | None,
            displs: list[int] | None, root: int) -> Proc:
    """Linear gatherv: block *r* of the root's *recv* gets rank r's *send*."""
    check_root(comm, "gatherv", root)
    c, r = comm.coll, comm.rank
    if r != root:
        if send.size:
            yield from c.send(_outgoing(send), root, TAG_GATHERV)
        return
    blocks = _blocks(recv, counts, displs)  # type: ignore[arg-type]
    reqs = [c.irecv(in_place(blocks[i]), i, TAG_GATHERV) for i in range(comm.size) if i != root and blocks[i].size]
    if send is not None and blocks[root].size and not np.shares_memory(send, blocks[root]):
        blocks[root][...] = send.reshape(-1)[:blocks[root].size]
    if reqs:
        yield from c.waitall(reqs)


def scatterv(comm: Comm, send: np.ndarray | None, counts: list[int] | None, displs: list[int] | None,
             recv: np.ndarray | None, root: int) -> Proc:
    """Linear scatterv: rank r's *recv* gets block *r* of the root's *send*."""
    check_root(comm, "scatterv", root)
    c, r = comm.coll, comm.rank
    if r != root:
        if recv is not None and recv.size:
            yield from c.recv(in_place(recv), root, TAG_SCATTERV)
        return
    blocks = _blocks(send, counts, displs)  # type: ignore[arg-type]
    reqs = [c.isend(_outgoing(blocks[i]), i, TAG_SCATTERV) for i in range(comm.size) if i != root and blocks[i].size]
    if recv is not None and blocks[root].size and not np.shares_memory(recv, blocks[root]):
        recv[:blocks[root].size] = blocks[root]
    if reqs:
        yield from c.waitall(reqs)


def allgatherv(comm: Comm, send: np.ndarray | None, recv: np.ndarray, counts: list[int], displs: list[int]) -> Proc:
    """Ring allgatherv: at step s rank r forwards block (r - s) mod p to its right neighbour."""
    c, p, r = comm.coll, comm.size, comm.rank
    blocks = _blocks(recv, counts, displs)
    if send is not None and not np.shares_memory(send, blocks[r]):
        blocks[r][...] = send.reshape(-1)[:blocks[r].size]
    right, left = (r + 1) % p, (r - 1) % p
    for step in range(p - 1):
        out, into = (r - step) % p, (r - step - 1) % p
        yield from c.sendrecv(_outgoing(blocks[out]), right, TAG_ALLGATHERV, in_place(blocks[into]), left,
                              TAG_ALLGATHERV)


def alltoallv(comm: Comm, send: np.ndarray, scounts: list[int], sdispls: list[int], recv: np.ndarray,
              rcounts: list[int], rdispls: list[int]) -> Proc:
    """Scattered alltoallv: every receive and send posted at once (peers in the order r+1, r+2, ...)."""
    c, p, r = comm.coll, comm.size, comm.rank
    sblocks, rblocks = _blocks(send, scounts, sdispls), _blocks(recv, rcounts, rdispls)
    rblocks[r][...] = sblocks[r]
    order = [(r + i) % p for i in range(1, p)]
    reqs = [c.irecv(in_place(rblocks[i]), i, TAG_ALLTOALLV) for i in order if rblocks[i].size]
    reqs += [c.isend(DataPayload(sblocks[i].copy()), i, TAG_ALLTOALLV) for i in order if sblocks[i].size]
    if reqs:
        yield from c.waitall(reqs)


def offsets(counts: list[int]) -> list[int]:
    """Displacements of blocks laid end to end."""
    return [int(x) for x in np.concatenate([[0], np.cumsum(counts, dtype=np.int64)[:-1]])] if counts else []


# ---------------------------------------------------------------- pickled objects


def bcast_obj(comm: Comm, obj: Any, root: int) -> Proc:
    """mpi4py's ``bcast``: the length, then the pickle, each with the registry's bcast."""
    check_root(comm, "bcast", root)
    data = dumps(obj) if comm.rank == root else None
    length = np.array([data.size if data is not None else 0], dtype=np.int64)
    length = yield from comm.bcast(in_place(length), root)
    n = int(length.array[0])
    buf = data.copy() if data is not None else np.empty(n, dtype=np.uint8)
    yield from comm.bcast(in_place(buf), root)
    return loads(buf)  # the root too gets a copy, as from mpi4py


def gather_obj(comm: Comm, obj: Any, root: int) -> Proc:
    """mpi4py's ``gather``: gather the lengths, then gatherv the pickles."""
    check_root(comm, "gather", root)
    data = dumps(obj)
    lengths = yield from comm.gather(np.array([data.size], dtype=np.int64), root)
    if comm.rank != root:
        yield from collective(comm, "gatherv", f"gatherv(root={root})", data.nbytes,
                              gatherv(comm, data, None, None, None, root))
        return None
    counts = [int(x) for x in lengths]
    recv = np.empty(sum(counts), dtype=np.uint8)
    displs = offsets(counts)
    yield from collective(comm, "gatherv", f"gatherv(root={root})", recv.nbytes,
                          gatherv(comm, data, recv, counts, displs, root))
    return [loads(recv[d:d + n]) for n, d in zip(counts, displs, strict=True)]


def scatter_obj(comm: Comm, objs: Any, root: int) -> Proc:
    """mpi4py's ``scatter``: scatter the lengths, then scatterv the pickles."""
    check_root(comm, "scatter", root)
    p = comm.size
    if comm.rank == root:
        items = list(objs) if objs is not None else []
        if len(items) != p:
            raise ValueError(f"rank {comm.world_rank}: scatter needs a sequence of {p} objects at the root, "
                             f"got {len(items)}")
        pickles = [dumps(item) for item in items]
        lengths = np.array([x.size for x in pickles], dtype=np.int64)
    else:
        pickles, lengths = [], np.zeros(p, dtype=np.int64)
    mine = yield from comm.scatter(lengths, root)
    recv = np.empty(int(np.asarray(mine).reshape(-1)[0]), dtype=np.uint8)
    if comm.rank == root:
        counts = [int(x) for x in lengths]
        send = np.concatenate(pickles) if pickles else np.zeros(0, np.uint8)
        yield from collective(comm, "scatterv", f"scatterv(root={root})", send.nbytes,
                              scatterv(comm, send, counts, offsets(counts), recv, root))
        return loads(pickles[root])  # a copy, as from mpi4py
    yield from collective(comm, "scatterv", f"scatterv(root={root})", recv.nbytes,
                          scatterv(comm, None, None, None, recv, root))
    return loads(recv)


def allgather_obj(comm: Comm, obj: Any) -> Proc:
    """mpi4py's ``allgather``: allgather the lengths, then allgatherv the pickles."""
    data = dumps(obj)
    lengths = yield from comm.allgather(np.array([data.size], dtype=np.int64))
    counts = [int(x) for x in lengths]
    displs = offsets(counts)
    recv = np.empty(sum(counts), dtype=np.uint8)
    yield from collective(comm, "allgatherv", "allgatherv()", recv.nbytes,
                          allgatherv(comm, data, recv, counts, displs))
    return [loads(recv[d:d + n]) for n, d in zip(counts, displs, strict=True)]  # our own too: a copy, as from mpi4py


def alltoall_obj(comm: Comm, objs: Any) -> Proc:
    """mpi4py's ``alltoall``: alltoall the lengths, then alltoallv the pickles."""
    items = list(objs)
    if len(items) != comm.size:
        raise ValueError(f"rank {comm.world_rank}: alltoall needs a sequence of {comm.size} objects, got {len(items)}")
    pickles = [dumps(item) for item in items]
    scounts = [x.size for x in pickles]
    rlengths = yield from comm.alltoall(np.array(scounts, dtype=np.int64))
    rcounts = [int(x) for x in rlengths]
    send = np.concatenate(pickles)
    recv = np.empty(sum(rcounts), dtype=np.uint8)
    rdispls = offsets(rcounts)
    yield from collective(comm, "alltoallv", "alltoallv()", send.nbytes,
                          alltoallv(comm, send, scounts, offsets(scounts), recv, rcounts, rdispls))
    mine = loads(pickles[comm.rank])  # a copy, as from mpi4py
    return [mine if i == comm.rank else loads(recv[d:d + n]) for i, (n, d) in enumerate(zip(rcounts, rdispls, strict=True))]


def reduce_obj(comm: Comm, obj: Any, op: Callable[[Any, Any], Any], commute: bool, root: int) -> Proc:
    """mpi4py's binomial-tree ``reduce`` of Python objects (see the module docstring)."""
    check_root(comm, "reduce", root)
    signature = f"reduce(object, root={root})"
    return (yield from collective(comm, "reduce", signature, 0, _reduce_tree(comm, obj, op, commute, root)))


def _reduce_tree(comm: Comm, obj: Any, op: Callable[[Any, Any], Any], commute: bool, root: int) -> Proc:
    c, p = comm.coll, comm.size
    # A commutative op may take the tree rooted at root; otherwise reduce in rank order to 0 and
    # hand the result to root, so the operands stay in order x0, x1, ..., x(p-1).
    top = root if commute else 0
    vrank = (comm.rank - top) % p
    result = loads(dumps(obj))  # mpi4py starts from a copy (PyMPI_copy): the result is never the caller's object
    mask = 1
    while mask < p:
        if vrank & mask:
            yield from c.send(DataPayload(dumps(result)), (vrank - mask + top) % p, TAG_REDUCE)
            result = None
            break
        child = vrank | mask
        if child < p:
            got = yield from c.recv(None, (child + top) % p, TAG_REDUCE)
            result = op(result, loads(got))  # the child's ranks follow ours: ours on the left
        mask <<= 1
    if top != root:
        if comm.rank == top:
            yield from c.send(DataPayload(dumps(result)), root, TAG_REDUCE)
            result = None
        elif comm.rank == root:
            result = loads((yield from c.recv(None, top, TAG_REDUCE)))
    return result if comm.rank == root else None


# ---------------------------------------------------------------- prefix reductions


def scan_buffers(comm: Comm, send: np.ndarray, recv: np.ndarray, op: Op, exclusive: bool) -> Proc:
    """``MPI_Scan`` (rank r's *recv* gets x0 op ... op xr) or ``MPI_Exscan`` (x0 op ... op x(r-1)).

    MPICH's recursive doubling, ``ceil(lg p)`` steps of ``alpha + n beta`` and up to two local
    reductions each. At the step of distance *mask* rank r swaps ``partial`` with its partner
    ``r ^ mask``; before that step, ``partial`` is the reduction, in rank order, of the ranks
    whose numbers differ from r only in the bits below *mask* (the aligned block of *mask* ranks
    holding r, cut short at p). The partner's block is the one next to it, so combining the
    two keeps rank order:

    * the partner is below: its block precedes ours, ``partial = incoming op partial``, and the
      partner's block also precedes r's running result, ``result = incoming op result``
      (for ``Exscan`` the first such block *is* the result so far: r's own value stays out);
    * the partner is above: ``partial = partial op incoming``, which MPICH computes as
      ``incoming op partial`` when the op is commutative (the same bits for MPI's own ops; a
      user op declared commutative sees its arguments in MPICH's order, so it is done so here).

    ``Exscan`` leaves rank 0's *recv* as it is (MPI leaves it undefined; MPICH does not write
    it). *send* is the input (*recv* itself for ``IN_PLACE``); it is copied first, as MPICH
    copies it into its ``partial_scan`` buffer: payloads travel by reference, and the program
    may write its buffer again before a partner has read the first message.

    This is MPICH's algorithm within one node (checked there against MPICH 5 for 1 to 8 ranks).
    Across several nodes MPICH's ch4 tuning may compose it instead (a scan in each node, then one
    of the node totals: ``MPIDI_Scan_intra_composition_alpha``); that order is not modelled.
    """
    name = "exscan" if exclusive else "scan"
    body = _recursive_doubling(comm, DataPayload(np.array(send, copy=True)), op, exclusive)
    result = yield from collective(comm, name, f"{name}({send.nbytes} B, op={op.name})", send.nbytes, body)
    if result is not None:
        fill(in_place(recv), result)


def _recursive_doubling(comm: Comm, partial: Payload, op: Op, exclusive: bool) -> Proc:
    c, p, r = comm.coll, comm.size, comm.rank
    tag = TAG_EXSCAN if exclusive else TAG_SCAN
    result = None if exclusive else partial
    mask = 1
    while mask < p:
        peer = r ^ mask
        if peer < p:
            incoming = yield from c.sendrecv(partial, peer, tag, None, peer, tag)
            if peer < r:
                partial = yield from c.reduce_local(op, incoming, partial)
                # Exscan starts its result with the first block from below: r's own value stays out.
                result = incoming if result is None else (yield from c.reduce_local(op, incoming, result))
            elif op.commutative:
                partial = yield from c.reduce_local(op, incoming, partial)
            else:
                partial = yield from c.reduce_local(op, partial, incoming)
        mask <<= 1
    return result


def scan_obj(comm: Comm, obj: Any, op: Callable[[Any, Any], Any], exclusive: bool) -> Proc:
    """mpi4py's ``scan``/``exscan`` of Python objects: the recursive doubling of :func:`scan_buffers`.

    As in ``PyMPI_scan_p2p``: each exchange is mpi4py's ``sendrecv`` of the pickles' lengths,
    then of the pickles; the partial result from a partner above is always combined as
    ``partial op incoming`` (mpi4py ignores commutativity); ``result`` and ``partial`` start as
    the same copy of *obj*, so an op that updates its right operand in place behaves as under
    mpi4py. ``exscan`` returns None on rank 0.
    """
    name = "exscan" if exclusive else "scan"
    return (yield from collective(comm, name, f"{name}(object)", 0, _scan_objects(comm, obj, op, exclusive)))


def _scan_objects(comm: Comm, obj: Any, op: Callable[[Any, Any], Any], exclusive: bool) -> Proc:
    c, p, r = comm.coll, comm.size, comm.rank
    tag = TAG_EXSCAN if exclusive else TAG_SCAN
    result = partial = loads(dumps(obj))  # mpi4py's PyMPI_copy: never the caller's own object
    below = False  # has a partner below been heard from yet?
    mask = 1
    while mask < p:
        peer = r ^ mask
        if peer < p:
            incoming = yield from _sendrecv_obj(c, partial, peer, tag)
            if peer < r:
                partial = op(incoming, partial)
                result = incoming if exclusive and not below else op(incoming, result)
                below = True
            else:
                partial = op(partial, incoming)
        mask <<= 1
    return None if exclusive and r == 0 else result


def _sendrecv_obj(c: Comm, obj: Any, peer: int, tag: int) -> Proc:
    """mpi4py's ``PyMPI_sendrecv_p2p``: swap the pickles' lengths (8 bytes), then the pickles."""
    data = dumps(obj)
    length = np.zeros(1, dtype=np.int64)
    yield from c.sendrecv(DataPayload(np.array([data.size], dtype=np.int64)), peer, tag, in_place(length), peer, tag)
    into = np.empty(int(length[0]), dtype=np.uint8)
    yield from c.sendrecv(DataPayload(data), peer, tag, in_place(into), peer, tag)
    return loads(into)
