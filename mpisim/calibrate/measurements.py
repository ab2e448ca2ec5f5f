"""What a benchmark file measured: series of (message size, value) points, SI units.

A :class:`Series` is one curve from one file: the points of ``osu_latency``, or the
out-of-place times of ``all_reduce_perf``. Parsers (:mod:`~mpisim.calibrate.osu`,
:mod:`~mpisim.calibrate.nccl`) produce them; the model (:mod:`~mpisim.calibrate.model`) turns
each into the mpisim workload that measures the same thing; the fit compares the two.

Sizes follow the tool that printed them, and are converted here to mpisim's convention
(DESIGN.md: for allgather and reduce_scatter the size is the whole array, for alltoall and the
others the buffer each rank holds), so ``nbytes`` is always what the mpisim workload takes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mpisim.errors import ConfigError

#: What a series' values are: seconds per operation (latency, collective time) or bytes/s.
METRICS = ("latency_s", "bandwidth_Bps", "time_s")


@dataclass(frozen=True)
class Point:
    """One measured point: the mpisim size in bytes, the value (seconds or bytes/s), its line."""

    nbytes: int
    value: float
    line: int


@dataclass(frozen=True)
class Series:
    """One measured curve.

    tool
        ``osu`` or ``nccl-tests``.
    test
        p2p: ``latency`` | ``bandwidth`` | ``bibw`` | ``mbw_mr``; collectives: ``allreduce`` |
        ``bcast`` | ``allgather`` | ``alltoall`` | ``reduce_scatter`` | ``sendrecv``.
    metric
        ``latency_s`` (p2p latency), ``bandwidth_Bps`` (p2p bandwidth) or ``time_s`` (collective).
    ranks, nodes
        What the file says about the run (nccl-tests lists its ranks and hosts); None if it
        does not say, and the caller's ``--nodes`` / ``--ranks-per-node`` apply.
    pairs
        ``osu_mbw_mr``: sender/receiver pairs.
    dtype
        Collectives: the element type the benchmark used (OSU's ``# Datatype:`` line, or its
        default; nccl-tests' ``type`` column).
    """

    file: str
    tool: str
    test: str
    metric: str
    points: tuple[Point, ...]
    ranks: int | None = None
    nodes: int | None = None
    pairs: int = 1
    notes: tuple[str, ...] = field(default=())
    #: Element type of collectives (numpy name): the MPI library picks algorithms by count.
    dtype: str = "float32"

    @property
    def label(self) -> str:
        """How reports name the series: ``osu_latency.txt (latency)``, without the file's folder."""
        return f"{Path(self.file).name} ({self.test})"


def damaged(file: str, line: int, message: str) -> ConfigError:
    """Return the one-line error for a bad line of a benchmark file: ``file: line N: message``."""
    return ConfigError(message, f"line {line}", file)


def check_points(file: str, points: list[Point], what: str) -> tuple[Point, ...]:
    """Reject a file without points and sizes listed twice; return the points sorted by size."""
    if not points:
        raise ConfigError(f"no measurements found: expected {what}", "", file)
    seen: dict[int, int] = {}
    for point in points:
        if point.nbytes in seen:
            raise damaged(file, point.line, f"size {point.nbytes} B was already measured on line {seen[point.nbytes]}")
        seen[point.nbytes] = point.line
    return tuple(sorted(points, key=lambda p: p.nbytes))


def positive_number(file: str, line: int, text: str, what: str) -> float:
    """Parse a positive finite number from a benchmark column, or fail naming the line."""
    try:
        value = float(text)
    except ValueError:
        raise damaged(file, line, f"expected a number for {what}, got {text!r}") from None
    if not (value > 0 and value < float("inf")):
        raise damaged(file, line, f"{what} must be positive and finite, got {text!r}")
    return value


def whole_bytes(file: str, line: int, text: str) -> int:
    """Parse a message size column (a whole number of bytes)."""
    if not text.isdigit():
        raise damaged(file, line, f"expected a message size in bytes (a whole number), got {text!r}")
    return int(text)
