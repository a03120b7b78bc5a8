"""Point-to-point messages on the sim backend: matching, the port model, the copies.

Matching: a message goes on the channel (group key, src, dst, tag); the k-th send
on a channel meets the k-th receive, first in first out (MPI's non-overtaking rule).
A channel's deques (scheduler.pending_sends / pending_recvs) are kept once made, even
when empty: sendrecv.py's fast path holds them.

Network (single port, full duplex): every rank has a send port and a receive port.
A message of n bytes from a to b holds a's send port and b's receive port for
alpha + n*beta seconds, from the earliest start >= ready at which both are free
(ports.py; with bookings in time order: max(ready, send_free[a], recv_free[b])):
    eager (n <= eager_limit):  ready = send posted
    rendezvous (larger):       ready = max(send posted, recv posted)
to end = start + alpha + n*beta. The send completes at `end`; the receive at
max(recv posted, end).

Eager sends copy the tensor when posted (the sender may reuse its buffer at once; the
copy is raw bytes for plain CPU tensors, payloads.py); rendezvous sends copy it
straight into the receive buffer when the receive is posted.
"""

from __future__ import annotations

from collections import deque

import torch

from ..backend import Work
from ..errors import MessageMismatchError
from ..transports.wire import check_match
from .payloads import snapshot, write
from .ports import book_transfer

MAX_IN_FLIGHT = 64   # buffered eager messages per rank before it lets others run first


class _P2PWork(Work):
    """What sends and receives share: waiting, finishing early, describing themselves."""

    __slots__ = ()
    _verb = ""          # "dst" or "src": the attribute naming the peer

    def wait(self, timeout: float | None) -> None:
        _wait(self)

    def finish_now(self) -> bool:
        """Work.finish_now: when done without error, advance the clock; True if so."""
        end = self.end
        if end is None or self.error is not None:
            return False
        slot = self.backend.slot
        if end > slot.clock:
            slot.clock = end
        return True

    def describe(self) -> tuple[str, tuple[int, ...], str]:
        """(op text, world ranks it waits for, collective key) for deadlock reports."""
        peer = self.backend.world_ranks[getattr(self, self._verb)]
        return f"{self.op}({self._verb}={peer}, tag={self.tag})", (peer,), ""


class SendWork(_P2PWork):
    """A posted send. `end` is the simulated time it completes, None until known."""

    __slots__ = ("backend", "dst", "tag", "op", "tensor", "posted", "eager", "arrival",
                 "end", "error", "waiter", "nbytes", "dtype", "shape")
    _verb = "dst"

    def __init__(self, backend, tensor: torch.Tensor, dst: int, tag: int, op: str,
                 posted: float, eager: bool, nbytes: int):
        self.backend, self.tensor, self.dst, self.tag, self.op = backend, tensor, dst, tag, op
        self.posted, self.eager, self.nbytes = posted, eager, nbytes
        self.arrival = None     # eager: when the message is at the receiver
        self.end = None
        self.error = None
        self.waiter = None


class RecvWork(_P2PWork):
    """A posted receive into `buffer`. `error` is a MessageMismatchError, raised by wait()."""

    __slots__ = ("backend", "src", "tag", "op", "buffer", "posted", "end", "error", "waiter")
    _verb = "src"

    def __init__(self, backend, buffer: torch.Tensor, src: int, tag: int, op: str, posted: float):
        self.backend, self.buffer, self.src, self.tag, self.op = backend, buffer, src, tag, op
        self.posted = posted
        self.end = None
        self.error = None
        self.waiter = None


class EagerCopy:
    """An eager message that sendrecv.py's fast path queued as a tuple (raw bytes, dtype, shape,
    arrival, ctypes array type), as _transfer reads a SendWork: already on its way, nobody
    waiting on its send."""

    __slots__ = ("tensor", "dtype", "shape", "arrival")
    eager, waiter, op = True, None, "sendrecv"

    def __init__(self, data: bytes, dtype: torch.dtype, shape, arrival: float, array=None):
        self.tensor, self.dtype, self.shape, self.arrival = data, dtype, shape, arrival


def _wait(work) -> None:
    """Work.wait: the clock jumps to `end` when the work is done, else the scheduler blocks."""
    end, slot = work.end, work.backend.slot
    if end is None or work.error is not None:
        work.backend.scheduler.wait(work.backend.me, work)
    elif end > slot.clock:
        slot.clock = end


