"""The ``collective`` workload: an nccl-tests-style sweep of one collective over message sizes.

For every requested algorithm and every size, a fresh world runs the collective once per
iteration. All ranks build their input, are released at the same instant (a zero-cost
synchronised start, so no barrier skew leaks into the measurement) and call the collective;
its time is the last rank's exit minus the first rank's entry (each rank notes both around
its call, which is what the call's :class:`~mpisim.engine.records.CollectiveRecord` s hold as
well). Simulation is deterministic, so there is no warm-up and ``iterations`` only repeats
identical calls (the reported time is their mean). ``algorithm`` in a row is the algorithm
that ran -- for ``auto``, the selector's choice -- and ``requested`` what the scenario asked.

**Sizes follow nccl-tests.** For ``allgather`` and ``gather`` the size is the whole gathered
array (each rank contributes ``size / ranks``); for ``reduce_scatter``, ``alltoall`` and
``scatter`` it is the whole buffer each rank (or the root) passes, cut into ``ranks`` blocks;
for ``allreduce``, ``bcast`` and ``reduce`` it is each rank's buffer. As in nccl-tests, the
element count of the five block-structured collectives is rounded down to a multiple of the
rank count, and the row's ``bytes`` is the size that actually ran. The ``count`` column is
nccl-tests' too: elements per block for the block-structured collectives, elements of the
buffer otherwise.

**Bandwidths.** ``algbw = bytes / time`` and ``busbw = algbw x factor`` (nccl-tests
``doc/PERFORMANCE.md``): allreduce ``2(n-1)/n``; reduce_scatter, allgather, alltoall
``(n-1)/n``; bcast and reduce 1. nccl-tests has no gather or scatter; mpisim uses ``(n-1)/n``
for them, because the root's link must carry the ``n-1`` blocks that are not its own. Both are
in GB/s (1e9 B/s), and ``null`` when the time is zero (one rank).

**Verification.** With real data (``payload: data``) every rank's input holds small
integers drawn from the scenario's seed and the rank (in ``[-3, 4)`` for ``sum``, ``{1, 2}``
for ``prod``), stored in the requested dtype. Sums and products of such numbers are exact in
any order in floating point (as long as ``3 x ranks`` stays below the mantissa: 2048 ranks for
float16), so every rank's output must equal numpy's reference bit for bit, whatever order
the algorithm reduces in; integer dtypes wrap around identically in every order. ``verified``
is ``null`` with size-only payloads and for ``barrier``.

**Random floats** (``values: random``). Exact inputs cannot show a change of reduction order.
With random values every rank's result is checked against the bits of the algorithm's own
order (replayed on expression names, generically) and against the exact answer within the
floating-point summation bound; rows gain ``verified_order``, ``max_rel_error``,
``error_bound_ratio``, ``ranks_agree`` and ``result_digest`` (the bits, fingerprinted), and
``verified`` means both checks hold (see
:mod:`mpisim.workloads.verify`). Collectives that only move data are checked bit for bit.

**Memory.** ``payload: data`` always means real data: every rank's buffers live in this one
process. Before a point allocates anything, its peak payload memory (inputs, results, the
algorithm's working set and the numpy check) is estimated with
:func:`~mpisim.collectives.memory.estimate_collective`, and a point that would not fit in the
memory available is refused (a ConfigError at ``payload``) with the estimate. ``payload: size``
gives the same times without the memory, as time depends on byte counts only.

**Worlds kept for reports.** Each algorithm's largest size is always kept; the other points
are kept too while the message records of all kept worlds stay under
:data:`MAX_KEPT_MESSAGES`, so a sweep of 1 GiB over 1024 ranks does not hold every timeline.

YAML::

    workload:
      kind: collective
      collective: allreduce            # barrier | bcast | reduce | allreduce | allgather | ...
      algorithm: [ring, rabenseifner]  # a name, auto, or a list of names to compare (default:
                                       # the scenario's algorithms: entry for it, else auto)
      sizes: {min: 8 B, max: 1 GiB, factor: 4}   # or a list: [1 KiB, 1 MiB]
      dtype: float32                   # float16 bfloat16 float32 float64 float8_e4m3 float8_e5m2 int8 ...
      op: sum                          # sum | prod | max | min
      root: 0                          # bcast, reduce, gather, scatter
      iterations: 1
      values: integers                 # integers (exact in any order) | random (floats: order and bound checked)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import mpisim.collectives  # noqa: F401  (registers the algorithms that names are checked against)
from mpisim.collectives import bulk, dispatch, memory, nccl, registry
from mpisim.collectives.select import network_parameters
from mpisim.engine.reader import Choice, Custom
from mpisim.engine.sim import Proc
from mpisim.engine.units import format_size
from mpisim.errors import ConfigError, MPIError
from mpisim.mpi.comm import Comm
from mpisim.mpi.dtypes import exact_integer_limit
from mpisim.mpi.ops import OPS, get_op
from mpisim.mpi.payload import DataPayload, Payload, SizePayload, split_offsets
from mpisim.mpi.world import World
from mpisim.workloads import verify
from mpisim.workloads.base import RunContext, WorkloadOutput, register_workload
from mpisim.workloads.fields import DTYPE, SIZES, check_keys, count, parse_sizes, read, workload_block

KIND = "collective"

#: Collectives whose buffer is cut into one block per rank: counts are rounded to a multiple of p.
BLOCKED = frozenset({"allgather", "gather", "reduce_scatter", "alltoall", "scatter"})
#: Collectives whose nccl-tests size is the whole gathered array, p times each rank's buffer.
GATHERING = frozenset({"allgather", "gather"})
ROOTED = frozenset({"bcast", "reduce", "gather", "scatter"})
REDUCING = frozenset({"reduce", "allreduce", "reduce_scatter"})

#: Keep every point's world while the kept worlds hold fewer message records than this.
MAX_KEPT_MESSAGES = 200_000




# ---------------------------------------------------------------------------------------------
# Parameters


@dataclass(frozen=True)
class CollectiveParams:
    """A validated ``collective`` workload (sizes in bytes, as requested)."""

    collective: str
    algorithms: tuple[str, ...]  # names or "auto"; () means the scenario's default for the collective
    sizes: tuple[int, ...]
    dtype: str = "float32"
    op: str = "sum"
    root: int = 0
    iterations: int = 1
    listed: bool = False  # the algorithm was given as a list (dump writes it back as one)
    values: str = "integers"  # what the inputs hold: integers | random (see mpisim.workloads.verify)


def _algorithm_rule() -> dict[str, Any]:
    names = sorted({algo.name for algo in registry.available()} | {"auto"})
    return {"anyOf": [{"enum": names}, {"type": "array", "items": {"enum": names}, "minItems": 1}]}


#: The ``workload: {kind: collective, ...}`` block.
SCHEMA = workload_block(KIND, {
    "collective": Choice(registry.COLLECTIVES, "unknown collective {value!r}; known: {choices}",
                         required=f"this key is required (one of: {', '.join(registry.COLLECTIVES)})",
                         description="Which MPI collective to time."),
    "algorithm": Custom(lambda value, path: value, _algorithm_rule,
                        description="An algorithm name, auto, or a list of names to compare."),
    "sizes": SIZES,
    "dtype": DTYPE,
    "op": Choice(OPS, "unknown op {value!r}; known: {choices}", fold_case=True, description="Reduction operator."),
    "root": count(0, "Root rank of rooted collectives."),
    "iterations": count(1, "Timed repetitions of each point."),
    "values": Choice(verify.VALUES, "expected one of {choices}, got {value!r}", description="What the inputs hold."),
})


def parse(raw: Any) -> CollectiveParams:
    """Validate a ``workload:`` mapping of kind ``collective``.

    Raises ConfigError with a path relative to the workload block.
    """
    raw = check_keys(raw, SCHEMA, KIND)
    collective = read(SCHEMA, raw, "collective")
    given = raw.get("algorithm")
    algorithms, listed = _parse_algorithms(given, collective) if given is not None else ((), False)
    dtype = read(SCHEMA, raw, "dtype", "float32")
    if collective == "barrier":
        if raw.get("sizes") is not None and any(parse_sizes(raw["sizes"], "sizes")):
            raise ConfigError("a barrier moves no data: leave sizes out", "sizes")
        sizes: tuple[int, ...] = (0,)
    else:
        if "sizes" not in raw:
            raise ConfigError("this key is required, e.g. [1 KiB, 1 MiB] or {min: 8 B, max: 1 GiB, factor: 2}", "sizes")
        sizes = parse_sizes(raw["sizes"], "sizes", dtype.itemsize)
    op = read(SCHEMA, raw, "op", "sum")
    root = read(SCHEMA, raw, "root", 0)
    iterations = read(SCHEMA, raw, "iterations", 1)
    values = read(SCHEMA, raw, "values", "integers")
    return CollectiveParams(collective, algorithms, sizes, dtype.name, op, root, iterations, listed, values)


def _parse_algorithms(raw: Any, collective: str) -> tuple[tuple[str, ...], bool]:
    listed = isinstance(raw, list)
    items = raw if listed else [raw]
    if not items:
        raise ConfigError("expected an algorithm name, auto, or a non-empty list of names", "algorithm")
    names: list[str] = []
    for i, name in enumerate(items):
        where = f"algorithm[{i}]" if listed else "algorithm"
        if not isinstance(name, str):
            raise ConfigError(f"expected an algorithm name, got {name!r}", where)
        if name != "auto":
            try:
                registry.get(collective, name)
            except ConfigError as err:
                raise err.at(where) from None
        if name in names:
            raise ConfigError(f"algorithm {name!r} is listed twice", where)
        names.append(name)
    return tuple(names), listed


def dump(params: CollectiveParams) -> dict[str, Any]:
    """Return the resolved workload (sizes in bytes) in a form :func:`parse` reads back."""
    out: dict[str, Any] = {"kind": KIND, "collective": params.collective}
    if params.algorithms:
        out["algorithm"] = list(params.algorithms) if params.listed else params.algorithms[0]
    if params.collective != "barrier":
        out["sizes"] = list(params.sizes)
    out.update(dtype=params.dtype, op=params.op, root=params.root, iterations=params.iterations)
    if params.values != "integers":
        out["values"] = params.values  # written only when set, so resolved integer scenarios stay as they were
    return out


# ---------------------------------------------------------------------------------------------
# Running


def busbw_factor(collective: str, p: int) -> float:
    """Return nccl-tests' bus-bandwidth factor of *collective* on *p* ranks (see module docstring)."""
    if collective == "allreduce":
        return 2 * (p - 1) / p
    if collective in ("bcast", "reduce"):
        return 1.0
    if collective == "barrier":
        return 0.0
    return (p - 1) / p


