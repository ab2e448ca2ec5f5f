"""Plain-language findings, computed from a result: the sentences at the top of report.md.

A capacity planner should not have to read a table to learn that the ring wins above 256 KiB,
that the uplinks saturate, or that two thirds of the iteration is communication nobody hid.
Each function here looks at one kind of evidence and returns sentences (Markdown) stating
what it shows, with the numbers that back it:

* :func:`algorithm_findings` -- which algorithm is fastest in which size range, and by how much,
  and (:func:`beyond_ring_findings`) why an allreduce's bus bandwidth may exceed the ring's;
* :func:`p2p_findings` -- where the eager/rendezvous switch is and what it costs;
* :func:`scaling_findings` -- iteration time, scaling efficiency and exposed communication
  per interconnect, and which interconnect keeps scaling;
* :func:`link_findings` -- which link class (NVLink, PCIe, NIC, spine) bounds a run, and whether
  its most utilised link saturates;
* :func:`time_share_findings` -- where the ranks' time goes in a timeline;
* :func:`closed_form_findings` -- how far the simulation is from the textbook formulas;
* :func:`hybrid_findings` -- for hybrid-parallel training, which layout is fastest among those
  that fit, the largest cost besides compute of that layout and what would reduce it, and
  which layouts do not fit the device's memory.

Nothing is said that the data does not show: a function without its evidence returns [].
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from mpisim.engine.units import format_size
from mpisim.report.clusters import cluster_findings
from mpisim.report.hybrid import best_row, breakdown, by_gpu_count, layout_label
from mpisim.report.records import RunResult, WorldRecords
from mpisim.report.tables import (
    STATE_KINDS,
    class_leaders,
    closed_form_rows,
    fmt_bandwidth,
    fmt_bytes,
    fmt_percent,
    fmt_time,
    link_table,
    point_label,
    rank_breakdown,
    row_kinds,
    sweep_keys,
    world_ranks,
    world_title,
)

__all__ = [
    "SATURATED",
    "algorithm_findings",
    "all_findings",
    "auto_findings",
    "beyond_ring_findings",
    "closed_form_findings",
    "closed_form_worlds",
    "deviation_causes",
    "hybrid_findings",
    "link_findings",
    "p2p_findings",
    "scaling_findings",
    "time_share_findings",
]

#: A link busy at least this share of the run, at this share of its capacity while busy, saturates.
SATURATED = 0.9

#: Two times closer than this ratio are a tie: a finding says so instead of "1.00x faster".
TIE = 1.005


def _groups(rows: Sequence[dict[str, Any]], keys: Sequence[str]) -> dict[tuple, list[dict[str, Any]]]:
    out: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault(tuple(row.get(k) for k in keys), []).append(row)
    return out


def _where(values: dict[str, Any], keys: Sequence[str]) -> str:
    label = point_label(values, keys)
    return f" ({label})" if label else ""


def algorithm_findings(result: RunResult) -> list[str]:
    """Say which algorithm wins in which size range (with two or more algorithms), by how much."""
    rows = _distinct_algorithms([r for r in row_kinds(result)["collective"] if isinstance(r.get("time_s"), int | float)])
    keys = sweep_keys(result)
    out = auto_findings(result)
    for group_key, members in _groups(rows, [*keys, "collective", "ranks"]).items():
        algorithms = list(dict.fromkeys(r["algorithm"] for r in members))
        values = dict(zip([*keys, "collective", "ranks"], group_key, strict=True))
        where = _where(values, keys)
        if len(algorithms) < 2:
            out.extend(_single_algorithm(members, values, where))
            continue
        by_size: dict[int, list[dict[str, Any]]] = {}
        for row in members:
            by_size.setdefault(row["bytes"], []).append(row)
        runs: list[list[Any]] = []  # [winner, first size, last size, [speed-ups]]
        for size in sorted(by_size):
            ranked = sorted(by_size[size], key=lambda r: (r["time_s"], r["algorithm"]))
            if len(ranked) < 2:
                continue
            best, second = ranked[0], ranked[1]
            speedup = second["time_s"] / best["time_s"] if best["time_s"] > 0 else math.inf
            if runs and runs[-1][0] == best["algorithm"]:
                runs[-1][2] = size
                runs[-1][3].append((speedup, second["algorithm"]))
            else:
                runs.append([best["algorithm"], size, size, [(speedup, second["algorithm"])]])
        head = f"**{values['collective']} on {values['ranks']} ranks{where}:** "
        parts = []
        for winner, lo, hi, ups in runs:
            span = f"at {fmt_bytes(lo)}" if lo == hi else f"from {fmt_bytes(lo)} to {fmt_bytes(hi)}"
            factors = [u for u, _ in ups]
            rivals = sorted({name for _, name in ups})
            lo_f, hi_f = min(factors), max(factors)
            if hi_f < TIE:  # "1.00x faster" would claim a win the numbers do not show
                parts.append(f"{span} **{winner}** ties with {', '.join(rivals)} (within {TIE - 1:.1%})")
                continue
            by = f"{lo_f:.2f}x" if math.isclose(lo_f, hi_f, rel_tol=0.005) else f"{lo_f:.2f}x to {hi_f:.2f}x"
            if lo_f < TIE:
                by = f"up to {hi_f:.2f}x"
            tied = " (tied at some sizes)" if lo_f < TIE else ""
            parts.append(f"{span} **{winner}** is fastest, {by} faster than the next best ({', '.join(rivals)}){tied}")
        if parts:
            out.append(head + "; ".join(parts) + ".")
    return out + beyond_ring_findings(result)


#: Why an allreduce algorithm's bus bandwidth may exceed the ring's without any link carrying
#: more than its capacity: bus bandwidth is algbw x 2(p-1)/p, the ring's traffic factor, and
#: these algorithms move fewer bytes through the bottleneck than a ring does.
BEYOND_RING = {
    "nvls": "the NVSwitch reduces in the switch (NVLink SHARP): each GPU sends its vector once and receives the "
            "result once, n bytes each way on its NVLink port where a ring moves 2(p-1)/p n",
    "nvls_tree": "the NVSwitch reduces in the switch (NVLink SHARP) inside each node, so each GPU's NVLink port "
                 "carries n bytes each way where a ring moves 2(p-1)/p n",
    "nccl_tree": "between nodes the tree sends each node's partial sums up once and the result down once, so on "
                 "few nodes its NICs carry fewer bytes than the ring's 2(p-1)/p n (NCCL's maintainers note that "
                 "on 2 nodes the tree can exceed the network bound)",
}


def beyond_ring_findings(result: RunResult) -> list[str]:
    """Say why an allreduce's bus bandwidth exceeds the NCCL ring's at the same size, where it does.

    Bus bandwidth is defined with the ring's traffic factor, so an algorithm that moves fewer
    bytes through the bottleneck (in-switch reduction, a tree on few nodes) legitimately shows
    more than the links' rate; the report says so instead of leaving it to look like an error.
    Like is compared with like: a row with the ring's row of the same size, rank count and sweep
    point, and no sentence where the ring did not run that size there (with ``auto``, the ring's
    rows are the sizes it was chosen at). Only a bus bandwidth above the best the ring reaches at
    any size of that point is explained: below that, where latency sets both times, a faster
    algorithm simply has the higher figure. An ``auto`` row that repeats an algorithm the run
    names is left out (said once).
    """
    rows = _distinct_algorithms([r for r in row_kinds(result)["collective"]
                                 if r.get("collective") == "allreduce" and isinstance(r.get("busbw_GBps"), int | float)])
    keys = sweep_keys(result)
    out = []
    for group_key, members in _groups(rows, [*keys, "ranks"]).items():
        rings = [r for r in members if r["algorithm"] == "nccl_ring"]
        if not rings:
            continue
        best = max(r["busbw_GBps"] for r in rings)
        values = dict(zip([*keys, "ranks"], group_key, strict=True))
        for row in sorted(members, key=lambda r: r["bytes"]):
            why = BEYOND_RING.get(row["algorithm"])
            same_size = [r for r in rings if r["bytes"] == row["bytes"]]
            if not why or not same_size:
                continue
            ring = max(same_size, key=lambda r: r["busbw_GBps"])
            if row["busbw_GBps"] > 1.05 * max(ring["busbw_GBps"], best):
                out.append(f"**allreduce/{row['algorithm']} at {fmt_bytes(row['bytes'])} on {values['ranks']} "
                           f"ranks{_where(values, keys)}** shows a bus bandwidth of "
                           f"{fmt_bandwidth(row['busbw_GBps'] * 1e9)}, above the ring's "
                           f"{fmt_bandwidth(ring['busbw_GBps'] * 1e9)} at the same size: {why}. Bus bandwidth "
                           "counts the ring's traffic, so it can exceed the links' rate while no link carries more "
                           "than its capacity.")
    return out


def _distinct_algorithms(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop the rows of ``auto`` that resolved to an algorithm the list also names explicitly.

    ``auto`` picks one of the registered algorithms per size; when it picks one the list runs
    anyway, comparing the two would compare an algorithm with itself ("rabenseifner is 1.00x
    faster than rabenseifner"). The ``auto`` row then stays out of the comparison
    (:func:`auto_findings` says what ``auto`` picked).
    """
    explicit = {(r.get("collective"), r.get("ranks"), r.get("bytes"), r["algorithm"], _point_of(r))
                for r in rows if r.get("requested") != "auto"}
    return [r for r in rows if r.get("requested") != "auto"
            or (r.get("collective"), r.get("ranks"), r.get("bytes"), r["algorithm"], _point_of(r)) not in explicit]


