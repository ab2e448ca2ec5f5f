"""Engine overhead: wall time per simulated eager message, against a bare SimPy ping-pong.

The floor for any SimPy simulation is SimPy's own cost per event. The cheapest way to pass a
message between two SimPy processes is a ``simpy.Store`` ping-pong: a ``put`` and a ``get``
per message, nothing else. mpisim's ping-pong goes through the whole MPI layer instead --
``comm.send``/``comm.recv``, matching, the eager protocol, the analytic network -- with
per-message records switched off. The figure is the ratio of the two wall times per message,
measured in the same run (best of several, interleaved, so both see the same machine load).

Target: mpisim's cost per message within 5x of the bare SimPy ping-pong.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import simpy

from benchmarks.common import Figure, command, info, module_main, target

MODULE = "engine_overhead"
MESSAGES = 40_000
REPEATS = 5
RATIO_TARGET = 5.0


def bare_simpy(n: int) -> float:
    """Return wall seconds per message of a two-process ping-pong through simpy.Store."""
    env = simpy.Environment()
    ping_box, pong_box = simpy.Store(env), simpy.Store(env)

    def ping():
        for i in range(n // 2):
            yield ping_box.put(i)
            yield pong_box.get()

    def pong():
        for i in range(n // 2):
            yield ping_box.get()
            yield pong_box.put(i)

    env.process(ping())
    env.process(pong())
    t0 = time.perf_counter()
    env.run()
    return (time.perf_counter() - t0) / n


def mpisim_pingpong(n: int) -> tuple[float, int]:
    """Return (wall seconds per message, messages) of an 8-byte eager ping-pong through mpisim."""
    import mpisim.collectives  # noqa: F401  (a complete installation, as users run it)
    from benchmarks.common import quiet_world
    from mpisim.mpi import SizePayload
    from mpisim.network.topology import FabricSpec, TopologySpec, build_topology

    spec = TopologySpec("pair", nodes=2, inter=FabricSpec("star", 12.5e9, 1.5e-6))
    world = quiet_world(build_topology(spec), "analytic")
    buf = SizePayload(8, np.int8)

    def program(comm):
        peer = 1 - comm.rank
        for _ in range(n // 2):
            if comm.rank == 0:
                yield from comm.send(buf, dest=peer)
                yield from comm.recv(source=peer)
            else:
                yield from comm.recv(source=peer)
                yield from comm.send(buf, dest=peer)

    world.launch(program)
    t0 = time.perf_counter()
    world.run()
    return (time.perf_counter() - t0) / n, world.tracer.message_count


def pingpong() -> list[Figure]:
    """The engine-overhead figures: both costs per message and their ratio."""
    bare, ours, messages = [], [], 0
    for _ in range(REPEATS):
        bare.append(bare_simpy(MESSAGES))
        cost, messages = mpisim_pingpong(MESSAGES)
        ours.append(cost)
    b, o = min(bare), min(ours)
    cmd = command(MODULE, "pingpong")
    return [
        info("bare SimPy ping-pong (simpy.Store), per message", b * 1e6, "us", reproduce=cmd),
        info("mpisim eager ping-pong (analytic model), per message", o * 1e6, "us", reproduce=cmd,
             note=f"{messages:,} messages, best of {REPEATS}"),
        target("engine overhead: mpisim / bare SimPy per message", o / b, "x", RATIO_TARGET, reproduce=cmd),
    ]


CASES = {"pingpong": pingpong}


def main(argv: list[str] | None = None) -> int:
    return module_main(MODULE, __doc__, CASES, argv)


if __name__ == "__main__":
    sys.exit(main())
