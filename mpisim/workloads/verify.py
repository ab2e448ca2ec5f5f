"""Verification on random floats: the algorithm's own bits, and numpy's answer within the rounding bound.

The default inputs of the collective workload are small integers, whose sums are exact in any
order: every algorithm must then give numpy's bits, but a change of reduction order goes
unseen. With ``workload.values: random`` every rank holds random floats from the seed instead
(uniform in [-1, 1); for ``prod``, magnitudes 2^U with U uniform in [-1, 1) and random signs, so
products stay in range), and a reducing collective is checked twice:

1. **Bit for bit against the algorithm's own order.** The algorithm runs once more, on
   :class:`~mpisim.mpi.order.OrderPayload` inputs, in a fresh world identical to the real run's
   (same sizes, so the same protocol choices, chunks and arrival order). Each rank's result
   then names, per element, the tree of pairwise steps that rank took; replaying the trees on
   the random inputs, rounding to the dtype after every step as the real run does, gives the
   bits the result must have (``verified_order``). Nothing here knows any algorithm.
2. **Against the exact answer within the classic bound.** Any order of the p-1 pairwise
   additions of p numbers, each rounded with unit roundoff u, gives ``|computed - exact| <=
   gamma_{p-1} * sum |x_i|`` with ``gamma_n = n u / (1 - n u)`` (Higham, *Accuracy and Stability
   of Numerical Algorithms*, 2nd ed., eq. 4.4 and Lemma 3.1); for products ``gamma_{p-1} *
   |exact|``. The exact answer is computed in double-double arithmetic (Knuth's TwoSum,
   Dekker's product), about 2^-104 relative, far inside any bound checked here. ``max`` and
   ``min`` are exact in every order, so their bound is zero. Row columns: ``max_rel_error``
   (normwise, ``max |computed - exact| / max |exact|`` over a rank's result, worst rank: one
   element whose exact sum cancels to nearly 0 does not blow it up) and ``error_bound_ratio``
   (the worst error as a fraction of its bound: at most 1 passes).

For float16 and bfloat16, numpy and ml_dtypes add in float32 and round to the narrow type, a
double rounding, so u is the narrow type's plus float32's (``u16 + u32 + u16 u32``). When
``(p-1) u >= 1`` (fp8 beyond a few ranks, bf16 beyond 256) the bound says nothing and
``error_bound_ratio`` is null. ``verified`` is true when both checks hold.

``ranks_agree`` (allreduce only) says whether every rank holds the same bits. Every algorithm
registered today reduces each element along one tree and sends the finished value to every
rank, or has ranks combine the same partial results pairwise (recursive doubling adds
``lower + upper`` on both sides), so they agree; an algorithm where ranks sum in their own
order (each rank ``x_r`` first) would legitimately not, and the column shows it.

``result_digest`` fingerprints the bits every rank ended with (``sha256:`` and the first 16 hex
digits of the SHA-256 of the results in rank order). The order check compares an algorithm with
itself, so it cannot see an algorithm that now reduces in another order; the digest can:
``{metric: result_digest, equals: ...}`` pins the exact bits, and any reordering (another
algorithm, block cut or chunking) fails it, while ``verified`` still says the new bits are
legitimate.

Integer dtypes with ``values: random`` get random integers over the whole range: wrap-around
arithmetic is exact in any order, so both checks are exact there.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np

from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.dtypes import is_floating
from mpisim.mpi.ops import get_op
from mpisim.mpi.order import NAME, Expressions, OrderPayload
from mpisim.mpi.payload import Payload
from mpisim.mpi.world import World

#: What the ranks' inputs hold: small integers (exact in any order) or random values.
VALUES = ("integers", "random")
#: Row columns that random values add (null with size-only payloads).
COLUMNS = ("verified_order", "max_rel_error", "error_bound_ratio", "ranks_agree", "result_digest")
EXACT_OPS = frozenset({"max", "min"})


def random_input(op: str | None, count: int, dtype: np.dtype, seed: int, rank: int) -> np.ndarray:
    """Return rank *rank*'s random input (*op* is the reduction, or None for a collective that only moves data)."""
    rng = np.random.default_rng([seed, rank])
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=count, dtype=dtype, endpoint=True)
    if op == "prod":
        # Magnitudes around 1 keep a product of many ranks far from overflow and underflow.
        magnitude = np.exp2(rng.uniform(-1.0, 1.0, count))
        return (np.where(rng.random(count) < 0.5, -magnitude, magnitude)).astype(dtype)
    return rng.uniform(-1.0, 1.0, count).astype(dtype)


