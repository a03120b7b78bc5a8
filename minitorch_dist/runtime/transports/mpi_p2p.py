"""Point-to-point on the mpi backend: every message straight to its receive, no thread between.

A Group message is one MPI message on the header communicator: the wire header (wire.py)
and, for payloads up to INLINE_BYTES, the payload itself. A larger payload follows on the
data communicator, zero-copy. Both use MPI tag (user tag << seq_bits) | sequence number:
the k-th message from a to b with tag t meets b's k-th receive from a with tag t (MPI keeps
messages with equal source and tag in order). irecv posts both receives at once, the header's
into a pooled CONTROL_BYTES buffer that every header message fits (so a wrong-size receive
still reads the sender's header); the rank thread that waits on it polls MPI itself, checks the header
(MessageMismatchError naming both shapes) and copies the inline payload.

Why not framing.Framer's listener thread (mpi used to route every header through it): a hop
through another thread costs a wake-up and a GIL hand-off per message (14x raw mpi4py's time
at 1 KB). MPI matches posted receives itself, and progresses them whenever any thread of the
process is in MPI: the rank thread's own polls, or the progress thread (mpi_progress) when
rank code is elsewhere; so an isend waited before its irecv still completes.

A send whose payload is inline is buffered (MPI's eager send; gloo's small sends do the same):
its payload was copied into the message, so its handle is done at once, and its request is
kept here until it completes. After a mismatch, a payload receive no payload will come for is
cancelled, and a payload that no receive will take is drained into scratch, so its send
completes. Requests whose Work was dropped (a handle never waited, a deadline) stay here, with
their buffers, until MPI is done with them; close() drains messages nobody received, so that
a communicator made later (MPI reuses their ids) never meets them.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict, deque

import torch

from ..backend import Work
from ..errors import MessageMismatchError
from .framing_works import copy_inline
from .mpi_progress import _host, _mpi, _raw, _wait_request, settled
from .wire import CONTROL_BYTES, INLINE_BYTES, check_match, decode_header, write_header

_POOL = 16          # control buffers kept for reuse (MPI moves a reused buffer faster, and no allocation)
_KEEP_SENDS = 8     # buffered sends in flight before isend looks for completed ones itself


class _Control:
    """A CONTROL_BYTES buffer for one control message, with its address and MPI buffer made once."""

    __slots__ = ("tensor", "address", "mem")

    def __init__(self):
        self.tensor = torch.empty(CONTROL_BYTES, dtype=torch.uint8)
        self.address = self.tensor.data_ptr()
        self.mem = _mpi().buffer.fromaddress(self.address, CONTROL_BYTES)


class Sent(Work):
    """A buffered send: done at once (DirectP2P._sending keeps its request until it completes)."""

    def wait(self, timeout: float | None) -> None:
        return None

    def finish_now(self) -> bool:
        return True


_SENT = Sent()


class _Requests(Work):
    """MPI requests waited in order; their buffers (`keep`) go to the orphans if dropped first."""

    def __init__(self, p2p: "DirectP2P", reqs: list, keep):
        self._p2p, self._reqs, self._keep = p2p, reqs, keep

    def wait(self, timeout: float | None) -> None:
        end = None if timeout is None else time.perf_counter() + timeout
        self._p2p.defer()
        while self._reqs:
            _wait_request(self._reqs[0], None if end is None else max(0.0, end - time.perf_counter()))
            self._reqs.pop(0)
        self._keep = None

    def __del__(self):
        if self._reqs:
            self._p2p.orphan(self._reqs, self._keep)


class DirectRecv(_Requests):
    """A Group receive: its header message (with any inline payload), then its payload."""

    def __init__(self, p2p, tensor, src, tag, seq, op, head, control, data, host):
        super().__init__(p2p, [head] if data is None else [head, data], (control, tensor, host))
        self._tensor, self._src, self._tag, self._seq, self._op = tensor, src, tag, seq, op
        self._control, self._host = control, host
        self.error: BaseException | None = None

    def wait(self, timeout: float | None) -> None:
        if self.error is not None:
            raise self.error
        if self._control is not None:
            start = time.perf_counter()
            self._p2p.defer()
            _wait_request(self._reqs[0], timeout)      # (a DeadlineExpired: it may be waited on again)
            self._reqs.pop(0)
            control, self._control = self._control, None
            try:
                self._check(control.tensor)
            except MessageMismatchError as exc:
                self.error = exc
                raise
            finally:
                self._p2p.recycle(control)
            if not self._reqs:
                self._keep = None
                return
            timeout = None if timeout is None else max(0.0, timeout - (time.perf_counter() - start))
        super().wait(timeout)
        if self._host is not None:                    # a CUDA tensor's payload came to a host copy
            self._tensor.copy_(self._host)
            self._host = None

    def _check(self, head: torch.Tensor) -> None:
        """The header is here: check it against the buffer, then take the inline payload."""
        _, sent_op, dtype, shape, tag, _, _ = decode_header(head)
        tensor = self._tensor
        if tensor.dtype != dtype or tensor.shape != shape:
            sent = dtype.itemsize * math.prod(shape)
            self._p2p.settle(self._reqs, self._keep, sent if sent > INLINE_BYTES else 0, self._src, self._tag,
                             self._seq)
            self._reqs, self._keep = [], None
            p2p = self._p2p
            check_match(tensor, dtype, shape, sent_op, self._op, p2p.name(p2p.rank), p2p.name(self._src), tag)
        nbytes = tensor.numel() * tensor.element_size()
        if 0 < nbytes <= INLINE_BYTES:
            copy_inline(tensor, head, nbytes)


class DirectP2P:
    """Group sends and receives over MPI communicators `head` (headers) and `data` (payloads).

    `name(rank)` names a rank in error messages; `defer()` tells the progress thread that rank
    code polls MPI now.
    """

    def __init__(self, head, data, rank: int, seq_bits: int, name, defer):
        self._head, self._data, self.rank, self.name = head, data, rank, name
        self._seq_bits, self._seq_mask = seq_bits, (1 << seq_bits) - 1
        self.defer = defer
        self._sent: dict = defaultdict(int)       # (dst, tag) -> messages sent so far
        self._recvd: dict = defaultdict(int)      # (src, tag) -> receives posted so far
        self._sending: deque = deque()            # (request, control) of buffered sends in flight
        self._orphans: list = []                  # (requests, buffers) nobody waits for any more
        self._pool: list[_Control] = []           # free control buffers
        self._byte = _mpi().BYTE

    def _mpi_tag(self, tag: int, seq: int) -> int:
        """The MPI tag of message `seq` on user tag `tag` (MPI keeps equal tags from a source in order)."""
        return (tag << self._seq_bits) | (seq & self._seq_mask)

    def _take(self) -> _Control:
        return self._pool.pop() if self._pool else _Control()

    def recycle(self, control: _Control) -> None:
        if len(self._pool) < _POOL:
            self._pool.append(control)

    def isend(self, tensor: torch.Tensor, dst: int, tag: int, op: str) -> Work:
        seq = self._sent[dst, tag]
        control = self._take()
        length = write_header(control.address, tensor, op, tag, seq, self.rank)   # raises on bad input
        self._sent[dst, tag] = seq + 1
        mpi_tag = self._mpi_tag(tag, seq)
        head = self._head.Isend([control.mem, length, self._byte], dst, mpi_tag)
        if tensor.numel() * tensor.element_size() <= INLINE_BYTES:
            self._sending.append((head, control))
            if len(self._sending) > _KEEP_SENDS:
                self._sent_done()
            return _SENT
        host = _host(tensor)
        return _Requests(self, [head, self._data.Isend(_raw(host), dst, mpi_tag)], (control, tensor, host))

    def _sent_done(self) -> None:
        """Recycle the buffers of buffered sends that completed, oldest first (one in flight holds
        back younger ones). Called by irecv, off the path of a ping-pong's reply, and by isend
        past _KEEP_SENDS."""
        sending = self._sending
        while sending and sending[0][0].Test():
            self.recycle(sending.popleft()[1])

    def irecv(self, tensor: torch.Tensor, src: int, tag: int, op: str) -> Work:
        if self._sending:
            self._sent_done()
        seq = self._recvd[src, tag]
        self._recvd[src, tag] = seq + 1
        mpi_tag = self._mpi_tag(tag, seq)
        control = self._take()
        head = self._head.Irecv([control.mem, self._byte], src, mpi_tag)
        data = host = None
        if tensor.numel() * tensor.element_size() > INLINE_BYTES:
            host = _host(tensor, copy=False)
            data = self._data.Irecv(_raw(host), src, mpi_tag)
            host = None if host is tensor else host
        return DirectRecv(self, tensor, src, tag, seq, op, head, control, data, host)

    def settle(self, reqs: list, keep, sent_payload: int, src: int, tag: int, seq: int) -> None:
        """A receive that did not match its message: its own payload receive (`reqs`, into
        `keep`) is cancelled if no payload comes, else left to take it (MPI reports a larger one
        as a truncation), and a payload of `sent_payload` bytes that no receive of ours takes is
        drained into scratch, so the sender's send completes."""
        if reqs:
            if not sent_payload:
                reqs[0].Cancel()
            self.orphan(reqs, keep)
        elif sent_payload:
            scratch = torch.empty(sent_payload, dtype=torch.uint8)
            self.orphan([self._data.Irecv(_raw(scratch), src, self._mpi_tag(tag, seq))], scratch)

    def orphan(self, reqs: list, keep) -> None:
        """Keep `reqs` and their buffers until MPI is done with them."""
        if _mpi().Is_finalized():       # a Work freed as the process ends: nothing to keep
            return
        self._orphans = [o for o in self._orphans if not all(settled(r) for r in o[0])]
        self._orphans.append((list(reqs), keep))

    def close(self) -> list:
        """Local, once every peer has stopped sending: receive what nobody received, cancel
        receives nothing will fill; returns the buffers MPI may still read (sends never received)."""
        MPI = _mpi()
        status = MPI.Status()
        for comm in (self._head, self._data):
            while (message := comm.Improbe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)) is not None:
                message.Recv([bytearray(status.Get_count(MPI.BYTE)), MPI.BYTE])
        for reqs, _ in self._orphans:
            for req in reqs:
                if not settled(req):
                    req.Cancel()
        left = [o for o in self._orphans if not all(settled(r) for r in o[0])]
        left += [s for s in self._sending if not settled(s[0])]
        self._orphans, self._sending = [], deque()
        return left
