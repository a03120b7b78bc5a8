"""The sim backend's sendrecv fast path (sim/sendrecv.py) and its table of channels.

The fast path keeps the scheduler's deques of each channel it used; p2p.py must keep them
(never drop an empty one), or a message posted by send/isend would land in a deque the fast
path no longer sees. These tests mix both paths on the same channels, in both directions,
and check order, values, counts and trace events.
"""

from __future__ import annotations

import pytest
import torch

from minitorch_dist.runtime.errors import RankError
from minitorch_dist.runtime.sim import SimNetwork, run_sim


def _mixed_ring(group, rounds):
    """Round k: rank r moves a message around the ring with sendrecv, isend + recv, or irecv +
    send, by (r + k) % 3, so that each channel's two ends mostly use different paths (the fast
    path's cached deques on one side, p2p.py's lookups on the other). Returns what arrived."""
    p, r = group.size, group.rank
    right, left = (r + 1) % p, (r - 1) % p
    got = []
    for k in range(rounds):
        x, y = torch.full((3,), float(100 * r + k)), torch.empty(3)
        mode = (r + k) % 3
        if mode == 0:
            group.sendrecv(x, right, y, left)
        elif mode == 1:
            h = group.isend(x, right)
            group.recv(y, left)
            h.wait()
        else:
            h = group.irecv(y, left)
            group.send(x, right)
            h.wait()
        got.append(y[0].item())
    return got


def test_sendrecv_and_send_recv_share_a_channel_in_order():
    rounds = 60
    for network in (SimNetwork(), SimNetwork(eager_limit=0)):
        for p in (2, 3, 4, 5):
            res = run_sim(_mixed_ring, p, args=(rounds,), network=network, collectives=False,
                          trace=False)
            assert [res[r] for r in range(p)] == [[100.0 * ((r - 1) % p) + k for k in range(rounds)]
                                                  for r in range(p)]


def _queues(group, steps):
    p, r = group.size, group.rank
    y = torch.empty(2)
    for k in range(steps):
        group.sendrecv(torch.full((2,), float(k)), (r + 1) % p, y, (r - 1) % p, tag=k % 3)
    group.barrier()
    sched = group._backend.scheduler
    return (sorted(k for k, q in sched.pending_sends.items() if q),
            len(sched.pending_sends), len(sched.pending_recvs))


def test_channel_queues_are_kept_per_channel_not_per_message():
    """Thousands of messages on three tags use three deques per direction, empty at the end."""
    p = 4
    res = run_sim(_queues, p, args=(3000,))
    for nonempty, sends, recvs in res:
        assert nonempty == []                  # every message was received
        assert (sends, recvs) == (3 * p, 3 * p)   # one deque per (src, dst, tag), not per message


def _counted(group, steps):
    p, r = group.size, group.rank
    recorder = group._ctx.recorder
    recorder.max_events = 5                     # the fast path's inlined event() drops the rest
    y = torch.empty(4)
    for _ in range(steps):
        group.sendrecv(torch.full((4,), float(r)), (r + 1) % p, y, (r - 1) % p)
    c = group.counters.by_op["sendrecv"]
    return (c.calls, c.messages_sent, c.bytes_sent, c.messages_recv, c.bytes_recv,
            recorder.dropped_events)


def test_fast_path_counts_every_call_and_drops_events_past_the_limit():
    p, steps = 3, 50
    res = run_sim(_counted, p, args=(steps,))
    for r in range(p):
        assert res[r] == (steps, steps, 16 * steps, steps, 16 * steps, steps - 5)
    per_rank = [[e for e in res.events if e.rank == r and e.op == "sendrecv"] for r in range(p)]
    assert [len(es) for es in per_rank] == [5] * p
    for r, es in enumerate(per_rank):
        assert all(e.peer == (r + 1) % p and e.nbytes == 32 and e.group == "world" for e in es)
        assert all(e.start <= e.end for e in es)
        assert all(a.end <= b.start for a, b in zip(es, es[1:]))   # one step after another


def _express_into(group, kind):
    """A ring of three: rank 1 finds rank 0's message queued and nobody waiting on its own send
    (sendrecv.py's express block), and receives [1, 1, 1] into a buffer of `kind`."""
    r, p = group.rank, group.size
    send, peer, left = torch.full((3,), float(r == 0)), (r + 1) % p, (r - 1) % p
    if r == 1 and kind == "neg send":           # rank 2 must get -1s, not the raw bytes' +1s
        send = torch._neg_view(torch.ones(3))   # contiguous, negation bit set
    if r != 1 or kind == "neg send":
        y = torch.empty(3)
        group.sendrecv(send, peer, y, left)
        return y.tolist()
    if kind == "inference":                     # made in inference mode, written outside it
        with torch.inference_mode():
            buf = torch.zeros(3)
        group.sendrecv(send, peer, buf, left)
        return buf.tolist()
    if kind == "inference inside":
        with torch.inference_mode():
            buf = torch.zeros(3)
            group.sendrecv(send, peer, buf, left)
        return buf.tolist()
    if kind == "neg":                           # a view with the negation bit: raw bytes would be wrong
        z = torch.zeros(3, dtype=torch.complex64)
        buf = z.conj().imag
        group.sendrecv(send, peer, buf, left)
        return buf.tolist() + z.imag.tolist()
    w = torch.ones(3, requires_grad=True)       # "requires grad": a buffer autograd saved
    buf = w * 1.0
    loss = (buf * buf).sum()
    version = buf._version
    group.sendrecv(send, peer, buf, left)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    return buf.tolist() + [buf._version - version]


def test_the_express_block_receives_as_copy_would():
    """Buffers the raw copy must not write or read (inference, negation bit) take the torch copy; one
    that requires grad gets the bytes and the version bump copy_ would give it."""
    assert run_sim(_express_into, 3, args=("inference inside",))[1] == [1.0] * 3
    assert run_sim(_express_into, 3, args=("neg",))[1] == [1.0] * 3 + [-1.0] * 3
    assert run_sim(_express_into, 3, args=("neg send",))[2] == [-1.0] * 3
    assert run_sim(_express_into, 3, args=("requires grad",))[1] == [1.0] * 3 + [1]
    with pytest.raises(RankError, match="Inplace update to inference tensor outside InferenceMode") as info:
        run_sim(_express_into, 3, args=("inference",))
    assert info.value.rank == 1
