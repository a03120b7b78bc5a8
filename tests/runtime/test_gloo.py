"""The gloo backend through launch(): every Group op, world sizes 1-8, every dtype, failures."""

import os
import time

import pytest
import torch

from minitorch_dist import (CollectivesDisabledError, DeadlockError, MessageMismatchError, RankError,
                            launch, shutdown)


def _ring_counts(group, n):
    right, left = (group.rank + 1) % group.size, (group.rank - 1) % group.size
    group.sendrecv(torch.ones(n), right, torch.empty(n), left)
    group.all_reduce(torch.ones(n))
    return group.now()


REDUCED_DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64",
                  "uint16", "uint32", "uint64"]     # int16 and the wide unsigned ones: reduced widened


def _reductions_in_every_dtype(group):
    """[(dtype, collective, op)] whose result differs from the closed form (row i of rank q is i % 5 + q + 1)."""
    p, r = group.size, group.rank
    wrong = []
    for name in REDUCED_DTYPES:
        dtype = getattr(torch, name)
        rows = [(torch.arange(2 * p * 3).reshape(2 * p, 3) % 5 + q + 1).double() for q in range(p)]
        for op in ("sum", "max", "min", "prod"):
            want = {"sum": sum(rows), "max": torch.stack(rows).amax(0), "min": torch.stack(rows).amin(0),
                    "prod": torch.stack(rows).prod(0)}[op].to(dtype)
            got = group.reduce_scatter(rows[r].to(dtype, copy=True), op)
            if got.dtype != dtype or not torch.equal(got, want[2 * r:2 * r + 2]):
                wrong.append((name, "reduce_scatter", op))
            got = group.all_reduce(rows[r].to(dtype, copy=True), op)      # (in place: a copy)
            if got.dtype != dtype or not torch.equal(got, want):
                wrong.append((name, "all_reduce", op))
    return wrong


def test_reduce_scatter_and_all_reduce_in_every_dtype_gloo_reduces():
    """Every op in every dtype the gloo backend reduces, itself or widened (int16, uint16-64), at 3
    ranks: the rows a rank keeps are its own and each op is the one asked for."""
    assert list(launch(_reductions_in_every_dtype, 3)) == [[], [], []]


def test_counters_and_trace_come_back():
    results = launch(_ring_counts, 3, args=(1000,))
    for c in results.counters:
        assert (c.messages_sent, c.bytes_sent, c.messages_recv, c.bytes_recv) == (1, 4000, 1, 4000)
        assert c.op("all_reduce").calls == 1 and c.op("all_reduce").tensor_bytes == 4000
        assert c.collective_calls() == 1
    ops = sorted((e.rank, e.op, e.peer) for e in results.events)
    assert ops == [(0, "all_reduce", None), (0, "sendrecv", 1), (1, "all_reduce", None), (1, "sendrecv", 2),
                   (2, "all_reduce", None), (2, "sendrecv", 0)]
    assert all(0 <= e.start <= e.end for e in results.events)
    trace = results.chrome_trace()
    assert sum(1 for ev in trace["traceEvents"] if ev.get("ph") == "X") == len(results.events)


def test_trace_off_keeps_counters():
    results = launch(_ring_counts, 2, args=(10,), trace=False)
    assert results.events == [] and results.counters[0].messages_sent == 1


def _uses_all_reduce(group):
    group.all_reduce(torch.ones(2))


def test_collectives_switch(no_leftover_processes):
    with pytest.raises(RankError) as info:
        launch(_uses_all_reduce, 2, collectives=False)
    assert isinstance(info.value.cause, CollectivesDisabledError)
    assert "switched off" in str(info.value) and "send, recv" in str(info.value)


def _deadlock(group):
    group.recv(torch.zeros(3), src=(group.rank + 1) % group.size)


@pytest.mark.parametrize("world_size", [2, 3])
def test_recv_recv_deadlock_names_the_cycle(world_size, no_leftover_processes):
    start = time.monotonic()
    with pytest.raises(RankError) as info:
        launch(_deadlock, world_size, deadline=1.5)
    assert time.monotonic() - start < 15
    err = info.value
    assert isinstance(err.cause, DeadlockError)
    text = str(err)
    cycle = " -> ".join(str(k % world_size) for k in range(world_size + 1))   # smallest rank first
    assert f"wait-for cycle: {cycle}" in text, text
    for r in range(world_size):
        # the line of each rank's call, found from its frame by the watchdog (its own from the handler)
        assert f"rank {r}: waits in recv(src={(r + 1) % world_size}, tag=0) at tests/runtime/test_gloo.py:" \
               f"{_deadlock.__code__.co_firstlineno + 1} (_deadlock)" in text, text


def _raise_on_one(group):
    if group.rank == 1:
        raise ValueError("bad input on purpose")
    group.recv(torch.zeros(1), src=1)


def test_exception_names_rank_and_stops_the_others(no_leftover_processes):
    with pytest.raises(RankError) as info:
        launch(_raise_on_one, 3)
    err = info.value
    assert err.rank == 1 and err.exc_type == "ValueError" and isinstance(err.cause, ValueError)
    assert "bad input on purpose" in str(err) and "_raise_on_one" in err.remote_traceback
    assert "rank 0: stopped by the launcher" in str(err)


def _exit_early(group):
    if group.rank == 2:
        os._exit(7)
    group.barrier()


