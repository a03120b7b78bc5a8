"""Wall-clock time per training step on the emulated cluster: what the network makes worth doing.
Run with the reference laid over the kit (or your homeworks 3 and 6), as root:

    # PowerSGD against dense DDP: 2 nodes, one rank each; a slow link, then an unshaped one
    .venv/bin/python -m minitorch_dist.cluster up --nodes 2 --bandwidth 100mbit
    .venv/bin/python -m tools.overlay solutions -- .venv/bin/python -m minitorch_dist.cluster torchrun examples/cluster/train_compare.py powersgd
    .venv/bin/python -m minitorch_dist.cluster down
    .venv/bin/python -m minitorch_dist.cluster up --nodes 2
    .venv/bin/python -m tools.overlay solutions -- .venv/bin/python -m minitorch_dist.cluster torchrun examples/cluster/train_compare.py powersgd
    .venv/bin/python -m minitorch_dist.cluster down

    # HSDP against FSDP: 2 nodes of 2 ranks; inside a node ranks talk over the node's loopback
    # (unshaped), between nodes over the shaped link
    .venv/bin/python -m minitorch_dist.cluster up --nodes 2 --ranks-per-node 2 --bandwidth 100mbit
    .venv/bin/python -m tools.overlay solutions -- .venv/bin/python -m minitorch_dist.cluster torchrun examples/cluster/train_compare.py hsdp
    .venv/bin/python -m minitorch_dist.cluster down

powersgd: an MLP of 1.3M parameters (5 MB of gradients) trained with HookedDDP (homework 3),
dense, then with PowerSGD rank 2 and error feedback (dense for its first 2 steps, as PowerSGD
starts); the median step time of the steps after those. hsdp: a CharTransformer of about 0.8M
parameters with FullyShardedModel over all 4 ranks (shards over both nodes: every all-gather and
reduce-scatter crosses the slow link) and HybridShardedModel with shard groups of 2 (a node; only
the gradient all-reduce of the shards crosses). Rank 0 prints the table and `CLUSTER-RESULT {json}`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from minitorch_dist import launch
from minitorch_dist.runtime.env import detect_external

STEPS, WARMUP = 6, 3


def configured_bits():
    try:
        from minitorch_dist.cluster import state as state_mod
        st = state_mod.load(os.environ.get("MTD_CLUSTER") or state_mod.DEFAULT_NAME)
        return st.bits_per_second if st else None
    except Exception:
        return None


def _timed_steps(group, step) -> list:
    torch.set_num_threads(1)     # a node's ranks share its cores (torchrun sets this only for K > 1)
    out = []
    for i in range(WARMUP + STEPS):
        group.barrier()
        t0 = time.perf_counter()
        step()
        if i >= WARMUP:
            out.append(time.perf_counter() - t0)
    return out


def powersgd_rank(group, d_hidden: int):
    from minitorch_dist.compression import HookedDDP, PowerSGDState, powersgd_hook
    from minitorch_dist.models import MLP
    torch.manual_seed(group.rank)
    x, y = torch.randn(32, 256), torch.randint(0, 10, (32,))
    times = {}
    for method in ("dense DDP", "PowerSGD r=2 + EF"):
        model = HookedDDP(MLP(d_in=256, d_hidden=d_hidden, d_out=10, depth=2), group)
        if method != "dense DDP":
            model.register_comm_hook(PowerSGDState(group, matrix_approximation_rank=2, start_powerSGD_iter=2,
                                                   use_error_feedback=True), powersgd_hook)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)

        def step():
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            model.finish_gradient_synchronization()
            opt.step()
        times[method] = _timed_steps(group, step)
    return times


def hsdp_rank(group, d_model: int):
    from minitorch_dist.models import CharTransformer
    from minitorch_dist.sharded import FullyShardedModel, HybridShardedModel
    cfg = dict(vocab_size=64, d_model=d_model, n_heads=4, n_layers=4, max_len=32)
    idx = torch.randint(0, 64, (4, 33), generator=torch.Generator().manual_seed(group.rank))
    times = {}
    per_node = int(os.environ.get("MTD_RANKS_PER_NODE", "2"))
    for method in ("FSDP (shards on all 4)", f"HSDP (shards on a node's {per_node})"):
        base = CharTransformer(**cfg, seed=0)
        model = (FullyShardedModel(base, group) if method.startswith("FSDP")
                 else HybridShardedModel(base, group, per_node))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)

        def step():
            opt.zero_grad()
            F.cross_entropy(model(idx[:, :-1]).flatten(0, 1), idx[:, 1:].flatten()).backward()
            opt.step()
        times[method] = _timed_steps(group, step)
    return times


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["powersgd", "hsdp"])
    ap.add_argument("--width", type=int, default=None, help="MLP d_hidden (powersgd, default 1024) or "
                    "transformer d_model (hsdp, default 128)")
    opts = ap.parse_args(argv)
    job = detect_external()
    if job is None:
        raise SystemExit("run this under a launcher on the cluster (see the docstring)")
    if opts.what == "powersgd":
        res = launch(powersgd_rank, None, args=(opts.width or 1024,))
    else:
        res = launch(hsdp_rank, None, args=(opts.width or 128,))
    if job.rank != 0:
        return 0
    bits = configured_bits()
    link = f"{bits / 1e6:g} Mbit/s links" if bits else "unshaped links"
    print(f"{opts.what}: {len(res)} ranks, {link}, median (min-max) of {STEPS} steps after {WARMUP}, "
          f"the slowest rank each step")
    rows = {}
    for method in res[0]:
        per_step = [max(r[method][i] for r in res) for i in range(STEPS)]
        rows[method] = {"median_s": statistics.median(per_step), "min_s": min(per_step), "max_s": max(per_step)}
        print(f"  {method:32s} {rows[method]['median_s'] * 1e3:8.1f} ms/step ({rows[method]['min_s'] * 1e3:.1f}"
              f"-{rows[method]['max_s'] * 1e3:.1f})")
    names = list(rows)
    speedup = rows[names[0]]["median_s"] / rows[names[1]]["median_s"]
    print(f"  {names[1]} is {speedup:.2f}x as fast as {names[0]}")
    print("CLUSTER-RESULT " + json.dumps({"what": opts.what, "p": len(res), "bits_per_second": bits,
                                          "steps": rows, "speedup": speedup}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
