"""The Works a Framer hands out: a framed send and a framed receive (see framing.py).

A receive is done in up to three waits: its header (matched by the listener thread, or,
for a gloo direct message, received on its own wire tag and checked by the waiting
thread itself), then its payload parts in order (on gloo they were written before the header,
so these waits mostly find them done). A wait cut short by a deadline may be waited on again.
On gloo the Framer keeps every work alive until it was waited to the end (or, for a send, until
close()); a small send (BufferedSend) is done at once, and the Framer completes it later. Spares
keeps the buffers of completed messages for the next ones.
"""

from __future__ import annotations

import ctypes
import threading
import time
from typing import Callable

import torch

from ..backend import DeadlineExpired, Work
from ..errors import MessageMismatchError, PeerFailedError
from .wire import HEADER_BYTES, as_bytes, control_bytes

SPARE_HEADERS = 4       # header receive buffers (64 KiB each) kept for the next direct receives
SPARE_SIZES = 16        # message lengths whose completed small sends' buffers are kept


def copy_inline(tensor: torch.Tensor, control: torch.Tensor, nbytes: int) -> None:
    """Fill contiguous `tensor` with the inline payload of control message `control`."""
    if tensor.is_cpu and not tensor.requires_grad:   # the usual case, without torch ops
        ctypes.memmove(tensor.data_ptr(), control.data_ptr() + HEADER_BYTES, nbytes)
        torch.autograd.graph.increment_version(tensor)
    else:
        as_bytes(tensor).copy_(control[HEADER_BYTES:HEADER_BYTES + nbytes])


class Ready:
    """A one-shot flag to wait on (threading.Event's set/is_set/wait at a tenth of its cost to make:
    one is made per receive)."""

    __slots__ = ("_lock", "_set")

    def __init__(self):
        self._lock = threading.Lock()
        self._lock.acquire()
        self._set = False

    def set(self) -> None:
        if not self._set:
            self._set = True
            try:
                self._lock.release()
            except RuntimeError:    # set twice at once (a failure and a match): already released
                pass

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float | None = None) -> bool:
        if not self._set and self._lock.acquire(timeout=-1 if timeout is None else timeout):
            self._lock.release()
        return self._set


def _no_limit() -> None:
    return None


def _left(end: float | None) -> float | None:
    """Seconds from now until monotonic time `end` (None: no limit)."""
    return None if end is None else max(0.0, end - time.monotonic())


def waiter(timeout: float | None):
    """left() -> seconds left of `timeout` from now on (None: no limit)."""
    if timeout is None:
        return _no_limit
    end = time.monotonic() + timeout
    return lambda: _left(end)


class Spares:
    """Buffers of completed gloo messages, kept for the next ones: a new 64 KiB buffer per
    receive and a new control message per send cost more than the rest of a small message's
    framing. `headers`: header receive buffers (RecvWork.wait gives one back once its receive is
    complete and read); control(nbytes): a control buffer for a payload of nbytes, or None;
    give_control(buf): the buffer of a small send that completed."""

    def __init__(self):
        self.headers: list[torch.Tensor] = []
        self._controls: dict[int, list[torch.Tensor]] = {}     # length -> buffers

    def control(self, nbytes: int) -> torch.Tensor | None:
        free = self._controls.get(control_bytes(nbytes))
        return free.pop() if free else None

    def give_control(self, control: torch.Tensor) -> None:
        free = self._controls.get(control.numel())
        if free is None:
            if len(self._controls) >= SPARE_SIZES:
                self._controls.clear()
            free = self._controls[control.numel()] = []
        if len(free) < 2:
            free.append(control)


class SendWork(Work):
    """A framed send: the header and the payload's raw messages, all posted at once, waited in
    the order of `works` (on gloo the header first: posted last, it completes last).

    It records when it was posted and whether its header was copied to the receiver's
    listener (framing.Framer._watch, for gloo direct sends); `done(work)` runs once the
    wait has seen every raw message through.
    """

    buffered = False

    def __init__(self, works: list[Work], keep, dst: int, done: Callable | None = None):
        self._works = works
        self.keep = keep                    # (control, tensor): buffers must outlive the transfer
        self.dst = dst
        self.posted = time.monotonic()
        self.copied = False
        self.blocked_at: float | None = None
        self._done = done

    def wait(self, timeout: float | None) -> None:
        left = waiter(timeout)
        while self._works:
            self._works[0].wait(left())
            self._works.pop(0)
        if self._done is not None:
            self._done(self)
            self._done = None

    complete = wait


