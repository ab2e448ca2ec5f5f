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

import math
import os
import re
import stat
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


#: Bounds on what one benchmark file may hold. A benchmark prints a few dozen sizes (OSU: 0 B to
#: 4 MiB in powers of two; nccl-tests -f 2 from 8 B to 8 GiB); every distinct size costs the fit
#: one simulation per parameter it tries, so a file of 10^6 sizes would run for days.
MAX_FILE_BYTES = 8_000_000
MAX_POINTS = 2_000
MAX_SIZE_DIGITS = 16  # 10^16 B = 10 PB, far beyond any message
#: What a measurement can physically be, in SI: no MPI call completes in under a nanosecond nor
#: takes a day; no link moves under 1 B/s or over 1 PB/s. Outside this the file is damaged or in
#: other units than its header says, and a fit to it would be garbage presented as a preset.
PLAUSIBLE = {"time": (1e-9, 86_400.0), "bandwidth": (1.0, 1e15)}
_DIGITS = re.compile(r"[0-9]+")
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def read_text(path: str) -> str:
    """Read a benchmark file: a regular UTF-8 file (a BOM is allowed) of at most MAX_FILE_BYTES."""
    try:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise ConfigError("is a directory, not a benchmark's output", "", path)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError("is not a regular file (expected OSU or nccl-tests output saved to a file)", "", path)
        if info.st_size > MAX_FILE_BYTES:
            raise ConfigError(f"is {info.st_size:,} bytes; a benchmark's output file may have at most "
                              f"{MAX_FILE_BYTES:,}", "", path)
        with open(path, encoding="utf-8-sig") as handle:  # Windows editors start a file with a BOM
            return handle.read(MAX_FILE_BYTES + 1)[:MAX_FILE_BYTES]
    except FileNotFoundError:
        raise ConfigError("no such file", "", path) from None
    except UnicodeDecodeError:
        raise ConfigError("not a text file (expected OSU or nccl-tests output)", "", path) from None
    except OSError as exc:
        raise ConfigError(f"cannot read it: {exc.strerror or exc}", "", path) from None


def damaged(file: str, line: int, message: str) -> ConfigError:
    """Return the one-line error for a bad line of a benchmark file: ``file: line N: message``."""
    return ConfigError(message, f"line {line}", file)


def check_points(file: str, points: list[Point], what: str) -> tuple[Point, ...]:
    """Reject a file without points and sizes listed twice; return the points sorted by size."""
    if not points:
        raise ConfigError(f"no measurements found: expected {what}", "", file)
    if len(points) > MAX_POINTS:
        raise damaged(file, points[MAX_POINTS].line,
                      f"more than {MAX_POINTS:,} measured sizes ({len(points):,}); the fit simulates every size for "
                      "every parameter it tries, which would take hours: give one benchmark run per file")
    seen: dict[int, int] = {}
    for point in points:
        if point.nbytes in seen:
            raise damaged(file, point.line, f"size {point.nbytes} B was already measured on line {seen[point.nbytes]}")
        seen[point.nbytes] = point.line
    return tuple(sorted(points, key=lambda p: p.nbytes))


def positive_number(file: str, line: int, text: str, what: str) -> float:
    """Parse a positive finite number from a benchmark column, or fail naming the line."""
    if len(text) > 40 or not _NUMBER.fullmatch(text):  # ASCII only: float() also reads '١٢' and '1_0'
        raise damaged(file, line, f"expected a number for {what}, got {text[:40]!r}")
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise damaged(file, line, f"{what} must be positive and finite, got {text!r}")
    return value


def plausible(file: str, line: int, value: float, kind: str, shown: str) -> float:
    """Refuse an SI *value* (``kind`` time or bandwidth) no machine can measure; *shown* is the file's text."""
    low, high = PLAUSIBLE[kind]
    if not low <= value <= high:
        unit = "s" if kind == "time" else "B/s"
        raise damaged(file, line, f"{shown} is not a plausible {kind} (expected {low:g} to {high:g} {unit}); "
                                  "is the file damaged, or in other units than its header says?")
    return value


def whole_bytes(file: str, line: int, text: str) -> int:
    """Parse a message size column (a whole number of bytes)."""
    if not _DIGITS.fullmatch(text):  # ASCII digits only: str.isdigit() is also True for '²' and '①'
        raise damaged(file, line, f"expected a message size in bytes (a whole number), got {text[:40]!r}")
    if len(text.lstrip("0")) > MAX_SIZE_DIGITS:
        raise damaged(file, line, f"a message size of {len(text)} digits (at most {MAX_SIZE_DIGITS})")
    return int(text)