def _point_of(row: dict[str, Any]) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in row.items() if "." in k))  # sweep keys are dotted


def auto_findings(result: RunResult) -> list[str]:
    """Say which algorithm ``auto`` picked at each size, per collective and rank count."""
    rows = [r for r in row_kinds(result)["collective"] if r.get("requested") == "auto"]
    keys = sweep_keys(result)
    out = []
    for group_key, members in _groups(rows, [*keys, "collective", "ranks"]).items():
        values = dict(zip([*keys, "collective", "ranks"], group_key, strict=True))
        runs: list[list[Any]] = []  # [algorithm, first size, last size]
        for row in sorted(members, key=lambda r: r["bytes"]):
            if runs and runs[-1][0] == row["algorithm"]:
                runs[-1][2] = row["bytes"]
            else:
                runs.append([row["algorithm"], row["bytes"], row["bytes"]])
        parts = [f"**{name}** " + (f"at {fmt_bytes(lo)}" if lo == hi else f"from {fmt_bytes(lo)} to {fmt_bytes(hi)}")
                 for name, lo, hi in runs]
        out.append(f"**auto for {values['collective']} on {values['ranks']} ranks{_where(values, keys)}** picks "
                   + ", ".join(parts) + ".")
    return out


def _single_algorithm(members: list[dict[str, Any]], values: dict[str, Any], where: str) -> list[str]:
    with_bw = [r for r in members if isinstance(r.get("busbw_GBps"), int | float)]
    if len(with_bw) < 2:
        return []
    peak = max(with_bw, key=lambda r: r["busbw_GBps"])
    half = [r for r in sorted(with_bw, key=lambda r: r["bytes"]) if r["busbw_GBps"] >= peak["busbw_GBps"] / 2]
    sentence = (f"**{values['collective']}/{peak['algorithm']} on {values['ranks']} ranks{where}** reaches its peak "
                f"bus bandwidth of {fmt_bandwidth(peak['busbw_GBps'] * 1e9)} at {fmt_bytes(peak['bytes'])}")
    if half and half[0]["bytes"] < peak["bytes"]:
        sentence += f"; half of that from {fmt_bytes(half[0]['bytes'])} on (below, latency dominates)"
    return [sentence + "."]


