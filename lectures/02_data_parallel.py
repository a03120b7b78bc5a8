# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
#   language_info:
#     name: python
#   title: 'Lecture 2: data parallelism, from a parameter server to gossip'
# ---

# %% [markdown]
# # Lecture 2: data parallelism, from a parameter server to gossip
#
# **How to run this notebook.** It imports `minitorch_dist.data_parallel` and `minitorch_dist.gossip`, the code you write in homework 2,
# and never re-defines it. Your copy shows the outputs of the course's run on the reference
# implementation, so you can read it now. Once your homework passes its public tests, run it yourself
# on *your* code from the kit's root: `.venv/bin/jupyter lab lectures/02_data_parallel.ipynb` (a full run takes under a minute on a
# 2-core laptop).
#
# **Plan.**
# 1. Data parallelism: p replicas, p parts of the batch, one averaged gradient. Replicas stay equal.
# 2. A parameter server (naive data parallel) against all-reduce: bytes through rank 0 against bytes per rank.
# 3. Overlap: gradients leave while backward is still running, seen in a real trace.
# 4. Gossip: average with a few neighbours instead of everyone; push-sum and its weights.
# 5. Stragglers: all-reduce against D-PSGD and SGP when a worker is slow, on the simulated network.

# %%
import math
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from minitorch_dist import RankError, SimNetwork, cost_model, launch
from minitorch_dist.data import global_batches, local_part, make_classification
from minitorch_dist.data_parallel import (AllReduceDDP, BucketedDDP, OverlapDDP, ParameterServer,
                                          flat_parameters, plan_buckets, write_flat_)
from minitorch_dist.data_parallel import stragglers
from minitorch_dist.gossip import exponential_peers, push_sum_step_
from minitorch_dist.models import MLP

# %matplotlib inline
START = time.perf_counter()
KB, MB = 1024, 1024 ** 2
X, Y = make_classification(n=512)            # (512, 16) float32, (512,) int64: the same in every process
COLORS = {"parameter server": "tab:red", "all-reduce": "tab:blue", "bucketed": "tab:cyan",
          "D-PSGD": "tab:orange", "SGP": "tab:green"}

# Fail early, and say why, if the homework 2 packages still hold the stubs.
try:
    launch(lambda group: AllReduceDDP(MLP(), group).finish_gradient_synchronization(), 1, backend="sim")
    launch(lambda group: push_sum_step_(torch.ones(1), torch.ones(1), group, 0), 2, backend="sim")
except RankError as err:
    if err.exc_type == "NotImplementedError":
        raise RuntimeError("minitorch_dist.data_parallel / gossip hold the HW2 stubs; run this notebook "
                           "through the reference (your copy shows its outputs); write homework 2 first (assignments/hw2/README.md)") from None
    raise


# %% [markdown]
# ## 1. Data parallelism in one cell
#
# Every rank holds a full copy (a **replica**) of the model. A global batch of B samples is cut into p
# parts; rank r computes the gradient of the mean loss on its part. The mean of the p gradients is the
# gradient of the whole batch (the parts have equal sizes), so if every rank applies that mean, every
# replica takes exactly the step a single process would take on the whole batch, and the replicas stay
# equal forever. Everything else in this lecture is about *how* the gradients get averaged.
#
# `AllReduceDDP` (homework task 2.2) is used like PyTorch's `DistributedDataParallel`: wrap the model,
# run backward on your part, call `finish_gradient_synchronization()`, step. Below: 4 ranks for 5 steps of
# SGD with momentum, in float64, against one process on the full batch.

# %%
def train_ddp(group, steps, batch_size=64):
    model = AllReduceDDP(MLP().double(), group)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for batch in global_batches(len(X), batch_size, seed=0)[:steps]:
        mine = local_part(batch, group.rank, group.size)            # this rank's B/p samples
        opt.zero_grad()
        F.cross_entropy(model(X[mine].double()), Y[mine]).backward()
        model.finish_gradient_synchronization()                     # every .grad: the mean over ranks
        opt.step()
    return flat_parameters(list(model.parameters()))

replicas = launch(train_ddp, 4, args=(5,))
single = launch(train_ddp, 1, args=(5,))[0]                         # one process, the whole batch
print("replicas bitwise equal:", all(torch.equal(r, replicas[0]) for r in replicas))
print(f"max |4 ranks - 1 process| = {(replicas[0] - single).abs().max().item():.1e}")
assert all(torch.equal(r, replicas[0]) for r in replicas)
assert torch.allclose(replicas[0], single, rtol=0, atol=1e-12)

