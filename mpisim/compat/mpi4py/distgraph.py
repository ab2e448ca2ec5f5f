"""Distributed graphs: ``Create_dist_graph_adjacent`` and ``Create_dist_graph``, with MPI's weights.

In a distributed graph each rank ends up knowing only its own edges: its *sources* (the
ranks it receives from in a neighbourhood collective) and *destinations* (the ranks it sends
to), each edge with an optional integer weight.

* ``Create_dist_graph_adjacent(sources, destinations, sourceweights, destweights)``: each
  rank names exactly its own in- and out-edges, so nothing needs to be sent (MPICH copies the
  arrays), and the program must keep both ends of each edge consistent.
* ``Create_dist_graph(sources, degrees, destinations, weights)``: any rank may name any edge:
  it lists ``len(sources)`` source ranks, ``degrees[i]`` edges out of ``sources[i]``, their
  ``destinations`` one after another (and one weight per edge). Rank ``s`` must learn the
  out-edge ``s -> d`` and rank ``d`` the in-edge, wherever they were named, so the graph is
  assembled collectively (:func:`assemble`).

Weights: ``None`` or ``MPI.UNWEIGHTED`` for none; ``MPI.WEIGHTS_EMPTY`` for a weighted graph
that has no edges here (an empty list would be a null pointer in C, hence the constant);
otherwise one integer per edge. A communicator is weighted when its ranks gave weights
(MPICH decides it from the source weights, or from ``weights`` in the general form), and
``Get_dist_neighbors`` returns them.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from mpisim.compat import collectives as _coll
from mpisim.errors import InvalidRankError, MPIError
from mpisim.mpi.constants import ANY_SOURCE, ERR_TOPOLOGY, PROC_NULL
from mpisim.mpi.ops import SUM

#: ``MPI.UNWEIGHTED`` and ``MPI.WEIGHTS_EMPTY``: the MPI ABI's values of these special pointers.
UNWEIGHTED, WEIGHTS_EMPTY = 10, 11

#: The collective context's tags of the assembly's two kinds of messages (MPICH's MPIR_TOPO_A/B_TAG).
_TAG_IN, _TAG_OUT = 9111, 9112

Weights = list[int] | None
Edges = tuple[list[int], list[int], tuple[list[int], list[int]] | None]


def _ints(values: Sequence[Any], n: int | None = None) -> list[int]:
    """mpi4py's ``getarray``/``chkarray``: integers (``__index__``), exactly *n* of them when *n* is given."""
    items = [operator.index(v) for v in values]
    if n is not None and len(items) != n:
        raise ValueError(f"expecting {n} items, got {len(items)}")
    return items


def _is(weights: Any, constant: int) -> bool:
    return isinstance(weights, int | np.integer) and not isinstance(weights, bool) and int(weights) == constant


def weights_of(weights: Any, n: int) -> Weights:
    """One rank's weights for *n* edges, as mpi4py reads them: None (unweighted) or a list (``WEIGHTS_EMPTY``: ``[]``)."""
    if weights is None or _is(weights, UNWEIGHTED):
        return None
    if _is(weights, WEIGHTS_EMPTY):
        if n > 0:
            raise ValueError("empty weights but nonzero degree")
        return []
    return _ints(weights, n)


def _check_ranks(ranks: list[int], size: int, rank: int, call: str, what: str) -> None:
    for r in ranks:
        if r != PROC_NULL and not 0 <= r < size:
            raise InvalidRankError(f"rank {rank}: {call}: {what} {r} is not a rank of a communicator of size {size}")


def adjacent(sources: Sequence[int] | None, destinations: Sequence[int] | None, sourceweights: Any,
             destweights: Any, size: int, rank: int) -> Edges:
    """``(sources, destinations, weights)`` of ``Create_dist_graph_adjacent``, checked as mpi4py and MPICH check them.

    MPICH refuses ``MPI.UNWEIGHTED`` on one side only where that side has edges (an
    ``MPI_ERR_TOPOLOGY``); the graph is weighted when the source weights are given.
    """
    src = [] if sources is None else _ints(sources)
    sw = weights_of(sourceweights, len(src))
    dst = [] if destinations is None else _ints(destinations)
    dw = weights_of(destweights, len(dst))
    call = "Create_dist_graph_adjacent"
    if (src and sw is None and dw is not None) or (dst and dw is None and sw is not None):
        raise MPIError(f"rank {rank}: {call}: must specify MPI.UNWEIGHTED for both or neither weight arguments",
                       error_class=ERR_TOPOLOGY)
    _check_ranks(src, size, rank, call, "source")
    _check_ranks(dst, size, rank, call, "destination")
    return src, dst, None if sw is None else (sw, dw if dw is not None else [])


