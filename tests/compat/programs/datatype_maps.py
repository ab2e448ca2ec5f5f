"""Derived datatypes taken apart: each one's envelope, contents, bounds, and the bytes a message of it moves.

Rank 0 sends one element of each type from a buffer whose byte i holds i's low (then high)
byte; rank 1 receives it as plain bytes and prints the buffer offsets it got, in the order
they travelled (the type map's order). A type whose bytes lie before its start is shifted
by 256 bytes first (a struct around it), so every offset lies inside the buffer.
"""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
D, N, S, B = MPI.DOUBLE, MPI.INT, MPI.SHORT, MPI.BYTE
BLOCK, CYCLIC, NONE, DFLT = MPI.DISTRIBUTE_BLOCK, MPI.DISTRIBUTE_CYCLIC, MPI.DISTRIBUTE_NONE, MPI.DISTRIBUTE_DFLT_DARG
C, F = MPI.ORDER_C, MPI.ORDER_F
CASES = [
    ("contiguous", D.Create_contiguous(3)),
    ("vector", D.Create_vector(3, 2, 4)),
    ("vector, empty blocks", N.Create_vector(2, 0, 3)),
    ("vector, negative stride", N.Create_vector(3, 2, -4)),
    ("hvector, overlapping", B.Create_hvector(3, 4, 2)),
    ("hvector, negative stride", S.Create_hvector(3, 2, -5)),
    ("indexed", N.Create_indexed([2, 0, 1], [5, 1, 0])),
    ("hindexed", S.Create_hindexed([1, 2], [7, -3])),
    ("indexed_block", D.Create_indexed_block(2, [4, 0, 9])),
    ("hindexed_block", N.Create_hindexed_block(1, [12, 0, 5])),
    ("struct", MPI.Datatype.Create_struct([2, 1, 3], [0, 20, 24], [S, D, B])),
    ("struct, a zero block", MPI.Datatype.Create_struct([1, 0, 1], [4, -16, 9], [N, D, B])),
    ("struct of pairs", MPI.Datatype.Create_struct([2], [0], [MPI.DOUBLE_INT])),
    ("resized", D.Create_resized(-3, 5)),
    ("contiguous of resized", N.Create_resized(0, 6).Create_contiguous(3)),
    ("vector of struct", MPI.Datatype.Create_struct([1, 1], [0, 8], [D, N]).Create_vector(2, 1, 2)),
    ("dup of vector", N.Create_vector(2, 1, 3).Dup()),
    ("subarray C", N.Create_subarray([3, 4, 5], [2, 2, 3], [1, 0, 2], C)),
    ("subarray F", N.Create_subarray([3, 4, 5], [2, 2, 3], [1, 0, 2], F)),
    ("darray block C", N.Create_darray(4, 1, [4, 6], [BLOCK, BLOCK], [DFLT, DFLT], [2, 2], C)),
    ("darray block F", N.Create_darray(4, 2, [4, 6], [BLOCK, BLOCK], [DFLT, DFLT], [2, 2], F)),
    ("darray cyclic C", S.Create_darray(6, 4, [7, 9], [CYCLIC, CYCLIC], [DFLT, 2], [3, 2], C)),
    ("darray cyclic F", S.Create_darray(6, 5, [7, 9], [CYCLIC, CYCLIC], [2, DFLT], [3, 2], F)),
    ("darray mixed", B.Create_darray(3, 2, [5, 4, 3], [CYCLIC, NONE, BLOCK], [2, DFLT, DFLT], [3, 1, 1], C)),
    ("darray 3-D cyclic F", B.Create_darray(8, 5, [5, 3, 4], [CYCLIC] * 3, [DFLT] * 3, [2, 2, 2], F)),
    ("f90 real", MPI.Datatype.Create_f90_real(10, 100)),
    ("subarray, an empty box", D.Create_subarray([4, 5], [0, 3], [1, 1])),
    ("hindexed, empty blocks", N.Create_hindexed([0, 0], [8, 100])),
    ("indexed, an empty block first", N.Create_indexed([0, 2], [8, 1])),
    ("contiguous of nothing", N.Create_contiguous(0).Create_contiguous(3)),
    ("vector of extent 0", N.Create_resized(0, 0).Create_vector(3, 1, 1)),
    ("pairs", MPI.Datatype.Create_struct([1, 1, 1], [0, 16, 48], [MPI.DOUBLE_INT, MPI.SHORT_INT, MPI.LONG_DOUBLE_INT])),
]

for name, t in CASES:
    t.Commit()
    lb, extent = t.Get_extent()
    true_lb, true_extent = t.Get_true_extent()
    shift = 256 if true_lb < 0 else 0
    wrapped = MPI.Datatype.Create_struct([1], [shift], [t]).Commit()
    span = shift + true_lb + true_extent
    got = []
    for part in (0, 1):
        if rank == 0:
            data = ((np.arange(span) >> (8 * part)) & 255).astype(np.uint8)
            comm.Send([data, 1, wrapped], dest=1, tag=part)
        elif rank == 1:
            into = np.zeros(t.Get_size(), np.uint8)
            comm.Recv([into, MPI.BYTE], source=0, tag=part)
            got.append(into.astype(int))
    if rank == 1:
        env = t.Get_envelope()
        contents = t.Get_contents()
        offsets = (got[0] + 256 * got[1] - shift).tolist() if got else []
        _, combiner, params = t.decode()
        params = {key: [d.Get_name() for d in value] if key == "datatypes" else value for key, value in params.items()}
        print(name, "| size", t.Get_size(), "| extent", (lb, extent), "| true", (true_lb, true_extent),
              "| envelope", env, "| contents", contents[:3], [d.Get_name() for d in contents[3]],
              "| decode", combiner, params, "| offsets", offsets)

if rank == 1:  # the named pair types: C's padding is in the extent, not in the size or the true extent
    for t in (MPI.DOUBLE_INT, MPI.SHORT_INT, MPI.LONG_DOUBLE_INT, MPI.FLOAT_INT):
        print(t.Get_name(), t.Get_size(), t.Get_extent(), t.Get_true_extent())
