"""``mpi4py.run`` under ``mpisim exec``: not simulated, so importing it is an error naming the rank.

This folder is the ``__path__`` of the ``mpi4py`` package a simulated program imports
(see :mod:`mpisim.compat.unsupported`); only ``mpi4py.MPI`` is simulated.
"""

from mpisim.compat.unsupported import unsupported_module

raise unsupported_module(__name__)
