"""RankContext: what all groups of one rank share during one run."""

from __future__ import annotations

from dataclasses import dataclass, field

from .observe.trace import Recorder
from .observe.tracker import OpTracker


@dataclass
class RankContext:
    """What all groups of one rank share: identity, limits, counters, state for deadlock reports."""

    world_rank: int
    world_size: int
    deadline: float | None = 60.0     # seconds a blocking op may wait; None: forever
    collectives: bool = True          # the provided collectives are allowed
    recorder: Recorder | None = None
    tracker: OpTracker | None = None
    t0: float = 0.0                   # perf_counter() at the start of the run
    run_id: str = "run"               # unique per run: keeps rendezvous keys of sub-groups apart
    subgroups: list = field(default_factory=list)   # backends created in this run, closed at its end

    def __post_init__(self):
        if self.recorder is None:
            self.recorder = Recorder(self.world_rank)
        if self.tracker is None:
            self.tracker = OpTracker()
