"""The p2p workload: OSU latency, bandwidth and bibw against the protocol formulas."""

from __future__ import annotations

import pytest

from mpisim.engine.units import si_numbers
from mpisim.errors import ConfigError
from mpisim.workloads import p2p
from mpisim.workloads.p2p import parse
from tests.workloads import context

ALPHA, BW = 2e-6, 1e9
BETA = 1 / BW
H = 64  # rendezvous control message bytes (MpiConfig default)
LIMIT = 64 * 1024


@pytest.mark.parametrize(("raw", "path", "text"), [
    ({"test": "latnecy", "sizes": ["8 B"]}, "test", "known: latency, bandwidth, bibw"),
    ({"test": ["latency", "bw"], "sizes": ["8 B"]}, "test[1]", "unknown test 'bw'"),
    ({"test": "latency"}, "sizes", "required"),
    ({"test": "latency", "sizes": ["8 B", "1 MiBs"]}, "sizes[1]", "not a size"),
    ({"test": "latency", "sizes": ["8 B"], "pair": [1, 1]}, "pair", "must differ"),
    ({"test": "latency", "sizes": ["8 B"], "pair": [0, -1]}, "pair[1]", "negative"),
    ({"test": "latency", "sizes": ["8 B"], "windows": 8}, "windows", "allowed keys: kind, test, sizes"),
])
def test_parse_errors_name_the_field(raw, path, text):
    with pytest.raises(ConfigError) as info:
        parse(raw)
    assert info.value.path == path
    assert text in info.value.message


@pytest.mark.parametrize("raw", [
    {"test": "latency", "sizes": ["0 B", "1 KiB"]},
    {"test": ["bandwidth", "bibw"], "sizes": {"min": "1 B", "max": "1 MiB", "factor": 4}, "window": 16,
     "pair": [0, 3], "iterations": 2, "warmup": 0},
])
def test_dump_round_trips(raw):
    params = parse(raw)
    with si_numbers():  # dump writes SI numbers
        assert parse(p2p.dump(params)) == params


def test_eager_latency_is_alpha_plus_n_beta():
    sizes = [0, 1000, LIMIT]
    out = p2p.run(parse({"test": "latency", "sizes": [f"{n} B" for n in sizes]}), context(2, alpha=ALPHA, bandwidth=BW))
    for row, n in zip(out.rows, sizes, strict=True):
        assert row["protocol"] == "eager"
        assert row["latency_s"] == pytest.approx(ALPHA + n * BETA, rel=1e-12)


def test_rendezvous_latency_is_three_alpha_plus_n_and_three_headers():
    """RTS, CTS and data: 3 alpha + (n + 2H) beta, plus one header's time on the wire.

    The receiver acknowledges the data with a FIN and, in a ping-pong, sends the reply's RTS at
    the same instant over the same link: the RTS leaves one header after the FIN.
    """
    n = LIMIT + 1
    out = p2p.run(parse({"test": "latency", "sizes": [f"{n} B"], "iterations": 3}), context(2, alpha=ALPHA, bandwidth=BW))
    (row,) = out.rows
    assert row["protocol"] == "rendezvous"
    assert row["latency_s"] == pytest.approx(3 * ALPHA + (n + 3 * H) * BETA, rel=1e-12)


def test_protocol_follows_the_configured_eager_limit():
    out = p2p.run(parse({"test": "latency", "sizes": ["1024 B", "1025 B"]}), context(2, eager_limit_inter=1024))
    assert [row["protocol"] for row in out.rows] == ["eager", "rendezvous"]


def test_bandwidth_approaches_the_link_under_fair_sharing():
    out = p2p.run(parse({"test": ["bandwidth", "bibw"], "sizes": ["4 MiB"]}),
                  context(2, alpha=ALPHA, bandwidth=BW, model="fairshare", payload="size"))
    bw, bibw = (row["bandwidth_Bps"] for row in out.rows)
    assert 0.99 * BW < bw < BW
    assert 0.99 * 2 * BW < bibw < 2 * BW  # full duplex: each direction has its own link


def test_small_message_bandwidth_is_latency_bound():
    n = 8
    out = p2p.run(parse({"test": "bandwidth", "sizes": [f"{n} B"], "window": 64}),
                  context(2, alpha=ALPHA, bandwidth=BW, model="fairshare"))
    # A window of eager messages (all in flight together) and a 4-byte ack: two latencies.
    elapsed = 64 * n / out.rows[0]["bandwidth_Bps"]
    assert elapsed == pytest.approx(2 * ALPHA + (64 * n + 4) * BETA, rel=1e-9)


