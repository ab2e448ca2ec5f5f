"""Derived datatypes: a matrix column (vector), indexed blocks, a struct, a subarray, 2-D blocks scattered with a resized subarray."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

# the extents and sizes MPI gives each constructor
column = MPI.DOUBLE.Create_vector(4, 1, 5).Commit()
pair = MPI.Datatype.Create_struct([1, 1], [0, 8], [MPI.DOUBLE, MPI.INT]).Commit()
box = MPI.INT.Create_subarray([4, 5], [2, 3], [1, 1]).Commit()
picked = MPI.INT.Create_indexed([2, 1], [5, 0]).Commit()
if rank == 0:
    for name, t in (("column", column), ("pair", pair), ("box", box), ("picked", picked),
                    ("contig", MPI.INT.Create_contiguous(3))):
        print(name, t.Get_size(), t.Get_extent(), t.Get_true_extent())

# a column of a 4x5 matrix, rank 0 -> 1, into a column of another matrix
if rank == 0:
    a = np.arange(20, dtype="d").reshape(4, 5)
    comm.Send([a, 1, column], dest=1, tag=1)
    comm.Send([a[:, 3:].copy(), 1, MPI.DOUBLE.Create_vector(4, 1, 2).Commit()], dest=1, tag=5)
elif rank == 1:
    b = np.zeros((4, 5))
    comm.Recv([b, 1, column], source=0, tag=1)
    got = np.zeros((4, 5))
    st = MPI.Status()
    comm.Recv([got, 1, column], source=0, tag=5, status=st)
    print("column", b[:, 0].tolist(), got[:, 0].tolist(), st.Get_count(MPI.DOUBLE), st.Get_count(column))

# indexed blocks and a struct
if rank == 0:
    comm.Send([np.arange(8, dtype="i"), 1, picked], dest=size - 1, tag=2)
    rec = np.zeros(2, dtype=np.dtype({"names": ["x", "n"], "formats": ["f8", "i4"], "offsets": [0, 8], "itemsize": 16}))
    rec["x"], rec["n"] = [1.5, 2.5], [7, 9]
    comm.Send([rec, 2, pair], dest=size - 1, tag=3)
if rank == size - 1:
    into = np.full(8, -1, dtype="i")
    comm.Recv([into, 1, picked], source=0, tag=2)
    rec = np.zeros(2, dtype=np.dtype({"names": ["x", "n"], "formats": ["f8", "i4"], "offsets": [0, 8], "itemsize": 16}))
    comm.Recv([rec, 2, pair], source=0, tag=3)
    print("indexed", into.tolist(), "struct", rec["x"].tolist(), rec["n"].tolist())

# a 2-D block decomposition: scatter blocks of an (2*size) x 4 matrix with a resized subarray
rows = 2
whole = np.arange(2 * size * 4, dtype="i").reshape(2 * size, 4) if rank == 0 else None
block = MPI.INT.Create_subarray([2 * size, 4], [rows, 4], [0, 0]).Create_resized(0, 4 * 4).Commit()
mine = np.zeros((rows, 4), dtype="i")
comm.Scatterv([whole, [1] * size, [r * rows for r in range(size)], block] if rank == 0 else None, mine, root=0)
print("block", mine.tolist())
mine += 100
back = np.zeros((2 * size, 4), dtype="i") if rank == 0 else None
comm.Gatherv(mine, [back, [1] * size, [r * rows for r in range(size)], block] if rank == 0 else None, root=0)
if rank == 0:
    print("gathered", back[:, 0].tolist())

# the box of a 4x5 matrix, broadcast
m = np.arange(20, dtype="i").reshape(4, 5) if rank == 0 else np.zeros((4, 5), dtype="i")
comm.Bcast([m, 1, box], root=0)
print("box", m.sum(), m[1:3, 1:4].tolist())
for t in (column, pair, box, picked, block):
    t.Free()
