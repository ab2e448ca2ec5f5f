"""Every command written in a scenario's comments runs, with the exit code it states.

A scenario's header teaches with commands (``# Run:   mpisim run scenarios/x.yaml``, ``# Try:
...``). Each comment line holding ``mpisim ...`` is a command; a trailing backslash continues it
on the next comment line; ``# exit N`` after it states its exit code (0 otherwise). They run
from a scratch directory that sees the repository's ``scenarios/`` (so ``-o out/...`` writes
there), through the same entry point as the ``mpisim`` command.

The numbers a header quotes from those runs (``mpisim gives 11.41 ms``) are checked against the
table the command prints (:data:`CLAIMS`), so a change that moves them cannot leave the comment
behind: it once said 325 ms and "131 ms exposed (70 %)" where the run printed 299 ms and 105 ms (74 %).
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from mpisim.cli import main

ROOT = Path(__file__).resolve().parents[1]
#: A command line: ``mpisim <subcommand> ...`` at the start, after an optional ``Run:``-style label.
COMMAND = re.compile(r"^(?:[A-Z][a-z]+:\s+)?(mpisim (?:run|check|list|report|explain|exec|calibrate)\b.*)")


def commands(path: Path) -> list[tuple[str, int]]:
    """Return (command, expected exit code) for each command in *path*'s comments."""
    found, pending = [], ""
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            continue
        text = line.lstrip("#").strip()
        if pending:
            text = pending + " " + text
            pending = ""
        else:
            match = COMMAND.match(text)
            if match is None:
                continue
            text = match.group(1)
        if text.endswith("\\"):
            pending = text[:-1].strip()
            continue
        command, _, note = text.partition("   #")
        code = re.search(r"\bexit (\d)\b", note)
        found.append((command.strip(), int(code.group(1)) if code else 0))
    return found


CASES = [(path.name, command, code) for path in sorted((ROOT / "scenarios").glob("*.yaml"))
         for command, code in commands(path)]


def claim(where: dict[str, str], column: str, text: str, scale: float = 1.0) -> tuple[dict[str, str], str, str, float]:
    """A number the comments quote: the cell *column* of the printed row matching *where* (header: cell
    text), times *scale*, written into *text* with ``str.format`` (``"mpisim gives {:.2f} ms"``)."""
    return where, column, text, scale


