"""Progress for the mpi backend: polled waits with deadlines, and the progress thread.

MPI_Wait has no timeout, so rank code polls its requests (spin, then naps with a
backoff capped at 1 ms). A Progress thread per group drives MPI while rank code does
not, and keeps out of MPI while rank code polls (two threads in MPI slow each other down).
"""

from __future__ import annotations

import os
import sys
import threading
import time

import torch

from ..backend import DeadlineExpired, Work
from ..env import oversubscribed

# busy-poll this long first: a message in flight completes at full speed. Not at all when the
# node has more ranks than cores: a spinning rank then starves the one it waits for (8 ranks on
# 2 cores, the every-op script: 21-25 s spinning, 16-18 s napping with MPICH's heavy yield).
_SPIN_S = 0.0 if oversubscribed() else 5e-3
_NAP_MIN_S = 1e-5     # then sleep between polls, doubling from this...
_NAP_MAX_S = 1e-3     # ...up to this: a long wait costs little CPU and is at most ~1 ms late
_PROGRESS_NAP_S = 1e-3  # the progress thread's nap: rank code keeps the CPU and drives MPI

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
        self._backend._p2p.defer()         # rank code drives MPI now: the progress thread steps back
        try:
            _wait_request(self._req, timeout)
        except DeadlineExpired:            # MPI may still write there: keep it until it is done
            self._backend._p2p.orphan([self._req], self._keep)
            raise
        self._req, self._keep = None, None
        if self._finish is not None:
            self._finish()
            self._finish = None


class Progress:
    """A thread that drives MPI while rank code does not (MPI moves messages only while a
    thread of the process is in MPI): a posted receive then takes its message, and a peer's
    send completes, whether or not this rank waits on it yet (an isend waited before the
    irecv it answers, compute overlapping a transfer).

    It polls every 1 ms (MPI_Test of a receive on `comm` that no message fills), and not at all for
    _SPIN_S after rank code started an MPI wait of its own (defer): whichever thread is in
    MPI when a large message flows copies all of it, and two threads in MPI slow each other
    down. It never spins or blocks in MPI (a thread spinning on MPI_Test starves rank code
    of the GIL; MPI_Wait would hold MPI's lock that rank code needs).
    """

    def __init__(self, comm, rank: int):
        self._comm = comm
        self._stop = threading.Event()
        self._defer_until = 0.0
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"minitorch_dist-mpi-progress-r{rank}")
        self.thread.start()

    def _run(self) -> None:
        MPI = _mpi()
        idle = self._comm.Irecv([bytearray(1), MPI.BYTE], MPI.ANY_SOURCE, 0)
        while not self._stop.wait(_PROGRESS_NAP_S):
            if time.perf_counter() >= self._defer_until:
                idle.Test()
        idle.Cancel()
        idle.Wait()

    def defer(self) -> None:
        """Rank code polls MPI itself (or is about to): no MPI calls here for _SPIN_S."""
        self._defer_until = time.perf_counter() + _SPIN_S

    def stop(self, timeout: float = 2.0) -> None:
        """Local: end the thread, so MPI can be finalised (a thread in MPI would crash it)."""
        self._stop.set()
        if self.thread is not threading.current_thread():
            self.thread.join(timeout)


def settled(req) -> bool:
    """Whether MPI is done with `req` (complete, cancelled, or failed: a truncated receive)."""
    try:
        return req.Test()
    except _mpi().Exception:
        return True


def _host(t: torch.Tensor, dtype: torch.dtype | None = None, copy: bool = True) -> torch.Tensor:
    """`t` itself when it is on the CPU with `dtype`; else a CPU copy (or empty buffer) of it."""
    dtype = t.dtype if dtype is None else dtype
    if t.device.type == "cpu" and t.dtype == dtype:
        return t
    return t.detach().to("cpu", dtype).contiguous() if copy else torch.empty(t.shape, dtype=dtype)


def _raw(t: torch.Tensor) -> list:
    """MPI message spec for the bytes of a contiguous CPU tensor: no copy, ~0.5 us."""
    MPI = _mpi()
    return [MPI.buffer.fromaddress(t.data_ptr(), t.numel() * t.element_size()), MPI.BYTE]
