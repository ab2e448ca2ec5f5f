"""A million ranks, and message fidelity per message (issue 32, items 4 and 5), in processor time.

The machine is shared (2 cores, several engineers), so every figure here is *processor* time
(``time.process_time``) and peak resident memory (``ru_maxrss``), never wall time: waiting for
a busy core is not mpisim's cost.

**The curve** (``ring-P``): a 1.2 GB ring allreduce of size-only data at ``fidelity:
collective`` on the ``scaling`` module's fat tree (25 GB/s, 1 us), through the scenario layer
as ``mpisim run`` runs it, from 16,384 to 1,048,576 ranks, each in a fresh process. The table
gives processor time, peak memory and the growth exponent between neighbouring points
(``log(t2 / t1) / log(p2 / p1)``: 1 is linear in ranks). Target at 1,048,576 ranks: at most
60 s and 8 GB.

**auto at 131,072 ranks** (``auto-allreduce-131072``, ``auto-bcast-131072``): ``mpisim run``
of an ``auto`` allreduce and bcast of 1.2 GB on 131,072 CPU ranks, default fidelity; they must
run, or be refused up front (exit 2, one line), never be killed or end in a traceback.

**Message fidelity per message** (``message-ring-P``): every rank sends 1.2 GB / P to its right
neighbour and receives from its left (``sendrecv``) for 128 steps, the messages of a ring
allreduce's steps (rank r sends block r - k - 1 at step k), at ``fidelity: message`` on ``ib-hdr`` with 32 ranks per node (shared memory
and network hops in one ring; the preset's MPI parameters). P is 256 to 4,096, and the blocks are
MPICH's ring cut of 300M float32 (``ceil(300M / P)`` each, the last shorter where P does not
divide the count), so the messages are those of the allreduce -- the short block is what makes
the ranks drift apart and their flows start at instants of their own (see
mpisim/network/fairshare.py, "Solves without an event"). Printed: processor time and SimPy events per message, and a bare SimPy ring of the
same processes and messages (``scenario_run.bare_ring``: one timed transfer a message, and four:
a rendezvous's request, clear to send, data and FIN) for comparison. Targets: at most 2x the
bare four-leg ring per message, and events per message flat (4,096 ranks at most 1.25x 256).
"""

from __future__ import annotations

import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import ROOT, Figure, command, info, module_main, peak_rss, target

MODULE = "million"
CURVE = (16384, 65536, 262144, 1048576)
CPU_TARGET_S = 60.0
MEMORY_TARGET = 8e9
MESSAGE_RANKS = (256, 512, 1024, 2048, 4096)
STEPS = 128
COUNT = 300_000_000  # 1.2 GB of float32
PER_NODE = 32
BARE_RATIO_TARGET = 2.0
FLAT_TARGET = 1.25

AUTO_SCENARIO = """\
name: auto-{collective}-{p}
topology: {{nodes: {p}, inter: {{kind: fat_tree, bandwidth: 25 GB/s, latency: 1 us}}}}
network: fairshare
payload: size
trace: {{messages: false, spans: false}}
workload: {{kind: collective, collective: {collective}, algorithm: auto, sizes: [1.2 GB]}}
"""


def ring_case(p: int):
    def run() -> list[Figure]:
        from benchmarks.scaling import scenario
        from mpisim.scenario.load import load_dict
        from mpisim.scenario.run import run_scenario

        cpu = time.process_time()
        result = run_scenario(load_dict(scenario("ring", p)))
        cpu = time.process_time() - cpu
        cmd = command(MODULE, f"ring-{p}")
        label = f"ring allreduce 1.2 GB at collective fidelity, {p} ranks"
        note = f"simulated {result.rows[-1]['time_s'] * 1e3:.3f} ms"
        if p == max(CURVE):
            return [target(f"{label}: processor time", cpu, "s", CPU_TARGET_S, reproduce=cmd, note=note),
                    target(f"{label}: peak memory", peak_rss() / 1e9, "GB", MEMORY_TARGET / 1e9, reproduce=cmd)]
        return [info(f"{label}: processor time", cpu, "s", reproduce=cmd, note=note),
                info(f"{label}: peak memory", peak_rss() / 1e9, "GB", reproduce=cmd)]

    return run


def auto_case(collective: str, p: int):
    def run() -> list[Figure]:
        cmd = command(MODULE, f"auto-{collective}-{p}")
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"auto-{collective}.yaml"
            path.write_text(AUTO_SCENARIO.format(collective=collective, p=p))
            done = subprocess.run([sys.executable, "-m", "mpisim", "run", str(path), "--json", "--quiet"], cwd=ROOT,
                                  capture_output=True, text=True, check=False)
        lines = done.stderr.strip().splitlines()
        refused = done.returncode == 2 and len(lines) >= 1 and "Traceback" not in done.stderr
        ok = done.returncode == 0 or refused
        what = "ran" if done.returncode == 0 else "refused up front" if refused else f"exit {done.returncode}"
        return [Figure(f"auto {collective} 1.2 GB, {p} ranks: runs or is refused up front", float(done.returncode),
                       "exit code", "0, or 2 with one line", ok, cmd, f"{what}: {(lines or [''])[-1][:160]}")]

    return run


