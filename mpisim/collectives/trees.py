"""Tree shapes of NCCL's double binary tree, and the segments its pipelines move.

Pure functions of (ranks, rank): the MPI-side ``double_binary_tree`` allreduce, NCCL's
trees (:mod:`mpisim.collectives.nccl.topology`) and their collective-fidelity twin
(:mod:`mpisim.collectives.fluid.tree`) all build their trees from these.
"""

from __future__ import annotations

#: Slots of one NCCL connection (NCCL_STEPS, src/include/device.h): a sender may have this many
#: segments on an edge that its receiver has not consumed yet.
NCCL_STEPS = 8
#: Segment size (bytes) of the double binary tree: NCCL's Simple-protocol slot (its 4 MiB
#: buffer over NCCL_STEPS slots).
DBT_SEGMENT = 4 * 2**20 // NCCL_STEPS


def binary_tree(p: int, r: int) -> tuple[int | None, list[int]]:
    """Return (parent, children) of rank r in NCCL's binary tree over ranks 0..p-1.

    In-order layout (NCCL ``ncclGetBtree``): a rank whose lowest set bit is b has the
    children r - b/2 and r + b/2 (the second lowered by halving b/2 until it is below p) and
    the parent (r - b) | 2b, or r - b when that is not below p. Odd ranks are the leaves.
    Rank 0 is the root and has one child, the largest power of two below p.
    """
    bit = 1
    while bit < p and not r & bit:
        bit <<= 1
    if r == 0:
        return None, [bit >> 1] if p > 1 else []
    parent = (r ^ bit) | (bit << 1)
    if parent >= p:
        parent = r ^ bit
    low = bit >> 1
    children = [r - low] if low else []
    while low and r + low >= p:
        low >>= 1
    if low:
        children.append(r + low)
    return parent, children


def double_binary_tree(p: int, r: int) -> list[tuple[int | None, list[int]]]:
    """Return rank r's (parent, children) in NCCL's two complementary trees (``ncclGetDtree``).

    Tree 0 is :func:`binary_tree`. Tree 1 is the same shape mirrored (rank r plays r' = p-1-r)
    when p is even, shifted by one (r plays r-1 mod p) when p is odd. The leaves of one tree
    (odd positions) are then interior ranks of the other -- every rank is a leaf in exactly
    one tree for p even; for p odd, rank 0 is interior in both -- so the two trees share the
    interior work.
    """
    if p % 2 == 0:
        there = back = lambda x: p - 1 - x  # the mirror is its own inverse
    else:
        there, back = (lambda x: (x - 1) % p), (lambda x: (x + 1) % p)
    parent, children = binary_tree(p, there(r))
    return [binary_tree(p, r), (None if parent is None else back(parent), [back(c) for c in children])]
