# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
#   language_info:
#     name: python
#   title: 'Homework 6: sharded data parallelism'
# ---

# %% [markdown]
# # Homework 6: sharded data parallelism (notebook part)
#
# This notebook is the analysis half of homework 6. The code half is the package: fill in
# `minitorch_dist/sharded/` first (tasks 6.1-6.5; `assignments/hw6/README.md`, public tests with
# `.venv/bin/python -m pytest assignments/hw6/tests -m task6_3` and so on). Part B calls **your** `ZeroOptimizer`,
# `Zero2Optimizer` and `FullyShardedModel`, so it only works once those do.
#
# Run it from the repository root: `.venv/bin/jupyter lab assignments/hw6/hw6_sharded.ipynb`. It runs
# in about half a minute.
#
# - **Part A** (5 points): memory and bytes per rank by hand, for each ZeRO stage. No processes.
# - **Part B** (6 points): memory per rank against N, and bytes per step against the stage, measured
#   on gloo processes with the memory tracker and the runtime's counters, and plotted.
#
# Write your answers where it says `YOUR CODE HERE`, replacing the `raise NotImplementedError()`.
# Some tests are hidden and run when the notebook is graded. Restart and run all before you submit.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
import math
import time

import matplotlib.pyplot as plt
import torch
import torch._dynamo  # noqa: F401  (an optimizer imports it: once here, not in every forked rank)
import torch.nn.functional as F

from minitorch_dist import cost_model, launch
from minitorch_dist.memory import MemoryTracker
from minitorch_dist.models import CharTransformer

# %matplotlib inline
STAGES = ("ddp", "zero1", "zero2", "zero3")


# %% [markdown]
# ## Part A: by hand
#
# ### A.1 Memory per rank (3 points)
#
# Psi parameters; `param_bytes`, `grad_bytes` and `optim_bytes` bytes per parameter of weights, gradients
# and optimizer state; N ranks. Write `memory_per_rank(psi, n, stage, param_bytes=2, grad_bytes=2,
# optim_bytes=12)`: the bytes of weights + gradients + optimizer state one rank holds under `stage` in
# STAGES (DDP; ZeRO-1 shards the optimizer state; ZeRO-2 also the gradients; ZeRO-3 also the weights).
# Write the formulas (do not call `cost_model`).

# %% nbgrader={"grade": false, "grade_id": "memory_per_rank", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
def memory_per_rank(psi, n, stage, param_bytes=2, grad_bytes=2, optim_bytes=12):
    p, g, k = param_bytes * psi, grad_bytes * psi, optim_bytes * psi
    return {"ddp": p + g + k, "zero1": p + g + k / n, "zero2": p + (g + k) / n, "zero3": (p + g + k) / n}[stage]
### END SOLUTION
print("7.5B parameters, 64 ranks: " + ", ".join(f"{s} {memory_per_rank(7.5e9, 64, s) / 1e9:.1f} GB" for s in STAGES))

# %% nbgrader={"grade": true, "grade_id": "test_memory_per_rank", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
assert round(memory_per_rank(7.5e9, 64, "ddp") / 1e9, 1) == 120.0
assert round(memory_per_rank(7.5e9, 64, "zero3") / 1e9, 1) == 1.9
### BEGIN HIDDEN TESTS
import inspect
assert "cost_model" not in inspect.getsource(memory_per_rank), "A.1: write the formulas"
for _psi, _n in [(7.5e9, 64), (1e6, 1), (3e5, 3), (1.3e11, 1024)]:
    for _b in [(2, 2, 12), (4, 4, 8)]:
        _want = cost_model.zero_memory_per_rank(_psi, _n, *_b)
        for _s in STAGES:
            assert math.isclose(memory_per_rank(_psi, _n, _s, *_b), _want[_s], rel_tol=1e-9), ("A.1", _psi, _n, _s)
### END HIDDEN TESTS

# %% [markdown]
# ### A.2 Bytes per step (2 points)
#
# Write `bytes_per_step(grad_bytes_total, n, stage)`: the bytes one rank sends per training step when
# every collective is a ring, for a model whose gradients take `grad_bytes_total` bytes (DDP: one
# all-reduce; ZeRO-1 and 2: a reduce-scatter and an all-gather; ZeRO-3: two all-gathers and a
# reduce-scatter). Then `FSDP_OVER_DDP`: how many times DDP's bytes FSDP sends.

