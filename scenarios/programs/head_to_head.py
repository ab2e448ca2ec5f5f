"""Head-to-head blocking sends: the program that works for small messages and hangs for large ones.

Ranks 0 and 1 both call ``send`` first and ``recv`` second::

    rank 0: send(to 1) ... recv(from 1)
    rank 1: send(to 0) ... recv(from 0)

MPI allows ``send`` to return before the message is received, but does not promise it. Below
the *eager limit* the library copies the message out and ``send`` returns at once, so both ranks
reach their ``recv`` and the program completes. Above it the library uses the *rendezvous*
protocol: ``send`` waits for the receiver to post a matching receive -- and each rank is stuck
in ``send`` waiting for the other. mpisim then stops and names both blocked ranks and the
cycle of waits, instead of hanging like the real program would.

The fix is to let one side receive first, or to use ``sendrecv`` or non-blocking calls (see
halo.py).

Argument (``args:`` in the scenario): ``nbytes``, the message size (default ``1 MiB``).
Ranks other than 0 and 1 do nothing.
"""

import numpy as np

from mpisim.engine.units import parse_size


def main(comm, args=None):
    """Send to the other rank, then receive from it (ranks 0 and 1)."""
    nbytes = parse_size((args or {}).get("nbytes", "1 MiB"))
    if comm.rank > 1:
        return None
    peer = 1 - comm.rank
    yield from comm.send(np.full(nbytes, comm.rank, dtype=np.uint8), dest=peer)
    got = yield from comm.recv(source=peer)
    return {"nbytes": nbytes, "received_from_peer": bool(np.all(got == peer))}
