"""trace.json: valid trace-event JSON (required fields), one track per rank, nesting within every track."""

from __future__ import annotations

import json
import re
from collections import defaultdict

import pytest

from mpisim.report.trace import assign_lanes, validate_trace


def load(out) -> dict:
    return json.loads((out / "trace.json").read_text())


@pytest.mark.parametrize("name", ["compare", "osu", "training"])
def test_trace_validates_against_the_required_fields(rendered, name):
    doc = load(rendered[name])
    assert validate_trace(doc) == []
    assert any(e["ph"] == "X" for e in doc["traceEvents"])


@pytest.mark.parametrize("name", ["compare", "osu", "training"])
def test_one_track_per_rank_in_every_world(rendered, name):
    doc = load(rendered[name])
    results = json.loads((rendered[name] / "results.json").read_text())
    threads = defaultdict(list)
    for event in doc["traceEvents"]:
        if event["ph"] == "M" and event["name"] == "thread_name":
            threads[event["pid"]].append(event["args"]["name"])
    assert len(threads) == len(results["records"])
    for index, world in enumerate(results["records"]):
        ranks = 1 + max([r[0] for r in world["spans"]["rows"]] + [r[2] for r in world["collectives"]["rows"]], default=0)
        names = threads[index + 1]
        rank_tracks = sorted(n for n in names if re.fullmatch(r"rank \d+", n))
        assert rank_tracks == sorted(f"rank {r}" for r in range(ranks)), world["label"]


def test_events_carry_peers_and_sizes(rendered):
    doc = load(rendered["compare"])
    data = [e for e in doc["traceEvents"] if e.get("cat") == "protocol" and e["args"].get("kind") == "data"]
    assert data, "1 MiB messages use the rendezvous protocol: data phases are traced"
    assert all("peer" in e["args"] and e["args"]["bytes"] > 0 for e in data)
    assert any(e["args"].get("protocol") == "rendezvous" for e in data)
    links = [e for e in doc["traceEvents"] if e["ph"] == "M" and e["args"].get("name", "").startswith("link ")]
    assert links, "link records were kept, so busy links get tracks"


@pytest.mark.parametrize("name", ["compare", "training"])
def test_events_nest_within_each_track(rendered, name):
    doc = load(rendered[name])
    tracks = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            tracks[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for bars in tracks.values():
        stack: list[float] = []
        for start, end in sorted(bars, key=lambda b: (b[0], -(b[1] - b[0]))):
            while stack and stack[-1] <= start + 1e-9:
                stack.pop()
            assert not stack or end <= stack[-1] + 1e-6, "complete events on one track must nest"
            stack.append(end)


def test_assign_lanes_puts_overlaps_on_separate_lanes():
    lanes = assign_lanes([(0, 10, "a"), (2, 4, "b"), (3, 12, "c"), (11, 13, "d"), (5, 6, "e")])
    assert lanes == [["a", "b", "e", "d"], ["c"]]


def test_validate_trace_names_missing_fields():
    doc = {"traceEvents": [
        {"name": "x", "ph": "X", "ts": 0, "pid": 1, "tid": 1},
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {}},
        {"name": "y", "ph": "X", "ts": -1, "dur": 1, "pid": 1, "tid": 1},
        {"name": "z", "ph": "Q"},
    ]}
    problems = validate_trace(doc)
    assert len(problems) == 4
    assert "missing dur" in problems[0] and "args.name" in problems[1] and "ts must be" in problems[2]
    assert validate_trace([]) == ["the document must be an object with a 'traceEvents' list"]


def test_a_deadlock_timeline_marks_where_and_why_each_rank_stopped():
    """Head-to-head rendezvous sends: each rank's send is drawn blocked to the end, apart from its RTS,
    and marked with the call and the reason it never returns."""
    from pathlib import Path

    from matplotlib.collections import PolyCollection

    from mpisim.report import plots
    from mpisim.scenario import load_file, run_scenario

    path = Path(__file__).resolve().parents[2] / "scenarios" / "head-to-head-deadlock.yaml"
    result = run_scenario(load_file(path))
    world = result.records[0]
    stuck = [s for s in world.spans if s.kind == "send"]
    assert sorted(s.rank for s in stuck) == [0, 1]
    for span in stuck:
        assert span.t_end == world.t_end and span.t_start < min(r.t_start for r in world.spans if r.kind == "rts")
        assert span.label.startswith(f"send(dest={1 - span.rank}, tag=0, 1048576 B, rendezvous) -- waiting for rank")
    fig = plots.plot_timeline(world, failure=result.failure)
    ax = fig.axes[0]
    crosses = [line for line in ax.lines if line.get_marker() == "X"]
    assert len(crosses) == 2
    notes = [t.get_text() for t in ax.texts]
    assert any(n.startswith("stopped in send(dest=1") and "rank 1 has not posted a matching receive" in n for n in notes)
    assert "cycle of waits: rank 0 -> rank 1 -> rank 0" in ax.get_title()
    # Blocked time and the RTS sit on different strips of a rank's band.
    bars = [c for c in ax.collections if isinstance(c, PolyCollection)]
    spans_y = {tuple(round(v, 3) for v in c.get_paths()[0].get_extents().intervaly) for c in bars}
    assert len(spans_y) >= 2, spans_y
    legend = {t.get_text() for t in fig.legends[0].get_texts()}
    assert {"blocked in send", "RTS (request to send)", "deadlock: the call never returns"} <= legend
