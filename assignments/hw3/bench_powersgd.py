"""Homework 3: your PowerSGD data parallel against torch DDP with torch's powerSGD_hook.

    .venv/bin/python assignments/hw3/bench_powersgd.py             # 2 and 4 local gloo processes
    .venv/bin/python assignments/hw3/bench_powersgd.py --world-sizes 2 --steps 5 --d-hidden 256   # quick
    .venv/bin/python -m tools.overlay solutions -- .venv/bin/python assignments/hw3/bench_powersgd.py   # instructors

In the same processes (same threads per rank), in turns step by step (who goes first alternates):
HookedDDP (3.5) + powersgd_hook (3.4), and torch's DistributedDataParallel + powerSGD_hook (same
float32 MLP, rank, start_powerSGD_iter, bucket size, seed, batch, SGD). Timed: zero_grad, forward,
backward, gradient synchronisation, SGD step, after a barrier, --warmup steps untimed (the first two
are the uncompressed ones), the slowest rank's time per step. Per world size the table gives the
median step times, the ratio to torch's hook as the median of per-step ratios (its quartiles and
range on the line below; target <= 1.15), the bytes all-reduced per compressed step against the
formula (plain elements + (n + m) r per compressed matrix, x 4 bytes) and max |param - torch's| at
the end. The bytes are counted in one more, untimed, step after the timed ones, on both sides:
ours by the runtime's counters, torch's by counting what its hook hands to torch.distributed.all_reduce
("bytes ok": both equal the formula).
Then, on sim over a 1 Gbit/s link (alpha 20 us), the step time of the uncompressed bucketed
all-reduce against PowerSGD: where compression wins (a slow link) and by how much.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from minitorch_dist import SimNetwork, launch
from minitorch_dist.bench_timing import Spread, load_line, max_abs_diff, paired_ratios, rotated, slowest_per_step
from minitorch_dist.compression import HookedDDP, PowerSGDState, powersgd_hook
from minitorch_dist.compression.low_rank import should_compress
from minitorch_dist.models import MLP
from minitorch_dist.runtime.errors import run_unless_stub
from minitorch_dist.runtime.torch_group import torch_default_group

TARGET, TOLERANCE = 1.15, 1e-4


def expected_bytes(model, rank: int, min_rate: float = 2) -> int:
    total = 0
    for p in model.parameters():
        n, m = p.shape[0], p[0].numel() if p.dim() > 1 else 1
        r = min(n, m, rank)
        total += (n + m) * r if should_compress(n, m, r, min_rate) else n * m
    return 4 * total


def _batch(cfg, rank):
    gen = torch.Generator().manual_seed(rank)
    return torch.randn(cfg["batch"], cfg["d_in"], generator=gen), torch.randint(0, cfg["d_out"], (cfg["batch"],), generator=gen)


class _CountAllReduce:
    """Within the block, the bytes of every tensor handed to torch.distributed.all_reduce (torch's hook)."""

    def __init__(self):
        self.bytes = 0

    def __enter__(self):
        import torch.distributed as dist
        self._original = dist.all_reduce

        def counted(tensor, *args, **kwargs):
            self.bytes += tensor.numel() * tensor.element_size()
            return self._original(tensor, *args, **kwargs)
        dist.all_reduce = counted
        return self

    def __exit__(self, *exc):
        import torch.distributed as dist
        dist.all_reduce = self._original


def bench_rank(group, cfg: dict) -> dict:
    """Rank code: measure() inside torch.distributed's default group over these ranks (every model it
    built is freed before the group is destroyed)."""
    with torch_default_group(group):
        return measure(group, cfg)


def measure(group, cfg: dict) -> dict:
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps
    x, y = _batch(cfg, group.rank)
    new = lambda: MLP(cfg["d_in"], cfg["d_hidden"], cfg["d_out"], cfg["depth"], seed=0)  # noqa: E731
    times = {"ours": [], "torch": []}
    theirs = torch.nn.parallel.DistributedDataParallel(new(), bucket_cap_mb=cfg["bucket_mb"])
    theirs.register_comm_hook(ps.PowerSGDState(None, matrix_approximation_rank=cfg["rank"], start_powerSGD_iter=2,
                                               random_seed=0), ps.powerSGD_hook)
    ours = HookedDDP(new(), group, bucket_size_mb=cfg["bucket_mb"])
    ours.register_comm_hook(PowerSGDState(group, matrix_approximation_rank=cfg["rank"], start_powerSGD_iter=2,
                                          random_seed=0), powersgd_hook)
    runs = {"ours": (ours, ours.finish_gradient_synchronization), "torch": (theirs, lambda: None)}
    opts = {k: torch.optim.SGD(m.parameters(), lr=0.01) for k, (m, _) in runs.items()}
    def step(k):
        model, finish = runs[k]
        opts[k].zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        finish()
        opts[k].step()
    for i in range(cfg["warmup"] + cfg["steps"]):               # timed: nothing but the step
        for k in rotated(["torch", "ours"], i):
            group.barrier()
            start = time.perf_counter()
            step(k)
            if i >= cfg["warmup"]:
                times[k].append(time.perf_counter() - start)
    group.barrier()
    before = group.counters.op("all_reduce").tensor_bytes      # bytes: one more (compressed) step each
    step("ours")
    sent = {"ours": group.counters.op("all_reduce").tensor_bytes - before}
    group.barrier()
    with _CountAllReduce() as counted:
        step("torch")
    sent["torch"] = counted.bytes
    group.barrier()
    diff = max_abs_diff(runs["ours"][0].module, runs["torch"][0].module)
    return {"times": times, "sent": sent, "diff": diff, "threads": torch.get_num_threads()}


def sim_rank(group, cfg: dict, compress: bool) -> float:
    x, y = _batch(cfg, group.rank)
    model = HookedDDP(MLP(cfg["d_in"], cfg["d_hidden"], cfg["d_out"], cfg["depth"], seed=0), group,
                      bucket_size_mb=cfg["bucket_mb"])
    if compress:
        model.register_comm_hook(PowerSGDState(group, matrix_approximation_rank=cfg["rank"], start_powerSGD_iter=2),
                                 powersgd_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(3):
        if step == 2:
            start = group.now()
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        model.finish_gradient_synchronization()
        opt.step()
    return group.now() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world-sizes", default="2,4")
    parser.add_argument("--steps", type=int, default=30,
                        help="timed steps, paired (with 10 the median ratio moved by 0.1 run to run)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps, >= 2 (the uncompressed ones)")
    parser.add_argument("--d-in", type=int, default=256)
    parser.add_argument("--d-hidden", type=int, default=1024)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--d-out", type=int, default=16)
    parser.add_argument("--batch", type=int, default=32, help="per rank")
    parser.add_argument("--rank", type=int, default=2, help="PowerSGD's matrix_approximation_rank")
    parser.add_argument("--bucket-mb", type=float, default=25.0)
    o = parser.parse_args(argv)
    if o.warmup < 2:
        parser.error("--warmup must be >= 2: the first two steps are uncompressed (start_powerSGD_iter=2)")
    cfg = dict(d_in=o.d_in, d_hidden=o.d_hidden, d_out=o.d_out, depth=o.depth, batch=o.batch, rank=o.rank,
               bucket_mb=o.bucket_mb, steps=o.steps, warmup=o.warmup)
    model = MLP(o.d_in, o.d_hidden, o.d_out, o.depth)
    dense = 4 * sum(p.numel() for p in model.parameters())
    want = expected_bytes(model, o.rank)
    print(f"MLP {o.d_in}-{o.d_hidden}x{o.depth}-{o.d_out} ({dense / 2**20:.1f} MB fp32), PowerSGD rank {o.rank}; "
          f"formula: {want} bytes all-reduced per compressed step ({dense / want:.1f}x less than dense)")
    print(f"timed: zero_grad+forward+backward+sync+SGD step, slowest rank, {o.steps} steps after {o.warmup} "
          f"untimed; ratio: median of per-step ours/torch; {load_line()}")
    print(f"{'p':>3} {'ours ms':>9} {'torch ms':>9} {'ratio':>7} {'bytes/step':>11} {'bytes ok':>8} {'max |diff|':>10}")
    worst, notes = 0.0, []
    for p in [int(w) for w in o.world_sizes.split(",")]:
        res = launch(bench_rank, p, args=(cfg,), backend="gloo")
        slowest = {k: slowest_per_step([r["times"][k] for r in res]) for k in ("ours", "torch")}
        ours, theirs = statistics.median(slowest["ours"]), statistics.median(slowest["torch"])
        spread = Spread.of(paired_ratios(slowest["ours"], slowest["torch"]))
        sent = {k: {r["sent"][k] for r in res} for k in ("ours", "torch")}
        ok = sent["ours"] == sent["torch"] == {want}
        worst = max(worst, spread.median)
        print(f"{p:>3} {ours * 1e3:9.2f} {theirs * 1e3:9.2f} {spread.median:7.2f} {max(sent['ours']):>11} "
              f"{'yes' if ok else 'NO':>8} {max(r['diff'] for r in res):10.1e}")
        notes.append(f"  p={p}: ours / torch per step {spread}; torch's powerSGD_hook all-reduced "
                     f"{sorted(sent['torch'])} bytes in its compressed step, ours {sorted(sent['ours'])}, formula "
                     f"{want}; {res[0]['threads']} thread(s) per rank")
    print("\n".join(notes))
    print(f"target: ours / torch's hook <= {TARGET} ({'met' if worst <= TARGET else 'NOT met'}: worst {worst:.2f})")
    net = SimNetwork(alpha=2e-5, beta=8 / 1e9)
    for p in (4,):
        plain = launch(sim_rank, p, args=(cfg, False), backend="sim", network=net)[0]
        low = launch(sim_rank, p, args=(cfg, True), backend="sim", network=net)[0]
        print(f"sim, 1 Gbit/s, p {p}: a step takes {plain * 1e3:.2f} ms uncompressed, {low * 1e3:.2f} ms with "
              f"PowerSGD rank {o.rank}: {plain / low:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_unless_stub("bench_powersgd", main))