def p2p_findings(result: RunResult) -> list[str]:
    """Locate the eager -> rendezvous switch in latency rows, say what it costs and why; state peaks.

    Per sweep point: at the switch the latency jumps when the rendezvous handshake (two more
    latencies) costs more than eager's copy of the message, and drops when the copy costs
    more (the limit sits above the crossover). Across sweep points that measured the same size
    both ways, the size where rendezvous starts to win is named.
    """
    rows = row_kinds(result)["p2p"]
    keys = sweep_keys(result)
    out = []
    latency = [r for r in rows if r.get("test") == "latency" and isinstance(r.get("latency_s"), int | float)]
    for group_key, members in _groups(latency, keys).items():
        where = _where(dict(zip(keys, group_key, strict=True)), keys)
        members.sort(key=lambda r: r["bytes"])
        eager = [r for r in members if r.get("protocol") == "eager"]
        rndv = [r for r in members if r.get("protocol") == "rendezvous"]
        if eager and rndv and eager[-1]["bytes"] < rndv[0]["bytes"] and eager[-1]["bytes"] > 0:
            a, b = eager[-1], rndv[0]
            ratio = b["latency_s"] / a["latency_s"]
            head = (f"**Eager up to {fmt_bytes(a['bytes'])}, rendezvous from {fmt_bytes(b['bytes'])}{where}:** the one-way "
                    f"latency goes from {fmt_time(a['latency_s'])} to {fmt_time(b['latency_s'])} ({ratio:.2f}x)")
            if ratio >= 1:
                out.append(head + ": the rendezvous handshake (RTS, then CTS) adds two latencies before the data "
                           "moves, more than eager's copy of the message costs at this size.")
            else:
                out.append(head + ": the latency drops, because at this size eager's copy of the message into a buffer "
                           "costs more than the two latencies of the rendezvous handshake. The eager limit sits "
                           "above the size where the two protocols cost the same.")
        if members and len(latency) == len(members):
            out.append(f"The smallest message ({fmt_bytes(members[0]['bytes'])}) takes {fmt_time(members[0]['latency_s'])} "
                       "one way: the fixed cost every message pays.")
    out += _crossover(latency)
    for test in ("bandwidth", "bibw"):
        bw = [r for r in rows if r.get("test") == test and isinstance(r.get("bandwidth_Bps"), int | float)]
        if bw:
            peak = max(bw, key=lambda r: r["bandwidth_Bps"])
            out.append(f"Peak {test} is {fmt_bandwidth(peak['bandwidth_Bps'])} at {fmt_bytes(peak['bytes'])}.")
    return out


def _crossover(latency: list[dict[str, Any]]) -> list[str]:
    """Name where rendezvous starts to beat eager, from sizes measured with both protocols."""
    both: dict[int, dict[str, float]] = {}
    for row in latency:
        if row.get("protocol") in ("eager", "rendezvous") and row["bytes"] > 0:
            best = both.setdefault(row["bytes"], {})
            best[row["protocol"]] = min(best.get(row["protocol"], math.inf), row["latency_s"])
    sizes = sorted(n for n, by in both.items() if len(by) == 2)
    if len(sizes) < 2:
        return []
    wins = [both[n]["rendezvous"] < both[n]["eager"] for n in sizes]
    if all(wins) or not any(wins):
        winner = "rendezvous" if wins[0] else "eager"
        return [f"**{winner.capitalize()} is cheaper at every size measured both ways** ({fmt_bytes(sizes[0])} to "
                f"{fmt_bytes(sizes[-1])})."]
    first = wins.index(True)
    lo, hi = sizes[first - 1], sizes[first]
    return [f"**Eager and rendezvous cross between {fmt_bytes(lo)} and {fmt_bytes(hi)}:** at {fmt_bytes(lo)} eager takes "
            f"{fmt_time(both[lo]['eager'])} and rendezvous {fmt_time(both[lo]['rendezvous'])}; at {fmt_bytes(hi)} eager "
            f"takes {fmt_time(both[hi]['eager'])} and rendezvous {fmt_time(both[hi]['rendezvous'])}. Eager's copy grows "
            "with the size while the handshake does not, so an eager limit near this size sends each message the "
            "cheaper way."]