def test_pair_across_other_ranks_and_idle_ranks():
    out = p2p.run(parse({"test": "latency", "sizes": ["100 B"], "pair": [3, 1]}), context(4, alpha=ALPHA, bandwidth=BW))
    assert out.rows[0]["latency_s"] == pytest.approx(ALPHA + 100 * BETA, rel=1e-12)
    assert [label for label, _ in out.worlds] == ["latency 100 B"]


def test_one_rank_is_not_enough():
    with pytest.raises(ConfigError) as info:
        p2p.run(parse({"test": "latency", "sizes": ["8 B"]}), context(1))
    assert info.value.path == "pair"
    assert "1 rank" in info.value.message


def _run_rows(topology, workload):
    from mpisim.scenario.load import load_dict
    from mpisim.scenario.run import run_scenario
    return run_scenario(load_dict({"topology": topology, "workload": workload, "payload": "size"})).rows


def test_mbw_mr_pairs_share_the_nic_and_report_the_aggregate():
    # Two pairs across two nodes: both senders share one NIC, so the aggregate is the NIC's
    # achievable rate (C2: osu_mbw_mr 23477 MB/s on HDR), while one pair alone gets the same
    # figure (the NIC, not the sender, is the limit at 8 MiB).
    topology = {"preset": "ib-hdr", "ranks_per_node": 2}
    two = _run_rows(topology, {"kind": "p2p", "test": "mbw_mr", "pairs": 2, "sizes": ["8 MiB"]})[0]
    nic = 25e9 * 0.94
    assert 0.99 * nic < two["bandwidth_Bps"] < nic
    one = _run_rows("ib-hdr", {"kind": "p2p", "test": "mbw_mr", "sizes": ["8 MiB"]})[0]
    bw = _run_rows("ib-hdr", {"kind": "p2p", "test": "bandwidth", "sizes": ["8 MiB"]})[0]
    assert one["bandwidth_Bps"] == bw["bandwidth_Bps"]  # one pair is osu_bw


def test_mbw_mr_needs_twice_the_pairs_in_ranks():
    with pytest.raises(ConfigError, match="needs 4 ranks"):
        _run_rows("ib-hdr", {"kind": "p2p", "test": "mbw_mr", "pairs": 2, "sizes": ["8 B"]})


def test_host_bandwidth_caps_send_and_receive_together():
    # C4b: with the guest's TCP stack as the limit, bibw gets what bw gets, not twice it.
    capped = {"preset": "cloud-100g-tcp", "inter": {"host_bandwidth": "5 GB/s"}}
    rows = _run_rows(capped, {"kind": "p2p", "test": ["bandwidth", "bibw"], "sizes": ["4 MiB"]})
    bw, bibw = (row["bandwidth_Bps"] for row in rows)
    assert 0.97 * 5e9 < bibw < 5e9
    free = _run_rows("cloud-100g-tcp", {"kind": "p2p", "test": ["bandwidth", "bibw"], "sizes": ["4 MiB"]})
    assert free[1]["bandwidth_Bps"] > 1.9 * free[0]["bandwidth_Bps"]  # full duplex without the cap
    assert 0.97 * 5e9 < bw < 5e9  # one direction alone (5.8 GB/s on the wire) is capped as well


def test_rendezvous_overhead_serialises_large_messages_on_their_socket():
    # mpi.rendezvous_overhead X: after its CTS, a large message between nodes holds its socket
    # for X, then its data goes; the next message on the socket waits until that data arrived.
    # A ping-pong pays X once per message; a window of w sends pays it w times in a row:
    # elapsed = RTS + CTS + ack (3 L) + w (X + L + n / B), the analytic model's closed form.
    L, B, X, n, w = 10e-6, 1e9, 50e-6, 2**20, 8
    topology = {"nodes": 2, "inter": {"kind": "star", "bandwidth": "1 GB/s", "latency": "10 us"}}

    def rows(overhead):
        from mpisim.scenario.load import load_dict
        from mpisim.scenario.run import run_scenario
        raw = {"topology": topology, "network": "analytic", "payload": "size",
               "mpi": {"eager_limit": "4 KiB", "rendezvous_overhead": overhead},
               "workload": {"kind": "p2p", "test": ["latency", "bandwidth"], "sizes": ["1 MiB"], "window": w}}
        return run_scenario(load_dict(raw)).rows

    (lat0, _), (lat, bw) = rows("0 s"), rows("50 us")
    assert lat["latency_s"] - lat0["latency_s"] == pytest.approx(X, rel=1e-9)
    assert bw["bandwidth_Bps"] == pytest.approx(w * n / (3 * L + w * (X + L + n / B)), rel=1e-3)
    intra = {"nodes": 1, "ranks_per_node": 2, "intra": {"kind": "shm", "bandwidth": "1 GB/s", "latency": "10 us"}}
    topology = intra  # inside a node (shared memory, no socket) it costs nothing
    assert rows("50 us")[0]["latency_s"] == rows("0 s")[0]["latency_s"]
