"""MPI's pipelined trees as a fluid: a few segments of the tree program on shared links, then the period.

A tree edge of MPI's double binary tree is a stream with one segment in flight (window 1), and a
rank's NIC carries four such streams (its parent and two children in one tree, its parent in the
other). How long a segment takes depends on which of the others move at the same moments: on a
star the four fall into phase and each segment crosses at a quarter of the link, on a full
network the streams that share a link alternate and each moves alone. No count fixed in advance
gives both, so :func:`pipeline_time` runs the program itself -- every rank's up and down loops
of :func:`~mpisim.collectives.allreduce.tree_allreduce`, each segment and credit an MPI message
timed by :class:`~mpisim.mpi.cost.MessageCost` (envelope, the rendezvous handshake once the
receive is posted, the data, the overheads) -- with each transfer's bytes moving at its share of
its links: a link's capacity split evenly among the transfers crossing it, a transfer moving at
its slowest link's share. That is the network's max-min fair share wherever every transfer's
bottleneck is a link it shares (a NIC), and it needs no global solve: a start or an end changes
the rates of the transfers on its own links only.

A pipeline of k segments settles into a period: once every rank finishes each segment one
period P after the one before, it will do so until the last (the program is the same for every
segment of one size). So the fluid runs K segments only -- enough to see the period and the
pipeline's fill and drain -- and the k-segment call takes T(K) + (k - K) P. If no period shows
by the time K reaches k, the fluid has simply run the whole call.

**Where it is the message path** (mpisim.validation.fidelity's grid, fair-share network: full,
star, fat tree and rail with 8 and 64 ranks, 4 x dgx-h100; up to 1 GiB): within 0.2 % on every
case; with two or four ranks a node (shared memory inside, a star or fat tree between) within
0.6 % at 16 MiB. What it leaves out: the rendezvous headers' bytes on the links, MPI's
non-overtaking order (a credit that waits behind a segment's envelope), and what max-min
sharing gives a transfer from a link's share that another, bottlenecked elsewhere, leaves
unused (an even split gives it nothing). That last one matters once the streams' rates are
unequal, as a rendezvous overhead makes them (a pair's socket taking its rendezvous messages in
turn): 8 MiB on 8 ranks of a star came out 7 % slower than the messages with the sockets
modelled and an even split, and 0.02 % faster with a global max-min solve at every start and
end, which took 50 s for 32 ranks. So such calls, and other network models, keep the messages
(:func:`~mpisim.collectives.allreduce.double_binary_tree_allreduce`).

**Smoothness.** The even split also makes a transfer's share depend on which streams happen to
be in phase, so a sweep can wobble where the message path moves steadily: 16 MiB on 16 ranks of
a fat tree (25 GB/s, 0.5 us overheads) took 1614.8 us with 0.95 us of latency and 1602.3 us with
1.00 us (the message path: 1626.3 and 1628.4 us), and the steps of a bandwidth sweep are
uneven (within 2 % of the message path throughout). For sweeps of latency or bandwidth finer
than about 1 %, time ``double_binary_tree`` at ``fidelity: message``.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Generator, Sequence
from typing import Any

from mpisim.mpi.cost import MessageCost

#: ``links[r] = (parent, children)`` in one tree.
Links = list[tuple[int | None, list[int]]]


class PipelineEdge:
    """One direction of one tree edge: its segments' messages by size, the credit back, its links."""

    __slots__ = ("costs", "credit", "links")

    def __init__(self, costs: dict[int, MessageCost], credit: MessageCost, links: tuple[int, ...]) -> None:
        self.costs = costs
        self.credit = credit
        self.links = links


class _Signal:
    """A one-shot completion (a receive): the instant it happened, and the coroutines waiting for it."""

    __slots__ = ("t", "waiters")

    def __init__(self) -> None:
        self.t: float | None = None
        self.waiters: list[Generator] = []