def scaling_findings(result: RunResult) -> list[str]:
    """Per interconnect: iteration time and efficiency at the largest rank count, exposed share."""
    rows = row_kinds(result)["training"]
    keys = [k for k in sweep_keys(result) if k != "topology.nodes"]
    out = []
    summary = []
    for group_key, members in _groups(rows, keys).items():
        members = sorted(members, key=lambda r: r["ranks"])
        last = members[-1]
        values = dict(zip(keys, group_key, strict=True))
        name = point_label(values, keys) or "this cluster"
        share = last["exposed_comm_s"] / last["iteration_time_s"] if last["iteration_time_s"] > 0 else 0.0
        sentence = (f"**{name}:** at {last['ranks']} ranks an iteration takes {fmt_time(last['iteration_time_s'])} "
                    f"(compute {fmt_time(last['compute_s'])}), scaling efficiency "
                    f"{fmt_percent(last.get('scaling_efficiency'))}; {fmt_percent(share)} of the iteration is "
                    "communication that backward does not hide")
        multi = [r for r in members if r["ranks"] > 1 and isinstance(r.get("scaling_efficiency"), int | float)]
        below = [r for r in multi if r["scaling_efficiency"] < 0.9]
        if multi and not below:
            sentence += f". Efficiency stays at or above 90 % at every point, up to {multi[-1]['ranks']} ranks"
        elif below:
            first = below[0]
            sentence += (f". Efficiency first drops below 90 % at {first['ranks']} ranks "
                         f"({fmt_percent(first['scaling_efficiency'])})")
        out.append(sentence + ".")
        summary.append((last.get("scaling_efficiency") or 0.0, name, last["ranks"]))
    if len(summary) > 1:
        summary.sort(reverse=True)
        (best, best_name, ranks), (worst, worst_name, _) = summary[0], summary[-1]
        out.append(f"At {ranks} ranks **{best_name}** scales best ({fmt_percent(best)} efficiency) and "
                   f"**{worst_name}** worst ({fmt_percent(worst)}).")
    return out


#: A cost below this share of the iteration is too small to be worth changing the layout for.
NOTABLE = 0.02
#: Layouts named one by one in a sentence before "and N more".
NAMED_LAYOUTS = 6


def _setting(result: RunResult, row: dict[str, Any], key: str) -> Any:
    """The workload setting *key* (dotted below ``workload``) of *row*: its sweep value, else the scenario's."""
    if f"workload.{key}" in row:
        return row[f"workload.{key}"]
    value: Any = result.scenario.get("workload") or {}
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _device_memory(result: RunResult) -> int | None:
    """The device's memory per GPU, unless the sweep changes the topology (then it differs by row)."""
    if any(k.startswith("topology.") and k != "topology.nodes" for k in sweep_keys(result)):
        return None
    value = (result.scenario.get("topology") or {}).get("device_memory")
    return value if isinstance(value, int) else None


def _cost_advice(result: RunResult, row: dict[str, Any], cost: str) -> str:
    """What would reduce *cost* of *row*'s iteration (a clause), from the row's own settings."""
    tp, pp, micro_batches = int(row.get("tp") or 1), int(row.get("pp") or 1), int(row.get("micro_batches") or 1)
    if cost == "tp":
        fewer = f"fewer tensor-parallel GPUs (tp {tp // 2}) where memory allows" if tp > 1 else "fewer tensor-parallel GPUs"
        fit = "" if _setting(result, row, "sequence_parallel") else \
            " (sequence parallelism, `sequence_parallel: true`, splits the activations over tp to make room)"
        return (f"every layer waits for two collectives of b s h elements per pass; {fewer}{fit}, or faster NVLink "
                "would reduce it")
    if cost == "bubble":
        schedule, chunks = str(row.get("schedule") or _setting(result, row, "schedule")), _setting(result, row, "chunks")
        ideal = (pp - 1) / (micro_batches + pp - 1)
        text = (f"with {pp} stages and {micro_batches} micro-batches the stages idle while the pipeline fills and "
                f"drains ({'1F1B' if schedule == 'interleaved' else schedule} on an ideal network: "
                f"(p - 1) / (m + p - 1) = {fmt_percent(ideal)} of the pipeline's time); more micro-batches "
                "(a larger `batch.global`")
        micro = _setting(result, row, "batch.micro")
        text += f", or `batch.micro: {int(micro) // 2}`)" if isinstance(micro, int) and micro > 1 else ")"
        if schedule == "interleaved":
            return text + f", more model chunks per stage (`chunks: {int(chunks or 2) + 1}`) or fewer stages would reduce it"
        return text + ", `schedule: interleaved` (v model chunks per stage cut the bubble by v) or fewer stages would reduce it"
    if cost == "pp":
        return ("activations and gradients between stages arrive after the stage needs them; fewer stages or a "
                "faster network between the stages' nodes would reduce it")
    if cost == "ep":
        return ("every MoE layer dispatches tokens to their experts and combines them back; expert parallelism inside "
                "one NVLink domain (fewer ep), a lower `capacity_factor` or a faster network would reduce it")
    if cost == "cp":
        return ("each ring step's keys and values take longer than the attention they overlap; fewer context-parallel "
                "GPUs (a longer share of the sequence each), cp groups inside one NVLink domain or a faster network "
                "would reduce it")
    zero = int(row.get("zero") or 0)
    parts = []
    if _setting(result, row, "overlap.dp") is False:
        parts.append("`overlap: {dp: true}` (reduce each gradient bucket while backward goes on)")
    cap = _setting(result, row, "bucket_cap")
    parts.append("larger buckets (`bucket_cap`" + (f", now {fmt_bytes(cap)}" if isinstance(cap, int) else "")
                 + ": fewer collectives, fewer latencies)")
    if zero == 3:
        parts.append("ZeRO 1 or 2 where memory allows (FSDP gathers every layer's parameters twice per step)")
    what = "the gradient sync that backward did not hide"
    if zero in (1, 2):
        what += " and the allgather of the updated parameters, which follows the optimizer step so nothing hides it"
    return f"{what}; " + ", ".join(parts) + " or a faster network would reduce it"


