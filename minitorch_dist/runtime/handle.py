"""Handles of posted operations: isend/irecv (Handle) and asynchronous collectives.

A Handle freed without a call to wait() warns (UnwaitedHandleWarning, naming the rank, op and peer):
its message is still delivered (the backend keeps the work alive), but the program never
learns whether it went through, and a send's tensor may not be modified until it has.
"""

from __future__ import annotations

import warnings

import torch

from .backend import Work


class UnwaitedHandleWarning(RuntimeWarning):
    """An isend/irecv handle was freed without wait()."""


class Handle:
    """A posted isend or irecv. `wait()` blocks until it is done and returns the tensor."""

    _waited = True      # until __init__ has run: nothing to warn about

    def __init__(self, group, work: Work, op: str, peer: int, tag: int,
                 nbytes: int, start: float, result: torch.Tensor, staging: torch.Tensor | None):
        self._group, self._work, self._op, self._peer, self._tag = group, work, op, peer, tag
        self._nbytes, self._start, self._result, self._staging = nbytes, start, result, staging
        self._done = self._waited = False

    @property
    def done(self) -> bool:
        """True once wait() has returned."""
        return self._done

    def wait(self) -> torch.Tensor:
        """Block until the operation is done (or its deadline passes); return the tensor."""
        if self._done:
            return self._result
        self._waited = True
        g = self._group
        g._wait_p2p(self._work, self._op, g.ranks[self._peer], self._tag)
        if self._staging is not None:
            self._result.copy_(self._staging)
        self._done = True
        g._ctx.recorder.event(self._op, g.ranks[self._peer], self._tag, self._nbytes,
                              self._start, g._clock(), g.name)
        return self._result

    def __del__(self):
        if self._waited:        # waited (a wait that raised has reported its own error)
            return
        try:
            g = self._group
            way = "from" if self._op in ("recv", "irecv") else "to"
            warnings.warn(f"rank {g.world_rank}: the handle of {self._op} {way} rank {g.ranks[self._peer]} "
                          f"(tag {self._tag}, {self._nbytes} bytes) was freed without wait(); the message is "
                          f"still delivered, but call wait() on every handle (or wait_all(handles))",
                          UnwaitedHandleWarning, stacklevel=2)
        except Exception:  # noqa: BLE001 - interpreter shutdown: nothing to say it with
            pass


class CollectiveHandle:
    """A started collective (async_op=True). `wait()` blocks until it is done and returns
    its result (the reduced tensor, the gathered one, ...). The trace event spans from the
    start to the end of the wait, so overlap with computation shows in the timeline."""

    def __init__(self, group, work: Work, op: str, seq: int, nbytes: int, start: float, finish):
        self._group, self._work, self._op, self._seq = group, work, op, seq
        self._nbytes, self._start, self._finish = nbytes, start, finish
        self._done, self._result = False, None

    @property
    def done(self) -> bool:
        """True once wait() has returned."""
        return self._done

    def wait(self):
        """Block until every rank's part is done (or the deadline passes); return the result."""
        if self._done:
            return self._result
        g = self._group
        g._wait(self._work, f"{self._op}(group={g.name}, call #{self._seq})", g.ranks,
                collective=f"{g.name}#{self._seq}")
        self._result = self._finish() if self._finish is not None else None
        self._done = True
        g._ctx.recorder.event(self._op, None, None, self._nbytes, self._start, g._clock(), g.name)
        return self._result


def wait_all(handles) -> list[torch.Tensor]:
    """Wait on every handle, in order; return their tensors."""
    return [h.wait() for h in handles]