class _Transfer:
    __slots__ = ("done", "left", "links", "rate", "serial", "t_mark", "version")

    def __init__(self, serial: int, left: float, links: tuple[int, ...], done: Callable[[float], None]) -> None:
        self.serial = serial  # the order of starting: ties between transfers go by it (determinism)
        self.left = left  # bytes still to move
        self.links = links
        self.done = done
        self.rate = 0.0
        self.t_mark = 0.0  # when left was last brought up to date
        self.version = 0


class _Fluid:
    """Timed calls, coroutines waiting on receives, and transfers sharing links evenly."""

    def __init__(self, capacity: Callable[[int], float]) -> None:
        self.now = 0.0
        self.heap: list[tuple[float, int, Callable, tuple]] = []
        self.seq = 0
        self.capacity = capacity
        self.on_link: dict[int, set[_Transfer]] = {}

    def at(self, t: float, fn: Callable, *args: Any) -> None:
        heapq.heappush(self.heap, (t, self.seq, fn, args))
        self.seq += 1

    def run(self) -> None:
        heap = self.heap
        while heap:
            t, _, fn, args = heapq.heappop(heap)
            self.now = t
            fn(*args)

    # -------------------------------------------------------------- coroutines

    def start(self, gen: Generator) -> None:
        self._step(gen, None)

    def _step(self, gen: Generator, value: Any) -> None:
        try:
            wait = gen.send(value)
        except StopIteration:
            return
        if wait.__class__ is float:  # sleep until that instant
            self.at(max(wait, self.now), self._step, gen, wait)
        elif wait.t is not None:  # a receive that has already completed
            self.at(max(wait.t, self.now), self._step, gen, wait.t)
        else:
            wait.waiters.append(gen)

    def fire(self, signal: _Signal) -> None:
        signal.t = self.now
        for gen in signal.waiters:
            self._step(gen, self.now)
        signal.waiters = []

    # -------------------------------------------------------------- transfers

    def transfer(self, nbytes: float, links: tuple[int, ...], done: Callable[[float], None]) -> None:
        """Move *nbytes* across *links*, sharing each evenly; call ``done(t)`` when the last byte is through."""
        if nbytes <= 0 or not links:
            done(self.now)
            return
        item = _Transfer(self.seq, nbytes, links, done)
        item.t_mark = self.now
        touched = set()
        for link in links:
            group = self.on_link.setdefault(link, set())
            touched |= group
            group.add(item)
        touched.add(item)
        self._rerate(touched)

    def _rerate(self, items: set[_Transfer]) -> None:
        now = self.now
        for item in sorted(items, key=_serial):  # a fixed order, whatever the sets' (determinism)
            item.left -= item.rate * (now - item.t_mark)
            item.t_mark = now
            item.rate = min(self.capacity(link) / len(self.on_link[link]) for link in item.links)
            item.version += 1
            self.at(now + max(item.left, 0.0) / item.rate, self._finish, item, item.version)

    def _finish(self, item: _Transfer, version: int) -> None:
        if version != item.version:
            return  # its rate changed since this was scheduled
        touched: set[_Transfer] = set()
        for link in item.links:
            group = self.on_link[link]
            group.discard(item)
            touched |= group
        if touched:
            self._rerate(touched)
        item.done(self.now)


def _serial(item: _Transfer) -> int:
    return item.serial


# ------------------------------------------------------------------------------ the tree program


