"""Reduction operations: SUM, PROD, MAX, MIN and user-defined ops.

An :class:`Op` wraps an element-wise binary function ``f(a, b)`` and says whether it is
commutative. MPI requires every op to be associative; commutativity is optional, and an
algorithm that reorders operands (ring, recursive halving) declares ``requires={"commutative"}``
in the registry so a non-commutative op is rejected before the simulation starts.

Operand order follows ``MPI_Reduce_local(inbuf, inoutbuf)``: the result is ``inbuf op inoutbuf``,
with *inbuf* the contribution of the lower-ranked side. Reducing ranks 0..p-1 therefore means
``x0 op x1 op ... op x(p-1)`` in that order, which is the order MPI guarantees for
non-commutative ops.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

BinaryFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Op:
    """An associative element-wise reduction ``f(a, b)``, commutative or not."""

    name: str
    func: BinaryFn = field(repr=False)
    commutative: bool = True

    @classmethod
    def Create(cls, function: BinaryFn, commute: bool = False, name: str = "user") -> Op:
        """Create a user op, with mpi4py's spelling (``Op.Create(function, commute)``)."""
        return cls(name, function, commute)

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Return ``a op b`` as a new array (never modifies *a* or *b*).

        IEEE arithmetic as an MPI library does it: a sum past the float's range is inf, inf - inf
        is NaN, silently -- numpy's RuntimeWarnings would reach the user's terminal as noise.
        """
        with np.errstate(all="ignore"):
            return self.func(a, b)


SUM = Op("sum", np.add)
PROD = Op("prod", np.multiply)
MAX = Op("max", np.maximum)
MIN = Op("min", np.minimum)

OPS: dict[str, Op] = {op.name: op for op in (SUM, PROD, MAX, MIN)}


def get_op(name: str | Op) -> Op:
    """Return the built-in op called *name* (``sum``, ``prod``, ``max``, ``min``), or *name* itself if an Op.

    Raises KeyError listing the known names.
    """
    if isinstance(name, Op):
        return name
    try:
        return OPS[name.lower()]
    except KeyError:
        raise KeyError(f"unknown op {name!r}; known: {', '.join(OPS)}") from None