def post_send(backend, tensor: torch.Tensor, dst: int, tag: int, op: str) -> SendWork:
    """Post a send of `tensor` from `backend`'s rank to its group rank `dst`. Cost: see module doc."""
    sched = backend.scheduler
    src_w, dst_w = backend.me, backend.world_ranks[dst]
    limit = sched.eager_limit
    nbytes = tensor.nbytes
    eager = limit is None or nbytes <= limit
    send = SendWork(backend, tensor, dst, tag, op, backend.slot.clock, eager, nbytes)
    key = (backend.key, src_w, dst_w, tag)
    recvs = sched.pending_recvs.get(key)
    if recvs:
        recv = recvs.popleft()       # an empty deque stays: sendrecv.py's channels hold it
        _transfer(sched, send, recv, src_w, dst_w)
        return send
    if eager:                                       # on its way now, into a copy
        send.tensor = snapshot(send, tensor)
        send.arrival = send.end = _book(sched, src_w, dst_w, send.posted, nbytes)
    sends = sched.pending_sends.get(key)
    if sends is None:
        sends = sched.pending_sends[key] = deque()
    sends.append(send)
    if eager:
        slot = backend.slot
        slot.in_flight += 1
        if slot.in_flight > MAX_IN_FLIGHT:          # far ahead of its receivers: let them catch up
            sched.yield_turn(src_w)
    return send


def post_recv(backend, buffer: torch.Tensor, src: int, tag: int, op: str) -> RecvWork:
    """Post a receive into `buffer` on `backend`'s rank from its group rank `src`."""
    sched = backend.scheduler
    src_w, dst_w = backend.world_ranks[src], backend.me
    recv = RecvWork(backend, buffer, src, tag, op, backend.slot.clock)
    key = (backend.key, src_w, dst_w, tag)
    sends = sched.pending_sends.get(key)
    if sends:
        send = sends.popleft()
        if type(send) is tuple:                     # an eager message of sendrecv.py's fast path
            send = EagerCopy(*send)
        if send.eager:
            sched.slots[src_w].in_flight -= 1
        _transfer(sched, send, recv, src_w, dst_w)
        return recv
    recvs = sched.pending_recvs.get(key)
    if recvs is None:
        recvs = sched.pending_recvs[key] = deque()
    recvs.append(recv)
    return recv


def _book(sched, src_w: int, dst_w: int, ready: float, nbytes: int) -> float:
    """Hold src's send port and dst's receive port for one message ready at `ready`; return its end."""
    duration = sched.alpha + nbytes * sched.beta
    start = book_transfer(sched.send_ports[src_w], sched.recv_ports[dst_w], ready, duration,
                          sched.horizon)
    return start + duration


def _transfer(sched, send: SendWork, recv: RecvWork, src_w: int, dst_w: int) -> None:
    """Match `send` with `recv`: time both, copy the data, wake whoever waits on them."""
    if send.arrival is None:
        ready = send.posted if send.eager else max(send.posted, recv.posted)
        send.arrival = send.end = _book(sched, src_w, dst_w, ready, send.nbytes)
        if send.waiter is not None:
            sched.wake(send.waiter, send.end)
    arrival = send.arrival
    recv.end = recv.posted if recv.posted > arrival else arrival   # max(recv.posted, arrival)
    buffer, data = recv.buffer, send.tensor
    if type(data) is bytes:                         # an eager copy (payloads.py)
        dtype, shape = send.dtype, send.shape
        if buffer.dtype == dtype and buffer.shape == shape:
            write(buffer, data, dtype, shape)
        else:
            _mismatch(send, recv, dtype, shape)
    elif buffer.dtype == data.dtype and buffer.shape == data.shape:
        (buffer.detach() if buffer.requires_grad else buffer).copy_(data)
    else:
        _mismatch(send, recv, data.dtype, data.shape)
    send.tensor = None                              # drop the copy (or the reference)
    if recv.waiter is not None:
        sched.wake(recv.waiter, recv.end)


def _mismatch(send: SendWork, recv: RecvWork, dtype: torch.dtype, shape) -> None:
    """The receive fails with the MessageMismatchError naming both ranks, shapes and ops."""
    backend = recv.backend
    try:
        check_match(recv.buffer, dtype, tuple(shape), send.op, recv.op,
                    backend.rank_name(backend.rank), backend.rank_name(recv.src), recv.tag)
    except MessageMismatchError as exc:
        recv.error = exc
