"""Group.sendrecv on the sim backend, in one call (SimBackend.sendrecv): a ring step's fast path.

A ring all-reduce of 1024 ranks makes two million sendrecv calls. Usually the
receive finds its eager message already there and the send is eager, so both
complete at once. This function does what Group.sendrecv does after its argument
checks (post the receive, then the send; count; wait; trace) with the work of
post_recv, post_send and the waits inlined for that case: no Work objects, no wait
calls, no clock reads when tracing is off. Each SimBackend gets its own copy of the
function (fast_sendrecv), a closure over the scheduler state it reads, and a table of
the channels it has used: per (dst, src, tag) the world ranks, the scheduler's deques of
both directions and the peer's receive port, looked up once (p2p.py keeps a channel's
deque once made, so the table's deques stay the scheduler's).

The usual case, both directions complete at once, is tested first and done in one
straight run (no staging, no Work, each check once): the "express" block. Where the time
goes (p = 1024 ring all-reduce, n = 1024 float32, 2.1 million calls, one thread hand-off
per 64 calls; callgrind and timings, 2026-11): about 2.2 us a call, ~33k machine
instructions, of which the interpreter's own ~13k (the ~250 bytecodes of this path and
Group.sendrecv's), the tensor checks ~0.55 us (is_neg() and is_inference() are torch
methods that release and retake the GIL: ~65 ns each, twice the getters), the two raw
copies and the version bump ~0.5 us, counting ~0.15 us. A thread hand-off costs ~10-30 us
of CPU (32k of them: 3-10% of the run). The ring code itself is ~1.8 us a step.

Ablations (p = 512, the same run with parts of this path cut out, CPU over the floor per
call, 2026-11-27): 3.4 us in all; without Group.sendrecv's checks 0.26 us less, without
the tensor checks 0.68 us less, without the copies and version bump 0.78 us less, without
counting 0.17 us less; what is left, 1.4 us, is 0.7 us for a bare exchange (deques
only: the calls, the hand-offs, 512 ranks' working sets interleaved) and 0.7 us for
clocks, ports and the rest of this path. So the 2x target (runtime <= ring code, 1.8 us)
would need checks, copies, timing and counting at ~0.9 us together: 3x cheaper than
these torch getters and ctypes copies allow. Cheaper spellings of the checks (_version
for is_inference, no set lookup for a dtype seen) and fewer hand-offs (MAX_IN_FLIGHT
1024: 3k instead of 32k at p = 1024) measured within noise. Left: a compiled hot path.

The eager message this path sends is a plain tuple on the channel's queue,
(raw bytes, dtype, shape, arrival time), not a SendWork: nobody can wait on it (the
sender is done with it at once), and a tuple costs a tenth of an object. The fast
receive takes such tuples; post_recv takes them too (p2p.py, EagerCopy).

Matching, timing, copies and counting are those of p2p.py and group.py, in the
same order: the receive is matched before the send is posted, both are posted at the
rank's clock, the counters are updated before any wait. Anything else (a rendezvous
or torch-copied message, a mismatch, a message not there yet) goes through
post_recv / post_send and Group._wait as before.
"""

from __future__ import annotations

from collections import deque

import torch

from .p2p import MAX_IN_FLIGHT, post_recv, post_send
from .payloads import MAX_RAW, RAW_DTYPES, array_of, arrays, increment_version
from .ports import book_after, book_transfer

Tensor, strided = torch.Tensor, torch.strided