def named_edges(sources: Sequence[int], degrees: Sequence[int], destinations: Sequence[int], weights: Any,
                size: int, rank: int) -> tuple[list[tuple[int, int, int]], bool]:
    """The edges ``(source, destination, weight)`` one rank names in ``Create_dist_graph``, and whether it weighs them."""
    src = _ints(sources)
    degs = _ints(degrees, len(src))
    if any(d < 0 for d in degs):
        raise ValueError(f"rank {rank}: Create_dist_graph: negative degree in {degs}")
    dst = _ints(destinations, sum(degs))
    wts = weights_of(weights, len(dst))
    call = "Create_dist_graph"
    _check_ranks(src, size, rank, call, "source")
    _check_ranks(dst, size, rank, call, "destination")
    owners = [s for s, d in zip(src, degs, strict=True) for _ in range(d)]
    edges = [(s, d, wts[k] if wts else 0) for k, (s, d) in enumerate(zip(owners, dst, strict=True))
             if s != PROC_NULL and d != PROC_NULL]
    return edges, wts is not None


def assemble(c: Any, edges: list[tuple[int, int, int]], weighted: bool) -> Any:
    """This rank's ``(sources, destinations, weights)`` from the edges every rank named (collective over *c*).

    MPICH's algorithm (Hoefler's reference implementation of MPI-2.2): each rank sorts the
    edges it named by the rank that must learn them, into ``(peer, weight)`` pairs of int
    (in-edges for the destination, out-edges for the source); a reduce-scatter-block of
    flags tells each rank from how many peers it will hear of each kind; then it sends each
    peer its pairs and receives from as many peers as announced, with ``ANY_SOURCE``. Its
    edges are the pairs in the order they came; MPICH takes them in arrival order, which
    varies from run to run, and mpisim in the senders' rank order, one of MPICH's orders and
    the same on every run. Each sender's pairs keep the order it named them in.
    """
    p = c.size
    rin: list[list[int]] = [[] for _ in range(p)]
    rout: list[list[int]] = [[] for _ in range(p)]
    for s, d, w in edges:
        rout[s] += [d, w]
        rin[d] += [s, w]
    flags = np.array([[bool(rin[i]), bool(rout[i])] for i in range(p)], dtype=np.int32).reshape(-1)
    peers = np.zeros(2, dtype=np.int32)
    nbytes = 4 * sum(len(x) for x in rin + rout)

    def body() -> Any:
        yield from c.Reduce_scatter_block(flags, peers, SUM, algorithm="recursive_halving")
        coll = c.coll
        sends = []
        for i in range(p):
            if rin[i]:
                sends.append(coll.isend(np.array(rin[i], dtype=np.int32), i, _TAG_IN))
            if rout[i]:
                sends.append(coll.isend(np.array(rout[i], dtype=np.int32), i, _TAG_OUT))
        inbound = yield from _receive(coll, int(peers[0]), _TAG_IN)
        outbound = yield from _receive(coll, int(peers[1]), _TAG_OUT)
        if sends:
            yield from coll.waitall(sends)
        return inbound, outbound

    inbound, outbound = yield from _coll.collective(c, "dist_graph_create", "dist_graph_create()", nbytes, body())
    sources, sw = inbound[0::2], inbound[1::2]
    dests, dw = outbound[0::2], outbound[1::2]
    return sources, dests, (sw, dw) if weighted else None


def _receive(coll: Any, peers: int, tag: int) -> Any:
    """The int pairs *peers* senders send with *tag*, each sender's in a row, senders in rank order."""
    got = []
    for _ in range(peers):
        status = yield from coll.probe(ANY_SOURCE, tag)
        pairs = np.zeros(status.nbytes // 4, dtype=np.int32)
        yield from coll.Recv(pairs, status.source, tag)
        got.append((status.source, pairs))
    got.sort(key=lambda item: item[0])  # a stable sort: one sender's messages never come out of order
    return [int(x) for _, pairs in got for x in pairs]
