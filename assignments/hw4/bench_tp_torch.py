"""Homework 4: step time of your tensor-parallel transformer block against torch's tensor parallel.

    .venv/bin/python assignments/hw4/bench_tp_torch.py                 # 2 and 4 local gloo processes
    .venv/bin/python assignments/hw4/bench_tp_torch.py --world-sizes 4 --steps 40
    .venv/bin/python -m tools.overlay solutions -- .venv/bin/python assignments/hw4/bench_tp_torch.py   # instructors

Every rank builds the same dense Block (seeded) and two tensor-parallel twins of it:
your ParallelBlock (task 4.3) and torch's own, `parallelize_module` with ColwiseParallel on
attn.qkv and fc and RowwiseParallel on attn.proj and fc_proj, on a CPU device mesh over the same
ranks (torch.distributed's default gloo group: minitorch_dist/runtime/torch_group.py). torch's
ColwiseParallel cuts a weight's rows into p contiguous blocks, so its qkv weight is the dense
one with its rows in the order [q_0 k_0 v_0 | q_1 k_1 v_1 | ...], block r holding rank r's heads,
which is what ColumnParallelLinear(parts=3) keeps: the same heads on the same rank on both sides,
and the same attention arithmetic (tensor_parallel.common.causal_attention). Both communicate
one all-reduce of the (B, T, C) activations per row-parallel layer forward and one per
column-parallel layer backward.

One step: forward of the same (B, T, C) activations on every rank, backward of
(out * weights).sum() with fixed random weights, then the gradients are set to None. Each timed
step starts after a barrier and keeps the slowest rank's time; the two versions take turns step
by step (who goes first alternates); --warmup steps of each are untimed. The table gives the
median and best step and "x torch TP", the median of the per-step ratios (with quartiles and
range under it). The run checks itself: the output, the input's gradient and the layer norms'
gradients of both versions must equal the dense block's (float32, up to 1e-4). No target: the
ratio is printed for comparison.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time

import torch
from torch import nn

from minitorch_dist import launch
from minitorch_dist.bench_timing import Spread, load_line, paired_ratios, rotated, slowest_per_step
from minitorch_dist.models.char_transformer import Block
from minitorch_dist.runtime.errors import run_unless_stub
from minitorch_dist.runtime.torch_group import torch_default_group
from minitorch_dist.tensor_parallel import ParallelBlock
from minitorch_dist.tensor_parallel.common import causal_attention

VERSIONS = ("ours", "torch")
LABELS = {"ours": "ParallelBlock 4.3", "torch": "torch TP"}
TOLERANCE = 1e-4       # float32, different summation order (as bench_ddp)


def heads_by_rank(weight: torch.Tensor, p: int) -> torch.Tensor:
    """A fused [q | k | v] weight (3C, ...) or bias (3C,) with its rows reordered so that block r of
    p contiguous blocks is [q_r; k_r; v_r] (rank r's heads)."""
    q, k, v = (part.chunk(p) for part in weight.chunk(3))
    return torch.cat([torch.cat([q[r], k[r], v[r]]) for r in range(p)])


class TorchTPBlock(nn.Module):
    """The dense Block under torch's tensor parallel (module docstring). Shapes: (B, T, C) -> same."""

    def __init__(self, dense: Block, mesh):
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
        super().__init__()
        p, attn = mesh.size(), dense.attn
        self.local_heads, self.head_size = attn.n_heads // p, attn.qkv.in_features // attn.n_heads
        self.ln1, self.ln2 = copy.deepcopy(dense.ln1), copy.deepcopy(dense.ln2)
        self.qkv, self.proj = copy.deepcopy(attn.qkv), copy.deepcopy(attn.proj)
        with torch.no_grad():
            self.qkv.weight.copy_(heads_by_rank(attn.qkv.weight, p))
            self.qkv.bias.copy_(heads_by_rank(attn.qkv.bias, p))
        self.fc, self.act, self.fc_proj = copy.deepcopy(dense.fc), nn.GELU(), copy.deepcopy(dense.fc_proj)
        parallelize_module(self, mesh, {"qkv": ColwiseParallel(), "proj": RowwiseParallel(),
                                        "fc": ColwiseParallel(), "fc_proj": RowwiseParallel()})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.proj(causal_attention(self.qkv(self.ln1(x)), self.local_heads, self.head_size))
        return x + self.fc_proj(self.act(self.fc(self.ln2(x))))


def step(block: nn.Module, x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Forward and backward of (block(x) * weights).sum(); the output (detached)."""
    out = block(x)
    (out * weights).sum().backward()
    return out.detach()


def grads(block: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """x's gradient and the layer norms' (replicated on every rank, so comparable with the dense ones)."""
    return [x.grad] + [p.grad for ln in (block.ln1, block.ln2) for p in (ln.weight, ln.bias)]


def bench_rank(group, cfg: dict) -> dict:
    """Rank code: {"times": {version: [seconds per step]}, "diff": {version: max |. - dense|}}."""
    with torch_default_group(group):
        from torch.distributed.device_mesh import init_device_mesh
        torch.manual_seed(0)
        dense = Block(cfg["d_model"], cfg["heads"])
        gen = torch.Generator().manual_seed(1)
        x = torch.randn(cfg["batch"], cfg["seq"], cfg["d_model"], generator=gen, requires_grad=True)   # (B, T, C)
        weights = torch.randn(cfg["batch"], cfg["seq"], cfg["d_model"], generator=gen)
        want = [step(dense, x, weights)] + grads(dense, x)
        mesh = init_device_mesh("cpu", (group.size,))
        blocks = {"ours": ParallelBlock(dense, group), "torch": TorchTPBlock(dense, mesh)}
        diff = {}
        for v, block in blocks.items():
            x.grad = None
            got = [step(block, x, weights)] + grads(block, x)
            diff[v] = max((a - b).abs().max().item() for a, b in zip(got, want))
        times: dict = {v: [] for v in VERSIONS}
        for i in range(cfg["warmup"] + cfg["steps"]):
            for v in rotated(list(VERSIONS), i):
                block = blocks[v]
                group.barrier()
                start = time.perf_counter()
                step(block, x, weights)
                for t in [x, *block.parameters()]:
                    t.grad = None
                if i >= cfg["warmup"]:
                    times[v].append(time.perf_counter() - start)
        group.barrier()
        del blocks
        return {"times": times, "diff": diff, "threads": torch.get_num_threads()}


def print_table(result, cfg: dict) -> float:
    """One world size's table and checks; the ratio ours / torch TP."""
    per_rank = list(result)
    slowest = {v: slowest_per_step([r["times"][v] for r in per_rank]) for v in VERSIONS}
    spread = Spread.of(paired_ratios(slowest["ours"], slowest["torch"]))
    print(f"\ngloo, {len(per_rank)} ranks: Block C={cfg['d_model']} heads={cfg['heads']}, activations "
          f"{cfg['batch']} x {cfg['seq']} x {cfg['d_model']} float32; slowest rank per step, {cfg['steps']} steps "
          f"after {cfg['warmup']} warm-up; timed: forward + backward + grads set to None; "
          f"{per_rank[0]['threads']} thread(s) per rank; {load_line()}")
    print(f"{'version':>18} {'median ms':>10} {'best ms':>9} {'x torch TP':>11}")
    for v in VERSIONS:
        ratio = spread.median if v == "ours" else 1.0
        print(f"{LABELS[v]:>18} {statistics.median(slowest[v]) * 1e3:10.2f} {min(slowest[v]) * 1e3:9.2f} {ratio:11.2f}")
    print(f"{LABELS['ours']:>18} / torch TP per step: {spread}")
    for v in VERSIONS:
        worst = max(r["diff"][v] for r in per_rank)
        verdict = "ok" if worst <= TOLERANCE else f"NOT OK (tolerance {TOLERANCE:g})"
        print(f"{LABELS[v]:>18}: max |output, input and layer-norm gradients - the dense block's| = {worst:.1e}: "
              f"{verdict}")
    return spread.median


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world-sizes", default="2,4", help="comma-separated TP sizes (gloo)")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per version (median)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per version")
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=64)
    opts = parser.parse_args(argv)
    cfg = dict(d_model=opts.d_model, heads=opts.heads, batch=opts.batch, seq=opts.seq, steps=opts.steps,
               warmup=opts.warmup)
    sizes = [int(s) for s in opts.world_sizes.split(",") if s.strip()]
    bad = [p for p in sizes if opts.heads % p or opts.d_model % opts.heads]
    if bad or opts.steps < 1:
        parser.error(f"each TP size must divide --heads {opts.heads} (and --heads --d-model {opts.d_model}), "
                     f"--steps >= 1; got sizes {sizes}")
    ratios = {p: print_table(launch(bench_rank, p, args=(cfg,), trace=False, deadline=300), cfg) for p in sizes}
    print("\nParallelBlock vs torch's tensor parallel (no target): "
          + ", ".join(f"p={p}: {r:.2f}x" for p, r in ratios.items()))
    return 0


if __name__ == "__main__":
    sys.exit(run_unless_stub("bench_tp_torch", main))
