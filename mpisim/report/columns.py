"""One column table per row kind, shared by the terminal (``mpisim run``) and ``report.md``.

A result row is a flat dict (DESIGN.md's ``--json`` contract); which kind it is follows from its
keys (:func:`mpisim.report.tables.row_kinds`): a collective call, a point-to-point test, a
data-parallel or a hybrid-parallel training iteration. Each kind has one table here, in the order
both views show its columns; each column names its row key once and how each view writes it:

* the **terminal** writes numbers in the fixed units of the tools people compare against
  (nccl-tests: size in bytes, time in us, bandwidths in GB/s; OSU: latency in us, MB/s), so a
  column of numbers lines up and can be pasted next to theirs;
* **Markdown** (the report) writes each value in the unit that suits it (``43.65 us``, ``32 KiB``).

A view that has no rendering for a column leaves it out: the terminal names the collective and
its ranks in the table's title, the report in columns. Either view shows a column only when some
row has its key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mpisim.report.tables import fmt_bandwidth, fmt_bytes, fmt_num, fmt_percent, fmt_time

__all__ = ["COLLECTIVE", "HYBRID", "P2P", "TABLES", "TRAINING", "Column", "cell", "view"]

Formatter = Callable[[Any], str]


@dataclass(frozen=True, slots=True)
class Column:
    """A row key and how each view writes it: (header, formatter), or None where a view omits it."""

    key: str
    terminal: tuple[str, Formatter] | None
    markdown: tuple[str, Formatter] | None


# --- terminal cells: plain numbers in fixed units ------------------------------------------------


def _real(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def cell(value: Any) -> str:
    """A terminal cell for a raw value: ``""`` for None, ``true``/``false``, floats to 6 digits."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _us(x: Any) -> str:
    """Microseconds for a "(us)" column; a second or more carries its own unit ("10.84 s"), not 10839227.09."""
    if _real(x) and abs(x) >= 1.0:
        return fmt_time(x)
    return f"{x * 1e6:.2f}" if _real(x) else cell(x)


def _ms(x: Any) -> str:
    return f"{x * 1e3:.3f}" if _real(x) else cell(x)


def _fixed(x: Any) -> str:
    return f"{x:.2f}" if _real(x) else cell(x)


def _mbps(x: Any) -> str:
    return f"{x / 1e6:.2f}" if _real(x) else cell(x)


def _percent(x: Any) -> str:
    return f"{x * 100:.1f}" if _real(x) else cell(x)


def _ok(x: Any) -> str:
    return "n/a" if x is None else ("ok" if x is True else "WRONG")


# --- Markdown cells: each value in the unit that suits it ------------------------------------------


def _gbps(x: Any) -> str:
    return fmt_num(x) if _real(x) else "n/a"


def _text(x: Any) -> str:
    return "" if x is None else str(x)


def _yes(x: Any) -> str:
    return "n/a" if x is None else ("yes" if x is True else "NO")


def _tokens(missing: Formatter) -> Formatter:
    return lambda x: f"{x:,.0f}" if isinstance(x, int | float) else missing(x)


def _both(key: str, terminal: tuple[str, Formatter], markdown: tuple[str, Formatter]) -> Column:
    return Column(key, terminal, markdown)


def _terminal(key: str, header: str, fmt: Formatter = cell) -> Column:
    return Column(key, (header, fmt), None)


def _markdown(key: str, header: str, fmt: Formatter = str) -> Column:
    return Column(key, None, (header, fmt))


def _time(key: str, terminal: str, markdown: str, unit: Formatter) -> Column:
    return Column(key, (terminal, unit), (markdown, fmt_time))


