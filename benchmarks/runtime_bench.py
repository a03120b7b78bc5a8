"""Runtime benchmarks: prints a table of numbers (not a test; these machines are noisy).

    python benchmarks/runtime_bench.py [--quick] [--skip-mpi] [--skip-spawn] [--p2p-only] [--passes N]

1. cold start of 4 gloo ranks (launch from a fresh script) vs torch.multiprocessing.spawn
   with init_process_group("gloo"), median of several runs, each in a new interpreter;
2. warm dispatch of a function to 4 running ranks (median);
3. the small-message table: one-way time of a ping-pong between 2 ranks at 1 KB, 64 KB,
   1 MB and 16 MB, Group on gloo vs raw torch.distributed send/recv and Group on mpi vs
   raw mpi4py Send/Recv, in the same processes, timed back to back in each of several
   passes; the best pass of each (collectives.timing.best_of), the ratio, and the noise
   report (timing.noise_report) of both columns;
4. sim: wall time of a 1024-rank ring exchange (one sendrecv per rank).
Targets: cold start >= 4x faster than spawn; warm dispatch < 50 ms (issue 2); Group within
1.5x of the raw backend's one-way time at 1 KB and 64 KB, within 10% at 1 MB and 16 MB
(issue 17); sim 1024-rank ring < 10 s.
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
from minitorch_dist.collectives.timing import best_of, noise_report  # noqa: E402

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


TABLE_SIZES = (1 << 10, 1 << 16, 1 << 20, 1 << 24)


def _one_way(send, recv, rank: int, buf: torch.Tensor, reps: int) -> float:
    """Seconds one way: `reps` round trips between ranks 0 and 1, halved."""
    t = time.perf_counter()
    for _ in range(reps):
        if rank == 0:
            send(buf, 1)
            recv(buf, 1)
        else:
            recv(buf, 0)
            send(buf, 0)
    return (time.perf_counter() - t) / (2 * reps)


def one_way_passes(ours, raw, rank: int, sizes, passes: int, reps) -> dict[str, list[dict[int, float]]]:
    """{"ours": [{size: one-way seconds}] per pass, "raw": ...}. Within a pass each size is timed
    with Group and with the raw backend back to back, so both see the same machine load;
    reps(n) round trips per measurement (after one warm-up round trip)."""
    out = {"ours": [], "raw": []}
    for _ in range(passes):
        timed = {"ours": {}, "raw": {}}
        for n in sizes:
            buf = torch.zeros(n, dtype=torch.uint8)
            for name, (send, recv) in (("ours", ours), ("raw", raw)):
                _one_way(send, recv, rank, buf, 1)
                timed[name][n] = _one_way(send, recv, rank, buf, reps(n))
        for name in out:
            out[name].append(timed[name])
    return out


def table_rows(measured: dict[str, list[dict[int, float]]]) -> list[tuple[int, float, float, float]]:
    """[(bytes, best one-way of Group, best one-way of raw, Group/raw)]: best over the passes."""
    ours, raw = best_of(measured["ours"]), best_of(measured["raw"])
    return [(n, ours[n], raw[n], ours[n] / raw[n]) for n in ours]


def format_table(title: str, measured) -> list[str]:
    """The small-message table and the noise report of both columns, as lines."""
    lines = [title, f"{'bytes':>10} {'Group us':>10} {'raw us':>10} {'Group/raw':>10}"]
    lines += [f"{n:>10} {ours * 1e6:>10.1f} {raw * 1e6:>10.1f} {ratio:>10.2f}"
              for n, ours, raw, ratio in table_rows(measured)]
    noise = [f"  Group: {line}" for line in noise_report(measured["ours"])] + \
            [f"  raw:   {line}" for line in noise_report(measured["raw"])]
    lines.append(f"best of {len(measured['ours'])} passes; noise: " + ("none found" if not noise else ""))
    return lines + noise


def _reps(scale: float):
    return lambda n: max(1, int(scale * (200 if n <= 1 << 16 else 40 if n <= 1 << 20 else 6)))


def gloo_one_way(group, sizes, store_port, passes, scale):
    """Rank code: Group send/recv against torch.distributed send/recv (gloo) in the same processes."""
    import torch.distributed as dist
    store = dist.TCPStore("127.0.0.1", store_port, 2, False, timeout=datetime.timedelta(seconds=60))
    dist.init_process_group("gloo", store=dist.PrefixStore("raw", store), rank=group.rank, world_size=2)
    try:
        return one_way_passes((group.send, group.recv), (dist.send, dist.recv), group.rank, sizes, passes, _reps(scale))
    finally:
        dist.destroy_process_group()


def mpi_one_way(group, sizes, passes, scale):
    """Rank code: Group send/recv against mpi4py Send/Recv in the same processes."""
    from mpi4py import MPI
    comm = MPI.COMM_WORLD

    def raw_send(buf, dst):
        comm.Send([buf.numpy(), MPI.BYTE], dest=dst, tag=7)

    def raw_recv(buf, src):
        comm.Recv([buf.numpy(), MPI.BYTE], source=src, tag=7)
    return one_way_passes((group.send, group.recv), (raw_send, raw_recv), group.rank, sizes, passes, _reps(scale))


def small_message_tables(sizes=TABLE_SIZES, passes: int = 5, scale: float = 1.0, mpi: bool = True) -> dict:
    """{backend: measured passes} for gloo (and mpi): one-way time of Group send/recv against the
    raw backend, 2 ranks. Target (issue 17): Group within 1.5x of raw at 1 KB and 64 KB, 10% above."""
    import torch.distributed as dist
    store = dist.TCPStore("127.0.0.1", 0, 3, True, wait_for_workers=False, timeout=datetime.timedelta(seconds=60))
    out = {"gloo": launch(gloo_one_way, 2, args=(list(sizes), store.port, passes, scale), fresh=True)[0]}
    shutdown()
    if mpi:
        out["mpi"] = launch(mpi_one_way, 2, args=(list(sizes), passes, scale), backend="mpi")[0]
        shutdown()
    return out


def bench_p2p(quick: bool, skip_mpi: bool, passes: int | None = None) -> None:
    raw = {"gloo": "torch.distributed send/recv", "mpi": "mpi4py Send/Recv"}
    passes = passes or (3 if quick else 7)
    for backend, measured in small_message_tables(passes=passes, scale=0.5 if quick else 1.0,
                                                  mpi=not skip_mpi).items():
        print()
        print("\n".join(format_table(f"one-way time, 2 ranks, {backend}: Group.send/recv vs raw {raw[backend]} "
                                     f"(target: <= 1.5x at 1 KB and 64 KB, <= 1.1x above)", measured)))


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
    parser.add_argument("--p2p-only", action="store_true", help="only the one-way (small-message) table")
    parser.add_argument("--passes", type=int, default=None,
                        help="passes of the one-way table (default 7, 3 with --quick); more passes, steadier best")
    opts = parser.parse_args()
    print(f"torch {torch.__version__}, {os.cpu_count()} cores")
    if not opts.p2p_only:
        bench_start(2 if opts.quick else 5, opts.skip_spawn)
    bench_p2p(opts.quick, opts.skip_mpi, opts.passes)
    if not opts.p2p_only:
        bench_sim()


if __name__ == "__main__":
    main()
