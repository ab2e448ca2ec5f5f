"""The training workload: DDP buckets, overlap of allreduce with backward, compression, parsing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mpisim.collectives import memory
from mpisim.engine.units import parse_flops, si_numbers
from mpisim.errors import ConfigError, UnitError
from mpisim.workloads.base import RunContext
from mpisim.workloads.training import ddp, plan, play
from mpisim.workloads.training import workload as training
from mpisim.workloads.training.buckets import Bucket, ddp_buckets
from mpisim.workloads.training.ddp import parse
from tests.conftest import make_world
from tests.workloads import REPO, context

ALPHA, BW = 1e-6, 1e9
BETA = 1 / BW
MiB = 2**20


# ------------------------------------------------------------------------------ buckets


def test_ddp_buckets_for_a_known_layer_list():
    """Reverse order; a bucket closes once it reaches its cap (1 MiB first, then 25 MiB)."""
    layers = (100_000, 300_000, 5_000_000, 2_000_000, 7_000_000, 1_000_000)  # forward order
    total = sum(layers)
    buckets = ddp_buckets(layers, total, 4, MiB, 25 * MiB)
    assert buckets == [
        Bucket(1_000_000, 1_000_000 / total),             # 4 MB >= 1 MiB closes the first bucket
        Bucket(7_000_000, 8_000_000 / total),             # 28 MB >= 25 MiB: one tensor alone
        Bucket(7_000_000, 15_000_000 / total),            # 2M + 5M = 28 MB
        Bucket(400_000, 1.0),                             # the rest, below the cap
    ]


def test_a_bucket_below_its_cap_keeps_collecting_tensors():
    buckets = ddp_buckets((10, 10, 10, 10), 40, 4, 80, 80)  # 40 B per layer, caps of 80 B
    assert [b.count for b in buckets] == [20, 20]
    assert [b.ready for b in buckets] == [0.5, 1.0]


def test_params_only_model_gets_buckets_of_exactly_the_caps():
    buckets = ddp_buckets((), 300_000_000, 4, MiB, 25 * MiB)
    assert buckets[0].count == MiB // 4
    assert all(b.count == 25 * MiB // 4 for b in buckets[1:-1])
    assert sum(b.count for b in buckets) == 300_000_000
    assert len(buckets) == 1 + math.ceil((300_000_000 - MiB // 4) / (25 * MiB // 4))
    assert buckets[-1].ready == 1.0


# ------------------------------------------------------------------------------ parse and dump


def test_compute_from_flops():
    params = parse({"params": "300M", "compute": {"flops": "1.8 PFLOP", "device_flops": "312 TFLOPS",
                                                  "utilization": 0.4}})
    assert params.compute_s == pytest.approx(1.8e15 / (312e12 * 0.4))
    assert parse_flops("312e12") == parse_flops("312 T") == parse_flops("312 TFLOP/s") == 312e12


@pytest.mark.parametrize(("raw", "path", "text"), [
    ({"compute": "1 s"}, "params", "either params"),
    ({"params": "1M", "layers": [1], "compute": "1 s"}, "params", "either params"),
    ({"params": "1M"}, "compute", "required"),
    ({"params": "1M", "compute": "1 sec"}, "compute", "not a time"),
    ({"params": "1M", "compute": {"flops": 1e12}}, "compute.device_flops", "required"),
    ({"params": "1M", "compute": {"flops": "1 PFLOPZ", "device_flops": 1}}, "compute.flops", "not a FLOP count"),
    ({"params": "1M", "compute": "1 s", "backward_share": 1.5}, "backward_share", "(0, 1]"),
    ({"params": "1M", "compute": "1 s", "sync": "rign"}, "sync", "no algorithm 'rign'"),
    ({"params": "1M", "compute": "1 s", "compression": {"zip": 1}}, "compression.zip", "allowed keys: cast, topk"),
    ({"params": "1M", "compute": "1 s", "compression": {"cast": "fp8"}}, "compression.cast", "fp16 or bf16"),
    ({"layers": [10, "2 MiB"], "compute": "1 s"}, "layers[1]", "not a count"),
    ({"params": "1M", "compute": "1 s", "dtype": "int8"}, "dtype", "floating point"),
    ({"params": "1M", "compute": "1 s", "bucket_cap": "1 MiBB"}, "bucket_cap", "not a size"),
])
def test_parse_errors_name_the_field(raw, path, text):
    with pytest.raises(ConfigError) as info:
        parse(raw)
    assert info.value.path == path
    assert text in info.value.message


def test_flops_errors_are_unit_errors():
    with pytest.raises(UnitError):
        parse_flops("fast")


@pytest.mark.parametrize("raw", [
    {"params": "300M", "compute": "300 ms"},
    {"params": "300M", "compute": "300 ms", "sync": "parameter_server"},
    {"layers": [1000, "2M"], "dtype": "fp16", "compute": {"flops": "1e15", "device_flops": "312 TFLOPS"},
     "backward_share": "2/3", "bucket_cap": "4 MiB", "first_bucket": "256 KiB", "sync": "auto",
     "compression": {"cast": "bf16", "topk": 0.01}, "iterations": 2},
])
def test_dump_round_trips(raw):
    params = parse(raw)
    with si_numbers():  # dump writes SI numbers
        assert parse(training.dump(params)) == params


# ------------------------------------------------------------------------------ timing


def test_one_rank_is_compute_only():
    out = training.run(parse({"params": "10M", "compute": "300 ms"}), context(1))
    (row,) = out.rows
    assert row["iteration_time_s"] == pytest.approx(0.3, rel=1e-12)
    assert row["comm_time_s"] == 0.0 and row["wire_bytes"] == 0
    assert row["scaling_efficiency"] == pytest.approx(1.0, rel=1e-12)
    assert row["exposed_comm_s"] == 0.0


def test_infinitely_fast_network_costs_nothing():
    out = training.run(parse({"params": "10M", "compute": "300 ms", "sync": "ring"}),
                       context(4, alpha=0.0, bandwidth=1e30, payload="size"))
    (row,) = out.rows
    assert row["iteration_time_s"] == pytest.approx(0.3, rel=1e-12)
    assert row["exposed_comm_s"] == 0.0
    assert row["scaling_efficiency"] == pytest.approx(1.0, rel=1e-12)
    assert row["buckets"] == len(ddp_buckets((), 10_000_000, 4, MiB, 25 * MiB))


def test_overlapped_buckets_leave_only_the_last_allreduce_exposed():
    """Three 4 MB buckets finish during backward; only the last (first layer's) bucket is exposed."""
    p, big, small = 2, 1_000_000, 100_000
    raw = {"layers": [small, big, big, big], "compute": "3 s", "bucket_cap": "4 MB", "first_bucket": "4 MB",
           "sync": "ring"}
    world = {"alpha": ALPHA, "bandwidth": BW, "payload": "size", "eager_limit_inter": 2**30}  # eager: closed form
    out = training.run(parse(raw), context(p, **world))
    (row,) = out.rows

    def ring(n_bytes):
        return 2 * (p - 1) * ALPHA + 2 * (p - 1) / p * n_bytes * BETA

    # The first layer's backward (2 s x 0.1 / 3.1) outlasts the previous bucket's allreduce.
    assert 2 * small / (3 * big + small) > ring(4 * big)
    assert row["buckets"] == 4
    assert row["exposed_comm_s"] == pytest.approx(ring(4 * small), rel=1e-9)
    assert row["iteration_time_s"] == pytest.approx(3 + ring(4 * small), rel=1e-12)
    assert row["comm_time_s"] == pytest.approx(3 * ring(4 * big) + ring(4 * small), rel=1e-9)
    assert row["algorithm"] == "ring"


def test_communication_bound_iteration_is_forward_plus_serial_allreduces():
    """When the network is slow, the allreduces run back to back from the first bucket on."""
    p = 2
    raw = {"params": "1M", "compute": "30 ms", "bucket_cap": "1 MB", "first_bucket": "1 MB", "sync": "ring"}
    out = training.run(parse(raw), context(p, alpha=ALPHA, bandwidth=5e7, payload="size"))
    (row,) = out.rows
    forward = 0.03 / 3
    first_ready = 0.02 * 250_000 / 1_000_000  # the first bucket's share of backward
    assert row["iteration_time_s"] == pytest.approx(forward + first_ready + row["comm_time_s"], rel=1e-9)
    assert row["exposed_comm_s"] > 0.5 * row["comm_time_s"]
    assert 0 < row["scaling_efficiency"] < 0.5


def test_iterations_average_identical_steps():
    raw = {"params": "2M", "compute": "10 ms", "sync": "ring"}
    one = training.run(parse(raw), context(3, payload="size")).rows[0]
    three = training.run(parse({**raw, "iterations": 3}), context(3, payload="size")).rows[0]
    assert three["iteration_time_s"] == pytest.approx(one["iteration_time_s"], rel=1e-9)
    # Later iterations start with the skew the previous step's last allreduce left between ranks.
    assert three["comm_time_s"] == pytest.approx(one["comm_time_s"], rel=1e-5)


def _run_keeping_the_world(raw: dict, p: int) -> tuple:
    """One run with spans recorded: its row, spans, collective records and events processed."""
    worlds = []

    def new_world():
        world = make_world(p, alpha=ALPHA, bandwidth=BW)
        world.tracer.record_spans = True
        worlds.append(world)
        return world

    rows = training.run(parse(raw), RunContext(new_world=new_world, payload="size", seed=0, base_dir=REPO)).rows
    (world,) = worlds
    return rows, world.tracer.spans, world.tracer.collectives, world.env.events_done


def test_ranks_share_one_backward_timeline_and_see_what_their_own_would_give(monkeypatch):
    """One backward process for all ranks (play._start_backward) gives each rank the spans,
    bucket events and collective records, in the same order, that a process per rank gives,
    with fewer events."""
    raw = {"layers": [30_000, 1, 200_000, 50_000, 120_000], "compute": "3 ms", "bucket_cap": "400 KB",
           "first_bucket": "100 KB", "sync": "ring", "iterations": 2}
    shared = _run_keeping_the_world(raw, 4)
    monkeypatch.setattr(play, "_start_backward", lambda comm, job, ready, label:
                        comm.env.process(play._backward(comm, job, comm.now, ready, label)))
    own = _run_keeping_the_world(raw, 4)
    assert shared[:3] == own[:3]
    assert sum(1 for span in shared[1] if span.label == "backward") == 2 * 4 * 5  # iterations x ranks x layers
    assert shared[3] < own[3]


class _EventPerBucket:
    """The reference for play._BucketsReady: an event per bucket, kept for the whole step, as
    before -- the stream yields each bucket's event, processed or not."""

    peak = 0

    def __init__(self, env) -> None:
        self.env, self.fired, self.events = env, 0, {}

    def _event(self, n):
        return self.events.setdefault(n, self.env.event())

    def fire(self) -> None:
        self._event(self.fired).succeed()
        self.fired += 1

    def wait(self, n):
        return self._event(n)


def test_bucket_events_exist_only_while_they_matter_and_change_nothing(monkeypatch):
    """play._BucketsReady makes an event only from a bucket's firing to its processing (or while
    the stream waits for it): the same spans, collective records and event count as an event per
    bucket made up front, with at most a handful alive at once where the step has 200 buckets."""
    raw = {"layers": [3_000] * 200, "compute": "3 ms", "bucket_cap": "12 KB", "first_bucket": "4 KB",
           "sync": "ring", "iterations": 2}
    peak = [0]
    fire = play._BucketsReady.fire

    def counting_fire(self):
        fire(self)
        peak[0] = max(peak[0], len(self.pending))

    monkeypatch.setattr(play._BucketsReady, "fire", counting_fire)
    lazy = _run_keeping_the_world(raw, 4)
    monkeypatch.setattr(play, "_BucketsReady", _EventPerBucket)
    eager = _run_keeping_the_world(raw, 4)
    assert lazy[0][0]["buckets"] == 200
    assert lazy == eager
    assert 1 <= peak[0] <= 4, peak


# ------------------------------------------------------------------------------ data and compression


SMALL = {"layers": [10, 300, 50, 7], "compute": "1 ms", "bucket_cap": "512 B", "first_bucket": "64 B",
         "sync": "ring"}


def test_real_gradients_are_averaged_exactly():
    out = training.run(parse(SMALL), context(3))
    (row,) = out.rows
    assert row["verified"] is True
    assert row["wire_bytes"] == row["bytes"] == 367 * 4


def test_cast_halves_the_bytes_on_the_wire():
    out = training.run(parse({**SMALL, "compression": {"cast": "fp16"}}), context(3))
    (row,) = out.rows
    assert row["verified"] is True
    assert row["wire_bytes"] == 367 * 2 and row["bytes"] == 367 * 4


def test_topk_sends_k_values_and_int32_indices_by_allgather():
    params = parse({**SMALL, "compression": {"topk": 0.1}})
    out = training.run(params, context(3))
    (row,) = out.rows
    assert row["verified"] is True
    buckets = ddp.make_plan(params).buckets
    assert row["wire_bytes"] == sum(math.ceil(0.1 * b.count) for b in buckets) * (4 + 4)
    assert row["algorithm"].endswith("allgather")


def test_topk_keeps_the_largest_magnitudes():
    values, index = ddp.topk_select(np.array([1.0, -5.0, 3.0, 5.0]), 2)
    assert index.dtype == np.int32
    assert list(index) == [1, 3] and list(values) == [-5.0, 5.0]


def test_without_sync_the_worlds_default_allreduce_runs():
    def new_world():
        world = make_world(4)
        world.algorithms = {"allreduce": "ring"}
        return world

    ctx = context(4, payload="size")
    ctx.new_world = new_world
    (row,) = training.run(parse({"params": "1M", "compute": "10 ms"}), ctx).rows
    assert row["algorithm"] == "ring"
    (row,) = training.run(parse({"params": "1M", "compute": "10 ms", "sync": "parameter_server"}), ctx).rows
    assert row["algorithm"] == "parameter_server"


def test_models_too_large_for_real_memory_are_refused_with_the_estimate(monkeypatch):
    plan = ddp.make_plan(parse(SMALL), data=True)
    need = ddp.memory_estimate(plan, 3)
    grads = sum(SMALL["layers"]) * 4
    assert need.inputs == 3 * grads and need.total > need.inputs
    ring = memory.estimate_collective("allreduce", "ring", 3, max(b.count for b in plan.buckets) * 4, verify=True)
    assert ddp.memory_estimate(plan, 3, "ring").total == 3 * grads + ring.total - ring.inputs
    monkeypatch.setattr(memory, "available_memory", lambda: need.total)  # fits, not with 10% headroom
    with pytest.raises(memory.MemoryLimitError) as info:
        training.run(parse(SMALL), context(3))
    assert info.value.path == "payload" and f"{need.total / 1e9:.3g} GB" in str(info.value)
    assert "payload: size" in str(info.value)
    (row,) = training.run(parse(SMALL), context(3, payload="size")).rows
    assert row["verified"] is None
    monkeypatch.setattr(memory, "available_memory", lambda: 2 * need.total)
    assert training.run(parse(SMALL), context(3)).rows[0]["verified"] is True


def test_data_parallel_training_is_the_tp_pp_1_job_of_the_hybrid_engine():
    """One path: the data-parallel form plans the hybrid engine's job at tp = pp = 1 with DDP's buckets."""
    params = parse({"layers": [30_000, 1, 200_000, 50_000, 120_000], "compute": "3 ms", "bucket_cap": "400 KB",
                    "first_bucket": "100 KB", "backward_share": 0.6})
    world = make_world(4, alpha=ALPHA, bandwidth=BW)
    job = plan.ddp_job(params, world, lambda: make_world(4, alpha=ALPHA, bandwidth=BW))
    assert (job.layout.tp, job.layout.pp, job.layout.dp) == (1, 1, 4) and job.micro_batches == 1
    expected = ddp_buckets(params.layers, params.params, 4, params.first_bucket, params.bucket_cap)
    assert [(b.count, b.ready) for b in job.buckets[0]] == [(b.count, b.ready) for b in expected]
    assert job.backward_layer_s == 0.6 * 3e-3 and job.forward_layer_s == 3e-3 - 0.6 * 3e-3
    assert job.ticks == tuple(n / params.params for n in (120_000, 170_000, 370_000, 370_001, 400_001))