def layout(collective: str, size: int, itemsize: int, p: int) -> tuple[int, int, int]:
    """Return ``(input count per rank, nccl-tests count, bytes that run)`` for a requested *size*.

    Block-structured collectives round the element count down to a multiple of *p*.
    """
    count = size // itemsize
    if collective not in BLOCKED:
        return count, count, count * itemsize
    block = count // p
    if collective in GATHERING:
        return block, block, block * p * itemsize
    return block * p, block, block * p * itemsize


def rank_input(collective: str, op: str, count: int, dtype: np.dtype, seed: int, rank: int,
               ranks: int = 1) -> np.ndarray:
    """Return rank *rank*'s deterministic input: small integers, exact under any reduction order."""
    rng = np.random.default_rng([seed, rank])
    if collective in REDUCING and op == "prod":
        low, high = 1, 3
    elif collective in REDUCING and op == "sum":
        low, high = (0, 4) if dtype.kind == "u" else (-3, 4)
    else:
        low, high = (0, min(100, exact_integer_limit(dtype)))
    values = rng.integers(low, high, size=count)
    if collective in REDUCING and op in ("sum", "prod") and ranks * 4 > exact_integer_limit(dtype):
        # Too few mantissa bits (fp8, or bf16 on many ranks) for a sum over every rank to stay exact:
        # element i gets a non-identity value on rank i mod p only, so any order gives the same answer.
        identity = 0 if op == "sum" else 1
        values = np.where(np.arange(count) % ranks == rank, values, identity)
    return values.astype(dtype)


