"""The sim backend: every Group op, simulated times against cost_model, deadlocks, failures, scale.

Run: pytest tests/runtime/test_sim.py -s   (-s shows the wall times of the large runs)
"""

from __future__ import annotations

import math
import threading
import time

import pytest
import torch

from minitorch_dist import cost_model
from minitorch_dist.runtime.errors import (CollectivesDisabledError, DeadlockError,
                                           MessageMismatchError, PeerFailedError, RankError)
from minitorch_dist.runtime.handle import UnwaitedHandleWarning
from minitorch_dist.runtime.sim import SimNetwork, run_sim
from minitorch_dist.runtime.sim.ports import Port, book_transfer

SIZES = [1, 2, 3, 4, 5, 6, 7, 8]
P2P_SIZES = [2, 3, 4, 5, 7, 8]
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64]
NET = SimNetwork(alpha=1e-5, beta=1e-9)


def _full(shape, value, dtype):
    if dtype == torch.bool:
        return torch.full(shape, bool(value % 2), dtype=dtype)
    return torch.full(shape, value, dtype=dtype)


# -- point to point -----------------------------------------------------------------------------
def _ring_send_recv(group, dtype, shape):
    p, r = group.size, group.rank
    x, y = _full(shape, r, dtype), torch.empty(shape, dtype=dtype)
    if r % 2 == 0:                       # even ranks send first: no cycle of blocking recvs
        group.send(x, (r + 1) % p)
        group.recv(y, (r - 1) % p)
    else:
        group.recv(y, (r - 1) % p)
        group.send(x, (r + 1) % p)
    return y


def _ring_isend_irecv(group, dtype, shape):
    p, r = group.size, group.rank
    x, y = _full(shape, r, dtype), torch.empty(shape, dtype=dtype)
    hr = group.irecv(y, (r - 1) % p)
    hs = group.isend(x, (r + 1) % p)
    hs.wait()
    x.fill_(0)                           # the buffer is ours again once the send is waited
    return hr.wait()


def _ring_sendrecv(group, dtype, shape):
    p, r = group.size, group.rank
    y = torch.empty(shape, dtype=dtype)
    return group.sendrecv(_full(shape, r, dtype), (r + 1) % p, y, (r - 1) % p)


@pytest.mark.parametrize("body", [_ring_send_recv, _ring_isend_irecv, _ring_sendrecv])
@pytest.mark.parametrize("dtype", DTYPES + [torch.bool])
@pytest.mark.parametrize("p", P2P_SIZES)
def test_p2p_ring(body, dtype, p):
    for shape in [(3, 2), (0,)]:
        res = run_sim(body, p, (dtype, shape))
        for r, y in enumerate(res):
            assert y.dtype == dtype and y.shape == shape
            assert torch.equal(y, _full(shape, (r - 1) % p, dtype))


def test_eager_send_copies_the_buffer_and_messages_do_not_overtake():
    def main(group):
        x = torch.zeros(2)
        if group.rank == 0:
            for k in range(3):
                x.fill_(k)
                group.isend(x, 1, tag=5)          # never waited: eager copies at post
            return None
        return [group.recv(torch.empty(2), 0, tag=5)[0].item() for _ in range(3)]

    with pytest.warns(UnwaitedHandleWarning, match="freed without wait"):
        assert run_sim(main, 2)[1] == [0.0, 1.0, 2.0]


def test_tags_and_groups_keep_messages_apart():
    def main(group):
        sub = group.subgroup([0, 1])
        if group.rank == 0:
            group.send(torch.tensor([1.0]), 1, tag=0)
            group.send(torch.tensor([2.0]), 1, tag=1)
            sub.send(torch.tensor([3.0]), 1, tag=0)
            return None
        a = sub.recv(torch.empty(1), 0, tag=0)
        b = group.recv(torch.empty(1), 0, tag=1)
        c = group.recv(torch.empty(1), 0, tag=0)
        return [a.item(), b.item(), c.item()]

    assert run_sim(main, 2)[1] == [3.0, 2.0, 1.0]


# -- provided collectives -----------------------------------------------------------------------
def _reference_reduce(values, op, dtype):
    acc = torch.tensor(values[0], dtype=dtype)
    for v in values[1:]:
        v = torch.tensor(v, dtype=dtype)
        acc = {"sum": acc + v, "prod": acc * v, "max": torch.maximum(acc, v),
               "min": torch.minimum(acc, v)}[op]
    return acc


