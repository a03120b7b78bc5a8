"""Wall time of the sim backend on p2p-heavy programs (not a test; these machines are noisy).

    python benchmarks/sim_bench.py [--quick] [--check]

Prints the wall time of a ring all-reduce built from sendrecv (2(p-1) steps) at p=64 and
p=1024 (n=1024 float32), trace on and off, and of a 1024-rank ring exchange (one sendrecv
per rank). --check also prints the simulated times of ring, naive, tree and butterfly
all-reduce at p=64 (they must not change when the sim backend is optimised).
--quick skips the p=1024 all-reduce with trace on.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import zlib

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minitorch_dist.runtime.sim import SimNetwork, run_sim  # noqa: E402


def ring_all_reduce(group, n):
    """Reduce-scatter then all-gather around the ring, one sendrecv per step."""
    p, r = group.size, group.rank
    x = torch.full((n,), float(r))
    chunks = list(x.chunk(p))
    right, left = (r + 1) % p, (r - 1) % p
    buf = torch.empty_like(chunks[0])
    for step in range(p - 1):                       # reduce-scatter
        s, d = (r - step) % p, (r - step - 1) % p
        group.sendrecv(chunks[s], right, buf, left)
        chunks[d].add_(buf)
    for step in range(p - 1):                       # all-gather
        s, d = (r + 1 - step) % p, (r - step) % p
        group.sendrecv(chunks[s], right, chunks[d], left)
    return x[0].item()


def naive_all_reduce(group, n):
    """Everyone sends to rank 0, which sums and sends back."""
    p, r = group.size, group.rank
    x = torch.full((n,), float(r))
    if r == 0:
        buf = torch.empty_like(x)
        for src in range(1, p):
            group.recv(buf, src)
            x.add_(buf)
        handles = [group.isend(x, dst) for dst in range(1, p)]
        for h in handles:
            h.wait()
    else:
        group.send(x, 0)
        group.recv(x, 0)
    return x[0].item()


def tree_all_reduce(group, n):
    """Binomial-tree reduce to rank 0, then binomial-tree broadcast."""
    p, r = group.size, group.rank
    x = torch.full((n,), float(r))
    buf = torch.empty_like(x)
    mask = 1
    while mask < p:                                 # reduce
        if r & mask:
            group.send(x, r - mask)
            break
        if r + mask < p:
            group.recv(buf, r + mask)
            x.add_(buf)
        mask <<= 1
    mask = 1
    while mask < p:
        mask <<= 1
    mask >>= 1
    while mask:                                     # broadcast
        if r % (2 * mask) == 0 and r + mask < p:
            group.send(x, r + mask)
        elif r % (2 * mask) == mask:
            group.recv(x, r - mask)
        mask >>= 1
    return x[0].item()


def butterfly_all_reduce(group, n):
    """Recursive doubling (p a power of two)."""
    p, r = group.size, group.rank
    x = torch.full((n,), float(r))
    buf = torch.empty_like(x)
    mask = 1
    while mask < p:
        group.sendrecv(x, r ^ mask, buf, r ^ mask)
        x.add_(buf)
        mask <<= 1
    return x[0].item()


def ring_exchange(group):
    right, left = (group.rank + 1) % group.size, (group.rank - 1) % group.size
    got = torch.empty(16)
    group.sendrecv(torch.full((16,), float(group.rank)), right, got, left)
    return got[0].item() == left


def timed(fn, p, args=(), trace=True, network=None):
    t = time.perf_counter()
    res = run_sim(fn, p, args=args, trace=trace, collectives=False, network=network)
    return time.perf_counter() - t, res


def check_sim_times(p=64, n=1024) -> None:
    """Simulated times of the four all-reduces (must stay identical, bit for bit)."""
    for net in (SimNetwork(), SimNetwork(eager_limit=0)):
        for name, fn in (("ring", ring_all_reduce), ("naive", naive_all_reduce),
                         ("tree", tree_all_reduce), ("butterfly", butterfly_all_reduce)):
            _, res = timed(fn, p, args=(n,), network=net)
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
    if opts.check:
        check_sim_times()
    n = 1024
    runs = [(64, True), (64, False), (1024, False)] + ([] if opts.quick else [(1024, True)])
    for p, trace in runs:
        wall, res = timed(ring_all_reduce, p, args=(n,), trace=trace)
        assert all(v == p * (p - 1) / 2 for v in res)
        print(f"ring all-reduce p={p:5d} n={n} trace={'on ' if trace else 'off'}: wall {wall:7.3f} s, "
              f"simulated {res.sim_time * 1e6:.1f} us")
    wall, res = timed(ring_exchange, 1024)
    assert all(res)
    print(f"ring exchange   p= 1024 (one sendrecv):      wall {wall:7.3f} s, "
          f"simulated {res.sim_time * 1e6:.1f} us")


if __name__ == "__main__":
    main()
