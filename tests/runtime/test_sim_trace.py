"""The trace's recording (observe/trace.py: tuples in sealed chunks, Event objects made when read)
and run_sim's result, whose events are made when first read: the same events, in the same order."""

import copy
import gc
import pickle

import torch

from minitorch_dist.runtime.observe import trace
from minitorch_dist.runtime.observe.trace import Event, Recorder, merged_events
from minitorch_dist.runtime.sim import SimNetwork, run_sim


def _record(recorder, n, start=0):
    for i in range(start, start + n):
        recorder.event("send", i % 7, 0, 4, float(i), float(i) + 0.5, "world")


def test_recorder_keeps_every_event_across_chunks_in_order():
    rec = Recorder(3)
    n = 2 * trace._CHUNK + 17
    _record(rec, n)
    events = rec.events
    assert events == [Event(3, "send", i % 7, 0, 4, float(i), float(i) + 0.5) for i in range(n)]
    assert rec.events is events and rec.dropped_events == 0
    _record(rec, 5, start=n)                        # more after a read: appended
    assert len(rec.events) == n + 5 and rec.events[-1].start == float(n + 4)


def test_recorder_drops_past_max_events_across_chunks_and_after_a_change():
    rec = Recorder(0, max_events=trace._CHUNK + 10)
    _record(rec, trace._CHUNK + 30)
    assert len(rec.events) == trace._CHUNK + 10 and rec.dropped_events == 20
    rec = Recorder(0)
    _record(rec, 100)
    rec.max_events = 150                            # lowered while recording: the next events see it
    _record(rec, 100, start=100)
    assert [e.start for e in rec.events] == [float(i) for i in range(150)]
    assert rec.dropped_events == 50


def test_sealed_chunks_are_not_tracked_by_the_collector():
    rec = Recorder(0)
    _record(rec, trace._CHUNK + 1)
    gc.collect()
    gc.collect()        # the first may see a chunk before the tuples in it (it reorders what survives)
    assert rec._chunks and not any(gc.is_tracked(c) for c in rec._chunks)


def test_merged_events_order_is_run_results():
    recs = [Recorder(r) for r in range(3)]
    for r, rec in enumerate(recs):
        for i, s in enumerate((2.0, 1.0, 1.0, 0.0, float(r))):
            rec.event("send", i, r, 4, s, s + 1, "world")
    events = [e for rec in recs for e in rec.events]
    assert merged_events(recs) == sorted(events, key=lambda e: (e.start, e.rank))
    nan = [Recorder(r) for r in range(2)]           # a NaN start: sorted on (start, rank) as RunResult does
    for r, rec in enumerate(nan):
        for s in (1.0, float("nan"), 0.0):
            rec.event("send", 0, 0, 4, s, s, "world")
    events = [e for rec in nan for e in rec.events]
    assert merged_events(nan) == sorted(events, key=lambda e: (e.start, e.rank))


def _mixed(group):
    r, p = group.rank, group.size
    x = torch.full((8,), float(r))
    group.sendrecv(x, (r + 1) % p, torch.empty(8), (r - 1) % p)
    h = group.isend(torch.ones(3) * r, (r + 1) % p, tag=3)
    group.recv(torch.empty(3), (r - 1) % p, tag=3)
    h.wait()
    group.compute(1e-6 * (r % 3))
    group.all_reduce(x)
    return len(group.events)


def test_run_sim_events_are_made_when_read_and_survive_copy_and_pickle():
    res = run_sim(_mixed, 5, network=SimNetwork(eager_limit=8))
    expect = sorted([e for r in range(5) for e in res._recorders[r].events], key=lambda e: (e.start, e.rank))
    assert res.events == expect and len(expect) == sum(res) and res.events is res.events
    for other in (copy.copy(run_sim(_mixed, 5, network=SimNetwork(eager_limit=8))),
                  pickle.loads(pickle.dumps(run_sim(_mixed, 5, network=SimNetwork(eager_limit=8))))):
        assert other.events == expect and list(other) == list(res)
    res.events = []                                 # an attribute like RunResult's
    assert res.events == []
    assert run_sim(_mixed, 3, trace=False).events == []
