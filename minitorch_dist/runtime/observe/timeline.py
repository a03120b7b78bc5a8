"""See a run: its trace events as Chrome trace JSON (Perfetto) or as a matplotlib timeline.

    res = launch(main, world_size=4, backend="sim")
    res.chrome_trace("trace.json")      # open in https://ui.perfetto.dev
    res.plot_timeline()                 # one lane per rank, one bar per op

Both take the `Event`s of trace.py (times in seconds since the start of the run).

Lanes. A rank's ops are usually one after another. Non-blocking ops overlap (an isend
runs from its post to its wait), and a trace viewer cannot draw partly overlapping
slices on one thread, so overlapping events move to extra sub-lanes of their rank:
lane 0 is tid = rank, lane k > 0 is tid = rank + k * LANE_STRIDE ("rank r (k)").

Arrows. Each message gets a flow arrow from its send to its receive. Messages between
two ranks on one (group, tag) arrive in the order they were sent, so the i-th send
matches the i-th receive. A send is a send, isend or sendrecv event; a receive is a
recv or irecv event. A sendrecv records only its destination, not its source, so its
receiving half cannot be placed: a channel where some message went into a sendrecv
has more sends than receives, and such a channel (or one cut short by a capped trace)
gets no arrows at all rather than wrong ones.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict

from .trace import Event

LANE_STRIDE = 1_000_000
SEND_OPS = ("send", "isend", "sendrecv")
RECV_OPS = ("recv", "irecv")

# A fixed colour per op kind, so every plot of the course reads the same way.
OP_COLORS = {
    "send": "#1f77b4", "isend": "#6baed6",
    "recv": "#ff7f0e", "irecv": "#fdae6b",
    "sendrecv": "#9467bd",
    "all_reduce": "#2ca02c", "reduce_scatter": "#98df8a", "all_gather": "#17becf",
    "broadcast": "#d62728", "barrier": "#7f7f7f",
}
_EXTRA_COLORS = ("#8c564b", "#e377c2", "#bcbd22", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5")


def _ns(seconds: float, event: Event) -> int:
    if not math.isfinite(seconds):
        raise ValueError(f"timeline: event {event} has a non-finite time; it cannot be drawn")
    return round(seconds * 1e9)


def _spans(events) -> list[tuple[int, int]]:
    """(start_ns, end_ns) of each event; an end before its start is clamped to the start."""
    spans = []
    for e in events:
        start = _ns(e.start, e)
        spans.append((start, max(start, _ns(e.end, e))))
    return spans


def _lanes(events, spans) -> list[int]:
    """Lane of each event within its rank: greedy, so no two events of a lane overlap."""
    lane_of = [0] * len(events)
    lane_ends: dict[int, list[int]] = defaultdict(list)     # rank -> end_ns of each lane
    for i in sorted(range(len(events)), key=lambda i: (spans[i][0], spans[i][1])):
        start, end = spans[i]
        ends = lane_ends[events[i].rank]
        for k, lane_end in enumerate(ends):
            if lane_end <= start:
                ends[k], lane_of[i] = end, k
                break
        else:
            lane_of[i] = len(ends)
            ends.append(end)
    return lane_of


def match_messages(events) -> list[tuple[int, int]]:
    """(send index, receive index) pairs into `events`, per the rules in the module docstring."""
    sends, recvs = defaultdict(list), defaultdict(list)
    for i, e in enumerate(events):
        if e.op in SEND_OPS and e.peer is not None:
            sends[(e.group, e.rank, e.peer, e.tag)].append(i)
        elif e.op in RECV_OPS and e.peer is not None:
            recvs[(e.group, e.peer, e.rank, e.tag)].append(i)

    def posted(i):                                   # the order a rank posted its ops
        return (events[i].start, i)

    pairs = []
    for channel, send_ids in sends.items():
        recv_ids = recvs.get(channel, [])
        if len(recv_ids) != len(send_ids):
            continue
        pairs.extend(zip(sorted(send_ids, key=posted), sorted(recv_ids, key=posted)))
    return sorted(pairs)


def to_chrome_trace(events, path=None) -> dict:
    """Chrome trace JSON of `events`: {"traceEvents": [...], "displayTimeUnit": "ms"}.

    One complete event ("ph": "X", ts and dur in microseconds) per Event, pid 0,
    tid = rank (see the module docstring for overlap sub-lanes), args {peer, tag,
    bytes, group}; "thread_name" metadata "rank r"; a flow arrow ("ph": "s" -> "f",
    same id) from each send to its matching receive. Written to `path` if given.
    """
    events = list(events)
    spans = _spans(events)
    lanes = _lanes(events, spans)
    tids = [e.rank + k * LANE_STRIDE for e, k in zip(events, lanes)]
    out = [{"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "minitorch_dist"}}]
    for tid in sorted(set(tids)):
        rank, k = tid % LANE_STRIDE, tid // LANE_STRIDE
        name = f"rank {rank}" if k == 0 else f"rank {rank} ({k})"
        out.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": tid, "args": {"name": name}})
        out.append({"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": tid,
                    "args": {"sort_index": rank * 1000 + k}})
    for e, (start, end), tid in zip(events, spans, tids):
        out.append({"name": e.op, "cat": e.group, "ph": "X", "pid": 0, "tid": tid,
                    "ts": start / 1000, "dur": (end - start) / 1000,
                    "args": {"peer": e.peer, "tag": e.tag, "bytes": e.nbytes, "group": e.group}})
    for flow_id, (s, r) in enumerate(match_messages(events)):
        common = {"name": "message", "cat": "message", "id": flow_id, "pid": 0}
        mid_s = (spans[s][0] + spans[s][1]) // 2      # inside the slice, so the arrow binds to it
        mid_r = (spans[r][0] + spans[r][1]) // 2
        out.append({**common, "ph": "s", "tid": tids[s], "ts": mid_s / 1000})
        out.append({**common, "ph": "f", "bp": "e", "tid": tids[r], "ts": mid_r / 1000})
    trace = {"traceEvents": out, "displayTimeUnit": "ms"}
    if path is not None:
        with open(path, "w") as f:
            json.dump(trace, f, allow_nan=False)
    return trace


def _time_unit(t_max: float) -> tuple[str, float]:
    if t_max >= 1.0:
        return "s", 1.0
    if t_max >= 1e-3:
        return "ms", 1e3
    return "µs", 1e6


def plot_timeline(events, ax=None, world_size=None, title=None, unit=None):
    """Draw `events` with matplotlib: one horizontal lane per rank (rank 0 on top), one bar per
    event, coloured by op kind (legend). Overlapping events of a rank share its lane in thinner
    sub-rows. x axis in s, ms or µs (`unit`; default: the one that suits the run's length).
    Works with zero events and with the Agg backend. Returns the Axes.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    events = list(events)
    spans = _spans(events)
    lanes = _lanes(events, spans)
    max_rank = max((e.rank for e in events), default=-1)
    world_size = max(world_size or 0, max_rank + 1, 1)
    n_lanes = defaultdict(lambda: 1)
    for e, k in zip(events, lanes):
        n_lanes[e.rank] = max(n_lanes[e.rank], k + 1)
    t_max = max((e.end for e in events), default=0.0)
    scales = {"s": 1.0, "ms": 1e3, "µs": 1e6, "us": 1e6}
    if unit is None:
        unit, scale = _time_unit(t_max)
    elif unit in scales:
        scale = scales[unit]
    else:
        raise ValueError(f"plot_timeline: unit must be one of {sorted(scales)}, got {unit!r}")
    if ax is None:
        _, ax = plt.subplots(figsize=(10, min(1.5 + 0.35 * world_size, 12)), layout="constrained")

    colors = dict(OP_COLORS)
    by_op = defaultdict(lambda: ([], [], [], []))     # op -> (y, width, left, height)
    for e, (start, end), k in zip(events, spans, lanes):
        if e.op not in colors:
            colors[e.op] = _EXTRA_COLORS[(len(colors) - len(OP_COLORS)) % len(_EXTRA_COLORS)]
        height = 0.8 / n_lanes[e.rank]
        ys, widths, lefts, heights = by_op[e.op]
        ys.append(e.rank - 0.4 + (k + 0.5) * height)
        widths.append((end - start) * 1e-9 * scale)
        lefts.append(start * 1e-9 * scale)
        heights.append(height)
    for op, (ys, widths, lefts, heights) in by_op.items():
        ax.barh(ys, widths, left=lefts, height=heights, color=colors[op], edgecolor="none")

    ax.set_ylim(world_size - 0.5, -0.5)               # rank 0 on top
    if world_size <= 32:
        ax.set_yticks(range(world_size))
        ax.set_yticklabels([f"rank {r}" for r in range(world_size)])
    else:
        ax.set_ylabel("rank")
    ax.set_xlabel(f"time ({unit})")
    if not events:
        ax.set_xlim(0, 1)
    if by_op:
        handles = [Patch(color=colors[op], label=op) for op in by_op]
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    if title is not None:
        ax.set_title(title)
    return ax
