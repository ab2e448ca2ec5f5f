"""Hybrid-parallel training: schedules, layout, memory, and the iteration against the formulas it must obey."""

from __future__ import annotations

import math
import re
import sys
from typing import Any

import pytest

from mpisim.errors import ConfigError
from mpisim.scenario import load_dict
from mpisim.scenario.run import new_world_factory, run_point
from mpisim.workloads.training.layout import Coords, Layout
from mpisim.workloads.training.memory import model_state_bytes, peak_in_flight
from mpisim.workloads.training.model import PRESETS, TransformerModel
from mpisim.workloads.training.plan import make_job
from mpisim.workloads.training.play import play
from mpisim.workloads.training.schedule import SCHEDULES, schedule

SMALL = {"layers": 8, "hidden": 1024, "heads": 16, "seq": 1024, "vocab": 32000}
#: A cluster where communication costs (almost) nothing: what the pipeline formulas assume.
IDEAL = {"nodes": 8, "inter": {"kind": "full", "bandwidth": "1000000 TB/s", "latency": "1 ps"},
         "device_flops": {"bf16": "100 TFLOPS"}}


def scenario(topology: Any, **workload: Any) -> dict[str, Any]:
    return {"topology": topology, "payload": "size", "network": {"model": "analytic"},
            "workload": {"kind": "training", "model": SMALL, "compute": {"efficiency": 0.5}, **workload}}


def row(raw: dict[str, Any]) -> dict[str, Any]:
    return run_point(load_dict(raw)).rows[0]


def tallies(raw: dict[str, Any]):
    """The per-rank accounting of one run (engine level)."""
    loaded = load_dict(raw)
    new_world, _ = new_world_factory(loaded)
    world = new_world()
    job = make_job(loaded.workload.params, world, new_world)
    return job, play(job, world).tallies


# --------------------------------------------------------------------------- schedules


@pytest.mark.parametrize("name", SCHEDULES)
@pytest.mark.parametrize(("stages", "micro"), [(1, 1), (2, 4), (4, 4), (4, 8)])
def test_every_schedule_runs_each_pass_once_forward_before_backward(name, stages, micro):
    chunks = 2 if name == "interleaved" else 1
    for stage in range(stages):
        ops = schedule(name, stage, stages, micro, chunks)
        assert sorted(ops) == sorted({(k, i, c) for k in "FB" for i in range(micro) for c in range(chunks)})
        for op in ops:
            if op.kind == "B":
                assert ops.index(("F", op.micro, op.chunk)) < ops.index(op)


def test_1f1b_holds_at_most_stages_minus_stage_micro_batches():
    for stage in range(4):
        assert peak_in_flight(schedule("1f1b", stage, 4, 16)) == 4 - stage
    assert peak_in_flight(schedule("gpipe", 0, 4, 16)) == 16


def test_interleaved_order_is_megatrons():
    # Megatron-LM's get_model_chunk_id: micro-batches go through the chunks in groups of P.
    ops = schedule("interleaved", 0, 2, 4, 2)
    assert [f"{o.kind}{o.micro}.{o.chunk}" for o in ops[:4]] == ["F0.0", "F1.0", "F0.1", "F1.1"]
    with pytest.raises(ValueError, match="multiple of stages"):
        schedule("interleaved", 0, 4, 6, 2)


# --------------------------------------------------------------------------- layout and model


def test_layout_puts_tp_innermost_and_groups_differ_along_one_dimension():
    layout = Layout(tp=4, pp=2, dp=2)
    assert layout.coords(13) == Coords(tp=1, pp=1, dp=1) and layout.rank(Coords(1, 1, 1)) == 13
    assert layout.group(13, "tp") == (12, 13, 14, 15)
    assert layout.group(13, "pp") == (9, 13) and layout.group(13, "dp") == (5, 13)
    megatron = Layout(tp=4, pp=2, dp=2, order=("tp", "dp", "pp"))
    assert megatron.group(13, "pp") == (5, 13) and megatron.group(13, "dp") == (9, 13)
    assert megatron.coords(13) == Coords(tp=1, pp=1, dp=1) and megatron.coords(5) == Coords(tp=1, pp=0, dp=1)


