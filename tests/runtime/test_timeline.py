"""Chrome trace export and matplotlib timeline of hand-built trace events (no processes)."""

import json
import math
import random

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from minitorch_dist.runtime.observe.timeline import LANE_STRIDE, match_messages, plot_timeline, to_chrome_trace  # noqa: E402
from minitorch_dist.runtime.observe.trace import Event  # noqa: E402

SUB = "group[0, 1]"

# Event(rank, op, peer, tag, nbytes, start, end, group); times in seconds
EVENTS = [
    Event(0, "send", 1, 0, 8, 0.000, 0.001),            # 0 -> 1, first message
    Event(1, "recv", 0, 0, 8, 0.000, 0.0012),
    Event(0, "send", 1, 0, 8, 0.002, 0.003),            # 0 -> 1, second message, same channel
    Event(1, "recv", 0, 0, 8, 0.0025, 0.0031),
    Event(1, "isend", 2, 5, 16, 0.0032, 0.004),         # 1 -> 2, tag 5, non-blocking
    Event(2, "irecv", 1, 5, 16, 0.0005, 0.0045),
    Event(2, "sendrecv", 3, 1, 64, 0.005, 0.006),       # 2 -> 3 received by a plain recv: arrow
    Event(3, "recv", 2, 1, 32, 0.0049, 0.0061),
    Event(0, "sendrecv", 1, 7, 8, 0.004, 0.005),        # 0 -> 1, tag 7, received by a sendrecv
    Event(1, "sendrecv", 0, 7, 8, 0.004, 0.005),        # (1 -> 0, received by 0's sendrecv)
    Event(0, "send", 1, 7, 8, 0.006, 0.007),            # 0 -> 1, tag 7 again, plain
    Event(1, "recv", 0, 7, 8, 0.006, 0.007),            # ambiguous channel: no arrows
    Event(0, "send", 1, 0, 4, 0.008, 0.009, SUB),        # same ranks and tag, other group
    Event(1, "recv", 0, 0, 4, 0.008, 0.0095, SUB),
    *[Event(r, "all_reduce", None, None, 400, 0.01, 0.012) for r in range(4)],
]
EXPECTED_PAIRS = [(0, 1), (2, 3), (4, 5), (6, 7), (12, 13)]


def _x_events(trace):
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def test_match_messages_fifo_per_channel():
    assert match_messages(EVENTS) == EXPECTED_PAIRS


def test_match_messages_pairs_in_posting_order():
    # the receiver lists its events out of order: matching follows the start times
    events = [Event(0, "isend", 1, 0, 8, 0.0, 0.5), Event(0, "isend", 1, 0, 8, 0.1, 0.2),
              Event(1, "irecv", 0, 0, 8, 0.15, 0.3), Event(1, "irecv", 0, 0, 8, 0.05, 0.6)]
    assert match_messages(events) == [(0, 3), (1, 2)]


def test_chrome_trace_round_trips_through_json(tmp_path):
    trace = to_chrome_trace(EVENTS)
    assert json.loads(json.dumps(trace, allow_nan=False)) == trace
    assert trace["displayTimeUnit"] == "ms"
    path = tmp_path / "trace.json"
    assert to_chrome_trace(EVENTS, path) == trace
    assert json.loads(path.read_text()) == trace


def test_one_complete_event_per_event():
    xs = _x_events(to_chrome_trace(EVENTS))
    assert len(xs) == len(EVENTS)
    for x, e in zip(xs, EVENTS):
        assert (x["name"], x["pid"], x["tid"]) == (e.op, 0, e.rank)
        assert x["ts"] == pytest.approx(e.start * 1e6)
        assert x["dur"] == pytest.approx((e.end - e.start) * 1e6)
        assert x["args"] == {"peer": e.peer, "tag": e.tag, "bytes": e.nbytes, "group": e.group}
        assert all(math.isfinite(x[k]) for k in ("ts", "dur"))


