"""What the emulated cluster's links cost, measured against the alpha-beta cost model (homework 1 on
real node boundaries). Run it on a cluster of 4 nodes, one rank a node, with the reference (or
your own homework 1) laid over the kit; as root:

    .venv/bin/python -m minitorch_dist.cluster up --nodes 4 --bandwidth 100mbit
    .venv/bin/python -m tools.overlay solutions -- .venv/bin/python -m minitorch_dist.cluster torchrun examples/cluster/link_model.py
    .venv/bin/python -m minitorch_dist.cluster down

1. Ping-pong between rank 0 (node0) and rank 1 (node1) with homework 1's ping_pong, fitted with its
   fit_alpha_beta. The sizes: 8 B .. 512 B, where the time is the latency, and messages of at least
   LINK_SECONDS of traffic at the configured rate (16 MB unshaped), where the link is what costs.
   Not the 1 KB .. 256 KB between: a token-bucket shaper (htb, the only kind this kernel has) lets
   the first segment of a message after an idle moment go at once and charges the link afterwards,
   so a ping-pong of one or a few segments crosses faster than the link's rate (a real wire would
   hold every byte for its time); homework 1's fit, which weighs every size's relative error alike,
   then reads the bandwidth 1.2-2x high. Large messages pay for all but one segment.
2. naive, tree and ring all-reduce of homework 1 (minitorch_dist.collectives.ALL_REDUCES) on every
   rank, N bytes, the slowest rank's time per call, against the cost model with the measured alpha
   (the fit's) and the configured beta (8 / bits per second).

Rank 0 prints the tables and a line `CLUSTER-RESULT {json}`. Options: --allreduce-bytes N,
--repeats R, --skip-allreduce, --skip-pingpong (then --alpha S for the model).

Why the all-reduce is measured on slow links (20mbit): the ring moves every node's link both ways at
once, 4 streams through 2 cores here; at 100mbit on a busy 2-core machine the same ring unshaped
took 2/3 of the modelled link time, so the CPU, not the link, set the ring's pace (1.34x the model).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

from minitorch_dist import cost_model, launch
from minitorch_dist.collectives import ALL_REDUCES, fit_alpha_beta, ping_pong
from minitorch_dist.runtime.env import detect_external

LINK_SECONDS = 0.03          # the smallest "large" message: 30 ms of the link's traffic
LATENCY_SIZES = [8, 64, 512]
ALGORITHMS = ["naive", "tree", "ring"]


def configured_bits() -> float | None:
    """The cluster's configured rate (its record under /run), None when unshaped or unknown."""
    try:
        from minitorch_dist.cluster import state as state_mod
        st = state_mod.load(os.environ.get("MTD_CLUSTER") or state_mod.DEFAULT_NAME)
        return st.bits_per_second if st else None
    except Exception:
        return None