@pytest.mark.parametrize("order", [("tp", "pp", "dp"), ("tp", "dp", "pp"), ("dp", "pp", "tp")])
def test_groups_are_the_ranks_that_differ_along_one_coordinate(order):
    # Layout.group and the expert groups are computed arithmetically (they are built for every
    # rank of a 100 000-GPU layout); here against their definitions, over every rank.
    layout = Layout(tp=2, pp=3, dp=8, ep=4, order=order)
    for rank in range(layout.size):
        here = layout.coords(rank)
        for dim in ("tp", "pp", "dp"):
            expected = tuple(sorted((r for r in range(layout.size)
                                     if all(getattr(layout.coords(r), d) == getattr(here, d) for d in ("tp", "pp", "dp")
                                            if d != dim)), key=lambda r: getattr(layout.coords(r), dim)))
            assert layout.group(rank, dim) == expected
        same_experts = tuple(r for r in layout.group(rank, "dp") if layout.coords(r).dp % 4 == here.dp % 4)
        assert layout.edp_group(rank) == same_experts


@pytest.mark.parametrize(("name", "billions"), [("megatron-1.7b", 1.7), ("megatron-18.4b", 18.4),
                                                ("megatron-145.6b", 145.6), ("llama3-8b", 8.0),
                                                ("llama3-70b", 70.6), ("mixtral-8x7b", 46.7)])
def test_preset_parameter_counts_match_their_names(name, billions):
    assert PRESETS[name].params / 1e9 == pytest.approx(billions, rel=0.03)


def test_megatron_flops_formula():
    # Narayanan et al. 2021: F = 96 B s l h^2 (1 + s / 6h + V / 16lh) with full recomputation.
    m = PRESETS["megatron-145.6b"]
    batch, s, layers, h, v = 2304, m.seq, m.layers, m.hidden, m.vocab
    paper = 96 * batch * s * layers * h**2 * (1 + s / (6 * h) + v / (16 * layers * h))
    executed = m.model_flops(batch) + batch * layers * m.layer_forward_flops(1)  # + one recomputed forward
    assert executed == pytest.approx(paper, rel=1e-12)
    assert TransformerModel(**SMALL).mlp_width == 4 * SMALL["hidden"]


def test_zero_memory_matches_the_zero_paper():
    # ZeRO (Rajbhandari et al. 2020), Figure 1: 7.5B parameters on 64 GPUs.
    gb = [sum(model_state_bytes(7.5e9, stage, 64)) / 1e9 for stage in range(4)]
    assert gb == pytest.approx([120, 31.4, 16.6, 1.875], abs=0.05)


# --------------------------------------------------------------------------- the iteration


def test_at_tp_pp_1_the_iteration_is_the_data_parallel_workload():
    topology = {"preset": "ib-hdr", "nodes": 8}
    old = {"kind": "training", "params": "300M", "compute": "300 ms"}
    # fold: tp -- the same program, replicas all simulated (folded replicas: tests/workloads/test_replicas.py)
    new = {"kind": "training", "model": {"params": "300M"}, "compute": "300 ms", "dtype": "float32", "fold": "tp"}
    base = {"topology": topology, "payload": "size"}
    a, b = row({**base, "workload": old}), row({**base, "workload": new})
    assert b["iteration_time_s"] == a["iteration_time_s"]
    assert b["compute_s"] == a["compute_s"] and b["exposed_comm_s"] == pytest.approx(a["exposed_comm_s"], abs=1e-12)