COST_NAMES = {"bubble": "The pipeline bubble", "tp": "Tensor-parallel communication", "pp": "Pipeline transfers",
              "ep": "Expert-parallel all-to-all", "cp": "Context-parallel K/V exchange",
              "dp": "Exposed data-parallel sync"}


def _dominant_cost(result: RunResult, row: dict[str, Any], label: str) -> str:
    """Name the largest cost of *row*'s iteration besides compute, with what would reduce it."""
    iteration = row["iteration_time_s"]
    parts = breakdown(row)
    costs = sorted(((v, k) for k, v in parts.items() if k != "compute"), reverse=True)
    share, cost = costs[0][0] / iteration, costs[0][1]
    if share < NOTABLE:
        return (f"**Compute is {fmt_percent(parts['compute'] / iteration)} of the iteration of {label}:** every "
                f"other cost is below {fmt_percent(NOTABLE)} (the largest: {COST_NAMES[cost].lower()}, "
                f"{fmt_percent(share)}), so only faster compute would shorten it"
                + (" (faster kernels: a higher `compute.efficiency`, or faster GPUs)."
                   if isinstance(row.get("tflops_per_gpu"), int | float) else "."))
    others = [f"{COST_NAMES[k].lower()} {fmt_percent(v / iteration)}" for v, k in costs[1:] if v / iteration >= NOTABLE / 2]
    return (f"**{COST_NAMES[cost]} is {fmt_percent(share)} of the iteration of {label}** ({fmt_time(costs[0][0])} of "
            f"{fmt_time(iteration)}; compute {fmt_percent(parts['compute'] / iteration)}"
            + (", " + ", ".join(others) if others else "") + f"): {_cost_advice(result, row, cost)}.")


def _what_others_lose(best: dict[str, Any], others: list[dict[str, Any]], keys: Sequence[str]) -> list[str]:
    """Say, per cost, which slower layout pays the most more of it than the fastest (costs that matter only)."""
    base = breakdown(best)
    floor = NOTABLE * best["iteration_time_s"]
    parts = []
    for cost in ("compute", *COST_NAMES):
        worst = max(others, key=lambda r: breakdown(r)[cost] - base[cost])
        extra = breakdown(worst)[cost] - base[cost]
        if extra >= floor:
            name = COST_NAMES[cost].lower() if cost != "compute" else "compute"
            parts.append((extra, f"{name}: up to {fmt_time(extra)} more ({layout_label(worst, keys)})"))
    if not parts:
        return []
    parts.sort(key=lambda p: -p[0])
    return ["**What the slower layouts that fit lose** against the fastest, per iteration: "
            + "; ".join(text for _, text in parts) + "."]


#: A layout this close to the fastest in time counts as just as fast when it needs much less memory.
CLOSE_IN_TIME = 0.02
#: ... and "much less" is at most this share of the fastest layout's memory per GPU.
LEANER = 0.75


def _leaner_alternative(best: dict[str, Any], others: list[dict[str, Any]], keys: Sequence[str]) -> list[str]:
    """Name a layout nearly as fast as the fastest that needs much less memory per GPU (headroom)."""
    memory = best.get("memory_per_gpu_bytes")
    if not isinstance(memory, int | float) or memory <= 0:
        return []
    close = [r for r in others if r["iteration_time_s"] <= best["iteration_time_s"] * (1 + CLOSE_IN_TIME)
             and isinstance(r.get("memory_per_gpu_bytes"), int | float) and r["memory_per_gpu_bytes"] <= LEANER * memory]
    if not close:
        return []
    lean = min(close, key=lambda r: r["memory_per_gpu_bytes"])
    slower = lean["iteration_time_s"] / best["iteration_time_s"] - 1
    return [f"**{layout_label(lean, keys)} is within {fmt_percent(slower)} of it with "
            f"{fmt_bytes(lean['memory_per_gpu_bytes'])} per GPU instead of {fmt_bytes(memory)}:** the layout to pick "
            "when memory headroom matters (longer sequences, larger micro-batches, fragmentation)."]


def _rate(row: dict[str, Any]) -> str:
    parts = [f"{fmt_time(row['iteration_time_s'])} per iteration"]
    if isinstance(row.get("tflops_per_gpu"), int | float):
        parts.append(f"{row['tflops_per_gpu']:.0f} TFLOP/s per GPU")
    if isinstance(row.get("mfu"), int | float):
        parts.append(f"MFU {fmt_percent(row['mfu'])}")
    if isinstance(row.get("tokens_per_s"), int | float):
        parts.append(f"{row['tokens_per_s']:,.0f} tokens/s")
    return ", ".join(parts)


