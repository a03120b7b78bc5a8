# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
#   language_info:
#     name: python
#   title: 'Lecture 6: sharded data parallelism (ZeRO-1, ZeRO-2, FSDP)'
# ---

# %% [markdown]
# # Lecture 6: sharded data parallelism (ZeRO-1, ZeRO-2, FSDP)
#
# **How to run this notebook.** It imports `minitorch_dist.sharded`, the code you write in homework 6,
# and never re-defines it. Your copy shows the outputs of the course's run on the reference
# implementation, so you can read it now. Once your homework passes its public tests, run it yourself
# on *your* code from the kit's root: `.venv/bin/jupyter lab lectures/06_sharded.ipynb`.
#
# **Plan.** Data parallelism keeps a whole copy of the parameters, the gradients and the optimizer state
# on every rank. ZeRO (Rajbhandari et al. 2020) shards them, one stage at a time; FSDP is its third stage.
# 1. The memory table from the cost model, for a 7.5B-parameter model on 64 ranks.
# 2. The same table measured on a small model with the memory tracker (`minitorch_dist.memory`).
# 3. Memory per rank against the number of ranks, on gloo processes.
# 4. Throughput and memory against the batch size.
# 5. FSDP against tensor parallelism on the same model: bytes and memory side by side.

# %%
import time

import matplotlib.pyplot as plt
import torch
import torch._dynamo  # noqa: F401  (an optimizer imports it: once here, not in every forked rank)
import torch.nn.functional as F

from minitorch_dist import RankError, cost_model, launch
from minitorch_dist.memory import MemoryTracker
from minitorch_dist.models import CharTransformer
from minitorch_dist.sharded import FullyShardedModel, Zero2Optimizer, ZeroOptimizer

# %matplotlib inline
START = time.perf_counter()
CFG = dict(vocab_size=64, d_model=64, n_heads=4, n_layers=4, max_len=32)
try:                                       # fail early, and say why, on the stubs
    launch(lambda g: ZeroOptimizer([torch.zeros(2, requires_grad=True)], torch.optim.SGD, g, lr=0.1), 1,
           backend="sim")
except RankError as err:
    if err.exc_type == "NotImplementedError":
        raise RuntimeError("minitorch_dist.sharded holds the HW6 stubs; run this notebook through "
                           "the reference (your copy shows its outputs); write homework 6 first (assignments/hw6/README.md)") from None
    raise

# %% [markdown]
# ## 1. The ZeRO memory table
#
# Psi parameters, mixed-precision Adam: 2 bytes of bf16 weights, 2 of bf16 gradients and K = 12 of
# optimizer state (fp32 master weights, momentum, variance) per parameter. On N ranks:
#
# | stage | per rank |
# |---|---|
# | DDP | (2 + 2 + K) Psi |
# | ZeRO-1 (optimizer state sharded) | 4 Psi + K Psi / N |
# | ZeRO-2 (+ gradients) | 2 Psi + (2 + K) Psi / N |
# | ZeRO-3 / FSDP (+ parameters) | (2 + 2 + K) Psi / N |

# %%
table = cost_model.zero_memory_per_rank(7.5e9, 64)
for stage, nbytes in table.items():
    print(f"{stage:6s} {nbytes / 1e9:6.1f} GB per rank")
print("ZeRO memory table (GB): " + " ".join(f"{v / 1e9:.1f}" for v in table.values()))


# %% [markdown]
# ## 2. Measured: the tracker on a small model
#
# The same four stages train a small `CharTransformer` in float32 with AdamW (4 + 4 bytes of weights and
# gradients, K = 8 of state) for one step on 4 gloo ranks. The tracker counts storages: a view and its
# base once, a storage FSDP resized to 0 bytes as 0. ZeRO-1's shard is a view of one flat buffer that
# holds the parameters (no copy); ZeRO-2 keeps a flat float32 copy of its shard (its gradient buckets
# are not one contiguous buffer), so it sits a little above the formula.