@pytest.mark.parametrize(("stages", "micro"), [(2, 4), (4, 4), (4, 12)])
def test_1f1b_bubble_on_an_ideal_network(stages, micro):
    raw = scenario(IDEAL, parallel={"pp": stages, "dp": 8 // stages}, batch={"global": micro * 8 // stages},
                   model={**SMALL, "vocab": 1})
    r = row(raw)
    expected = (stages - 1) / (micro + stages - 1)
    assert r["bubble_s"] / r["iteration_time_s"] == pytest.approx(expected, rel=2e-3)


def test_interleaving_cuts_the_bubble_by_the_chunks():
    plain = row(scenario(IDEAL, parallel={"pp": 4, "dp": 2}, batch={"global": 16}, model={**SMALL, "vocab": 1}))
    inter = row(scenario(IDEAL, parallel={"pp": 4, "dp": 2}, batch={"global": 16}, model={**SMALL, "vocab": 1},
                         schedule="interleaved", chunks=2))
    assert inter["bubble_s"] == pytest.approx(plain["bubble_s"] / 2, rel=2e-3)
    assert inter["compute_s"] == pytest.approx(plain["compute_s"], rel=1e-12)


@pytest.mark.parametrize(("recompute", "per_layer"), [("none", 4), ("full", 6)])
def test_tensor_parallel_allreduces_are_megatrons(recompute, per_layer):
    # Two allreduces of b s h elements per layer forward, two backward, two more with full recomputation.
    raw = scenario({"preset": "dgx-h100", "nodes": 1}, parallel={"tp": 4, "pp": 2},
                   batch={"global": 3, "micro": 1}, recompute=recompute, fold="none")
    job, by_rank = tallies(raw)
    b_s_h = SMALL["seq"] * SMALL["hidden"]
    layers_per_stage, micro_batches = SMALL["layers"] // 2, 3
    for rank, tally in by_rank.items():
        stage = job.layout.coords(rank).pp
        received = micro_batches  # the pipeline's scatter-gather: one allgather per message received
        assert tally.tp_calls[("allreduce", b_s_h)] == per_layer * layers_per_stage * micro_batches
        assert tally.tp_calls[("allgather", b_s_h)] == received, stage


def test_zero3_moves_one_and_a_half_times_the_data_parallel_volume():
    base = scenario({"preset": "dgx-h100", "nodes": 1}, parallel={"dp": 8}, batch={"global": 8})
    _, plain = tallies(base)
    _, zero3 = tallies({**base, "workload": {**base["workload"], "zero": 3}})
    assert sum(t.dp_volume for t in zero3.values()) / sum(t.dp_volume for t in plain.values()) == pytest.approx(1.5)


@pytest.mark.parametrize("micro_batches", [2, 3])
def test_zero3_gathers_and_reduce_scatters_every_micro_batch(micro_batches):
    """FSDP keeps only gradient shards: each micro-batch's backward reduce-scatters (ZeRO paper: 3 x params per pass)."""
    base = scenario({"preset": "dgx-h100", "nodes": 1}, parallel={"dp": 8}, batch={"global": 8})
    _, one = tallies({**base, "workload": {**base["workload"], "zero": 3}})
    _, many = tallies({**base, "workload": {**base["workload"], "zero": 3, "batch": {"global": 8 * micro_batches}}})
    assert sum(t.dp_volume for t in many.values()) == pytest.approx(micro_batches * sum(t.dp_volume for t in one.values()))


@pytest.mark.parametrize("parallel", [{"tp": 8, "pp": 2}, {"tp": 8, "pp": 2, "dp": 2}, {"tp": 8, "dp": 4}])
def test_folding_tensor_parallel_groups_gives_the_same_iteration(parallel):
    nodes = math.prod(parallel.values()) // 8
    raw = scenario({"preset": "dgx-h100", "nodes": nodes}, parallel=parallel, batch={"global": 4 * nodes})
    raw["network"] = {"model": "fairshare"}
    raw["workload"]["fold"] = "tp"  # replicas all simulated: this compares tp folding alone
    folded, full = row(raw), row({**raw, "workload": {**raw["workload"], "fold": "none"}})
    assert folded["simulated_ranks"] == full["simulated_ranks"] // 8
    assert folded["iteration_time_s"] == pytest.approx(full["iteration_time_s"], rel=0.01)


@pytest.mark.parametrize(("recompute", "zero", "pp"), [("none", 1, 2), ("full", 1, 2), ("full", 3, 1)])
def test_folded_layers_as_one_delay_give_the_same_iteration(recompute, zero, pp):
    # Without a timeline, folded layers' compute and tensor-parallel delays are one event up to
    # the next layer that readies a gradient bucket (ZeRO 3: that gathers parameters), see
    # _Rank.layers; with spans kept they are one event each. Same times, same tallies.
    raw = scenario({"preset": "dgx-h100", "nodes": 4}, parallel={"tp": 8, "pp": pp}, batch={"global": 8},
                   recompute=recompute, zero=zero)
    raw["network"] = {"model": "fairshare"}
    merged, stepped = row({**raw, "trace": {"spans": False}}), row({**raw, "trace": {"spans": True}})
    # Folded: one GPU per tensor-parallel group, of replica 0 (overlapped ZeRO 3: of every replica).
    assert merged["simulated_ranks"] == (4 if zero == 3 else 2)
    for key, value in stepped.items():
        if isinstance(value, float):
            assert merged[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key
        else:
            assert merged[key] == value, key
    delays = {}
    for spans in (False, True):
        loaded = load_dict({**raw, "trace": {"spans": spans}})
        new_world, _ = new_world_factory(loaded)
        world = new_world()
        job = make_job(loaded.workload.params, world, new_world)
        timeout, count = world.env.timeout, [0]

        def counted(delay, value=None, timeout=timeout, count=count):
            # The network model's own completion timers are as many either way (and move with
            # how flows are staggered, e.g. by the proxy threads): count the workload's delays.
            if not sys._getframe(1).f_globals["__name__"].startswith("mpisim.network"):
                count[0] += 1
            return timeout(delay, value)

        world.env.timeout = counted
        by_rank = play(job, world).tallies
        delays[spans] = (count[0], [t.tp_calls for t in by_rank.values()])
    assert delays[False][1] == delays[True][1] and delays[False][1][0]  # the same tensor-parallel calls
    assert delays[False][0] < 0.6 * delays[True][0]  # ... in at most 60 % of the delays


def test_slower_network_or_bigger_model_never_makes_the_iteration_faster():
    base = scenario({"preset": "dgx-a100", "nodes": 2}, parallel={"tp": 8, "pp": 2}, batch={"global": 8})
    fast = row(base)["iteration_time_s"]
    slow = row({**base, "topology": {**base["topology"], "inter": {"bandwidth": "50 Gbps"}}})["iteration_time_s"]
    bigger = row({**base, "workload": {**base["workload"], "model": {**SMALL, "hidden": 2048}}})["iteration_time_s"]
    assert slow > fast and bigger > fast


# --------------------------------------------------------------------------- memory and bad input


def test_a_layout_that_cannot_fit_is_refused_naming_what_to_change():
    raw = scenario({"preset": "dgx-h100", "nodes": 1}, model="llama3-70b", parallel={"dp": 8},
                   batch={"global": 8})
    with pytest.raises(ConfigError, match=r"needs .* per GPU .* but the device has 80 GiB; use zero: 1"):
        run_point(load_dict(raw))
    marked = row({**raw, "workload": {**raw["workload"], "memory_check": "mark", "model": "llama3-8b"}})
    assert marked["fits"] is False and marked["memory_per_gpu_bytes"] > 80 * 2**30


@pytest.mark.parametrize(("change", "message"), [
    ({"parallel": {"tp": 3}}, "tp (3) must divide the attention heads"),
    ({"parallel": {"pp": 2, "first_stage_layers": 3, "last_stage_layers": 3}}, "must split evenly"),
    ({"model": {"params": "300M"}, "compute": "300 ms", "parallel": {"tp": 2}}, "cannot be split"),
    ({"model": {"params": "300M"}}, "give the time of one micro-batch"),
    ({"zero": 3, "parallel": {"pp": 2}}, "not combined with pipeline"),
    ({"schedule": "zigzag"}, "expected one of gpipe, 1f1b, interleaved"),
    ({"overlap": {"tp": "yes"}}, "overlap.tp"),
    ({"model": "gpt5"}, "unknown model 'gpt5'"),
    ({"compute": {"efficiency": 1.5}}, "fraction of the peak"),
    ({"compute": {"efficiency": 50}}, "expected a fraction of the peak in (0, 1] such as 0.5 or 50%, got 50"),
    ({"compute": {"efficiency": "150%"}}, "expected a fraction of the peak in (0, 1] such as 0.5 or 50%, got '150%'"),
    ({"compute": {"efficiency": "half"}}, "expected a fraction of the peak in (0, 1] such as 0.5 or 50%, got 'half'"),
])
def test_bad_input_is_one_clear_error(change, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_dict(scenario({"preset": "dgx-h100", "nodes": 1}, **change))


@pytest.mark.parametrize("written", [0.5, "50%", "50 %"])
def test_compute_efficiency_is_a_fraction_or_a_percentage_as_a_links_is(written):
    """`inter.efficiency: 94%` was accepted and `compute.efficiency: 50%` refused: both take either form."""
    loaded = load_dict(scenario({"preset": "dgx-h100", "nodes": 1, "inter": {"efficiency": "94 %"}},
                                compute={"efficiency": written}))
    assert loaded.workload.params.efficiency == 0.5
    assert loaded.topology.inter.efficiency == 0.94


def test_ranks_that_do_not_match_the_layout_are_named():
    raw = scenario({"preset": "dgx-h100", "nodes": 1}, parallel={"tp": 4, "pp": 1, "dp": 4})
    with pytest.raises(ConfigError, match="the topology has 8 ranks but tp x pp x dp = 4 x 1 x 4 = 16"):
        run_point(load_dict(raw))


def test_measured_layer_times_replace_the_flops_model():
    raw = scenario({**IDEAL, "nodes": 1}, compute={"layer_forward": "2 ms"}, batch={"global": 3})
    r = row(raw)
    assert r["iteration_time_s"] == pytest.approx(3 * SMALL["layers"] * (2e-3 + 4e-3), rel=1e-9)
    full = row({**raw, "workload": {**raw["workload"], "recompute": "full",
                                    "compute": {"layer_forward": "2 ms", "layer_backward": "5 ms"}}})
    assert full["iteration_time_s"] == pytest.approx(3 * SMALL["layers"] * (2e-3 + 5e-3 + 2e-3), rel=1e-9)


def test_groups_whose_gpus_share_nics_are_not_folded():
    shared = {"preset": "dgx-h100", "nodes": 2, "inter": {"kind": "star", "nics": 4}}  # two GPUs per NIC
    r = row(scenario(shared, parallel={"tp": 8, "pp": 2}, batch={"global": 4}))
    assert r["simulated_ranks"] == r["ranks"] == 16


def test_a_moe_capacity_factor_pads_experts_and_all_to_alls():
    moe = {**SMALL, "experts": 8, "top_k": 2}
    base = scenario({"preset": "dgx-h100", "nodes": 1}, model=moe, parallel={"ep": 8}, batch={"global": 8})
    balanced = row(base)
    padded = row({**base, "workload": {**base["workload"], "model": {**moe, "capacity_factor": 1.5}}})
    assert padded["ep_comm_s"] > balanced["ep_comm_s"]  # 1.5x the bytes (small: latency-bound here)
    assert padded["compute_s"] > balanced["compute_s"] and padded["iteration_time_s"] > balanced["iteration_time_s"]


def test_flash_attention_drops_the_stored_scores_and_their_traffic():
    long_seq = {**SMALL, "seq": 8192}
    base = scenario({"preset": "dgx-h100", "nodes": 1}, model=long_seq, parallel={"dp": 8}, batch={"global": 8})
    flash, standard = row(base), row({**base, "workload": {**base["workload"], "attention": "standard"}})
    assert flash["memory_per_gpu_bytes"] < standard["memory_per_gpu_bytes"]
    assert flash["compute_s"] < standard["compute_s"]
    m = TransformerModel(**long_seq)
    from mpisim.workloads.training.memory import activation_bytes_per_layer

    sbh = m.seq * m.hidden
    assert activation_bytes_per_layer(m, 1, 1, "none", False, flash=True) == 34 * sbh
    assert activation_bytes_per_layer(m, 1, 1, "none", False) == sbh * (34 + 5 * m.heads * m.seq / m.hidden)


def test_zero3_gathers_every_parameter_of_a_moe_model_once_per_pass():
    moe = {**SMALL, "experts": 4, "top_k": 2}
    raw = scenario({"preset": "dgx-h100", "nodes": 1}, model=moe, parallel={"dp": 8, "ep": 4}, batch={"global": 8},
                   zero=3)
    job, by_rank = tallies(raw)
    per_gpu = sum(job.chunk_params[0])
    gathered = 2 * (job.fsdp_rest + job.layers_per_chunk * job.fsdp_layer)  # forward and backward
    assert job.fsdp_rest + job.layers_per_chunk * job.fsdp_layer == per_gpu
    # gathered twice (forward and backward), reduce-scattered once
    assert by_rank[0].dp_volume == (gathered + per_gpu) * job.itemsize


@pytest.mark.parametrize(("parallel", "spans"), [({"tp": 8, "pp": 2}, True), ({"tp": 8, "dp": 2}, True),
                                               ({"tp": 1, "pp": 2, "dp": 8}, True), ({"tp": 2, "pp": 2, "dp": 4}, True),
                                               ({"tp": 8, "pp": 2}, False),
                                               # Folded replicas run each bucket size once per stage: the
                                               # ring-step count that made this 4.2x high no longer dominates.
                                               ({"tp": 8, "pp": 2, "dp": 4}, False)])
def test_the_estimate_before_a_run_is_within_a_factor_of_four(parallel, spans):
    # Without spans, folded layers in a row are one delay: the estimate must know (it was 84x
    # too high for GPT-3 175B on 8192 GPUs when it did not).
    from mpisim.scenario.estimate import estimate

    nodes = max(2, math.prod(parallel.values()) // 8)
    raw = scenario({"preset": "dgx-h100", "nodes": nodes}, parallel=parallel, batch={"global": 8})
    raw["trace"] = {"spans": spans}
    loaded = load_dict(raw)
    worlds = []
    run_point(loaded, worlds=worlds)
    events = sum(world.events_processed for world in worlds)
    assert events / 4 <= estimate(loaded).events <= 4 * events, (estimate(loaded).events, events)


def test_a_layout_the_ranks_cannot_hold_is_refused_when_the_scenario_loads():
    raw = scenario({"preset": "dgx-h100", "nodes": 1}, parallel={"tp": 4}, batch={"global": 3})
    with pytest.raises(ConfigError, match="global batch 3 must be a multiple of dp x micro = 2 x 1") as info:
        load_dict(raw)
    assert info.value.path == "workload.batch.global"


def test_whole_experts_fold_tp_and_dp_into_one_expert_group_per_node():
    """etp: 1 (Megatron-Core's parallel folding): ep groups of consecutive GPUs, tp pairs included."""
    layout = Layout(tp=2, pp=2, dp=8, ep=8, order=("tp", "dp", "pp"), etp=1)
    for rank in range(layout.size):
        group, edp = layout.ep_group(rank), layout.edp_group(rank)
        assert rank in group and rank in edp and len(group) == 8 and len(edp) == 2
        assert group == tuple(range(rank // 8 * 8, rank // 8 * 8 + 8))  # one node of 8
        assert {layout.coords(r).pp for r in group + edp} == {layout.coords(rank).pp}
    # split experts (the default): ep members of the data-parallel group, one tp rank
    split = Layout(tp=2, pp=2, dp=8, ep=8, order=("tp", "dp", "pp"))
    assert split.ep_group(0) == split.group(0, "dp") and split.edp_group(0) == (0,)


def test_whole_experts_drop_the_moe_blocks_tensor_parallel_collectives():
    moe = {**SMALL, "experts": 8, "top_k": 2}
    base = scenario({"preset": "dgx-h100", "nodes": 2}, model=moe, parallel={"tp": 2, "ep": 8, "order": ["tp", "dp", "pp"]},
                    batch={"global": 8}, sequence_parallel=True)
    folded = {**base, "workload": {**base["workload"], "parallel": {**base["workload"]["parallel"], "etp": 1}}}
    (split_job, split), (whole_job, whole) = tallies(base), tallies(folded)
    # per layer and pass: an allgather and a reduce-scatter for attention, and for the MLP only when split
    assert sum(split[0].tp_calls.values()) == 2 * sum(whole[0].tp_calls.values())
    assert whole_job.a2a_count == split_job.a2a_count  # each rank sends its sequence-parallel share either way
    # a whole expert per GPU (8 experts over ep 8), twice the split one's half
    assert whole_job.chunk_params[0][-1] == 2 * split_job.chunk_params[0][-1] == TransformerModel(**moe).expert_params()
    # the expert group is one node (NVLink) instead of ranks strided over both nodes: cheaper all-to-alls
    assert row(folded)["ep_comm_s"] < row(base)["ep_comm_s"]


@pytest.mark.parametrize(("parallel", "extra", "message"), [
    ({"tp": 2, "ep": 8, "etp": 2}, {"sequence_parallel": True}, "expected 1"),
    ({"tp": 2, "ep": 8, "etp": 1}, {}, "needs ep > 1 and sequence_parallel: true"),
])
def test_whole_experts_need_what_megatron_needs(parallel, extra, message):
    moe = {**SMALL, "experts": 8, "top_k": 2}
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_dict(scenario({"preset": "dgx-h100", "nodes": 2}, model=moe, parallel=parallel, batch={"global": 8},
                           **extra))


@pytest.mark.parametrize("parallel", [{"ep": 4}, {"tp": 2, "ep": 8, "etp": 1, "order": ["tp", "dp", "pp"]}])
def test_zero1_shards_expert_states_over_the_gpus_holding_the_same_experts(parallel):
    moe = {**SMALL, "experts": 8, "top_k": 2}
    job, _ = tallies(scenario({"preset": "dgx-h100", "nodes": 2}, model=moe, parallel=parallel, batch={"global": 16},
                              zero=1, sequence_parallel=parallel.get("tp", 1) > 1))
    layout, use = job.layout, job.memory[0]
    edp = len(layout.edp_group(0))
    assert edp == layout.tp * layout.dp // (layout.ep * layout.expert_tp) > 1
    experts, dense = job.chunk_expert_params, sum(job.chunk_params[0]) - job.chunk_expert_params
    assert experts > 0
    assert use.optimizer == pytest.approx(12 * dense / layout.dp + 12 * experts / edp)
    assert use.weights == use.gradients == 2 * (dense + experts)
