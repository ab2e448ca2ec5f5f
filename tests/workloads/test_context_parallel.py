"""Context parallelism (``parallel: {cp: N}``): ring attention's bytes, its exposure, and what cp divides.

Closed forms: one ring step moves ``2 b (s / cp) (h_kv / tp)`` elements per GPU; a layer pass
exposes ``(cp - 1) max(0, t_step - t_attention / cp)``; on a full mesh of one-GPU nodes with the
analytic network and every message eager, a step takes ``alpha + bytes / bandwidth``, so the
row's ``cp_comm_s`` is known exactly. Tokens, FLOPs and activations per GPU divide by cp; the
gradients are reduced over dp x cp GPUs (Megatron's data-parallel group with context parallelism).
"""

from __future__ import annotations

import pytest

from mpisim.engine.units import si_numbers
from mpisim.errors import ConfigError
from mpisim.network.presets import resolve_topology
from mpisim.scenario import load_dict
from mpisim.scenario.run import run_point
from mpisim.workloads.training.config import HybridParams, dump, parse
from mpisim.workloads.training.context import exposed_ring_s, kv_step_bytes
from mpisim.workloads.training.layout import Layout
from mpisim.workloads.training.model import PRESETS, TransformerModel
from mpisim.workloads.training.plan import plan_job

SMALL = TransformerModel(layers=4, hidden=1024, heads=16, kv_heads=4, seq=8192, vocab=32000, gated_mlp=True,
                         learned_positions=False, tied_embeddings=False)
ALPHA, BANDWIDTH, PEAK, EFFICIENCY = 5e-6, 1e9, 100e12, 0.5


