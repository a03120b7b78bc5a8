"""Homework 6: your FSDP against torch's FSDP2, your ZeRO-1 against torch's ZeroRedundancyOptimizer.

    .venv/bin/python assignments/hw6/bench_fsdp.py                  # 2 and 4 local gloo processes
    .venv/bin/python assignments/hw6/bench_fsdp.py --world-sizes 4 --steps 10 --d-model 128
    .venv/bin/python -m tools.overlay solutions -- .venv/bin/python assignments/hw6/bench_fsdp.py   # instructors

Every rank builds the same CharTransformer (seeded) once per version and trains it with AdamW
(foreach=True on every version, --no-foreach for the per-tensor loop) on its part of the same
global batch:
    fsdp          FullyShardedModel(model, group, prefetch=True)            (6.3)
    torch FSDP2   torch.distributed.fsdp.fully_shard on every block, then on the model: the same units
    zero1         DDP-style model, ZeroOptimizer(params, AdamW, group)      (6.1)
    torch ZeRO    DistributedDataParallel + torch.distributed.optim.ZeroRedundancyOptimizer(AdamW)
torch's versions run on torch.distributed's default gloo group over the same processes (see
assignments/hw2/bench_ddp.py), so every version has the same threads per rank (the runtime's one).

Time: one step is forward, cross-entropy, backward, optimizer step, zero_grad, with nothing else
running: no memory tracker, no hooks. Each timed step starts after a barrier and keeps the slowest
rank's time; the versions take turns step by step (rotating who goes first), --warmup steps
untimed. The ratio of a version to torch's is the median over the timed steps of (its step i /
torch's step i), with quartiles and range. Memory: after the timed steps, --memory-steps more
steps per version under minitorch_dist.memory.MemoryTracker (its module hooks and samples slow a
step, FSDP2's many small DTensor operations far more than the kit's: those steps are not timed);
the peak of parameters + gradients + optimizer state per rank (the table shows the largest rank),
a DTensor counting its local shard. Results: every version took the same steps from the same start,
so the final parameters (full, gathered: FullyShardedModel.full_parameters, DTensor.full_tensor) must
equal torch's version's, up to float32 rounding. Targets: step time <= 1.3x torch's, memory <=
torch's. A version that raises NotImplementedError (a stub) is reported and skipped.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
import torch._dynamo  # noqa: F401  (an optimizer's constructor imports it: once here, not in each forked rank)
import torch.distributed as dist
import torch.nn.functional as F

from minitorch_dist import launch
from minitorch_dist.bench_timing import Spread, load_line, max_abs_diff, paired_ratios, rotated
from minitorch_dist.memory import MemoryTracker
from minitorch_dist.models import CharTransformer
from minitorch_dist.runtime.torch_group import torch_default_group

VERSIONS = ["fsdp", "torch_fsdp2", "zero1", "torch_zero"]
LABELS = {"fsdp": "FSDP 6.3 (prefetch)", "torch_fsdp2": "torch FSDP2", "zero1": "ZeRO-1 6.1",
          "torch_zero": "torch ZeRO-1"}
AGAINST = {"fsdp": "torch_fsdp2", "zero1": "torch_zero"}
TIME_TARGET, MEMORY_TARGET = 1.3, 1.0
TOLERANCE = 1e-4       # max |param - torch's| after the run (float32, other summation order)
COUNTED = ("params", "grads", "optimizer")


def build(version: str, group, cfg: dict):
    """(module to call, optimizer) of one version, from the same seeded model."""
    model = CharTransformer(cfg["vocab"], d_model=cfg["d_model"], n_heads=cfg["heads"], n_layers=cfg["layers"],
                            max_len=cfg["seq"], seed=0)
    adamw = dict(lr=cfg["lr"], foreach=cfg["foreach"])
    if version == "fsdp":
        from minitorch_dist.sharded import FullyShardedModel
        wrapped = FullyShardedModel(model, group, prefetch=True)
        return wrapped, torch.optim.AdamW(wrapped.parameters(), **adamw)
    if version == "torch_fsdp2":
        from torch.distributed.fsdp import fully_shard
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        return model, torch.optim.AdamW(model.parameters(), **adamw)
    if version == "zero1":
        from minitorch_dist.sharded import ZeroOptimizer
        return model, ZeroOptimizer(model.parameters(), torch.optim.AdamW, group, **adamw)
    from torch.distributed.optim import ZeroRedundancyOptimizer
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    return ddp, ZeroRedundancyOptimizer(ddp.parameters(), torch.optim.AdamW, **adamw)


def full_parameters(version: str, model) -> list[torch.Tensor]:
    """Every parameter, whole (gathered where sharded; a collective on the sharded versions), in the
    dense model's order."""
    if version == "fsdp":
        return [t.float() for t in model.full_parameters().values()]
    if version == "torch_fsdp2":
        return [p.full_tensor().detach() for p in model.parameters()]
    return [p.detach() for p in getattr(model, "module", model).parameters()]


def one_step(model, opt, x, y, tracker=None) -> None:
    F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
    if tracker is not None:
        tracker.sample("after backward")
    opt.step()
    if tracker is not None:
        tracker.sample("after step")
    opt.zero_grad()


def bench_rank(group, cfg: dict) -> dict:
    """Rank code: measure() inside torch.distributed's default group over these ranks (every model it
    built is freed before the group is destroyed)."""
    with torch_default_group(group):
        return measure(group, cfg)