def hybrid_findings(result: RunResult) -> list[str]:
    """Say which layout wins at each GPU count, what dominates its iteration and which layouts do not fit.

    For each GPU count: the fastest layout that fits the device's memory and by how much it
    beats the next one; the largest cost of its iteration besides compute (the pipeline
    bubble, tensor-, pipeline- or expert-parallel communication, or the exposed data-parallel
    sync; :func:`~mpisim.report.hybrid.breakdown`) with what would reduce it; and the layouts
    that do not fit, with the memory each needs.
    """
    keys = sweep_keys(result)
    out = []
    for ranks, rows in by_gpu_count(result):
        best = best_row(rows)
        if best is None or not best.get("iteration_time_s"):
            continue
        label = layout_label(best, keys) or "this layout"
        fitting = sorted((r for r in rows if r.get("fits") is not False), key=lambda r: r["iteration_time_s"])
        if len(rows) == 1:
            out.append(f"**{label} on {ranks} GPUs:** {_rate(best)}.")
        elif best.get("fits") is False:
            out.append(f"**No layout fits on {ranks} GPUs;** the fastest, {label}, would take {_rate(best)}.")
        else:
            text = f"**Fastest layout on {ranks} GPUs: {label}** ({_rate(best)})"
            if len(fitting) > 1:
                runner = fitting[1]
                ratio = runner["iteration_time_s"] / best["iteration_time_s"]
                lead = f"{ratio:.2f}x faster than" if ratio >= TIE else f"tied (within {TIE - 1:.1%}) with"
                text += (f", {lead} the next that fits, {layout_label(runner, keys)} "
                         f"({fmt_time(runner['iteration_time_s'])})")
            out.append(text + ".")
        out.append(_dominant_cost(result, best, label))
        if len(fitting) > 1:
            out += _what_others_lose(best, fitting[1:], keys)
            out += _leaner_alternative(best, fitting[1:], keys)
        misfits = sorted((r for r in rows if r.get("fits") is False), key=lambda r: r["iteration_time_s"])
        if misfits and len(rows) > 1:
            device = _device_memory(result)
            named = [f"{layout_label(r, keys)} ({fmt_bytes(r.get('memory_per_gpu_bytes'))})"
                     for r in misfits[:NAMED_LAYOUTS]]
            more = f" and {len(misfits) - NAMED_LAYOUTS} more" if len(misfits) > NAMED_LAYOUTS else ""
            text = (f"**{len(misfits)} of {len(rows)} layouts on {ranks} GPUs do not fit** the "
                    + (f"{fmt_bytes(device)} of " if device else "") + "a GPU's memory (needed per GPU): "
                    + "; ".join(named) + more)
            faster = [r for r in misfits if r["iteration_time_s"] < best["iteration_time_s"]]
            if faster:
                text += (f". {len(faster)} of them would be faster than {label}: more ZeRO sharding or recomputation "
                         "could make them fit")
            out.append(text + ".")
    return out


def link_findings(world: WorldRecords) -> list[str]:
    """Name the link class that bounds *world* (NVLink, PCIe, NIC, spine) and its most utilised link.

    A link's utilisation is the time its bytes need at full rate over the run, so the most
    utilised link is the one whose capacity the run is closest to being limited by; bytes
    alone would name an NVLink port on a GPU node, which carries more than a NIC at eight
    times the rate. The busiest link of each other class is named too.
    """
    uses = link_table(world)
    if not uses or world.t_end <= 0:
        return []
    leaders = class_leaders(uses)
    top = uses[0]
    if top.capacity_Bps <= 0:
        return [f"**Busiest link in {world_title(world)}:** `{top.link}` ({top.kind}) carried {fmt_bytes(top.nbytes)}, "
                f"busy {fmt_percent(top.busy_share)} of the run (capacity unknown)."]
    body = (f"`{top.link}` ({top.kind}) carried {fmt_bytes(top.nbytes)}, which needs {fmt_time(top.full_rate_s)} at "
            f"its {fmt_bandwidth(top.capacity_Bps)}: {fmt_percent(top.utilisation)} of the {fmt_time(world.t_end)} run")
    in_turn = sum(use.full_rate_s for use in leaders.values()) / world.t_end
    if top.utilisation >= SATURATED:
        head = f"{top.kind} links bound {world_title(world)}"
        body += ", so it is saturated: only more or faster links of this class would make the run shorter"
    elif len(leaders) > 1 and SATURATED <= in_turn <= 1.05:
        head = f"{' and '.join(leaders)} links bound {world_title(world)} in turn"
        body += (f". No link is saturated, but the busiest link of each class needs, at full rate, "
                 f"{fmt_percent(in_turn)} of the run together: the algorithm uses the classes one after the other "
                 "(one waits while the other works), so their bandwidths add up to the time")
    elif top.utilisation >= 0.5:
        head = f"{top.kind} links bound {world_title(world)}"
        body += (f": it moves data at full rate for most of the run, and the other "
                 f"{fmt_percent(1 - top.utilisation)} goes to latency, per-message costs or waiting")
    else:
        head = f"No link class bounds {world_title(world)}"
        body += "; no link is near saturation, so latency, per-message costs or waiting set the time"
    text = f"**{head}:** {body}"
    others = [f"{cls} `{use.link}` {fmt_percent(use.utilisation)}" for cls, use in leaders.items() if cls != top.kind]
    if others:
        text += ". Busiest link of each other class: " + ", ".join(others)
    return [text + "."]