def unit_roundoff(dtype: np.dtype) -> float:
    """Return u, the largest relative error of one rounded operation in *dtype* (0 for integers).

    Types narrower than float32 are computed in float32 and rounded again (see module docstring).
    """
    if not is_floating(dtype):
        return 0.0
    u = float(ml_dtypes.finfo(dtype).eps) / 2
    if dtype.itemsize < 4:
        u32 = float(np.finfo(np.float32).eps) / 2
        u = u + u32 + u * u32
    return u


def gamma(n: int, u: float) -> float | None:
    """Return gamma_n = n u / (1 - n u), or None when n u >= 1 (no bound)."""
    if n * u >= 1:
        return None
    return n * u / (1 - n * u)


# --------------------------------------------------------------------------------- the order


def record_orders(world: World, count: int, dtype: np.dtype, iterations: int,
                  call: Callable[[Comm, Payload], Proc[Any]]) -> tuple[Expressions, list[np.ndarray | None]]:
    """Run ``call(comm, buf)`` on every rank of *world* with order payloads; return the table and each rank's names.

    The calls are made as the workload makes them (a synchronised start, *iterations* times),
    so the world's timeline, and any arrival order an algorithm reduces in, is the real run's.
    A rank whose call returns nothing gets None.
    """
    table = Expressions(world.size)
    names: list[np.ndarray | None] = [None] * world.size

    def rank_program(comm: Comm) -> Proc[None]:
        buf = OrderPayload.leaf(table, comm.rank, count, dtype)
        result = None
        for _ in range(iterations):
            yield from comm.world.synchronize(comm.world_rank)
            result = yield from call(comm, buf)
        names[comm.rank] = None if result is None else result.names

    world.launch(rank_program)
    world.run()
    return table, names


# --------------------------------------------------------------------------- exact references


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Knuth's TwoSum: s + e == a + b exactly, s = fl(a + b)."""
    s = a + b
    v = s - a
    return s, (a - (s - v)) + (b - v)


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dekker's split of a float64 into two halves of 26 bits: hi + lo == a exactly."""
    c = 134217729.0 * a  # 2^27 + 1
    hi = c - (c - a)
    return hi, a - hi


