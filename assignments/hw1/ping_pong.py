"""Homework 1, task 1.1: measure this machine's alpha and beta with your ping_pong and fit_alpha_beta.

    .venv/bin/mpirun -n 2 .venv/bin/python assignments/hw1/ping_pong.py     # MPI (backend mpi)
    .venv/bin/python assignments/hw1/ping_pong.py                           # 2 local gloo processes
    .venv/bin/python assignments/hw1/ping_pong.py --backend sim             # simulated network: exact alpha, beta

Rank 0 bounces messages of 8 B .. 16 MB off rank 1 (minitorch_dist.collectives.ping_pong),
then fits t(n) = alpha + n*beta (fit_alpha_beta) and prints both, with a table of measured
against fitted one-way times. It measures --passes times and fits the best pass of each size;
when the machine is busy or the passes disagree it says so and what to do
(minitorch_dist.collectives.timing). Before task 1.1 is written it says that, in one line. Put the two numbers into minitorch_dist.cost_model to predict
every all-reduce of this homework (the notebook does that next).
"""

from __future__ import annotations

import argparse
import sys

from minitorch_dist import SimNetwork, launch
from minitorch_dist.collectives import fit_alpha_beta, ping_pong
from minitorch_dist.collectives.timing import best_of, noise_report
from minitorch_dist.runtime.errors import run_unless_stub

SIZES = [8 << (2 * k) for k in range(12)]          # 8 B, 32 B, ..., 8 MB
SIZES.append(16 << 20)                            # and 16 MB
SIM_NETWORK = dict(alpha=20e-6, beta=1 / 5e9)      # what --backend sim should measure back


def human(n_bytes: int) -> str:
    for unit, scale in (("MB", 1 << 20), ("KB", 1 << 10)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.3g} {unit}"
    return f"{n_bytes} B"


def measure(group, sizes: list[int], repeats: int, warmup: int, passes: int = 1) -> list[dict]:
    """Rank code: `passes` ping-pongs between ranks 0 and 1 (rank 0 gets [{size: one-way seconds}, ...])."""
    return [ping_pong(group, sizes, repeats=repeats, warmup=warmup, peer=1) for _ in range(passes)]


def report(times: dict[int, float]) -> tuple[float, float]:
    """Fit alpha and beta, print them and the measured vs fitted table; returns (alpha, beta)."""
    sizes, seconds = list(times), [times[n] for n in times]
    alpha, beta = fit_alpha_beta(sizes, seconds)
    bandwidth = f"{1 / beta / 1e9:.2f} GB/s" if beta > 0 else "infinite"
    print(f"\nalpha = {alpha * 1e6:.1f} us (latency)   beta = {beta * 1e12:.1f} ps/byte (1/beta = {bandwidth})")
    print(f"half-performance size n_1/2 = alpha/beta = {human(int(alpha / beta)) if beta > 0 else '-'}")
    print(f"\n{'size':>10} {'one-way us':>11} {'fit us':>10} {'fit err':>8} {'MB/s':>9}")
    for n, t in zip(sizes, seconds):
        fit = alpha + n * beta
        err = f"{(fit - t) / t:+8.0%}" if t > 0 else f"{'-':>8}"
        rate = f"{n / t / 1e6:9.1f}" if t > 0 else f"{'-':>9}"
        print(f"{human(n):>10} {t * 1e6:11.1f} {fit * 1e6:10.1f} {err} {rate}")
    return alpha, beta


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default=None, help="gloo (default), mpi (default under mpirun) or sim")
    parser.add_argument("--repeats", type=int, default=20, help="timed round trips per size (median)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed round trips per size")
    parser.add_argument("--max-bytes", type=int, default=16 << 20, help="largest message (default 16 MB)")
    parser.add_argument("--passes", type=int, default=3, help="measure this many times, fit the best of each size")
    opts = parser.parse_args(argv)
    sizes = [n for n in SIZES if n <= opts.max_bytes]

    from minitorch_dist.runtime.env import detect_external
    job = detect_external()
    network = SimNetwork(**SIM_NETWORK) if opts.backend == "sim" else None
    result = launch(measure, None if job else 2, args=(sizes, opts.repeats, opts.warmup, opts.passes),
                    backend=opts.backend, network=network, collectives=False, trace=False)
    if job is not None and job.rank != 0:
        return 0
    print(f"ping-pong between rank 0 and rank 1, backend {result.backend}, {len(result)} ranks, "
          f"median of {opts.repeats} round trips / 2")
    if len(result) > 2:
        print(f"(ranks 2..{len(result) - 1} idle: task 1.1 needs only 2)")
    alpha, beta = report(best_of(result[0]))
    problems = noise_report(result[0]) if opts.backend != "sim" else []
    for line in problems:
        print(f"NOTE: {line}")
    if opts.backend == "sim":
        print(f"\nsim network was alpha = {SIM_NETWORK['alpha'] * 1e6:.1f} us, "
              f"beta = {SIM_NETWORK['beta'] * 1e12:.1f} ps/byte: the fit should give them back")
    return 0


if __name__ == "__main__":
    sys.exit(run_unless_stub("ping_pong", main))