def measure(group, cfg: dict) -> dict:
    """Rank code: {"times": {version: [s]}, "peak": {version: bytes}, "params": {version: [tensors]} (rank 0),
    "skipped": {version: message}, "threads": int}."""
    gen = torch.Generator().manual_seed(1)
    idx = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"] + 1), generator=gen)
    rows = slice(group.rank * cfg["batch"] // group.size, (group.rank + 1) * cfg["batch"] // group.size)
    x, y = idx[rows, :-1], idx[rows, 1:]
    out = {"times": {}, "peak": {}, "params": {}, "skipped": {}, "threads": torch.get_num_threads()}
    runs = {}
    for version in VERSIONS:
        try:
            runs[version] = build(version, group, cfg)
        except NotImplementedError as exc:
            out["skipped"][version] = str(exc)
            continue
        except Exception as exc:  # noqa: BLE001 - e.g. FSDP2 refusing this platform: say why
            out["skipped"][version] = f"{type(exc).__name__}: {exc}"
            continue
        out["times"][version] = []
    for step in range(cfg["warmup"] + cfg["steps"]):          # timed: nothing but the step
        for version in rotated(list(runs), step):
            model, opt = runs[version]
            group.barrier()
            start = time.perf_counter()
            one_step(model, opt, x, y)
            took = torch.tensor([time.perf_counter() - start])
            group.all_reduce(took, "max")
            if step >= cfg["warmup"]:
                out["times"][version].append(float(took))
    for version, (model, opt) in runs.items():                  # memory: tracked, not timed
        tracker = MemoryTracker(model, opt)
        for _ in range(cfg["memory_steps"]):
            one_step(model, opt, x, y, tracker)
        out["peak"][version] = sum(tracker.peak[k] for k in COUNTED)
        tracker.close()
    for version, (model, _) in runs.items():                     # results: the final parameters
        try:
            full = full_parameters(version, model)
        except NotImplementedError as exc:
            full = f"not compared: {str(exc).splitlines()[0] if str(exc) else 'NotImplementedError'}"
        if group.rank == 0:
            out["params"][version] = full
    dist.barrier()
    return out


def print_table(per_rank: list[dict], p: int) -> list[str]:
    """Print one world size's rows; return the versions that miss a target."""
    first = per_rank[0]
    for version, why in first["skipped"].items():
        print(f"  {LABELS[version]}: not run ({why.splitlines()[0][:160]})")
    slowest = {v: t for v, t in first["times"].items() if t}        # already the slowest rank's (all_reduce max)
    med = {v: statistics.median(t) * 1e3 for v, t in slowest.items()}
    peak = {v: max(r["peak"][v] for r in per_rank) for v in med}
    missed, notes = [], []
    for version in [v for v in VERSIONS if v in med]:
        base = AGAINST.get(version, version)
        spread = Spread.of(paired_ratios(slowest[version], slowest[base])) if base in med else None
        t_ratio = spread.median if spread else float("nan")
        m_ratio = peak[version] / peak[base] if base in peak else float("nan")
        print(f"{p:>3}  {LABELS[version]:<22} {med[version]:9.2f} {t_ratio:7.2f} {peak[version] / 1e6:10.3f} "
              f"{m_ratio:7.2f}")
        if version not in AGAINST or spread is None:
            continue
        ours, theirs = first["params"].get(version), first["params"].get(base)
        if isinstance(ours, str) or isinstance(theirs, str):
            check = ours if isinstance(ours, str) else theirs
            equal = True                                              # a stub's 6.5: nothing to hold against it
        else:
            diff, n = max_abs_diff(ours, theirs), sum(t.numel() for t in theirs)
            equal = diff <= TOLERANCE
            check = f"max |param - {LABELS[base]}'s| over {n:,} = {diff:.1e}: " + ("ok" if equal else
                                                                       f"NOT OK (tolerance {TOLERANCE:g})")
        notes.append(f"     {LABELS[version]} / {LABELS[base]}, step time: {spread}; final parameters: {check}")
        if t_ratio > TIME_TARGET or m_ratio > MEMORY_TARGET or not equal:
            missed.append(f"{LABELS[version]} at N={p}")
    for line in notes:
        print(line)
    return missed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--steps", type=int, default=20, help="timed steps per version")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per version, first")
    parser.add_argument("--memory-steps", type=int, default=2, help="tracked, untimed steps per version, last")
    parser.add_argument("--no-foreach", dest="foreach", action="store_false", help="AdamW(foreach=False) everywhere")
    parser.add_argument("--vocab", type=int, default=64)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args(argv)
    cfg = {k: getattr(args, k) for k in ("steps", "warmup", "memory_steps", "foreach", "vocab", "d_model", "heads",
                                         "layers", "seq", "batch", "lr")}
    print(f"CharTransformer(vocab {args.vocab}, d_model {args.d_model}, {args.layers} blocks), float32, global batch "
          f"{args.batch} x {args.seq}, AdamW(foreach={args.foreach}); timed: forward+backward+step+zero_grad, "
          f"slowest rank, {args.steps} steps after {args.warmup} warm-up, no tracker; memory: {args.memory_steps} "
          f"more steps under MemoryTracker, untimed; {load_line()}")
    print("  N  version                 ms/step   ratio   peak MB   ratio   (ratios: against torch's version; "
          "time: median of per-step ratios)")
    missed = []
    for p in args.world_sizes:
        per_rank = list(launch(bench_rank, p, args=(cfg,), timeout=600))
        if p == args.world_sizes[0]:
            print(f"     threads per rank: {per_rank[0]['threads']} (every version: the same processes)")
        missed += print_table(per_rank, p)
    print("targets (time <= 1.3x, memory <= torch's): " + ("all met" if not missed else "missed by " + ", ".join(missed)))
    print(f"({load_line()} at the end)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
