"""What each rank is doing right now, for deadlock reports on the process backends.

The pending operation of a rank is kept in memory (setting two attributes: no
cost on the fast path; the source line it was called from is found from its frame only
when the state is published or reported). A watchdog thread publishes it to the job's key-value
store (a torch TCPStore) once it has been pending for `publish_after` seconds.
When a rank's deadline expires it reads every rank's published state from the
store and builds the wait-for report (see deadlock.py). Sim needs none of this:
its scheduler sees every rank.
"""

from __future__ import annotations

import threading
import time

from ..checks import caller_line
from .deadlock import BLOCKED, FAILED, FINISHED, RUNNING, UNKNOWN, RankState


class OpTracker:
    """No-op tracker (sim, single rank). Subclasses publish states somewhere others can read.

    begin(op, waits_for, collective, frame): `op` is the op's text, or a tuple that op_text() turns
    into it; `frame` is the frame of the blocking call (the report names the first line outside the
    runtime that led to it: op_text)."""

    def begin(self, op: str, waits_for: tuple[int, ...], collective: str = "", frame=None) -> None:
        pass

    @staticmethod
    def op_text(op: str | tuple, frame) -> str:
        """"recv(src=1, tag=0) at minitorch_dist/collectives/ring.py:75 (all_gather_)". `op` may be
        a tuple (op, "src" or "dst", peer, tag): a send or receive's text, made only when needed."""
        if type(op) is tuple:
            op = "%s(%s=%s, tag=%s)" % op
        return op if frame is None else f"{op} {caller_line(frame)}"

    def end(self) -> None:
        pass

    def set_status(self, status: str, detail: str = "") -> None:
        pass

    def snapshot(self) -> dict[int, RankState]:
        return {}

    def close(self) -> None:
        pass


def _key(prefix: str, rank: int) -> str:
    return f"{prefix}/state/{rank}"


def read_board(store, world_size: int, prefix: str) -> dict[int, RankState]:
    """Every published rank state under `prefix`; blocked ones with `since` = seconds blocked."""
    states: dict[int, RankState] = {}
    now = time.time()
    for rank in range(world_size):
        key = _key(prefix, rank)
        try:
            if not store.check([key]):
                continue
            state = RankState.from_text(store.get(key).decode())
        except Exception as exc:  # noqa: BLE001 - report what we can
            state = RankState(UNKNOWN, detail=f"(store unreadable: {exc})")
        if state.status == BLOCKED:
            state = RankState(BLOCKED, state.op, state.waits_for, state.collective, since=now - state.since)
        states[rank] = state
    return states


class BoardTracker(OpTracker):
    """Publishes this rank's state under `{prefix}/state/{rank}` in `store` (a c10d Store)."""

    def __init__(self, store, rank: int, world_size: int, prefix: str, publish_after: float = 0.1):
        self._store, self._rank, self._world_size = store, rank, world_size
        self._prefix = prefix
        self._publish_after = publish_after
        self._lock = threading.Lock()          # guards the store client and the fields below
        self._pending: tuple | None = None      # (op, waits_for, collective, start, frame)
        self._version = 0
        self._published_version = -1
        self._status = RankState(RUNNING)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="minitorch_dist-watchdog", daemon=True)
        self._thread.start()

    def _key(self, rank: int) -> str:
        return _key(self._prefix, rank)

    def begin(self, op: str, waits_for: tuple[int, ...], collective: str = "", frame=None) -> None:
        self._pending = (op, waits_for, collective, time.time(), frame)
        self._version += 1

    def end(self) -> None:
        self._pending = None
        self._version += 1
        if self._published_version >= 0:        # a blocked state is on the board: take it back
            with self._lock:
                self._published_version = -1
                self._store.set(self._key(self._rank), self._status.to_text())

    def set_status(self, status: str, detail: str = "") -> None:
        self._status = RankState(status, detail=detail)
        with self._lock:
            self._store.set(self._key(self._rank), self._status.to_text())

    def _watch(self) -> None:
        while not self._stop.wait(self._publish_after / 2):
            pending, version = self._pending, self._version
            if pending is None or version == self._published_version:
                continue
            op, waits_for, collective, start, frame = pending
            if time.time() - start < self._publish_after:
                continue
            op = self.op_text(op, frame)
            with self._lock:
                if version != self._version:    # the op ended meanwhile
                    continue
                state = RankState(BLOCKED, op, waits_for, collective, since=start)
                try:
                    self._store.set(self._key(self._rank), state.to_text())
                except Exception:               # the store is gone: the job is ending
                    return
                self._published_version = version

    def snapshot(self) -> dict[int, RankState]:
        """Every rank's state; blocked ones with `since` = seconds blocked so far."""
        with self._lock:
            states = read_board(self._store, self._world_size, self._prefix)
        pending = self._pending
        if pending is not None:                  # our own state, fresh from memory
            op, waits_for, collective, start, frame = pending
            states[self._rank] = RankState(BLOCKED, self.op_text(op, frame), waits_for, collective,
                                           since=time.time() - start)
        return states

    def close(self) -> None:
        self._stop.set()


__all__ = ["OpTracker", "BoardTracker", "read_board", "RUNNING", "FINISHED", "FAILED"]