# %%
def one_step(group, stage, batch=8, seq=32):
    model = CharTransformer(**CFG, seed=0)
    if stage == "zero3":
        model = FullyShardedModel(model, group, prefetch=True)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    elif stage == "zero1":
        opt = ZeroOptimizer(model.parameters(), torch.optim.AdamW, group, lr=1e-3)
    elif stage == "zero2":
        opt = Zero2Optimizer(model.parameters(), torch.optim.AdamW, group, lr=1e-3)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tracker = MemoryTracker(model, opt)
    idx = torch.randint(0, CFG["vocab_size"], (batch, seq + 1), generator=torch.Generator().manual_seed(group.rank))
    sent = group.counters.op("all_reduce").tensor_bytes, group.counters.op("all_gather").tensor_bytes, \
        group.counters.op("reduce_scatter").tensor_bytes
    start = time.perf_counter()
    with tracker.saved_activations():
        F.cross_entropy(model(idx[:, :-1]).flatten(0, 1), idx[:, 1:].flatten()).backward()
    if stage == "ddp":
        for q in model.parameters():
            group.all_reduce(q.grad, "avg")
    opt.step()
    seconds = time.perf_counter() - start
    live = tracker.sample("after step")
    c = group.counters
    ar, ag, rs = (c.op("all_reduce").tensor_bytes - sent[0], c.op("all_gather").tensor_bytes - sent[1],
                  c.op("reduce_scatter").tensor_bytes - sent[2])
    p = group.size
    ring = 2 * (p - 1) / p * ar + (p - 1) * ag + (p - 1) / p * rs
    return {"state": live["params"] + live["grads"] + live["optimizer"], "peak": tracker.peak_total,
            "activations": tracker.peak["activations"], "seconds": seconds, "ring_bytes": ring}

psi = sum(q.numel() for q in CharTransformer(**CFG).parameters())
model_table = cost_model.zero_memory_per_rank(psi, 4, param_bytes=4, grad_bytes=4, optim_bytes=8)
worst = 0.0
for stage in cost_model.ZERO_STAGES:
    got = max(r["state"] for r in launch(one_step, 4, args=(stage,)))
    worst = max(worst, abs(got / model_table[stage] - 1))
    print(f"{stage:6s} measured {got / 1e3:8.1f} kB   cost model {model_table[stage] / 1e3:8.1f} kB   "
          f"ratio {got / model_table[stage]:.2f}")
print(f"tracker matches the cost model within {100 * worst:.0f}%")

# %% [markdown]
# ## 3. Memory per rank against N
#
# DDP's parameters, gradients and optimizer state per rank do not move with N; FSDP's fall like 1/N
# (plus padding; during the forward, the units gathered at a time and the activations come on top).

# %%
sizes = [1, 2, 4]
per_n = {stage: [max(r["state"] for r in launch(one_step, n, args=(stage,))) / 1e6 for n in sizes]
         for stage in ("ddp", "zero3")}
fig, ax = plt.subplots(figsize=(5, 3))
for stage, values in per_n.items():
    ax.plot(sizes, values, marker="o", label={"ddp": "DDP", "zero3": "FSDP"}[stage])
ax.set_xlabel("ranks N"); ax.set_ylabel("params + grads + state, MB per rank"); ax.set_xticks(sizes); ax.legend()
plt.show()
print({k: [round(v, 2) for v in vals] for k, vals in per_n.items()})

# %% [markdown]
# ## 4. Throughput and memory against the batch size
#
# FSDP on 2 ranks: the parameters' share of memory is fixed, the activations grow with the batch, and
# the step time is first dominated by the per-unit all-gathers, then by compute.

# %%
batches = [2, 4, 8, 16]
rows = []
for b in batches:
    runs = launch(one_step, 2, args=("zero3", b))
    seconds = max(r["seconds"] for r in runs)
    rows.append((b, 2 * b * 32 / seconds, max(r["peak"] for r in runs) / 1e6,
                 max(r["activations"] for r in runs) / 1e6))
fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3))
a1.plot([r[0] for r in rows], [r[1] for r in rows], marker="o"); a1.set_xlabel("batch per rank")
a1.set_ylabel("tokens / s"); a2.plot([r[0] for r in rows], [r[2] for r in rows], marker="o", label="peak")
a2.plot([r[0] for r in rows], [r[3] for r in rows], marker="o", label="saved activations")
a2.set_xlabel("batch per rank"); a2.set_ylabel("MB per rank"); a2.legend()
plt.show()
for b, tps, peak, act in rows:
    print(f"batch {b:3d}: {tps:9.0f} tokens/s, peak {peak:6.2f} MB, activations {act:6.2f} MB")

# %% [markdown]
# ## 5. FSDP against tensor parallelism, same model, 2 ranks
#
# FSDP moves parameters (3 Psi (N-1)/N per step, whatever the batch); tensor parallelism moves
# activations (all-reduces of (B, T, C) per block, growing with the batch) and never gathers weights.

