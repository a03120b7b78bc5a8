# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
#   language_info:
#     name: python
#   title: 'Lecture 5: pipeline parallelism (GPipe and 1F1B)'
# ---

# %% [markdown]
# # Lecture 5: pipeline parallelism (GPipe and 1F1B)
#
# **How to run this notebook.** It imports `minitorch_dist.pipeline`, the code you write in homework 5,
# and never re-defines it. Your copy shows the outputs of the course's run on the reference
# implementation, so you can read it now. Once your homework passes its public tests, run it yourself
# on *your* code from the kit's root: `.venv/bin/jupyter lab lectures/05_pipeline_parallel.ipynb`.
#
# **Plan.** Tensor parallelism (lecture 4) splits every layer and talks after every layer. Pipeline
# parallelism splits the model *between* layers: stage j (a run of consecutive layers) lives on rank j,
# and only the activations at the stage boundaries travel, point to point.
# 1. The naive pipeline and its idle time; micro-batches (GPipe).
# 2. The bubble formula against simulated step times for p = 1, 2, 4, 8 and m = 4 ... 32.
# 3. The timeline of GPipe and of 1F1B from a run.
# 4. Memory: activations alive, GPipe against 1F1B, and activation checkpointing.
# 5. Why the vocabulary layers unbalance the stages.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from minitorch_dist import RankError, SimNetwork, launch
from minitorch_dist.models import MLP
from minitorch_dist.pipeline import (PipelineStage, balance_by_params, format_schedule, gpipe_schedule,
                                     gpipe_step, one_f_one_b_schedule, one_f_one_b_step, pipeline_spec,
                                     stages_of)

# %matplotlib inline
START = time.perf_counter()
T_F, T_B = 1e-3, 2e-3                       # simulated seconds per stage and micro-batch
FREE = SimNetwork(alpha=0.0, beta=0.0)      # messages cost nothing: what remains is the schedule

def make_stage(group, m, width=8, checkpoint=False, stage_time=(T_F, T_B), batch_per_micro=2):
    # Every rank builds the same MLP (one layer per stage) and keeps its own stage.
    stages = stages_of(MLP(width, width, 4, depth=max(group.size - 1, 1), seed=0), group.size)
    x = torch.randn(m * batch_per_micro, width, generator=torch.Generator().manual_seed(0))
    y = torch.randint(0, 4, (m * batch_per_micro,), generator=torch.Generator().manual_seed(1))
    spec = pipeline_spec(stages, x[:batch_per_micro])[group.rank]
    stage = PipelineStage(stages[group.rank], group, spec, loss_fn=F.cross_entropy, checkpoint=checkpoint,
                          stage_time=stage_time)
    return stage, x, y, torch.optim.SGD(stage.parameters(), lr=0.1)

# Fail early, and say why, if minitorch_dist.pipeline still holds the HW5 stubs.
try:
    launch(lambda g: gpipe_step(*make_stage(g, 2)[:3], make_stage(g, 2)[3], 2), 2, backend="sim")
except RankError as err:
    if err.exc_type == "NotImplementedError":
        raise RuntimeError("minitorch_dist.pipeline holds the HW5 stubs; run this notebook through "
                           "the reference (your copy shows its outputs); write homework 5 first (assignments/hw5/README.md)") from None
    raise

# %% [markdown]
# ## 1. From the naive pipeline to micro-batches
#
# With the whole batch as one unit, stage 1 waits for stage 0's forward, stage 2 for stage 1's, and on the way
# back each stage waits for the next one's backward: at any moment one rank of p works. GPipe (Huang et al.
# 2019) cuts the batch into m **micro-batches**: as soon as stage 0 has sent micro-batch 0 it starts on
# micro-batch 1. At clock cycle k stage j runs micro-batch k - j, so the forward phase takes m + p - 1 cycles
# and so does the backward phase. Each stage works m cycles of the m + p - 1: the idle rest is the **bubble**,
#
# $$ \text{bubble} = \frac{p - 1}{m + p - 1}, \qquad
#    \frac{T_\text{pipeline}}{T_\text{one device}} = \frac{(m + p - 1)\,(t_f + t_b)}{m\,p\,(t_f + t_b)}
#    = \frac{m + p - 1}{m\,p}. $$
#
# The gradients do not change: each micro-batch's loss is scaled by 1/m and the gradients accumulate, so the
# optimizer, which steps once per batch, sees the gradient of the batch's mean loss. As schedules, per rank:

# %%
print("GPipe, p = 3, m = 4\n" + format_schedule(gpipe_schedule(3, 4)))
print("\n1F1B, p = 3, m = 4\n" + format_schedule(one_f_one_b_schedule(3, 4)))


# %% [markdown]
# ## 2. The bubble, measured
#
# The reproduction of a classic course experiment: a pipeline of p = 1, 2, 4, 8 stages with m = 4, 8, 16, 32
# micro-batches on `sim`, where each stage charges t_f = 1 ms forward and t_b = 2 ms backward per
# micro-batch and messages are free (`SimNetwork(alpha=0, beta=0)`), so that the step time is the
# schedule's alone. The step time divided by that of one device doing all p stages (m p (t_f + t_b)) is
# plotted against m, with the formula (m + p - 1)/(m p) drawn over the measurements.

# %%
def timed_step(group, m, step):
    stage, x, y, opt = make_stage(group, m)
    group.barrier()
    start = group.now()
    step(stage, x, y, opt, m)
    return group.now() - start

STAGES, MICRO = (1, 2, 4, 8), (4, 8, 16, 32)
measured = {}
print(f"{'p':>3} {'m':>4} {'step ms':>8} {'formula ms':>11} {'bubble':>7} {'(p-1)/(m+p-1)':>14} {'T/T1':>6}")
for p in STAGES:
    for m in MICRO:
        took = max(launch(timed_step, p, args=(m, gpipe_step), backend="sim", network=FREE))
        formula = (m + p - 1) * (T_F + T_B)
        measured[p, m] = took / (m * p * (T_F + T_B))
        print(f"{p:>3} {m:>4} {took * 1e3:8.1f} {formula * 1e3:11.1f} {1 - m * (T_F + T_B) / took:7.3f} "
              f"{(p - 1) / (m + p - 1):14.3f} {measured[p, m]:6.3f}")
        assert abs(took - formula) < 1e-9
print("every step time equals (m+p-1)(t_f+t_b)")

fig, ax = plt.subplots(figsize=(6.5, 4), layout="constrained")
ms = np.linspace(1, 34, 200)
for p in STAGES:
    line, = ax.plot(ms, (ms + p - 1) / (ms * p), lw=1)
    ax.plot(MICRO, [measured[p, m] for m in MICRO], "o", color=line.get_color(), label=f"p = {p}")
ax.set(xlabel="micro-batches m", ylabel="step time / one device's", xscale="log",
       title="GPipe on sim: measured (dots) and (m+p-1)/(m p) (lines)")
ax.legend()
plt.show()


# %% [markdown]
# Two lessons. The pipeline approaches the ideal 1/p only when m ≫ p (at m = 4 eight stages run at about a
# third of their ideal speed), so a pipeline wants many micro-batches. But each micro-batch must stay big
# enough to keep a device busy, so m is bounded by the batch size: pipelines go with large batches.
#
# ## 3. Two schedules, one timeline each
#
# The same step on p = 4 stages, m = 6, GPipe and 1F1B, on `sim`. Each stage below records when its forwards
# and backwards run (a subclass of `PipelineStage` notes the virtual clock around `run`, and a gradient hook
# on the output marks each backward, which takes exactly t_b on sim).

# %%
class TimedStage(PipelineStage):
    # Records (kind, micro-batch, start, end) of each forward and backward on the virtual clock.
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.log, self.n_forward, self.n_backward = [], 0, 0

    def run(self, x):
        start = self.group.now()
        y = super().run(x)
        self.log.append(("F", self.n_forward, start, self.group.now()))
        self.n_forward += 1
        if y.requires_grad:
            y.register_hook(self._backward_starts)
        return y

    def _backward_starts(self, grad):
        now = self.group.now()
        self.log.append(("B", self.n_backward, now, now + T_B))
        self.n_backward += 1

