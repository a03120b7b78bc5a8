"""Progress for the mpi backend: polled waits with deadlines, and the Framer's listener.

MPI_Wait has no timeout, so rank code polls its requests (spin, then naps with a
backoff capped at 1 ms). The Framer's listener thread receives control messages from
any source; _Listener decides when it may sit in MPI and when it must leave the CPU
and MPI to rank code (two threads in MPI slow each other down).
"""

from __future__ import annotations

import os
import sys
import threading
import time

import torch

from ..backend import DeadlineExpired, Work
from ..env import oversubscribed
from ..errors import PeerFailedError

# busy-poll this long first: a message in flight completes at full speed. Not at all when the
# node has more ranks than cores: a spinning rank then starves the one it waits for (8 ranks on
# 2 cores, the every-op script: 21-25 s spinning, 16-18 s napping with MPICH's heavy yield).
_SPIN_S = 0.0 if oversubscribed() else 5e-3
_NAP_MIN_S = 1e-5     # then sleep between polls, doubling from this...
_NAP_MAX_S = 1e-3     # ...up to this: a long wait costs little CPU and is at most ~1 ms late
_LISTEN_NAP_S = 1e-3  # the idle listener's nap: rank code keeps the CPU and drives MPI

def _mpi():
    """The mpi4py.MPI module (initialises MPI on first call)."""
    if "mpi4py.MPI" not in sys.modules and oversubscribed():
        # MPICH then naps (nanosleep) where it would call sched_yield when handing its lock
        # between our two threads: 8 ranks on 2 cores, every-op script 16-18 s, not 18-24 s
        os.environ.setdefault("MPIR_CVAR_ENABLE_HEAVY_YIELD", "1")
    from mpi4py import MPI
    return MPI


def _wait_request(req, timeout: float | None) -> None:
    """Poll `req` until it completes: spin for _SPIN_S, then nap with a growing backoff.

    Raises DeadlineExpired when `timeout` seconds (None: no limit) pass first.
    """
    if req.Test():
        return
    start = time.perf_counter()
    end = None if timeout is None else start + timeout
    nap = _NAP_MIN_S
    while True:
        now = time.perf_counter()
        if end is not None and now >= end:
            raise DeadlineExpired(f"MPI request not complete after {timeout:g} s")
        if now - start >= _SPIN_S:
            time.sleep(nap if end is None else min(nap, end - now))
            nap = min(2 * nap, _NAP_MAX_S)
        if req.Test():
            return


class _RequestWork(Work):
    """One MPI request. `keep` holds its buffers alive; `finish` (copy back) runs once, after."""

    def __init__(self, backend, req, keep, finish=None):
        self._backend, self._req, self._keep, self._finish = backend, req, keep, finish

    def wait(self, timeout: float | None) -> None:
        if self._req is None:
            return
        self._backend._listener.defer()    # rank code drives MPI now: the listener steps back
        try:
            _wait_request(self._req, timeout)
        except DeadlineExpired:            # MPI may still write there: keep it until it is done
            orphans = self._backend._orphans
            orphans[:] = [o for o in orphans if not o[0].Test()] + [(self._req, self._keep)]
            raise
        self._req, self._keep = None, None
        if self._finish is not None:
            self._finish()
            self._finish = None


