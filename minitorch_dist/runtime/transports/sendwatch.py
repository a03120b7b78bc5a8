"""The watch thread of gloo's direct sends (framing.py): copies of headers to the receiver's listener.

A direct message goes on a wire tag of its own straight to its receive, so gloo moves it only
once that receive is posted. Two kinds of send need more, and get a copy of their header sent to
the receiver's listener thread (kind _COPY), once:
- a payload send not done COPY_AFTER seconds after it was posted: its receive may be posted with
  the wrong size and never waited on; the listener's match finds the mismatch and frees the sender;
- a small send that a complete() has waited on for EAGER_AFTER seconds (Framer._retire, close()):
  the listener takes the direct message and keeps the copy for the receive to come (MPI's eager
  send: a small send never waits for its receive to be posted).
The thread looks every COPY_AFTER / 2 s, and every EAGER_AFTER s for a while after a waiting
complete() woke it. Nothing wakes it per message: a wake-up per send cost a thread switch and
the GIL's hand-off every time (about 2x raw gloo's time for a 1 KB ping-pong).
"""

from __future__ import annotations

import threading
import time
from typing import Callable

COPY_AFTER = 0.2    # seconds a payload send may stay undone before its header goes to the listener too
EAGER_AFTER = 0.0005  # seconds a complete() of a small send may wait before its copy goes there (2 ms
# made a send-first exchange of 1 KB at 4 ranks 2.7x slower than the old listener path; 0.5 ms: 1.1-1.4x)


class SendWatch:
    """sends() -> the sends in flight (SendWork, BufferedSend); copy(send) -> the raw send of its
    header's copy (None if it was copied before). run() is the thread's loop; stop() ends it."""

    def __init__(self, sends: Callable[[], list], copy: Callable):
        self._sends, self._copy = sends, copy
        self._stop = threading.Event()
        self._armed = threading.Event()     # set by wake() while the thread is not looking every EAGER_AFTER
        self._idle = True

    def wake(self) -> None:
        """A complete() of a small send begins: look soon (cheap while the thread is busy)."""
        if self._idle:
            self._armed.set()

    def stop(self) -> None:
        self._stop.set()
        self._armed.set()

    def run(self) -> None:
        busy_until = 0.0
        try:
            while not self._stop.is_set():
                self._idle = time.monotonic() >= busy_until
                if not self._idle or self._armed.wait(COPY_AFTER / 2):
                    time.sleep(EAGER_AFTER)
                self._idle = False
                self._armed.clear()
                now = time.monotonic()
                for work in self._sends():
                    if work.copied or (work.buffered and work.raw is None):
                        continue
                    blocked = work.blocked_at
                    if blocked is not None:
                        busy_until = now + 50 * EAGER_AFTER
                    if (blocked is not None and now - blocked >= EAGER_AFTER) or \
                            (not work.buffered and now - work.posted >= COPY_AFTER):
                        copy = self._copy(work)
                        if copy is not None:
                            copy.wait(None)
        except BaseException:  # noqa: BLE001 - the connection broke: the waits report it
            return