def logged_step(group, m, step):
    plain, x, y, opt = make_stage(group, m)
    stage = TimedStage(plain.module, group, plain.spec, loss_fn=F.cross_entropy, stage_time=(T_F, T_B))
    step(stage, x, y, torch.optim.SGD(stage.parameters(), lr=0.1), m)
    return stage.log

fig, axes = plt.subplots(2, 1, figsize=(9, 4.6), layout="constrained", sharex=True)
for ax, (name, step) in zip(axes, (("GPipe", gpipe_step), ("1F1B", one_f_one_b_step))):
    logs = launch(logged_step, 4, args=(6, step), backend="sim", network=FREE)
    for j, log in enumerate(logs):
        for kind, i, start, end in log:
            ax.barh(j, (end - start) * 1e3, left=start * 1e3, color="tab:blue" if kind == "F" else "tab:orange",
                    edgecolor="white")
            ax.text((start + end) / 2 * 1e3, j, f"{kind}{i}", ha="center", va="center", fontsize=7, color="white")
    finish = max(end for log in logs for *_, end in log)
    ax.set(yticks=range(4), yticklabels=[f"stage {j}" for j in range(4)], title=f"{name}: {finish * 1e3:.0f} ms")
    ax.invert_yaxis()
    print(f"{name}: step {finish * 1e3:.0f} ms = (m+p-1)(t_f+t_b) = {(6 + 3) * (T_F + T_B) * 1e3:.0f} ms")
axes[-1].set_xlabel("simulated ms")
plt.show()

# %% [markdown]
# Same length, same bubble (the white space). The difference is *when* each backward runs: in 1F1B
# (PipeDream-Flush, Narayanan et al. 2021; Megatron-LM's default) stage j runs p - j - 1 warm-up forwards, then
# alternates one forward and one backward, then drains the remaining backwards. A micro-batch's backward
# frees its activations, so 1F1B never keeps more than p - j of them on stage j, where GPipe keeps all m.
#
# ## 4. Memory: activations alive
#
# What a stage keeps between the forward and the backward of a micro-batch is what autograd saved for
# backward. Saved-tensor hooks see every such tensor: pack counts its bytes when the forward saves it, and a
# finalizer subtracts them when autograd frees it. The peak, in units of one micro-batch's saved bytes:

# %%
import weakref

class Box:
    # What the pack hook returns: holds the saved tensor until autograd drops the box.
    def __init__(self, tensor):
        self.tensor = tensor

class SavedBytes:
    # Live and peak bytes of the tensors autograd saved (inside `with SavedBytes() as meter:`).
    def __init__(self):
        self.live = self.peak = 0

    def pack(self, t):
        box = Box(t)
        self.live += t.numel() * t.element_size()
        self.peak = max(self.peak, self.live)
        weakref.finalize(box, self.free, t.numel() * t.element_size())
        return box

    def free(self, n):
        self.live -= n

    def __enter__(self):
        self.hooks = torch.autograd.graph.saved_tensors_hooks(self.pack, lambda box: box.tensor)
        self.hooks.__enter__()
        return self

    def __exit__(self, *exc):
        self.hooks.__exit__(*exc)

def peak_microbatches(group, m, step, checkpoint=False):
    stage, x, y, opt = make_stage(group, m, width=64, checkpoint=checkpoint, batch_per_micro=8)
    with SavedBytes() as one:                               # one micro-batch's forward, for the unit
        dummy = torch.zeros(stage.spec.in_shape, requires_grad=not stage.is_first)
        out = stage.module(dummy)
        if stage.is_last:
            out = F.cross_entropy(out, y[:8])
    del out
    with SavedBytes() as meter:
        step(stage, x, y, opt, m)
    return meter.peak / one.peak

