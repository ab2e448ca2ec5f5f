"""Reading the output of the OSU micro-benchmarks (versions 5 to 7, with or without ``-f``).

Every OSU benchmark prints a title, a few ``#`` comment lines and a table::

    # OSU MPI Latency Test v7.3            # the title names the benchmark
    # Datatype: MPI_CHAR.                  # v7 adds comment lines like this one
    # Size       Avg Latency(us)           # the header; -f adds Min, Max, Iterations columns
    0                       1.62
    1                       1.61

The title says which benchmark it is (``Bi-Directional Bandwidth`` is ``osu_bibw``), the header
says which column holds the figure (the average latency, or the bandwidth in MB/s = 1e6 B/s),
and ``osu_mbw_mr`` adds ``# [ pairs: 2 ] [ window size: 64 ]``. Lines before the title (a
launcher's banner) are skipped; after it, every line is a comment, blank, or a row of the
table, and anything else is an error naming the file and line.

Sizes: ``osu_allgather`` prints what each rank contributes and ``osu_alltoall`` what each rank
sends to each other rank; mpisim's sizes are the whole array and the buffer a rank holds, so
both are multiplied by the rank count, which :func:`parse` therefore needs.
"""

from __future__ import annotations

import re

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

#: Title words -> (test, metric). Checked in order: "Bi-Directional Bandwidth" before "Bandwidth".
TITLES = (
    ("bi-directional bandwidth", "bibw", "bandwidth_Bps"),
    ("multiple bandwidth", "mbw_mr", "bandwidth_Bps"),
    ("bandwidth", "bandwidth", "bandwidth_Bps"),
    ("allreduce latency", "allreduce", "time_s"),
    ("allgather latency", "allgather", "time_s"),
    ("all-to-all", "alltoall", "time_s"),
    ("alltoall latency", "alltoall", "time_s"),
    ("broadcast latency", "bcast", "time_s"),
    ("bcast latency", "bcast", "time_s"),
    ("latency", "latency", "latency_s"),
)
_TITLE = re.compile(r"^#\s*OSU\s+MPI\S*\s+(?P<name>.+?)\s+Test(?:\s+v?(?P<version>[\d.]+))?\s*$", re.IGNORECASE)
_PAIRS = re.compile(r"pairs:\s*(\d+)", re.IGNORECASE)
_DATATYPE = re.compile(r"^Datatype:\s*(MPI_\w+)", re.IGNORECASE)
#: OSU 7's ``-T`` datatypes; OSU 5 and 6 print no datatype line and use MPI_FLOAT for reductions.
DATATYPES = {"MPI_CHAR": "uint8", "MPI_INT": "int32", "MPI_FLOAT": "float32", "MPI_DOUBLE": "float64"}
KNOWN = "osu_latency, osu_bw, osu_bibw, osu_mbw_mr, osu_allreduce, osu_bcast, osu_allgather, osu_alltoall"


def looks_like(text: str) -> bool:
    """Return True if *text* holds an OSU benchmark's title line."""
    return any(_TITLE.match(line.strip()) for line in text.splitlines())


def _benchmark(file: str, line: int, name: str) -> tuple[str, str]:
    lowered = name.lower()
    if "non-blocking" in lowered:  # overlap benchmarks: their table is not a latency curve
        raise damaged(file, line, f"OSU benchmark {name!r} is not one calibrate reads; known: {KNOWN}")
    for words, test, metric in TITLES:
        if words in lowered:
            return test, metric
    raise damaged(file, line, f"OSU benchmark {name!r} is not one calibrate reads; known: {KNOWN}")


#: The units a header may give its figure in, -> SI factor. OSU prints us and MB/s; a table
#: converted by hand may say ms or GB/s, and must then be read as it says, not as OSU's default.
UNITS = {"latency": {"us": 1e-6, "usec": 1e-6, "ms": 1e-3, "ns": 1e-9, "s": 1.0, "sec": 1.0},
         "bandwidth": {"mb/s": 1e6, "gb/s": 1e9, "kb/s": 1e3, "b/s": 1.0}}
_UNIT = re.compile(r"\(([^)]*)\)")


