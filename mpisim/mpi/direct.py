"""The collective-fidelity direct path: a collective's size-only messages without their handshake traffic.

**Collective fidelity** (``fidelity: collective``): a size-only message that an algorithm sends
inside a collective call (on a communicator's collective context, or on one derived from it:
``Comm.internal``) takes the *direct path*; a user's own messages never do. Matching, the
non-overtaking order, the per-message CPU overheads and copies, and the data's one flow
through the network model (sharing links with everything else in flight) are the message
path's own; what goes is the wire traffic of the rendezvous handshake and the record. An
eager message is then exactly the message path's, without its record. A rendezvous message
sends no RTS, CTS or FIN flows: the RTS and the CTS become delays of what a lone header takes
on the route (latency + ``header_bytes`` / bottleneck bandwidth), so the data still waits for
the receive to be posted and for the round trip, and the FIN, which nobody waits for, is
dropped. That is the approximation: the control messages no longer load the links (a few
dozen bytes beside a message above the eager limit), nor do they wait behind other traffic.
It removes three of a rendezvous message's four flows, and the fair-share components that
FIN and RTS flows of consecutive steps chain across all ranks. Real data always takes the
message path, so results stay bit-identical. Algorithms whose steps repeat (the MPI rings)
go one level further and send no messages at all: they replay their steps as a recurrence
with the costs :meth:`World.direct_costs` states (mpisim.collectives.fluid_mpi_ring).

:class:`DirectPath` is one of :class:`~mpisim.mpi.world.World`'s parts: the timing of the
handshake the direct path does not send (:meth:`DirectPath._after_control`), and the costs it
charges, stated once (:meth:`DirectPath.direct_costs`) for the models that replay an algorithm
without its messages. The protocol steps themselves branch on ``Message.direct``
(:mod:`mpisim.mpi.protocols`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import simpy

from mpisim.engine.events import Call
from mpisim.mpi.cost import DirectCosts, MessageCost, message_cost

if TYPE_CHECKING:
    from mpisim.mpi.config import MpiConfig
    from mpisim.mpi.protocols import Message
    from mpisim.network.topology import Topology


class DirectPath:
    """The direct path's timing and costs, as methods of :class:`~mpisim.mpi.world.World`."""

    # The world's state these read (set by World.__init__).
    env: simpy.Environment
    config: MpiConfig
    topology: Topology
    _node_of: list[int]

    def message_cost(self, src: int, dst: int, nbytes: int) -> MessageCost:
        """The phases of an MPI message of *nbytes* from world rank *src* to *dst*, alone on its route.

        ``message_cost(src, dst, n).lone`` is the time from posting the send to the receive
        completing, with the receive posted first, as the protocols (:mod:`mpisim.mpi.protocols`)
        give it (:mod:`mpisim.mpi.cost`, from :meth:`direct_costs`); models that replay an
        algorithm without its messages use it.
        """
        return message_cost(self.config, self.direct_costs(src, dst), nbytes)

    def direct_costs(self, src: int, dst: int, handshake: bool = True,
                     forward: tuple[float, float] | None = None) -> DirectCosts:
        """What the direct path charges an MPI message from world rank *src* to *dst* (module docstring).

        With *n* bytes, the send posted at *s* and the receive posted at *r* (and nothing else
        on the route), the direct path runs:

        * eager (``n <= eager_limit``): the send completes at ``s + send_overhead + copy(n)``,
          the data arrives ``latency + n * beta`` later, and the receive completes
          ``recv_overhead`` after the later of its arrival and *r* -- plus ``copy(n)`` out of the
          unexpected queue if it arrived first;
        * rendezvous: the request to send reaches the receiver at ``s + send_overhead + rts``, is
          matched at the later of that and *r*, the clear to send comes back ``cts`` later, the
          data leaves ``rendezvous_overhead`` after it and arrives ``latency + n * beta`` after
          that, completing the send; the receive completes ``recv_overhead`` later.

        Algorithms timed as step programs (mpisim.collectives.fluid_mpi_ring) use these, and
        tests/mpi/test_direct_costs.py holds them to the simulated messages. Without
        *handshake* (a program whose messages are all eager) ``rts`` and ``cts`` are left 0.
        *forward*, if given, is ``Topology.path_costs(src, dst)`` already known (from the route
        the caller holds: the same floats), so the path is not walked again.
        """
        cfg = self.config
        # NOTE: Topology.path_costs, not route(): a barrier over 131072 ranks asks for 2.2 million
        # pairs once each, which the route cache would keep.
        latency, beta = self.topology.path_costs(src, dst) if forward is None else forward
        back_latency, back_beta = self.topology.path_costs(dst, src) if handshake else (0.0, 0.0)
        header = cfg.header_bytes
        between_nodes = self._node_of[src] != self._node_of[dst]
        return DirectCosts(
            latency=latency,
            beta=beta,
            eager_limit=cfg.eager_limit_inter if between_nodes else cfg.eager_limit_intra,
            rts=latency + header * beta if handshake else 0.0,
            cts=back_latency + header * back_beta,
            rendezvous_overhead=cfg.rendezvous_overhead if between_nodes else 0.0,
        )

    def _after_control(self, src: int, dst: int, fn: Callable[[Message], None], msg: Message) -> None:
        """Call ``fn(msg)`` when a lone control message from *src* would have reached *dst* (direct path)."""
        delay = self._control_delay(src, dst)
        if delay > 0:
            Call(self.env, fn, msg, delay)
        else:
            fn(msg)

    def _control_delay(self, src: int, dst: int) -> float:
        """Seconds a lone control message (``header_bytes``) takes from *src* to *dst*."""
        route = self.topology.route(src, dst)
        return route.latency + self.config.header_bytes * route.beta if route.links else 0.0