def _killed(group):
    if group.rank == 0:
        os.kill(os.getpid(), 9)
    group.barrier()


def _sys_exit(group):
    if group.rank == 1:
        raise SystemExit(3)
    group.barrier()


@pytest.mark.parametrize("fn, rank, words", [(_exit_early, 2, "exited with code 7"),
                                             (_killed, 0, "killed by signal SIGKILL"),
                                             (_sys_exit, 1, "SystemExit")])
def test_rank_that_exits_or_is_killed(fn, rank, words, no_leftover_processes):
    with pytest.raises(RankError) as info:
        launch(fn, 3)
    assert info.value.rank == rank and words in str(info.value), str(info.value)


def test_a_rank_that_dies_in_its_task_before_the_launcher_reads_its_ready_is_the_runs_failure(
        monkeypatch, no_leftover_processes):
    """A loaded launcher can be slow to read a new pool's "ready" messages: rank 0 said it was ready,
    took its task and was killed before the launcher looked. That is the run's failure (killed by
    SIGKILL while running the function), not "exited while starting" (seen under load in a CI run)."""
    from minitorch_dist.runtime.launching import pool as pool_module
    real_wait, first = pool_module.wait, [True]

    def slow_wait(conns, timeout=None):
        if first[0]:                      # the first look comes late: rank 0 is dead by then
            first[0] = False
            deadline = time.monotonic() + 60
            while not real_wait(conns, 0.05) and time.monotonic() < deadline:
                pass
            time.sleep(2.0)
            return []
        return real_wait(conns, timeout)

    monkeypatch.setattr(pool_module, "wait", slow_wait)
    with pytest.raises(RankError) as info:
        launch(_killed, 2)
    assert info.value.rank == 0 and "killed by signal SIGKILL" in str(info.value), str(info.value)


def test_a_rank_that_ends_building_its_group_after_a_ready_peer_ended_is_not_the_cause(
        monkeypatch, no_leftover_processes):
    """A new pool's ranks take their task once their own group is built: rank 2 is ready and exits
    in its task while rank 1 still finishes building (here: late, then a barrier that loses rank 2).
    The run's failure is rank 2's exit, not "rank 1 died while building the process group" (seen
    in a loaded run of the launcher tests, about one run in three)."""
    from minitorch_dist.runtime.launching import worker as worker_module
    real = worker_module.make_world

    def late_for_rank_1(rank, world_size, spec):
        made = real(rank, world_size, spec)
        if rank == 1:
            time.sleep(1.0)                     # rank 2 takes its task and exits meanwhile
            made[0].barrier().wait(30)          # ...so this loses it: rank 1 ends, building
        return made

    monkeypatch.setattr(worker_module, "make_world", late_for_rank_1)
    with pytest.raises(RankError) as info:
        launch(_exit_early, 3, fresh=True)
    text = str(info.value)
    assert info.value.rank == 2 and "exited with code 7" in text, text
    assert "rank 1: RankExited: the process of rank 1 exited with code" in text, text
    assert "while building the process group, after a peer ended" in text, text


def _mismatch(group, shape, dtype, sent):
    if group.rank == 0:
        group.send(torch.zeros(sent), 1)
    else:
        group.recv(torch.zeros(shape, dtype=dtype), 0)


@pytest.mark.parametrize("shape, dtype, sent, what", [
    ((4,), torch.float32, 8, "size"), ((2, 4), torch.float32, 8, "shape"), ((8,), torch.float64, 8, "dtype"),
    ((8000,), torch.float32, 8, "size"),       # a payload-sized buffer, an inline message
    ((5000,), torch.float32, 10000, "size"),   # payload bigger than the posted buffer: never sent
    ((20000,), torch.float32, 10000, "size"),  # payload smaller than the posted buffer
    ((2, 5000), torch.float32, 10000, "shape")])
def test_mismatched_receive(shape, dtype, sent, what, no_leftover_processes):
    with pytest.raises(RankError) as info:
        launch(_mismatch, 2, args=(shape, dtype, sent))
    err = info.value
    assert isinstance(err.cause, MessageMismatchError) and err.rank == 1
    text = str(err)
    assert f"the {what} differs" in text
    assert "rank 1 from rank 0" in text and f"({sent},)" in text and str(tuple(shape)) in text
    assert "with send" in text


def _bad_args(group):
    if group.rank == 0:
        group.send(torch.zeros(1), dst=0)


def test_bad_peer_is_a_clear_error():
    with pytest.raises(RankError, match="is this rank itself"):
        launch(_bad_args, 2)


def _pid(group):
    return os.getpid()


def test_warm_pool_is_reused_and_fresh_is_not():
    first = launch(_pid, 2)
    assert list(launch(_pid, 2)) == list(first)
    assert set(launch(_pid, 2, fresh=True)).isdisjoint(first)
    shutdown()


def test_bad_launch_arguments():
    with pytest.raises(Exception, match="world_size must be a positive int"):
        launch(_pid, 0)
    with pytest.raises(Exception, match="backend="):
        launch(_pid, 2, backend="nccl-typo")


def _slow(group):
    time.sleep(30)


def test_whole_run_timeout_reports_states(no_leftover_processes):
    with pytest.raises(Exception) as info:
        launch(_slow, 2, timeout=1.5)
    assert "timeout" in str(info.value) and "running its own code" in str(info.value)
