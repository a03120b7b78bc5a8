"""Framing: Group messages over a raw byte transport (gloo, mpi), with progress of their own.

Every Group message is a control message (wire.py) followed, for payloads over about
16 KiB, by the payload on its own data tag. Each rank runs one listener thread per
group that receives control messages from any peer (the transport's
receive-from-any-source). When a header meets its posted receive, the listener
checks it against the buffer (a mismatch is a clear MessageMismatchError naming both
ranks, both shapes and both ops, never a truncation, a hang or a crash). Receives
therefore progress whether or not their owner is waiting on them, as MPI promises: a
program may wait on its isend before its irecv without deadlocking.

The k-th message from rank a to rank b with tag t has sequence number k on both
sides (MPI's non-overtaking rule), so headers and payloads never match the wrong
receive, whatever order a program waits on its handles.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Callable

import torch

from .backend import DeadlineExpired, Work
from .errors import PeerFailedError
from .wire import (_BYE, _HEADER, _READY, CONTROL_BYTES, CONTROL_TAG, HEADER_LEN, INLINE_BYTES, SEQ_BITS,
                   as_bytes, check_match, decode_header, encode_control, encode_header)

RawPost = Callable[[torch.Tensor, int, int], Work]  # (uint8 buffer, peer, wire tag) -> Work
RawPostAny = Callable[[torch.Tensor, int], Work]  # (uint8 buffer, wire tag): from any peer


class Framer:
    """Group messages over a raw transport that moves uint8 buffers by (peer, wire tag).

    raw_isend(buf, dst, wire_tag) / raw_irecv(buf, src, wire_tag) post raw messages;
    raw_irecv_any(buf, wire_tag) posts a receive from any peer (the header names the
    sender). `name_rank(r)`
    turns a group rank into text for error messages. Call close() on every member.

    Payload receives are posted at irecv() time, before the header is in, so a large
    message flows as soon as it is sent (a receive posted late costs gloo ~10% at 16 MB).
    announce: for transports that abort when a message is larger than the posted buffer
    (gloo). Every irecv() of a payload-sized buffer then tells the sender its size (a READY
    control message), and the sender sends its payload only once it knows it fits (else one
    dummy byte; the receiver reports the mismatch from the header). A receive too small for
    a payload announces nothing: its header check fails first. MPI reports truncation as an
    error, so it needs no announcements.
    """

    def __init__(self, raw_isend: RawPost, raw_irecv: RawPost, raw_irecv_any: RawPostAny,
                 rank: int, size: int, name_rank: Callable[[int], str], announce: bool = False):
        self._raw_isend, self._raw_irecv, self._raw_irecv_any = raw_isend, raw_irecv, raw_irecv_any
        self._rank, self._size, self._name = rank, size, name_rank
        self._announce = announce
        self._ready: dict[tuple[int, int, int], int] = {}          # (dst, tag, seq) -> receiver's bytes
        self._unready: dict[tuple[int, int, int], _SendWork] = {}  # payload sends awaiting READY
        self._sent = defaultdict(int)     # (dst, tag) -> messages posted so far
        self._recvd = defaultdict(int)    # (src, tag) -> receives posted so far
        self._lock = threading.Lock()     # guards the two dicts below and _broken
        self._posted: dict[tuple[int, int, int], _RecvWork] = {}   # receives whose header has not come
        self._early: dict[tuple[int, int, int], torch.Tensor] = {}  # headers whose receive is not posted
        self._broken: BaseException | None = None
        self._listener = None
        if size > 1:
            self._listener = threading.Thread(target=self._listen, daemon=True,
                                              name=f"minitorch_dist-listener-r{rank}")
            self._listener.start()

    @staticmethod
    def _data_tag(tag: int, seq: int) -> int:
        return (tag << SEQ_BITS) | (seq & ((1 << SEQ_BITS) - 1))

    def isend(self, tensor: torch.Tensor, dst: int, tag: int, op: str) -> Work:
        seq = self._sent[dst, tag]
        self._sent[dst, tag] = seq + 1
        control = encode_header(tensor, op, tag, seq, self._rank)
        work = _SendWork(self._raw_isend(control, dst, CONTROL_TAG), (control, tensor))
        if tensor.numel() * tensor.element_size() > INLINE_BYTES:
            if not self._announce:
                work.post(self._raw_isend(as_bytes(tensor), dst, self._data_tag(tag, seq)))
            else:
                work.pending()
                room = self._meet(self._ready, self._unready, (dst, tag, seq), work)
                if room is not None:
                    self._send_payload(work, dst, tag, seq, room)
        return work

    def _meet(self, other_side: dict, this_side: dict, key, mine):
        """Rendezvous of two halves that arrive in either order (a header and its receive, a
        READY and its send): take the other half if it is there, else leave `mine` for it."""
        with self._lock:
            theirs = other_side.pop(key, None)
            if theirs is None:
                this_side[key] = mine
        return theirs

    def _send_payload(self, work: "_SendWork", dst: int, tag: int, seq: int, room: int) -> None:
        """The receiver posted `room` bytes: send the payload if it fits, else one dummy byte."""
        tensor = work.keep[1]
        payload = as_bytes(tensor) if tensor.numel() * tensor.element_size() <= room else _DUMMY
        work.post(self._raw_isend(payload, dst, self._data_tag(tag, seq)))

    def irecv(self, tensor: torch.Tensor, src: int, tag: int, op: str) -> Work:
        seq = self._recvd[src, tag]
        self._recvd[src, tag] = seq + 1
        work = _RecvWork(tensor, src, tag, seq, op)
        nbytes = tensor.numel() * tensor.element_size()
        if nbytes > INLINE_BYTES:
            work.payload = self._raw_irecv(as_bytes(tensor), src, self._data_tag(tag, seq))
        if self._announce and nbytes > INLINE_BYTES:   # small messages ride inline: nothing to announce
            ready = encode_control(_READY, self._rank, nbytes, tag, seq)
            work.announced = (self._raw_isend(ready, src, CONTROL_TAG), ready)
        with self._lock:
            control = self._early.pop((src, tag, seq), None)
            if control is None:
                if self._broken is not None:
                    work.fail(self._broken)
                else:
                    self._posted[src, tag, seq] = work
        if control is not None:
            self._match(work, control)
        return work

    def _match(self, work: "_RecvWork", control: torch.Tensor) -> None:
        """The header of `work`'s message is here: check it, then take or post the payload."""
        try:
            _, sent_op, dtype, shape, tag, seq, _ = decode_header(control)
            check_match(work.tensor, dtype, shape, sent_op, work.op, self._name(self._rank),
                        self._name(work.src), tag)
            nbytes = work.tensor.numel() * work.tensor.element_size()
            if 0 < nbytes <= INLINE_BYTES:
                as_bytes(work.tensor).copy_(control[HEADER_LEN * 8:HEADER_LEN * 8 + nbytes])
        except BaseException as exc:  # noqa: BLE001 - delivered to the waiting rank code
            work.error = exc
        work.ready.set()

    def _listen(self) -> None:
        byes = 0
        try:
            while byes < self._size - 1:
                control = torch.empty(CONTROL_BYTES, dtype=torch.uint8)
                self._raw_irecv_any(control, CONTROL_TAG).wait(None)
                kind, _, _, _, tag, seq, src = decode_header(control)
                if kind == _BYE:
                    byes += 1
                    continue
                if kind == _READY:
                    room = _HEADER.unpack_from(control.numpy())[5]
                    waiting = self._meet(self._unready, self._ready, (src, tag, seq), room)
                    if waiting is not None:
                        self._send_payload(waiting, src, tag, seq, room)
                    continue
                pending = self._meet(self._posted, self._early, (src, tag, seq), control)
                if pending is not None:
                    self._match(pending, control)
        except BaseException as exc:  # noqa: BLE001 - a peer died or the group was torn down
            with self._lock:
                self._broken = exc
                pending, self._posted = list(self._posted.values()), {}
                unready, self._unready = list(self._unready.values()), {}
            for work in pending + unready:
                work.fail(exc)

    def close(self, timeout: float | None = 10.0) -> None:
        """Tell every peer's listener we are done; ours ends when every peer has said the same."""
        if self._listener is None:
            return
        bye = encode_control(_BYE, self._rank)
        works = [self._raw_isend(bye, peer, CONTROL_TAG) for peer in range(self._size) if peer != self._rank]
        for work in works:
            work.wait(timeout)
        self._listener.join(timeout)


