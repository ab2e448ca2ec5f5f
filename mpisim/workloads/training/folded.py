"""The bytes of folded tensor-parallel collectives, credited to the NVLink links that carry them.

With ``fold: auto`` (:mod:`~mpisim.workloads.training.plan`) only tp rank 0 of each group is
simulated and each tensor-parallel collective is a delay measured once on a fresh world: the
world's own network never sees those bytes, and its link figures would show the NICs busy
while the NVLink ports, which carry every tp collective, looked idle. After the run each
group's collectives are credited to its own links (:mod:`mpisim.network.credited`): the fresh
world's per-link load of one call (tp group 0), times the calls the group's simulated rank
made, moved onto the group's links by matching routes -- the route between the group's i-th
and k-th ranks crosses, hop for hop, the links that group 0's i-th and k-th ranks' route does.
With folded data-parallel replicas (:mod:`~mpisim.workloads.training.replicas`) a simulated
rank also stands for its peers in every other replica, whose groups make the same calls.
"""

from __future__ import annotations

from collections import Counter

from mpisim.mpi.world import World
from mpisim.network.credited import credit
from mpisim.workloads.training.plan import Job


def credit_folded_tp(job: Job, world: World, calls_by_rank: dict[int, Counter]) -> None:
    """Credit every folded tp group's collectives to its links; *calls_by_rank* maps each
    simulated rank to its tally of (collective, elements) -> calls."""
    if not job.fold or not job.tp_links:
        return
    layout = job.layout
    first = layout.group(0, "tp")
    for rank, calls in sorted(calls_by_rank.items()):
        for stand_in in _replica_peers(job, rank):
            _credit_group(job, world, first, layout.group(stand_in, "tp"), calls)


def _replica_peers(job: Job, rank: int) -> tuple[int, ...]:
    """*rank* and, with folded replicas, the ranks at its place in every other replica."""
    if not job.dp_times:
        return (rank,)
    cp = job.layout.cp
    return job.layout.group(rank, "dp")[job.layout.coords(rank).dp % cp::cp]


def _credit_group(job: Job, world: World, first: tuple[int, ...], group: tuple[int, ...], calls: Counter) -> None:
    """Credit *calls* of tp group *group*, measured on group *first*, to *group*'s own links."""
    topology = world.topology
    rename: dict[str, str] = {}
    for i, a in enumerate(first):
        for k, b in enumerate(first):
            if i != k:
                ours = topology.route(group[i], group[k]).links
                for theirs, mine in zip(topology.route(a, b).links, ours, strict=True):
                    rename[theirs.name] = mine.name
    for shape, n in sorted(calls.items()):
        for name, (nbytes, busy) in job.tp_links.get(shape, {}).items():
            if name in rename:
                credit(world.memo, rename[name], n * nbytes, n * busy)