def time_share_findings(world: WorldRecords) -> list[str]:
    """Say where the ranks' time goes in *world* (averaged over ranks, states only)."""
    breakdown = rank_breakdown(world)
    p = world_ranks(world)
    if not breakdown or world.t_end <= 0 or p == 0:
        return []
    totals = {kind: sum(b.get(kind, 0.0) for b in breakdown.values()) / (p * world.t_end) for kind in STATE_KINDS}
    shares = sorted(((v, k) for k, v in totals.items() if v > 0.005), reverse=True)
    if not shares:
        return []
    names = {"compute": "computing", "send": "blocked in send", "recv": "blocked in receive/sendrecv",
             "wait": "waiting for requests", "reduce": "reducing", "copy": "copying"}
    listed = ", ".join(f"{fmt_percent(v)} {names[k]}" for v, k in shares)
    overlap = " (these overlap: a rank can compute while it waits for messages)" if sum(v for v, _ in shares) > 1.001 else ""
    return [f"**Where the time goes in {world_title(world)}** (share of the run, average over {p} ranks): {listed}{overlap}."]


def closed_form_findings(result: RunResult) -> list[str]:
    """Compare simulated times with the closed forms, per algorithm, and explain the gap.

    The worst deviation of each algorithm is stated with its causes, read off the records of
    that point's world (:func:`deviation_causes`): messages that went by rendezvous, eager
    copies, or a multi-level topology where the formula charges every hop the slowest path.
    """
    out = []
    for algorithm, worst in _worst_rows(result).items():
        dev = worst["ratio"] - 1
        causes = deviation_causes(result, worst)
        if abs(dev) < 0.01:
            text = f"**{algorithm}:** the simulation matches its closed form within 1 % at every point"
        else:
            side = "slower" if dev > 0 else "faster"
            exact = "" if worst["exact"] else " (for this many ranks the formula is a bound, not exact)"
            text = (f"**{algorithm}:** the simulation is up to {abs(dev) * 100:.1f} % {side} than its closed form, "
                    f"at {fmt_bytes(worst['bytes'])} on {worst['ranks']} ranks ({fmt_time(worst['time_s'])} vs "
                    f"{fmt_time(worst['model_s'])}){exact}")
        if causes:
            text += ", because " + "; and ".join(causes) if abs(dev) >= 0.01 else ". " + causes[-1][0].upper() + causes[-1][1:]
        out.append(text + ".")
    return out


def _worst_rows(result: RunResult) -> dict[str, dict[str, Any]]:
    """Per algorithm, the closed-form row farthest from its formula (rows auto chose count last)."""
    rows = closed_form_rows(result)
    out = {}
    for algorithm in dict.fromkeys(r["algorithm"] for r in rows):
        mine = [r for r in rows if r["algorithm"] == algorithm and math.isfinite(r["ratio"])
                and r.get("requested") != "auto"] or [r for r in rows if r["algorithm"] == algorithm
                                                      and math.isfinite(r["ratio"])]
        if mine:
            out[algorithm] = max(mine, key=lambda r: abs(r["ratio"] - 1))
    return out


def closed_form_worlds(result: RunResult) -> list[int]:
    """Indices of the worlds :func:`closed_form_findings` reads records from (one per algorithm).

    A slimmed result keeps their records, so its report explains the same gaps.
    """
    found = (_world_index(result, row) for row in _worst_rows(result).values())
    return [i for i in found if i is not None]


def _world_index(result: RunResult, row: dict[str, Any]) -> int | None:
    """Return the index of the world a collective row was measured in (by label and sweep point)."""
    label = f"{row['algorithm']} {format_size(int(row['bytes']))}"
    if row.get("requested") == "auto":
        label += " (auto)"
    keys = sweep_keys(result)
    for i, world in enumerate(result.records):
        if world.label == label and all(str(world.point.get(k)) == str(row.get(k)) for k in keys if k in world.point):
            return i
    return None


def _world_of(result: RunResult, row: dict[str, Any]) -> WorldRecords | None:
    """Return the world a collective row was measured in, if it was kept."""
    i = _world_index(result, row)
    return None if i is None else result.records[i]


