"""Runtime benchmarks: prints a table of numbers (not a test; these machines are noisy).

    python benchmarks/runtime_bench.py [--quick] [--skip-mpi] [--skip-spawn]

1. cold start of 4 gloo ranks (launch from a fresh script) vs torch.multiprocessing.spawn
   with init_process_group("gloo"), median of several runs, each in a new interpreter;
2. warm dispatch of a function to 4 running ranks (median);
3. point-to-point bandwidth, ping-pong between 2 ranks, 1 KB .. 64 MB: Group on gloo vs raw
   torch.distributed send/recv, and Group on mpi vs raw mpi4py Send/Recv, same processes;
4. sim: wall time of a 1024-rank ring exchange (one sendrecv per rank).
Targets (issue 2): cold start >= 4x faster than spawn; warm dispatch < 50 ms;
Group p2p bandwidth at 16 MB within 10% of the raw backend; sim 1024-rank ring < 10 s.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from minitorch_dist import launch, shutdown  # noqa: E402

COLD_OURS = """
import time, torch
from minitorch_dist import launch
def noop(group):
    return group.rank
t = time.perf_counter(); launch(noop, 4); print(time.perf_counter() - t)
"""

COLD_SPAWN = """
import os, time, datetime, socket, torch
import torch.distributed as dist
import torch.multiprocessing as mp
def rank_main(rank, port):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=4)
    dist.barrier()
    dist.destroy_process_group()
