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
    """A World that notes the contents of every message as its send is posted."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.posted: list[tuple[tuple[int, int, int, int], float, np.ndarray | None]] = []

    def post_send(self, comm: Any, buf: Any, dest: int, tag: int, *, synchronous: bool = False) -> Any:
        req = super().post_send(comm, buf, dest, tag, synchronous=synchronous)
        if dest != PROC_NULL:
            array = buf.array if isinstance(buf, Payload) else np.asarray(buf)
            contents = None if array is None else np.array(array, copy=True)
            self.posted.append(((comm.world_rank, comm.group[dest], comm.context, tag), self.env.now, contents))
        return req


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
    return out


def assign_steps(messages: Sequence[Message]) -> None:
    """Set each message's step: 1 + the step of the latest message its sender received before posting it."""
    received: dict[int, list[Message]] = defaultdict(list)
    for msg in sorted(messages, key=lambda m: (m.t_post, m.t_done)):
        before = [m.step for m in received[msg.src] if m.t_done <= msg.t_post]
        msg.step = 1 + max(before, default=0)
        received[msg.dst].append(msg)