def expected_output(collective: str, op: str, root: int, rank: int, inputs: Sequence[np.ndarray],
                    reduction: np.ndarray | None) -> np.ndarray | None:
    """Return what *rank* must hold after the collective (``None`` where MPI returns nothing)."""
    p = len(inputs)
    if collective in ("allreduce",):
        return reduction
    if collective == "reduce":
        return reduction if rank == root else None
    if collective == "bcast":
        return inputs[root]
    if collective == "allgather":
        return np.concatenate(inputs)
    if collective == "gather":
        return np.concatenate(inputs) if rank == root else None
    if collective == "reduce_scatter":
        assert reduction is not None
        return _block(reduction, p, rank)
    if collective == "alltoall":
        return np.concatenate([_block(x, p, rank) for x in inputs])
    if collective == "scatter":
        return _block(inputs[root], p, rank)
    return None


def _block(array: np.ndarray, p: int, i: int) -> np.ndarray:
    offsets = split_offsets(array.shape[0], p)
    return array[offsets[i]:offsets[i + 1]]


def reduce_in_rank_order(op: str, inputs: Sequence[np.ndarray]) -> np.ndarray:
    """Return ``x0 op x1 op ... op x(p-1)`` in the inputs' dtype (integers wrap around)."""
    func = get_op(op)
    acc = inputs[0]
    for x in inputs[1:]:
        acc = np.asarray(func(acc, x), dtype=inputs[0].dtype)
    return acc