def deviation_causes(result: RunResult, row: dict[str, Any]) -> list[str]:
    """Return the reasons, with numbers, why *row*'s simulated time differs from its closed form.

    Each reason is a clause found in the evidence of the row's world: the closed form
    charges every message one alpha plus its bytes times beta (the slowest path's), so

    * a message above the eager limit goes by rendezvous and waits for an RTS and a CTS
      first: two more latencies per step that the formula does not count;
    * an eager message is copied into a buffer at the memory-copy bandwidth, which no
      alpha-beta term holds;
    * on a multi-level topology (NVLink inside a node, a NIC between nodes) the formula
      assumes every hop is as slow as the slowest path, so it is an upper bound there (said
      when the simulation is faster than the formula).

    A world whose records were not kept gives only the topology reason.
    """
    causes = []
    world = _world_of(result, row)
    simulated_slower = row["time_s"] > row["model_s"]
    if world is not None and world.messages and simulated_slower:
        network = [m for m in world.messages if m.protocol != "self"]
        rndv = [m for m in network if m.protocol == "rendezvous"]
        eager = [m for m in network if m.protocol == "eager" and m.nbytes > 0]
        if rndv:
            sizes = sorted({m.nbytes for m in rndv})
            size_text = fmt_bytes(sizes[0]) if len(sizes) == 1 else f"{fmt_bytes(sizes[0])} to {fmt_bytes(sizes[-1])}"
            limit = _eager_limit_below(result, sizes[0])
            causes.append(
                f"{len(rndv)} of its {len(network)} messages ({size_text}) are above the "
                f"{fmt_bytes(limit) + ' ' if limit else ''}eager limit and go by rendezvous: each waits for an RTS "
                "and a CTS before its data moves, two latencies per step that the formula does not count"
                + _handshake_share(world, rndv, row["time_s"] - row["model_s"]))
        copy_bw = (result.scenario.get("mpi") or {}).get("copy_bandwidth")
        if eager and isinstance(copy_bw, int | float) and math.isfinite(copy_bw) and copy_bw > 0:
            biggest = max(m.nbytes for m in eager)
            alpha = world.network.get("alpha_s", 0.0)
            if biggest / copy_bw >= 0.05 * alpha:
                causes.append(
                    f"each eager message is copied into a buffer at {fmt_bandwidth(copy_bw)} "
                    f"({fmt_time(biggest / copy_bw)} for its {fmt_bytes(biggest)} messages), a cost with no "
                    "alpha-beta term")
    network = world.network if world is not None else _any_network(result, row)
    beta, pair_beta = network.get("beta_s_per_B"), network.get("pair_beta_s_per_B")
    # Only a simulation faster than the formula is explained by it: an algorithm whose every step
    # crosses the slowest path (a flat ring across nodes) is paced by it, and the formula holds.
    if (not simulated_slower and isinstance(beta, int | float) and isinstance(pair_beta, int | float)
            and 0 < pair_beta < 0.9 * beta):
        causes.append(
            f"on this multi-level topology the formula charges every hop the slowest path ({fmt_bandwidth(1 / beta)}, "
            f"alpha {fmt_time(network.get('alpha_s'))}) although ranks 0 and 1 talk at {fmt_bandwidth(1 / pair_beta)}: "
            "it assumes every hop is the slowest one, so it is an upper bound here, not a prediction")
    return causes


def _handshake_share(world: WorldRecords, rndv: list[Any], gap: float) -> str:
    """Estimate the handshakes' share of *gap*: rank 0's rendezvous sends, two path latencies each.

    Sends that overlap (a root posting all of them at once) pay their handshakes together, so
    this is an upper estimate; for algorithms whose steps follow each other it is the cost.
    """
    latency = world.network.get("pair_latency_s")
    sends = sum(1 for m in rndv if m.src == 0)
    if not isinstance(latency, int | float) or latency <= 0 or sends == 0 or gap <= 0:
        return ""
    extra = 2 * sends * latency
    return (f" (rank 0 sends {sends} of them; up to 2 x {sends} x {fmt_time(latency)} = {fmt_time(extra)} "
            f"of the {fmt_time(gap)} gap)")


def _eager_limit_below(result: RunResult, nbytes: int) -> int | None:
    """Return the scenario's eager limit that *nbytes* exceeds (network first), if it says."""
    mpi = result.scenario.get("mpi") or {}
    limits = [mpi.get(k) for k in ("eager_limit_inter", "eager_limit_intra", "eager_limit")]
    below = [v for v in limits if isinstance(v, int) and v < nbytes]
    return below[0] if below else None


def _any_network(result: RunResult, row: dict[str, Any]) -> dict[str, float]:
    """The network parameters of any world of *row*'s sweep point (they do not depend on size)."""
    keys = sweep_keys(result)
    for world in result.records:
        if world.network and all(str(world.point.get(k)) == str(row.get(k)) for k in keys if k in world.point):
            return world.network
    return {}


def all_findings(result: RunResult, worlds: Sequence[WorldRecords], link_worlds: Sequence[WorldRecords] = ()) -> list[str]:
    """Return every finding for *result*; *worlds* are drawn as timelines, *link_worlds* get link figures."""
    out = []
    if result.failure is not None:  # a run that stopped: that is the news, before any utilisation
        kind = result.failure.get("kind")
        out.append(f"**The simulated program failed, as the scenario expected ({kind}).**"
                   if result.scenario.get("expect_failure") else
                   f"**The simulated program failed ({kind}): the figures show its run up to where it stopped.**")
    out += algorithm_findings(result) + p2p_findings(result) + scaling_findings(result) + hybrid_findings(result)
    out += cluster_findings(result)
    links = [finding for world in link_worlds for finding in link_findings(world)]
    if result.failure is None:
        out += links
    for world in worlds:
        out += time_share_findings(world)
    out += closed_form_findings(result)
    if result.failure is not None:
        out += links
    if result.expectations:
        failed = result.failed_expectations
        if failed:
            out.append(f"**{len(failed)} of {len(result.expectations)} expectations failed** (see below).")
        else:
            out.append(f"All {len(result.expectations)} expectations of the scenario pass.")
    return out