# nccl-tests' columns (size and count as it prints them, time in us, bandwidths in GB/s).
COLLECTIVE: list[Column] = [
    # The report leads with what ran (collective, algorithm, ranks); the terminal, as nccl-tests does,
    # with the size, so "algorithm" has one column per view, each in its place.
    _markdown("collective", "collective"),
    _markdown("algorithm", "algorithm"),
    _markdown("ranks", "ranks"),
    _both("bytes", ("size (B)", cell), ("size", fmt_bytes)),
    _both("count", ("count", cell), ("count", str)),
    _both("dtype", ("type", cell), ("type", str)),
    _terminal("algorithm", "algorithm"),
    _terminal("protocol", "protocol"),  # NCCL-style rows only (a column appears when a row has it)
    _terminal("channels", "channels"),
    _terminal("chunk_bytes", "chunk (B)"),
    _time("time_s", "time (us)", "time", _us),
    _both("algbw_GBps", ("algbw (GB/s)", _fixed), ("algbw (GB/s)", _gbps)),
    _both("busbw_GBps", ("busbw (GB/s)", _fixed), ("busbw (GB/s)", _gbps)),
    _both("verified", ("verified", _ok), ("verified", _yes)),
    # workload.values: random only (mpisim.workloads.verify): the algorithm's own bits, the error and its bound.
    _terminal("verified_order", "own order", _ok),
    _terminal("max_rel_error", "rel. error", lambda x: f"{x:.2e}" if isinstance(x, float) else cell(x)),
    _terminal("error_bound_ratio", "of bound", lambda x: f"{x:.3f}" if isinstance(x, float) else cell(x)),
    _terminal("ranks_agree", "ranks agree"),
    _terminal("result_digest", "result digest"),
    _terminal("model_time_s", "formula (us)", _us),
]
# OSU micro-benchmarks' columns.
P2P: list[Column] = [
    _markdown("test", "test"),
    _both("bytes", ("size (B)", cell), ("size", fmt_bytes)),
    _both("protocol", ("protocol", cell), ("protocol", str)),
    _time("latency_s", "latency (us)", "latency", _us),
    _both("bandwidth_Bps", ("bandwidth (MB/s)", _mbps), ("bandwidth", fmt_bandwidth)),
]
TRAINING: list[Column] = [
    _both("ranks", ("ranks", cell), ("ranks", str)),
    _time("iteration_time_s", "iteration (ms)", "iteration", _ms),
    _time("compute_s", "compute (ms)", "compute", _ms),
    _time("comm_time_s", "comm (ms)", "communication", _ms),
    _time("exposed_comm_s", "exposed comm (ms)", "exposed communication", _ms),
    _both("scaling_efficiency", ("scaling efficiency (%)", _percent), ("scaling efficiency", fmt_percent)),
    _markdown("algorithm", "algorithm", _text),
    _markdown("buckets", "buckets"),
    _markdown("verified", "verified", _yes),
]
# Hybrid-parallel training rows (a model split tp x pp x dp): where the iteration's time goes.
HYBRID: list[Column] = [
    _terminal("ranks", "ranks"),
    *(_both(key, (key, cell), (key, str)) for key in ("tp", "pp", "dp", "ep", "cp")),
    _both("micro_batches", ("micro-batches", cell), ("micro-batches", str)),
    _markdown("schedule", "schedule", _text),
    _markdown("zero", "zero"),
    _time("iteration_time_s", "iteration (ms)", "iteration", _ms),
    _both("tokens_per_s", ("tokens/s", _tokens(cell)), ("tokens/s", _tokens(lambda x: "n/a"))),
    _both("tflops_per_gpu", ("TFLOP/s per GPU", lambda x: f"{x:.1f}" if isinstance(x, int | float) else cell(x)),
          ("TFLOP/s per GPU", fmt_num)),
    _both("mfu", ("MFU (%)", _percent), ("MFU", fmt_percent)),
    _time("compute_s", "compute (ms)", "compute", _ms),
    _time("bubble_s", "bubble (ms)", "bubble", _ms),
    _time("tp_comm_s", "tp comm (ms)", "tp comm", _ms),
    _time("pp_comm_s", "pp comm (ms)", "pp comm", _ms),
    _time("ep_comm_s", "ep comm (ms)", "ep comm", _ms),
    _time("cp_comm_s", "cp comm (ms)", "cp comm", _ms),
    _time("dp_comm_s", "dp comm (ms)", "dp comm", _ms),
    _time("exposed_comm_s", "exposed comm (ms)", "exposed comm", _ms),
    _both("memory_per_gpu_bytes", ("memory per GPU (GB)", lambda x: f"{x / 1e9:.1f}" if isinstance(x, int) else cell(x)),
          ("memory per GPU", fmt_bytes)),
    _both("fits", ("fits", cell), ("fits", lambda x: "n/a" if x is None else ("yes" if x else "**NO**"))),
    _both("compute_model", ("compute model", cell), ("compute model", _text)),
    _both("time_to_train_s", ("time to train (days)", lambda x: f"{x / 86400:.1f}" if isinstance(x, float) else cell(x)),
          ("time to train", lambda x: f"{x / 86400:.1f} days" if isinstance(x, float) else "n/a")),
    _both("gpu_hours", ("GPU-hours", lambda x: f"{x:,.0f}" if isinstance(x, float) else cell(x)),
          ("GPU-hours", lambda x: f"{x:,.0f}" if isinstance(x, float) else "n/a")),
    _both("cost", ("cost", lambda x: f"{x:,.0f}" if isinstance(x, float) else cell(x)),
          ("cost", lambda x: f"{x:,.0f}" if isinstance(x, float) else "n/a")),
    _both("price_per_gpu_hour", ("price per GPU-hour", lambda x: f"{x:,.2f}" if isinstance(x, float) else cell(x)),
          ("price per GPU-hour", lambda x: f"{x:,.2f}" if isinstance(x, float) else "n/a")),
    _both("energy_kwh", ("energy (MWh)", lambda x: f"{x / 1000:,.1f}" if isinstance(x, float) else cell(x)),
          ("energy", lambda x: f"{x / 1000:,.1f} MWh" if isinstance(x, float) else "n/a")),
]

#: The tables by row kind (the kinds of :func:`mpisim.report.tables.row_kinds`).
TABLES: dict[str, list[Column]] = {"collective": COLLECTIVE, "p2p": P2P, "training": TRAINING, "hybrid": HYBRID}


def view(kind: str, which: str) -> list[tuple[str, str, Formatter]]:
    """The (header, row key, formatter) columns of row kind *kind* in view *which* (terminal or markdown)."""
    out = []
    for column in TABLES[kind]:
        shown = getattr(column, which)
        if shown is not None:
            out.append((shown[0], column.key, shown[1]))
    return out
