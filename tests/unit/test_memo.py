"""The per-world memo (mpisim.engine.memo): owned by its world, never shared, freed with it."""

from __future__ import annotations

import gc
import weakref

from mpisim.engine.memo import Memo
from tests.conftest import make_world, run_program


class Plan:
    """Something worked out once per world (weakly referenceable, to see when it is freed)."""

    def __init__(self, value: int) -> None:
        self.value = value


def test_a_table_is_made_once_and_kept():
    memo = Memo()
    table = memo.table("fluid.plans")
    table["ring", 8] = 3
    assert memo.table("fluid.plans") is table
    assert memo.table("tuner.choices") == {}
    assert memo.names() == ["fluid.plans", "tuner.choices"]
    assert memo.entries() == 1
    memo.clear()
    assert memo.names() == [] and memo.table("fluid.plans") == {}


def test_two_worlds_in_one_process_never_share_entries():
    first, second = make_world(4), make_world(4)
    first.memo.table("plans")["key"] = Plan(1)
    assert first.memo is not second.memo
    assert "key" not in second.memo.table("plans")

    def program(comm):
        plans = comm.world.memo.table("plans")
        if "key" not in plans:
            plans["key"] = Plan(comm.world.size)
        yield from comm.barrier()
        return plans["key"].value

    assert run_program(first, program) == [1] * 4
    assert run_program(second, program) == [4] * 4


def test_the_memo_is_freed_with_its_world():
    world = make_world(4)
    run_program(world, lambda comm: comm.barrier())
    plan = Plan(7)
    world.memo.table("plans")["key"] = plan
    alive = weakref.ref(plan)
    del plan, world
    gc.collect()
    assert alive() is None
