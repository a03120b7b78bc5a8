"""Gloo's message framing: payload parts whose wire tags carry their exact lengths, headers
received directly, and what a mismatch leaves behind (minitorch_dist/runtime/transports/framing.py, minitorch_dist/runtime/transports/wire.py)."""

import random
import threading
import time

import pytest
import torch

from minitorch_dist import MessageMismatchError, RankError, launch
from minitorch_dist.runtime.transports import framing
from minitorch_dist.runtime.transports.wire import (CONTROL_TAG, INLINE_BYTES, MAX_PAYLOAD_BYTES, MAX_TAG, PART_MANT_BITS,
                                         PART_SEQ_BITS, TAG_BITS, part_tag, payload_parts)

FLOATS = INLINE_BYTES // 4 + 1          # the smallest float32 message that is not inline


def _sizes():
    rng = random.Random(0)
    edge = [INLINE_BYTES + 1, 1 << 22, (1 << 22) + 1, (1 << 22) - 1, 4000012, MAX_PAYLOAD_BYTES - 1, 255, 256, 257]
    low = INLINE_BYTES.bit_length() + 1
    return edge + [rng.randrange(INLINE_BYTES + 1, 1 << rng.randrange(low, 39)) for _ in range(300)]


def test_parts_cover_the_payload_and_name_their_lengths():
    assert len(payload_parts(1 << 22)) == 1 and len(payload_parts(4000012)) == 3
    for nbytes in _sizes():
        parts = payload_parts(nbytes)
        assert sum(length for _, length, _ in parts) == nbytes
        assert [offset for offset, _, _ in parts] == [sum(n for _, n, _ in parts[:i]) for i in range(len(parts))]
        for _, length, code in parts:
            mantissa, exponent = code & ((1 << PART_MANT_BITS) - 1), code >> PART_MANT_BITS
            assert length == mantissa << exponent > 0          # the code is the length, exactly
        lengths = [length for _, length, _ in parts]
        assert lengths == sorted(set(lengths), reverse=True), nbytes   # distinct lengths: distinct wire tags
        significant = nbytes.bit_length() - (nbytes & -nbytes).bit_length() + 1
        assert len(parts) <= -(-significant // PART_MANT_BITS), nbytes


def test_part_tags_are_distinct_and_below_the_control_tag():
    codes = {code for n in _sizes() for _, _, code in payload_parts(n)} | {0}   # 0: the header
    seen = set()
    for tag in (0, 1, MAX_TAG):
        for seq in range(2 << PART_SEQ_BITS):
            for code in codes:
                wire = part_tag(tag, seq, code)
                assert 0 <= wire < CONTROL_TAG
                seen.add((wire, tag, seq % (1 << PART_SEQ_BITS), code))
    assert len({s[0] for s in seen}) == len(seen)


def test_a_payload_too_large_for_the_wire_format_is_a_clear_error():
    with pytest.raises(ValueError, match="too large for the gloo wire format"):
        payload_parts(MAX_PAYLOAD_BYTES)


def _mismatch_then_continue(group, sent, received):
    """Rank 1 receives `sent` floats into a buffer of `received`, catches the error, and the
    channel goes on: the next message on the same tag and one on another tag arrive intact."""
    if group.rank == 0:
        group.send(torch.arange(float(sent)), 1)           # must return: no hang, no abort
        group.send(torch.full((FLOATS + 7,), 7.0), 1)      # same tag, next sequence number
        group.send(torch.full((FLOATS,), 5.0), 1, tag=5)
        return "sent"
    kept = len(group._backend._framer._drains)      # the warm pool's group may have kept some before
    try:
        group.recv(torch.empty(received), 0)
        return "no error"
    except MessageMismatchError as exc:
        text = str(exc)
    drains = len(group._backend._framer._drains) - kept
    after = group.recv(torch.empty(FLOATS + 7), 0)
    other = group.recv(torch.empty(FLOATS), 0, tag=5)
    return text, bool((after == 7).all()), bool((other == 5).all()), drains


@pytest.mark.parametrize("sent, received", [(2 * FLOATS, FLOATS),       # larger sender, both payloads
                                            (FLOATS, 2 * FLOATS + 3),   # smaller sender
                                            (100, 3 * FLOATS),          # inline sender, payload receive
                                            (3 * FLOATS, 100)])         # payload sender, inline receive
def test_mismatch_over_inline_frees_the_sender_and_keeps_the_channel(sent, received):
    sender, (text, after_ok, other_ok, drains) = launch(_mismatch_then_continue, 2, args=(sent, received), deadline=20)
    assert sender == "sent"
    assert "recv on rank 1 from rank 0 (tag 0)" in text and f"({sent},)" in text and f"({received},)" in text
    assert after_ok and other_ok
    # one raw receive per sender's part (and header) that found none, plus our own unfilled
    # parts kept alive: a handful, not one per byte
    assert drains <= 6, drains


def _mismatch_not_waited(group):
    """Rank 1 waits on its mismatched receive only after a message that rank 0 sends once its
    own (mismatched) send is done: the receive must free the sender without being waited on."""
    if group.rank == 0:
        group.send(torch.zeros(3 * FLOATS), 1)
        group.send(torch.ones(4), 1, tag=1)
    else:
        handle = group.irecv(torch.empty(2 * FLOATS), 0)
        group.recv(torch.empty(4), 0, tag=1)
        handle.wait()


def test_mismatch_frees_the_sender_before_the_receive_is_waited(no_leftover_processes):
    start = time.monotonic()
    with pytest.raises(RankError) as info:
        launch(_mismatch_not_waited, 2, deadline=20)
    assert info.value.rank == 1 and isinstance(info.value.cause, MessageMismatchError)
    assert "rank 1 from rank 0" in str(info.value) and time.monotonic() - start < 15


def _skewed_tags(group):
    """After a mismatch that leaves receives unfilled, a later message whose wire tags they hold
    (same tag, sequence number 64 later, same size) fails clearly instead of taking wrong bytes."""
    wrap = 1 << PART_SEQ_BITS
    if group.rank == 0:
        for k in range(wrap + 1):
            group.send(torch.full((FLOATS if k == 0 else 2 * FLOATS,), float(k)), 1)
        return None
    outcomes = []
    for k in range(wrap + 1):
        try:
            got = group.recv(torch.empty(2 * FLOATS), 0)
            outcomes.append(bool((got == k).all()))
        except MessageMismatchError as exc:
            outcomes.append(str(exc))
    return outcomes


def test_receives_left_out_of_step_fail_clearly():
    outcomes = launch(_skewed_tags, 2, deadline=30)[1]
    assert "the size differs" in outcomes[0]
    assert outcomes[1:-1] == [True] * (len(outcomes) - 2)
    assert "out of step" in outcomes[-1] and "message 0 on this tag from rank 0 did not match" in outcomes[-1]


def _many_outstanding(group, sizes):
    """Rank 0 posts every message at once (mixed sizes, one tag), rank 1 posts every receive and
    waits in reverse order: each buffer gets its own message (non-overtaking)."""
    if group.rank == 0:
        handles = [group.isend(torch.full((n,), float(k)), 1, tag=3) for k, n in enumerate(sizes)]
        for h in handles:
            h.wait()
        return None
    bufs = [torch.empty(n) for n in sizes]
    handles = [group.irecv(b, 0, tag=3) for b in bufs]
    for h in reversed(handles):
        h.wait()
    return [bool((b == k).all()) for k, b in enumerate(bufs)]


def test_many_outstanding_payloads_keep_their_order():
    sizes = [(FLOATS, 5, 2 * FLOATS + 1, FLOATS + 99991, 1 << 16)[k % 5] for k in range(150)]
    assert launch(_many_outstanding, 2, args=(sizes,), deadline=60)[1] == [True] * len(sizes)


def _send_waited_first(group):
    """The sender waits on its isend before the receiver has posted the receive."""
    x = torch.arange(float(3 * FLOATS + 1))
    if group.rank == 0:
        group.isend(x, 1).wait()
        return time.monotonic()
    time.sleep(0.3)
    got = group.recv(torch.empty_like(x), 0)
    return bool(torch.equal(got, x))


def test_waiting_on_isend_before_the_receive_is_posted():
    assert launch(_send_waited_first, 2, deadline=20)[1] is True


def _who_checks_headers(group):
    """A ring of sendrecvs, payload-sized and inline: record the wire tag each message's header
    went out on, and which thread checked each header that came in."""
    from minitorch_dist.runtime.transports import sendwatch
    framer, copy_after = group._backend._framer, sendwatch.COPY_AFTER
    sendwatch.COPY_AFTER = 60.0      # no copies to the listener, however late a rank is here
    sent, checked = [], []
    match, raw_isend = framer._match, framer._raw_isend

    def recording_match(work, control):
        checked.append((work.tensor.numel(), threading.current_thread().name.startswith("minitorch_dist-listener")))
        match(work, control)

    def recording_isend(buf, dst, wire_tag):
        if wire_tag == CONTROL_TAG:
            sent.append("control")
        elif wire_tag >> (TAG_BITS + PART_SEQ_BITS) == 0:          # length code 0: a header
            sent.append("header")
        return raw_isend(buf, dst, wire_tag)
    framer._match, framer._raw_isend = recording_match, recording_isend
    p, r = group.size, group.rank
    try:
        for n in (3 * FLOATS, 5, (1 << 20) + 3):
            group.barrier()
            got = group.sendrecv(torch.full((n,), float(r)), (r + 1) % p, torch.empty(n), (r - 1) % p)
            assert (got == (r - 1) % p).all()
    finally:
        sendwatch.COPY_AFTER = copy_after
        framer._match, framer._raw_isend = match, raw_isend
    return sent, checked


def test_headers_are_checked_by_the_waiting_thread_not_the_listener():
    """gloo: every message's header (with an inline payload) goes on its own wire tag to the
    receive itself and is checked there (no hop through the listener thread, which tripled a
    1 KB ping-pong's time); a small send may also copy itself to the listener (so it completes
    without a posted receive), which leaves a posted receive to the direct message."""
    for sent, checked in launch(_who_checks_headers, 3, deadline=60):
        assert [kind for kind in sent if kind == "header"] == ["header"] * 3
        assert sent.count("control") <= 1       # the small send's copy, at most
        assert checked == [(3 * FLOATS, False), (5, False), ((1 << 20) + 3, False)]


def _late_receiver(group, n):
    """The receiver posts long after the sender waits (its header is copied to the listener)."""
    if group.rank == 0:
        group.send(torch.arange(float(n)), 1)
        group.send(torch.arange(float(n)) + 1, 1)
        return None
    time.sleep(0.8)
    first = group.recv(torch.empty(n), 0)
    second = group.recv(torch.empty(n), 0)
    return (bool(torch.equal(first, torch.arange(float(n)))), bool(torch.equal(second, torch.arange(float(n)) + 1)),
            len(group._backend._framer._early))


def test_a_late_receiver_gets_its_payloads_and_keeps_no_stale_header():
    assert launch(_late_receiver, 2, args=(3 * FLOATS,), deadline=20)[1] == (True, True, 0)


def test_a_late_receiver_gets_its_small_messages_and_keeps_no_stale_header():
    assert launch(_late_receiver, 2, args=(100,), deadline=20)[1] == (True, True, 0)


def _both_send_first(group, n):
    """Both ranks send (blocking) before receiving: small sends complete without a posted receive."""
    other = 1 - group.rank
    t = time.monotonic()
    group.send(torch.full((n,), float(group.rank)), other)
    group.send(torch.full((n,), 10.0 + group.rank), other, tag=2)
    first, second = group.recv(torch.empty(n), other), group.recv(torch.empty(n), other, tag=2)
    return bool((first == other).all() and (second == 10 + other).all()), time.monotonic() - t


def test_small_sends_complete_before_their_receive_is_posted():
    for ok, seconds in launch(_both_send_first, 2, args=(256,), deadline=20):
        assert ok and seconds < 5, seconds       # no wait for a deadline (nor for the 0.2 s copies)


def _dropped_handles(group, n):
    """Rank 0 isends two messages and drops the handles without wait(); rank 1 receives them
    after a while. The messages arrive; rank 0 got a warning naming the rank, op and peer."""
    import gc
    import warnings
    if group.rank == 1:
        time.sleep(0.5)
        got = [group.recv(torch.empty(n), 0), group.recv(torch.empty(n), 0, tag=4)]
        group.barrier()
        return [bool(torch.equal(g, torch.arange(float(n)) + k)) for k, g in enumerate(got)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        group.isend(torch.arange(float(n)), 1)
        group.isend(torch.arange(float(n)) + 1, 1, tag=4)
        gc.collect()
    group.barrier()             # rank 1 has both messages: the works were kept alive
    return [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


@pytest.mark.parametrize("n", [100, 3 * FLOATS])
def test_a_dropped_isend_handle_still_delivers_and_warns(n):
    texts, received = launch(_dropped_handles, 2, args=(n,), deadline=20)
    assert received == [True, True]
    assert len(texts) == 2 and all("rank 0" in t and "isend to rank 1" in t and "without wait()" in t for t in texts)
    assert "(tag 4," in texts[1]


def _sends_before_any_receive(group, count):
    """Rank 0 sends `count` small messages, more than the Framer keeps in flight, before rank 1
    posts a receive (after a barrier that rank 0 enters once its sends returned): the sends do not
    wait for their receives (MPI's eager send), the oldest ones are taken by rank 1's listener (so
    rank 0 keeps at most KEEP_SENDS alive), and all arrive in order."""
    framer = group._backend._framer
    if group.rank == 0:
        for k in range(count):
            group.send(torch.full((100,), float(k)), 1)
        kept = len(framer._sends)
        group.barrier()
        return kept
    group.barrier()
    got = [group.recv(torch.empty(100), 0) for _ in range(count)]
    return [bool((g == k).all()) for k, g in enumerate(got)], len(framer._early)


def test_small_sends_do_not_wait_for_their_receives_and_stay_bounded():
    count = framing.KEEP_SENDS + 20
    kept, (arrived, early) = launch(_sends_before_any_receive, 2, args=(count,), deadline=30)
    assert arrived == [True] * count and early == 0
    assert kept <= framing.KEEP_SENDS


def _ping_pong_of_mixed_sizes(group, sizes):
    """Blocking send/recv both ways, sizes in turn: small (inline), 64 KiB, payloads in parts. The
    values differ per message, so a buffer reused too early (Spares) shows as a wrong value."""
    peer, framer, ok = 1 - group.rank, group._backend._framer, []
    for k, n in enumerate(sizes):
        x = torch.arange(n, dtype=torch.float32) + 1000 * k
        if group.rank == 0:
            group.send(x, peer)
            ok.append(bool(torch.equal(group.recv(torch.empty(n), peer), x + 1)))
        else:
            got = group.recv(torch.empty(n), peer)
            ok.append(bool(torch.equal(got, x)))
            group.send(got + 1, peer)
    return ok, len(framer._spares.headers), sum(map(len, framer._spares._controls.values()))


def test_reused_buffers_keep_every_message_intact():
    sizes = [(10, INLINE_BYTES // 4, 3 * FLOATS + 7, 1)[k % 4] for k in range(2 * framing.KEEP_SENDS + 40)]
    for ok, spare_headers, spare_controls in launch(_ping_pong_of_mixed_sizes, 2, args=(sizes,), deadline=60):
        assert ok == [True] * len(sizes)
        assert spare_headers >= 1 and spare_controls >= 1    # the receives and sends did reuse buffers