def _two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dekker's TwoProduct: p + e == a * b exactly, p = fl(a * b)."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def exact_reduction(op: str, inputs: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (hi, lo, scale) per element: the exact sum or product as hi + lo, and what its bound is relative to.

    *scale* is ``sum |x_i|`` for a sum and ``|product|`` for a product. Double-double: each
    step's rounding error is carried in ``lo``, renormalised after every rank.
    """
    hi = np.array(inputs[0], dtype=np.float64)
    lo = np.zeros_like(hi)
    rest = (np.asarray(x, dtype=np.float64) for x in inputs[1:])  # widened one at a time, not all at once
    if op == "sum":
        scale = np.abs(hi)
        for a in rest:
            hi, err = _two_sum(hi, a)
            hi, lo = _two_sum(hi, lo + err)
            scale += np.abs(a)
        return hi, lo, scale
    for a in rest:  # prod
        hi, err = _two_product(hi, a)
        hi, lo = _two_sum(hi, err + lo * a)
    return hi, lo, np.abs(hi)


def digest(results: Sequence[np.ndarray | None]) -> str:
    """Return ``sha256:`` and 16 hex digits of the SHA-256 of every rank's result bytes, in rank order (None: no result)."""
    sha = hashlib.sha256()
    for result in results:
        if result is None:
            sha.update(b"none")
            continue
        array = np.ascontiguousarray(result)
        sha.update(f"{array.dtype.str}:{array.shape[0]}:".encode())
        sha.update(array.view(np.uint8).data)
    return "sha256:" + sha.hexdigest()[:16]  # the prefix keeps YAML from reading all-digit digests as numbers


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """True if *a* and *b* hold identical bit patterns (so -0.0 differs from 0.0, as a result's bits do)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    view = np.dtype(f"u{a.dtype.itemsize}")
    return bool(np.array_equal(a.view(view), b.view(view)))


def check_reduction(op: str, inputs: Sequence[np.ndarray], computed: Sequence[np.ndarray | None],
                    positions: Sequence[np.ndarray | None], table: Expressions,
                    names: Sequence[np.ndarray | None]) -> dict[str, Any]:
    """Check every rank's reduction result: its own order's bits, and the exact answer within the bound.

    ``computed[r]`` is rank r's result and ``positions[r]`` the input elements it holds (None for a
    rank that must return nothing; it is not looked at). ``names[r]`` is the expression replay of
    that rank. Returns the row fields ``verified``, ``verified_order``, ``max_rel_error`` and
    ``error_bound_ratio``.
    """
    dtype = inputs[0].dtype
    ranks = [r for r, pos in enumerate(positions) if pos is not None]
    order_ok = all(computed[r] is not None and names[r] is not None and names[r].shape == positions[r].shape
                   for r in ranks)
    if order_ok:
        replayed = table.evaluate([(names[r], positions[r]) for r in ranks], inputs)  # type: ignore[misc]
        order_ok = all(same_bits(computed[r], want) for r, want in zip(ranks, replayed, strict=True))
    exact = op in EXACT_OPS or not is_floating(dtype)
    worst_rel, worst_ratio, within = 0.0, 0.0, True
    if exact:
        reference = inputs[0]
        for x in inputs[1:]:
            reference = np.asarray(get_op(op)(reference, x), dtype=dtype)
        for r in ranks:
            got = computed[r]
            if got is None or got.shape != positions[r].shape or not np.array_equal(got, reference[positions[r]]):
                within, worst_ratio = False, float("inf")
                worst_rel = max(worst_rel, _relative(got, reference[positions[r]]))
        bound_known = True
    else:
        hi, lo, scale = exact_reduction(op, inputs)
        g = gamma(len(inputs) - 1, unit_roundoff(dtype))
        bound_known = g is not None
        seen: list[int] = []
        for r in ranks:
            got, pos = computed[r], positions[r]
            if got is None or got.shape != pos.shape:
                within, worst_ratio, worst_rel = False, float("inf"), float("inf")
                continue
            if any(_same_result(got, pos, computed[s], positions[s]) for s in seen):
                continue  # every rank of an allreduce usually holds the same bits: measured once
            seen.append(r)
            # NOTE: got and hi are within a factor 2 of each other unless the result is far off,
            # so got - hi is exact (Sterbenz) and the error keeps its small digits.
            at = _index(pos)
            err = np.abs((got.astype(np.float64) - hi[at]) - lo[at])
            worst_rel = max(worst_rel, _normwise(err, np.abs(hi[at] + lo[at])))
            if g is not None:
                ratio = _worst_ratio(err, g * scale[at])
                worst_ratio = max(worst_ratio, ratio)
                within = within and ratio <= 1.0
    return {
        "verified": bool(order_ok and within),
        "verified_order": bool(order_ok),
        "max_rel_error": worst_rel,
        "error_bound_ratio": worst_ratio if bound_known else None,
    }


def _index(pos: np.ndarray) -> slice | np.ndarray:
    """Positions as a slice when they are a contiguous run (a view instead of a gathered copy)."""
    if pos.shape[0] and int(pos[-1]) - int(pos[0]) + 1 == pos.shape[0]:
        return slice(int(pos[0]), int(pos[-1]) + 1)
    return pos


def _same_result(got: np.ndarray, pos: np.ndarray, other: np.ndarray | None, other_pos: np.ndarray | None) -> bool:
    return other_pos is not None and pos.shape == other_pos.shape and bool(np.array_equal(pos, other_pos)) \
        and other is not None and same_bits(got, other)


def _worst_ratio(num: np.ndarray, den: np.ndarray) -> float:
    """max(num / den) with 0/0 = 0 and x/0 = inf."""
    if num.size == 0:
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(num == 0, 0.0, num / den)
    return float(np.max(ratio))


def _normwise(err: np.ndarray, exact: np.ndarray) -> float:
    """max |error| / max |exact|: a relative error that one element's cancellation does not blow up."""
    if err.size == 0 or not err.any():
        return 0.0
    top = float(np.max(exact))
    return float(np.max(err)) / top if top > 0 else float("inf")


def _relative(got: np.ndarray | None, want: np.ndarray) -> float:
    if got is None or got.shape != want.shape:
        return float("inf")
    a, b = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return _normwise(np.abs(a - b), np.abs(b))


def replay_bytes(count: int, itemsize: int, ranks: int) -> int:
    """Estimate the extra memory of the order replay and check for *ranks* buffers of *count* elements.

    The replay holds about as many int32 names as the real run holds elements (inputs,
    results, working blocks: three buffers per rank), and the check a few float64 arrays of
    the vector (reference, scale, positions and the value being evaluated).
    """
    return 3 * ranks * count * NAME.itemsize + 6 * count * 8 + ranks * count * itemsize