class _Program:
    """tree_allreduce's loops on every rank of every tree, their messages as MessageCost phases."""

    def __init__(self, fluid: _Fluid, trees: Sequence[tuple[Links, Sequence[int], dict[int, PipelineEdge],
                                                          dict[int, PipelineEdge]]],
                 window: int, gamma: float) -> None:
        self.fluid = fluid
        self.trees = trees
        self.window = window
        self.gamma = gamma
        self.recvs: dict[tuple, _Signal] = {}
        self.posted: dict[tuple, float] = {}
        self.arrived: dict[tuple, float] = {}
        self.costs: dict[tuple, tuple[MessageCost, tuple[int, ...], int]] = {}
        #: finished[(tree, rank, loop)] = when the loop finished each segment.
        self.finished: dict[tuple[int, int, int], list[float]] = {}

    def signal(self, key: tuple) -> _Signal:
        signal = self.recvs.get(key)
        if signal is None:
            signal = self.recvs[key] = _Signal()
        return signal

    # A message's key names it: (tree, "up"/"down"/"credit up"/"credit down", child rank, segment).

    def send(self, key: tuple, cost: MessageCost, links: tuple[int, ...], nbytes: int = 0) -> None:
        """Post a send of *nbytes* now: its envelope (or its eager data) goes, and meets its receive (recv)."""
        fluid = self.fluid
        self.costs[key] = (cost, links, nbytes)
        fluid.at(fluid.now + cost.envelope, self._envelope if cost.rendezvous else self._eager, key)

    def recv(self, key: tuple) -> _Signal:
        """Post a receive now; return its completion."""
        fluid = self.fluid
        self.posted[key] = fluid.now
        if key in self.arrived:  # the envelope is here already
            self._arrival(key)
        return self.signal(key)

    def _envelope(self, key: tuple) -> None:
        self.arrived[key] = self.fluid.now
        if key in self.posted:
            self._arrival(key)

    def _eager(self, key: tuple) -> None:
        _, links, nbytes = self.costs[key]
        self.fluid.transfer(nbytes, links, lambda t: self._eager_landed(key))

    def _eager_landed(self, key: tuple) -> None:
        self.arrived[key] = self.fluid.now
        if key in self.posted:
            self._arrival(key)

    def _arrival(self, key: tuple) -> None:
        """The envelope and the receive have met (now): finish the protocol."""
        fluid = self.fluid
        cost = self.costs[key][0]
        if cost.rendezvous:  # the CTS back, then the data (a pair's socket is not modelled: see allreduce)
            fluid.at(fluid.now + cost.handshake + cost.overhead + cost.data_latency, self._data_moves, key)
            return
        # Eager: the data is here; copied out of the unexpected queue if it came first.
        late = self.posted[key] > self.arrived[key]
        fluid.at(fluid.now + cost.recv_overhead + (cost.copy if late else 0.0), fluid.fire, self.signal(key))

    def _data_moves(self, key: tuple) -> None:
        fluid = self.fluid
        cost, links, nbytes = self.costs[key]
        fluid.transfer(nbytes, links, lambda t: fluid.at(t + cost.recv_overhead, fluid.fire, self.signal(key)))

    # -------------------------------------------------------------- the loops

    def up(self, t: int, r: int, sizes: Sequence[int]) -> Generator:
        links, _, up_edges, down_edges = self.trees[t]
        parent, children = links[r]
        window, fluid = self.window, self.fluid
        done = self.finished.setdefault((t, r, 0), [])
        for j, nbytes in enumerate(sizes):
            waits = [self.recv((t, "up", c, j)) for c in children]
            for w in waits:  # noqa: UP028  (not yield from: the loop sends each resumption's instant in)
                yield w
            if j + window < len(sizes):
                for c in children:
                    self.send((t, "credit up", c, j + window), up_edges[c].credit, ())
            if children and self.gamma:
                yield fluid.now + len(children) * nbytes * self.gamma
            if parent is not None:
                if j >= window:
                    yield self.recv((t, "credit up", r, j))
                edge = up_edges[r]
                self.send((t, "up", r, j), edge.costs[nbytes], edge.links, nbytes)
            else:
                yield from self._to_children(t, children, down_edges, j, nbytes)
            done.append(fluid.now)

    def down(self, t: int, r: int, sizes: Sequence[int]) -> Generator:
        links, _, _, down_edges = self.trees[t]
        children = links[r][1]
        window, fluid = self.window, self.fluid
        done = self.finished.setdefault((t, r, 1), [])
        for j, nbytes in enumerate(sizes):
            yield self.recv((t, "down", r, j))
            if j + window < len(sizes):
                self.send((t, "credit down", r, j + window), down_edges[r].credit, ())
            yield from self._to_children(t, children, down_edges, j, nbytes)
            done.append(fluid.now)

    def _to_children(self, t: int, children: Sequence[int], down_edges: dict, j: int, nbytes: int) -> Generator:
        """Send segment j down to each child once it has granted its credit for it."""
        for c in children:
            if j >= self.window:
                yield self.recv((t, "credit down", c, j))
            edge = down_edges[c]
            self.send((t, "down", c, j), edge.costs[nbytes], edge.links, nbytes)