@pytest.mark.parametrize("op", ["sum", "prod", "max", "min"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("p", SIZES)
def test_all_reduce(op, dtype, p):
    def main(group):
        x = _full((2, 3), group.rank + 1, dtype)
        z = torch.empty(0, dtype=dtype)
        group.all_reduce(z, op)
        return group.all_reduce(x, op)

    res = run_sim(main, p, network=NET)
    expected = _reference_reduce(list(range(1, p + 1)), op, dtype)
    if op == "sum":
        assert expected.item() == p * (p + 1) / 2
    for x in res:
        assert x.dtype == dtype and torch.equal(x, expected.expand(2, 3))
    n_bytes = 6 * expected.element_size()
    assert res.sim_time == pytest.approx(cost_model.ring_all_reduce(p, 0, 1e-5, 1e-9)
                                         + cost_model.ring_all_reduce(p, n_bytes, 1e-5, 1e-9), rel=1e-12)


def test_all_reduce_avg_and_non_contiguous():
    def main(group):
        x = torch.full((3, 4), float(group.rank)).t()       # non-contiguous (4, 3)
        return group.all_reduce(x, "avg")

    for x in run_sim(main, 4):
        assert torch.equal(x, torch.full((4, 3), 1.5))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("p", SIZES)
def test_all_gather_reduce_scatter_broadcast(dtype, p):
    def main(group):
        r = group.rank
        gathered = group.all_gather(_full((2, 3), r, dtype))                    # (2p, 3)
        scalar = group.all_gather(_full((), r, dtype))                          # (p,)
        rows = (torch.arange(2 * p) + r).to(dtype).reshape(2 * p, 1)            # row i: i + r
        scattered = group.reduce_scatter(rows.expand(2 * p, 2).contiguous())    # (2, 2)
        bcast = [group.broadcast(_full((3,), r, dtype), src=s) for s in range(p)]
        empty = group.all_gather(torch.empty(0, 4, dtype=dtype))
        return gathered, scalar, scattered, bcast, empty

    res = run_sim(main, p)
    expected_gather = torch.cat([_full((2, 3), r, dtype) for r in range(p)])
    for r, (gathered, scalar, scattered, bcast, empty) in enumerate(res):
        assert torch.equal(gathered, expected_gather)
        assert torch.equal(scalar, torch.arange(p).to(dtype))
        # row i of the sum: p*i + p(p-1)/2
        rows = torch.arange(2 * r, 2 * r + 2)
        expected = _reference_reduce([(rows + q).tolist() for q in range(p)], "sum", dtype)
        assert torch.equal(scattered, expected.reshape(2, 1).expand(2, 2))
        assert all(torch.equal(b, _full((3,), s, dtype)) for s, b in enumerate(bcast))
        assert empty.shape == (0, 4)


@pytest.mark.parametrize("p", [1, 3, 8])
def test_collective_times_follow_the_cost_model(p):
    def main(group):
        group.compute(1e-3 * group.rank)                    # skew: the last rank enters last
        t0 = group.now()
        group.barrier()
        t1 = group.now()
        group.all_reduce(torch.zeros(1000))
        t2 = group.now()
        group.all_gather(torch.zeros(100))
        t3 = group.now()
        group.reduce_scatter(torch.zeros(100 * p))
        t4 = group.now()
        group.broadcast(torch.zeros(50), src=p - 1)
        return t0, t1, t2, t3, t4, group.now()

    a, b = 1e-5, 1e-9
    res = run_sim(main, p, network=SimNetwork(a, b))
    start = 1e-3 * (p - 1)
    steps = [cost_model.dissemination_barrier(p, a), cost_model.ring_all_reduce(p, 4000, a, b),
             cost_model.ring_all_gather(p, 400 * p, a, b), cost_model.ring_reduce_scatter(p, 400 * p, a, b),
             cost_model.binomial_broadcast(p, 200, a, b)]
    expected = [start + sum(steps[:k]) for k in range(len(steps) + 1)]
    for r, times in enumerate(res):
        assert times[0] == pytest.approx(1e-3 * r)
        assert list(times[1:]) == pytest.approx(expected[1:], rel=1e-12)


@pytest.mark.parametrize("p", [2, 5, 8])
def test_subgroups(p):
    def main(group):
        r = group.rank
        evens = [q for q in range(p) if q % 2 == 0]
        mine = group.subgroup(evens if r % 2 == 0 else [q for q in range(p) if q % 2])
        total = mine.all_reduce(torch.tensor([float(r)]))
        if mine.size > 1:                                    # a ring inside the sub-group
            y = mine.sendrecv(torch.tensor([r]), (mine.rank + 1) % mine.size, torch.empty(1, dtype=torch.int64),
                              (mine.rank - 1) % mine.size)
        else:
            y = torch.tensor([r])
        return mine.ranks, mine.rank, total.item(), y.item()

    for r, (ranks, sub_rank, total, y) in enumerate(run_sim(main, p)):
        assert r in ranks and ranks[sub_rank] == r
        assert total == sum(ranks)
        assert y == ranks[(sub_rank - 1) % len(ranks)]


def test_collectives_disabled_but_barrier_allowed():
    def main(group):
        group.barrier()
        group.all_reduce(torch.ones(2))

    with pytest.raises(RankError) as info:
        run_sim(main, 3, collectives=False)
    assert isinstance(info.value.cause, CollectivesDisabledError)   # the barrier passed
    assert "all_reduce on rank" in str(info.value)


def test_collective_mismatch_names_both_calls():
    def main(group):
        group.all_reduce(torch.ones(2 + group.rank))

    with pytest.raises(RankError) as info:
        run_sim(main, 2)
    assert isinstance(info.value.cause, MessageMismatchError)
    assert "(2,)" in str(info.value) and "(3,)" in str(info.value)


# -- simulated time of hand-written algorithms --------------------------------------------------
def test_time_of_one_message_and_port_contention():
    def main(group):
        x = torch.zeros(250)                                  # 1000 bytes
        if group.rank == 0:
            group.send(x, 1)
        elif group.rank == 1:
            group.recv(x, 0)
            group.recv(x, 2)                                  # arrived second: port was busy
        else:
            group.send(x, 1)
        return group.now()

    c = cost_model.p2p(1000, 1e-5, 1e-9)
    assert run_sim(main, 3, network=NET) == pytest.approx([c, 2 * c, 2 * c], rel=1e-12)


@pytest.mark.parametrize("p", [2, 3, 5, 8])
def test_time_of_naive_gather(p):
    def main(group):
        x = torch.full((100,), float(group.rank))
        if group.rank != 0:
            group.send(x, 0)
            return None
        return [group.recv(torch.empty(100), q)[0].item() for q in range(1, p)]

    res = run_sim(main, p, network=NET)
    assert res[0] == list(range(1, p))
    assert res.sim_time == pytest.approx((p - 1) * cost_model.p2p(400, 1e-5, 1e-9), rel=1e-12)


def ring_all_reduce(group, x):
    """Sum x (n,), n divisible by p, around a ring of sendrecv: 2(p-1) steps of n/p elements."""
    p, r = group.size, group.rank
    chunks = list(x.chunk(p))
    buf = torch.empty_like(chunks[0])
    right, left = (r + 1) % p, (r - 1) % p
    for s in range(p - 1):                                    # reduce-scatter
        group.sendrecv(chunks[(r - s) % p], right, buf, left)
        chunks[(r - s - 1) % p].add_(buf)
    for s in range(p - 1):                                    # all-gather
        group.sendrecv(chunks[(r - s + 1) % p], right, chunks[(r - s) % p], left)
    return x


@pytest.mark.parametrize("p", [2, 3, 5, 8, 16])
def test_time_of_ring_all_reduce(p):
    n = 12 * p

    def main(group):
        return ring_all_reduce(group, torch.full((n,), float(group.rank)))

    res = run_sim(main, p, network=NET)
    assert all(torch.equal(x, torch.full((n,), p * (p - 1) / 2)) for x in res)
    assert res.sim_time == pytest.approx(cost_model.ring_all_reduce(p, 4 * n, 1e-5, 1e-9), rel=1e-12)


@pytest.mark.parametrize("p", [2, 3, 4, 5, 7, 8, 13])
def test_time_of_binomial_broadcast(p):
    def main(group):
        r = group.rank
        x = torch.full((64,), 7.0) if r == 0 else torch.empty(64)
        mask = 1
        while mask < p:                                       # round k: ranks < 2^k send
            if r < mask and r + mask < p:
                group.send(x, r + mask)
            elif mask <= r < 2 * mask:
                group.recv(x, r - mask)
            mask *= 2
        return x

    res = run_sim(main, p, network=NET)
    assert all(torch.equal(x, torch.full((64,), 7.0)) for x in res)
    assert res.sim_time == pytest.approx(cost_model.binomial_broadcast(p, 256, 1e-5, 1e-9), rel=1e-12)


@pytest.mark.parametrize("p", [2, 4, 8, 64])
def test_time_of_recursive_doubling(p):
    def main(group):                                          # partners r ^ 1, r ^ 2, r ^ 4, ...
        r = group.rank
        x, buf = torch.full((32,), float(r)), torch.empty(32)
        k = 1
        while k < p:
            group.sendrecv(x, r ^ k, buf, r ^ k)
            x += buf
            k *= 2
        return x

    res = run_sim(main, p, network=NET)
    assert all(torch.equal(x, torch.full((32,), p * (p - 1) / 2)) for x in res)
    assert res.sim_time == pytest.approx(math.log2(p) * cost_model.p2p(128, 1e-5, 1e-9), rel=1e-12)


@pytest.mark.parametrize("p,m", [(3, 1), (5, 4), (64, 8)])
def test_time_of_pipelined_chain(p, m):
    def main(group):                                          # chunks flow 0 -> 1 -> ... -> p-1
        r = group.rank
        x = torch.full((8 * m,), 5.0) if r == 0 else torch.zeros(8 * m)
        handles = []
        for chunk in x.chunk(m):
            if r > 0:
                group.recv(chunk, r - 1)
            if r < p - 1:
                handles.append(group.isend(chunk, r + 1))
        for h in handles:
            h.wait()
        return x

    res = run_sim(main, p, network=NET)
    assert all(torch.equal(x, torch.full((8 * m,), 5.0)) for x in res)
    assert res.sim_time == pytest.approx((p - 2 + m) * cost_model.p2p(32, 1e-5, 1e-9), rel=1e-12)


def test_time_does_not_depend_on_the_order_ranks_run():
    p = 6

    def main(group):                # rank 1 runs first but sends last in simulated time
        r = group.rank
        if r == 0:
            return [group.recv(torch.empty(10), q)[0].item() for q in range(1, p)]
        group.compute((p - r) * 1e-3)
        group.send(torch.full((10,), float(r)), 0)
        return None

    res = run_sim(main, p, network=NET)
    assert res[0] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert res.sim_time == pytest.approx((p - 1) * 1e-3 + cost_model.p2p(40, 1e-5, 1e-9), rel=1e-12)


def test_port_timetable():
    port = Port()
    port.book(2.0, 3.0)
    port.book(0.0, 1.0)                                      # out of order: a gap stays
    port.book(1.0, 2.0)                                      # fills the gap: all merged
    assert (port.starts, port.ends) == ([0.0], [3.0])
    assert port.conflict(2.5, 4.0) == 3.0 and port.conflict(3.0, 4.0) is None
    other = Port()
    other.book(3.0, 5.0)
    assert book_transfer(port, other, 0.5, 1.0, lambda: 0.0) == 5.0   # both free from 5
    assert book_transfer(Port(), other, 1.0, 2.0, lambda: 0.0) == 1.0  # fits before
    port.prune(4.0)
    assert (port.starts, port.ends) == ([5.0], [6.0])


def test_rendezvous_waits_for_the_receive():
    def late_receiver(group):
        x = torch.zeros(1000)
        if group.rank == 0:
            group.send(x, 1)
        else:
            group.compute(1.0)
            group.recv(x, 0)
        return group.now()

    c = cost_model.p2p(4000, 1e-5, 1e-9)
    eager = run_sim(late_receiver, 2, network=NET)
    rendezvous = run_sim(late_receiver, 2, network=SimNetwork(1e-5, 1e-9, eager_limit=1000))
    assert list(eager) == pytest.approx([c, 1.0])
    assert list(rendezvous) == pytest.approx([1.0 + c, 1.0 + c])

    def send_send(group):                                    # fine eager, a deadlock rendezvous
        x = torch.zeros(1000)
        group.send(x, 1 - group.rank)
        group.recv(x, 1 - group.rank)

    run_sim(send_send, 2, network=NET)
    with pytest.raises(RankError) as info:
        run_sim(send_send, 2, network=SimNetwork(eager_limit=0))
    assert "0 -> 1 -> 0" in str(info.value.cause)


def test_compute_now_counters_and_trace():
    def main(group):
        group.compute(0.5)
        if group.rank == 0:
            group.send(torch.zeros(10), 1)
        else:
            group.recv(torch.zeros(10), 0)
        return group.now()

    res = run_sim(main, 2, network=NET)
    c = cost_model.p2p(40, 1e-5, 1e-9)
    assert list(res) == pytest.approx([0.5 + c, 0.5 + c]) and res.sim_time == pytest.approx(0.5 + c)
    assert res.counters[0].op("send").bytes_sent == 40 and res.counters[1].messages_recv == 1
    assert [(e.rank, e.op, e.peer) for e in res.events] == [(0, "send", 1), (1, "recv", 0)]
    assert res.events[1].start == pytest.approx(0.5) and res.events[1].end == pytest.approx(0.5 + c)
    assert res.backend == "sim" and res.wall_time > 0


def test_deterministic():
    def main(group):
        p, r = group.size, group.rank
        g = torch.Generator().manual_seed(r)
        group.compute(float(torch.rand(1, generator=g)) * 1e-4)
        x = torch.rand(37, generator=g)
        handles = [group.isend(x, q, tag=1) for q in range(p) if q != r]
        got = [group.recv(torch.empty(37), q, tag=1) for q in range(p) if q != r]
        for h in handles:
            h.wait()
        return torch.stack(got + [x]).sum(0), group.all_reduce(x.clone())

    a, b = run_sim(main, 6, network=NET), run_sim(main, 6, network=NET)
    assert a.sim_time == b.sim_time and a.events == b.events
    assert all(torch.equal(u[0], v[0]) and torch.equal(u[1], v[1]) for u, v in zip(a, b))


# -- errors -------------------------------------------------------------------------------------
def test_deadlock_report():
    before = threading.active_count()

    def main(group):
        group.recv(torch.zeros(2), 1 - group.rank)

    with pytest.raises(RankError) as info:
        run_sim(main, 2)
    err = info.value
    assert err.rank == 0 and isinstance(err.cause, DeadlockError)
    text = str(err.cause)
    assert "sim" in text and "simulated time" in text
    assert "wait-for cycle: 0 -> 1 -> 0" in text
    assert "rank 0: waits in recv(src=1, tag=0)" in text and "rank 1: waits in recv(src=0, tag=0)" in text
    assert threading.active_count() == before


def test_deadlock_report_names_the_line_each_rank_waits_at():
    """Each rank's line of the report says where its code called the op that blocks (not the runtime's)."""
    def main(group):
        if group.rank == 0:
            group.recv(torch.zeros(2), 1)
        else:
            h = group.irecv(torch.zeros(2), 0)
            h.wait()

    with pytest.raises(RankError) as info:
        run_sim(main, 2)
    text = str(info.value.cause)
    first = main.__code__.co_firstlineno
    assert f"rank 0: waits in recv(src=1, tag=0) at tests/runtime/test_sim.py:{first + 2} (main)" in text, text
    assert f"at tests/runtime/test_sim.py:{first + 5} (main)" in text.split("rank 1:")[1], text


def test_deadlock_without_cycle_and_in_a_collective():
    def early_return(group):
        if group.rank == 0:
            group.recv(torch.zeros(1), 2)
        elif group.rank == 1:
            group.barrier()

    with pytest.raises(RankError) as info:
        run_sim(early_return, 3)
    text = str(info.value.cause)
    assert "rank 2: finished" in text and "no wait-for cycle" in text
    assert "barrier(group=world, call #1)" in text

    def collective_vs_recv(group):
        if group.rank == 0:
            group.all_reduce(torch.zeros(1))
        else:
            group.recv(torch.zeros(1), 0)

    with pytest.raises(RankError) as info:
        run_sim(collective_vs_recv, 2)
    assert "0 -> 1 -> 0" in str(info.value.cause)


def test_mismatched_shape():
    def main(group):
        if group.rank == 0:
            group.send(torch.zeros(4), 1)
        else:
            group.recv(torch.zeros(3), 0)

    with pytest.raises(RankError) as info:
        run_sim(main, 2)
    assert info.value.rank == 1 and isinstance(info.value.cause, MessageMismatchError)
    assert "(4,)" in str(info.value) and "(3,)" in str(info.value)


@pytest.mark.parametrize("exc", [ValueError("boom on rank 2"), SystemExit(3)])
def test_failure_on_one_rank(exc):
    before = threading.active_count()

    def main(group):
        if group.rank == 2:
            group.compute(1.0)
            raise exc
        if group.rank == 0:
            group.recv(torch.zeros(1), 2)                     # blocked when rank 2 fails
        group.all_reduce(torch.zeros(1))                      # the others block later

    with pytest.raises(RankError) as info:
        run_sim(main, 4)
    err = info.value
    assert err.rank == 2 and err.exc_type == type(exc).__name__ and err.cause is exc
    assert "PeerFailedError" in str(err) and "main" in err.remote_traceback
    assert threading.active_count() == before


def test_peer_failed_error_text():
    seen = []

    def main(group):
        if group.rank == 1:
            raise RuntimeError("first")
        try:
            group.recv(torch.zeros(1), 1)
        except PeerFailedError as e:
            seen.append(str(e))

    with pytest.raises(RankError) as info:
        run_sim(main, 2)
    assert info.value.rank == 1 and info.value.exc_type == "RuntimeError"
    assert "rank 0 was stopped in recv(src=1, tag=0)" in seen[0]
    assert "rank 1 failed with RuntimeError: first" in seen[0]


# -- scale --------------------------------------------------------------------------------------
def test_1024_ranks_ring_exchange():
    p = 1024

    def main(group):
        r = group.rank
        y = group.sendrecv(torch.full((8,), float(r)), (r + 1) % p, torch.empty(8), (r - 1) % p)
        return y[0].item()

    start = time.perf_counter()
    res = run_sim(main, p, network=NET)
    wall = time.perf_counter() - start
    print(f"\n1024-rank ring exchange: wall {wall:.2f} s, simulated {res.sim_time:.3g} s")
    assert list(res) == [float((r - 1) % p) for r in range(p)]
    assert res.sim_time == pytest.approx(cost_model.p2p(32, 1e-5, 1e-9), rel=1e-12)
    assert wall < 10


def test_ring_all_reduce_at_64_ranks():
    p, n = 64, 64 * 4

    def main(group):
        return ring_all_reduce(group, torch.full((n,), float(group.rank)))

    start = time.perf_counter()
    res = run_sim(main, p, network=NET, trace=False)
    print(f"\n64-rank ring all-reduce: wall {time.perf_counter() - start:.2f} s")
    assert all(torch.equal(x, torch.full((n,), p * (p - 1) / 2)) for x in res)
    assert res.sim_time == pytest.approx(cost_model.ring_all_reduce(p, 4 * n, 1e-5, 1e-9), rel=1e-12)


def test_many_buffered_messages_keep_order():
    def main(group):                                          # rank 0 runs far ahead of rank 1
        if group.rank == 0:
            for k in range(500):
                group.send(torch.tensor([k]), 1)
            return group.now()
        group.compute(1.0)
        return [group.recv(torch.empty(1, dtype=torch.int64), 0).item() for _ in range(500)]

    res = run_sim(main, 2, network=NET)
    assert res[1] == list(range(500))
    assert res[0] == pytest.approx(500 * cost_model.p2p(8, 1e-5, 1e-9))


def test_mismatch_in_a_subgroup_names_world_ranks():
    def main(group):
        sub = group.subgroup([1, 2])
        if sub.rank == 0:
            sub.send(torch.zeros(2, dtype=torch.int64), 1)
        else:
            sub.recv(torch.zeros(2), 0)

    with pytest.raises(RankError) as info:
        run_sim(lambda g: main(g) if g.rank else None, 3)
    assert info.value.rank == 2
    assert "rank 1 (world rank 2)" in str(info.value) and "int64" in str(info.value)


# -- payload copies (minitorch_dist/runtime/sim/payloads.py: raw bytes for plain CPU tensors, torch otherwise) ---------------
def test_eager_copies_of_every_kind_of_tensor():
    def main(group):
        r, peer = group.rank, 1 - group.rank
        z = torch.tensor([1 + 2j, 3 - 4j])
        sends = [torch.arange(6, dtype=torch.int16).reshape(2, 3) + r,       # plain: raw bytes
                 torch.tensor([True, False]) ^ bool(r),
                 torch.tensor(7.5 + r, dtype=torch.bfloat16),                # 0-dim
                 z.conj(),                                                   # conj bit: torch
                 z.conj().imag[:1],                                          # neg bit: torch
                 torch.ones(3, requires_grad=True) * (r + 1)]
        got = []
        for x in sends:
            y = torch.empty(x.shape, dtype=x.dtype)
            group.sendrecv(x, peer, y, peer)
            got.append(y)
        return got

    res = run_sim(main, 2)
    for r in range(2):
        peer = 1 - r
        got = res[r]
        assert torch.equal(got[0], torch.arange(6, dtype=torch.int16).reshape(2, 3) + peer)
        assert torch.equal(got[1], torch.tensor([True, False]) ^ bool(peer))
        assert got[2].item() == 7.5 + peer
        assert torch.equal(got[3], torch.tensor([1 - 2j, 3 + 4j]))
        assert torch.equal(got[4], torch.tensor([-2.0]))
        assert torch.equal(got[5], torch.full((3,), float(peer + 1)))


def test_receive_buffers_that_need_torch_copies():
    def main(group):
        r, peer = group.rank, 1 - group.rank
        leaf = torch.zeros(3, requires_grad=True)
        with torch.no_grad():
            group.sendrecv(torch.full((3,), float(r)), peer, leaf, peer)    # requires grad
        strided = torch.zeros(3, 4)[:, 1]                                    # staging
        group.sendrecv(torch.full((3,), float(r)), peer, strided, peer)
        return leaf.detach().clone(), strided.clone()

    for r, (leaf, strided) in enumerate(run_sim(main, 2)):
        assert torch.equal(leaf, torch.full((3,), float(1 - r)))
        assert torch.equal(strided, torch.full((3,), float(1 - r)))


def test_receive_bumps_the_version_counter_like_copy_():
    def main(group):
        r, peer = group.rank, 1 - group.rank
        w = torch.ones(2, requires_grad=True)
        buf = torch.ones(2)
        loss = (w * buf).sum()                     # buf is saved for backward
        version = buf._version
        group.sendrecv(torch.full((2,), 2.0), peer, buf, peer)
        assert buf._version > version
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()
        return buf.tolist()

    assert list(run_sim(main, 2)) == [[2.0, 2.0], [2.0, 2.0]]


def test_raw_and_torch_copies_give_the_same_times_and_mismatch_errors():
    def main(group, dtype, mismatch):
        r, peer = group.rank, 1 - group.rank
        for k in range(5):
            x = torch.full((4, k + 1), float(k + r)).to(dtype)
            y = group.sendrecv(x, peer, torch.empty_like(x), peer)
            assert torch.equal(y, torch.full((4, k + 1), float(k + peer)).to(dtype))
        if mismatch and r == 1:
            group.recv(torch.empty(2, 3, dtype=dtype), 0)
        elif mismatch:
            group.send(torch.zeros(3, 2, dtype=dtype), 1)

    # float64 travels as raw bytes, complex64 (also 8 bytes an element) as a torch clone
    times = [run_sim(main, 2, (dtype, False), network=NET).sim_time for dtype in (torch.float64, torch.complex64)]
    assert times[0] == times[1]
    for dtype in (torch.float64, torch.complex64):
        with pytest.raises(RankError) as info:
            run_sim(main, 2, (dtype, True), network=NET)
        assert info.value.rank == 1 and "MessageMismatchError" in str(info.value)
        assert "shape (3, 2)" in str(info.value) and "shape (2, 3)" in str(info.value)


def test_ring_all_reduce_times_with_and_without_trace():
    p, n = 48, 48 * 3

    def main(group):
        return ring_all_reduce(group, torch.full((n,), float(group.rank)))

    on, off = run_sim(main, p, network=NET), run_sim(main, p, network=NET, trace=False)
    assert on.sim_time == pytest.approx(cost_model.ring_all_reduce(p, 4 * n, 1e-5, 1e-9), rel=1e-12)
    assert on.sim_time == off.sim_time
    assert [c.op("sendrecv").__dict__ for c in on.counters] == [c.op("sendrecv").__dict__ for c in off.counters]
    assert on.counters[0].op("sendrecv").calls == 2 * (p - 1)
    assert len(on.events) == p * 2 * (p - 1) and not off.events
