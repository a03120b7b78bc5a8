"""The sim backend's scheduler: one baton, a virtual clock per rank, instant deadlock detection.

Every rank is a thread of one process, but only the thread holding the baton runs.
A rank runs until it waits on an operation that has not completed; it then passes
the baton to the runnable rank with the lowest (clock, rank) and sleeps on its own
lock. Whoever completes the operation (another rank posting the matching send, the
last member entering a collective) makes the sleeper runnable again. A rank that
has buffered many eager messages nobody received yet also steps aside (yield_turn),
so that copies do not pile up. So a run is one deterministic sequence of steps:
same results, same simulated times, every run.

When no rank is runnable but some are blocked, nothing can ever complete: every
blocked rank's wait raises DeadlockError with the wait-for report (observe/deadlock.py).
When a rank fails, the ranks that are blocked, or block later, get PeerFailedError.

The shared state (clocks, ports, message queues) needs no locks: only the baton
holder touches it, and the lock hand-off orders the memory accesses.
"""

from __future__ import annotations

import heapq
import threading

from ..errors import DeadlockError, PeerFailedError
from ..observe.deadlock import BLOCKED, FAILED, FINISHED, RUNNING, RankState, format_report
from ..observe.tracker import OpTracker
from .ports import Port


class RankSlot:
    """The scheduler's view of one rank (indexed by world rank)."""

    __slots__ = ("rank", "clock", "lock", "status", "op", "waits_for", "collective",
                 "blocked_at", "error", "exc", "in_flight")

    def __init__(self, rank: int):
        self.rank = rank
        self.clock = 0.0                   # simulated seconds
        self.lock = threading.Lock()       # held while the rank sleeps; released = its turn
        self.lock.acquire()
        self.status = RUNNING
        self.op = ""                       # pending op text, set by SimTracker from Group
        self.waits_for: tuple[int, ...] = ()
        self.collective = ""
        self.blocked_at = 0.0
        self.error: BaseException | None = None  # raised in the rank when it resumes
        self.exc: BaseException | None = None    # what the rank's function raised
        self.in_flight = 0                 # eager messages sent, not yet received (buffered)


