"""Per-rank counters and the event trace.

Every Group call is recorded once, here: counters (messages and bytes sent and
received, per op kind) always; events (op, peer, tag, bytes, start, end) unless
tracing is off. Peers are world ranks. Times are seconds since the start of the
run: wall-clock on real backends, the virtual clock on sim.

Counting rules (what the tests and cost formulas assume):
- send/isend: 1 message sent of numel*element_size bytes; recv/irecv: 1 received.
- sendrecv: 1 sent and 1 received.
- provided collectives and barrier: `calls` counts them and `tensor_bytes` adds
  the local input tensor's size; their internal messages are not visible, so
  they add nothing to messages/bytes sent or received.
The framing header of the process backends is not counted.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from operator import attrgetter


@dataclass
class OpCount:
    """Totals for one op kind on one rank."""

    calls: int = 0
    messages_sent: int = 0
    bytes_sent: int = 0
    messages_recv: int = 0
    bytes_recv: int = 0
    tensor_bytes: int = 0    # collectives: bytes of the local input tensor, summed over calls


@dataclass
class Counters:
    """Per-rank counters, by op kind ("send", "recv", "isend", "irecv", "sendrecv",
    "all_reduce", "all_gather", "reduce_scatter", "broadcast", "barrier")."""

    by_op: dict[str, OpCount] = field(default_factory=dict)

    def op(self, name: str) -> OpCount:
        """The counts of one op kind (zeros if it never ran)."""
        return self.by_op.get(name, OpCount())

    def _total(self, attr: str) -> int:
        return sum(getattr(c, attr) for c in self.by_op.values())

    @property
    def messages_sent(self) -> int:
        return self._total("messages_sent")

    @property
    def bytes_sent(self) -> int:
        return self._total("bytes_sent")

    @property
    def messages_recv(self) -> int:
        return self._total("messages_recv")

    @property
    def bytes_recv(self) -> int:
        return self._total("bytes_recv")

    def collective_calls(self) -> int:
        """How many provided collectives (not barrier) this rank called."""
        return sum(self.op(n).calls for n in ("all_reduce", "all_gather", "reduce_scatter", "broadcast"))

    def __repr__(self) -> str:
        return (f"Counters(sent={self.messages_sent} msgs/{self.bytes_sent} B, "
                f"recv={self.messages_recv} msgs/{self.bytes_recv} B, "
                f"ops={ {k: v.calls for k, v in self.by_op.items()} })")


@dataclass(frozen=True)
class Event:
    """One completed operation on one rank. `peer` is a world rank (None for collectives)."""

    rank: int
    op: str
    peer: int | None
    tag: int | None
    nbytes: int
    start: float
    end: float
    group: str = "world"


_CHUNK = 4096       # events per sealed chunk of a Recorder (Recorder._make_room)


class Recorder:
    """Collects the counters and events of one rank (shared by all its groups)."""

    def __init__(self, rank: int, trace: bool = True, max_events: int = 1_000_000):
        self.rank = rank
        self.trace = trace
        self.max_events = max_events
        self.counters = Counters()
        self.dropped_events = 0
        self._events: list[Event] = []
        self._chunks: list[tuple] = []       # full chunks of recorded tuples, oldest first
        self._recorded: list[tuple] = []     # the chunk being filled
        self._sealed = 0                     # tuples in _chunks
        self._room = 0                       # tuples _recorded may take before _make_room

    @property
    def max_events(self) -> int:
        return self._max_events

    @max_events.setter
    def max_events(self, value: int) -> None:
        self._max_events = value
        self._room = 0                       # the next event checks the new limit

    @property
    def events(self) -> list[Event]:
        """Every event so far, in order. Recording keeps a tuple (a small message's cost is its
        overhead); the Event objects are made here, once, when someone reads them."""
        if self._chunks or self._recorded:
            collecting = gc.isenabled()
            gc.disable()        # made in one batch: a collection every 700 of them would walk them all
            try:
                new, append = object.__new__, self._events.append
                for chunk in (*self._chunks, self._recorded):
                    for rank, op, peer, tag, nbytes, start, end, group in chunk:
                        event = new(Event)   # Event(...) without the frozen dataclass's slow __init__
                        event.__dict__.update({"rank": rank, "op": op, "peer": peer, "tag": tag,
                                               "nbytes": nbytes, "start": start, "end": end,
                                               "group": group})
                        append(event)
            finally:
                if collecting:
                    gc.enable()
            self._chunks.clear()
            self._recorded.clear()
            self._sealed = 0
            self._room = 0
        return self._events

    def count(self, op: str, sent: int = 0, recv: int = 0, bytes_sent: int = 0,
              bytes_recv: int = 0, tensor_bytes: int = 0) -> None:
        c = self.counters.by_op.get(op)
        if c is None:
            c = self.counters.by_op[op] = OpCount()
        c.calls += 1
        c.messages_sent += sent
        c.bytes_sent += bytes_sent
        c.messages_recv += recv
        c.bytes_recv += bytes_recv
        c.tensor_bytes += tensor_bytes

    def count_message(self, op: str, sending: bool, nbytes: int) -> None:
        """count() of one send (sending) or receive of `nbytes` (without count()'s keywords:
        a small message's cost is its overhead)."""
        c = self.counters.by_op.get(op)
        if c is None:
            c = self.counters.by_op[op] = OpCount()
        c.calls += 1
        if sending:
            c.messages_sent += 1
            c.bytes_sent += nbytes
        else:
            c.messages_recv += 1
            c.bytes_recv += nbytes

    def event(self, op: str, peer: int | None, tag: int | None, nbytes: int,
              start: float, end: float, group: str) -> None:
        if not self.trace:
            return
        recorded = self._recorded
        if len(recorded) >= self._room and not self._make_room():
            self.dropped_events += 1
            return
        recorded.append((self.rank, op, peer, tag, nbytes, start, end, group))

    def _make_room(self) -> bool:
        """Seal the chunk being filled; True if max_events leaves room for another event.

        A sealed chunk is a tuple of tuples of numbers and strings, which the garbage collector
        stops tracking once it has seen it: a full collection then walks a few hundred chunks,
        not every event (one list of two million tuples cost ~30 ms a full collection: 3 s over
        the p = 1024 ring all-reduce's 250 full collections)."""
        recorded = self._recorded
        if recorded:
            self._chunks.append(tuple(recorded))
            self._sealed += len(recorded)
            recorded.clear()
        left = self._max_events - len(self._events) - self._sealed
        self._room = min(_CHUNK, left) if left > 0 else 0
        return left > 0


def merged_events(recorders) -> list[Event]:
    """The events of `recorders` (one per rank, in rank order) in one list sorted by (start, rank),
    ties in recording order: what RunResult makes of them.

    The list comes in rank order, so a stable sort on start alone gives that order (4x faster
    than on a pair), unless a start is NaN (its sum is then NaN): then it sorts on the pair."""
    collecting = gc.isenabled()
    gc.disable()                # millions of new objects: a collection now would walk them all
    try:
        events = [e for recorder in recorders for e in recorder.events]
        try:
            total = sum(map(_start, events))
            key = _start if total == total else _start_rank
        except TypeError:
            key = _start_rank
        events.sort(key=key)
    finally:
        if collecting:
            gc.enable()
    return events


_start, _start_rank = attrgetter("start"), attrgetter("start", "rank")