def link_sizes(bits: float | None) -> list[int]:
    """LATENCY_SIZES, then 1x, 2x, 4x the bytes of LINK_SECONDS at the rate (rounded to 64 KB)."""
    base = int(bits / 8 * LINK_SECONDS) if bits else 4 << 20
    base = max(1 << 18, base // (1 << 16) * (1 << 16))
    return LATENCY_SIZES + [base, 2 * base, 4 * base]


def rank_main(group, sizes, nbytes, repeats, do_pp, do_ar):
    out = {"host": os.uname().nodename}
    if do_pp:
        passes = [ping_pong(group, sizes, repeats=repeats, warmup=1, peer=1) for _ in range(2)]
        if group.rank == 0:
            out["pingpong"] = {n: min(p[n] for p in passes) for n in sizes}
    if do_ar:
        x = torch.ones(nbytes // 4, dtype=torch.float32)
        times = {}
        for name in ALGORITHMS:
            ALL_REDUCES[name](x.clone(), group)          # warm up: connections, buffers
        for rep in range(repeats):
            for name in ALGORITHMS[rep % 3:] + ALGORITHMS[:rep % 3]:
                y = torch.ones(nbytes // 4, dtype=torch.float32)
                group.barrier()
                t0 = time.perf_counter()
                ALL_REDUCES[name](y, group)
                times.setdefault(name, []).append(time.perf_counter() - t0)
                assert float(y[0]) == group.size, (name, float(y[0]))
        out["allreduce"] = times
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--allreduce-bytes", type=int, default=None,
                    help="default: 0.08 s of traffic at the configured rate (1 MB at 100mbit)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--skip-allreduce", action="store_true")
    ap.add_argument("--skip-pingpong", action="store_true")
    ap.add_argument("--alpha", type=float, default=None,
                    help="the model's alpha in seconds with --skip-pingpong (e.g. an earlier run's fit)")
    opts = ap.parse_args(argv)
    job = detect_external()
    if job is None:
        raise SystemExit("run this under a launcher on the cluster (see the docstring)")
    bits = configured_bits()
    sizes = link_sizes(bits)
    nbytes = opts.allreduce_bytes or max(1 << 18, int((bits or 8e9) / 8 * 0.08) // 4096 * 4096)
    res = launch(rank_main, None, args=(sizes, nbytes, opts.repeats, not opts.skip_pingpong,
                                        not opts.skip_allreduce))
    if job.rank != 0:
        return 0
    p = len(res)
    hosts = [r["host"] for r in res]
    beta_conf = 8 / bits if bits else None
    report = {"backend": res.backend, "p": p, "hosts": hosts, "bits_per_second": bits}
    alpha = None
    if not opts.skip_pingpong:
        pp = {int(k): v for k, v in res[0]["pingpong"].items()}
        alpha, beta = fit_alpha_beta(list(pp), list(pp.values()))
        report["pingpong"] = {"sizes": list(pp), "one_way_s": list(pp.values()), "alpha_s": alpha,
                              "beta_s_per_byte": beta, "bits_per_second": 8 / beta if beta > 0 else None,
                              "latency_s": min(pp[n] for n in LATENCY_SIZES)}
        print(f"ping-pong {hosts[0]} <-> {hosts[1]} ({res.backend}), best of 2 passes of the median of {opts.repeats}:")
        for n, t in pp.items():
            print(f"  {n:>10d} B  one-way {t * 1e6:10.1f} us   {n / t / 1e6:8.2f} MB/s")
        conf = f"configured {bits / 1e6:g} Mbit/s" if bits else "unshaped"
        ratio = f", {beta_conf / beta:.3f}x the configured rate" if beta_conf and beta > 0 else ""
        print(f"fit_alpha_beta: alpha = {alpha * 1e6:.1f} us, 1/beta = {8 / beta / 1e6:.1f} Mbit/s "
              f"({conf}{ratio}); the smallest message's one-way time {report['pingpong']['latency_s'] * 1e6:.1f} us")
    if not opts.skip_allreduce:
        a = alpha if alpha is not None else (opts.alpha or 0.0)
        b = beta_conf if beta_conf else report.get("pingpong", {}).get("beta_s_per_byte", 0.0)
        rows = {}
        print(f"\nall-reduce of {nbytes} B on {p} ranks ({', '.join(hosts)}), slowest rank's median of "
              f"{opts.repeats}; model: alpha {a * 1e6:.1f} us ({'measured' if alpha is not None else 'given'}), beta {b * 1e9:.2f} ns/B "
              f"({'configured' if beta_conf else 'measured'})")
        for name in ALGORITHMS:
            per_rep = [max(r["allreduce"][name][i] for r in res) for i in range(opts.repeats)]
            med = statistics.median(per_rep)
            model = cost_model.ALL_REDUCE_ALGORITHMS[name](p, nbytes, a, b)
            rows[name] = {"median_s": med, "min_s": min(per_rep), "max_s": max(per_rep), "model_s": model,
                          "ratio": med / model if model > 0 else None}
            print(f"  {name:6s} measured {med * 1e3:8.1f} ms (min {min(per_rep) * 1e3:.1f}, max "
                  f"{max(per_rep) * 1e3:.1f})   model {model * 1e3:8.1f} ms"
                  + (f"   measured/model {med / model:.2f}" if model > 0 else ""))
        report["allreduce"] = {"bytes": nbytes, "alpha_s": a, "beta_s_per_byte": b, "algorithms": rows}
    print("CLUSTER-RESULT " + json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