def call_collective(comm: Comm, collective: str, buf: Payload | None, op: str, root: int,
                    algorithm: str | None) -> Proc[Any]:
    """Call *collective* on *comm* with the arguments it takes.

    *algorithm* is a name, ``auto``, or ``None`` for the world's default for *collective*.
    """
    if collective == "barrier":
        yield from comm.barrier(algorithm=algorithm)
        return None
    method = getattr(comm, collective)
    kwargs: dict[str, Any] = {"algorithm": algorithm}
    if collective in REDUCING:
        kwargs["op"] = get_op(op)
    if collective in ROOTED:
        kwargs["root"] = root
    return (yield from method(buf, **kwargs))


@dataclass(frozen=True)
class _Point:
    collective: str
    algorithm: str | None
    op: str
    root: int
    iterations: int
    count: int
    dtype: np.dtype
    data: bool
    seed: int
    values: str = "integers"

    def input(self, rank: int, ranks: int) -> np.ndarray:
        """Return rank *rank*'s real input for this point."""
        if self.values == "random":
            op = self.op if self.collective in REDUCING else None
            return verify.random_input(op, self.count, self.dtype, self.seed, rank)
        return rank_input(self.collective, self.op, self.count, self.dtype, self.seed, rank, ranks)


def _size_buffer(point: _Point) -> SizePayload | None:
    """Every rank's buffer of a size-only point (None for a barrier)."""
    return None if point.collective == "barrier" else SizePayload(point.count, point.dtype)


def _call_shape(point: _Point, buf: Payload | None = None) -> tuple:
    """The rest of :func:`dispatch.prepare`'s arguments for a call of *point* with *buf*: nbytes, op, root, itemsize."""
    buf = _size_buffer(point) if buf is None else buf
    nbytes = 0 if buf is None else buf.nbytes
    itemsize = 1 if buf is None else buf.dtype.itemsize
    return nbytes, get_op(point.op), point.root, itemsize


