"""Timetables of the sim network's ports: when each send or receive port is busy.

A message of n bytes from a to b needs a's send port and b's receive port for
d = alpha + n*beta seconds. It starts at the earliest time s >= ready at which
both ports are free during [s, s + d). When messages are booked in time order this
is the usual s = max(ready, send_free[a], recv_free[b]). The scheduler books them in
the order it runs the ranks, which is not always time order (a rank that ran ahead
has already booked a later message); looking for the earliest free slot, instead of
queueing behind the last booking, keeps the times exact for every algorithm whose
messages never overlap on a port (rings, trees, recursive doubling, gathers), and
deterministic for the others.

Busy intervals are kept sorted and merged; intervals that end before the lowest
clock of the live ranks can never matter again and are dropped.
"""

from __future__ import annotations

from bisect import bisect_right


class Port:
    """The busy intervals [starts[i], ends[i]) of one port, sorted, disjoint, merged."""

    __slots__ = ("starts", "ends", "prune_at")

    def __init__(self):
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.prune_at = 64           # prune when this many intervals are kept

    def conflict(self, s: float, e: float) -> float | None:
        """The end of a busy interval that overlaps [s, e), or None when the port is free then."""
        starts, ends = self.starts, self.ends
        i = bisect_right(starts, s) - 1          # last interval starting at or before s
        if i >= 0 and ends[i] > s:
            return ends[i]
        i += 1
        if i < len(starts) and starts[i] < e:
            return ends[i]
        return None

    def book(self, s: float, e: float) -> None:
        """Mark [s, e) busy (it must be free)."""
        starts, ends = self.starts, self.ends
        if not ends or ends[-1] <= s:             # the usual case: after everything booked
            if ends and ends[-1] == s:
                ends[-1] = e
            else:
                starts.append(s)
                ends.append(e)
            return
        i = bisect_right(starts, s)
        after_prev = i > 0 and ends[i - 1] == s
        before_next = i < len(starts) and starts[i] == e
        if after_prev and before_next:
            ends[i - 1] = ends[i]
            del starts[i], ends[i]
        elif after_prev:
            ends[i - 1] = e
        elif before_next:
            starts[i] = s
        else:
            starts.insert(i, s)
            ends.insert(i, e)

    def prune(self, horizon: float) -> None:
        """Forget the intervals that end at or before `horizon` (no message can start earlier)."""
        k = bisect_right(self.ends, horizon)
        del self.starts[:k], self.ends[:k]
        self.prune_at = max(64, 2 * len(self.starts))


def book_transfer(send_port: Port, recv_port: Port, ready: float, duration: float,
                  horizon) -> float:
    """Book the earliest slot >= `ready` of `duration` seconds free on both ports; return its start.

    `horizon()` gives the lowest clock of the live ranks, for pruning.
    """
    s = ready
    if duration <= 0:
        return s
    send_ends, recv_ends = send_port.ends, recv_port.ends
    if (not send_ends or send_ends[-1] <= s) and (not recv_ends or recv_ends[-1] <= s):
        # the usual case: after everything booked on both ports
        e = s + duration
        book_after(send_port, s, e, horizon)
        book_after(recv_port, s, e, horizon)
        return s
    while (send_ends and send_ends[-1] > s) or (recv_ends and recv_ends[-1] > s):
        # some booking ends after s: look for a gap; each step jumps to the end of a busy interval
        busy_until = send_port.conflict(s, s + duration)
        if busy_until is None:
            busy_until = recv_port.conflict(s, s + duration)
            if busy_until is None:
                break
        s = busy_until
    e = s + duration
    send_port.book(s, e)
    recv_port.book(s, e)
    if len(send_port.starts) > send_port.prune_at:
        send_port.prune(horizon())
    if len(recv_port.starts) > recv_port.prune_at:
        recv_port.prune(horizon())
    return s


def book_after(port: Port, s: float, e: float, horizon) -> None:
    """Port.book(s, e) when nothing booked ends after `s`, then prune if the port keeps too much."""
    ends = port.ends
    if ends and ends[-1] == s:
        ends[-1] = e
    else:
        port.starts.append(s)
        ends.append(e)
        if len(ends) > port.prune_at:
            port.prune(horizon())