_DUMMY = torch.zeros(1, dtype=torch.uint8)


class _SendWork(Work):
    """A framed send: the header, then (for large tensors) the payload once it may go."""

    def __init__(self, header: Work, keep):
        self._header = header
        self.keep = keep                    # (control, tensor): buffers must outlive the transfer
        self._payload: Work | None = None
        self._posted = threading.Event()    # set when the payload is posted (or not needed)
        self._posted.set()
        self._error: BaseException | None = None

    def pending(self) -> None:
        """The payload will be posted later, when the receiver says it is ready."""
        self._posted.clear()

    def post(self, payload: Work | None) -> None:
        self._payload = payload
        self._posted.set()

    def fail(self, exc: BaseException) -> None:
        self._error = PeerFailedError(f"the connection broke before the receiver was ready "
                                      f"({type(exc).__name__}); another rank probably failed first")
        self._posted.set()

    def wait(self, timeout: float | None) -> None:
        end = None if timeout is None else time.monotonic() + timeout

        def left():
            return None if end is None else max(0.0, end - time.monotonic())
        self._header.wait(left())
        if not self._posted.wait(left()):
            raise DeadlineExpired("send: the receiver has not posted its receive")
        if self._error is not None:
            raise self._error
        if self._payload is not None:
            self._payload.wait(left())


class _RecvWork(Work):
    def __init__(self, tensor: torch.Tensor, src: int, tag: int, seq: int, op: str):
        self.tensor, self.src, self.tag, self.seq, self.op = tensor, src, tag, seq, op
        self.ready = threading.Event()      # set once the header was matched (or failed)
        self.payload: Work | None = None
        self.announced = None               # (work, buffer) of the READY message (announce mode)
        self.error: BaseException | None = None

    def fail(self, exc: BaseException) -> None:
        self.error = PeerFailedError(f"the connection broke while receiving from rank {self.src} "
                                     f"({type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}); "
                                     f"another rank probably failed first")
        self.ready.set()

    def wait(self, timeout: float | None) -> None:
        end = None if timeout is None else time.monotonic() + timeout
        if self.announced is not None:
            self.announced[0].wait(timeout)
            self.announced = None
        if not self.ready.wait(None if end is None else max(0.0, end - time.monotonic())):
            raise DeadlineExpired(f"recv from {self.src} tag {self.tag}")
        if self.error is not None:
            raise self.error
        if self.payload is not None:
            self.payload.wait(None if end is None else max(0.0, end - time.monotonic()))
