"""Scenario run: what a user gets from ``mpisim run``, with mpisim's default MPI parameters.

The ``scale`` module builds its worlds directly, with the ``ib-hdr`` preset's MPI parameters
(0.1 us of CPU per message). A user's scenario usually leaves ``mpi:`` out, and mpisim's
defaults have no per-message overhead: the FIN of one ring step and the request-to-send of
the next then leave every rank at the same instant, which is the hard case for the fair-share
model (their flows share links and chain every rank into one component).

The case ``ring-allreduce-1024`` writes this scenario and runs it through ``python -m mpisim
run FILE --json`` in a child process, timing the whole command (start-up, loading, topology,
simulation, output)::

    topology: {nodes: 1024, inter: {kind: fat_tree, bandwidth: 25 GB/s, latency: 1 us}}
    network: fairshare
    payload: size
    workload: {kind: collective, collective: allreduce, algorithm: ring, sizes: [1.2 GB]}

A ring allreduce over p ranks sends p x 2(p-1) messages (2 095 104 for p = 1024), each a
rendezvous of four fair-share flows. The cost per message is set against a bare SimPy
``Store`` ping-pong measured in the same run (best of several, before and after), the floor
of any SimPy simulation.

Targets (issue 13): the run in at most 30 s on the 2-core machine; per message at most 3x the
bare SimPy message. The child's processor time is printed too: on a machine shared with other
work the wall time includes waiting for a core, and the processor time mostly does not.

What SimPy alone charges for such a ring is printed beside it (``bare_ring``): the same number
of processes, each sending to its right neighbour and waiting for its left one's message, where
a message is nothing but *legs* timed transfers one after the other (a ``Timeout`` each, the
last one putting into the receiver's ``Store``) -- no matching, no requests, no bandwidth
sharing, no reduction. With one leg (an eager message) that is the floor of a message that
takes time; with four (request to send, clear to send, data, FIN) the floor of a rendezvous.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import simpy

from benchmarks.common import ROOT, Figure, command, info, module_main, target
from benchmarks.engine_overhead import bare_simpy

MODULE = "scenario_run"
WALL_TARGET = 30.0
RATIO_TARGET = 3.0
BARE_MESSAGES = 40_000
BARE_REPEATS = 3
FLOOR_STEPS = 64  # ring steps of the bare SimPy floor (p x 64 messages)

SCENARIO = """\
name: ring-allreduce-{p}
topology: {{nodes: {p}, inter: {{kind: fat_tree, bandwidth: 25 GB/s, latency: 1 us}}}}
network: fairshare
payload: size
workload: {{kind: collective, collective: allreduce, algorithm: ring, sizes: [1.2 GB]}}
"""


def bare_message() -> float:
    """Best wall seconds per message of the bare SimPy Store ping-pong."""
    return min(bare_simpy(BARE_MESSAGES) for _ in range(BARE_REPEATS))


def bare_ring(p: int, steps: int, legs: int) -> float:
    """Wall seconds per message of a bare SimPy ring of *p* processes, *legs* timed transfers a message."""
    env = simpy.Environment()
    boxes = [simpy.Store(env) for _ in range(p)]

    def leg(dst: int, left: int):
        def arrived(_event: simpy.Event) -> None:
            if left == 1:
                boxes[dst].put(None)
            else:
                env.timeout(1e-6).callbacks.append(leg(dst, left - 1))
        return arrived

    def rank(r: int):
        right = (r + 1) % p
        for _ in range(steps):
            env.timeout(1e-6).callbacks.append(leg(right, legs))
            yield boxes[r].get()

    for r in range(p):
        env.process(rank(r))
    t0 = time.perf_counter()
    env.run()
    return (time.perf_counter() - t0) / (p * steps)


def _children_cpu() -> float:
    """Processor seconds (user + system) used so far by this process's finished children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_scenario_case(p: int) -> list[Figure]:
    cmd = command(MODULE, f"ring-allreduce-{p}")
    bare_before = bare_message()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"ring-{p}.yaml"
        path.write_text(SCENARIO.format(p=p))
        cpu0 = _children_cpu()
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "mpisim", "run", str(path), "--json"], cwd=ROOT,
                              capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        cpu = _children_cpu() - cpu0
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return [Figure(f"mpisim run, ring allreduce, {p} ranks", float(done.returncode), "exit code", "0", False,
                       cmd, tail[:200])]
    bare = min(bare_before, bare_message())
    floors = {legs: min(bare_ring(p, FLOOR_STEPS, legs) for _ in range(BARE_REPEATS)) for legs in (1, 4)}
    messages = p * 2 * (p - 1)
    per_message = wall / messages
    label = f"mpisim run: ring allreduce 1.2 GB, {p} ranks, fat tree, default mpi"
    figures = [
        target(f"{label}: wall time", wall, "s", WALL_TARGET, reproduce=cmd, note=f"{messages:,} messages"),
        info(f"{label}: per message", per_message * 1e6, "us", reproduce=cmd,
             note=f"bare SimPy Store message {bare * 1e6:.2f} us"),
        info(f"{label}: processor time", cpu, "s", reproduce=cmd,
             note=f"{cpu / messages * 1e6:.1f} us per message; wall time minus waiting for a busy machine"),
        target(f"{label}: per message vs bare SimPy", per_message / bare, "x", RATIO_TARGET, reproduce=cmd),
        info(f"bare SimPy ring of {p} processes, one timed transfer a message (eager's floor), vs bare SimPy",
             floors[1] / bare, "x", reproduce=cmd, note=f"{floors[1] * 1e6:.2f} us a message"),
        info(f"bare SimPy ring of {p} processes, four timed transfers a message (a rendezvous's floor), "
             "vs bare SimPy", floors[4] / bare, "x", reproduce=cmd, note=f"{floors[4] * 1e6:.2f} us a message"),
    ]
    if p != TARGET_RANKS:  # a smaller run to look at quickly: figures only
        figures = [info(f.name, f.value, f.unit, reproduce=f.reproduce, note=f.note) for f in figures]
    return figures


TARGET_RANKS = 1024
CASES = {f"ring-allreduce-{p}": (lambda p=p: run_scenario_case(p)) for p in (256, TARGET_RANKS)}


def main(argv: list[str] | None = None) -> int:
    return module_main(MODULE, __doc__, CASES, argv)


if __name__ == "__main__":
    sys.exit(main())