def test_one_ring_step_moves_k_and_v_of_the_local_tokens_for_the_tp_share_of_kv_heads():
    llama = PRESETS["llama3-405b"]  # 8 KV heads of 128: h_kv = 1024
    assert llama.kv_width == 1024
    # 131,072 tokens over cp 16, 1024 / 8 KV columns per tp rank, K and V, 2 bytes each
    assert kv_step_bytes(131072, llama.kv_width, 1, 8, 16, 2) == 2 * (131072 // 16) * (1024 // 8) * 2 == 4 * 2**20
    assert kv_step_bytes(8192, 4096, 2, 1, 2, 2) == 2 * 2 * 4096 * 4096 * 2


@pytest.mark.parametrize("cp", [2, 4, 16])
def test_the_exposed_ring_is_what_the_exchange_outlasts_the_attention_by(cp):
    attention = 8e-3
    assert exposed_ring_s(attention / cp, attention, cp) == 0.0  # exactly hidden
    assert exposed_ring_s(0.5 * attention / cp, attention, cp) == 0.0
    assert exposed_ring_s(3 * attention / cp, attention, cp) == pytest.approx((cp - 1) * 2 * attention / cp)
    steps = [exposed_ring_s(x * 1e-4, attention, cp) for x in range(200)]
    assert steps == sorted(steps)  # a slower exchange never exposes less
    assert exposed_ring_s(1.0, attention, 1) == 0.0


def test_cp_is_innermost_in_the_data_parallel_group_that_reduces_the_gradients():
    layout = Layout(tp=2, pp=2, dp=8, cp=4)
    assert layout.replicas == 2
    assert layout.cp_group(0) == (0, 4, 8, 12)
    assert layout.group(0, "dp") == (0, 4, 8, 12, 16, 20, 24, 28)  # dp x cp GPUs reduce together
    assert set(layout.cp_group(0)) <= set(layout.group(0, "dp"))


def _job(cp, **extra):
    spec, _ = resolve_topology({"preset": "dgx-h100", "nodes": 2})
    params = HybridParams(model=SMALL, tp=8, cp=cp, global_batch=2, micro=1, efficiency=EFFICIENCY, **extra)
    return plan_job(params, 8 * cp, spec)


def test_cp_divides_the_tokens_compute_and_activations_of_each_gpu():
    one, two = _job(1), _job(2)
    assert two.layout.replicas == 1 and two.layout.dp == 2
    assert two.micro_batches == one.micro_batches
    assert two.tp_count * 2 == one.tp_count and two.activation_count * 2 == one.activation_count
    assert two.forward_layer_s == pytest.approx(one.forward_layer_s / 2, rel=1e-12)
    assert two.backward_layer_s == pytest.approx(one.backward_layer_s / 2, rel=1e-12)
    assert two.timing.attention_forward_s == pytest.approx(one.timing.attention_forward_s / 2, rel=1e-12)
    assert max(m.activations for m in two.memory) == pytest.approx(max(m.activations for m in one.memory) / 2)
    # the model's FLOPs per iteration are the same sequences': cp changes who does them, not how many
    assert two.model_flops_per_iteration == one.model_flops_per_iteration


def _scenario(cp, bandwidth=BANDWIDTH, **workload):
    model = {"layers": SMALL.layers, "hidden": SMALL.hidden, "heads": SMALL.heads, "kv_heads": SMALL.kv_heads,
             "seq": SMALL.seq, "vocab": SMALL.vocab, "gated_mlp": True, "learned_positions": False}
    return {"units": "SI", "payload": "size", "network": {"model": "analytic"},
            "mpi": {"eager_limit": 10**18},
            "topology": {"nodes": cp, "ranks_per_node": 1, "device": "gpu", "device_flops": {"bf16": PEAK},
                         "inter": {"kind": "full", "bandwidth": bandwidth, "latency": ALPHA}},
            "workload": {"kind": "training", "model": model, "parallel": {"cp": cp}, "batch": {"global": 1},
                         "compute": {"efficiency": EFFICIENCY}, **workload}}


def _row(raw):
    return run_point(load_dict(raw)).rows[0]


@pytest.mark.parametrize("cp", [2, 4])
def test_the_rows_cp_comm_is_the_closed_form_on_a_full_mesh(cp):
    out = _row(_scenario(cp))
    nbytes = kv_step_bytes(SMALL.seq, SMALL.kv_width, 1, 1, cp, 2)
    core = SMALL.attention_core_flops(1) / cp / (EFFICIENCY * PEAK)  # the attention on one GPU
    forward = exposed_ring_s(ALPHA + nbytes / BANDWIDTH, core, cp)
    backward = exposed_ring_s(ALPHA + 2 * nbytes / BANDWIDTH, 2.5 * core, cp)
    assert forward > 0 and backward > 0  # 1 GB/s: the exchange outlasts the attention
    assert out["cp"] == cp and out["dp"] == 1
    assert out["cp_comm_s"] == pytest.approx(SMALL.layers * (forward + backward), rel=1e-9)
    assert out["exposed_comm_s"] >= out["cp_comm_s"] - 1e-12
    assert out["iteration_time_s"] >= out["compute_s"] + out["cp_comm_s"] - 1e-12


def test_a_slower_network_never_makes_context_parallel_training_faster():
    times = [_row(_scenario(4, bandwidth=bw))["iteration_time_s"] for bw in (1e12, 1e10, 1e9, 1e8)]
    assert times == sorted(times)
    fast = _row(_scenario(4, bandwidth=1e12))
    assert fast["cp_comm_s"] == 0.0  # a fast enough ring hides behind the attention


def test_cp_needs_flash_attention_and_a_sequence_it_splits():
    with pytest.raises(ConfigError, match="flash") as err:
        load_dict(_scenario(2, attention="standard"))
    assert err.value.path == "workload.parallel.cp"
    bad = _scenario(2)
    bad["workload"]["model"]["seq"] = 8190
    with pytest.raises(ConfigError, match="multiple of 2 x cp"):
        load_dict(bad)
    with pytest.raises(ConfigError, match="tp x pp x cp"):
        load_dict({**_scenario(2), "topology": {**_scenario(2)["topology"], "nodes": 3}})


def test_a_model_known_only_by_its_parameter_count_has_no_sequence_to_split():
    raw = {"topology": {"preset": "dgx-h100", "nodes": 1}, "payload": "size",
           "workload": {"kind": "training", "model": {"params": "1B"}, "compute": "1 s", "parallel": {"cp": 2}}}
    with pytest.raises(ConfigError, match="tp, pp, cp, ep") as err:
        load_dict(raw)
    assert err.value.path == "workload.parallel"


def test_rows_without_context_parallelism_keep_their_columns():
    raw = _scenario(2)
    raw["workload"]["parallel"], raw["workload"]["batch"] = {}, {"global": 2}
    out = _row({**raw, "topology": {**raw["topology"], "nodes": 2}})
    assert "cp" not in out and "cp_comm_s" not in out and out["dp"] == 2


def _allgather_scenario(cp, bandwidth=BANDWIDTH):
    raw = _scenario(cp, bandwidth)
    raw["workload"]["parallel"] = {"cp": cp, "cp_comm": "allgather"}
    return raw


@pytest.mark.parametrize("cp", [2, 4])
def test_llama3s_allgather_exposes_the_whole_exchange_gather_twice_and_reduce_scatter_once(cp):
    """Llama 3's context parallelism (cp_comm: allgather) gathers K and V before the attention, with
    nothing to hide behind: the forward waits for one all-gather, the backward for another and for
    the reduce-scatter of dK and dV. On a full mesh each moves (cp - 1) blocks of K and V per GPU."""
    out = _row(_allgather_scenario(cp))
    step = ALPHA + kv_step_bytes(SMALL.seq, SMALL.kv_width, 1, 1, cp, 2) / BANDWIDTH
    gathers = SMALL.layers * 2 * (cp - 1) * step
    reduce_scatter = out["cp_comm_s"] - gathers  # (cp - 1) blocks, and summing them
    assert SMALL.layers * (cp - 1) * step <= reduce_scatter <= SMALL.layers * (cp - 1) * step * 1.05
    assert out["iteration_time_s"] >= out["compute_s"] + out["cp_comm_s"] - 1e-12


@pytest.mark.parametrize("bandwidth", [1e12, 1e10, 1e9])
def test_an_allgather_exchange_never_hides_more_than_the_ring(bandwidth):
    """The same bytes per GPU: the ring overlaps them with the attention step by step, the all-gather does not."""
    ring, gathered = _row(_scenario(4, bandwidth)), _row(_allgather_scenario(4, bandwidth))
    assert gathered["cp_comm_s"] > 0.0
    assert gathered["cp_comm_s"] >= ring["cp_comm_s"]
    assert gathered["iteration_time_s"] >= ring["iteration_time_s"]


def test_cp_comm_needs_context_parallelism_and_a_known_exchange():
    raw = _allgather_scenario(2)
    raw["workload"]["parallel"]["cp_comm"] = "tree"
    with pytest.raises(ConfigError, match="ring") as err:
        load_dict(raw)
    assert err.value.path == "workload.parallel.cp_comm"
    raw = _allgather_scenario(2)
    raw["workload"]["parallel"] = {"cp_comm": "allgather"}
    raw["workload"]["batch"] = {"global": 2}
    raw["topology"] = {**raw["topology"], "nodes": 2}
    with pytest.raises(ConfigError, match="cp > 1") as err:
        load_dict(raw)
    assert err.value.path == "workload.parallel.cp_comm"


def test_the_exchange_survives_the_resolved_scenario():
    raw = _allgather_scenario(4)["workload"]
    params = parse({k: v for k, v in raw.items() if k != "kind"})
    assert params.cp_comm == "allgather"
    assert dump(params)["parallel"]["cp_comm"] == "allgather"
    with si_numbers():  # dump writes SI numbers
        assert parse({k: v for k, v in dump(params).items() if k != "kind"}) == params
    assert "cp_comm" not in dump(parse({k: v for k, v in _scenario(4)["workload"].items() if k != "kind"}))["parallel"]


@pytest.mark.parametrize("order", [("tp", "cp", "pp", "dp"), ("tp", "pp", "cp", "dp"), ("cp", "tp", "dp", "pp"),
                                   ("tp", "dp", "pp", "cp")])
def test_cp_in_its_own_place_of_the_order_is_still_one_gpu_per_position(order):
    layout = Layout(tp=2, pp=3, dp=8, cp=2, order=order)
    assert sorted(layout.rank(layout.coords(r)) for r in range(layout.size)) == list(range(layout.size))
    for r in range(layout.size):
        here = layout.coords(r)
        dp_group = layout.group(r, "dp")
        assert [layout.coords(g).dp for g in dp_group] == list(range(layout.dp))  # dp coordinate order, cp fastest
        assert all(layout.coords(g)[:2] == here[:2] for g in dp_group)
        assert r in layout.cp_group(r) and set(layout.cp_group(r)) <= set(dp_group)
        assert all(layout.coords(g).dp // 2 == here.dp // 2 for g in layout.cp_group(r))  # one micro-batch


def test_llama3s_order_puts_each_cp_group_on_consecutive_gpus():
    """[TP, CP, PP, DP] (Llama Team 2024, section 3.3.2): with tp 8 a cp group is consecutive nodes."""
    meta = Layout(tp=8, pp=16, dp=8 * 16, cp=16, order=("tp", "cp", "pp", "dp"))
    assert meta.cp_group(0) == tuple(range(0, 8 * 16, 8))
    assert meta.group(0, "pp") == tuple(range(0, 8 * 16 * 16, 8 * 16))
    default = Layout(tp=8, pp=16, dp=8 * 16, cp=16)  # cp innermost in dp, outside pp
    assert default.cp_group(0) == tuple(range(0, 8 * 16 * 16, 8 * 16))


def test_the_order_relabels_gpus_and_changes_nothing_on_a_symmetric_network():
    """Every node alike and every pair of nodes one link apart: where cp sits cannot change the time."""
    times = []
    for order in (None, ["tp", "cp", "pp", "dp"]):
        raw = _scenario(2)
        raw["topology"]["nodes"] = 8
        raw["workload"]["parallel"] = {"cp": 2, "pp": 2, "cp_comm": "allgather", **({"order": order} if order else {})}
        raw["workload"]["batch"] = {"global": 4}
        times.append(_row(raw)["iteration_time_s"])
    assert times[0] == pytest.approx(times[1], rel=1e-12)


def test_an_order_names_each_dimension_once():
    raw = _scenario(2)
    raw["workload"]["parallel"] = {"cp": 2, "order": ["tp", "cp", "pp"]}
    with pytest.raises(ConfigError, match=r"\[tp, cp, pp, dp\]") as err:
        load_dict(raw)
    assert err.value.path == "workload.parallel.order"
