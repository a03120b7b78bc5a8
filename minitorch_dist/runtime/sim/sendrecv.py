"""Group.sendrecv on the sim backend, in one call (SimBackend.sendrecv): a ring step's fast path.

A ring all-reduce of 1024 ranks makes two million sendrecv calls. Usually the
receive finds its eager message already there and the send is eager, so both
complete at once. This function does what Group.sendrecv does after its argument
checks (post the receive, then the send; count; wait; trace) with the work of
post_recv, post_send and the waits inlined for that case: no Work object for the
receive, no wait calls, no clock reads when tracing is off.

Matching, timing, copies and counting are those of p2p.py and group.py, in the
same order: the receive is matched before the send is posted, both are posted at the
rank's clock, the counters are updated before any wait. Anything else (a rendezvous
or torch-copied message, a mismatch, a message not there yet) goes through
post_recv / post_send and Group._wait as before.
"""

from __future__ import annotations

from collections import deque

import torch

from .p2p import MAX_IN_FLIGHT, SendWork, post_recv, post_send
from .payloads import MAX_RAW, RAW_DTYPES, array_of, arrays, increment_version, write
from .ports import book_after, book_transfer

Tensor, strided = torch.Tensor, torch.strided


def sendrecv(backend, send_tensor: torch.Tensor, dst: int, recv_tensor: torch.Tensor, src: int, tag: int,
             site) -> torch.Tensor:
    """Group.sendrecv(send_tensor, dst, recv_tensor, src, tag) on sim, arguments already checked.

    `backend` is the group's SimBackend; `site` (backend.SendrecvSite) gives the Group's recorder,
    its blocking wait and its name."""
    recorder = site.recorder
    slot = backend.slot
    posted = slot.clock                     # Group._clock(): both ops are posted now
    if recv_tensor.is_contiguous():
        buffer, staging = recv_tensor, None
    else:
        buffer = staging = torch.empty_like(recv_tensor, memory_format=torch.contiguous_format)
    payload = send_tensor.contiguous()
    sched = backend.scheduler
    ranks = backend.world_ranks
    me, gkey = backend.me, backend.key
    src_w, dst_w = ranks[src], ranks[dst]

    # the receive (post_recv + _transfer for an eager message that is already here)
    key = (gkey, src_w, me, tag)
    sends = sched.pending_sends.get(key)
    send = sends[0] if sends else None
    if (send is not None and type(send.tensor) is bytes and buffer.dtype == send.dtype
            and buffer.shape == send.shape):
        sends.popleft()
        if not sends:
            del sched.pending_sends[key]
        sched.slots[src_w].in_flight -= 1
        data = send.tensor
        if (buffer.is_cpu and not buffer.requires_grad and buffer.layout is strided
                and not buffer.is_neg() and not buffer.is_inference() and type(buffer) is Tensor):
            # sim_copy.write, inlined: the buffer is contiguous (it is recv_tensor or staging)
            array = arrays.get(len(data)) or array_of(len(data))
            array.from_address(buffer.data_ptr()).raw = data
            increment_version((buffer,))
        else:
            write(buffer, data, send.dtype, send.shape)
        send.tensor = None
        arrival = send.arrival
        recv_end = arrival if arrival > posted else posted
        rwork = None
    else:
        rwork = post_recv(backend, buffer, src, tag, "sendrecv")

    # the send (post_send for an eager message nobody waits for yet)
    sent = payload.nbytes
    limit = sched.eager_limit
    skey = (gkey, me, dst_w, tag)
    if ((limit is None or sent <= limit) and 0 < sent <= MAX_RAW and not sched.pending_recvs.get(skey)
            and payload.is_cpu and type(payload) is Tensor and payload.dtype in RAW_DTYPES
            and payload.layout is strided and not payload.is_neg()):
        # sim_copy.snapshot, inlined: the payload is contiguous (Group made it so)
        array = arrays.get(sent) or array_of(sent)
        swork = SendWork(backend, array.from_address(payload.data_ptr()).raw, dst, tag, "sendrecv",
                         posted, True, sent)
        swork.dtype, swork.shape = payload.dtype, payload.shape
        duration = sched.alpha + sent * sched.beta
        send_ends, recv_port = sched.send_ports[me].ends, sched.recv_ports[dst_w]
        if (duration > 0 and send_ends and send_ends[-1] == posted and recv_port.ends
                and recv_port.ends[-1] <= posted):
            send_ends[-1] = end = posted + duration  # book_transfer's usual case: extend the
            book_after(recv_port, posted, end, sched.horizon)   # send port's last busy interval
        else:
            end = book_transfer(sched.send_ports[me], recv_port, posted, duration,
                                sched.horizon) + duration
        swork.arrival = swork.end = end
        queue = sched.pending_sends.get(skey)
        if queue is None:
            queue = sched.pending_sends[skey] = deque()
        queue.append(swork)
        slot.in_flight += 1
        if slot.in_flight > MAX_IN_FLIGHT:  # far ahead of its receivers: let them catch up
            sched.yield_turn(me)
    else:
        swork = post_send(backend, payload, dst, tag, "sendrecv")

    received = recv_tensor.nbytes
    count = recorder.counters.by_op.get("sendrecv")
    if count is None:
        recorder.count("sendrecv", sent=1, recv=1, bytes_sent=sent, bytes_recv=received)
    else:                                   # recorder.count, inlined
        count.calls += 1
        count.messages_sent += 1
        count.bytes_sent += sent
        count.messages_recv += 1
        count.bytes_recv += received
    end = swork.end
    if rwork is None and end is not None and swork.error is None:
        if recv_end > end:
            end = recv_end
        if end > slot.clock:
            slot.clock = end
    else:                                   # Group.sendrecv's finish_now checks, then its waits
        if rwork is None:                   # the receive is done: finish it
            if recv_end > slot.clock:
                slot.clock = recv_end
            done = True
        else:
            done = rwork.finish_now()
        if not (done and swork.finish_now()):
            text = f"sendrecv(dst={dst_w}, src={src_w}, tag={tag})"
            if rwork is not None:
                site.wait(rwork, text, (src_w,))
            site.wait(swork, text, (dst_w,))
    if staging is not None:
        recv_tensor.copy_(staging)
    if recorder.trace:
        recorder.event("sendrecv", dst_w, tag, sent + received, posted, slot.clock, site.name)
    return recv_tensor

