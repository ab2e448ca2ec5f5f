"""Steps of an explanation, recovered from the messages alone.

Algorithms never say what a "step" is, so steps are recovered from the messages: a message's
step is one more than the step of the latest message its sender had received before posting it
(its causal depth). In a ring every message of round k depends on one of round k-1; in a linear
broadcast all messages are step 1.

The messages are observed with a :class:`~mpisim.mpi.world.World` subclass that notes each
send as it is posted (the payload's contents) and pairs it with the engine's message record
(its delivery time), so the MPI layer itself needs no hook.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mpisim.mpi.constants import PROC_NULL
from mpisim.mpi.payload import Payload
from mpisim.mpi.world import World
from mpisim.teaching.decoding import describe_pieces


class ObservedWorld(World):
    """A World that notes the contents of every message as its send is posted, and its time on the wire.

    The engine's message record says when a receive completed, which for an eager message that
    waited in the unexpected queue is long after its bytes arrived. The rounds need the wire:
    when the bytes left (on the single-port network, when both ports were free) and when the
    last one arrived. So every data transfer the network starts is noted, at the point where
    it gets its ports: the port limit's inner model, or the model itself without one.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.posted: list[tuple[tuple[int, int, int, int], float, np.ndarray | None]] = []
        #: (src, dst, bytes, posted) -> [[left, arrived]] of each data transfer, in the order started.
        self.wire: dict[tuple[int, int, int, float], list[list[float]]] = defaultdict(list)
        self._leaving: dict[int, list[float]] = {}  # id(message) -> its times, until its ports are free
        if hasattr(self.network, "post"):
            self._post = self._noting(self._post)
        if hasattr(self.network, "started"):  # the port limit: the bytes leave when the ports are free
            self.network.started = self._left

    def post_send(self, comm: Any, buf: Any, dest: int, tag: int, *, synchronous: bool = False) -> Any:
        req = super().post_send(comm, buf, dest, tag, synchronous=synchronous)
        if dest != PROC_NULL:
            array = buf.array if isinstance(buf, Payload) else np.asarray(buf)
            contents = None if array is None else np.array(array, copy=True)
            self.posted.append(((comm.world_rank, comm.group[dest], comm.context, tag), self.env.now, contents))
        return req

    def _left(self, arg: Any) -> None:
        times = self._leaving.pop(id(arg), None)
        if times is not None:
            times[0] = times[1] = self.env.now

    def _noting(self, post: Any) -> Any:
        """*post*, noting when the payload of each message leaves and when its last byte arrives."""
        env = self.env

        def noted(src: int, dst: int, nbytes: int, fn: Any, arg: Any, *rest: Any, **kw: Any) -> bool:
            # The payload goes once its t_data is set; an RTS goes before, CTS and FIN go the other way.
            if getattr(arg, "t_data", -1.0) < 0 or (getattr(arg, "src", None), getattr(arg, "dst", None)) != (src, dst):
                return post(src, dst, nbytes, fn, arg, *rest, **kw)
            times = [env.now, env.now]
            self.wire[(src, dst, arg.nbytes, arg.t_post)].append(times)
            self._leaving[id(arg)] = times

            def arrived(value: Any) -> None:
                times[1] = env.now
                if fn is not None:
                    fn(value)

            over = post(src, dst, nbytes, arrived, arg, *rest, **kw)
            if over:
                self._leaving.pop(id(arg), None)
            return over

        return noted


@dataclass
class Message:
    """One message of the explained run."""

    src: int
    dst: int
    nbytes: int
    protocol: str
    t_post: float
    t_done: float
    values: np.ndarray | None = None  # what it carried (first run)
    pieces: list[tuple[frozenset[int], int]] | None = None  # per element: (ranks summed in, element index)
    step: int = 0
    t_data: float | None = None  # when the payload started to move (None: not recorded)
    wire: tuple[float, float] | None = None  # when its bytes left and the last one arrived (None: not noted)


def message_label(msg: Message) -> str:
    """What a message carries: its decoded elements (``x2[0..5]``), else ``token`` or its byte count."""
    if msg.pieces:
        return describe_pieces(msg.pieces)
    return "token" if msg.nbytes == 0 else f"{msg.nbytes} B"


def observed_messages(world: ObservedWorld) -> list[Message]:
    """Pair the posted contents with the engine's message records (FIFO per envelope)."""
    queues: dict[tuple[int, int, int, int], list[np.ndarray | None]] = defaultdict(list)
    for key, _t, contents in world.posted:
        queues[key].append(contents)
    out = []
    for rec in world.tracer.messages:
        queue = queues.get((rec.src, rec.dst, rec.context, rec.tag))
        contents = queue.pop(0) if queue else None
        out.append(Message(rec.src, rec.dst, rec.nbytes, rec.protocol, rec.t_post, rec.t_done, contents,
                           t_data=rec.t_data))
    out.sort(key=lambda m: (m.t_post, m.src, m.dst, m.t_done))
    # Transfers between two ranks start and end in posting order, as their records are sorted.
    wires = {key: list(times) for key, times in world.wire.items()}
    for msg in out:
        queue = wires.get((msg.src, msg.dst, msg.nbytes, msg.t_post))
        if queue:
            left, arrived = queue.pop(0)
            msg.wire = (left, arrived)
    return out


def assign_steps(messages: Sequence[Message]) -> None:
    """Set each message's step: 1 + the step of the latest message its sender received before posting it."""
    received: dict[int, list[Message]] = defaultdict(list)
    for msg in sorted(messages, key=lambda m: (m.t_post, m.t_done)):
        before = [m.step for m in received[msg.src] if m.t_done <= msg.t_post]
        msg.step = 1 + max(before, default=0)
        received[msg.dst].append(msg)
