"""Homework 1: time your four all-reduces against the backend's native one (4 ranks, 1 KB .. 64 MB).

    .venv/bin/mpirun -n 4 .venv/bin/python assignments/hw1/bench_allreduce.py   # MPI (backend mpi)
    .venv/bin/python assignments/hw1/bench_allreduce.py                        # 4 local gloo processes
    .venv/bin/python assignments/hw1/bench_allreduce.py --backend sim --quick  # simulated network (virtual time)
    .venv/bin/python assignments/hw1/bench_allreduce.py --backend nccl -n 4 --sizes 1M,4M,16M,64M,256M   # 4 GPUs
    .venv/bin/python -m tools.overlay solutions -- .venv/bin/python assignments/hw1/bench_allreduce.py   # instructors: the reference

Every algorithm in minitorch_dist.collectives.ALL_REDUCES (naive, tree, butterfly, ring) and
the native group.all_reduce run on the same float32 buffer. One measurement: refill the
buffer, barrier, time k back-to-back calls on every rank, keep the slowest rank's time per
call (an all-reduce is done when its last rank is done). Each repetition runs the algorithms
in a rotated order, so on a busy machine no algorithm always goes first. Before timing, each
algorithm's result is checked once per size against the closed form
    x[i] = (i mod 7) + rank   ->   sum over p ranks = p*(i mod 7) + p(p-1)/2.
The table gives the median and best time, algbw = S/t, busbw = algbw * 2(p-1)/p
(cost_model.algorithm_bandwidth / bus_bandwidth), the median time over the native one's, and
"paired": the median over repetitions of time / native time in the same repetition. On a
shared machine the native time itself drifts by 2x between runs; the paired ratio compares
each algorithm with the native all-reduce measured next to it, so drift cancels (the target
line uses it, and shows the ratio of medians and the paired ratios' range too); under the table,
the quartiles and range of the paired ratios of every algorithm and size. Every algorithm runs in
the same rank processes (same threads), one untimed repetition first.
An algorithm that is not implemented yet (NotImplementedError) is reported and skipped.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import torch

from minitorch_dist import cost_model, launch
from minitorch_dist.bench_timing import Spread, load_line, paired_ratios, rotated, slowest_per_step
from minitorch_dist.collectives import ALL_REDUCES

SIZES = [1 << k for k in range(10, 27, 2)]          # 1 KB, 4 KB, ..., 64 MB
QUICK_SIZES = [1 << 10, 1 << 16, 1 << 20, 1 << 24]
NATIVE = "native"
NOT_IMPLEMENTED = "not implemented"


def parse_size(text: str) -> int:
    """'64M' -> 67108864, '1K' -> 1024, '4096' -> 4096 (bytes, powers of 1024)."""
    text = text.strip().upper().rstrip("B")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    digits = text[:-1] if scale > 1 else text
    try:
        return int(float(digits) * scale)
    except ValueError:
        raise argparse.ArgumentTypeError(f"cannot read size {text!r}; write e.g. 1K, 64K, 16M") from None


def human(n_bytes: int) -> str:
    for unit, scale in (("MB", 1 << 20), ("KB", 1 << 10)):
        if n_bytes >= scale and n_bytes % scale == 0:
            return f"{n_bytes // scale} {unit}"
    return f"{n_bytes} B"


def calls_per_measurement(n_bytes: int) -> int:
    """k back-to-back calls, so that small sizes are timed over more than a clock tick."""
    if n_bytes <= 1 << 16:
        return 10
    if n_bytes <= 1 << 20:
        return 4
    return 1


def _run_one(group, name: str, x: torch.Tensor) -> None:
    if name == NATIVE:
        group.all_reduce(x)
    else:
        ALL_REDUCES[name](x, group)


def bench_rank(group, sizes: list[int], algorithms: list[str], repeats: int, warmup: int) -> dict:
    """Rank code: {"times": {(size, alg): [seconds per call, one per repetition]},
    "verified": {(size, alg): True | "error text"}} for this rank (the caller takes the max over ranks)."""
    p, r, dev = group.size, group.rank, group.device      # dev: cpu, or this rank's GPU (nccl, --device cuda)
    times: dict = {}
    verified: dict = {}
    for n_bytes in sizes:
        n = n_bytes // 4
        src = torch.arange(n, dtype=torch.int64).remainder_(7).add_(r).to(dev, torch.float32)   # (n,)
        expected = torch.arange(n, dtype=torch.int64).remainder_(7).mul_(p).add_(p * (p - 1) // 2)
        expected = expected.to(dev, torch.float32)                                           # (n,)
        x = torch.empty(n, dtype=torch.float32, device=dev)
        live = []
        for name in algorithms:                          # 1. check once, closed form
            x.copy_(src)
            group.barrier()
            try:
                _run_one(group, name, x)
            except NotImplementedError as exc:
                verified[(n_bytes, name)] = f"{NOT_IMPLEMENTED} ({exc})"
                continue
            ok = torch.equal(x, expected)
            verified[(n_bytes, name)] = True if ok else f"wrong result: max error {(x - expected).abs().max():g}"
            live.append(name)
        k = calls_per_measurement(n_bytes)
        for rep in range(warmup + repeats):               # 2. time, rotating the order
            for name in rotated(live, rep):
                x.copy_(src)
                group.barrier()
                start = group.now()
                for _ in range(k):
                    _run_one(group, name, x)
                seconds = (group.now() - start) / k
                if rep >= warmup:
                    times.setdefault((n_bytes, name), []).append(seconds)
    return {"times": times, "verified": verified}


def summarize(per_rank: list[dict], sizes: list[int], algorithms: list[str], p: int) -> list[dict]:
    """One row per (size, algorithm) measured: slowest rank per repetition, then median and best."""
    rows = []
    for n_bytes in sizes:
        native = None
        for name in algorithms:
            runs = [rank["times"].get((n_bytes, name)) for rank in per_rank]
            if any(run is None for run in runs):
                continue
            slowest = slowest_per_step(runs)                         # (repeats,) max over ranks
            median, best = statistics.median(slowest), min(slowest)
            if name == NATIVE:
                native = slowest
            rows.append({"bytes": n_bytes, "algorithm": name, "median": median, "best": best, "slowest": slowest,
                         "algbw": cost_model.algorithm_bandwidth(n_bytes, median),
                         "busbw": cost_model.bus_bandwidth("all_reduce", p, n_bytes, median)})
        for row in rows:
            if row["bytes"] == n_bytes:
                row["vs_native"] = row["median"] / statistics.median(native) if native else None
                row["spread"] = Spread.of(paired_ratios(row["slowest"], native)) if native else None
                row["paired"] = row["spread"].median if native else None
    return rows


def print_table(rows: list[dict], per_rank: list[dict], algorithms: list[str], p: int, backend: str,
                repeats: int) -> None:
    print(f"\nall-reduce, float32 sum, {p} ranks, backend {backend}; {repeats} repetitions after 1 untimed, each "
          f"the slowest rank's time per call (k back-to-back calls after a barrier, / k); {load_line()}")
    print(f"{'size':>8} {'algorithm':>10} {'median ms':>10} {'best ms':>9} {'algbw MB/s':>11} "
          f"{'busbw MB/s':>11} {'x native':>9} {'paired':>7}")
    last = None
    for row in rows:
        if last is not None and row["bytes"] != last:
            print()
        last = row["bytes"]
        ratio = f"{row['vs_native']:9.2f}" if row.get("vs_native") else f"{'-':>9}"
        paired = f"{row['paired']:7.2f}" if row.get("paired") else f"{'-':>7}"
        print(f"{human(row['bytes']):>8} {row['algorithm']:>10} {row['median'] * 1e3:10.3f} "
              f"{row['best'] * 1e3:9.3f} {row['algbw'] / 1e6:11.1f} {row['busbw'] / 1e6:11.1f} {ratio} {paired}")
    print("\npaired ratio to native per repetition: median (quartiles, range)")
    for n_bytes in dict.fromkeys(row["bytes"] for row in rows):
        parts = [f"{row['algorithm']} {row['spread'].median:.2f} ({row['spread'].q1:.2f}-{row['spread'].q3:.2f}, "
                 f"{row['spread'].low:.2f}-{row['spread'].high:.2f})" for row in rows
                 if row["bytes"] == n_bytes and row.get("spread") and row["algorithm"] != NATIVE]
        if parts:
            print(f"{human(n_bytes):>8}: " + ", ".join(parts))
    print()
    for name in algorithms:
        verdicts = [rank["verified"].get(key) for rank in per_rank for key in rank["verified"] if key[1] == name]
        bad = sorted({v for v in verdicts if v is not True})
        sizes_checked = len({key[0] for rank in per_rank for key in rank["verified"] if key[1] == name})
        if not bad:
            print(f"{name:>10}: result checked against the closed form at {sizes_checked} sizes on every rank: ok")
        elif bad[0].startswith(NOT_IMPLEMENTED):
            print(f"{name:>10}: skipped: {bad[0][len(NOT_IMPLEMENTED) + 2:-1]}")    # inside "(...)"
        else:
            print(f"{name:>10}: NOT OK: {bad[0]}")


def target_line(rows: list[dict], backend: str) -> str | None:
    """Issue target: the ring at >= 16 MB within 1.25x of the native all-reduce (gloo), judged
    on the paired ratio (see the module docstring); the ratio of medians is shown beside it."""
    big = [row for row in rows if row["algorithm"] == "ring" and row["bytes"] >= 1 << 24 and row.get("paired")]
    if not big or backend != "gloo":
        return None
    worst = max(row["paired"] for row in big)
    verdict = "met" if worst <= 1.25 else "NOT met"
    ratios = ", ".join(f"{human(row['bytes'])}: {row['paired']:.2f}x (medians {row['vs_native']:.2f}x) [range "
                       f"{row['spread'].low:.2f}-{row['spread'].high:.2f} over {row['spread'].n}]" for row in big)
    return f"ring vs native at >= 16 MB, paired (target <= 1.25x on gloo): {ratios} -> {verdict}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--world-size", type=int, default=4, help="ranks (ignored under mpirun)")
    parser.add_argument("--backend", default=None,
                        help="gloo (default), mpi (default under mpirun), sim, or nccl (one GPU per rank: the "
                             "native all-reduce is NCCL's, your algorithms' messages go through the host)")
    parser.add_argument("--device", default=None, choices=["cpu", "cuda"],
                        help="where the buffers live (gloo, mpi); nccl is always cuda")
    parser.add_argument("--sizes", type=lambda s: [parse_size(v) for v in s.split(",")], default=None,
                        help="comma-separated bytes, e.g. 1K,1M,64M (default 1K..64M, powers of 4)")
    parser.add_argument("--algorithms", default=",".join(list(ALL_REDUCES) + [NATIVE]),
                        help=f"comma-separated, from {list(ALL_REDUCES) + [NATIVE]}")
    parser.add_argument("--repeats", type=int, default=None,
                        help="timed repetitions (default 15: with 7 the 16 MB ratio moved by 0.2 run to run; quick 3)")
    parser.add_argument("--quick", action="store_true", help="4 sizes, 3 repetitions")
    opts = parser.parse_args(argv)
    algorithms = [a.strip() for a in opts.algorithms.split(",") if a.strip()]
    unknown = [a for a in algorithms if a not in ALL_REDUCES and a != NATIVE]
    if unknown:
        parser.error(f"unknown algorithm(s) {unknown}; choose from {list(ALL_REDUCES) + [NATIVE]}")
    sizes = opts.sizes or (QUICK_SIZES if opts.quick else SIZES)
    bad_sizes = [s for s in sizes if s < 4 or s % 4]
    if bad_sizes:
        parser.error(f"sizes must be multiples of 4 bytes (float32), got {bad_sizes}")
    repeats = opts.repeats or (3 if opts.quick else 15)

    from minitorch_dist.runtime.env import detect_external
    job = detect_external()
    world_size = None if job else opts.world_size
    result = launch(bench_rank, world_size, args=(sizes, algorithms, repeats, 1), backend=opts.backend,
                    collectives=NATIVE in algorithms, trace=False, deadline=300, device=opts.device)
    if job is not None and job.rank != 0:
        return 0
    p = len(result)
    rows = summarize(list(result), sizes, algorithms, p)
    print_table(rows, list(result), algorithms, p, result.backend, repeats)
    line = target_line(rows, result.backend)
    if line:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