# %% [markdown]
# The difference from the single process is rounding (the p partial means are added in another order),
# and the replicas agree bit for bit, because every rank receives the same averaged bits.
#
# ## 2. Through a server, or all together
#
# The first data-parallel systems (DistBelief, parameter servers) kept the model on a **server**: every
# step the workers send their gradients to it, it averages and steps, and it sends the new parameters
# back. `ParameterServer` (task 2.1) does this with rank 0 as the server (it also cuts the batch and sends
# each worker its part). Count what rank 0 moves per step, for a model of Ψ parameters of s bytes:
#
# | | sends | receives |
# |---|---|---|
# | server (rank 0) | (p-1) Ψs parameters (+ the batch parts) | (p-1) Ψs gradients |
# | each worker | Ψs gradients | Ψs parameters |
# | every rank, ring all-reduce | 2(p-1)/p · Ψs | 2(p-1)/p · Ψs |
#
# The server's link carries p-1 times a worker's, and it grows with p: that link is the bottleneck. An
# all-reduce (lecture 1) spreads the same work over every link: each rank sends under 2Ψs, whatever p.
# This is the naive all-reduce of lecture 1 against the ring, and `cost_model.traffic` has both.
#
# We measure rank 0's bytes with the runtime's counters (the parameter server uses `send`/`recv`, which
# are counted). The provided `group.all_reduce` is the backend's own implementation, whose internal
# messages are not visible, so for all-reduce we take the ring's bytes from the cost model.

# %%
BIG = dict(d_hidden=256, depth=2)                  # ~71k parameters, 285 KB in float32
PSI_BYTES = 4 * sum(p.numel() for p in MLP(**BIG).parameters())

def ps_bytes_per_step(group, steps=2, batch_size=64):
    model = MLP(**BIG)
    opt = torch.optim.SGD(model.parameters(), lr=0.1) if group.rank == 0 else None
    server = ParameterServer(model, group, F.cross_entropy, opt)
    before = (group.counters.bytes_sent, group.counters.bytes_recv)    # after the initial copy
    for batch in global_batches(len(X), batch_size, seed=0)[:steps]:
        if group.rank == 0:
            server.step(X[batch], Y[batch])
        else:
            server.step(None, None)
    return ((group.counters.bytes_sent - before[0]) / steps, (group.counters.bytes_recv - before[1]) / steps)

print(f"model: {PSI_BYTES / KB:.0f} KB of parameters\n")
print(f"{'p':>3} {'server sends':>13} {'receives':>9} {'worker sends':>13} {'receives':>9}"
      f" {'naive root':>11} {'ring, per rank':>15}")
PS_BYTES = {}
for p in (2, 4, 8):
    per_rank = launch(ps_bytes_per_step, p, backend="sim", trace=False)
    PS_BYTES[p] = per_rank
    naive = cost_model.traffic("naive_all_reduce", p, PSI_BYTES).bytes
    ring = cost_model.traffic("ring_all_reduce", p, PSI_BYTES).bytes
    (s0, r0), (s1, r1) = per_rank[0], per_rank[1]
    print(f"{p:>3} {s0 / KB:>10.0f} KB {r0 / KB:>6.0f} KB {s1 / KB:>10.0f} KB {r1 / KB:>6.0f} KB"
          f" {naive / KB:>8.0f} KB {ring / KB:>12.0f} KB")
    assert naive <= r0 < naive + 64 * p and PSI_BYTES <= s1 < PSI_BYTES + 64   # + each worker's loss (16 B)

# %% [markdown]
# (A worker also receives its batch part, 1 to 2 KB here, and sends its loss and sample count, 16 bytes;
# hence the small differences from whole models.) The server's traffic grows like p: at p = 8 rank 0 sends and receives 7 models per step,
# while a ring all-reduce asks under 2 models of every rank.
#
# What does that cost in time? On the simulated network every message costs α + nβ on a single port per
# rank, and `group.compute(seconds)` charges computation to a rank's clock. We charge 2 ms of compute for a
# global batch of 64 samples, split over the ranks (the data-parallel speedup), and measure the simulated
# time per step of the parameter server, of `AllReduceDDP` (one all-reduce per parameter tensor) and of
# `BucketedDDP` (task 2.4; here one bucket for the whole model).

