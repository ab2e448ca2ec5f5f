"""Scan and Exscan under mpisim exec, checked against references computed here, outside the program.

MPICH (and mpi4py, for objects) computes prefix reductions by recursive doubling: rank r
starts from its own value and, for each bit set in r from the lowest up, puts on the left the
reduction of the block of ranks just below, itself reduced in halves. :func:`prefix` writes
that order down directly, so float sums are compared bit for bit with it; it is not a
left-to-right sum (:func:`test_the_mpich_order_is_not_a_left_to_right_sum`), so agreeing
with it means agreeing with MPICH's rounding. The corpus program ``scan.py`` is also compared
with a live MPICH run (tests/compat/test_corpus.py).
"""

from __future__ import annotations

import json
from functools import reduce

import numpy as np
import pytest

from tests.compat.test_mpi4py_api import ok, run

RANKS = (1, 2, 3, 5, 7, 8)
MOD = 1000003

PROGRAM = """\
    import json
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.rank
    hexes = lambda a: [float(v).hex() for v in a]
    got = {"rank": rank}

    x = np.array([0.1 * rank + 1e-9 * i for i in range(6)])
    s = np.zeros(6)
    comm.Scan(x, s, op=MPI.SUM)
    e = np.full(6, -7.0)
    comm.Exscan([x, MPI.DOUBLE], [e, MPI.DOUBLE])
    s_in, e_in = x.copy(), x.copy()
    comm.Scan(MPI.IN_PLACE, s_in)
    comm.Exscan(MPI.IN_PLACE, e_in, op=MPI.SUM)
    got.update(Scan=hexes(s), Exscan=hexes(e), Scan_in_place=hexes(s_in), Exscan_in_place=hexes(e_in))

    v = np.array([(rank * 7) % 5 - 2, (rank * 3) % 4, rank + 1], dtype="i")
    for name in ("MAX", "MIN", "PROD"):
        r, q = np.zeros(3, dtype="i"), np.full(3, -99, dtype="i")
        comm.Scan([v, MPI.INT], [r, MPI.INT], op=getattr(MPI, name))
        comm.Exscan([v, 3, MPI.INT], [q, 3, MPI.INT], op=getattr(MPI, name))
        got[name] = [r.tolist(), q.tolist()]

    def matmul(invec, inoutvec, datatype):  # invec @ inoutvec: associative, not commutative
        a = np.frombuffer(invec, dtype="l").reshape(2, 2)
        b = np.frombuffer(inoutvec, dtype="l").reshape(2, 2)
        b[...] = (a @ b) % MOD

    MOD = 1000003  # the test's MOD
    MATMUL = MPI.Op.Create(matmul, commute=False)
    m = np.array([[1, rank + 1], [rank, 2 * rank + 3]], dtype="l")
    r, q = np.zeros((2, 2), dtype="l"), np.full((2, 2), -1, dtype="l")
    comm.Scan(m, r, op=MATMUL)
    comm.Exscan(m, q, op=MATMUL)
    got["matmul"] = [r.tolist(), q.tolist()]

    def merge(a, b, datatype):  # counts add up; "order" concatenates, so it is not commutative
        c = dict(b)
        for key, n in a.items():
            c[key] = n + c[key] if key in c else n  # a's on the left
        return c

    PAREN = MPI.Op.Create(lambda a, b, datatype: f"({a}{b})", commute=False)
    MERGE = MPI.Op.Create(merge, commute=False)
    mine = {"n": 1, f"k{rank % 3}": rank, "order": str(rank)}
    got.update(scan=comm.scan(0.1 * rank + 1e-9).hex(), exscan=comm.exscan(rank + 1),
               scan_list=comm.scan([rank]), exscan_max=comm.exscan((rank * 7) % 5, op=MPI.MAX),
               paren=[comm.scan(str(rank), op=PAREN), comm.exscan(str(rank), op=PAREN)],
               merge=[comm.scan(mine, op=MERGE), comm.exscan(mine, op=MERGE)])
    print(json.dumps(got))
    """


