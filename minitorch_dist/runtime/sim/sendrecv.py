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
straight run (no staging, no Work, each check once): the "express" block. It keeps the
channel of the last call (a ring makes every call on one), and its message carries the
ctypes array type the receive copies with. A receive buffer that requires grad takes the
raw copy too (copy_ into it would go through detach() and bump the same version counter);
an inference tensor is told apart by its _version, which raises (cheaper than
is_inference()), and takes the general path's copy_, with copy_'s error outside
inference mode (tests/runtime/test_sim_channels.py).

Where the time goes (p = 512 and 1024 ring all-reduce, n = 1024 float32, 2026-11-27;
callgrind counts of this path alone, and CPU over the floor in interleaved runs): the ring
code itself is ~1.85 us a step; the runtime 3.1-3.4 us a call, of which
- this path, alone in a loop: ~27k machine instructions (~31k before the changes above),
  2.0-2.3 us with Group.sendrecv's argument checks and call (~0.2 us). The torch getters
  are ~7.3k of them: is_neg() twice ~1.4k (it releases and retakes the GIL), shape twice
  ~1.0k, is_contiguous() twice ~0.9k, the version bump ~0.86k, data_ptr() twice ~0.7k,
  dtype/layout/is_cpu ~1.5k, _version ~0.3k; the two ctypes copies ~1.2k; the rest is the
  interpreter (~400 bytecodes with Group.sendrecv's) and allocation. Every check stays: each one either guards the raw copy
  (device, layout, negation bit, contiguity) or gives the student copy_'s or
  MessageMismatchError's answer (dtype, shape, inference);
- running 512-1024 ranks interleaved, ~1 us more a call: a thread hand-off costs ~22-24 us
  of CPU with the cache refills it brings (at p = 512, a sendrecv that does nothing but
  yield every 16 or 64 calls costs 2.1-2.3 or 1.0 us a call over the floor, 0.65-0.75 us
  when each rank runs through), i.e. ~0.35 us a call at one hand-off per 64 calls; the
  rest is the ranks' working sets (chunk tables, buffers, messages) read back cold, the
  threads' start, and the collector.
So the 2x target (runtime <= ring code) is not within a Python path that keeps these
checks: express.cpp does this express block compiled, bound as the Group's sendrecv, where
it is built (express.py; 2026-11-28, p = 1024: 6.1-6.4 s of CPU against this path's 10.2 s
and the floor's 3.7 s, i.e. 1.6-1.7x the floor). This Python block stays the path with the
trace on, without a build, and for every call the compiled one passes on; the two must
stay step for step the same (tests/runtime/test_sim_express.py compares them). MAX_IN_FLIGHT (p2p.py) sets the hand-offs, but it also sets the order in which
ranks book contended ports, so raising it could change simulated times: kept at 64.
OS threads stay (network.py's module doc says why not greenlets): their switch is only part
of a hand-off's cost, the cache refill stays either way.

The eager message this path sends is a plain tuple on the channel's queue, (raw bytes,
dtype, shape, arrival time, ctypes array type), not a SendWork: nobody can wait on it (the
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
_NONE = (None, None, None, None, None)   # unpacks as a message that matches no tensor


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
    channels: dict = {}     # (dst, src, tag) -> what a call on that channel pair reads (channel_of)

    def channel_of(dst: int, src: int, tag: int) -> tuple:
        """(src_w, dst_w, inbox, outbox, their posted receives, dst's receive port, its ends, src's
        slot), made at first use: the queues are the scheduler's own deques, kept once made (p2p.py
        never drops them). The compiled sendrecv (express.py) looks its channels up here too."""
        channel = channels.get((dst, src, tag))
        if channel is not None:
            return channel
        src_w, dst_w = ranks[src], ranks[dst]
        inbox = pending.setdefault((gkey, src_w, me, tag), deque())
        outbox = pending.setdefault((gkey, me, dst_w, tag), deque())
        waiting = pending_recvs.setdefault((gkey, me, dst_w, tag), deque())
        recv_port = recv_ports[dst_w]
        channel = channels[dst, src, tag] = (src_w, dst_w, inbox, outbox, waiting, recv_port,
                                            recv_port.ends, slots[src_w])
        return channel

    last = (None, None, None, None)     # (dst, src, tag, channel) of the last call: a ring's every call
    sizes = (0, None)                   # (nbytes, ctypes array type) of the last raw-copied send

    def sendrecv(send_tensor: torch.Tensor, dst: int, recv_tensor: torch.Tensor, src: int, tag: int,
                 site) -> torch.Tensor:
        """Group.sendrecv(send_tensor, dst, recv_tensor, src, tag) on sim, arguments already checked.

        `site` (backend.SendrecvSite) gives the Group's recorder, its blocking wait and its name."""
        nonlocal last, sizes
        ldst, lsrc, ltag, channel = last
        if dst != ldst or src != lsrc or tag != ltag:
            channel = channel_of(dst, src, tag)
            last = (dst, src, tag, channel)
        inbox = channel[2]
        if inbox:
            data, dtype, shape, recv_end, array = inbox[0] if type(inbox[0]) is tuple else _NONE
            sent = send_tensor.nbytes
            try:                            # reading _version raises for an inference tensor (cheaper
                express = (                 # than is_inference()): it takes the general path's copy_
                    recv_tensor.dtype is dtype and recv_tensor.shape == shape and recv_tensor.is_contiguous()
                    and send_tensor.is_contiguous() and recv_tensor.is_cpu and send_tensor.is_cpu
                    and recv_tensor.layout is strided and send_tensor.layout is strided
                    and not recv_tensor.is_neg() and not send_tensor.is_neg() and 0 < sent <= raw_limit
                    and recv_tensor._version >= 0 and not channel[4])
            except RuntimeError:
                express = False
            if express:
                sdtype = send_tensor.dtype
                if sdtype in RAW_DTYPES:
                    inbox.popleft()
                    channel[7].in_flight -= 1
                    array.from_address(recv_tensor.data_ptr()).raw = data
                    increment_version((recv_tensor,))
                    posted = slot.clock
                    if posted > recv_end:
                        recv_end = posted
                    # the port timetables (ports.book_transfer), with its usual case inlined: the
                    # message starts when posted, extends the send port's last busy interval and
                    # follows the receive port's (ports.book_after)
                    duration = alpha + sent * beta
                    recv_ends = channel[6]
                    if duration > 0 and send_ends and send_ends[-1] == posted and recv_ends:
                        last_end = recv_ends[-1]
                        if last_end == posted:
                            send_ends[-1] = recv_ends[-1] = end = posted + duration
                        elif last_end < posted:
                            send_ends[-1] = end = posted + duration
                            book_after(channel[5], posted, end, horizon)
                        else:
                            end = book_transfer(send_port, channel[5], posted, duration, horizon) + duration
                    else:
                        end = book_transfer(send_port, channel[5], posted, duration, horizon) + duration
                    if sizes[0] != sent:
                        sizes = (sent, array_of(sent))
                    array = sizes[1]
                    channel[3].append((array.from_address(send_tensor.data_ptr()).raw, sdtype,
                                       send_tensor.shape, end, array))
                    slot.in_flight += 1
                    if slot.in_flight > MAX_IN_FLIGHT:
                        yield_turn(me)
                    recorder = site.recorder
                    count = recorder.counters.by_op.get("sendrecv")
                    n = len(data)
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
            data, dtype, shape, recv_end, array = inbox[0]
            # payloads.write's test, cheapest first (dtypes are singletons: `is` is ==)
            if (buffer.dtype is dtype and type(buffer) is Tensor and buffer.is_cpu
                    and buffer.shape == shape and not buffer.requires_grad and buffer.layout is strided
                    and not buffer.is_neg() and not buffer.is_inference()):
                inbox.popleft()
                src_slot.in_flight -= 1
                # payloads.write, inlined: the buffer is contiguous (it is recv_tensor or staging)
                array.from_address(buffer.data_ptr()).raw = data
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
            array = arrays.get(sent) or array_of(sent)
            message = (array.from_address(payload.data_ptr()).raw, dtype, payload.shape, end, array)
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

    # what the compiled sendrecv (express.py) reads: this table's channels, this raw-copy limit
    sendrecv.channel = channel_of
    sendrecv.raw_limit = raw_limit
    return sendrecv