# %%
NET = SimNetwork(alpha=10e-6, beta=1 / 1e9)          # 10 us, 1 GB/s
COMPUTE_PER_BATCH = 2e-3                             # seconds of compute for the global batch of 64

def step_time(group, version, steps=3, batch_size=64):
    model = MLP(**BIG)
    if version == "parameter server":
        opt = torch.optim.SGD(model.parameters(), lr=0.1) if group.rank == 0 else None
        server = ParameterServer(model, group, F.cross_entropy, opt)
    else:
        model = AllReduceDDP(model, group) if version == "all-reduce" else BucketedDDP(model, group, 25.0)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
    group.barrier()
    start = group.now()
    for batch in global_batches(len(X), batch_size, seed=0)[:steps]:
        group.compute(COMPUTE_PER_BATCH / group.size)
        if version == "parameter server":
            if group.rank == 0:
                server.step(X[batch], Y[batch])
            else:
                server.step(None, None)
            continue
        mine = local_part(batch, group.rank, group.size)
        opt.zero_grad()
        F.cross_entropy(model(X[mine]), Y[mine]).backward()
        model.finish_gradient_synchronization()
        opt.step()
    group.barrier()
    return (group.now() - start) / steps

PS_P = [1, 2, 4, 8, 16]
STEP_TIMES = {v: [launch(step_time, p, args=(v,), backend="sim", network=NET, trace=False)[0] for p in PS_P]
              for v in ("parameter server", "all-reduce", "bucketed")}

fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
ps = np.array(PS_P[1:])
axes[0].plot(ps, 2 * (ps - 1) * PSI_BYTES / MB, "o-", color=COLORS["parameter server"], label="server (rank 0)")
axes[0].plot(ps, [2 * cost_model.traffic("ring_all_reduce", int(p), PSI_BYTES).bytes / MB for p in ps], "o-",
             color=COLORS["all-reduce"], label="every rank, ring all-reduce")
axes[0].axhline(2 * PSI_BYTES / MB, color="k", ls=":", lw=1)
axes[0].set(xlabel="ranks p", ylabel="MB sent + received per step", title="traffic of the busiest rank")
axes[0].legend()
for version, times in STEP_TIMES.items():
    axes[1].plot(PS_P, np.array(times) * 1e3, "o-", color=COLORS[version], label=version)
axes[1].plot(PS_P, [COMPUTE_PER_BATCH / p * 1e3 for p in PS_P], "k:", label="compute only (ideal)")
axes[1].set(xscale="log", xlabel="ranks p", ylabel="simulated ms per step",
            title="step time, alpha = 10 us, 1/beta = 1 GB/s")
axes[1].set_xticks(PS_P, [str(p) for p in PS_P])
axes[1].legend()
plt.show()
for version, times in STEP_TIMES.items():
    print(f"{version:>17}: " + "  ".join(f"p={p}: {t * 1e3:5.2f} ms" for p, t in zip(PS_P, times)))
assert STEP_TIMES["parameter server"][-1] > 3 * STEP_TIMES["bucketed"][-1]

# %% [markdown]
# The parameter server gets *slower* as workers are added: the compute shrinks like 1/p, but rank 0's
# port carries 2(p-1) models per step. All-reduce keeps the communication nearly flat (the ring's
# 2(p-1)/p · Ψs tends to 2Ψs), so its step time approaches compute + a constant. Per-tensor all-reduce
# pays the latency once per parameter tensor (6 here, each 2(p-1) α); a single bucket pays it once.
# Real models have hundreds of tensors, which is why DDP buckets them (section 3).
#
# ## 3. Overlap: communicate while backward runs
#
# Backward computes gradients from the last layer to the first. A gradient that is ready can be sent at
# once, while backward works on earlier layers. `OverlapDDP` (task 2.3) starts one asynchronous
# all-reduce per parameter from a gradient hook (`register_post_accumulate_grad_hook`) and waits on them
# all in `finish_gradient_synchronization()`; `BucketedDDP` (task 2.4) packs gradients into buckets of a
# given size and starts a bucket's all-reduce when its last gradient arrives. `plan_buckets` shows the
# plan: buckets fill in reverse registration order, the order backward produces the gradients, and a
# bucket closes once it holds at least the size (torch DDP's rule, so its last parameter may take it past).

