"""``MPI.Datatype``: the named types (``MPI.DOUBLE``, ``MPI.INT``, ``MPI.BYTE``, ...) and ``MPI._typedict``.

A named type is a numpy dtype with MPI's name (:mod:`mpisim.compat.buffers`, where buffer
specifications such as ``[buf, MPI.DOUBLE]`` are read); ``MPI._typedict`` maps numpy's type
characters to them, as in mpi4py.
"""

from __future__ import annotations

import numpy as np

from mpisim.compat.buffers import DATATYPES, TYPEDICT, Datatype

#: ``MPI.DOUBLE``, ``MPI.INT``, ``MPI.BYTE``, ...: every named type, by its mpi4py name.
NAMED = dict(DATATYPES)
DATATYPE_NULL = Datatype("MPI_DATATYPE_NULL", np.uint8)
_typedict = TYPEDICT
