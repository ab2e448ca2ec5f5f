"""What one MPI message costs, phase by phase, when nothing else is on its links.

The World moves a message through its protocol step by step (:mod:`mpisim.mpi.protocols`). Models
that time an algorithm without sending its messages -- the MPI rings' step programs
(:mod:`mpisim.collectives.fluid_mpi_ring`), MPI's pipelined trees at collective fidelity
(:mod:`mpisim.collectives.fluid_tree`) -- need the same costs as numbers. There is one
description of them: :class:`DirectCosts`, a pair of ranks' route and protocol constants as
:meth:`World.direct_costs <mpisim.mpi.direct.DirectPath.direct_costs>` states them (latency, seconds
per byte, eager limit, the lone RTS there and CTS back, the rendezvous overhead), and
:func:`message_cost`, which turns them and a message's size into :class:`MessageCost`: its
phases, with the two instants a message depends on -- when its send is posted (*t_send*) and
when its receive is posted (*t_recv*). With *o_s*, *o_r* the CPU overheads, *c* the copy time
of the payload, *L* the route latency, β its seconds per byte, *RTS* and *CTS* the lone
headers' times there and back, and *V* the rendezvous overhead between nodes:

==============  =====================================================================
protocol        the receive completes at
==============  =====================================================================
eager           a + o_r if the data arrived (a = t_send + o_s + c + L + nβ) by t_recv,
                else t_recv + o_r + c (copied out of the unexpected queue)
rendezvous      max(t_send + o_s + RTS, t_recv) + CTS + V + L + nβ + o_r
==============  =====================================================================

The rendezvous handshake (RTS there, CTS back) starts when both sides are there, which is
why the receive's posting matters to it. *V* holds the pair's socket (MpiConfig.rendezvous_overhead):
a lone message pays it, and messages of one pair between nodes pay it one after another, each
once the one before has delivered its data -- which a caller that runs several messages must
model. ``data_seconds`` is the only term that other traffic on the links stretches; a caller
that knows the data shares its links scales it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from mpisim.mpi.config import MpiConfig


class DirectCosts(NamedTuple):
    """The route and protocol costs of a message from one rank to another on the direct path (World.direct_costs)."""

    latency: float  # the route's latency
    beta: float  # seconds per byte alone on the route
    eager_limit: int  # largest message sent eagerly on this path
    rts: float  # a lone request to send, there
    cts: float  # a lone clear to send, back
    rendezvous_overhead: float  # the sender's connection work before the data (between nodes)


@dataclass(frozen=True, slots=True)
class MessageCost:
    """One message's protocol and the seconds of each of its phases, alone on its route."""

    rendezvous: bool
    envelope: float  # send posted -> the envelope (RTS, or the eager data less its bytes) at the receiver
    handshake: float  # rendezvous: receive matched -> the CTS is back at the sender
    overhead: float  # rendezvous between nodes: CTS back -> its data starts to move (it holds the pair's socket)
    data_latency: float  # rendezvous: the data's route latency (an eager message's is in envelope)
    data_seconds: float  # the payload's bytes at the route's bottleneck bandwidth
    recv_overhead: float
    copy: float  # eager: copying the payload out of the unexpected queue

    def complete(self, t_send: float, t_recv: float, share: float = 1.0) -> float:
        """When the receive completes, for a send posted at *t_send* and its receive at *t_recv*.

        *share* stretches the data's bytes (the number of transfers it shares its busiest
        link with, itself included; 1 when alone).
        """
        return self.finish(self.data_start(t_send, t_recv) + self.data_seconds * share, t_recv)

    def data_start(self, t_send: float, t_recv: float) -> float:
        """When the payload's first byte starts to cross the links (after the route latency)."""
        if self.rendezvous:
            return max(t_send + self.envelope, t_recv) + self.handshake + self.overhead + self.data_latency
        return t_send + self.envelope

    def finish(self, t_data_end: float, t_recv: float) -> float:
        """When the receive completes, for a payload whose last byte arrived at *t_data_end*."""
        if self.rendezvous or t_data_end >= t_recv:
            return t_data_end + self.recv_overhead
        return t_recv + self.recv_overhead + self.copy

    @property
    def lone(self) -> float:
        """Seconds from posting the send to the receive completing, with the receive posted first."""
        return self.complete(0.0, float("-inf"))


def message_cost(config: MpiConfig, costs: DirectCosts, nbytes: int) -> MessageCost:
    """The phases of an MPI message of *nbytes* over a pair whose *costs* World.direct_costs gave
    (with the handshake; see the module docstring).

    The protocol is the World's choice: eager up to the path's eager limit, rendezvous above.
    """
    data_seconds = nbytes * costs.beta
    if nbytes <= costs.eager_limit:
        copy = config.copy_time(nbytes)
        return MessageCost(False, config.send_overhead + copy + costs.latency, 0.0, 0.0, 0.0, data_seconds,
                           config.recv_overhead, copy)
    return MessageCost(True, config.send_overhead + costs.rts, costs.cts, costs.rendezvous_overhead, costs.latency,
                       data_seconds, config.recv_overhead, 0.0)