# %%
DEEP = dict(d_hidden=512, depth=4)                   # 5 layers, ~800k parameters (3.2 MB)
params = list(MLP(**DEEP).parameters())
print("parameter tensors (registration order):", [tuple(p.shape) for p in params])
for mb in (0.01, 0.5, 1.5, 25.0):
    buckets = plan_buckets(params, int(mb * MB))
    print(f"bucket size {mb:>5} MB: {len(buckets)} buckets {buckets}")


# %% [markdown]
# Now a real trace: 2 gloo processes train this model for 3 steps, and we look at the last one. Each
# rank records when its forward and backward run and when each gradient is ready (an extra hook; the
# clock is `group.now()`), and the runtime's trace records each all-reduce from its start to the end of
# its `wait()`. With `async_op=True` the bar of an all-reduce spans from the moment it was *started*
# to the moment `finish_gradient_synchronization()` waited for it (it may have finished earlier, in the
# background).

# %%
def traced_step(group, version, steps=3):
    model = MLP(**DEEP)
    if version == "all-reduce after backward":
        model = AllReduceDDP(model, group)
    elif version == "overlap (per parameter)":
        model = OverlapDDP(model, group)
    else:
        model = BucketedDDP(model, group, bucket_size_mb=1.5)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    ready = []
    for p in model.parameters():
        p.register_post_accumulate_grad_hook(lambda p: ready.append(group.now()))
    mine = local_part(global_batches(len(X), 256, seed=0)[0], group.rank, group.size)
    for _ in range(steps):                               # the last step is the one we look at
        ready.clear()
        opt.zero_grad()
        group.barrier()
        t0 = group.now()
        loss = F.cross_entropy(model(X[mine]), Y[mine])
        t1 = group.now()
        loss.backward()
        t2 = group.now()
        model.finish_gradient_synchronization()
        t3 = group.now()
        opt.step()
    return {"forward": (t0, t1), "backward": (t1, t2), "finish": (t2, t3), "ready": list(ready)}

VERSIONS = ["all-reduce after backward", "overlap (per parameter)", "bucketed (1.5 MB)"]
TRACES = {}
for version in VERSIONS:
    run = launch(traced_step, 2, args=(version,), trace=True)
    spans = run[0]                                                    # rank 0's view
    t0 = spans["forward"][0]
    reduces = [e for e in run.events if e.rank == 0 and e.op == "all_reduce" and e.start >= t0]
    TRACES[version] = (spans, reduces)

fig, axes = plt.subplots(3, 1, figsize=(10, 8), layout="constrained", sharex=True)
for ax, version in zip(axes, VERSIONS):
    spans, reduces = TRACES[version]
    t0 = spans["forward"][0]
    ms = lambda t: (t - t0) * 1e3
    ax.barh(0, ms(spans["forward"][1]), left=0, color="tab:gray", height=0.6, label="forward")
    ax.barh(0, ms(spans["backward"][1]) - ms(spans["backward"][0]), left=ms(spans["backward"][0]),
            color="tab:olive", height=0.6, label="backward")
    ax.plot([ms(t) for t in spans["ready"]], [0] * len(spans["ready"]), "k|", ms=14, label="gradient ready")
    for k, e in enumerate(sorted(reduces, key=lambda e: e.start)):
        ax.barh(k + 1, ms(e.end) - ms(e.start), left=ms(e.start), height=0.6, color="tab:green",
                label="all-reduce (start .. waited)" if k == 0 else None)
        ax.text(ms(e.end) + 0.3, k + 1, f"{e.nbytes / KB:.0f} KB", va="center", fontsize="x-small")
    ax.axvline(ms(spans["backward"][1]), color="tab:olive", ls=":", lw=1)
    ax.set_yticks(range(len(reduces) + 1), ["compute"] + [f"#{k + 1}" for k in range(len(reduces))],
                  fontsize="small")
    ax.set_ylim(len(reduces) + 0.6, -0.6)
    ax.set_title(f"{version}: step {ms(spans['finish'][1]):.1f} ms, "
                 f"{len(reduces)} all-reduces", fontsize="medium")
axes[0].legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
axes[-1].set_xlabel("ms since the step started (rank 0, gloo, 2 processes)")
plt.show()

for version, (spans, reduces) in TRACES.items():
    before = sum(e.start < spans["backward"][1] for e in reduces)
    print(f"{version:>26}: {before} of {len(reduces)} all-reduces start before backward ends; "
          f"after backward, finish takes {(spans['finish'][1] - spans['finish'][0]) * 1e3:.1f} ms")
