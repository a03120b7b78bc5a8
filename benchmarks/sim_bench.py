"""Wall time of the sim backend on p2p-heavy programs (not a test; these machines are noisy).

    python -m tools.overlay solutions -- .venv/bin/python benchmarks/sim_bench.py [--quick] [--check]

Runs homework 1's all-reduces (minitorch_dist.collectives; the reference through the overlay).
Prints the wall time and the process's CPU time (every rank thread's; steadier than wall on
these shared machines), the load average, and the scheduler's thread hand-offs of a ring
all-reduce built from sendrecv (2(p-1) steps) at p=64 and p=1024 (n=1024 float32), trace on
and off, and of a 1024-rank ring exchange (one sendrecv per rank). --check also prints the
simulated times and event digests of ring, naive, tree and butterfly all-reduce at p=64 (they
must not change when the sim backend is optimised). --quick skips the p=1024 all-reduce with
trace on.

It also prints the floor no runtime can go below: the same ring code run for every rank
in one thread with a sendrecv that does nothing (the student's slicing and add_ alone),
wall and CPU, and the ratio of each p=1024 run to it (CPU over CPU, wall over wall); the
runtime's share is the ratio minus one, also printed per sendrecv call (CPU microseconds of
the runtime against the ring code's own per step). Under load the wall ratio swings (the
floor's wall time can double while its CPU time stays): read the CPU ratio. With trace on,
run_sim makes the Event objects when res.events is first read: that read is timed and printed
apart, and the ratio with it.

With the trace off, Group.sendrecv's usual case runs compiled where it is built
(minitorch_dist/runtime/sim/express.py; scripts/setup.sh builds it): the first line says which
path ran. MINITORCH_DIST_SIM_EXPRESS=0 runs the Python path, for comparison. --check's digests
come from traced runs, whose calls all take the Python path; the compiled path's simulated
times are compared with it in tests/runtime/test_sim_express.py.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import zlib

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minitorch_dist.collectives import ALL_REDUCES  # noqa: E402
from minitorch_dist.runtime.sim import SimNetwork, run_sim  # noqa: E402
from minitorch_dist.runtime.sim import express as sim_express  # noqa: E402
from minitorch_dist.runtime.sim import network as sim_network  # noqa: E402
from minitorch_dist.runtime.sim.scheduler import Scheduler  # noqa: E402


def all_reduce_program(name):
    """Rank code: homework 1's `name` all-reduce of n floats, rank r contributing r."""
    def program(group, n):
        x = torch.full((n,), float(group.rank))
        ALL_REDUCES[name](x, group)
        return x[0].item()
    return program


ring_all_reduce = all_reduce_program("ring")


def ring_exchange(group):
    right, left = (group.rank + 1) % group.size, (group.rank - 1) % group.size
    got = torch.empty(16)
    group.sendrecv(torch.full((16,), float(group.rank)), right, got, left)
    return got[0].item() == left


class _NoMessages:
    """A stand-in group whose sendrecv moves nothing: runs a rank's ring code alone."""

    def __init__(self, rank: int, size: int):
        self.rank, self.size, self.device = rank, size, torch.device("cpu")

    def sendrecv(self, send_tensor, dst, recv_tensor, src, tag=0):
        return recv_tensor