def _unit_factor(file: str, line: int, column: str, metric: str) -> float:
    """The SI factor of the header *column*: ``Avg Latency(ms)`` -> 1e-3, no unit -> OSU's (us, MB/s)."""
    kind = "bandwidth" if metric == "bandwidth_Bps" else "latency"
    found = _UNIT.search(column)
    if found is None:
        if kind == "bandwidth" and "mb/s" in column.lower():
            return 1e6
        return UNITS[kind]["us" if kind == "latency" else "mb/s"]
    unit = found.group(1).strip().lower()
    if unit not in UNITS[kind]:
        raise damaged(file, line, f"header column {column!r}: unit {found.group(1)!r} is not one calibrate reads; "
                                  f"known: {', '.join(UNITS[kind])}")
    return UNITS[kind][unit]


def _value_column(file: str, line: int, columns: list[str], metric: str) -> int:
    """Return the index of the column holding the figure: average latency, or MB/s."""
    lowered = [c.lower() for c in columns]
    if metric == "bandwidth_Bps":
        wanted = [i for i, c in enumerate(lowered) if re.search(r"\b[kmg]?b/s", c)]
    else:
        wanted = [i for i, c in enumerate(lowered) if "avg" in c and "latency" in c]
        wanted = wanted or [i for i, c in enumerate(lowered) if "latency" in c and "(" in c]
    if not wanted or lowered[0] != "size":
        unit = "MB/s" if metric == "bandwidth_Bps" else "Latency (us)"
        raise damaged(file, line, f"expected a header '# Size ... {unit}', got '# {'  '.join(columns)}'")
    return wanted[0]


def parse(text: str, file: str, ranks: int | None = None) -> Series:
    """Parse one OSU benchmark's output. *ranks*: the run's rank count (collectives' sizes).

    Raises ConfigError naming *file* and the line for anything that is not OSU output.
    """
    lines = text.splitlines()
    title_at = next((i for i, raw in enumerate(lines) if _TITLE.match(raw.strip())), None)
    if title_at is None:
        raise ConfigError(f"not OSU output: no title line such as '# OSU MPI Latency Test v7.3' (known: {KNOWN})",
                          "", file)
    title = _TITLE.match(lines[title_at].strip())
    assert title is not None
    test, metric = _benchmark(file, title_at + 1, title.group("name"))
    column: int | None = None
    factor = 1.0
    width = 0
    pairs = 1
    dtype = "float32" if test == "allreduce" else "uint8"
    points: list[Point] = []
    for i in range(title_at + 1, len(lines)):
        number, raw = i + 1, lines[i].strip()
        if not raw:
            continue
        if raw.startswith("#"):
            body = raw.lstrip("#").strip()
            if body.lower().startswith("size"):
                columns = re.split(r"\s{2,}|\t", body)
                column, width = _value_column(file, number, columns, metric), len(columns)
                factor = _unit_factor(file, number, columns[column], metric)
            elif match := _PAIRS.search(body):
                pairs = int(match.group(1))
            elif match := _DATATYPE.match(body):
                if match.group(1).upper() not in DATATYPES:
                    raise damaged(file, number, f"datatype {match.group(1)} is not one calibrate reads; "
                                                f"known: {', '.join(DATATYPES)}")
                dtype = DATATYPES[match.group(1).upper()]
            elif _TITLE.match(raw):
                raise damaged(file, number, "a second OSU title: give each benchmark's output its own file")
            continue
        if column is None:
            raise damaged(file, number, f"a table row before the '# Size ...' header: {raw[:60]!r}")
        fields = raw.split()
        if len(fields) != width:
            raise damaged(file, number, f"expected {width} columns as the header says, got {len(fields)}: {raw[:60]!r}")
        size = whole_bytes(file, number, fields[0])
        value = positive_number(file, number, fields[column], "latency" if metric != "bandwidth_Bps" else "bandwidth")
        si = plausible(file, number, value * factor, "bandwidth" if metric == "bandwidth_Bps" else "time",
                       fields[column])
        points.append(Point(_mpisim_size(test, size, ranks, file, number), si, number))
    return Series(file, "osu", test, metric, check_points(file, points, "rows of '# Size ...' below the title"),
                  pairs=pairs, dtype=dtype)


def _mpisim_size(test: str, size: int, ranks: int | None, file: str, line: int) -> int:
    if test not in ("allgather", "alltoall"):
        return size
    if ranks is None:
        raise damaged(file, line, f"osu_{test} sizes are per rank: the rank count is needed (--nodes, --ranks-per-node)")
    return size * ranks
