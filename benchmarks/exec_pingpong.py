"""mpisim exec: a blocking mpi4py-style ping-pong against the generator-style program, per message.

An unchanged mpi4py program pays for its convenience twice per blocking call: the greenlet
switches into the engine and back, and the mpi4py layer reads the buffer specification. This
measures that price: the same 8-byte eager ping-pong between two ranks, once written as
generators (``yield from comm.Send(buf, dest=1)``) and once as an mpi4py script run by
:class:`mpisim.compat.ranks.Runner` (``comm.Send(buf, dest=1)``), on identical worlds (analytic
network, no per-message records), best of several interleaved runs.

Target: the mpi4py-style program costs at most 2x the generator-style one per message.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import Figure, command, info, module_main, target

MODULE = "exec_pingpong"
MESSAGES = 40_000
REPEATS = 5
RATIO_TARGET = 2.0

SCRIPT = """\
import sys
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
peer = 1 - rank
n = int(sys.argv[1])
sbuf = np.zeros(8, dtype="B")
rbuf = np.empty(8, dtype="B")
for _ in range(n // 2):
    if rank == 0:
        comm.Send(sbuf, dest=peer)
        comm.Recv(rbuf, source=peer)
    else:
        comm.Recv(rbuf, source=peer)
        comm.Send(sbuf, dest=peer)
"""


def _world():
    import mpisim.collectives  # noqa: F401  (a complete installation, as users run it)
    from benchmarks.common import quiet_world
    from mpisim.network.topology import FabricSpec, TopologySpec, build_topology

    spec = TopologySpec("pair", nodes=2, inter=FabricSpec("star", 12.5e9, 1.5e-6))
    return quiet_world(build_topology(spec), "analytic")


def generator_style(n: int, checked: bool = False) -> tuple[float, int]:
    """Wall seconds per message of the ping-pong written as SimPy generators.

    *checked*: on the communicator the ``program`` workload gives programs
    (:class:`~mpisim.mpi.usercomm.UserComm`), whose calls report a missing ``yield from``.
    """
    from mpisim.mpi.usercomm import UserComm

    world = _world()
    if checked:
        world.comm_class = UserComm

    def program(comm):
        peer = 1 - comm.rank
        sbuf, rbuf = np.zeros(8, dtype="B"), np.empty(8, dtype="B")
        for _ in range(n // 2):
            if comm.rank == 0:
                yield from comm.Send(sbuf, dest=peer)
                yield from comm.Recv(rbuf, source=peer)
            else:
                yield from comm.Recv(rbuf, source=peer)
                yield from comm.Send(sbuf, dest=peer)

    world.launch(program)
    t0 = time.perf_counter()
    world.run()
    return (time.perf_counter() - t0) / n, world.tracer.message_count


def mpi4py_style(n: int, script: Path) -> tuple[float, int]:
    """Wall seconds per message of the same ping-pong as an unchanged mpi4py script."""
    from mpisim.compat import mpi4py as mpi_module
    from mpisim.compat.ranks import Runner
    from mpisim.workloads.mpi4py_program import mpi4py_package

    world = _world()
    runner = Runner(world, script, [str(n)], mpi_module=mpi_module, package=mpi4py_package())
    t0 = time.perf_counter()
    runner.run()
    return (time.perf_counter() - t0) / n, world.tracer.message_count


def pingpong() -> list[Figure]:
    """Both costs per message and their ratio."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "pingpong.py"
        script.write_text(SCRIPT)
        gens, checked, ours, counts = [], [], [], set()
        for _ in range(REPEATS):
            cost, messages = generator_style(MESSAGES)
            gens.append(cost)
            counts.add(messages)
            cost, messages = generator_style(MESSAGES, checked=True)
            checked.append(cost)
            counts.add(messages)
            cost, messages = mpi4py_style(MESSAGES, script)
            ours.append(cost)
            counts.add(messages)
    if counts != {MESSAGES}:
        raise AssertionError(f"the two programs sent {sorted(counts)} messages, expected {MESSAGES} each")
    g, c, o = min(gens), min(checked), min(ours)
    cmd = command(MODULE, "pingpong")
    return [
        info("generator-style ping-pong (yield from comm.Send), per message", g * 1e6, "us", reproduce=cmd),
        info("... on the program workload's checked communicator (a missing yield from is reported)", c * 1e6,
             "us", reproduce=cmd, note=f"{(c / g - 1) * 100:+.0f}% per message"),
        info("mpi4py-style ping-pong (comm.Send under mpisim exec), per message", o * 1e6, "us", reproduce=cmd,
             note=f"{MESSAGES:,} messages, best of {REPEATS}"),
        target("mpi4py-style / generator-style per message", o / g, "x", RATIO_TARGET, reproduce=cmd),
    ]


CASES = {"pingpong": pingpong}


def main(argv: list[str] | None = None) -> int:
    return module_main(MODULE, __doc__, CASES, argv)


if __name__ == "__main__":
    sys.exit(main())