def test_thread_names_per_rank():
    meta = [e for e in to_chrome_trace(EVENTS)["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"]
    assert {m["tid"]: m["args"]["name"] for m in meta} == {r: f"rank {r}" for r in range(4)}


def test_flows_go_from_each_send_to_its_receive():
    trace = to_chrome_trace(EVENTS)
    starts = {e["id"]: e for e in trace["traceEvents"] if e["ph"] == "s"}
    finishes = {e["id"]: e for e in trace["traceEvents"] if e["ph"] == "f"}
    assert set(starts) == set(finishes) and len(starts) == len(EXPECTED_PAIRS)
    drawn = []
    for flow_id, s in starts.items():
        f = finishes[flow_id]
        assert (s["name"], s["cat"]) == (f["name"], f["cat"]) and f["bp"] == "e"
        # each end lies inside its slice, so the viewer binds it to the right op
        send = next(i for i, e in enumerate(EVENTS) if e.rank == s["tid"] and e.start * 1e6 <= s["ts"] <= e.end * 1e6
                    and e.op in ("send", "isend", "sendrecv"))
        recv = next(i for i, e in enumerate(EVENTS) if e.rank == f["tid"] and e.start * 1e6 <= f["ts"] <= e.end * 1e6
                    and e.op in ("recv", "irecv"))
        drawn.append((send, recv))
    assert sorted(drawn) == EXPECTED_PAIRS


def test_overlapping_events_get_sub_lanes():
    events = [Event(0, "isend", 1, 0, 8, 0.0, 3.0), Event(0, "irecv", 1, 0, 8, 1.0, 4.0),
              Event(0, "send", 1, 1, 8, 4.0, 5.0)]
    trace = to_chrome_trace(events)
    assert [x["tid"] for x in _x_events(trace)] == [0, LANE_STRIDE, 0]
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert names == {0: "rank 0", LANE_STRIDE: "rank 0 (1)"}


def test_no_partial_overlap_within_a_thread():
    rng = random.Random(0)
    events = []
    for _ in range(300):
        start = rng.uniform(0, 1)
        events.append(Event(rng.randrange(4), rng.choice(["isend", "irecv", "send"]), 0, 0, 8,
                            start, start + rng.uniform(0, 0.2)))
    by_tid = {}
    for x in _x_events(to_chrome_trace(events)):
        by_tid.setdefault(x["tid"], []).append((x["ts"], x["ts"] + x["dur"]))
    for spans in by_tid.values():
        spans.sort()
        assert all(a_end <= b_start + 1e-6 for (_, a_end), (b_start, _) in zip(spans, spans[1:]))


def test_empty_and_bad_traces():
    trace = to_chrome_trace([])
    assert _x_events(trace) == [] and json.loads(json.dumps(trace)) == trace
    with pytest.raises(ValueError, match="non-finite"):
        to_chrome_trace([Event(0, "send", 1, 0, 8, 0.0, float("inf"))])


# -- matplotlib -----------------------------------------------------------------------------
def test_plot_timeline_one_bar_per_event():
    ax = plot_timeline(EVENTS, title="hand-built")
    assert isinstance(ax, matplotlib.axes.Axes)
    assert len(ax.patches) == len(EVENTS)
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"rank {r}" for r in range(4)]
    assert {t.get_text() for t in ax.get_legend().get_texts()} == {e.op for e in EVENTS}
    assert ax.get_title() == "hand-built"
    assert ax.get_xlabel() == "time (ms)"
    plt.close(ax.figure)


def test_plot_timeline_on_given_axes_with_more_ranks_and_seconds():
    fig, ax = plt.subplots()
    events = [Event(0, "all_reduce", None, None, 8, 0.0, 2.0), Event(1, "barrier", None, None, 0, 1.0, 2.5)]
    assert plot_timeline(events, ax=ax, world_size=6) is ax
    assert len(ax.patches) == 2 and len(ax.get_yticks()) == 6
    assert ax.get_xlabel() == "time (s)"
    plt.close(fig)


def test_plot_timeline_with_zero_events():
    ax = plot_timeline([])
    assert len(ax.patches) == 0 and ax.get_legend() is None
    plt.close(ax.figure)
    ax = plot_timeline([], world_size=3, unit="ms")
    assert len(ax.get_yticks()) == 3
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="unit"):
        plot_timeline([], unit="minutes")
