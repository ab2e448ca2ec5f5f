"""The algorithm registry: every collective algorithm, keyed by (collective, algorithm).

Algorithms are data: each is registered with the :func:`algorithm` decorator together with
its closed-form cost, its assumptions and its reference, then listed by
``mpisim list algorithms``, chosen by name in scenarios, picked by ``auto`` selectors and
tested by looping over the registry -- a new algorithm is tested the moment it is
registered (SimGrid keeps the same kind of table in ``smpi_coll.cpp``).

Calling conventions (the keyword arguments a collective's algorithms receive):

===============  ==========================  ==================================================
collective       arguments                   returns
===============  ==========================  ==================================================
barrier          ``comm``                    ``None``
bcast            ``comm, buf, root``         root's buffer, on every rank
reduce           ``comm, buf, op, root``     the reduction at root, ``None`` elsewhere
allreduce        ``comm, buf, op``           the reduction, on every rank
allgather        ``comm, buf``               all buffers concatenated in rank order
reduce_scatter   ``comm, buf, op``           block ``rank`` (np.array_split) of the reduction
alltoall         ``comm, buf``               block ``rank`` of every rank's buffer, in rank order
gather           ``comm, buf, root``         all buffers concatenated at root, ``None`` elsewhere
scatter          ``comm, buf, root``         block ``rank`` of root's buffer
===============  ==========================  ==================================================

``buf`` is a :class:`~mpisim.mpi.payload.Payload`; ``comm`` is the communicator's
collective context, so algorithm messages never match user receives. An algorithm registered
with a ``plan`` (a GPU library's: NCCL's protocol, channels and chunk) also receives
``choice``, the plan's answer for this call, resolved once at dispatch (``None`` on one rank).

Cost functions take ``(p, n, alpha, beta, gamma)`` -- ranks, bytes (nccl-tests convention:
the whole gathered array for allgather and reduce_scatter, each rank's buffer otherwise),
seconds per message, seconds per byte on the wire and seconds per byte reduced -- and return
seconds. ``exact(p)`` says for which rank counts the formula is exact (not an approximation)
when the count divides evenly, which is where the test suite holds the simulation to it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mpisim.errors import UnknownAlgorithm
from mpisim.network.presets import presets_with_in_switch_reduction

if TYPE_CHECKING:
    from mpisim.network.topology import TopologySpec

COLLECTIVES = (
    "barrier", "bcast", "reduce", "allreduce", "allgather", "reduce_scatter", "alltoall", "gather", "scatter",
)

#: Requirements an algorithm may declare. ``in_switch_reduction``: the nodes' switch reduces and
#: multicasts (NVLink SHARP, ``intra.in_switch_reduction`` of a topology: the H100, H200, B200 and
#: GB200 presets), which a topology, not a rank count, decides (:meth:`Algorithm.why_not_on`).
REQUIREMENTS = ("commutative", "power_of_two", "in_switch_reduction")

CostFn = Callable[..., float]


def always(p: int) -> bool:
    """Exactness predicate: the closed form is exact for every rank count."""
    return True


def power_of_two(p: int) -> bool:
    """Exactness predicate: exact only when *p* is a power of two."""
    return p > 0 and p & (p - 1) == 0


def never(p: int) -> bool:
    """Exactness predicate: the closed form is an estimate only."""
    return False


@dataclass(frozen=True)
class FluidTwin:
    """An algorithm's collective-fidelity twin: the same call timed as a whole, its messages not sent.

    ``run`` takes the algorithm's arguments and returns what it returns; ``applies(comm, buf)``
    says whether this call may take it (size-only data, and whatever else the twin assumes of
    the messages and the network). Dispatch runs the twin at ``fidelity: collective`` when it
    applies, the algorithm otherwise (:mod:`mpisim.collectives.fluid`).

    ``validated(comm, size)`` says whether the twin's time is the message path's within the
    fidelity grid's tolerance for a call of nccl-tests *size* on *comm*
    (:mod:`mpisim.collectives.fluid.validated`): ``fidelity: auto`` takes the twin only there,
    and keeps the message path elsewhere.

    ``bulk`` is the twin for a call that all ranks enter at one instant: the same timing, the
    ranks advanced as one batch of arrays instead of one process each.
    """

    run: Callable[..., Any]
    applies: Callable[[Any, Any], bool]
    validated: Callable[[Any, int], bool] = lambda comm, size: True
    #: The batch form, or None: ``bulk(comm, buf, leave)`` starts a call that every rank of
    #: *comm* enters at this instant, without a process per rank, and calls ``leave(rank)`` when
    #: each rank's call returns (:func:`mpisim.collectives.dispatch.bulk_driver`).
    bulk: Callable[[Any, Any, Callable[[int], None]], None] | None = None


@dataclass(frozen=True)
class Algorithm:
    """One registered collective algorithm."""

    collective: str
    name: str
    func: Callable[..., Any] = field(repr=False)
    summary: str
    cost: CostFn | None = field(default=None, repr=False)
    requires: frozenset[str] = frozenset()
    reference: str = ""
    exact: Callable[[int], bool] = field(default=always, repr=False)
    description: str = field(default="", repr=False)
    plan: Callable[..., Any] | None = field(default=None, repr=False)
    fluid: FluidTwin | None = field(default=None, repr=False)

    def allows(self, p: int, commutative: bool = True) -> bool:
        """True if the algorithm can run on *p* ranks with an op of the given commutativity."""
        if "power_of_two" in self.requires and not power_of_two(p):
            return False
        return not ("commutative" in self.requires and not commutative)

    def why_not(self, p: int, commutative: bool = True) -> str:
        """Return why the algorithm cannot run here ('' if it can)."""
        if "power_of_two" in self.requires and not power_of_two(p):
            return f"{self.collective} algorithm {self.name!r} needs a power-of-two number of ranks, got {p}"
        if "commutative" in self.requires and not commutative:
            return f"{self.collective} algorithm {self.name!r} needs a commutative op"
        return ""

    def runs_on(self, topology: TopologySpec) -> bool:
        """True if *topology*'s hardware has what the algorithm needs (see :meth:`why_not_on`)."""
        if "in_switch_reduction" in self.requires:
            return topology.intra is not None and topology.intra.in_switch_reduction
        return True

    def why_not_on(self, topology: TopologySpec) -> str:
        """Return why the algorithm cannot run on *topology*'s hardware ('' if it can).

        Scenarios are checked with it before a run; a program calling the algorithm by name at
        run time is not (``nvls`` then runs as a plain direct exchange, see its docstring).
        """
        if self.runs_on(topology):
            return ""
        which = f"{topology.name!r}" if topology.name != "inline" else "this topology"
        kind = f"intra: {topology.intra.kind}" if topology.intra is not None else "no intra-node fabric"
        presets = ", ".join(presets_with_in_switch_reduction()) or "none"
        return (f"{self.collective} algorithm {self.name!r} needs an NVSwitch that reduces in the switch "
                f"(NVLink SHARP: intra.in_switch_reduction, as in the presets {presets}), which {which} "
                f"({kind}) does not have")

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form listed by ``mpisim list algorithms --json``."""
        return {
            "collective": self.collective,
            "algorithm": self.name,
            "summary": self.summary,
            "requires": sorted(self.requires),
            "reference": self.reference,
            "has_cost_model": self.cost is not None,
        }


_REGISTRY: dict[str, dict[str, Algorithm]] = {c: {} for c in COLLECTIVES}


def algorithm(collective: str, name: str, *, cost: CostFn | None = None, requires: tuple[str, ...] | set[str] = (),
              reference: str = "", exact: Callable[[int], bool] = always,
              plan: Callable[..., Any] | None = None, fluid: FluidTwin | None = None) -> Callable:
    """Register the decorated generator function as *collective* algorithm *name*.

    *plan*, for a GPU library's algorithm, is ``plan(comm, nbytes)`` -> the library's choice
    for a call of *nbytes* (nccl-tests' size): protocol, channels, chunk. Dispatch resolves it
    once per call shape and hands it to the algorithm as ``choice=`` (and writes it on the
    call's record), so the algorithm, the record and the rows all read the same choice.
    *fluid* is the algorithm's collective-fidelity twin (:class:`FluidTwin`), which dispatch
    runs instead of it at ``fidelity: collective`` where the twin applies.

    Raises ValueError on a duplicate name, an unknown collective or requirement, or a
    missing docstring (the docstring's first line is the summary users see).
    """
    if collective not in _REGISTRY:
        raise ValueError(f"unknown collective {collective!r}")
    unknown = set(requires) - set(REQUIREMENTS)
    if unknown:
        raise ValueError(f"unknown requirement(s) {sorted(unknown)}; known: {REQUIREMENTS}")

    def decorate(func: Callable) -> Callable:
        table = _REGISTRY[collective]
        if name in table:
            raise ValueError(f"duplicate {collective} algorithm {name!r}")
        doc = inspect.getdoc(func)
        if not doc:
            raise ValueError(f"{func.__name__}: algorithms must have a docstring")
        table[name] = Algorithm(collective, name, func, doc.splitlines()[0], cost, frozenset(requires),
                                reference, exact, doc, plan, fluid)
        return func

    return decorate


def get(collective: str, name: str) -> Algorithm:
    """Return the algorithm registered as (*collective*, *name*).

    Raises UnknownAlgorithm listing the known names.
    """
    if collective not in _REGISTRY:
        raise UnknownAlgorithm(f"unknown collective {collective!r}; known: {', '.join(COLLECTIVES)}")
    table = _REGISTRY[collective]
    if name not in table:
        raise UnknownAlgorithm(f"{collective} has no algorithm {name!r}; known: {', '.join(sorted(table))}, auto")
    return table[name]


def available(collective: str | None = None) -> list[Algorithm]:
    """Return the registered algorithms (of one collective, or all), sorted by collective then name."""
    names = [collective] if collective else list(COLLECTIVES)
    return [_REGISTRY[c][n] for c in names for n in sorted(_REGISTRY[c])]
