"""What a run gives back to its caller: each rank's return value, plus counters and trace."""

from __future__ import annotations

from .observe.trace import Counters, Event


class RunResult(list):
    """The list of each rank's return value (index = world rank), with extras:

    counters:  per-rank Counters (messages and bytes, per op kind)
    events:    every rank's trace events, sorted by start time
    sim_time:  simulated seconds of the run (the largest rank clock) on sim, else None
    wall_time: seconds the run took in the caller
    wire:      per rank (bytes sent to other ranks, bytes received from them) as the kernel counted
               them (observe/kernel_traffic.py: gloo, and mpi over TCP, with MINITORCH_DIST_KERNEL_TRAFFIC=1),
               else None;
               unlike the counters, rank code cannot write it
    """

    def __init__(self, values, counters: list[Counters], events: list[Event], backend: str,
                 wall_time: float, sim_time: float | None = None, wire: list | None = None):
        super().__init__(values)
        self.counters = counters
        self.events = sorted(events, key=lambda e: (e.start, e.rank))
        self.backend = backend
        self.wall_time = wall_time
        self.sim_time = sim_time
        self.wire = wire
        self.wire_unseen: int | None = None     # bytes on connections closed within the run (private netns)

    @property
    def world_size(self) -> int:
        return len(self)

    def chrome_trace(self, path=None) -> dict:
        """The trace as Chrome trace JSON (open it in https://ui.perfetto.dev); written to `path` if given."""
        from .observe.timeline import to_chrome_trace
        return to_chrome_trace(self.events, path)

    def plot_timeline(self, ax=None, **kwargs):
        """Draw the trace as one lane per rank with matplotlib; returns the Axes."""
        from .observe.timeline import plot_timeline
        return plot_timeline(self.events, ax=ax, world_size=len(self), **kwargs)

    def summary(self) -> str:
        """A table: per rank, messages and bytes sent and received."""
        lines = [f"{'rank':>4} {'msgs sent':>9} {'bytes sent':>12} {'msgs recv':>9} {'bytes recv':>12}"]
        for r, c in enumerate(self.counters):
            lines.append(f"{r:>4} {c.messages_sent:>9} {c.bytes_sent:>12} {c.messages_recv:>9} {c.bytes_recv:>12}")
        t = f"simulated time {self.sim_time:.6g} s, " if self.sim_time is not None else ""
        lines.append(f"{self.backend}, {len(self)} ranks: {t}wall time {self.wall_time:.3f} s")
        return "\n".join(lines)