# %%
from minitorch_dist.tensor_parallel import ParallelCharTransformer

def tp_step(group, batch=8, seq=32):
    tp = ParallelCharTransformer(CharTransformer(**CFG, seed=0), group)
    opt = torch.optim.AdamW(tp.parameters(), lr=1e-3)
    tracker = MemoryTracker(tp, opt)
    idx = torch.randint(0, CFG["vocab_size"], (batch, seq + 1), generator=torch.Generator().manual_seed(0))
    before = group.counters.op("all_reduce").tensor_bytes
    tp.loss(idx[:, :-1], idx[:, 1:]).backward()
    opt.step()
    live = tracker.sample()
    ar = group.counters.op("all_reduce").tensor_bytes - before
    return {"state": live["params"] + live["grads"] + live["optimizer"], "ring_bytes": (group.size - 1) / group.size * 2 * ar}

fsdp = launch(one_step, 2, args=("zero3",))
tp = launch(tp_step, 2)
ddp = launch(one_step, 2, args=("ddp",))
print(f"{'':10s} {'bytes sent per step':>20s} {'params+grads+state':>20s}")
for name, runs in (("DDP", ddp), ("FSDP", fsdp), ("TP", tp)):
    print(f"{name:10s} {runs[0]['ring_bytes'] / 1e3:17.1f} kB {max(r['state'] for r in runs) / 1e3:17.1f} kB")
print(f"FSDP / DDP bytes per step: {fsdp[0]['ring_bytes'] / ddp[0]['ring_bytes']:.2f} (the formula: 1.5)")

# %% [markdown]
# - ZeRO-1 and 2 send what DDP sends and cut the optimizer state (and the gradients) by N; FSDP cuts
#   everything by N for 1.5 times the bytes.
# - On a laptop the tracker shows it: storages counted once, gathered units freed by resizing to 0.
# - FSDP's traffic is set by the parameters, tensor parallelism's by the activations: FSDP across nodes,
#   TP inside one.

# %%
print(f"notebook ran in {time.perf_counter() - START:.0f} s")

# %% [markdown]
# ## 6. Hybrid sharding (HSDP): FSDP inside a node, data parallel across
#
# Homework 6's bonus (6.6). With shard groups of s consecutive ranks (a node), the all-gathers and the
# reduce-scatter stay inside the node (3 (s-1)/s Psi per rank); only the gradient shards, Psi / s,
# cross the nodes in an all-reduce over the N/s replicas. The price: every rank holds 1/s of the model,
# not 1/N. Below, 4 simulated ranks as 2 nodes of 2: FSDP over all 4 (s = 4) against HSDP (s = 2),
# the bytes each rank sends per step as rings, split by whether the collective's group spans both
# nodes, from the trace.

# %%
from minitorch_dist.sharded import HybridShardedModel

def hsdp_step(group, shard_size, node=2):
    model = HybridShardedModel(CharTransformer(**CFG, seed=0), group, shard_size)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tracker = MemoryTracker(model, opt)
    idx = torch.randint(0, CFG["vocab_size"], (4, 33), generator=torch.Generator().manual_seed(group.rank))
    members = {g.name: g.ranks for g in (model.world, model.shard_group, model.replica_group)}
    first = len(group.events)
    F.cross_entropy(model(idx[:, :-1]).flatten(0, 1), idx[:, 1:].flatten()).backward()
    opt.step()
    live = tracker.sample()
    sent = {"inside a node": 0.0, "across nodes": 0.0}
    for e in group.events[first:]:
        g = len(members[e.group])
        factor = {"all_gather": g - 1, "reduce_scatter": (g - 1) / g, "all_reduce": 2 * (g - 1) / g}.get(e.op, 0)
        where = "across nodes" if len({r // node for r in members[e.group]}) > 1 else "inside a node"
        sent[where] += factor * e.nbytes
    return {**sent, "state": live["params"] + live["grads"] + live["optimizer"]}

print(f"{'4 ranks, 2 nodes':18s} {'inside a node':>14s} {'across nodes':>13s} {'params+grads+state':>19s}")
for label, s in (("FSDP (s = 4)", 4), ("HSDP (s = 2)", 2)):
    runs = launch(hsdp_step, 4, args=(s,), backend="sim")
    print(f"{label:18s} {runs[0]['inside a node'] / 1e3:11.1f} kB {runs[0]['across nodes'] / 1e3:10.1f} kB "
          f"{max(r['state'] for r in runs) / 1e3:16.1f} kB")