class Scheduler:
    """Baton, clocks, ports and message queues of one sim run (shared by all its groups).

    Attributes read by the p2p and collective code (p2p.py, collectives.py):
        slots: RankSlot per world rank; slots[r].clock is rank r's clock.
        send_ports, recv_ports: per world rank, the timetable of its send / receive port.
        pending_sends, pending_recvs: channel (group key, src, dst, tag) -> deque.
        collectives: (group key, call number) -> the collective being entered.
    """

    def __init__(self, world_size: int, network):
        self.world_size = world_size
        self.network = network
        self.alpha, self.beta, self.eager_limit = network.alpha, network.beta, network.eager_limit
        self.slots = [RankSlot(r) for r in range(world_size)]
        self.send_ports = [Port() for _ in range(world_size)]
        self.recv_ports = [Port() for _ in range(world_size)]
        self.pending_sends: dict = {}
        self.pending_recvs: dict = {}
        self.collectives: dict = {}
        self.switches = 0                  # baton hand-offs between threads (for tuning)
        self.failures: list[int] = []      # ranks whose function raised, in order
        self.aborted: str | None = None    # why the run stopped early (None: it did not)
        self.root_rank: int | None = None  # the rank whose failure stopped the run
        self.interrupted = False           # set by the caller's thread (Ctrl-C)
        self.cancelled = False             # threads could not all start: run no rank code
        self._runnable = [(0.0, r) for r in range(world_size)]  # heap of (clock, rank)
        self._blocked: set[int] = set()
        self._done = threading.Lock()      # released when every rank has finished
        self._done.acquire()

    # -- the baton ----------------------------------------------------------------------------
    def start(self) -> None:
        """Called by the caller's thread once every rank thread is started: rank 0 goes first."""
        self.slots[heapq.heappop(self._runnable)[1]].lock.release()

    def wait_done(self) -> None:
        """Caller's thread: sleep until every rank has finished. Ctrl-C stops the run."""
        try:
            self._done.acquire()
        except BaseException:
            self.interrupted = True        # the next scheduling point aborts the run
            self._done.acquire()
            raise

    def wait(self, rank: int, work) -> None:
        """Rank `rank` waits on `work` (has `end`, `error`, `waiter`); advance its clock to `end`.

        Blocks (passes the baton) while `work.end` is None; raises DeadlockError or
        PeerFailedError when the run cannot go on, and `work.error` once done.
        """
        if work.end is None:
            if self.interrupted and self.aborted is None:
                self._abort(None, "the run was interrupted by its caller (KeyboardInterrupt)")
            if self.aborted is not None:
                raise self._peer_failed(rank)
            work.waiter = rank
            slot = self.slots[rank]
            described = not slot.op        # called without Group: describe the op ourselves
            if described:
                slot.op, slot.waits_for, slot.collective = work.describe()
            try:
                self._block(rank)
            finally:
                if described:
                    slot.op = ""
        slot = self.slots[rank]
        if work.end > slot.clock:
            slot.clock = work.end
        if work.error is not None:
            raise work.error

    def wake(self, rank: int | None, at: float) -> None:
        """Make a blocked rank runnable; its wait completes at simulated time `at`."""
        if rank is not None and rank in self._blocked:
            self._blocked.remove(rank)
            clock = self.slots[rank].clock
            heapq.heappush(self._runnable, (at if at > clock else clock, rank))

    def yield_turn(self, rank: int) -> None:
        """Let ranks with lower clocks run first (the caller stays runnable).

        Called when a rank has buffered many eager messages that nobody received
        yet: it has run far ahead, and its copies would pile up in memory.
        """
        heapq.heappush(self._runnable, (self.slots[rank].clock, rank))
        nxt = heapq.heappop(self._runnable)[1]
        if nxt != rank:
            self._switch_to(nxt)
            self.slots[rank].lock.acquire()

    def finish(self, rank: int, exc: BaseException | None) -> None:
        """The rank's function returned (exc None) or raised: pass the baton on for good."""
        slot = self.slots[rank]
        slot.op = ""
        if exc is None:
            slot.status = FINISHED
        else:
            slot.status, slot.exc = FAILED, exc
            self.failures.append(rank)
            if self.aborted is None:
                self._abort(rank, f"rank {rank} failed with {type(exc).__name__}: "
                                  f"{_first_line(exc)}")
        nxt = self._next()
        if nxt is None:
            self._done.release()
        else:
            self._switch_to(nxt)

    def _block(self, rank: int) -> None:
        slot = self.slots[rank]
        slot.status, slot.blocked_at = BLOCKED, slot.clock
        self._blocked.add(rank)
        nxt = self._next()                 # never None: at worst the deadlock wakes `rank`
        if nxt != rank:
            self._switch_to(nxt)
            slot.lock.acquire()            # sleep until woken
        slot.status = RUNNING
        if slot.error is not None:
            error, slot.error = slot.error, None
            raise error

    def _switch_to(self, rank: int) -> None:
        self.switches += 1
        self.slots[rank].lock.release()

    def _next(self) -> int | None:
        if not self._runnable and self._blocked:
            self._deadlock()
        if not self._runnable:
            return None
        return heapq.heappop(self._runnable)[1]

    def horizon(self) -> float:
        """The lowest clock of the ranks still running: no message can be ready earlier."""
        return min((s.clock for s in self.slots if s.status not in (FINISHED, FAILED)), default=0.0)

    # -- failures and deadlocks ---------------------------------------------------------------
    def _abort(self, rank: int | None, reason: str) -> None:
        """Stop the run: every blocked rank resumes with PeerFailedError."""
        self.aborted, self.root_rank = reason, rank
        for r in sorted(self._blocked):
            self.slots[r].error = self._peer_failed(r)
            self.wake(r, self.slots[r].clock)

    def _peer_failed(self, rank: int) -> PeerFailedError:
        op = self.slots[rank].op or "a communication op"
        text = (f"rank {rank} was stopped in {op} at simulated time {self.slots[rank].clock:.6g} s "
                f"because {self.aborted}.")
        if self.root_rank is not None:
            text += f" This rank is not the root cause: fix the error of rank {self.root_rank} first."
        return PeerFailedError(text)

    def _deadlock(self) -> None:
        """No rank can run and some are blocked: each blocked rank resumes with DeadlockError."""
        blocked = sorted(self._blocked)
        now = max(s.clock for s in self.slots)
        headline = (f"deadlock (sim backend) at simulated time {now:.6g} s: every rank that has "
                    f"not finished is blocked, so no operation can ever complete.")
        report = format_report(headline, self.states(now), self.world_size)
        self.aborted = f"the run deadlocked (see the DeadlockError of rank {blocked[0]})"
        self.root_rank = blocked[0]
        for r in blocked:
            self.slots[r].error = DeadlockError(report)
            self.wake(r, self.slots[r].clock)

    def states(self, now: float | None = None) -> dict[int, RankState]:
        """Every rank's RankState; `since` of a blocked rank is simulated seconds blocked."""
        if now is None:
            now = max(s.clock for s in self.slots)
        states = {}
        for s in self.slots:
            if s.status == BLOCKED:
                states[s.rank] = RankState(BLOCKED, s.op, s.waits_for, s.collective,
                                           since=now - s.blocked_at)
            elif s.status == FAILED:
                states[s.rank] = RankState(FAILED, detail=f"{type(s.exc).__name__}: "
                                                          f"{_first_line(s.exc)}")
            else:
                states[s.rank] = RankState(s.status)
        return states


class SimTracker(OpTracker):
    """Learns from Group the text of the op a rank waits in, for the deadlock report."""

    def __init__(self, scheduler: Scheduler, rank: int):
        self._scheduler = scheduler
        self._slot = scheduler.slots[rank]

    def begin(self, op: str, waits_for: tuple[int, ...], collective: str = "", frame=None) -> None:
        slot = self._slot
        slot.op, slot.waits_for, slot.collective = self.op_text(op, frame), waits_for, collective

    def end(self) -> None:
        self._slot.op = ""

    def snapshot(self) -> dict[int, RankState]:
        return self._scheduler.states()


def _first_line(exc: BaseException | None) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "(no message)"