def floor_seconds(p: int, n: int) -> tuple[float, float]:
    """(wall, CPU) seconds of every rank's ring all-reduce code with sendrecv doing nothing, one
    after another, on one torch thread (as run_sim runs the ranks)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        t, c = time.perf_counter(), time.process_time()
        for r in range(p):
            ALL_REDUCES["ring"](torch.full((n,), float(r)), _NoMessages(r, p))
        return time.perf_counter() - t, time.process_time() - c
    finally:
        torch.set_num_threads(threads)


class _CountingScheduler(Scheduler):
    """The sim scheduler, remembered when made, so that the bench can print its hand-offs."""

    last = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _CountingScheduler.last = self


def timed(fn, p, args=(), trace=True, network=None):
    t, c = time.perf_counter(), time.process_time()
    sim_network.Scheduler = _CountingScheduler
    try:
        res = run_sim(fn, p, args=args, trace=trace, collectives=False, network=network)
    finally:
        sim_network.Scheduler = Scheduler
    res.cpu_time = time.process_time() - c     # every rank thread's CPU: steadier than wall under load
    res.switches = _CountingScheduler.last.switches
    return time.perf_counter() - t, res


def check_sim_times(p=64, n=1024) -> None:
    """Simulated times of the four all-reduces (must stay identical, bit for bit)."""
    for net in (SimNetwork(), SimNetwork(eager_limit=0)):
        for name in ("ring", "naive", "tree", "butterfly"):
            _, res = timed(all_reduce_program(name), p, args=(n,), network=net)
            ok = all(v == p * (p - 1) / 2 for v in res)
            digest = zlib.crc32(repr([(e.rank, e.op, e.peer, e.start, e.end) for e in res.events]).encode())
            print(f"sim_time {name:9s} p={p} eager_limit={net.eager_limit}: {res.sim_time!r} "
                  f"events {len(res.events)} digest {digest:08x} "
                  f"{'ok' if ok else 'WRONG RESULT'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--check", action="store_true")
    opts = parser.parse_args()
    try:
        run_sim(ring_all_reduce, 2, args=(4,), collectives=False)
    except Exception as exc:      # noqa: BLE001 - the stubs: say how to run against the reference
        sys.exit(f"sim_bench runs homework 1's all-reduces, which raised {type(getattr(exc, 'cause', None) or exc).__name__} here; run it "
                 f"against the reference: python -m tools.overlay solutions -- python benchmarks/sim_bench.py")
    module = sim_express.load()
    print("sendrecv path with the trace off: " + ("compiled (runtime/sim/express.cpp)" if module is not None else
          f"Python only: the compiled one is {sim_express.why_not}"))
    if opts.check:
        check_sim_times()
    n = 1024
    runs = [(64, True), (64, False), (1024, False)] + ([] if opts.quick else [(1024, True)])
    big = []
    for p, trace in runs:
        wall, res = timed(ring_all_reduce, p, args=(n,), trace=trace)
        assert all(v == p * (p - 1) / 2 for v in res)
        print(f"ring all-reduce p={p:5d} n={n} trace={'on ' if trace else 'off'}: wall {wall:7.3f} s "
              f"(cpu {res.cpu_time:7.3f} s, load {os.getloadavg()[0]:4.1f}), simulated {res.sim_time * 1e6:.1f} us, "
              f"{res.switches} thread hand-offs")
        if p == 1024:
            read = 0.0
            if trace:                 # run_sim makes the Event objects when they are first read
                c = time.process_time()
                len(res.events)
                read = time.process_time() - c
                print(f"ring all-reduce p= 1024 trace=on : reading res.events ({len(res.events)} "
                      f"events) cpu {read:7.3f} s")
            big.append((trace, wall, res.cpu_time, read))
        del res
    floor, floor_cpu = floor_seconds(1024, n)
    print(f"ring all-reduce p= 1024 n={n} ring code alone (sendrecv a no-op): wall {floor:7.3f} s "
          f"(cpu {floor_cpu:7.3f} s, load {os.getloadavg()[0]:4.1f}): the floor")
    calls = 2 * (1024 - 1) * 1024                  # the ring all-reduce's sendrecv calls, all ranks
    for trace, wall, cpu, read in big:
        print(f"ring all-reduce p= 1024 trace={'on ' if trace else 'off'} over the floor: cpu {cpu / floor_cpu:5.2f}x, "
              f"wall {wall / floor:5.2f}x (target <= 2x: the runtime's share at most the ring code's own); "
              f"per sendrecv: runtime {(cpu - floor_cpu) / calls * 1e6:.2f} us CPU, "
              f"ring code {floor_cpu / calls * 1e6:.2f} us"
              + (f"; with the events read: cpu {(cpu + read) / floor_cpu:5.2f}x" if trace else ""))
    wall, res = timed(ring_exchange, 1024)
    assert all(res)
    print(f"ring exchange   p= 1024 (one sendrecv):      wall {wall:7.3f} s, "
          f"simulated {res.sim_time * 1e6:.1f} us")


if __name__ == "__main__":
    main()
