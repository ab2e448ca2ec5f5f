"""How much wall-clock time does the fair-share network spend per flow event?

A flow event is a start or a finish. The fair-share model re-solves only the connected
component a change touches, so with *disjoint* flows (each on its own link) the cost per event
must not grow with the number of flows running elsewhere: the target is that going from 16 to
1024 concurrent disjoint flows costs at most 2x per event. With 1024 flows sharing one
bottleneck link every start or finish changes every rate, so each event re-solves all of them;
that case shows the price of real contention.

Each sender runs back-to-back transfers of deterministic pseudo-random sizes, so starts and
finishes are spread over time instead of all falling on the same instants. The "batched" row
uses equal sizes instead: each round's 1024 starts, and then its 1024 finishes, happen at one
instant and cost one solve each, which shows what batching saves.

Run from the repository root:

    python -m benchmarks.fairshare_bench            (or: python benchmarks/fairshare_bench.py)
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script: make the repository root importable.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mpisim.engine.sim import Simulation
from mpisim.engine.trace import Tracer
from mpisim.network.analytic import AnalyticNetwork
from mpisim.network.fairshare import FairShareNetwork
from mpisim.network.links import Link, Route

TARGET_RATIO = 2.0
REPRODUCE = "python -m benchmarks.fairshare_bench"


class SenderTopology:
    """Sender *k* is rank k + 1 and sends to rank 0 through its own uplink and, optionally, one shared link."""

    def __init__(self, senders: int, bandwidth: float, latency: float, shared: bool) -> None:
        self.links = [Link(f"up{k + 1}", latency, bandwidth, index=k) for k in range(senders)]
        tail = []
        if shared:
            tail = [Link("down0", latency, bandwidth, index=senders)]
            self.links += tail
        self._routes = [Route.through([up, *tail]) for up in self.links[:senders]]
        self.size = senders + 1

    def route(self, src: int, dst: int) -> Route:
        return self._routes[src - 1]


def run_case(
    model: type, senders: int, transfers_each: int, shared: bool, equal: bool = False, seed: int = 1
) -> dict[str, float]:
    """Run *senders* concurrent senders doing *transfers_each* transfers each; return the figures.

    With *equal*, every transfer has the same size, so all starts (and all finishes) of a round
    fall on one instant and are batched; otherwise sizes are pseudo-random.
    """
    topo = SenderTopology(senders, bandwidth=12.5e9, latency=1e-6, shared=shared)
    sim = Simulation(tracer=Tracer(messages=False, spans=False, links=False))
    net = model(sim, topo)
    env = sim.env
    rng = random.Random(seed)
    sizes = [
        [1_000_000 if equal else rng.randint(500_000, 1_500_000) for _ in range(transfers_each)]
        for _ in range(senders)
    ]

    def sender(rank: int, plan: list[int]):
        for nbytes in plan:
            yield from net.transfer(rank, 0, nbytes)

    for k in range(senders):
        env.process(sender(k + 1, sizes[k]))
    t0 = time.perf_counter()
    sim.run()
    wall = time.perf_counter() - t0

    events = 2 * senders * transfers_each
    return {
        "wall": wall,
        "events": events,
        "us_per_event": wall / events * 1e6,
        "solves": getattr(net, "recomputations", 0),
        "rerated_per_event": getattr(net, "rates_recomputed", 0) / events,
    }


def best_of(repeats: int, *case) -> dict[str, float]:
    """Return the run with the lowest wall-clock time (the least disturbed by the machine)."""
    return min((run_case(*case) for _ in range(repeats)), key=lambda r: r["wall"])


def cost_per_event() -> list:
    """The benchmark's figures at its default size, for ``python -m benchmarks`` (see common.py)."""
    from benchmarks.common import info, target

    cmd = "python -m benchmarks.fairshare_bench --case cost-per-event"
    flows = 40_000
    cases = {
        "16 disjoint": ("disjoint", 16, flows // 16, False, False),
        "1024 disjoint": ("disjoint", 1024, flows // 1024, False, False),
        "1024 disjoint, batched": ("disjoint, batched", 1024, flows // 1024, False, True),
        "1024 on one bottleneck": ("shared bottleneck", 1024, 2, True, False),
    }
    runs = {label: best_of(3, FairShareNetwork, *case[1:]) for label, case in cases.items()}
    figures = [info(f"fair-share cost per flow event, {label} flows", r["us_per_event"], "us", reproduce=cmd,
                    note=f"{r['solves']} solves, {r['rerated_per_event']:.2f} rates recomputed per event")
               for label, r in runs.items()]
    ratio = runs["1024 disjoint"]["us_per_event"] / runs["16 disjoint"]["us_per_event"]
    figures.append(target("fair-share cost per event, 1024 / 16 disjoint flows", ratio, "x", TARGET_RATIO,
                          reproduce=cmd))
    return figures


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if "--case" in args_in or "--json" in args_in:
        from benchmarks.common import module_main

        return module_main("fairshare_bench", __doc__, {"cost-per-event": cost_per_event}, argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--flows", type=int, default=40_000, help="transfers per disjoint case (default 40000)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per case, best kept (default 3)")
    args = parser.parse_args(argv)

    # (label, concurrent flows, transfers per sender, one shared link?, equal sizes?)
    cases = [
        ("disjoint", 16, max(1, args.flows // 16), False, False),
        ("disjoint", 1024, max(1, args.flows // 1024), False, False),
        ("disjoint, batched", 1024, max(1, args.flows // 1024), False, True),
        ("shared bottleneck", 1024, 2, True, False),
    ]
    print(f"fair-share network: wall-clock cost per flow event (start or finish); reproduce: {REPRODUCE}")
    print("floor = the same workload on the contention-free analytic model (SimPy's own cost)")
    print()
    header = (
        f"{'case':<18} {'flows':>6} {'events':>8} {'wall s':>8} {'us/event':>9} {'floor':>7}"
        f" {'solves':>8} {'re-rated/event':>15}"
    )
    print(header)
    print("-" * len(header))
    results = {}
    for name, *case in cases:
        r = best_of(args.repeat, FairShareNetwork, *case)
        floor = best_of(args.repeat, AnalyticNetwork, *case)
        results[(name, case[0])] = r, floor
        print(
            f"{name:<18} {case[0]:>6} {r['events']:>8} {r['wall']:>8.3f} {r['us_per_event']:>9.2f}"
            f" {floor['us_per_event']:>7.2f} {r['solves']:>8} {r['rerated_per_event']:>15.2f}"
        )

    (small, small_floor), (large, large_floor) = results[("disjoint", 16)], results[("disjoint", 1024)]
    ratio = large["us_per_event"] / small["us_per_event"]
    floor_ratio = large_floor["us_per_event"] / small_floor["us_per_event"]
    verdict = "PASS" if ratio <= TARGET_RATIO else "FAIL"
    print()
    print(
        f"disjoint 1024 / 16 cost per event: {ratio:.2f}x (target <= {TARGET_RATIO:g}x): {verdict}"
        f"  [analytic floor: {floor_ratio:.2f}x]"
    )
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
