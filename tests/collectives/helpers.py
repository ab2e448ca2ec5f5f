"""Running one collective call on a fresh world, and numpy's answer to compare it with.

``run_collective`` builds a world with :func:`tests.conftest.make_world`, releases every rank
at the same instant (``world.synchronize``, free of simulated cost) and makes one collective
call per rank, with each collective's own argument convention. ``reference`` computes what
each rank must return, with numpy, for any of the nine collectives.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from mpisim.collectives import registry
from mpisim.mpi import SUM, Op, Payload
from mpisim.mpi.world import World
from tests.conftest import make_world

ROOTED = frozenset({"bcast", "reduce", "gather", "scatter"})
REDUCING = frozenset({"reduce", "allreduce", "reduce_scatter"})

#: Non-commutative, associative ops: together they catch a reduction taken out of rank order.
FIRST = Op.Create(lambda a, b: np.array(a, copy=True), commute=False, name="first")
LAST = Op.Create(lambda a, b: np.array(b, copy=True), commute=False, name="last")


def _compose(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Affine maps t -> m*t + c (mod 2^16) packed as m*2^16 + c; the result is "a, then b"."""
    ma, ca = a >> 16, a & 0xFFFF
    mb, cb = b >> 16, b & 0xFFFF
    return ((mb * ma) & 0xFFFF) << 16 | ((mb * ca + cb) & 0xFFFF)


#: Composition of affine maps: associative, and every reordering of operands shows (int64 data).
AFFINE = Op.Create(_compose, commute=False, name="affine")


def split_target(target: registry.Algorithm | str) -> tuple[str, str | None]:
    """Return (collective, algorithm name or None) for an Algorithm, ``"coll/name"`` or ``"coll"``."""
    if isinstance(target, registry.Algorithm):
        return target.collective, target.name
    collective, _, name = target.partition("/")
    return collective, name or None


def call_collective(comm: Any, target: registry.Algorithm | str, buf: Any, op: Op = SUM, root: int = 0) -> Any:
    """Make one collective call on *comm* with that collective's argument convention; return its result."""
    collective, name = split_target(target)
    if collective == "barrier":
        return (yield from comm.barrier(algorithm=name))
    kwargs: dict[str, Any] = {"algorithm": name}
    if collective in ROOTED:
        kwargs["root"] = root
    if collective in REDUCING:
        kwargs["op"] = op
    return (yield from getattr(comm, collective)(buf, **kwargs))


def run_collective(target: registry.Algorithm | str, inputs: list[Any] | None, p: int, op: Op = SUM,
                   root: int = 0, *, algorithms: dict[str, str] | None = None, selector: str = "mpich",
                   **world_kwargs: Any) -> tuple[list[Any], World]:
    """Run one collective call on a new world of *p* ranks; return (each rank's result, world).

    *target* is a registered Algorithm, ``"allreduce/ring"``, ``"allreduce/auto"`` or just
    ``"allreduce"`` (no ``algorithm=``: the world's default, then ``auto``). *inputs* holds one
    numpy array or Payload per rank (``None`` for barrier). *algorithms* and *selector* set
    the world's per-collective defaults and ``auto`` rule set; other keywords go to make_world.
    """
    world = make_world(p, **world_kwargs)
    world.algorithms = dict(algorithms or {})
    world.selector = selector

    def program(comm):
        yield from comm.world.synchronize(comm.world_rank)
        buf = None if inputs is None else inputs[comm.rank]
        return (yield from call_collective(comm, target, buf, op, root))

    procs = world.launch(program)
    world.run()
    return [proc.value for proc in procs], world


def elapsed(world: World) -> float:
    """Collective time: last rank's exit minus first rank's entry."""
    records = world.tracer.collectives
    return max(r.t_exit for r in records) - min(r.t_enter for r in records)


def reference(collective: str, inputs: list[np.ndarray], op: Op = SUM, root: int = 0) -> list[np.ndarray | None]:
    """Return what each rank must get back, computed with numpy (``None`` where MPI returns nothing)."""
    p = len(inputs)
    if collective == "barrier":
        return [None] * p
    if collective in REDUCING:
        dtype = inputs[0].dtype
        total = functools.reduce(lambda a, b: np.asarray(op(a, b), dtype=dtype), inputs)
        if collective == "allreduce":
            return [total] * p
        if collective == "reduce":
            return [total if r == root else None for r in range(p)]
        return np.array_split(total, p)
    if collective == "bcast":
        return [inputs[root]] * p
    if collective == "allgather":
        return [np.concatenate(inputs)] * p
    if collective == "gather":
        return [np.concatenate(inputs) if r == root else None for r in range(p)]
    if collective == "scatter":
        return np.array_split(inputs[root], p)
    if collective == "alltoall":
        blocks = [np.array_split(x, p) for x in inputs]
        return [np.concatenate([blocks[src][dst] for src in range(p)]) for dst in range(p)]
    raise ValueError(f"unknown collective {collective!r}")


def as_array(result: Any) -> Any:
    """Return a result as an array (Payloads unwrapped), ``None`` staying ``None``."""
    if isinstance(result, Payload):
        return result.array
    return result