class BufferedSend(Work):
    """A small gloo direct send (one raw message: header and payload). The payload was copied
    into the message, so the sender's tensor is free at once (MPI's eager send): the handle is
    done without waiting (finish_now), and the Framer keeps the raw send alive until complete()
    (Framer._retire, close()). complete() sets blocked_at and, with wake, wakes the Framer's
    watch thread, which copies the message to the receiver's listener if the wait lasts."""

    __slots__ = ("raw", "keep", "dst", "copied", "blocked_at", "_wake")
    buffered = True

    def __init__(self, raw: Work, control: torch.Tensor, dst: int, wake: Callable):
        self.raw: Work | None = raw
        self.keep = (control, None)
        self.dst = dst
        self.copied = False
        self.blocked_at: float | None = None
        self._wake = wake

    def finish_now(self) -> bool:
        return True

    def wait(self, timeout: float | None) -> None:
        return None

    def complete(self, timeout: float | None, wake: bool = True) -> None:
        if self.raw is not None:
            self.blocked_at = time.monotonic()
            if wake:
                self._wake()
            self.raw.wait(timeout)
            self.raw = None


class RecvWork(Work):
    """A framed receive. `header` (a raw receive of the header on its own wire tag, into
    `header_buf`) is set for a gloo direct receive; `claim(work)` checks the header it brought.
    `spare`: where `header_buf` goes once its raw receive is complete (the Framer reuses it)."""

    __slots__ = ("tensor", "src", "tag", "seq", "op", "ready", "parts", "wire_tags", "error",
                 "header", "header_buf", "claim", "done", "spare")

    def __init__(self, tensor: torch.Tensor, src: int, tag: int, seq: int, op: str):
        self.tensor, self.src, self.tag, self.seq, self.op = tensor, src, tag, seq, op
        self.ready = Ready()                # set once the header was matched (or failed)
        self.parts: list[Work] = []         # the payload's raw receives, in order
        self.wire_tags: list[int] = []      # their wire tags (and the header's, when direct)
        self.error: BaseException | None = None
        self.header: Work | None = None
        self.header_buf: torch.Tensor | None = None
        self.claim: Callable | None = None
        self.done: Callable | None = None   # done(work) once waited to the end (or failed)
        self.spare: list | None = None

    def out_of_step(self, why: str, receiver: str, name: Callable[[int], str]) -> MessageMismatchError:
        """The error of a receive that an earlier mismatch left out of step (gloo)."""
        return MessageMismatchError(
            f"{self.op} on {receiver} from {name(self.src)} (tag {self.tag}): "
            f"this message fits its buffer, but {why}; on gloo that left receives of this size "
            f"and tag out of step, so this one cannot be trusted. What to do: fix the earlier "
            f"receive's buffer (or use another tag after a mismatch you catch).")

    def check_in_step(self, skewed: dict, receiver: str, name: Callable[[int], str]) -> None:
        """Raise if an earlier mismatch left a wire tag of this receive out of step:
        skewed = {wire tag: (why, after seq, before seq or None)} of its sender."""
        for wire_tag in self.wire_tags:
            why, after, before = skewed.get(wire_tag, (None, 0, 0))
            if why is not None and after < self.seq and (before is None or self.seq < before):
                raise self.out_of_step(why, receiver, name)

    def fail(self, exc: BaseException) -> None:
        self.error = PeerFailedError(f"the connection broke while receiving from rank {self.src} "
                                     f"({type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}); "
                                     f"another rank probably failed first")
        self.ready.set()

    def wait(self, timeout: float | None) -> None:
        # The first raw wait takes `timeout` as it is (gloo.py caches its timedelta); later
        # ones what is left of it.
        end = None if timeout is None else time.monotonic() + timeout
        header = self.header
        if header is not None:
            # Once the listener has matched this receive (a copy of the header), the header receive
            # is still filled, by the message itself; should that fail, the error the listener
            # found is the one to report.
            matched, received = self.ready._set, False
            if not isinstance(self.error, PeerFailedError):
                try:
                    header.wait(timeout)
                    received = True
                except (DeadlineExpired, PeerFailedError):
                    if self.error is None:
                        raise
                    matched = True
            if not matched:
                self.claim(self)
            self.header = None
            spare = self.spare
            if received and spare is not None and len(spare) < SPARE_HEADERS:
                spare.append(self.header_buf)   # complete and read: the next receive may take it
                self.header_buf = None
        ready = self.ready
        if not ready._set and not ready.wait(_left(end)):
            raise DeadlineExpired(f"recv from {self.src} tag {self.tag}")
        if self.error is not None:
            self._finish()
            raise self.error
        parts = self.parts
        while parts:
            parts[0].wait(_left(end))
            parts.pop(0)
        self._finish()

    def _finish(self) -> None:
        if self.done is not None:
            self.done(self)
            self.done = None