#: Rounds of one period the fluid must see repeat, to the relative TOLERANCE, before it trusts it.
REPEATS = 4
TOLERANCE = 1e-9
#: Longest cycle of segments looked for (streams of different trees may settle into a cycle of several).
MAX_CYCLE = 8
#: A drifting pipeline's mean period: over two halves of at least MIN_HALF rounds, every loop within DRIFT.
MIN_HALF = 16
DRIFT = 5e-3


def pipeline_time(trees: Sequence[tuple[Links, Sequence[int], dict[int, PipelineEdge], dict[int, PipelineEdge]]],
                  window: int, gamma: float, capacity: Callable[[int], float]) -> float:
    """Seconds the trees take together, from the first send to the last receive (see the module docstring).

    *trees* holds, per tree: its links, its segments' sizes, and its edges up (by child rank)
    and down (by child rank). All trees have the same number of segments k.
    """
    k = max(len(sizes) for _, sizes, _, _ in trees)
    depth = max(_depth(links) for links, *_ in trees)
    rounds = min(k, max(24, 8 * depth))
    while True:
        total, finished = _run(trees, rounds, window, gamma, capacity)
        if rounds == k:
            return total
        period = _period(finished, rounds, depth)
        if period is not None:
            return total + (k - rounds) * period
        rounds = min(k, 2 * rounds)


def _run(trees, rounds: int, window: int, gamma: float, capacity: Callable[[int], float]):
    fluid = _Fluid(capacity)
    program = _Program(fluid, trees, window, gamma)
    for t, (links, sizes, _, _) in enumerate(trees):
        cut = list(sizes) if rounds >= len(sizes) else [*sizes[:rounds - 1], sizes[-1]]
        for r, (parent, children) in enumerate(links):
            if parent is None and not children:
                continue
            fluid.start(program.up(t, r, cut))
            if parent is not None:
                fluid.start(program.down(t, r, cut))
    fluid.run()
    finished = [times for _, times in sorted(program.finished.items())]
    return max(times[-1] for times in finished), finished


def _period(finished: list[list[float]], rounds: int, depth: int) -> float | None:
    """The period every loop's segments keep between the fill and the drain, or None if it has not settled.

    A period of q segments (q up to MAX_CYCLE) that repeats REPEATS times exactly (to TOLERANCE)
    is the period; failing that, where the streams' phases keep drifting (a rank's links shared
    by streams of unequal rates), the mean period: every loop's rate over the first half of the
    middle rounds and over the second half, all within DRIFT of their mean, and the mean of the
    second half taken (so the segments not run are off by at most about DRIFT).
    """
    first, last = 2 * depth + 2, rounds - 2 * depth - 3  # rounds outside may feel the fill or the drain
    for q in range(1, MAX_CYCLE + 1):
        start = last - REPEATS * q
        if start < first:
            break
        shift = finished[0][start + q] - finished[0][start]
        if shift > 0 and all(abs(times[j + q] - times[j] - shift) <= TOLERANCE * shift
                             for times in finished for j in range(start, last - q + 1)):
            return shift / q
    half = (last - first) // 2
    if half < MIN_HALF:
        return None
    middle = first + half
    rates = [((times[middle] - times[first]) / half, (times[middle + half] - times[middle]) / half)
             for times in finished]
    mean = sum(a + b for a, b in rates) / (2 * len(rates))
    if mean > 0 and all(abs(a - mean) <= DRIFT * mean and abs(b - mean) <= DRIFT * mean for a, b in rates):
        return sum(b for _, b in rates) / len(rates)  # the later half, the nearer to settled
    return None


def _depth(links: Links) -> int:
    """Hops from the root to the deepest rank."""
    roots = [r for r, (parent, children) in enumerate(links) if parent is None and children]
    deepest, stack = 0, [(r, 0) for r in roots]
    while stack:
        r, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in links[r][1])
    return deepest
