"""OSU and nccl-tests output: every format variant read, damaged input named by file and line."""

from __future__ import annotations

import pytest

from mpisim.calibrate import nccl, osu
from mpisim.calibrate.run import read_series
from mpisim.errors import ConfigError

OSU_V5 = """# OSU MPI Latency Test v5.6.3
# Size          Latency (us)
0                       1.62
1                       1.60
4096                    3.72
"""
OSU_V7_FULL = """[launcher] starting 2 processes
# OSU MPI Allreduce Latency Test v7.3
# Datatype: MPI_FLOAT.
# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations
4                       3.35              3.12              3.61        1000
8                       3.40              3.20              3.70        1000
"""
MBW_MR = """# OSU MPI Multiple Bandwidth / Message Rate Test v5.7.1
# [ pairs: 2 ] [ window size: 64 ]
# Size                  MB/s        Messages/s
8388608             23477.00            2798.58
"""


def test_osu_latency_v5_in_si_units():
    series = osu.parse(OSU_V5, "lat.txt")
    assert (series.test, series.metric) == ("latency", "latency_s")
    assert [(p.nbytes, p.value, p.line) for p in series.points] == [(0, 1.62e-6, 3), (1, 1.6e-6, 4), (4096, 3.72e-6, 5)]


def test_osu_v7_full_columns_take_the_average():
    series = osu.parse(OSU_V7_FULL, "ar.txt")
    assert series.test == "allreduce" and [p.value for p in series.points] == pytest.approx([3.35e-6, 3.4e-6], rel=1e-12)


def test_osu_mbw_mr_reads_pairs_and_mb_per_s():
    series = osu.parse(MBW_MR, "mbw.txt")
    assert (series.test, series.pairs, series.points[0].value) == ("mbw_mr", 2, 23477e6)


@pytest.mark.parametrize(("title", "test"), [
    ("OSU MPI Bi-Directional Bandwidth Test v5.9", "bibw"), ("OSU MPI Bandwidth Test v7.0", "bandwidth"),
    ("OSU MPI Broadcast Latency Test v5.6.3", "bcast"), ("OSU MPI Allgather Latency Test v7.1", "allgather"),
    ("OSU MPI All-to-All Personalized Exchange Latency Test v5.6.3", "alltoall"),
    ("OSU MPI-CUDA Latency Test v5.6.3", "latency"),
])
def test_osu_titles(title, test):
    column = "Bandwidth (MB/s)" if "Bandwidth" in title else "Avg Latency(us)"
    series = osu.parse(f"# {title}\n# Size    {column}\n16    2.5\n", "f.txt", ranks=4)
    assert series.test == test


def test_osu_per_rank_sizes_become_mpisim_sizes():
    # osu_allgather prints what each rank contributes; mpisim's allgather size is the whole array.
    text = "# OSU MPI Allgather Latency Test v7.1\n# Size       Avg Latency(us)\n1024    10.0\n"
    assert osu.parse(text, "ag.txt", ranks=8).points[0].nbytes == 8192


@pytest.mark.parametrize(("text", "message"), [
    (OSU_V5.replace("1.60", "1.6O"), "lat.txt: line 4: expected a number for latency, got '1.6O'"),
    (OSU_V5.replace("4096                    3.72", "4096"), "lat.txt: line 5: expected 2 columns as the header says, got 1"),
    (OSU_V5.replace("1                       1.60", "0                       1.60"),
     "lat.txt: line 4: size 0 B was already measured on line 3"),
    (OSU_V5.replace("1.62", "-1.62"), "lat.txt: line 3: latency must be positive and finite, got '-1.62'"),
    (OSU_V5 + "Segmentation fault\n", "lat.txt: line 6: expected a message size in bytes (a whole number), got 'Segmentation'"),
    ("# OSU MPI Non-blocking Allreduce Latency Test v5.6\n", "lat.txt: line 1: OSU benchmark"),
    ("hello\n", "lat.txt: neither OSU output"),
])
def test_damaged_osu_input_names_file_and_line(tmp_path, text, message):
    path = tmp_path / "lat.txt"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        read_series(str(path), 2)
    assert str(info.value).replace(str(tmp_path) + "/", "").startswith(message)
    assert "\n" not in str(info.value)


NCCL_MPI = """# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  10 on  node-a device  0 [0x07] NVIDIA A100
#  Rank  1 Group  0 Pid  11 on  node-a device  1 [0x0f] NVIDIA A100
#  Rank  2 Group  0 Pid  20 on  node-b device  0 [0x07] NVIDIA A100
#  Rank  3 Group  0 Pid  21 on  node-b device  1 [0x0f] NVIDIA A100
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    20.10    0.00    0.00      0    19.90    0.00    0.00      0
         128            32     float     sum      -1    21.00    0.01    0.01      0    20.80    0.01    0.01      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.00
"""
NCCL_OLD = """# nThread 1 nGpus 4 minBytes 8 maxBytes 64 step: 8(factor) warmup iters: 5 iters: 20 validation: 1
#   Rank  0 Pid  4242 on    box device  0 [0x00] Tesla V100
#   Rank  1 Pid  4242 on    box device  1 [0x00] Tesla V100
#   Rank  2 Pid  4242 on    box device  2 [0x00] Tesla V100
#   Rank  3 Pid  4242 on    box device  3 [0x00] Tesla V100
#       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)             (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             8    char    12.00    0.00    0.00  0e+00      N/A     N/A     N/A    N/A
          64            64    char    12.50    0.01    0.01  0e+00      N/A     N/A     N/A    N/A
"""


def test_nccl_mpi_launch_counts_ranks_and_hosts():
    series = nccl.parse(NCCL_MPI, "runs/all_reduce_perf.log")
    assert (series.test, series.ranks, series.nodes) == ("allreduce", 4, 2)
    assert [(p.nbytes, p.line) for p in series.points] == [(8, 12), (128, 13)]
    assert [p.value for p in series.points] == pytest.approx([20.1e-6, 21e-6], rel=1e-12)
    in_place = nccl.parse(NCCL_MPI, "runs/all_reduce_perf.log", "in-place")
    assert [p.value for p in in_place.points] == pytest.approx([19.9e-6, 20.8e-6], rel=1e-12)


def test_nccl_old_format_without_root_and_in_place_na():
    series = nccl.parse("$ ./build/all_gather_perf -b 8 -e 64 -f 8 -g 4\n" + NCCL_OLD, "out.txt")
    assert (series.test, series.ranks, series.nodes, len(series.points)) == ("allgather", 4, 1, 2)


def test_nccl_in_place_na_only_is_no_measurement():
    with pytest.raises(ConfigError, match="no measurements found"):
        nccl.parse(NCCL_OLD, "alltoall_perf.txt", "in-place")


@pytest.mark.parametrize(("name", "text", "message"), [
    ("results.txt", NCCL_MPI, "results.txt: nccl-tests output does not name its binary"),
    ("all_reduce_perf.txt", NCCL_MPI.replace("21.00", "21.0.0"), "all_reduce_perf.txt: line 13: expected a number"),
    ("all_reduce_perf.txt", NCCL_MPI.replace("         128            32     float", "        128   float"),
     "all_reduce_perf.txt: line 13: expected 13 columns as the header says, got 12"),
    ("all_reduce_perf.txt", NCCL_MPI.replace("         128            32", "NCCL WARN 32"),
     "all_reduce_perf.txt: line 13: expected a row of the table"),
])
def test_damaged_nccl_input_names_file_and_line(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        read_series(str(path), 4)
    assert str(info.value).replace(str(tmp_path) + "/", "").startswith(message)