if __name__ == "__main__":
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    t = time.perf_counter(); mp.spawn(rank_main, args=(port,), nprocs=4); print(time.perf_counter() - t)
"""


def _time_script(code: str) -> float:
    """Run `code` as a script in a new interpreter (spawn must re-import it); return what it prints."""
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
    try:
        out = subprocess.run([sys.executable, f.name], capture_output=True, text=True, cwd=ROOT, timeout=300,
                             env=dict(os.environ, PYTHONPATH=ROOT))
    finally:
        os.unlink(f.name)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return float(out.stdout.strip().splitlines()[-1])


def bench_start(runs: int, skip_spawn: bool) -> None:
    ours = [_time_script(COLD_OURS) for _ in range(runs)]
    print(f"cold start, 4 gloo ranks (launch):           median {statistics.median(ours):7.3f} s  "
          f"runs {[round(x, 2) for x in ours]}")
    if not skip_spawn:
        spawn = [_time_script(COLD_SPAWN) for _ in range(runs)]
        print(f"cold start, 4 gloo ranks (mp.spawn):         median {statistics.median(spawn):7.3f} s  "
              f"runs {[round(x, 2) for x in spawn]}")
        print(f"  -> launch is {statistics.median(spawn) / statistics.median(ours):.1f}x faster (target >= 4x)")

    def noop(group):
        return group.rank
    launch(noop, 4)
    warm = []
    for _ in range(30):
        t = time.perf_counter()
        launch(noop, 4)
        warm.append(time.perf_counter() - t)
    print(f"warm dispatch to 4 ranks:                    median {statistics.median(warm) * 1e3:7.2f} ms "
          f"(target < 50 ms)")
    shutdown()


def _round_trip(send, recv, rank: int, buf: torch.Tensor) -> float:
    t = time.perf_counter()
    if rank == 0:
        send(buf, 1)
        recv(buf, 1)
    else:
        recv(buf, 0)
        send(buf, 0)
    return (time.perf_counter() - t) / 2


def _ping_pong_pair(ours, raw, rank: int, n_bytes: int, repeats: int):
    """One-way times of Group and of the raw backend, alternating round trips so both see the
    same machine load: ((median, best) for Group, (median, best) for raw)."""
    buf = torch.zeros(n_bytes, dtype=torch.uint8)
    times = {"ours": [], "raw": []}
    for i in range(repeats + 2):
        for name, (send, recv) in (("ours", ours), ("raw", raw)):
            t = _round_trip(send, recv, rank, buf)
            if i >= 2:
                times[name].append(t)
    return tuple((statistics.median(times[k]), min(times[k])) for k in ("ours", "raw"))


def _reps(n_bytes: int, quick: bool) -> int:
    base = 15 if n_bytes >= 1 << 24 else 40
    return max(3, base // 2) if quick else base


def gloo_bandwidth(group, sizes, store_port, quick):
    import torch.distributed as dist
    store = dist.TCPStore("127.0.0.1", store_port, 2, False, timeout=datetime.timedelta(seconds=60))
    dist.init_process_group("gloo", store=dist.PrefixStore("raw", store), rank=group.rank, world_size=2)
    rows = [(n, *_ping_pong_pair((group.send, group.recv), (dist.send, dist.recv), group.rank, n,
                                 _reps(n, quick))) for n in sizes]
    dist.destroy_process_group()
    return rows


def mpi_bandwidth(group, sizes, quick):
    from mpi4py import MPI
    comm = MPI.COMM_WORLD

    def raw_send(buf, dst):
        comm.Send([buf.numpy(), MPI.BYTE], dest=dst, tag=7)

    def raw_recv(buf, src):
        comm.Recv([buf.numpy(), MPI.BYTE], source=src, tag=7)
    return [(n, *_ping_pong_pair((group.send, group.recv), (raw_send, raw_recv), group.rank, n,
                                 _reps(n, quick))) for n in sizes]


def _print_bw(title: str, rows) -> None:
    """Medians, and the ratio of best times too: on a shared machine the best is the least noisy."""
    print(f"\n{title}\n{'bytes':>10} {'Group MB/s':>11} {'raw MB/s':>10} {'Group/raw':>10} "
          f"{'best Group/raw':>15} {'Group us':>10} {'raw us':>8}")
    for n, (ours, ours_best), (raw, raw_best) in rows:
        print(f"{n:>10} {n / ours / 1e6:>11.1f} {n / raw / 1e6:>10.1f} {ours / raw:>10.3f} "
              f"{ours_best / raw_best:>15.3f} {ours * 1e6:>10.1f} {raw * 1e6:>8.1f}")


def bench_bandwidth(quick: bool, skip_mpi: bool) -> None:
    import torch.distributed as dist
    sizes = [1 << 10, 1 << 16, 1 << 20, 1 << 24, 1 << 26]
    store = dist.TCPStore("127.0.0.1", 0, 3, True, wait_for_workers=False, timeout=datetime.timedelta(seconds=60))
    rows = launch(gloo_bandwidth, 2, args=(sizes, store.port, quick), fresh=True)[0]
    shutdown()
    _print_bw("p2p ping-pong, 2 ranks, gloo: Group.send/recv vs torch.distributed.send/recv", rows)
    if not skip_mpi:
        rows = launch(mpi_bandwidth, 2, args=(sizes, quick), backend="mpi")[0]
        shutdown()
        _print_bw("p2p ping-pong, 2 ranks, mpi: Group.send/recv vs mpi4py Send/Recv", rows)


def sim_ring(group):
    right, left = (group.rank + 1) % group.size, (group.rank - 1) % group.size
    got = torch.empty(16)
    group.sendrecv(torch.full((16,), float(group.rank)), right, got, left)
    return got[0].item() == left


def bench_sim() -> None:
    t = time.perf_counter()
    res = launch(sim_ring, 1024, backend="sim")
    wall = time.perf_counter() - t
    assert all(res)
    print(f"\nsim, 1024-rank ring exchange:                wall {wall:7.3f} s, simulated {res.sim_time * 1e6:.1f} us "
          f"(target < 10 s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--skip-mpi", action="store_true")
    parser.add_argument("--skip-spawn", action="store_true", help="skip the slow mp.spawn baseline")
    opts = parser.parse_args()
    print(f"torch {torch.__version__}, {os.cpu_count()} cores")
    bench_start(2 if opts.quick else 5, opts.skip_spawn)
    bench_bandwidth(opts.quick, opts.skip_mpi)
    bench_sim()


if __name__ == "__main__":
    main()