def message_ring(p: int) -> tuple[float, int, int]:
    """(processor seconds, messages, SimPy events) of STEPS ring steps over *p* ranks at message fidelity."""
    import numpy as np

    import mpisim.collectives  # noqa: F401  (a complete installation, as users run it)
    from benchmarks.common import preset_topology, quiet_world
    from mpisim.mpi import SizePayload

    topology, mpi = preset_topology("ib-hdr", nodes=p // PER_NODE, ranks_per_node=PER_NODE)
    world = quiet_world(topology, "fairshare", mpi)
    size = -(-COUNT // p)  # MPICH's ring cut: blocks of ceil(count / p), the last ones shorter
    blocks = [SizePayload(max(0, min(size, COUNT - size * i)), np.float32) for i in range(p)]

    def program(comm):
        r = comm.rank
        right, left = (r + 1) % p, (r - 1) % p
        yield from comm.world.synchronize(comm.world_rank)
        for k in range(STEPS):  # the reduce-scatter half's schedule: block r - k - 1 at step k
            yield from comm.sendrecv(blocks[(r - k - 1) % p], dest=right, source=left)

    world.launch(program)
    cpu = time.process_time()
    world.run()
    return time.process_time() - cpu, world.tracer.message_count, world.events_processed


def bare_ring_cpu(p: int, legs: int) -> float:
    """Processor seconds per message of scenario_run's bare SimPy ring (best of three)."""
    from benchmarks.scenario_run import bare_ring

    best = math.inf
    for _ in range(3):
        cpu = time.process_time()
        bare_ring(p, STEPS, legs)
        best = min(best, (time.process_time() - cpu) / (p * STEPS))
    return best


def message_case(p: int):
    def run() -> list[Figure]:
        cpu, messages, events = message_ring(p)
        one, four = bare_ring_cpu(p, 1), bare_ring_cpu(p, 4)
        per = cpu / messages
        cmd = command(MODULE, f"message-ring-{p}")
        label = f"message fidelity, ring steps, {p} ranks (ib-hdr x {PER_NODE})"
        return [
            info(f"{label}: events per message", events / messages, "", reproduce=cmd,
                 note=f"{messages:,} messages, {events:,} events"),
            info(f"{label}: processor time per message", per * 1e6, "us", reproduce=cmd,
                 note=f"bare SimPy ring: {one * 1e6:.2f} us one leg, {four * 1e6:.2f} us four legs"),
            target(f"{label}: per message vs bare four-leg SimPy ring", per / four, "x", BARE_RATIO_TARGET,
                   reproduce=cmd),
        ]

    return run


CASES = {f"ring-{p}": ring_case(p) for p in CURVE}
CASES.update({f"auto-{c}-131072": auto_case(c, 131072) for c in ("allreduce", "bcast")})
CASES.update({f"message-ring-{p}": message_case(p) for p in MESSAGE_RANKS})


def curve(figures: list[Figure]) -> list[Figure]:
    """Print the curve (ranks, processor time, memory, growth exponent) and events per message; return the flatness figure."""
    values: dict[tuple[int, str], float] = {}
    for f in figures:
        for p in CURVE:
            for what in ("processor time", "peak memory"):
                if f.name == f"ring allreduce 1.2 GB at collective fidelity, {p} ranks: {what}":
                    values[p, what] = f.value
        for p in MESSAGE_RANKS:
            if f.name == f"message fidelity, ring steps, {p} ranks (ib-hdr x {PER_NODE}): events per message":
                values[p, "events"] = f.value
    print("\n| ranks | processor time | peak memory | growth exponent (time) | growth exponent (memory) |")
    print("|---|---|---|---|---|")
    previous = None
    for p in CURVE:
        if (p, "processor time") not in values:
            continue
        t, m = values[p, "processor time"], values[p, "peak memory"]
        exps = ["", ""]
        if previous is not None:
            q, tq, mq = previous
            exps = [f"{math.log(t / tq) / math.log(p / q):.2f}", f"{math.log(m / mq) / math.log(p / q):.2f}"]
        print(f"| {p:,} | {t:.1f} s | {m:.2f} GB | {exps[0]} | {exps[1]} |")
        previous = (p, t, m)
    out = []
    lo, hi = min(MESSAGE_RANKS), max(MESSAGE_RANKS)
    if (lo, "events") in values and (hi, "events") in values:
        print("\n| ranks | events per message |\n|---|---|")
        for p in MESSAGE_RANKS:
            if (p, "events") in values:
                print(f"| {p:,} | {values[p, 'events']:.2f} |")
        out.append(target(f"message fidelity: events per message, {hi} / {lo} ranks",
                          values[hi, "events"] / values[lo, "events"], "x", FLAT_TARGET, reproduce=command(MODULE)))
    return out


def main(argv: list[str] | None = None) -> int:
    return module_main(MODULE, __doc__, CASES, argv, derive=curve)


if __name__ == "__main__":
    sys.exit(main())
