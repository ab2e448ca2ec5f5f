"""Benchmark output as the tools print it, from mpisim's own rows (for round-trip tests)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mpisim.scenario.load import load_dict
from mpisim.scenario.run import run_scenario

OSU_TITLES = {"latency": "Latency", "bandwidth": "Bandwidth", "bibw": "Bi-Directional Bandwidth"}


def mpisim_rows(preset: Mapping[str, Any], workload: Mapping[str, Any], nodes: int, ranks_per_node: int) -> list[dict]:
    topology = {k: v for k, v in preset.items() if k != "mpi"}
    topology.update(nodes=nodes, ranks_per_node=ranks_per_node)
    raw = {"topology": topology, "mpi": dict(preset.get("mpi") or {}), "payload": "size", "workload": dict(workload)}
    return run_scenario(load_dict(raw)).rows


def osu_text(test: str, rows: Sequence[Mapping[str, Any]], version: str = "v5.9") -> str:
    """osu_latency / osu_bw / osu_bibw output, two decimals as OSU prints them."""
    column = "Latency (us)" if test == "latency" else "Bandwidth (MB/s)"
    lines = [f"# OSU MPI {OSU_TITLES[test]} Test {version}", f"# Size          {column}"]
    for row in rows:
        value = row["latency_s"] * 1e6 if test == "latency" else row["bandwidth_Bps"] / 1e6
        lines.append(f"{row['bytes']:<20d}{value:>12.2f}")
    return "\n".join(lines) + "\n"


def nccl_text(binary: str, rows: Sequence[Mapping[str, Any]], ranks: int, hosts: Sequence[str]) -> str:
    """An nccl-tests table (out-of-place and in-place alike), time in us to nccl-tests' precision."""
    lines = [f"# {binary} -b 8 -e 1G -f 4 -g {ranks // len(hosts)}",
             f"# nThread 1 nGpus {ranks // len(hosts)} minBytes 8 maxBytes 1073741824 step: 4(factor) warmup iters: 5 "
             "iters: 20 agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    for r in range(ranks):
        host = hosts[r * len(hosts) // ranks]
        lines.append(f"#  Rank {r:2d} Group  0 Pid  {1000 + r // 8:5d} on {host:>10} device {r % 8:2d} [0x07] NVIDIA A100")
    lines += ["#", "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)"]
    for row in rows:
        t = row["time_s"] * 1e6
        text = f"{t:.1f}" if t >= 1000 else f"{t:.2f}"
        algbw = row["bytes"] / row["time_s"] / 1e9
        lines.append(f"{row['bytes']:>12d}  {row['bytes'] // 4:>12d}     float     sum      -1  {text:>7}  {algbw:6.2f}  "
                     f"{algbw:6.2f}      0  {text:>7}  {algbw:6.2f}  {algbw:6.2f}      0")
    lines.append("# Avg bus bandwidth    : 0")
    return "\n".join(lines) + "\n"
