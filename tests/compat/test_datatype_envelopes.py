"""Datatype decoding, as MPICH 5.0.2 with mpi4py 4.1.2 gives it (the values below were read from them).

Envelopes and contents in MPICH's large-count layout, ``decode`` rebuilding the same type,
pickling, the Fortran-90 parameterized types, ``Match_size``, ``Get_value_index``, handle
semantics (``Free``, ``MPI.Datatype(t)``) and MPICH's error classes.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import mpisim.compat.mpi4py as MPI


def _rebuilt(t):
    base, combiner, params = t.decode()
    factory = "Create_" + combiner.lower()
    return getattr(base, factory)(**params)


@pytest.mark.parametrize(("make", "envelope", "contents"), [
    (lambda: MPI.DOUBLE.Dup(), (0, 0, 0, 1, MPI.COMBINER_DUP), ([], [], [])),
    (lambda: MPI.DOUBLE.Create_contiguous(3), (0, 0, 1, 1, MPI.COMBINER_CONTIGUOUS), ([], [], [3])),
    (lambda: MPI.DOUBLE.Create_vector(2, 3, 4), (0, 0, 3, 1, MPI.COMBINER_VECTOR), ([], [], [2, 3, 4])),
    (lambda: MPI.DOUBLE.Create_hvector(2, 3, 40), (0, 0, 3, 1, MPI.COMBINER_HVECTOR), ([], [], [2, 3, 40])),
    (lambda: MPI.DOUBLE.Create_indexed([1, 2], [0, 5]), (0, 0, 5, 1, MPI.COMBINER_INDEXED),
     ([], [], [2, 1, 2, 0, 5])),
    (lambda: MPI.DOUBLE.Create_hindexed_block(2, [0, 40, 72]), (0, 0, 5, 1, MPI.COMBINER_HINDEXED_BLOCK),
     ([], [], [3, 2, 0, 40, 72])),
    (lambda: MPI.Datatype.Create_struct([2, 3], [0, 16], [MPI.DOUBLE, MPI.INT]), (0, 0, 5, 2, MPI.COMBINER_STRUCT),
     ([], [], [2, 2, 3, 0, 16])),
    (lambda: MPI.DOUBLE.Create_subarray([4, 5], [2, 3], [1, 1], MPI.ORDER_F), (2, 0, 6, 1, MPI.COMBINER_SUBARRAY),
     ([2, 57], [], [4, 5, 2, 3, 1, 1])),
    (lambda: MPI.DOUBLE.Create_darray(4, 1, [8, 8], [MPI.DISTRIBUTE_BLOCK] * 2, [MPI.DISTRIBUTE_DFLT_DARG] * 2,
                                      [2, 2]), (10, 0, 2, 1, MPI.COMBINER_DARRAY),
     ([4, 1, 2, 121, 121, -49767, -49767, 2, 2, 56], [], [8, 8])),
    (lambda: MPI.DOUBLE.Create_resized(-3, 5), (0, 0, 2, 1, MPI.COMBINER_RESIZED), ([], [], [-3, 5])),
    (lambda: MPI.Datatype.Create_f90_real(6, 30), (2, 0, 0, 0, MPI.COMBINER_F90_REAL), ([6, 30], [], [])),
])
def test_envelope_and_contents_are_mpichs_and_decode_rebuilds_the_same_type(make, envelope, contents):
    t = make()
    assert t.Get_envelope() == envelope and tuple(t.Get_contents()[:3]) == contents
    again = _rebuilt(t)
    assert again.Get_envelope() == envelope and tuple(again.Get_contents()[:3]) == contents
    assert (again.Get_size(), again.Get_extent(), again.Get_true_extent()) == \
        (t.Get_size(), t.Get_extent(), t.Get_true_extent())
    copy = pickle.loads(pickle.dumps(t))  # mpi4py pickles a derived type as its decode
    assert copy.Get_envelope() == envelope and copy.Get_extent() == t.Get_extent()


def test_darray_bounds_are_mpichs():
    # MPICH 5.0.2: 8x8 doubles on a 2x2 grid, rank 1's block: 128 B of data, the whole array as extent
    t = MPI.DOUBLE.Create_darray(4, 1, [8, 8], [MPI.DISTRIBUTE_BLOCK] * 2, [MPI.DISTRIBUTE_DFLT_DARG] * 2, [2, 2])
    assert (t.Get_size(), t.Get_extent(), t.Get_true_extent()) == (128, (0, 512), (32, 224))


def test_named_types_decode_to_themselves_and_pickle_as_themselves():
    assert MPI.DOUBLE.Get_envelope() == (0, 0, 0, 0, MPI.COMBINER_NAMED) and MPI.DOUBLE.is_named
    assert MPI.DOUBLE.decode() == (MPI.DOUBLE, "NAMED", {})
    assert pickle.loads(pickle.dumps(MPI.FLOAT32_T)) is MPI.FLOAT
    handle = MPI.Datatype(MPI.INT)
    assert handle == MPI.INT and handle is not MPI.INT and pickle.loads(pickle.dumps(handle)) == MPI.INT


def test_handles_free_and_null_as_mpi_does():
    assert MPI.Datatype() == MPI.DATATYPE_NULL and not MPI.Datatype() and MPI.DATATYPE_NULL.is_predefined
    t = MPI.INT.Create_contiguous(2)
    other, built = MPI.Datatype(t), t.Create_vector(2, 1, 2)
    assert other == t and t != MPI.INT.Create_contiguous(2)  # derived types compare by handle
    t.Free()
    assert t == MPI.DATATYPE_NULL and other != MPI.DATATYPE_NULL
    assert built.Get_contents()[3][0].Get_size() == 8  # the vector keeps its own reference to its base
    with pytest.raises(MPI.Exception) as err:
        MPI.INT.Free()
    assert err.value.Get_error_class() == MPI.ERR_TYPE
    with pytest.raises(MPI.Exception) as err:
        t.Get_envelope()
    assert err.value.Get_error_class() == MPI.ERR_TYPE


@pytest.mark.parametrize(("r", "size"), [(1, 1), (2, 1), (4, 2), (9, 4), (10, 8), (18, 8), (19, 16)])
def test_f90_integer_is_the_smallest_kind_with_the_range(r, size):
    assert MPI.Datatype.Create_f90_integer(r).Get_size() == size


@pytest.mark.parametrize(("p", "r", "size"), [(6, 30, 4), (15, 300, 8), (7, 30, 8), (16, 300, 16), (30, 4000, 16)])
def test_f90_real_and_complex_are_the_smallest_kinds_with_precision_and_range(p, r, size):
    real, cplx = MPI.Datatype.Create_f90_real(p, r), MPI.Datatype.Create_f90_complex(p, r)
    assert (real.Get_size(), cplx.Get_size()) == (size, 2 * size)
    assert real.is_predefined and not real.is_named and real == MPI.Datatype.Create_f90_real(p, r)


def test_f90_codes_follow_the_kind_and_size():
    assert MPI.Datatype.Create_f90_real(15, 300).tocode() == "f8"
    assert (MPI.Datatype.Create_f90_integer(4).typechar, MPI.Datatype.Create_f90_integer(4).typestr) == ("h", "i2")
    assert MPI.Datatype.Create_f90_complex(6, 30).typechar == "F"


def test_codes_of_named_derived_and_pair_types():
    assert [MPI.DOUBLE.tocode(), MPI.INT8_T.tocode(), MPI.C_BOOL.typechar, MPI.WCHAR.typestr] == ["d", "i1", "?", "U1"]
    assert MPI.DOUBLE.Dup().typestr == "f8" and MPI.DOUBLE.Create_contiguous(3).typestr == "V24"
    assert (MPI.INT_INT.typechar, MPI.INT_INT.typestr) == ("V", "V8")
    with pytest.raises(ValueError):
        MPI.INT_INT.tocode()


def test_match_size_and_value_index():
    assert MPI.Datatype.Match_size(MPI.TYPECLASS_REAL, 8) == MPI.REAL8
    assert MPI.Datatype.Match_size(MPI.TYPECLASS_INTEGER, 16).Get_size() == 16
    assert MPI.Datatype.Match_size(MPI.TYPECLASS_LOGICAL, 4) == MPI.LOGICAL
    with pytest.raises(MPI.Exception) as err:
        MPI.Datatype.Match_size(MPI.TYPECLASS_LOGICAL, 8)
    assert err.value.Get_error_class() == MPI.ERR_ARG
    assert MPI.Datatype.Get_value_index(MPI.DOUBLE, MPI.INT) == MPI.DOUBLE_INT
    assert MPI.Datatype.Get_value_index(MPI.DOUBLE, MPI.FLOAT) == MPI.DATATYPE_NULL


@pytest.mark.parametrize(("make", "error"), [
    (lambda: MPI.DOUBLE.Create_contiguous(-1), "ERR_COUNT"),
    (lambda: MPI.DOUBLE.Create_subarray([4], [2], [1], 99), "ERR_ARG"),
    (lambda: MPI.Datatype.Create_f90_integer(40), "ERR_OTHER"),
    (lambda: MPI.DOUBLE.Create_darray(4, 5, [8], [MPI.DISTRIBUTE_BLOCK], [MPI.DISTRIBUTE_DFLT_DARG], [4]), "ERR_RANK"),
    (lambda: MPI.DOUBLE.Create_darray(4, 0, [8], [MPI.DISTRIBUTE_BLOCK], [1], [4]), "ERR_ARG"),
])
def test_bad_arguments_are_mpichs_error_classes(make, error):
    with pytest.raises(MPI.Exception) as err:
        make()
    assert err.value.Get_error_class() == getattr(MPI, error)


def test_a_contiguous_type_reads_a_buffer_of_another_type_in_place():
    from mpisim.compat.buffers import parse
    a = np.arange(12, dtype=np.int32)
    spec = parse([a, 2, MPI.INT.Create_contiguous(3)])
    spec.array[:] = -1  # a view of the caller's memory
    assert a.tolist() == [-1] * 6 + list(range(6, 12))
