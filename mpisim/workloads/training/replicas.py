"""Folding the data-parallel replicas: simulate replica 0, time its gradient collectives once.

At 8,192 GPUs a Llama 3 405B job has 64 data-parallel replicas that run the same pipeline on
different micro-batches. Between gradient syncs they never talk: each replica's pipeline and
tensor-parallel traffic stays on its own GPUs, NICs and, on a rail-optimized or otherwise
non-blocking fabric, its own share of the spine. Where that holds every replica does the same
thing at the same time, so ``fold: auto`` simulates only the ranks of replica ``dp == 0`` (cp
members included) and turns each data-parallel collective -- the gradient allreduce or
reduce-scatter, ZeRO's allgather of updated parameters, FSDP's parameter gathers -- into the
time it takes on the whole fabric: measured once per (collective, elements, dtype) on a fresh
world where *every* data-parallel group of the job runs it at once, so whatever the groups
share (the spine, a node's NICs) is loaded as it is when all replicas sync together.

**When it is exact.** The folded collective starts when replica 0's rank calls it; in the full
run its peers in the other replicas call it at the same instant (they are replica 0 shifted),
so the collective alone takes what the fresh world measured. Two things the delay does not
see: the rank's own pipeline sends still on its NIC and its NCCL proxy thread while the collective runs (with
``overlap: {dp: true}`` the sync overlaps the backward's sends), and other stages' groups
syncing at other times. On a non-blocking fabric the second changes nothing; the first is
the difference (tests/workloads/test_replicas.py pins 1e-9 where nothing overlaps the sync):
the pipeline's sends run as on an idle NIC, so the folded iteration is shorter -- by 1e-5 to
2.4e-4 on the shipped training scenarios, by 0.9 to 1.7 % for Llama 3 405B at 8,192 to 16,384
GPUs (rows T11-T13), where a ZeRO-2 sync of 64 to 128 replicas overlaps many pipeline sends.

**When it falls back.** A fabric that is blocking (oversubscribed spine, a ring between
nodes) lets replicas' traffic meet on shared links at times that differ per replica, and so
do NICs or a host-bandwidth cap shared by GPUs of different replicas or stages (shared only
within one replica's stage, replica 0 shows the sharing and the stage's measurement too); expert parallelism with experts spread over the
data-parallel group makes replicas talk every layer, and the data-parallel form (``params:``)
checks real gradients that every replica must hold: those runs simulate every replica and
say why in the run's notes. ``fold: tp`` folds only the tensor-parallel groups; ``fold:
none`` nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np

from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.world import World
from mpisim.network.credited import credit
from mpisim.network.topology import TopologySpec
from mpisim.workloads.training.plan import Job, run_collective

__all__ = ["credit_folded_dp", "fold_reason", "fold_replicas", "measure_dp", "replica_ranks"]

#: Why replicas were not folded, for the run's notes (None: folded or nothing to fold).
Reason = str | None


def fold_reason(job: Job, spec: TopologySpec) -> Reason:
    """Why the replicas of *job* on the cluster *spec* must all be simulated, or None if replica 0
    stands for them all. Returns "" (no note) when there is nothing to fold (one replica, or
    folding switched off).
    """
    params, layout = job.params, job.layout
    if params.fold != "auto" or layout.dp < 2 or job.ddp is not None:
        return ""
    if layout.ep > 1 and params.model.moe:
        return "expert parallelism crosses the replicas every layer"
    if params.zero == 3 and params.overlap_dp:
        # Measured 17-30 % apart on 8-16 GPUs: the two streams' phase is the run's own.
        return ("ZeRO 3's parameter gathers and gradient reduce-scatters share the NIC while both "
                "overlap the compute, which delays timed alone do not see")
    if "dp" not in layout.order:
        return ""
    inter = spec.inter
    if spec.nodes > 1 and inter is not None:
        if inter.oversubscription > 1 or inter.kind == "ring":
            return ("the fabric between nodes is blocking (an oversubscribed spine or a ring), where "
                    "replicas' traffic meets at different times")
        # A shared NIC (local rank j uses NIC j % nics) or host-bandwidth cap is harmless when
        # every rank sharing it is in one replica and one pipeline stage: replica 0 is simulated
        # with its sharing, and the stage's fresh-world measurement runs its sharers together.
        if inter.host_bandwidth and not _shared_within_cohorts(job, spec, lambda local: 0):
            return ("ranks of different replicas or stages share a node's host bandwidth, where their "
                    "traffic meets at times that differ per replica")
        if inter.nics != spec.ranks_per_node and not _shared_within_cohorts(job, spec, lambda local: local % inter.nics):
            return ("ranks of different replicas or stages share a NIC, where their traffic meets at "
                    "times that differ per replica")
    return None


def _shared_within_cohorts(job: Job, spec: TopologySpec, port: Callable[[int], int]) -> bool:
    """Whether the ranks that share each node's *port* (a function of the local rank) all sit in one
    (replica, pipeline stage): the group whose data-parallel sync is measured and simulated together."""
    layout, cp = job.layout, job.layout.cp
    cohort_of: dict[tuple[int, int], tuple[int, int]] = {}
    for rank in range(layout.size):
        if spec.placement == "block":
            node, local = divmod(rank, spec.ranks_per_node)
        else:
            local, node = divmod(rank, spec.nodes)
        coords = layout.coords(rank)
        if cohort_of.setdefault((node, port(local)), (coords.dp // cp, coords.pp)) != (coords.dp // cp, coords.pp):
            return False
    return True


def fold_replicas(job: Job, spec: TopologySpec, new_world: Callable[[], World], notes: list[str]) -> None:
    """Fold *job*'s replicas where :func:`fold_reason` allows (timing its data-parallel collectives
    into ``job.dp_times``), and say in *notes* what was done and why.
    """
    reason = fold_reason(job, spec)
    if reason is None:
        job.dp_times = measure_dp(job, new_world)
        notes.append(f"replicas folded: replica 0 of {job.layout.replicas} simulated, its data-parallel "
                     "collectives timed once with every group on the whole fabric")
    elif reason:
        notes.append(f"every replica simulated: {reason}")


def replica_ranks(job: Job, ranks: list[int]) -> list[int]:
    """The ranks of *ranks* in data-parallel replica 0 (with cp, its first cp members)."""
    cp = job.layout.cp
    return [r for r in ranks if job.layout.coords(r).dp < cp]


def measure_dp(job: Job, new_world: Callable[[], World]) -> dict[tuple, float]:
    """Time every data-parallel collective the folded ranks make on a fresh world, per pipeline stage.

    A stage's data-parallel groups (one per tp rank, each spanning every replica) sync together,
    after the stage's last backward; different stages sync at different times. So each
    collective is timed with all of one stage's groups running it at once, and keyed by stage:
    (stage, group name, collective, elements, dtype) -> seconds, the slowest group's time.
    """
    layout = job.layout
    times: dict[tuple, float] = {}
    for stage in range(layout.pp):
        groups = sorted({layout.group(r, "dp") for r in range(layout.size)
                         if layout.coords(r).dp == 0 and layout.coords(r).pp == stage})
        for name, kind, count, dtype in sorted(_dp_calls(job, stage), key=lambda c: (c[0], c[1], c[2], str(c[3]))):
            fresh = new_world()
            finish: list[float] = []

            def one(comm: Comm, name: str = name, kind: str = kind, count: int = count, dtype: np.dtype = dtype,
                    finish: list[float] = finish) -> Proc[None]:
                sub = comm.sub(layout.group(comm.rank, "dp"), name)
                yield from run_collective(sub, kind, count, dtype, job.params.sync if kind == "allreduce" else None)
                finish.append(comm.now)

            fresh.launch(one, ranks=[r for g in groups for r in g])
            fresh.run()
            key = (stage, name, kind, count, np.dtype(dtype).str)
            times[key] = max(finish)
            stats = getattr(fresh.network, "link_stats", None)
            if stats is not None:  # where every replica's bytes went, for the link figures
                job.dp_links[key] = {s.name: (s.nbytes, s.busy_time) for s in stats().values() if s.nbytes > 0}
    return times


def credit_folded_dp(job: Job, world: World, calls_by_rank: dict[int, Counter]) -> None:
    """Credit the folded data-parallel collectives' bytes to the links that carry them.

    Replica 0 waits each collective's measured time instead of running it, so the world's links
    never see the sync's bytes. Each measurement ran a stage's collective for *every* replica's
    group at once, so one simulated rank per stage stands for the stage: its calls, times the
    measurement's bytes and busy time per link, are the whole job's data-parallel traffic.
    *calls_by_rank* maps each simulated rank to its tally of ``dp_times`` keys -> calls.
    """
    if not job.dp_links:
        return
    stood_for: set[int] = set()
    for rank, calls in sorted(calls_by_rank.items()):
        stage = job.layout.coords(rank).pp
        if stage in stood_for or not calls:
            continue
        stood_for.add(stage)
        for key, n in sorted(calls.items()):
            for link, (nbytes, busy) in job.dp_links.get(key, {}).items():
                credit(world.memo, link, n * nbytes, n * busy)


def _dp_calls(job: Job, stage: int) -> set[tuple[str, str, int, np.dtype]]:
    """The data-parallel collectives pipeline *stage* makes, as (group name, collective, elements, dtype)."""
    calls: set[tuple[str, str, int, np.dtype]] = set()
    zero = job.params.zero
    stages = job.layout.pp
    for vs, buckets in enumerate(job.buckets):
        if vs % stages != stage:
            continue
        for bucket in buckets:
            # Without expert parallelism the experts' group ("edp") is the data-parallel group.
            name = bucket.group
            if zero == 0:
                calls.add((name, "allreduce", bucket.count, job.reduce_dtype))
            else:
                calls.add((name, "reduce_scatter", bucket.count, job.reduce_dtype))
            if zero in (1, 2):
                calls.add((name, "allgather", bucket.count, job.dtype))
    if zero == 3:
        for count in (job.fsdp_rest, job.fsdp_layer):
            calls.add(("dp-params", "allgather", count, job.dtype))
    return calls