# %% nbgrader={"grade": false, "grade_id": "bytes_per_step", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
def bytes_per_step(grad_bytes_total, n, stage):
    ring = (n - 1) / n * grad_bytes_total
    return 3 * ring if stage == "zero3" else 2 * ring

FSDP_OVER_DDP = 1.5
### END SOLUTION
print({s: bytes_per_step(4e6, 4, s) for s in STAGES})

# %% nbgrader={"grade": true, "grade_id": "test_bytes_per_step", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
assert bytes_per_step(1000, 1, "ddp") == 0
### BEGIN HIDDEN TESTS
for _b, _n in [(1000, 2), (4e6, 4), (123456, 3), (1e9, 64)]:
    _want = cost_model.zero_step_bytes(_b, _n)
    for _s in STAGES:
        assert math.isclose(bytes_per_step(_b, _n, _s), _want[_s], rel_tol=1e-9), ("A.2", _b, _n, _s)
assert FSDP_OVER_DDP == 1.5
### END HIDDEN TESTS

# %% [markdown]
# ## Part B: measured on gloo
#
# `measure(group, stage)` (given) trains a small CharTransformer one step in float32 with AdamW under
# `stage`, with your package, and returns the tracker's live bytes of weights + gradients + optimizer
# state after the step (ZeRO-1 and 2 also hold a flat copy of their shard and its gradient: up to 1.5x
# the formula at N = 1), and the bytes this rank would send on a ring (from the runtime's counters).

# %% nbgrader={"grade": false, "grade_id": "measure_helper", "locked": true, "schema_version": 3, "solution": false, "task": false}
CFG = dict(vocab_size=64, d_model=48, n_heads=4, n_layers=3, max_len=16, seed=0)

def measure(group, stage):
    from minitorch_dist.sharded import FullyShardedModel, Zero2Optimizer, ZeroOptimizer
    model = CharTransformer(**CFG)
    if stage == "zero3":
        model = FullyShardedModel(model, group)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    elif stage in ("zero1", "zero2"):
        cls = ZeroOptimizer if stage == "zero1" else Zero2Optimizer
        opt = cls(model.parameters(), torch.optim.AdamW, group, lr=1e-3)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tracker = MemoryTracker(model, opt)
    idx = torch.randint(0, 64, (4, 17), generator=torch.Generator().manual_seed(group.rank))
    c, ops = group.counters, ("all_reduce", "all_gather", "reduce_scatter")
    before = [c.op(o).tensor_bytes for o in ops]
    F.cross_entropy(model(idx[:, :-1]).flatten(0, 1), idx[:, 1:].flatten()).backward()
    if stage == "ddp":
        for q in model.parameters():
            group.all_reduce(q.grad, "avg")
    opt.step()
    ar, ag, rs = (c.op(o).tensor_bytes - b for o, b in zip(ops, before))
    n = group.size
    live = tracker.sample()
    return {"memory": live["params"] + live["grads"] + live["optimizer"],
            "ring_bytes": 2 * (n - 1) / n * ar + (n - 1) * ag + (n - 1) / n * rs}

PSI = sum(q.numel() for q in CharTransformer(**CFG).parameters())

# %% [markdown]
# ### B.1 Memory against N (3 points)
#
# Fill `MEMORY_VS_N = {stage: [largest per-rank "memory" at N for N in NS]}` for every stage, from
# `launch(measure, N, args=(stage,))`, and plot it (one line per stage, N on the x axis). Then
# `SHRINKS_LIKE_1_OVER_N`: the stages whose memory at N = 4 is at most 0.3 of their memory at N = 1.

# %% nbgrader={"grade": false, "grade_id": "memory_vs_n", "locked": false, "schema_version": 3, "solution": true, "task": false}
NS = (1, 2, 4)
### BEGIN SOLUTION
MEMORY_VS_N = {s: [max(r["memory"] for r in launch(measure, n, args=(s,))) for n in NS] for s in STAGES}
SHRINKS_LIKE_1_OVER_N = [s for s in STAGES if MEMORY_VS_N[s][-1] <= 0.3 * MEMORY_VS_N[s][0]]
fig, ax = plt.subplots(figsize=(5, 3))
for s in STAGES:
    ax.plot(NS, [v / 1e3 for v in MEMORY_VS_N[s]], marker="o", label=s)
