"""``MPI.Datatype``: the named types (``MPI.DOUBLE``, ``MPI.INT``, ``MPI.BYTE``, ...) and ``MPI._typedict``.

A named type is a numpy dtype with MPI's name (:mod:`mpisim.compat.buffers`, where buffer
specifications such as ``[buf, MPI.DOUBLE]`` are read); ``MPI._typedict`` maps numpy's type
characters to them, as in mpi4py.
"""

from __future__ import annotations

import numpy as np

from mpisim.compat import typemap as _typemap
from mpisim.compat.buffers import DATATYPES, TYPEDICT, Datatype

#: ``MPI.DOUBLE``, ``MPI.INT``, ``MPI.BYTE``, ...: every named type, by its mpi4py name.
NAMED = dict(DATATYPES)
DATATYPE_NULL = Datatype("MPI_DATATYPE_NULL", np.uint8)
# Types MPICH (built with gfortran on x86-64) has: Fortran's 16-byte real and 32-byte complex;
# and the names mpi4py always defines but this MPICH does not, which are DATATYPE_NULL there too.
NAMED["REAL16"] = Datatype("MPI_REAL16", np.longdouble)
NAMED["COMPLEX32"] = Datatype("MPI_COMPLEX32", np.clongdouble)
NAMED.update(dict.fromkeys(("BFLOAT16_T", "LOGICAL1", "LOGICAL2", "LOGICAL4", "LOGICAL8", "LOGICAL16", "REAL2",
                            "COMPLEX4", "INTEGER16"), DATATYPE_NULL))

#: The constants of type constructors and envelopes, with MPICH's values.
CONSTANTS = {
    "ORDER_C": _typemap.ORDER_C, "ORDER_F": _typemap.ORDER_FORTRAN, "ORDER_FORTRAN": _typemap.ORDER_FORTRAN,
    "DISTRIBUTE_BLOCK": 121, "DISTRIBUTE_CYCLIC": 122, "DISTRIBUTE_NONE": 123, "DISTRIBUTE_DFLT_DARG": -49767,
    "COMBINER_NAMED": 1, "COMBINER_DUP": 2, "COMBINER_CONTIGUOUS": 3, "COMBINER_VECTOR": 4, "COMBINER_HVECTOR": 6,
    "COMBINER_INDEXED": 7, "COMBINER_HINDEXED": 9, "COMBINER_INDEXED_BLOCK": 10, "COMBINER_STRUCT": 12,
    "COMBINER_SUBARRAY": 13, "COMBINER_DARRAY": 14, "COMBINER_F90_REAL": 15, "COMBINER_F90_COMPLEX": 16,
    "COMBINER_F90_INTEGER": 17, "COMBINER_RESIZED": 18, "COMBINER_HINDEXED_BLOCK": 19, "COMBINER_VALUE_INDEX": 20,
}
_typedict = TYPEDICT