#: (scenario, marker) -> numbers its comments quote from the table of the command that contains the
#: marker ("": the command without --set, its Run line).
CLAIMS = {
    ("capacity-plan-7b-h100.yaml", ""): [
        claim({"topology.inter.bandwidth": "400 Gbps", "topology.nodes": "4"}, "comm (ms)", "(mpisim: {:.1f} and"),
        claim({"topology.inter.bandwidth": "200 Gbps", "topology.nodes": "4"}, "comm (ms)", "and {:.0f} ms on 32 GPUs)"),
        claim({"topology.inter.bandwidth": "400 Gbps", "topology.nodes": "64"}, "comm (ms)", "(512 GPUs: {:.0f} ms on 400G,"),
        claim({"topology.inter.bandwidth": "200 Gbps", "topology.nodes": "64"}, "comm (ms)", "400G, {:.0f} ms on 200G)"),
        claim({"topology.inter.bandwidth": "200 Gbps", "topology.nodes": "64"}, "scaling efficiency (%)",
              "scaling stays at {:.1f} % or more"),
    ],
    ("capacity-plan-7b-h100.yaml", 'workload.compute="300 ms"'): [
        claim({"topology.inter.bandwidth": "200 Gbps", "topology.nodes": "64"}, "exposed comm (ms)",
              "rails expose {:.0f} ms per iteration"),
        claim({"topology.inter.bandwidth": "200 Gbps", "topology.nodes": "64"}, "scaling efficiency (%)",
              "(efficiency {:.0f} %), on 400G"),
        claim({"topology.inter.bandwidth": "400 Gbps", "topology.nodes": "64"}, "exposed comm (ms)", "on 400G {:.0f} ms ("),
        claim({"topology.inter.bandwidth": "400 Gbps", "topology.nodes": "64"}, "scaling efficiency (%)", "ms ({:.0f} %)."),
    ],
    ("capacity-plan-300m.yaml", ""): [
        claim({"topology.preset": "ib-hdr", "topology.nodes": "64"}, "iteration (ms)", "InfiniBand HDR {:.0f} ms per"),
        claim({"topology.preset": "ib-hdr", "topology.nodes": "64"}, "scaling efficiency (%)", "(efficiency {:.2f}),", 0.01),
        claim({"topology.preset": "roce-100g", "topology.nodes": "64"}, "iteration (ms)", "RoCE 100G {:.0f} ms"),
        claim({"topology.preset": "ethernet-25g-tcp", "topology.nodes": "64"}, "iteration (ms)", "TCP on 25 GbE {:.0f} ms"),
        claim({"topology.preset": "ethernet-25g-tcp", "topology.nodes": "64"}, "iteration (ms)", "vs {:.3f} s; on RoCE", 1e-3),
        claim({"topology.preset": "roce-100g", "topology.nodes": "64"}, "iteration (ms)", "vs {:.0f} ms, where smaller"),
    ],
    ("capacity-plan-300m.yaml", 'workload.bucket_cap="25 MiB"'): [
        claim({"topology.preset": "ethernet-25g-tcp", "topology.nodes": "64"}, "iteration (ms)", "TCP: {:.3f} s vs", 1e-3),
        claim({"topology.preset": "roce-100g", "topology.nodes": "64"}, "iteration (ms)", "on RoCE {:.0f} ms vs"),
    ],
    ("nccl-allreduce-dgx-a100.yaml", ""): [
        claim({"size (B)": "32768", "algorithm": "ring"}, "time (us)", "ring gives {:.2f} us"),
        claim({"size (B)": "134217728", "algorithm": "ring"}, "time (us)", "us and {:.1f} us, and busbw"),
        claim({"size (B)": "32768", "algorithm": "nccl_ring"}, "time (us)", "validation.md): {:.1f} us at 32 KiB"),
        claim({"size (B)": "134217728", "algorithm": "nccl_ring"}, "time (us)", "32 KiB, {:.0f} us at 128 MiB"),
    ],
    ("nccl-allreduce-dgx-a100.yaml", 'workload.sizes.max="1 GiB"'): [
        claim({"size (B)": "1073741824"}, "busbw (GB/s)", "and busbw {:.0f} GB/s at 1 GiB (the second Try line"),
        claim({"size (B)": "1073741824"}, "busbw (GB/s)", "(the ring up to 1 GiB: busbw {:.0f} GB/s there)"),
    ],
    ("baidu-40gpu.yaml", ""): [
        claim({"ranks": "40"}, "iteration (ms)", "more: ~{:.0f} ms per iteration"),
        claim({"ranks": "40"}, "exposed comm (ms)", "take ~{:.0f} ms more"),
    ],
    ("baidu-40gpu.yaml", "workload.params=300M"): [
        claim({"ranks": "40"}, "iteration (ms)", "far better, {:.0f} ms per iteration"),
        claim({"ranks": "40"}, "iteration (ms)", "(300M parameters spread evenly: {:.0f} ms per iteration)"),
    ],
    ("training-gpt3-175b-megatron.yaml", ""): [
        claim({"ranks": "1536"}, "compute (ms)", "Each GPU computes {:.1f} s", 1e-3),
        claim({"ranks": "1536"}, "bubble (ms)", "waits {:.2f} s in the interleaved", 1e-3),
        claim({"ranks": "1536"}, "tp comm (ms)", "and {:.1f} s in tensor-parallel", 1e-3),
    ],
    ("training-gpt3-175b-megatron.yaml", "workload.schedule=1f1b"): [
        claim({"ranks": "1536"}, "bubble (ms)", "bubble grows from 0.55 s to {:.2f} s", 1e-3),
        claim({"ranks": "1536"}, "iteration (ms)", "{:.2f} s per iteration)", 1e-3),
    ],
    ("hierarchical-vs-flat-dgx-h100.yaml", ""): [
        claim({"size (B)": "268435456", "algorithm": "ring"}, "time (us)", "mpisim gives {:.2f} ms", 1e-3),
        claim({"size (B)": "268435456", "algorithm": "hierarchical"}, "time (us)", "ms and {:.2f} ms:", 1e-3),
    ],
    ("training-70b-h100-layouts.yaml", ""): [
        claim({"workload.parallel.pp": "2", "workload.zero": "0"}, "memory per GPU (GB)", "take {:.0f} GB per GPU at 2"),
        claim({"workload.parallel.pp": "2", "workload.zero": "1"}, "memory per GPU (GB)", "data-parallel group ({:.0f} GB)"),
        claim({"workload.parallel.pp": "2", "workload.zero": "0"}, "bubble (ms)", "grows from {:.1f} s at 2", 1e-3),
        claim({"workload.parallel.pp": "8", "workload.zero": "0"}, "bubble (ms)", "to {:.1f} s at 8", 1e-3),
        claim({"workload.parallel.pp": "2", "workload.zero": "0"}, "iteration (ms)", "wins ({:.1f} s,", 1e-3),
        claim({"workload.parallel.pp": "2", "workload.zero": "0"}, "TFLOP/s per GPU", "s, {:.0f} TFLOP/s)"),
        claim({"workload.parallel.pp": "2", "workload.zero": "0"}, "tp comm (ms)", "allreduces ({:.1f} s)", 1e-3),
    ],
    ("training-70b-h100-layouts.yaml", "workload.schedule=interleaved"): [
        claim({"workload.parallel.pp": "2", "workload.zero": "0"}, "bubble (ms)", "from 1.3 s to {:.2f} s at 2", 1e-3),
        claim({"workload.parallel.pp": "8", "workload.zero": "0"}, "bubble (ms)", "from 3.2 s to {:.2f} s at 8", 1e-3),
        claim({"workload.parallel.pp": "2", "workload.zero": "0"}, "pp comm (ms)", "12 ms to {:.0f} ms at 2 stages"),
    ],
    ("training-7b-h100-layouts.yaml", ""): [
        claim({"workload.parallel.tp": "1", "workload.parallel.pp": "1"}, "memory per GPU (GB)", "ZeRO-1 ({:.0f} GB per GPU"),
        claim({"workload.parallel.tp": "8", "workload.parallel.pp": "1"}, "tp comm (ms)", "(tp 8: {:.1f} s of", 1e-3),
        claim({"workload.parallel.tp": "8", "workload.parallel.pp": "1"}, "iteration (ms)", "s of {:.1f} s)", 1e-3),
        claim({"workload.parallel.tp": "1", "workload.parallel.pp": "1"}, "iteration (ms)", "fastest ({:.2f} s,", 1e-3),
        claim({"workload.parallel.tp": "1", "workload.parallel.pp": "1"}, "TFLOP/s per GPU", "s, {:.0f} TFLOP/s per GPU)"),
    ],
    ("alltoall-oversubscribed.yaml", ""): [
        claim({"topology.inter.oversubscription": "1", "size (B)": "16777216"}, "time (us)", "predicts {:.2f} ms and", 1e-3),
        claim({"topology.inter.oversubscription": "2", "size (B)": "16777216"}, "time (us)", "ms and {:.2f} ms:", 1e-3),
    ],
    ("eager-vs-rendezvous.yaml", ""): [
        claim({"mpi.eager_limit_inter": "1 MiB", "size (B)": "4096"}, "latency (us)", "(4 KiB: {:.2f} us eager"),
        claim({"mpi.eager_limit_inter": "0 B", "size (B)": "4096"}, "latency (us)", "eager, {:.2f} us rendezvous);"),
        claim({"mpi.eager_limit_inter": "1 MiB", "size (B)": "8192"}, "latency (us)", "(8 KiB: {:.2f} us eager"),
        claim({"mpi.eager_limit_inter": "0 B", "size (B)": "8192"}, "latency (us)", "eager, {:.2f} us rendezvous; 1 MiB"),
        claim({"mpi.eager_limit_inter": "1 MiB", "size (B)": "1048576"}, "latency (us)", "1 MiB: {:.1f} us eager"),
        claim({"mpi.eager_limit_inter": "0 B", "size (B)": "1048576"}, "latency (us)", "eager, {:.2f} us rendezvous)."),
        claim({"mpi.eager_limit_inter": "12 KiB", "size (B)": "12288"}, "latency (us)", "{:.2f} us at 12288 B"),
        claim({"mpi.eager_limit_inter": "12 KiB", "size (B)": "12289"}, "latency (us)", "{:.2f} us at 12289 B"),
    ],
    ("overlap-compute-communication.yaml", "workload.args.overlap=false"): [
        claim({"ranks": "8"}, "time_s", "({:.0f} ms: the four syncs"),
    ],
    ("300m-ring.yaml", ""): [
        claim({"topology.nodes": "2"}, "time (us)", "{:.1f} s on 2 ranks", 1e-6),
        claim({"topology.nodes": "10"}, "time (us)", "= {:.2f} s on 10 ranks", 1e-6),
    ],
}