def _rank_program(comm: Comm, point: _Point, outputs: list[Any], spans: list[list[tuple[float, float]]],
                  chosen: list[dispatch.PreparedCall], inputs: list[Any] | None = None) -> Proc[None]:
    buf: Payload | None = None
    if point.collective != "barrier":
        if point.data:
            buf = DataPayload(point.input(comm.rank, comm.size))
            if inputs is not None:
                inputs[comm.rank] = buf.array  # kept for the check (payloads are never written into)
        else:
            buf = SizePayload(point.count, point.dtype)
    if comm.rank == 0:
        # The call as dispatch resolves it (once per call shape): its algorithm and library choice.
        chosen.append(dispatch.prepare(comm, point.collective, point.algorithm, *_call_shape(point, buf)))
    result = None
    for _ in range(point.iterations):
        yield from comm.world.synchronize(comm.world_rank)
        t_enter = comm.now
        result = yield from call_collective(comm, point.collective, buf, point.op, point.root, point.algorithm)
        spans[comm.rank].append((t_enter, comm.now))
    if point.data:
        outputs[comm.rank] = result


def _verify(point: _Point, p: int, outputs: Sequence[Any]) -> bool:
    inputs = [point.input(r, p) for r in range(p)]
    reduction = reduce_in_rank_order(point.op, inputs) if point.collective in REDUCING else None
    for rank, got in enumerate(outputs):
        want = expected_output(point.collective, point.op, point.root, rank, inputs, reduction)
        if want is None:
            continue
        array = got.array if isinstance(got, Payload) else got
        if array is None or not np.array_equal(np.asarray(array), want):
            return False
    return True


def _verify_random(point: _Point, p: int, inputs: Sequence[np.ndarray], outputs: Sequence[Any],
                   replay: World) -> dict[str, Any]:
    """Check a random-values point: reductions against their own order and the bound, the rest bit for bit.

    *inputs* are the ranks' inputs of the real run; *replay* is a fresh world like the real
    run's, on which the algorithm replays on order payloads.
    """
    computed = [None if got is None else np.asarray(got.array if isinstance(got, Payload) else got) for got in outputs]
    if point.collective not in REDUCING:
        return {"verified": _verify(point, p, outputs), **dict.fromkeys(verify.COLUMNS),
                "result_digest": verify.digest(computed)}
    everything = np.arange(point.count)  # one array for every rank that holds the whole vector
    positions = [_positions(point.collective, point.root, everything, p, r) for r in range(p)]
    table, names = verify.record_orders(
        replay, point.count, point.dtype, point.iterations,
        lambda comm, buf: call_collective(comm, point.collective, buf, point.op, point.root, point.algorithm))
    fields = verify.check_reduction(point.op, inputs, computed, positions, table, names)
    fields["ranks_agree"] = None
    if point.collective == "allreduce":
        fields["ranks_agree"] = all(c is not None and verify.same_bits(computed[0], c) for c in computed)
    fields["result_digest"] = verify.digest(computed)
    return fields


def _positions(collective: str, root: int, everything: np.ndarray, p: int, rank: int) -> np.ndarray | None:
    """Return the input elements rank *rank*'s result of a reducing collective holds (None: no result)."""
    if collective == "reduce_scatter":
        offsets = split_offsets(everything.shape[0], p)
        return everything[offsets[rank]:offsets[rank + 1]]
    if collective == "reduce" and rank != root:
        return None
    return everything


def collective_time(spans: Sequence[Sequence[tuple[float, float]]]) -> float:
    """Return the mean over calls of last exit minus first entry; ``spans[rank][call] = (enter, exit)``.

    The workload times the calls itself rather than reading CollectiveRecords, because an
    algorithm built from other collectives (hierarchical) records those inner calls too.
    """
    calls = len(spans[0])
    total = 0.0
    for call in range(calls):
        total += max(s[call][1] for s in spans) - min(s[call][0] for s in spans)
    return total / calls


def check_requirements(collective: str, algorithm: str | None, p: int, op: str) -> None:
    """Raise MPIError if *algorithm* cannot run on *p* ranks with *op* (power of two, commutativity).

    ``auto`` and ``None`` (the scenario's default, checked by the scenario loader) pass.
    """
    if algorithm in (None, "auto"):
        return
    problem = registry.get(collective, algorithm).why_not(p, get_op(op).commutative)
    if problem:
        raise MPIError(f"cannot run {collective} algorithm {algorithm!r} here: {problem}")