def fast_sendrecv(backend):
    """SimBackend.sendrecv for `backend`: a closure over what every call reads (the rank's slot,
    the scheduler's queues and ports, the world ranks), so that a call looks none of them up."""
    sched = backend.scheduler
    slot, ranks, me, gkey = backend.slot, backend.world_ranks, backend.me, backend.key
    pending, pending_recvs, slots = sched.pending_sends, sched.pending_recvs, sched.slots
    limit, alpha, beta = sched.eager_limit, sched.alpha, sched.beta
    send_port = sched.send_ports[me]
    send_ends, recv_ports = send_port.ends, sched.recv_ports   # lists: changed in place only
    yield_turn, horizon = sched.yield_turn, sched.horizon
    raw_limit = MAX_RAW if limit is None else min(limit, MAX_RAW)   # eager and raw-copied
    channels: dict = {}     # (dst, src, tag) -> what a call on that channel pair reads (open_channel)

    def open_channel(dst: int, src: int, tag: int) -> tuple:
        """(src_w, dst_w, inbox, outbox, their posted receives, dst's receive port, its ends, src's
        slot): the queues are the scheduler's own deques, kept once made (p2p.py never drops them)."""
        src_w, dst_w = ranks[src], ranks[dst]
        inbox = pending.setdefault((gkey, src_w, me, tag), deque())
        outbox = pending.setdefault((gkey, me, dst_w, tag), deque())
        waiting = pending_recvs.setdefault((gkey, me, dst_w, tag), deque())
        recv_port = recv_ports[dst_w]
        channel = channels[dst, src, tag] = (src_w, dst_w, inbox, outbox, waiting, recv_port,
                                            recv_port.ends, slots[src_w])
        return channel

    def sendrecv(send_tensor: torch.Tensor, dst: int, recv_tensor: torch.Tensor, src: int, tag: int,
                 site) -> torch.Tensor:
        """Group.sendrecv(send_tensor, dst, recv_tensor, src, tag) on sim, arguments already checked.

        `site` (backend.SendrecvSite) gives the Group's recorder, its blocking wait and its name."""
        channel = channels.get((dst, src, tag)) or open_channel(dst, src, tag)
        inbox = channel[2]
        if inbox and recv_tensor.is_contiguous() and send_tensor.is_contiguous():
            message = inbox[0]
            if type(message) is tuple:
                data, dtype, shape, recv_end = message
                sent = send_tensor.nbytes
                sdtype = send_tensor.dtype
                if (recv_tensor.dtype is dtype and recv_tensor.shape == shape and recv_tensor.is_cpu
                        and not recv_tensor.requires_grad and recv_tensor.layout is strided
                        and not recv_tensor.is_neg() and not recv_tensor.is_inference()
                        and 0 < sent <= raw_limit and sdtype in RAW_DTYPES and send_tensor.is_cpu
                        and send_tensor.layout is strided and not send_tensor.is_neg() and not channel[4]):
                    inbox.popleft()
                    channel[7].in_flight -= 1
                    n = len(data)
                    (arrays.get(n) or array_of(n)).from_address(recv_tensor.data_ptr()).raw = data
                    increment_version((recv_tensor,))
                    posted = slot.clock
                    if posted > recv_end:
                        recv_end = posted
                    # the port timetables (ports.book_transfer), with its usual case inlined: the
                    # message starts when posted, extends the send port's last busy interval and
                    # follows the receive port's (ports.book_after)
                    duration = alpha + sent * beta
                    recv_port = channel[5]
                    recv_ends = channel[6]
                    if duration > 0 and send_ends and send_ends[-1] == posted and recv_ends:
                        last = recv_ends[-1]
                        if last == posted:
                            send_ends[-1] = recv_ends[-1] = end = posted + duration
                        elif last < posted:
                            send_ends[-1] = end = posted + duration
                            book_after(recv_port, posted, end, horizon)
                        else:
                            end = book_transfer(send_port, recv_port, posted, duration, horizon) + duration
                    else:
                        end = book_transfer(send_port, recv_port, posted, duration, horizon) + duration
                    channel[3].append(((arrays.get(sent) or array_of(sent)).from_address(send_tensor.data_ptr()).raw,
                                       sdtype, send_tensor.shape, end))
                    slot.in_flight += 1
                    if slot.in_flight > MAX_IN_FLIGHT:
                        yield_turn(me)
                    recorder = site.recorder
                    count = recorder.counters.by_op.get("sendrecv")
                    if count is None:
                        recorder.count("sendrecv", sent=1, recv=1, bytes_sent=sent, bytes_recv=n)
                    else:
                        count.calls += 1
                        count.messages_sent += 1
                        count.bytes_sent += sent
                        count.messages_recv += 1
                        count.bytes_recv += n
                    if recv_end > end:
                        end = recv_end
                    if end > slot.clock:
                        slot.clock = end
                    if recorder.trace:
                        recorder.event("sendrecv", channel[1], tag, sent + n, posted, slot.clock, site.name)
                    return recv_tensor
        posted = slot.clock                 # Group._clock(): both ops are posted now
        if recv_tensor.is_contiguous():
            buffer, staging = recv_tensor, None
        else:
            buffer = staging = torch.empty_like(recv_tensor, memory_format=torch.contiguous_format)
        payload = send_tensor.contiguous()
        src_w, dst_w, inbox, outbox, waiting, recv_port, recv_ends, src_slot = channel

        # the receive (post_recv + _transfer for an eager message of this path that is already here)
        rwork = None
        if inbox and type(inbox[0]) is tuple:
            data, dtype, shape, recv_end = inbox[0]
            # payloads.write's test, cheapest first (dtypes are singletons: `is` is ==)
            if (buffer.dtype is dtype and type(buffer) is Tensor and buffer.is_cpu
                    and buffer.shape == shape and not buffer.requires_grad and buffer.layout is strided
                    and not buffer.is_neg() and not buffer.is_inference()):
                inbox.popleft()
                src_slot.in_flight -= 1
                # payloads.write, inlined: the buffer is contiguous (it is recv_tensor or staging)
                n = len(data)
                (arrays.get(n) or array_of(n)).from_address(buffer.data_ptr()).raw = data
                increment_version((buffer,))
                if posted > recv_end:       # the receive ends at max(posted, arrival)
                    recv_end = posted
            else:
                rwork = post_recv(backend, buffer, src, tag, "sendrecv")
        else:
            rwork = post_recv(backend, buffer, src, tag, "sendrecv")

        # the send (post_send for an eager message nobody waits for yet)
        sent = payload.nbytes
        dtype = payload.dtype
        if ((limit is None or sent <= limit) and 0 < sent <= MAX_RAW and dtype in RAW_DTYPES
                and type(payload) is Tensor and payload.is_cpu and payload.layout is strided
                and not payload.is_neg() and not waiting):
            swork = None
            duration = alpha + sent * beta
            end = book_transfer(send_port, recv_port, posted, duration, horizon) + duration
            # payloads.snapshot, inlined: the payload is contiguous (Group made it so)
            message = ((arrays.get(sent) or array_of(sent)).from_address(payload.data_ptr()).raw,
                       dtype, payload.shape, end)
            outbox.append(message)
            slot.in_flight += 1
            if slot.in_flight > MAX_IN_FLIGHT:  # far ahead of its receivers: let them catch up
                yield_turn(me)
        else:
            swork = post_send(backend, payload, dst, tag, "sendrecv")

        recorder = site.recorder
        count = recorder.counters.by_op.get("sendrecv")
        if count is None:
            recorder.count("sendrecv", sent=1, recv=1, bytes_sent=sent, bytes_recv=recv_tensor.nbytes)
        else:                               # recorder.count, inlined
            count.calls += 1
            count.messages_sent += 1
            count.bytes_sent += sent
            count.messages_recv += 1
            count.bytes_recv += recv_tensor.nbytes
        if swork is None and rwork is None:     # both done: the clock moves to the later end
            if recv_end > end:
                end = recv_end
            if end > slot.clock:
                slot.clock = end
        else:                               # Group.sendrecv's finish_now checks, then its waits
            if rwork is None:               # the receive is done: finish it
                if recv_end > slot.clock:
                    slot.clock = recv_end
                done = True
            else:
                done = rwork.finish_now()
            if done:
                if swork is None:           # the send is done too: finish it
                    if end > slot.clock:
                        slot.clock = end
                else:
                    done = swork.finish_now()
            if not done:
                text = f"sendrecv(dst={dst_w}, src={src_w}, tag={tag})"
                if rwork is not None:
                    site.wait(rwork, text, (src_w,))
                if swork is not None:
                    site.wait(swork, text, (dst_w,))
                elif end > slot.clock:      # the send was done all along: its end, after the wait
                    slot.clock = end
        if staging is not None:
            recv_tensor.copy_(staging)
        if recorder.trace:
            recorder.event("sendrecv", dst_w, tag, sent + recv_tensor.nbytes, posted, slot.clock, site.name)
        return recv_tensor

    return sendrecv