class _Listener:
    """How the Framer's listener thread waits for control messages on `ctrl` (any source).

    Hot (rank code waits on a receive, for up to _SPIN_S): it blocks in MPI_Wait, in C,
    without the GIL, and sees the header within microseconds. Rank code ends a hot wait
    by sending its own rank a byte on `ctrl` (a ping, dropped here); the first header
    delivered ends it too, so that rank code, about to wake, has the CPU.
    Idle: it polls every 1 ms, and not at all for _SPIN_S after rank code started an
    MPI wait of its own (defer): whichever thread is in MPI when a large message flows
    copies all of it, and two threads in MPI slow each other down. It never spins in
    Python: a thread spinning on MPI_Test starves rank code of the GIL.
    """

    def __init__(self, ctrl, rank: int):
        self._ctrl, self._rank = ctrl, rank
        self._lock = threading.Lock()
        self._wake = threading.Event()       # set when rank code starts waiting on a receive
        self.hot = self._blocking = self._closing = False
        self._defer_until = 0.0
        self.thread: threading.Thread | None = None
        self._ping = bytearray(1)

    def heat(self) -> None:
        self.hot = True
        self._wake.set()

    def defer(self) -> None:
        """Rank code polls MPI itself (or is about to): no listener MPI calls for _SPIN_S."""
        if self.hot:
            self.cool()
        self._defer_until = time.perf_counter() + _SPIN_S

    def cool(self) -> None:
        """Back to naps; ping the listener out of MPI_Wait if it is blocked there."""
        with self._lock:
            self.hot, ping, self._blocking = False, self._blocking, False
        if ping:
            self._ctrl.Isend([self._ping, _mpi().BYTE], self._rank, 0).Free()

    def post(self, buf: torch.Tensor) -> Work:
        """The listener thread's receive of its next control message, into `buf`."""
        if self._closing:
            raise PeerFailedError(f"rank {self._rank}: the mpi group was closed")
        self.thread = threading.current_thread()
        return _ListenWork(self, self._ctrl.Irecv(_raw(buf), _mpi().ANY_SOURCE, 0), buf)

    def wait(self, req, buf) -> None:
        """Until `req` (an any-source receive into `buf`) holds a message from a peer."""
        status = _mpi().Status()
        try:
            while True:
                with self._lock:
                    self._blocking = self.hot and not self._closing
                if self._blocking:
                    req.Wait(status)
                elif time.perf_counter() < self._defer_until or not req.Test(status):
                    if self._closing:
                        req.Cancel()
                        req.Wait()
                        raise PeerFailedError(f"rank {self._rank}: the mpi group was closed")
                    if self._wake.wait(_LISTEN_NAP_S):     # rank code began waiting on a receive
                        self._wake.clear()
                    continue
                if status.Get_source() != self._rank:
                    self.hot = False     # rank code is about to run: leave it the CPU
                    return
                req = self._ctrl.Irecv(_raw(buf), _mpi().ANY_SOURCE, 0)  # that was a ping
        finally:
            with self._lock:
                self._blocking = False

    def stop(self, timeout: float = 2.0) -> None:
        """Local: end the listener thread and its pending receive, so MPI can be finalised."""
        self._closing = True
        self.cool()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout)


class _ListenWork(Work):
    def __init__(self, listener: _Listener, req, buf: torch.Tensor):
        self._listener, self._req, self._buf = listener, req, buf

    def wait(self, timeout: float | None) -> None:   # the listener thread waits forever
        self._listener.wait(self._req, self._buf)


class _RecvWait(Work):
    """A Framer receive. Waiting on it makes the listener hot for up to _SPIN_S (never when
    oversubscribed: a hot listener spins in MPI_Wait).

    A longer wait goes on after the Framer's DeadlineExpired at _SPIN_S (its receives
    may be waited on again), with the listener back to naps.
    """

    def __init__(self, listener: _Listener, work: Work):
        self._listener, self._work = listener, work

    def wait(self, timeout: float | None) -> None:
        if _SPIN_S == 0:                     # oversubscribed: the listener keeps napping
            return self._work.wait(timeout)
        self._listener.heat()
        try:
            if timeout is None or timeout > _SPIN_S:
                start = time.perf_counter()
                try:
                    return self._work.wait(_SPIN_S)
                except DeadlineExpired:      # a long wait: the listener goes back to naps
                    self._listener.cool()
                timeout = None if timeout is None else timeout - (time.perf_counter() - start)
            self._work.wait(timeout)
        finally:
            self._listener.cool()


def _raw(t: torch.Tensor) -> list:
    """MPI message spec for the bytes of a contiguous CPU tensor: no copy, ~0.5 us."""
    MPI = _mpi()
    return [MPI.buffer.fromaddress(t.data_ptr(), t.numel() * t.element_size()), MPI.BYTE]
