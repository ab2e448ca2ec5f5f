"""Reading the output of nccl-tests (``all_reduce_perf``, ``all_gather_perf``, ...).

nccl-tests prints its settings, one line per rank, and a table with an out-of-place and an
in-place half::

    # nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 ...
    #  Rank  0 Group  0 Pid  41230 on   node01 device  0 [0x07] NVIDIA A100-SXM4-80GB
    ...
    #                                              out-of-place                       in-place
    #       size         count      type   redop    root     time   algbw   busbw #wrong     time ...
    #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us) ...
        32768          8192     float     sum      -1    43.83    0.75    1.31      0    43.70 ...

The rank lines give the rank count and, from their host names, the node count: ``-g 8`` (one
process driving 8 GPUs) and an MPI launch of 8 processes print the same lines. Older versions
lack the ``root`` (and ``redop``) columns and call ``#wrong`` ``error``; the header is read for
the columns' positions, so both work. ``alltoall_perf`` and ``sendrecv_perf`` may print
``N/A`` for the in-place half.

The output does not name the binary, so the file's name or a command line inside it must
(``all_reduce_perf.txt``, or a line ``./build/all_reduce_perf -b 8 -e 128M -g 8``).

Sizes are already mpisim's (DESIGN.md): nccl-tests' size is the whole array for allgather and
reduce_scatter, and the buffer each rank holds for the others.
"""

from __future__ import annotations

import re
from pathlib import Path

from mpisim.calibrate.measurements import (
    Point,
    Series,
    check_points,
    damaged,
    plausible,
    positive_number,
    whole_bytes,
)
from mpisim.errors import ConfigError

#: nccl-tests binary -> mpisim collective.
BINARIES = {
    "all_reduce_perf": "allreduce",
    "all_gather_perf": "allgather",
    "reduce_scatter_perf": "reduce_scatter",
    "broadcast_perf": "bcast",
    "alltoall_perf": "alltoall",
    "sendrecv_perf": "sendrecv",
}
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device", re.IGNORECASE)
_SETTINGS = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)", re.IGNORECASE)
#: nccl-tests' ``type`` column -> numpy dtype names mpisim takes.
NCCL_TYPES = {"int8": "int8", "char": "int8", "uint8": "uint8", "int32": "int32", "int": "int32", "uint32": "uint32",
              "int64": "int64", "uint64": "uint64", "half": "float16", "float16": "float16", "float": "float32",
              "float32": "float32", "double": "float64", "float64": "float64", "bfloat16": "bfloat16"}
#: The largest run calibrate simulates: the fit runs the collective on every rank, many times.
MAX_RANKS = 4096
#: The two halves of the table.
PLACEMENTS = ("out-of-place", "in-place")


def looks_like(text: str) -> bool:
    """Return True if *text* holds nccl-tests' settings line or table header."""
    return any(_SETTINGS.match(line.strip()) or _is_header(line) for line in text.splitlines())


def _is_header(line: str) -> bool:
    fields = line.lstrip("#").split()
    return line.lstrip().startswith("#") and fields[:2] == ["size", "count"] and "time" in fields


def _binary(text: str, file: str) -> str:
    name = Path(file).name
    for binary in BINARIES:
        if binary in name:
            return binary
    for binary in BINARIES:
        if re.search(rf"\b{binary}\b", text):
            return binary
    raise ConfigError(
        "nccl-tests output does not name its binary: name the file after it (all_reduce_perf.txt) or keep the "
        f"command line in it (known: {', '.join(BINARIES)})", "", file)


def parse(text: str, file: str, placement: str = "out-of-place") -> Series:
    """Parse one nccl-tests run; the times of *placement* (``out-of-place`` or ``in-place``).

    Raises ConfigError naming *file* and the line for anything that is not nccl-tests output.
    """
    test = BINARIES[_binary(text, file)]
    lines = text.splitlines()
    hosts: dict[int, str] = {}
    settings: tuple[int, int] | None = None
    time_columns: list[int] = []
    type_column: int | None = None
    dtype = "float32"
    width = 0
    points: list[Point] = []
    for i, line in enumerate(lines):
        number, raw = i + 1, line.strip()
        if not raw:
            continue
        if raw.startswith("#"):
            if match := _RANK.match(raw):
                if len(match.group(1)) > 7 or len(hosts) >= MAX_RANKS:
                    raise damaged(file, number, f"more than {MAX_RANKS:,} '# Rank' lines: calibrate simulates the "
                                                f"collective on every rank of the run, at most {MAX_RANKS:,}")
                hosts[int(match.group(1))] = match.group(2)
            elif match := _SETTINGS.match(raw):
                settings = (int(match.group(1)[:7]), int(match.group(2)[:7]))
                if settings[0] * settings[1] > MAX_RANKS:
                    raise damaged(file, number, f"nThread x nGpus = {settings[0] * settings[1]:,} ranks; calibrate "
                                                f"simulates the collective on every rank of the run, at most {MAX_RANKS:,}")
            elif _is_header(raw):
                fields = raw.lstrip("#").split()
                width = len(fields)
                time_columns = [k for k, f in enumerate(fields) if f == "time"]
                type_column = fields.index("type") if "type" in fields else None
            continue
        if not width:
            continue  # before the table: the launcher's and NCCL's own lines
        fields = raw.split()
        if not re.fullmatch(r"[0-9]+", fields[0]):
            raise damaged(file, number, f"expected a row of the table (size count type ...), got {raw[:60]!r}")
        if len(fields) != width:
            raise damaged(file, number, f"expected {width} columns as the header says, got {len(fields)}: {raw[:60]!r}")
        half = PLACEMENTS.index(placement)
        if half >= len(time_columns):
            raise damaged(file, number, f"the table has no {placement} time column")
        value = fields[time_columns[half]]
        if value.upper() == "N/A":
            continue
        size = whole_bytes(file, number, fields[0])
        if type_column is not None:
            dtype = NCCL_TYPES.get(fields[type_column], dtype)
        seconds = positive_number(file, number, value, f"{placement} time (us)") * 1e-6
        points.append(Point(size, plausible(file, number, seconds, "time", f"{value} us"), number))
    if not width:
        raise ConfigError("no nccl-tests table found: expected a header '#  size  count  type ... time  algbw  busbw'",
                          "", file)
    series_points = check_points(file, points, "rows below the '# size count ...' header")
    ranks = len(hosts) or (settings[0] * settings[1] if settings else None)
    nodes = len(set(hosts.values())) if hosts else None
    notes = () if hosts else ("no '# Rank N ... on HOST' lines: the rank and node counts come from the command line",)
    return Series(file, "nccl-tests", test, "time_s", series_points, ranks=ranks, nodes=nodes, notes=notes, dtype=dtype)
