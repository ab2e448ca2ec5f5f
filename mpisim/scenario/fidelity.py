"""``fidelity: auto``: which fidelity a scenario runs at, and why.

Collective fidelity (a collective's call timed as steps of flows, mpisim.collectives.fluid and
mpisim.mpi.direct) is hundreds of times faster than sending every message, and within the
fidelity grid's tolerance of it where it was validated. So ``auto``, the default, takes it
wherever that holds and the question is not about messages:

* messages are the question -- ``trace.messages: true`` (a record per message), a ``program``
  workload (mpi4py or generator: the program's own messages), a ``p2p`` workload (the
  protocols themselves): the message path;
* otherwise collective fidelity, each call's twin only where it is validated
  (mpisim.collectives.fluid.validated; a call outside runs its messages), and real data
  (``payload: data``) always on the message path, so results stay bit-identical to it.

``message`` and ``collective`` given explicitly are taken as they are (``collective`` runs
every twin wherever it applies, validated or not).
"""

from __future__ import annotations

from dataclasses import dataclass

from mpisim.scenario.model import Scenario
from mpisim.scenario.tracing import explicit_trace_keys

#: Workload kinds whose question is the messages themselves.
MESSAGE_WORKLOADS = {"program": "a program's own messages", "p2p": "a point-to-point protocol question"}


@dataclass(frozen=True)
class Fidelity:
    """The fidelity a scenario's worlds run at: ``fidelity`` for the World, and why."""

    fidelity: str  # message | collective
    validated_only: bool  # auto: twins only where validated against the message path
    reason: str

    @property
    def label(self) -> str:
        """How rows and reports name it (``collective``, ``message``)."""
        return self.fidelity


def resolve(scenario: Scenario) -> Fidelity:
    """Return the fidelity *scenario* runs at (see the module docstring)."""
    asked = scenario.fidelity
    if asked != "auto":
        return Fidelity(asked, False, f"fidelity: {asked} (asked for)")
    if scenario.trace.messages and "messages" in explicit_trace_keys(scenario):
        return Fidelity("message", False, "auto: trace.messages asks for every message")
    kind = scenario.workload.kind
    if kind in MESSAGE_WORKLOADS:
        return Fidelity("message", False, f"auto: {MESSAGE_WORKLOADS[kind]}")
    if scenario.payload == "data" and kind != "training":  # training's size-only calls may still take twins
        # Real data never takes a twin or the direct path (each checks the payload per call),
        # so this is the timeline collective fidelity would give as well; saying so is clearer.
        return Fidelity("message", False, "auto: real data (payload: data) moves through every message")
    return Fidelity("collective", True,
                    "auto: collective fidelity where validated against the message path, messages elsewhere")


def row_fidelity(resolved: Fidelity, data: bool, call_fidelity: str | None = None) -> str:
    """The fidelity one row ran at: its call's (``message`` with real data or outside a twin's region)."""
    if resolved.fidelity == "message" or data:
        return "message"
    return call_fidelity or resolved.fidelity