def run(params: CollectiveParams, ctx: RunContext) -> WorkloadOutput:
    """Run every (algorithm, size) point on its own fresh world; return one row per point."""
    out = WorkloadOutput()
    dtype = np.dtype(params.dtype)
    measured: list[tuple[str, str, int, World, int]] = []  # (label, algorithm, bytes, world, messages)
    for algorithm in params.algorithms or (None,):
        for size in params.sizes:
            world = ctx.new_world()
            requested = algorithm or world.algorithms.get(params.collective) or "auto"
            p = world.size
            if params.collective in ROOTED and params.root >= p:
                raise ConfigError(f"root {params.root} is not a rank of a {p}-rank world", "root")
            check_requirements(params.collective, algorithm, p, params.op)
            count, nccl_count, nbytes = layout(params.collective, size, dtype.itemsize, p)
            data = ctx.data and params.collective != "barrier"
            if data:
                check_point_memory(world, params, algorithm, count * dtype.itemsize, nbytes)
            point = _Point(params.collective, algorithm, params.op, params.root, params.iterations,
                           count, dtype, data, ctx.seed, params.values)
            outputs: list[Any] = [None] * p
            spans: list[list[tuple[float, float]]] = [[] for _ in range(p)]
            chosen: list[dispatch.PreparedCall] = []
            random = params.values == "random" and data
            inputs: list[Any] | None = [None] * p if random else None
            driver = None if data else bulk.bulk_driver(world, params.collective, algorithm,
                                                        _size_buffer(point), params.op, params.root,
                                                        params.iterations, spans)
            if driver is None:
                world.launch(_rank_program, point, outputs, spans, chosen, inputs)
            else:  # every rank enters each call at one instant: one batch, no process per rank
                chosen.append(dispatch.prepare(world.comm_world(0), point.collective, point.algorithm,
                                               *_call_shape(point)))
                world.launch_batch(driver)
            world.run()
            time = collective_time(spans)
            prepared = chosen[0]
            ran = prepared.algorithm.name  # what ran (``algorithm`` is what was asked for)
            checks: dict[str, Any] = {}
            if params.values == "random" and params.collective != "barrier":
                checks = _verify_random(point, p, inputs, outputs, ctx.new_world()) if random \
                    else dict.fromkeys(verify.COLUMNS)
            verified = checks.pop("verified", None) if checks else (_verify(point, p, outputs) if data else None)
            algbw = nbytes / time / 1e9 if time > 0 else None
            out.rows.append({
                "collective": params.collective,
                "algorithm": ran,
                "requested": requested,
                "ranks": p,
                "bytes": nbytes,
                "count": nccl_count,
                "dtype": params.dtype,
                "time_s": time,
                "algbw_GBps": algbw,
                "busbw_GBps": None if algbw is None else algbw * busbw_factor(params.collective, p),
                "verified": verified,
                "model_time_s": closed_form_time(world, params.collective, ran, nbytes),
                "model_exact": registry.get(params.collective, ran).exact(p),
                **checks,
                # Real data always runs its messages; size-only data the call shape's fidelity.
                "fidelity": "message" if data else prepared.fidelity,
            })
            if prepared.choice is not None:
                # Which protocol, how many channels, what chunk: why an NCCL-style time is what it is.
                row = out.rows[-1]
                row.update(nccl.call_shape(prepared.choice))
                if row["busbw_GBps"] is not None:
                    note = nccl.ll_pace_note(world.comm_world(0).coll,
                                             f"{params.collective}/{ran} {format_size(nbytes)} on {p} ranks",
                                             str(row["protocol"]), row["busbw_GBps"] * 1e9)
                    if note is not None and note not in out.notes:  # auto may repeat a named algorithm
                        out.notes.append(note)
                if time is not None:
                    note = nccl.switch_note(world.comm_world(0).coll, f"{params.collective}/{ran} on {p} ranks", ran,
                                            nbytes, time)
                    if note is not None and note not in out.notes:
                        out.notes.append(note)
            label = f"{ran} {format_size(nbytes)}" + (" (auto)" if requested == "auto" else "")
            measured.append((label, requested, nbytes, world, world.tracer.message_count))
            out.notes.extend(world.unmatched)
    out.worlds = _worlds_to_keep(measured)
    return out