assert all(e.start >= TRACES[VERSIONS[0]][0]["backward"][1] for e in TRACES[VERSIONS[0]][1])
assert any(e.start < TRACES[VERSIONS[1]][0]["backward"][1] for e in TRACES[VERSIONS[1]][1])


# %% [markdown]
# After backward, the first version still has all its communication ahead of it; the overlapped ones
# have most of it behind them, and `finish` only waits for the last gradients (the first layer's, produced
# last). On this laptop the ranks share two cores with gloo's communication threads, so overlap also
# slows backward down a little; on a cluster the network works on its own and the overlap is nearly free.
#
# Why buckets? Each all-reduce pays the latency α (2(p-1)α for a ring), so hundreds of small per-tensor
# all-reduces cost more than a few large ones; one all-reduce of everything cannot start before the
# last gradient is ready. PyTorch DDP uses 25 MB buckets by default; homework 2 sweeps the size.
#
# ## 4. Gossip: average with your neighbours only
#
# An all-reduce makes every rank wait for every other rank, every step. **Decentralized** training drops
# the exact average: each rank mixes its model with a few neighbours and takes its own gradient step.
# Written with a mixing matrix W (row i: the weights rank i gives the models it receives),
#
# $$ x_i \leftarrow \sum_j W_{ij} x_j - \eta \nabla F_i(x_i) $$
#
# **D-PSGD** (Lian et al. 2017, task 2.5) uses a ring with W_ij = 1/3 for j ∈ {i-1, i, i+1}: symmetric and
# doubly stochastic, so the mean of the models is kept, and repeated mixing pulls every model toward it
# (consensus). Each step costs 2 messages per rank, whatever p.
#
# **Stochastic Gradient Push** (Assran et al. 2019, task 2.6) needs one message per step on a *directed*
# graph. Each rank keeps a numerator x_i and a weight w_i (w_i = 1 at the start); a step keeps half of
# both and pushes the other half to one out-peer. The mixing is column stochastic: the sums Σx_i and
# Σw_i = p are conserved, and the *de-biased* model z_i = x_i / w_i is what a rank evaluates. The graph is
# the exponential graph with one rotating peer: at step k, rank i pushes to i + 2^(k mod log₂p).
# For p a power of two, log₂ p steps of it compute the exact mean. Here is that on 8 simulated ranks,
# with rank i starting from x_i = i (mean 3.5).

# %%
def push_sum_history(group, steps):
    x = torch.tensor([float(group.rank)], dtype=torch.float64)
    w = torch.ones(1, dtype=torch.float64)
    history = [(x.item(), w.item())]
    for k in range(steps):
        push_sum_step_(x, w, group, k)
        history.append((x.item(), w.item()))
    return history

P_GOSSIP = 8
history = launch(push_sum_history, P_GOSSIP, args=(3,), backend="sim")
for k in range(4):
    z = [history[r][k][0] / history[r][k][1] for r in range(P_GOSSIP)]
    print(f"after {k} steps: z = " + " ".join(f"{v:5.2f}" for v in z)
          + f"   sum x = {sum(history[r][k][0] for r in range(P_GOSSIP)):.1f}"
          + f", sum w = {sum(history[r][k][1] for r in range(P_GOSSIP)):.1f}")
assert all(history[r][3][0] / history[r][3][1] == 3.5 for r in range(P_GOSSIP))


# %% [markdown]
# On this graph every rank has exactly one in-peer and one out-peer at each step, so the mixing is
# doubly stochastic and every w_i stays 1: the weights do nothing here. They matter as soon as the graph
# is not that regular: peers chosen at random, a rank that receives from two others while a third gets
# nothing. The cell below runs push-sum as matrix algebra (no processes: x ← A x, w ← A w with A column
# stochastic) on such a graph: at each step every node pushes half to a random other node. It draws the
# first step's graph, the weights it produces, and the distance to the true mean of the de-biased z_i
# against the raw x_i.

# %%
def draw_graph(ax, p, edges, sizes, colors, title):
    angles = np.pi / 2 - 2 * np.pi * np.arange(p) / p
    pos = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    for src, dst, color in edges:
        ax.annotate("", xy=pos[dst], xytext=pos[src],
                    arrowprops=dict(arrowstyle="-|>", color=color, lw=1.3, shrinkA=11, shrinkB=11,
                                    connectionstyle="arc3,rad=0.15"))
    ax.scatter(pos[:, 0], pos[:, 1], s=sizes, c=colors, cmap="viridis", vmin=0, vmax=2, zorder=3, edgecolors="k")
    for i, (px, py) in enumerate(pos):
        ax.text(px * 1.28, py * 1.28, str(i), ha="center", va="center", fontsize="small")
    ax.set(xlim=(-1.5, 1.5), ylim=(-1.5, 1.5), aspect="equal", title=title)
    ax.axis("off")

fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), layout="constrained")
step_colors = ["tab:blue", "tab:orange", "tab:green"]
exp_edges = [(i, exponential_peers(i, P_GOSSIP, k)[0], step_colors[k]) for k in range(3) for i in range(P_GOSSIP)]
draw_graph(axes[0], P_GOSSIP, exp_edges, 300, np.ones(P_GOSSIP),
           "exponential graph: steps 0, 1, 2 (blue, orange, green)\nw stays 1")

rng = np.random.default_rng(0)
x0 = np.arange(P_GOSSIP, dtype=float)
x, w = x0.copy(), np.ones(P_GOSSIP)
raw_err, z_err = [], []
for k in range(40):
    out = [(i + rng.integers(1, P_GOSSIP)) % P_GOSSIP for i in range(P_GOSSIP)]   # a random other node
    A = np.eye(P_GOSSIP) / 2
    for i, j in enumerate(out):
        A[j, i] += 0.5                                      # column i: keep half, push half to j
    x, w = A @ x, A @ w
    if k == 0:
        draw_graph(axes[1], P_GOSSIP, [(i, j, "tab:purple") for i, j in enumerate(out)], 260 * w, w,
                   "random peers, step 0: node size = w\n" + " ".join(f"{v:.1f}" for v in w))
    raw_err.append(np.abs(x - x0.mean()).max())
    z_err.append(np.abs(x / w - x0.mean()).max())
    assert math.isclose(x.sum(), x0.sum()) and math.isclose(w.sum(), P_GOSSIP)
axes[2].semilogy(range(1, 41), raw_err, "o-", ms=3, color="tab:red", label="max |x_i - mean|")
axes[2].semilogy(range(1, 41), z_err, "o-", ms=3, color="tab:green", label="max |x_i / w_i - mean|")
axes[2].set(xlabel="push-sum steps", title="random directed peers: de-biasing", ylim=(1e-10, 10))
axes[2].legend()
plt.show()
print(f"after 40 steps: raw x off by {raw_err[-1]:.2f}, z = x/w off by {z_err[-1]:.1e}")
assert z_err[-1] < 1e-5 < 0.05 < raw_err[-1]

# %% [markdown]
# A node that receives more than it sends piles up both numerator and weight: its raw x_i overshoots the
# mean by the factor w_i, and that bias never goes away. Dividing by w_i removes it exactly. This is the
# point of push-sum: any column-stochastic mixing, directed and time-varying, converges to the true
# average of the de-biased values.
#
# ## 5. Stragglers: all-reduce against gossip, on simulated time
#
# A synchronous all-reduce step ends when the *slowest* rank has contributed. If any one of p workers
# is slow in a step (a garbage-collection pause, a noisy neighbour, a throttled GPU), everyone waits.
# Gossip only couples a rank to its neighbours of the moment.
#
# We train the MLP on 8 simulated ranks with the same data stream for three methods: `BucketedDDP`
# (exact averaging, SGD), `DPSGD` and `SGP` (the same SGD learning rate, each rank's gradient on its own
# part of the same global batch). Each step charges 5 ms of compute with `group.compute`, in three
# scenarios:
#
# - **no straggler**: every rank 5 ms;
# - **one slow rank**: rank 3 always takes 5x longer;
# - **random straggler**: in each step one rank, drawn at random, takes 5x longer.
#
# The loss is the mean over ranks of each rank's model on the full data set; its time is the simulated
# time when the last rank finished that step. Training is deterministic, so the three scenarios give the
# same losses per step: only their simulated times differ.

# %%
P, STEPS, LR, BATCH, EVERY = 8, 120, 0.2, 64, 10
BASE_COMPUTE, SLOW = 5e-3, 5.0
SCENARIOS = ["no straggler", "one slow rank", "random straggler"]
METHODS = ["all-reduce", "D-PSGD", "SGP"]
GOSSIP_NET = SimNetwork(alpha=20e-6, beta=1 / 1e9)