P_MEM = 4
print(f"p = {P_MEM}: peak saved activations per stage, in micro-batches")
print(f"{'m':>3} {'GPipe':>22} {'1F1B':>22} {'GPipe + checkpointing':>24}")
for m in (2, 4, 8, 16):
    rows = [launch(peak_microbatches, P_MEM, args=(m, step, ckpt), backend="sim")
            for step, ckpt in ((gpipe_step, False), (one_f_one_b_step, False), (gpipe_step, True))]
    print(f"{m:>3} " + " ".join(f"{str([round(v) for v in r]):>22}" for r in rows))
print("1F1B keeps at most p - j micro-batches on stage j; GPipe keeps m")

# %% [markdown]
# GPipe's memory grows with m, exactly the knob that shrinks its bubble; 1F1B's stays at p - j whatever m is,
# so 1F1B can take many more micro-batches for the same memory. **Activation checkpointing** (Chen et al.
# 2016) goes further on either schedule: a stage keeps only each micro-batch's *input* (one tensor at the
# boundary) and recomputes its forward just before the backward; autograd then holds one micro-batch at a
# time, for the price of a second forward (about a third more compute when t_b = 2 t_f).
#
# ## 5. Why the vocabulary layers unbalance the stages
#
# The partitioner balances parameters. A language model's first layer (the embedding, V × h) and last layer
# (the LM head, h × V, plus the final norm) hold a lot of parameters when the vocabulary is large, but an
# embedding lookup costs almost no compute, while the head costs 2 b s h V flops, more than a block when V >
# 12 h. Here GPT-2 small's layers (V = 50304, h = 768, 12 blocks, untied) cut into 4 and 8 stages:

# %%
V, H, L, S = 50304, 768, 12, 1024
params = [V * H + S * H] + [12 * H * H + 13 * H] * L + [V * H + 2 * H]    # embedding, blocks, head
flops = [0] + [24 * H * H + 4 * S * H] * L + [2 * V * H]                 # forward flops per token (approx.)
names = ["embedding"] + [f"block {i}" for i in range(L)] + ["head"]
for p in (4, 8):
    bounds = balance_by_params(params, p)
    stage_params = [sum(params[a:b]) for a, b in bounds]
    stage_flops = [sum(flops[a:b]) for a, b in bounds]
    print(f"p = {p}: stages " + ", ".join(f"[{names[a]} .. {names[b - 1]}]" for a, b in bounds))
    print(f"   parameters (M): {[round(x / 1e6, 1) for x in stage_params]}")
    print(f"   compute (relative to the mean): {[round(float(x / np.mean(stage_flops)), 2) for x in stage_flops]}")
    print(f"   the slowest stage sets the pace: {max(stage_flops) / np.mean(stage_flops):.2f}x the balanced time")

# %% [markdown]
# Balancing parameters puts the embedding alone (or nearly) on stage 0, which then idles, and the head's
# heavy matmul on the last stage; every other stage waits for the slowest one each cycle. Remedies: balance
# by measured time instead of parameters, give the first and last stages fewer blocks, or, as in
# *vocabulary parallelism*, split the embedding and the head's vocabulary over **all** pipeline stages so
# that each holds V/p of the rows and the loss is computed with a few collectives, the same idea as the
# vocabulary-parallel cross-entropy of lecture 4, applied across the pipeline. With V not a multiple of p
# the first V mod p ranks take one row more; the softmax needs the maximum over *all* ranks (a max
# all-reduce) before the sum of exponentials (a sum all-reduce), else large logits overflow or the ranks'
# sums are taken on different scales. Homework 5's bonus 5.8 builds it.
#
# ## Summary
#
# - A pipeline sends only the boundary activations forward and their gradients back: 2(p - 1) m messages per
#   step.
# - GPipe's bubble is (p - 1)/(m + p - 1); it needs m ≫ p, measured above exactly as the formula says.
# - 1F1B has the same bubble and keeps at most p - j micro-batches alive on stage j instead of m; activation
#   checkpointing brings it to one, for a recomputed forward.
# - Stages must be balanced by time, not parameters: the vocabulary layers are the usual culprits.

# %%
print(f"notebook ran in {time.perf_counter() - START:.0f} s")
