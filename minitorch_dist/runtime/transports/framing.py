"""Framing: Group messages over a raw byte transport (gloo), with progress of their own.

Every Group message has a header (wire.py) carrying, for payloads up to 64 KiB, the
payload itself (one message, not two); larger payloads follow as raw messages of their
own, posted at once by isend and irecv (no round trip before the bytes flow). A header
is checked against the receive buffer before the receive completes: a mismatch is a clear
MessageMismatchError naming both ranks, both shapes and both ops, never a truncation,
a hang or a crash. Receives progress whether or not their owner is waiting on them,
as MPI promises: a program may wait on its isend before its irecv without deadlocking.

The k-th message from rank a to rank b with tag t has sequence number k on both sides
(MPI's non-overtaking rule); the transport keeps messages with equal (peer, wire tag)
in order, so headers and payloads never meet the wrong receive.

A listener thread per group receives every peer's control messages (the transport's
receive-from-any-source) and matches the copies of headers (below) to posted receives, so
small sends complete whether or not their receive is posted, and a mismatch is found (and
its sender freed, below) while nobody waits on the receive. (mpi has a direct path of its
own, mpi_p2p.py, and no Framer.)

Exact-length parts: gloo aborts the process when a message is larger than its posted
receive, so payloads travel in parts whose wire tags carry their exact lengths
(wire.payload_parts): a part meets a receive of its own length or none (a one-part payload,
such as any power of two, travels as the tensor itself: wire.whole_payload). After a
mismatch the receiver posts receives for the sender's parts that found none ("drains"),
so the send completes; wire tags left out of step make the later receives that use
them fail clearly, instead of taking another message's bytes.

Direct messages: a message's header (with a small payload) goes on a wire tag of its own
(wire.header_tag) straight to its receive, checked by the thread that waits on it (a hop through
the listener costs a wake-up per message: 3x raw gloo's time at 1 KB). Both sides post a payload's
parts before its header, so gloo writes the header last: the receive waits on it first (to check
it before trusting the parts) and wakes once. A small send is buffered (MPI's eager send, handle
done at once); the Framer keeps its raw send alive (gloo cancels a message whose Work is freed),
up to KEEP_SENDS (a send completes the oldest first), and completes all at close(); completed
messages' buffers are reused (Spares). Progress without a waiter: the watch thread (sendwatch.py)
copies to the receiver's listener (_COPY) the header of a payload send not done COPY_AFTER s after
it was posted (a mismatched receive nobody waits on still frees its sender), and of a small send
whose completion was waited on for EAGER_AFTER s; the listener keeps a small copy for its receive
to come and takes the direct message (a "drain"). Dropped handles' works stay referenced here.
"""

from __future__ import annotations

import math
import threading
from collections import Counter, defaultdict, deque
from typing import Callable

import torch

from ..backend import Work
from ..errors import MessageMismatchError
from .framing_works import BufferedSend, RecvWork, SendWork, Spares, copy_inline, waiter
from .sendwatch import SendWatch
from .wire import (_BYE, _COPY, _MSG, _PART_SEQ_MASK, CONTROL_BYTES, CONTROL_TAG, HEADER_BYTES,
                   INLINE_BYTES, as_bytes, check_match, decode_header, encode_control, encode_header,
                   header_tag, payload_parts, whole_payload, wire_parts, with_kind)

RawPost = Callable[[torch.Tensor, int, int], Work]  # (bytes or a whole payload, peer, wire tag) -> Work
RawPostAny = Callable[[torch.Tensor, int], Work]  # (uint8 buffer, wire tag): from any peer
KEEP_SENDS, _NOT_EARLY = 64, (None, False)  # small sends kept in flight (handles done) before the oldest is completed


