"""Engine layer: a thin shell over SimPy -- the Simulation object, units, the tracer and its records.

Nothing here knows about MPI or networks.
"""

from mpisim.engine.sim import Proc, Simulation

__all__ = ["Proc", "Simulation"]
