"""The ``p2p`` workload: OSU micro-benchmarks between two ranks (latency, bandwidth, bibw).

These are the tests of the OSU suite (``osu_latency``, ``osu_bw``, ``osu_bibw``), played by
ranks ``pair`` (0 and 1 by default) exactly as the C programs do it:

``latency``
    Ping-pong: rank a sends *n* bytes, rank b receives them and sends *n* bytes back.
    latency = elapsed / (2 x iterations), half a round trip, timed on rank a.
``bandwidth``
    Rank a posts a window of ``window`` (64) non-blocking sends and waits for them; rank b posts
    as many receives, waits, and answers with a 4-byte ack. bandwidth = n x window x
    iterations / elapsed. The window keeps the pipe full, so per-message latency is paid
    ~once per window and the figure approaches the link's achievable bandwidth.
``bibw``
    Both ranks post a window of receives and a window of sends at once, then wait for all.
    bandwidth = 2 x n x window x iterations / elapsed (both directions together).
``mbw_mr``
    ``osu_mbw_mr``: ``pairs`` senders (ranks 0 .. pairs-1) each run the ``bandwidth`` loop
    towards rank ``i + pairs`` at once, so on a block placement with ``pairs`` ranks per node
    they share the node's NIC. bandwidth = pairs x n x window x iterations / (the senders'
    mean elapsed time), the aggregate figure OSU prints.

Each (test, size) point runs on a fresh world; the first ``warmup`` iterations are not timed
(OSU's ``skip``). The simulation is deterministic, so one warm-up and one timed iteration
give the same figure as thousands; warm-up matters only to start from the same state as the
real benchmark does. ``protocol`` is what the MPI layer chose for the data messages
(``eager`` up to the path's eager limit, ``rendezvous`` above), read from the message records
(or, when the scenario switches them off, from the same rule the MPI layer applies).

YAML::

    workload:
      kind: p2p
      test: latency           # latency | bandwidth | bibw, or a list of them
      sizes: {min: 1 B, max: 4 MiB, factor: 2}
      pair: [0, 1]            # the two ranks ([0, 8] crosses nodes when each node holds 8 ranks)
      pairs: 1                # mbw_mr only: sender/receiver pairs (ranks i and i + pairs)
      window: 64
      iterations: 1
      warmup: 1
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mpisim.engine.reader import Custom
from mpisim.engine.sim import Proc
from mpisim.engine.units import format_size
from mpisim.errors import ConfigError
from mpisim.mpi.comm import Comm
from mpisim.mpi.payload import make_payload
from mpisim.mpi.world import World
from mpisim.workloads.base import RunContext, WorkloadOutput, register_workload
from mpisim.workloads.fields import (
    SIZES,
    check_keys,
    count,
    parse_positive_int,
    parse_sizes,
    read,
    workload_block,
)

KIND = "p2p"
TESTS = ("latency", "bandwidth", "bibw", "mbw_mr")
DATA_TAG, ACK_TAG = 1, 2
ACK_BYTES = 4  # OSU's osu_bw acknowledges a window with a 4-byte message

_TEST_RULE = {"enum": list(TESTS)}
#: The ``workload: {kind: p2p, ...}`` block.
SCHEMA = workload_block(KIND, {
    "test": Custom(lambda value, path: value, {"anyOf": [_TEST_RULE, {"type": "array", "items": _TEST_RULE, "minItems": 1}]},
                   description="OSU test: latency, bandwidth, bibw or mbw_mr, or a list of them."),
    "sizes": SIZES,
    "pair": Custom(lambda value, path: value, {"type": "array", "items": {"type": ["integer", "string"]},
                                               "minItems": 2, "maxItems": 2},
                   description="The two ranks, e.g. [0, 1]."),
    "window": count(1, "Messages in flight per bandwidth window."),
    "iterations": count(1, "Timed repetitions."),
    "warmup": count(0, "Untimed repetitions first."),
    "pairs": count(1, "mbw_mr: ranks i and i + pairs talk, for i < pairs."),
})


@dataclass(frozen=True)
class P2PParams:
    """A validated ``p2p`` workload (sizes in bytes)."""

    tests: tuple[str, ...]
    sizes: tuple[int, ...]
    pair: tuple[int, int] = (0, 1)
    window: int = 64
    iterations: int = 1
    warmup: int = 1
    listed: bool = False  # ``test`` was given as a list
    pairs: int = 1  # mbw_mr: ranks i and i + pairs, for i < pairs


def parse(raw: Any) -> P2PParams:
    """Validate a ``workload:`` mapping of kind ``p2p``. Raises ConfigError with a relative path."""
    raw = check_keys(raw, SCHEMA, KIND)
    test = raw.get("test", "latency")
    listed = isinstance(test, list)
    tests = test if listed else [test]
    if not tests:
        raise ConfigError(f"expected one of {', '.join(TESTS)} or a list of them", "test")
    for i, name in enumerate(tests):
        if name not in TESTS:
            raise ConfigError(f"unknown test {name!r}; known: {', '.join(TESTS)}", f"test[{i}]" if listed else "test")
    if "sizes" not in raw:
        raise ConfigError("this key is required, e.g. [0 B, 1 KiB, 1 MiB] or {min: 1 B, max: 4 MiB, factor: 2}", "sizes")
    sizes = parse_sizes(raw["sizes"], "sizes")
    pair_raw = raw.get("pair", [0, 1])
    if not isinstance(pair_raw, list) or len(pair_raw) != 2:
        raise ConfigError(f"expected two ranks such as [0, 1], got {pair_raw!r}", "pair")
    pair = (parse_positive_int(pair_raw[0], "pair[0]", 0), parse_positive_int(pair_raw[1], "pair[1]", 0))
    if pair[0] == pair[1]:
        raise ConfigError(f"the two ranks must differ, got {pair_raw!r}", "pair")
    window = read(SCHEMA, raw, "window", 64)
    iterations = read(SCHEMA, raw, "iterations", 1)
    warmup = read(SCHEMA, raw, "warmup", 1)
    pairs = read(SCHEMA, raw, "pairs", 1)
    return P2PParams(tuple(tests), sizes, pair, window, iterations, warmup, listed, pairs)


def dump(params: P2PParams) -> dict[str, Any]:
    """Return the resolved workload (sizes in bytes) in a form :func:`parse` reads back."""
    out: dict[str, Any] = {
        "kind": KIND,
        "test": list(params.tests) if params.listed else params.tests[0],
        "sizes": list(params.sizes),
        "pair": list(params.pair),
        "window": params.window,
        "iterations": params.iterations,
        "warmup": params.warmup,
    }
    if "mbw_mr" in params.tests or params.pairs != 1:
        out["pairs"] = params.pairs
    return out


# ---------------------------------------------------------------------------------------------
# The three tests, one generator each, as the OSU C programs are written


def osu_latency(comm: Comm, a: int, b: int, buf: Any, iterations: int, warmup: int, clock: list[float]) -> Proc[None]:
    """Ping-pong between ranks *a* and *b*; rank a appends (t_start, t_end) of the timed loop to *clock*."""
    for i in range(warmup + iterations):
        if i == warmup and comm.rank == a:
            clock.append(comm.now)
        if comm.rank == a:
            yield from comm.send(buf, dest=b, tag=DATA_TAG)
            yield from comm.recv(source=b, tag=DATA_TAG)
        else:
            yield from comm.recv(source=a, tag=DATA_TAG)
            yield from comm.send(buf, dest=a, tag=DATA_TAG)
    if comm.rank == a:
        clock.append(comm.now)


def osu_bw(comm: Comm, a: int, b: int, buf: Any, iterations: int, warmup: int, window: int,
           clock: list[float]) -> Proc[None]:
    """Windows of non-blocking sends from *a* to *b*, each acknowledged by a 4-byte message."""
    ack = np.zeros(ACK_BYTES, np.uint8)
    for i in range(warmup + iterations):
        if i == warmup and comm.rank == a:
            clock.append(comm.now)
        if comm.rank == a:
            yield from comm.waitall([comm.isend(buf, dest=b, tag=DATA_TAG) for _ in range(window)])
            yield from comm.recv(source=b, tag=ACK_TAG)
        else:
            yield from comm.waitall([comm.irecv(source=a, tag=DATA_TAG) for _ in range(window)])
            yield from comm.send(ack, dest=a, tag=ACK_TAG)
    if comm.rank == a:
        clock.append(comm.now)


def osu_bibw(comm: Comm, a: int, b: int, buf: Any, iterations: int, warmup: int, window: int,
             clock: list[float]) -> Proc[None]:
    """Both ranks post a window of receives and a window of sends at once, then wait for all."""
    peer = b if comm.rank == a else a
    for i in range(warmup + iterations):
        if i == warmup and comm.rank == a:
            clock.append(comm.now)
        recvs = [comm.irecv(source=peer, tag=DATA_TAG) for _ in range(window)]
        sends = [comm.isend(buf, dest=peer, tag=DATA_TAG) for _ in range(window)]
        yield from comm.waitall(recvs + sends)
    if comm.rank == a:
        clock.append(comm.now)


def _rank_program(comm: Comm, test: str, params: P2PParams, nbytes: int, data: bool,
                  clocks: dict[int, list[float]]) -> Proc[None]:
    # Every rank takes part in the synchronised start; only the pair (or the pairs) goes on.
    yield from comm.world.synchronize(comm.world_rank)
    if test == "mbw_mr":
        if comm.rank >= 2 * params.pairs:
            return
        a = comm.rank % params.pairs
        b = a + params.pairs
    else:
        a, b = params.pair
        if comm.rank not in (a, b):
            return
    clock = clocks.setdefault(a, [])  # both ranks of a pair share it; only rank a writes
    fill = np.arange(nbytes, dtype=np.uint8) if data else None  # arange wraps mod 256: recognisable bytes
    buf = make_payload(nbytes, np.uint8, data=data, fill=fill)
    if test == "latency":
        yield from osu_latency(comm, a, b, buf, params.iterations, params.warmup, clock)
    elif test in ("bandwidth", "mbw_mr"):
        yield from osu_bw(comm, a, b, buf, params.iterations, params.warmup, params.window, clock)
    else:
        yield from osu_bibw(comm, a, b, buf, params.iterations, params.warmup, params.window, clock)


def _protocol(world: World, pair: tuple[int, int], nbytes: int) -> str:
    """Return the protocol of the data messages, from the message records when they are kept."""
    protocols = sorted({m.protocol for m in world.tracer.messages if m.tag == DATA_TAG})
    if protocols:
        return "+".join(protocols)
    # Message records switched off: apply the rule the MPI layer applied to each send.
    limit = world.config.eager_limit(world.topology.path_kind(*pair))
    return "rendezvous" if nbytes > limit else "eager"


def run(params: P2PParams, ctx: RunContext) -> WorkloadOutput:
    """Run every (test, size) point on its own fresh world; return one OSU-style row per point."""
    out = WorkloadOutput()
    for test in params.tests:
        for nbytes in params.sizes:
            world = ctx.new_world()
            if test == "mbw_mr" and 2 * params.pairs > world.size:
                raise ConfigError(
                    f"mbw_mr with {params.pairs} pairs needs {2 * params.pairs} ranks, "
                    f"but the topology has {world.size}", "pairs")
            if test != "mbw_mr" and max(params.pair) >= world.size:
                raise ConfigError(
                    f"the p2p test runs between ranks {params.pair[0]} and {params.pair[1]}, "
                    f"but the topology has {world.size} rank(s)", "pair")
            clocks: dict[int, list[float]] = {}
            world.launch(_rank_program, test, params, nbytes, ctx.data, clocks)
            world.run()
            # OSU's mbw_mr averages the senders' times; the other tests have one timed rank.
            elapsed = sum(c[1] - c[0] for c in clocks.values()) / len(clocks)
            pair = (0, params.pairs) if test == "mbw_mr" else params.pair
            row: dict[str, Any] = {"test": test, "bytes": nbytes, "protocol": _protocol(world, pair, nbytes)}
            if test == "latency":
                row["latency_s"] = elapsed / (2 * params.iterations)
            else:
                directions = 2 if test == "bibw" else params.pairs if test == "mbw_mr" else 1
                moved = directions * nbytes * params.window * params.iterations
                row["bandwidth_Bps"] = moved / elapsed if elapsed > 0 else None
            out.rows.append(row)
            label = f"{test} {format_size(nbytes)}"
            out.worlds.append((label, world))
            out.notes.extend(world.unmatched)
    return out


WORKLOAD = register_workload(
    KIND, "OSU point-to-point micro-benchmarks between two ranks: latency, bandwidth, bibw",
    parse=parse, dump=dump, run=run, schema=SCHEMA,
    columns=("test", "bytes", "protocol", "latency_s", "bandwidth_Bps"),
    where_values=lambda params: {"test": params.tests},
)
