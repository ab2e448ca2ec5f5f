"""Type maps as runs of contiguous bytes: size, extent and packing cost O(runs), and move exactly the mapped bytes.

What a type map covers is checked against numpy's own indexing (a vector is a strided slice,
a subarray a box of an ndarray), whatever the run lengths (short runs go through one index
array, long ones are copied as slices); its bounds and bytes against MPICH in
:mod:`tests.compat.test_mpich_programs` (``programs/datatype_maps.py``).
"""

from __future__ import annotations

import contextlib
import io
import json
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpisim.cli import main
from mpisim.compat import typemap as tm
from mpisim.compat.datatypes import DATATYPES
from mpisim.errors import MPIError

BYTE, DOUBLE, INT = (tm.named(np.dtype(c)) for c in ("u1", "f8", "i4"))


def test_a_2_gib_contiguous_type_is_one_run_and_its_size_is_exact():
    count = (1 << 31) - 1 + ((1 << 31) - 1) // 1024  # mpi4py's testContiguousBigMPI: past a C int
    t = tm.contiguous(count, BYTE)
    assert (t.runs, t.size, t.lb, t.extent) == (1, count, 0, count)
    assert tm.reach(t, 3) == 3 * count
    big = DATATYPES["BYTE"].Create_contiguous(count)
    assert big.Get_size() == count and big.decode()[1:] == ("CONTIGUOUS", {"count": count})


def test_runs_that_touch_are_joined_and_a_vector_of_touching_blocks_is_contiguous():
    assert tm.vector(1000, 3, 3, DOUBLE).runs == 1  # stride == blocklength: one run of 24000 B
    assert tm.vector(1000, 2, 3, DOUBLE).runs == 1000
    assert tm.contiguous(10**12, tm.contiguous(4, INT)).size == 16 * 10**12  # O(1), no bytes listed


def test_a_type_of_too_many_separate_blocks_is_refused_with_an_mpi_error():
    with pytest.raises(MPIError, match="separate blocks"):
        tm.vector(tm.MAX_RUNS + 1, 1, 2, BYTE)


def _numpy_equivalents():
    a = np.arange(4 * 5 * 6, dtype="f8").reshape(4, 5, 6)
    yield tm.vector(5, 2, 6, DOUBLE), a.reshape(-1)[:5 * 6].reshape(5, 6)[:, :2].reshape(-1)
    yield tm.subarray([4, 5, 6], [2, 3, 4], [1, 2, 1], tm.ORDER_C, DOUBLE), a[1:3, 2:5, 1:5].reshape(-1)
    f = np.arange(4 * 5 * 6, dtype="f8").reshape((4, 5, 6), order="F")  # the first index fastest in memory
    yield (tm.subarray([4, 5, 6], [2, 3, 4], [1, 2, 1], tm.ORDER_FORTRAN, DOUBLE),
           f[1:3, 2:5, 1:5].reshape(-1, order="F"))
    yield tm.indexed([2, 1], [7, 0], DOUBLE), a.reshape(-1)[[7, 8, 0]]
    yield tm.hvector(3, 1, -16, DOUBLE), a.reshape(-1)[[4, 2, 0]]


@pytest.mark.parametrize("n", range(5))
def test_packing_gathers_what_numpy_indexing_gathers(n):
    tmap, expected = list(_numpy_equivalents())[n]
    a = np.arange(4 * 5 * 6, dtype="f8")
    start = 4 if n == 4 else 0  # the negative stride reads before the element's start
    packed = tm.pack(a, tm.resized(0, 32, tmap) if n == 4 else tmap, 1, start // 4)
    assert packed.dtype == np.float64 and packed.tolist() == expected.tolist()


@settings(max_examples=60, deadline=None)
@given(count=st.integers(1, 5), blocklength=st.integers(1, 700), gap=st.integers(0, 900),
       elements=st.integers(1, 3))
def test_pack_then_unpack_moves_exactly_the_mapped_bytes(count, blocklength, gap, elements):
    """Short and long runs alike: packing reads the map's bytes in order, unpacking writes them back and nothing else."""
    t = tm.hvector(count, blocklength, blocklength + gap, BYTE)
    memory = np.random.default_rng(count * 1000 + gap).integers(0, 256, tm.reach(t, elements), dtype=np.uint8)
    offsets = tm.indices(t, elements)
    assert tm.pack(memory, t, elements).tolist() == memory[offsets].tolist()
    back = np.zeros_like(memory)
    tm.unpack(back, t, elements, memory[offsets])
    covered = np.zeros(memory.size, bool)
    covered[offsets] = True
    assert (back[covered] == memory[covered]).all() and not back[~covered].any()


def test_a_message_of_a_type_over_64_mib_moves_exactly_its_bytes(tmp_path):
    """The old byte-by-byte maps refused it; two 33 MiB blocks with a gap now travel, and only they."""
    path = tmp_path / "big.py"
    path.write_text(textwrap.dedent("""\
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        block, stride = 33 << 20, 40 << 20
        t = MPI.BYTE.Create_hvector(2, block, stride).Commit()
        if comm.rank == 0:
            a = (np.arange(stride + block) % 251).astype(np.uint8)
            comm.Send([a, 1, t], dest=1)
        else:
            b = np.zeros(stride + block, np.uint8)
            comm.Recv([b, 1, t], source=0)
            ref = (np.arange(stride + block) % 251).astype(np.uint8)
            ok = (b[:block] == ref[:block]).all() and (b[stride:] == ref[stride:]).all()
            assert ok and not b[block:stride].any(), "the received bytes differ from the type map's"
        """))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(["exec", "-n", "2", "--json", str(path)]) == 0, err.getvalue()
    assert json.loads(out.getvalue())["results"][0]["bytes"] == 2 * (33 << 20)
