"""Overlapping communication with computation: start the allreduce, compute, then wait.

Backward propagation produces one layer's gradients at a time, last layer first. A program
that waits for each layer's allreduce before computing the next layer leaves the network
idle while it computes and the processor idle while it communicates. Starting the allreduce
as a concurrent activity (``comm.start``) and waiting for all of them at the end hides the
communication behind the remaining backward compute: only what outlasts the compute shows.

Arguments (``args:``): ``layers``, ``params_per_layer`` (float32 elements), ``compute``
(backward time per layer, e.g. ``20 ms``) and ``overlap`` (true or false). Buffers are
size-only (:class:`mpisim.SizePayload`): the timing is exactly that of real arrays, without
the memory.
"""

import numpy as np

from mpisim import SizePayload
from mpisim.engine.units import parse_time


def main(comm, args):
    layers = int(args.get("layers", 4))
    count = int(args.get("params_per_layer", 25_000_000))
    compute = parse_time(args.get("compute", "20 ms"))
    overlap = bool(args.get("overlap", True))
    t0 = comm.now
    pending = []
    for layer in reversed(range(layers)):
        yield from comm.compute(compute, label=f"backward layer {layer}")
        sync = comm.allreduce(SizePayload(count, np.float32), algorithm="ring")
        if overlap:
            pending.append(comm.start(sync))  # runs while the next layer computes
        else:
            yield from sync  # the next layer waits for this one's gradients to be reduced
    for task in pending:  # noqa: UP028 -- wait for each started activity in turn
        yield task
    return {"iteration_s": comm.now - t0, "compute_s": layers * compute}