ax.set_xlabel("N"); ax.set_ylabel("kB per rank"); ax.legend(); plt.show()
### END SOLUTION
print({s: [round(v / 1e3, 1) for v in vals] for s, vals in MEMORY_VS_N.items()}, SHRINKS_LIKE_1_OVER_N)

# %% nbgrader={"grade": true, "grade_id": "test_memory_vs_n", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
assert set(MEMORY_VS_N) == set(STAGES) and all(len(v) == len(NS) for v in MEMORY_VS_N.values())
### BEGIN HIDDEN TESTS
_formula = {n: cost_model.zero_memory_per_rank(PSI, n, 4, 4, 8) for n in NS}
for _s in STAGES:
    for _i, _n in enumerate(NS):
        assert 0.99 <= MEMORY_VS_N[_s][_i] / _formula[_n][_s] <= 1.6, ("B.1", _s, _n, MEMORY_VS_N[_s][_i])
assert sorted(SHRINKS_LIKE_1_OVER_N) == ["zero3"]
### END HIDDEN TESTS

# %% [markdown]
# ### B.2 Bytes against the stage (3 points)
#
# Fill `TRAFFIC = {stage: rank 0's "ring_bytes" at N = 4}` and draw it as a bar chart with the formula
# of A.2 beside it. Are ZeRO-1 and 2 free in bytes?

# %% nbgrader={"grade": false, "grade_id": "traffic_vs_stage", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
TRAFFIC = {s: launch(measure, 4, args=(s,))[0]["ring_bytes"] for s in STAGES}
fig, ax = plt.subplots(figsize=(5, 3))
ax.bar([i - 0.2 for i in range(4)], [TRAFFIC[s] / 1e3 for s in STAGES], width=0.4, label="measured")
ax.bar([i + 0.2 for i in range(4)], [bytes_per_step(4 * PSI, 4, s) / 1e3 for s in STAGES], width=0.4,
       label="formula")
ax.set_xticks(range(4), STAGES); ax.set_ylabel("kB sent per step"); ax.legend(); plt.show()
### END SOLUTION
print({s: round(v / 1e3, 1) for s, v in TRAFFIC.items()})

# %% nbgrader={"grade": true, "grade_id": "test_traffic_vs_stage", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
assert set(TRAFFIC) == set(STAGES)
### BEGIN HIDDEN TESTS
_want = cost_model.zero_step_bytes(4 * PSI, 4)
for _s in STAGES:
    assert 0.999 <= TRAFFIC[_s] / _want[_s] <= 1.01, ("B.2", _s, TRAFFIC[_s], _want[_s])
### END HIDDEN TESTS

# %% [markdown]
# ## Part C (optional, not graded): HSDP across a slow link between nodes
#
# Once your bonus 6.6 works: on a Linux machine where you are root, the kit builds a small cluster whose
# nodes are joined by links shaped to a bandwidth you choose (lecture 1, section 6); ranks on one node
# talk over its own loopback, unshaped. From the kit's root, in a terminal:
#
# ```bash
# sudo .venv/bin/python -m minitorch_dist.cluster up --nodes 2 --ranks-per-node 2 --bandwidth 100mbit
# sudo .venv/bin/python -m minitorch_dist.cluster torchrun examples/cluster/train_compare.py hsdp
# sudo .venv/bin/python -m minitorch_dist.cluster down
# ```
#
# It trains a CharTransformer of about 0.8M parameters on 4 ranks (2 nodes of 2) with your
# `FullyShardedModel` over all 4 ranks, where every all-gather and reduce-scatter crosses the slow link,
# and with your `HybridShardedModel` in shard groups of 2 (one node each), where only the all-reduce of
# the gradient shards crosses it, and prints the median time of a step. The reference gave 2.2-2.5x as
# fast for HSDP on a busy 2-core machine.
#
# 1. From Part A's bytes per rank, how many bytes cross the slow link per step in each, and what step
#    time does that predict at 100 Mbit/s?
# 2. What does HSDP give up for it (memory per rank, with Part A's formulas)?
#
# **Without root (or on macOS/Windows):** Part A's formulas give the bytes on each link; the simulator
# (`backend="sim"`) has one bandwidth for every link, so it cannot show the fast-node, slow-link split.