def train_decentralized(group, method, scenario):   # minitorch_dist/data_parallel/stragglers.py
    return stragglers.train_decentralized(group, method, scenario, X, Y, STEPS, LR, BATCH, EVERY,
                                          BASE_COMPUTE, SLOW)

def full_loss(flat):
    model = MLP()
    write_flat_(list(model.parameters()), flat)
    with torch.no_grad():
        return F.cross_entropy(model(X), Y).item()

t0 = time.perf_counter()
CURVES = {}                                          # (scenario, method) -> (sim seconds, losses)
for scenario in SCENARIOS:
    for method in METHODS:
        logs = launch(train_decentralized, P, args=(method, scenario), backend="sim", network=GOSSIP_NET,
                      trace=False)
        times = [max(logs[r][i][0] for r in range(P)) for i in range(len(logs[0]))]
        losses = [np.mean([full_loss(logs[r][i][1]) for r in range(P)]) for i in range(len(logs[0]))]
        CURVES[scenario, method] = (np.array(times), np.array(losses))
print(f"9 simulated trainings in {time.perf_counter() - t0:.1f} s of wall time")

# %%
TARGET = 0.55

def time_to_target(times, losses, target=TARGET):
    reached = np.nonzero(losses <= target)[0]
    return times[reached[0]] if len(reached) else math.inf

fig, axes = plt.subplots(1, 3, figsize=(13, 4), layout="constrained", sharey=True)
for ax, scenario in zip(axes, SCENARIOS):
    for method in METHODS:
        times, losses = CURVES[scenario, method]
        ax.plot(times, losses, "o-", ms=3, color=COLORS[method], label=method)
    ax.axhline(TARGET, color="k", ls=":", lw=1)
    ax.set(xlabel="simulated seconds", title=scenario)
axes[0].set_ylabel("mean loss of the 8 models (full data)")
axes[0].legend()
plt.show()

print(f"simulated seconds to reach loss {TARGET}:")
print(f"{'':>17} " + " ".join(f"{m:>10}" for m in METHODS))
for scenario in SCENARIOS:
    print(f"{scenario:>17} " + " ".join(f"{time_to_target(*CURVES[scenario, m]):>10.2f}" for m in METHODS))
steps = {m: EVERY * (1 + int(np.argmax(CURVES["no straggler", m][1] <= TARGET))) for m in METHODS}
print("steps to reach it: " + ", ".join(f"{m} {n}" for m, n in steps.items()))
random_ar = time_to_target(*CURVES["random straggler", "all-reduce"])
assert max(time_to_target(*CURVES["random straggler", m]) for m in ("D-PSGD", "SGP")) < random_ar

# %% [markdown]
# Three lessons, one per panel.
#
# - **No straggler**: a close race. Exact averaging makes the most progress per step; gossip's steps are
#   a little cheaper (one or two messages instead of the ring's 2(p-1) = 14 latencies). On this small,
#   easy problem SGP keeps up with all-reduce; D-PSGD's models disagree more and it falls behind as the
#   loss gets lower. With more ranks or a harder problem, exact averaging counts for more.
# - **One slow rank**: nobody escapes. Gossip as we wrote it is *synchronous*: a rank waits for its
#   neighbours' messages, they wait for theirs, and within a few steps the whole graph runs at the slow
#   rank's pace. Escaping a persistently slow worker needs asynchrony (AD-PSGD, or SGP with delayed
#   messages, which the paper also proposes), or simply giving that worker less data.
# - **Random straggler**: gossip wins. All-reduce pays the slowest of 8 workers every step; in gossip a
#   slow step delays only the ranks it talks to, and a rank that fell behind catches up while its
#   neighbours are fast, so the delays overlap instead of adding up.
#
# ## Summary
#
# - Data parallelism = p replicas, p batch parts, one averaged gradient; done exactly, replicas stay equal
#   and training matches one process.
# - A parameter server moves (p-1) models through one port per step; all-reduce moves under 2 models
#   through every port, whatever p.
# - Hooks start a gradient's all-reduce as soon as it exists; buckets trade latency (fewer all-reduces)
#   against overlap (earlier starts).
# - Gossip trades exact averaging for locality: fewer messages, no global barrier. Push-sum's weights
#   make any column-stochastic directed mixing converge to the true mean.
# - The win is under uneven, transient slowness; a persistently slow worker slows down synchronous gossip
#   just as much as all-reduce.

# %%
print(f"notebook ran in {time.perf_counter() - START:.0f} s")
