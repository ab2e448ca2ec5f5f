"""``MPI.Datatype``: the named types (``MPI.DOUBLE``, ``MPI.INT``, ``MPI.BYTE``, ...), ``MPI._typedict`` and the constants.

A named type is a numpy dtype with MPI's name, a derived one a type map and the call that made
it (:mod:`mpisim.compat.datatypes`, where buffer specifications such as ``[buf, MPI.DOUBLE]``
find them); ``MPI._typedict`` maps numpy's type characters to them, as in mpi4py.
"""

from __future__ import annotations

from mpisim.compat import darray as _darray
from mpisim.compat import envelope as _env
from mpisim.compat import typemap as _typemap
from mpisim.compat.datatypes import DATATYPE_NULL, NAMED_TYPES, TYPEDICT, Datatype  # noqa: F401

#: ``MPI.DOUBLE``, ``MPI.INT``, ``MPI.BYTE``, ...: every named type, by its mpi4py name.
NAMED = dict(NAMED_TYPES)

#: The constants of type constructors and envelopes, with MPICH's values.
CONSTANTS = {
    "ORDER_C": _typemap.ORDER_C, "ORDER_F": _typemap.ORDER_FORTRAN, "ORDER_FORTRAN": _typemap.ORDER_FORTRAN,
    "DISTRIBUTE_BLOCK": _darray.BLOCK, "DISTRIBUTE_CYCLIC": _darray.CYCLIC, "DISTRIBUTE_NONE": _darray.NONE,
    "DISTRIBUTE_DFLT_DARG": _darray.DFLT_DARG,
    **{f"COMBINER_{name}": value for value, name in _env.NAMES.items()},
    "TYPECLASS_REAL": _env.TYPECLASS_REAL, "TYPECLASS_INTEGER": _env.TYPECLASS_INTEGER,
    "TYPECLASS_COMPLEX": _env.TYPECLASS_COMPLEX, "TYPECLASS_LOGICAL": _env.TYPECLASS_LOGICAL,
}
_typedict = TYPEDICT