def check_point_memory(world: World, params: CollectiveParams, algorithm: str | None, buffer_bytes: int,
                       nbytes: int) -> None:
    """Refuse a real-data point that would not fit in memory, before any buffer exists.

    *buffer_bytes* is each rank's buffer, *nbytes* the point's nccl-tests size. The estimate
    follows the algorithm that will run (``auto`` resolved as the rank program resolves it).
    Raises MemoryLimitError (a ConfigError at ``payload``).
    """
    p = world.size
    size = dispatch.size_of_call(params.collective, buffer_bytes, p)
    ran = dispatch.resolve(world.comm_world(0), params.collective, algorithm, size, get_op(params.op),
                           itemsize=np.dtype(params.dtype).itemsize).name
    estimate = memory.estimate_collective(params.collective, ran, p, buffer_bytes, verify=True)
    if params.values == "random" and params.collective in REDUCING:
        itemsize = np.dtype(params.dtype).itemsize
        extra = verify.replay_bytes(buffer_bytes // itemsize, itemsize, p)
        estimate = memory.MemoryEstimate(estimate.inputs, estimate.results, estimate.working,
                                         estimate.verification + extra,
                                         f"{estimate.description}, order replay {extra / 1e9:.3g} GB")
    try:
        memory.check_memory(estimate)
    except memory.MemoryLimitError as err:
        raise memory.MemoryLimitError(f"{params.collective} {format_size(nbytes)} on {p} ranks: {err.message}",
                                      err.path) from None


def closed_form_time(world: World, collective: str, algorithm: str, nbytes: int) -> float | None:
    """Return the algorithm's closed-form time with this world's alpha, beta and gamma (None without a formula).

    Alpha, beta and gamma are measured as ``auto`` measures them (worst latency plus overheads,
    slowest path), so on a uniform contention-free network the simulated time equals this
    wherever the algorithm's formula is exact, and elsewhere the gap shows what the formula
    leaves out (contention, uneven paths, protocol switches).
    """
    algo = registry.get(collective, algorithm)
    if algo.cost is None or world.size < 2:
        return None
    alpha, beta, gamma = network_parameters(world.comm_world(0))
    return algo.cost(world.size, nbytes, alpha, beta, gamma)


def _worlds_to_keep(measured: list[tuple[str, str, int, World, int]]) -> list[tuple[str, World]]:
    """Keep each algorithm's largest point, then the others in order while under MAX_KEPT_MESSAGES."""
    largest: dict[str, int] = {}
    for i, (_, algorithm, nbytes, _, _) in enumerate(measured):
        if algorithm not in largest or nbytes >= measured[largest[algorithm]][2]:
            largest[algorithm] = i
    keep = set(largest.values())
    budget = MAX_KEPT_MESSAGES - sum(measured[i][4] for i in keep)
    for i, point in enumerate(measured):
        if i not in keep and point[4] <= budget:
            keep.add(i)
            budget -= point[4]
    return [(label, world) for i, (label, _, _, world, _) in enumerate(measured) if i in keep]


def where_values(params: CollectiveParams) -> dict[str, tuple[str, ...]]:
    """The values the rows' collective, dtype, algorithm and requested keys can take.

    ``algorithm`` is what ran: the names listed, or, where auto (or the scenario's default)
    chooses, any algorithm registered for the collective.
    """
    names = params.algorithms
    chosen = names if names and "auto" not in names else tuple(a.name for a in registry.available(params.collective))
    out = {"collective": (params.collective,), "dtype": (params.dtype,), "algorithm": chosen}
    if names:
        out["requested"] = names
    return out


WORKLOAD = register_workload(
    KIND, "nccl-tests-style sweep of one collective over sizes and algorithms",
    parse=parse, dump=dump, run=run, where_values=where_values, schema=SCHEMA,
    columns=("collective", "algorithm", "requested", "ranks", "bytes", "count", "dtype", "time_s", "algbw_GBps",
             "busbw_GBps", "verified", "model_time_s", "model_exact", "protocol", "channels", "chunk_bytes",
             *verify.COLUMNS),
)