def printed_rows(text: str) -> list[dict[str, str]]:
    """The rows of every table in *text* as printed (header: cell text)."""
    rows, header = [], []
    for line in text.splitlines():
        if line.startswith("┃"):
            header = [cell.strip() for cell in line.strip("┃").split("┃")]
        elif line.startswith("│") and header:
            rows.append(dict(zip(header, (cell.strip() for cell in line.strip("│").split("│")), strict=True)))
    return rows


_SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def _in_column_unit(cell: str, column: str) -> float:
    """The number in *cell* in its column's unit: a time column in us prints a second or more as "1.2 s"."""
    number, *unit = cell.replace(",", "").split()
    value = float(number)
    header_unit = column.rsplit("(", 1)[-1].rstrip(")") if column.endswith(")") else ""
    if unit and unit[0] in _SECONDS and header_unit in _SECONDS:
        value *= _SECONDS[unit[0]] / _SECONDS[header_unit]
    return value


def check_claims(scenario: str, command: str, printed: str) -> None:
    """Every number :data:`CLAIMS` lists for this command reads in the scenario's comments as the run printed it."""
    comments = " ".join(line.lstrip("#").strip() for line in (ROOT / "scenarios" / scenario).read_text().splitlines()
                        if line.startswith("#"))
    rows = printed_rows(printed)
    for (name, marker), claims in CLAIMS.items():
        if name != scenario or not (marker in command if marker else "--set" not in command):
            continue
        for where, column, text, scale in claims:
            matching = [row for row in rows if all(row.get(key) == value for key, value in where.items())]
            assert len(matching) == 1, f"{scenario}: {len(matching)} printed rows match {where}"
            value = _in_column_unit(matching[0][column], column) * scale
            expected = text.format(value)
            assert expected in comments, f"{scenario}: the run prints {column} {matching[0][column]} for {where}, " \
                                         f"so its comments should say {expected!r}"


def test_every_claim_names_a_command_of_its_scenario():
    for (name, marker), _ in CLAIMS.items():
        assert any(n == name and (marker in c if marker else "--set" not in c) for n, c, _ in CASES), (name, marker)


def test_every_scenario_teaches_with_a_run_command():
    named = {name for name, _, _ in CASES}
    assert named == {path.name for path in (ROOT / "scenarios").glob("*.yaml")}


@pytest.mark.slow  # runs every command the shipped scenarios teach
@pytest.mark.parametrize(("scenario", "command", "code"), CASES, ids=[f"{n}:{c[12:70]}" for n, c, _ in CASES])
def test_the_command_runs_with_the_exit_code_it_states(scenario, command, code, tmp_path, monkeypatch):
    (tmp_path / "scenarios").symlink_to(ROOT / "scenarios")
    monkeypatch.chdir(tmp_path)
    argv = shlex.split(command)
    assert argv[0] == "mpisim"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        got = main(argv[1:])
    assert got == code, f"{command}\nexit {got}, expected {code}\n{err.getvalue()[-2000:]}"
    check_claims(scenario, command, out.getvalue())