class Framer:
    """Group messages over a raw transport that moves uint8 buffers by (peer, wire tag).

    raw_isend(buf, dst, wire_tag) / raw_irecv(buf, src, wire_tag) post raw messages;
    raw_irecv_any(buf, wire_tag) posts a receive from any peer (the header names the sender).
    `name_rank(r)` turns a group rank into text for error messages. Call close() on every member.
    Payloads travel in exact-length parts, headers as direct messages (the module docstring).
    """

    def __init__(self, raw_isend: RawPost, raw_irecv: RawPost, raw_irecv_any: RawPostAny,
                 rank: int, size: int, name_rank: Callable[[int], str]):
        self._raw_isend, self._raw_irecv, self._raw_irecv_any = raw_isend, raw_irecv, raw_irecv_any
        self._rank, self._size, self._name = rank, size, name_rank
        self._sent = defaultdict(int)     # (dst, tag) -> messages posted so far
        self._recvd = defaultdict(int)    # (src, tag) -> receives posted so far
        self._lock = threading.Lock()     # guards the dicts below, _broken, and irecv's posts
        self._posted: dict[tuple[int, int, int], RecvWork] = {}   # receives whose header has not come
        self._early: dict[tuple[int, int, int], tuple] = {}  # (control, drained) of headers whose receive is not posted
        self._skewed: dict[int, dict[int, tuple]] = defaultdict(dict)  # src -> {wire tag: (why, after, before)}
        self._drains: list = []           # raw receives kept alive, never waited (see _settle)
        self._unfinished: dict[int, Work] = {}  # works not waited to the end, kept alive
        self._sends: deque[BufferedSend] = deque()  # small sends in flight, oldest first (_retire)
        self._spares = Spares()           # buffers of completed messages, for the next ones
        self._broken: BaseException | None = None
        self._watch = SendWatch(self._outgoing, self._copy)
        loops = {} if size == 1 else {"listener": self._listen, "sendwatch": self._watch.run}
        self._threads = [threading.Thread(target=loop, daemon=True, name=f"minitorch_dist-{name}-r{rank}")
                         for name, loop in loops.items()]
        for thread in self._threads:
            thread.start()

    def _parts(self, tag: int, seq: int, nbytes: int) -> tuple[tuple[int, int, int], ...]:
        """((offset, length, wire tag), ...) of a payload of `nbytes` (> INLINE_BYTES)."""
        return wire_parts(tag, seq & _PART_SEQ_MASK, nbytes)

    def isend(self, tensor: torch.Tensor, dst: int, tag: int, op: str) -> Work:
        seq = self._sent[dst, tag]
        nbytes = tensor.numel() * tensor.element_size()
        if len(self._sends) >= KEEP_SENDS:      # (before the send: after it, it would delay the next receive)
            self._retire()
        control = encode_header(tensor, op, tag, seq, self._rank,      # these two raise on bad input
                                out=self._spares.control(nbytes))
        parts = self._parts(tag, seq, nbytes) if nbytes > INLINE_BYTES else ()
        self._sent[dst, tag] = seq + 1
        if not parts:
            self._sends.append(BufferedSend(self._raw_isend(control, dst, header_tag(tag, seq)), control, dst, self._watch.wake))
            return self._sends[-1]
        # the parts first, the header last (the receiver posts them so too)
        if whole_payload(tensor, parts):
            works = [self._raw_isend(tensor, dst, parts[0][2])]
        else:
            data = as_bytes(tensor)
            works = [self._raw_isend(data[offset:offset + length], dst, wire_tag) for offset, length, wire_tag in parts]
        works.insert(0, self._raw_isend(control, dst, header_tag(tag, seq)))    # written last: waited first
        work = SendWork(works, (control, tensor), dst, self._finished)
        self._unfinished[id(work)] = work
        return work

    def _retire(self) -> None:
        """Complete the oldest small direct send kept alive, mostly long done (the watch thread
        copies one whose wait lasts); its buffer may serve the send to come."""
        sends = self._sends
        sends[0].complete(None, wake=False)
        with self._lock:        # (_copy reads the buffer of a send not complete, under the lock)
            self._spares.give_control(sends.popleft().keep[0])

    def _outgoing(self) -> list:
        """The sends in flight: payload sends not waited to the end, small sends kept alive."""
        return [w for w in list(self._unfinished.values()) if type(w) is SendWork] + list(self._sends)

    def _finished(self, work: Work) -> None:
        self._unfinished.pop(id(work), None)

    def _copy(self, work: SendWork) -> Work | None:
        """Send the header of direct send `work` to the receiver's listener, once (see the module docstring)."""
        with self._lock:
            copied, work.copied = work.copied, True
            if copied or (work.buffered and work.raw is None):   # (a complete one's buffer may be reused)
                return None
            control = with_kind(work.keep[0], _COPY)
        return self._raw_isend(control, work.dst, CONTROL_TAG)

    def irecv(self, tensor: torch.Tensor, src: int, tag: int, op: str) -> Work:
        nbytes = tensor.numel() * tensor.element_size()
        if nbytes > INLINE_BYTES:
            payload_parts(nbytes)               # raises for a payload too large for the wire format
        with self._lock:        # a drain (_settle, _listen) sees every receive posted before it, or none
            seq = self._recvd[src, tag]
            self._recvd[src, tag] = seq + 1
            work = RecvWork(tensor, src, tag, seq, op)
            control, drained = self._early.pop((src, tag, seq), _NOT_EARLY) if self._early else _NOT_EARLY
            if nbytes > INLINE_BYTES:
                parts = self._parts(tag, seq, nbytes)
                if whole_payload(tensor, parts):
                    work.parts.append(self._raw_irecv(tensor, src, parts[0][2]))
                    work.wire_tags.append(parts[0][2])
                else:
                    data = as_bytes(tensor)
                    for offset, length, wire_tag in parts:
                        work.parts.append(self._raw_irecv(data[offset:offset + length], src, wire_tag))
                        work.wire_tags.append(wire_tag)
            wire_tag = header_tag(tag, seq)     # the direct header after the parts, as they are sent
            work.wire_tags.append(wire_tag)
            if not drained:                     # (else the listener took the direct message)
                spare = work.spare = self._spares.headers
                work.header_buf = spare.pop() if spare else torch.empty(CONTROL_BYTES, dtype=torch.uint8)
                work.header = self._raw_irecv(work.header_buf, src, wire_tag)
                work.claim = self._claim
            work.done = self._finished
            self._unfinished[id(work)] = work
            if control is None:
                if self._broken is not None:
                    work.fail(self._broken)
                else:
                    self._posted[src, tag, seq] = work
        if control is not None:
            self._match(work, control)
        return work

    def _claim(self, work: RecvWork) -> None:
        """A direct receive's header came on its own wire tag: check it here, unless the
        listener took the receive first (then `work.ready` is, or will be, set by it)."""
        with self._lock:
            mine = self._posted.pop((work.src, work.tag, work.seq), None) is not None
        if mine:
            self._match(work, work.header_buf)

    def _match(self, work: RecvWork, control: torch.Tensor) -> None:
        """The header of `work`'s message is here: check it, then take the inline payload."""
        try:
            kind, sent_op, dtype, shape, tag, seq, _ = decode_header(control)
            if kind not in (_MSG, _COPY) or seq != work.seq:
                raise work.out_of_step(f"its header receive got message {seq}", self._name(self._rank), self._name)
            try:
                tensor = work.tensor
                if tensor.dtype != dtype or tensor.shape != shape:     # (names made only for the error)
                    check_match(tensor, dtype, shape, sent_op, work.op, self._name(self._rank),
                                self._name(work.src), tag)
                if self._skewed.get(work.src):
                    work.check_in_step(self._skewed[work.src], self._name(self._rank), self._name)
            except MessageMismatchError:
                self._settle(work, dtype.itemsize * math.prod(shape))
                raise
            nbytes = work.tensor.numel() * work.tensor.element_size()
            if 0 < nbytes <= INLINE_BYTES:
                copy_inline(work.tensor, control, nbytes)
        except BaseException as exc:  # noqa: BLE001 - delivered to the waiting rank code
            work.error = exc
        work.ready.set()

    def _settle(self, work: RecvWork, sent_nbytes: int) -> None:
        """A failed receive: take the sender's parts that none of ours will take (so its send
        completes), and mark wire tags whose later receives are now out of step."""
        sent = {header_tag(work.tag, work.seq): CONTROL_BYTES}     # every message's direct header
        if sent_nbytes > INLINE_BYTES:    # a payload message: its parts too
            sent.update({wire_tag: length for _, length, wire_tag in self._parts(work.tag, work.seq, sent_nbytes)})
        ours = Counter(work.wire_tags)
        theirs = Counter(sent.keys())
        drains = theirs - ours        # sender's parts that no receive of ours will take
        stale = ours - theirs         # receives of ours that no part will fill: out of step for good
        why = f"message {work.seq} on this tag from {self._name(work.src)} did not match its receive"
        skewed = self._skewed[work.src]
        with self._lock:
            for wire_tag in stale:
                skewed[wire_tag] = (why, work.seq, None)
            if drains:                # receives posted before a drain on its tag take the wrong part
                scratch = torch.empty(max(sent[t] for t in drains), dtype=torch.uint8)
                for wire_tag, count in drains.items():
                    _, after, before = skewed.get(wire_tag, (None, work.seq, 0))
                    if before is not None:      # receives work.seq+1 .. posted so far: out of step
                        skewed[wire_tag] = (why, min(after, work.seq), self._recvd[work.src, work.tag])
                    self._drains += [self._raw_irecv(scratch[:sent[wire_tag]], work.src, wire_tag)
                                     for _ in range(count)]
            # gloo stalls a connection when a part arrives for a receive whose Work was freed:
            # keep ours alive (a part may still land in this failed receive's buffer).
            self._drains += work.parts

    def _listen(self) -> None:
        byes = 0
        try:
            while byes < self._size - 1:
                control = torch.empty(CONTROL_BYTES, dtype=torch.uint8)
                self._raw_irecv_any(control, CONTROL_TAG).wait(None)
                kind, _, dtype, shape, tag, seq, src = decode_header(control)
                if kind == _BYE:
                    byes += 1
                    continue
                nbytes = dtype.itemsize * math.prod(shape)
                if kind == _COPY and nbytes <= INLINE_BYTES:
                    # a small send's copy: its receive takes the direct message if posted, else we
                    # take it (the sender waits for that) and keep the copy for the receive to come
                    drain = None
                    with self._lock:
                        if seq >= self._recvd[src, tag]:
                            drain = self._raw_irecv(torch.empty(HEADER_BYTES + nbytes, dtype=torch.uint8),
                                                    src, header_tag(tag, seq))
                            self._early[src, tag, seq] = (control, True)
                    if drain is not None:
                        drain.wait(None)
                    continue
                with self._lock:
                    pending = self._posted.pop((src, tag, seq), None)
                    # a copy whose receive is posted but not pending was served by its direct header
                    if pending is None and not (kind == _COPY and seq < self._recvd[src, tag]):
                        self._early[src, tag, seq] = (control, False)
                if pending is not None:
                    self._match(pending, control)
        except BaseException as exc:  # noqa: BLE001 - a peer died or the group was torn down
            with self._lock:
                self._broken = exc
                pending, self._posted = list(self._posted.values()), {}
            for work in pending:
                work.fail(exc)

    def close(self, timeout: float | None = 10.0) -> None:
        """Wait for the sends whose handles were dropped, then tell every peer's listener we are
        done; ours ends when every peer has said the same."""
        left = waiter(timeout)
        try:
            for work in self._outgoing():
                work.complete(left())   # (the watch thread copies a small one to the listener)
        except Exception:  # noqa: BLE001 - a message its peer never receives: nothing more to do
            pass
        self._sends.clear()
        self._watch.stop()
        if not self._threads:
            return
        bye = encode_control(_BYE, self._rank)
        works = [self._raw_isend(bye, peer, CONTROL_TAG) for peer in range(self._size) if peer != self._rank]
        for work in works:
            work.wait(timeout)
        for thread in self._threads:
            thread.join(timeout)