def tree(xs: list, lo: int, m: int, op) -> object:
    """The reduction of ranks lo..lo+m-1 (m a power of two) as recursive doubling pairs them: halves, lower left."""
    if m == 1:
        return xs[lo]
    return op(tree(xs, lo, m // 2, op), tree(xs, lo + m // 2, m // 2, op))


def prefix(xs: list, r: int, op, inclusive: bool) -> object:
    """What rank r gets: its own value (Scan only), then each block below it on the left, the nearest first."""
    acc = xs[r] if inclusive else None
    bit = 1
    while bit <= r:
        if r & bit:
            block = tree(xs, r & ~(2 * bit - 1), bit, op)
            acc = block if acc is None else op(block, acc)
        bit <<= 1
    return acc


def hexes(a) -> list[str]:
    return [float(v).hex() for v in a]


def results(tmp_path, p: int) -> list[dict]:
    lines = [json.loads(line) for line in ok(tmp_path, PROGRAM, p).splitlines()]
    assert sorted(x["rank"] for x in lines) == list(range(p))
    return sorted(lines, key=lambda x: x["rank"])


@pytest.mark.parametrize("p", RANKS)
def test_scan_and_exscan_of_float_buffers_add_in_mpichs_order_bit_for_bit(tmp_path, p):
    got = results(tmp_path, p)
    xs = [np.array([0.1 * r + 1e-9 * i for i in range(6)]) for r in range(p)]
    add = np.add
    for r in range(p):
        scan = hexes(prefix(xs, r, add, inclusive=True))
        assert got[r]["Scan"] == scan, r
        assert got[r]["Scan_in_place"] == scan, r
        if r == 0:  # MPI leaves rank 0's Exscan result undefined; MPICH and mpisim leave the buffer alone
            assert got[0]["Exscan"] == hexes(np.full(6, -7.0))
            assert got[0]["Exscan_in_place"] == hexes(xs[0])
        else:
            exscan = hexes(prefix(xs, r, add, inclusive=False))
            assert got[r]["Exscan"] == exscan, r
            assert got[r]["Exscan_in_place"] == exscan, r
    # and the numbers are the sums, whatever their order
    np.testing.assert_allclose([[float.fromhex(h) for h in g["Scan"]] for g in got], np.cumsum(xs, axis=0),
                               rtol=1e-15)


@pytest.mark.parametrize("p", RANKS)
def test_scan_and_exscan_of_int_buffers_with_max_min_prod_and_a_noncommutative_op(tmp_path, p):
    got = results(tmp_path, p)
    vs = np.array([[(r * 7) % 5 - 2, (r * 3) % 4, r + 1] for r in range(p)], dtype="i")
    for name, ufunc in (("MAX", np.maximum), ("MIN", np.minimum), ("PROD", np.multiply)):
        running = ufunc.accumulate(vs, axis=0)
        for r in range(p):
            scan, exscan = got[r][name]
            assert scan == running[r].tolist(), (name, r)
            assert exscan == (running[r - 1].tolist() if r else [-99] * 3), (name, r)
    ms = [np.array([[1, r + 1], [r, 2 * r + 3]], dtype=np.int64) for r in range(p)]
    matmul = lambda a, b: (a @ b) % MOD  # noqa: E731
    for r in range(p):
        scan, exscan = got[r]["matmul"]
        assert scan == reduce(matmul, ms[:r + 1]).tolist(), r  # M0 M1 ... Mr: the ranks in order
        assert exscan == (reduce(matmul, ms[:r]).tolist() if r else [[-1, -1], [-1, -1]]), r


@pytest.mark.parametrize("p", RANKS)
def test_scan_and_exscan_of_objects_follow_mpi4py_and_exscan_gives_none_on_rank_0(tmp_path, p):
    got = results(tmp_path, p)
    floats = [0.1 * r + 1e-9 for r in range(p)]
    paren = lambda a, b: f"({a}{b})"  # noqa: E731
    digits = [str(r) for r in range(p)]
    mine = [{"n": 1, f"k{r % 3}": r, "order": str(r)} for r in range(p)]

    def merge(a, b):
        c = dict(b)
        for key, n in a.items():
            c[key] = n + c[key] if key in c else n  # a's on the left
        return c

    assert got[0]["exscan"] is None and got[0]["exscan_max"] is None
    assert got[0]["paren"][1] is None and got[0]["merge"][1] is None
    for r in range(p):
        assert got[r]["scan"] == prefix(floats, r, float.__add__, inclusive=True).hex(), r
        assert got[r]["scan_list"] == list(range(r + 1))
        # the tree's shape, in mpi4py's order: rank 6 of 8 gets (((01)(23))((45)6))
        assert got[r]["paren"][0] == prefix(digits, r, paren, inclusive=True), r
        assert got[r]["merge"][0] == reduce(merge, mine[:r + 1]), r
        if r:
            assert got[r]["exscan"] == r * (r + 1) // 2
            assert got[r]["exscan_max"] == max((k * 7) % 5 for k in range(r))
            assert got[r]["paren"][1] == prefix(digits, r, paren, inclusive=False), r
            assert got[r]["merge"][1] == reduce(merge, mine[:r]), r
    if p == 8:
        assert got[6]["paren"] == ["(((01)(23))((45)6))", "(((01)(23))(45))"]


def test_the_mpich_order_is_not_a_left_to_right_sum():
    """Else the bit-for-bit checks above could not tell MPICH's order from a running sum."""
    xs = [np.array([0.1 * r + 1e-9 * i for i in range(6)]) for r in range(8)]
    running = np.cumsum(xs, axis=0)
    assert any(hexes(prefix(xs, r, np.add, True)) != hexes(running[r]) for r in range(8))


def test_scan_is_a_collective_whose_calls_must_match(tmp_path):
    code, _, err = run(tmp_path, """\
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        a, b = np.ones(2), np.zeros(2)
        if comm.rank == 1:
            comm.Exscan(a, b)
        else:
            comm.Scan(a, b)
        """, 3)
    assert code == 1
    assert "scan(16 B, op=sum)" in err and "exscan(16 B, op=sum)" in err, err
