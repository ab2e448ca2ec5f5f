"""Derived datatypes move exactly the bytes their type map covers, and the network is charged for those only.

(What they deliver is checked against MPICH's output in :mod:`tests.compat.test_mpich_programs`.)
"""

from __future__ import annotations

import contextlib
import io
import json
import textwrap

import numpy as np
import pytest

from mpisim.cli import main
from mpisim.compat import typemap
from mpisim.compat.buffers import DATATYPES, BufferSpecError, parse


def _bytes_moved(tmp_path, send: str) -> int:
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent(f"""\
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        a = np.arange(400, dtype="d").reshape(20, 20)
        if comm.rank == 0:
            comm.Send({send}, dest=1)
        else:
            comm.Recv({send}, source=0)
        """))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(["exec", "-n", "2", "--json", str(path)]) == 0, err.getvalue()
    return json.loads(out.getvalue())["results"][0]["bytes"]


@pytest.mark.parametrize(("send", "nbytes"), [
    ("[a, 1, MPI.DOUBLE.Create_vector(20, 1, 20).Commit()]", 20 * 8),  # a column
    ("[a, 3, MPI.DOUBLE.Create_vector(20, 1, 20).Create_resized(0, 8).Commit()]", 3 * 20 * 8),  # 3 columns
    ("[a, 1, MPI.DOUBLE.Create_subarray([20, 20], [5, 4], [2, 3]).Commit()]", 5 * 4 * 8),
    ("[a, 1, MPI.DOUBLE.Create_indexed([1, 2, 3], [0, 10, 100]).Commit()]", 6 * 8),
    ("[a, 400, MPI.DOUBLE]", 400 * 8),
])
def test_a_message_carries_the_bytes_its_type_map_covers(tmp_path, send, nbytes):
    assert _bytes_moved(tmp_path, send) == nbytes


def test_packing_follows_the_type_map_and_unpacking_puts_the_bytes_back():
    a = np.arange(30, dtype="d").reshape(5, 6)
    column = DATATYPES["DOUBLE"].Create_vector(5, 1, 6)
    spec = parse([a, 1, column])
    assert spec.array.tolist() == a[:, 0].tolist()
    spec.array[:] = -1.0
    spec.finish()
    assert a[:, 0].tolist() == [-1.0] * 5 and a[:, 1].tolist() == [1.0, 7.0, 13.0, 19.0, 25.0]


def test_struct_extent_is_padded_to_its_alignment_as_c_pads_it():
    t = typemap.struct([1, 1], [0, 8], [typemap.named(np.dtype("f8")), typemap.named(np.dtype("i4"))])
    assert (t.size, t.lb, t.extent, t.true_extent()) == (12, 0, 16, (0, 12))
    # two elements: the second one starts an extent (16 B) later, its int at byte 24
    assert typemap.indices(t, 2)[12:20].tolist() == list(range(16, 24))


def test_fortran_ordered_subarray_is_the_transposed_box():
    c = typemap.subarray([3, 4], [2, 2], [1, 0], typemap.ORDER_C, typemap.named(np.dtype("u1")))
    f = typemap.subarray([4, 3], [2, 2], [0, 1], typemap.ORDER_FORTRAN, typemap.named(np.dtype("u1")))
    assert c.offsets.tolist() == [4, 5, 8, 9] and sorted(f.offsets.tolist()) == [4, 5, 8, 9]


def test_a_buffer_too_small_for_the_type_map_is_refused_naming_the_reach():
    with pytest.raises(BufferSpecError, match="reach past the buffer's 40 bytes"):
        parse([np.zeros(5), 2, DATATYPES["DOUBLE"].Create_vector(3, 1, 2)])
