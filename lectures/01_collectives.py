# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
#   language_info:
#     name: python
#   title: 'Lecture 1: collectives from send and receive'
# ---

# %% [markdown]
# # Lecture 1: collectives from send and receive
#
# **How to run this notebook.** It imports `minitorch_dist.collectives`, the code you write in homework 1,
# and never re-defines it. Your copy shows the outputs of the course's run on the reference
# implementation, so you can read it now. Once your homework passes its public tests, run it yourself
# on *your* code from the kit's root: `.venv/bin/jupyter lab lectures/01_collectives.ipynb` (a full run takes about a minute on a
# 2-core laptop).
#
# **Plan.**
# 1. Processes and channels: `launch`, `send`/`recv`, `sendrecv`, and a deadlock with its wait-for report.
# 2. All-reduce four ways: naive, tree, butterfly, ring, run on real processes and checked.
# 3. The alpha-beta cost model: what each algorithm should cost, as p and the message size grow.
# 4. The same algorithms on the simulated network, up to 1024 ranks, against the formulas.
# 5. A real ring all-reduce, seen as a timeline.
# 6. Across real node boundaries: an emulated cluster's links measured against the model.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
import torch

from minitorch_dist import RankError, SimNetwork, cost_model, launch
from minitorch_dist.collectives import ALL_REDUCES

# %matplotlib inline
START = time.perf_counter()
ALGORITHMS = ["naive", "tree", "butterfly", "ring"]
COLORS = {"naive": "tab:gray", "tree": "tab:green", "butterfly": "tab:purple", "ring": "tab:blue"}

# Fail early, and say why, if minitorch_dist.collectives still holds the homework stubs.
try:
    launch(lambda group: ALL_REDUCES["ring"](torch.ones(2), group), 2, backend="sim")
except RankError as err:
    if err.exc_type == "NotImplementedError":
        raise RuntimeError("minitorch_dist.collectives holds the HW1 stubs; run this notebook through "
                           "the reference (your copy shows its outputs); write homework 1 first (assignments/hw1/README.md)") from None
    raise

# %% [markdown]
# ## 1. Processes and channels
#
# Distributed training runs one **process** per device. Processes share no memory: the only way
# to move data between them is a **message**. `launch(fn, p)` starts `p` processes (*ranks*), calls
# `fn(group)` on each, and returns the list of their return values, in rank order. The `group` is
# everything a rank knows about the job: its `group.rank` (0 .. p-1), `group.size` (p), and the
# operations to talk to the others.
#
# With the default `gloo` backend each rank is a real operating-system process (forked from a warm
# pool, so a launch takes milliseconds). A function defined in a notebook is shipped to them by value.

# %%
import os

def hello(group):
    return f"rank {group.rank} of {group.size} runs in process {os.getpid()}"

for line in launch(hello, 4):
    print(line)
print("this notebook's kernel is process", os.getpid())


# %% [markdown]
# ### send and recv
#
# `group.send(tensor, dst)` and `group.recv(tensor, src)` are the two primitives everything in this
# course is built from. The receiver owns the buffer: it must have the same shape and dtype as the
# message, and `recv` fills it in place. Every message is counted: the `RunResult` that `launch`
# returns carries per-rank counters (`results.counters`, `results.summary()`).

# %%
def ping(group):
    x = torch.arange(4.0) if group.rank == 0 else torch.zeros(4)
    if group.rank == 0:
        group.send(x, dst=1)
    else:
        group.recv(x, src=0)           # fills x in place
    return x.tolist()

results = launch(ping, 2)
print(results)
assert results[1] == [0.0, 1.0, 2.0, 3.0]
print(results.summary())


# %% [markdown]
# ### A deadlock
#
# On `gloo`, as in MPI, a blocking `send` of a large message returns only once the receiver has
# posted its receive (small messages, up to a few KB, are buffered and return at once). Two ranks that
# both `send` a large message first therefore wait for each other forever: each is stuck in `send`, and
# neither reaches its `recv`. Real jobs hang silently when that happens. Here
# every blocking operation has a deadline (60 s by default, `launch(..., deadline=...)`). When it
# expires, the runtime reports what each rank was doing and the **wait-for cycle**.

# %%
def both_send_first(group):
    peer = 1 - group.rank
    mine, theirs = torch.full((2 ** 16,), float(group.rank)), torch.empty(2 ** 16)   # 256 KB
    group.send(mine, peer)       # both ranks block here ...
    group.recv(theirs, peer)     # ... and never get here
    return theirs[0].item()

try:
    launch(both_send_first, 2, deadline=1.0)
except RankError as err:
    print(err.message)
else:
    raise AssertionError("expected a deadlock")

# %% [markdown]
# The simulated backend (`backend="sim"`, section 4) runs the ranks as threads on a virtual clock. It sees
# the same deadlock the moment every rank is blocked, with no deadline to wait for. `eager_limit=0` makes
# every send wait for its receive, like `gloo` above.
#
# The fix is to let the two directions overlap. `group.sendrecv(send_buf, dst, recv_buf, src)` does
# both at once, and it is the building block of the ring algorithms below.

# %%
try:
    launch(both_send_first, 2, backend="sim", network=SimNetwork(eager_limit=0))
except RankError as err:
    print(err.message.splitlines()[0])
    print("\n".join(err.message.splitlines()[1:4]))

def swap(group):
    peer = 1 - group.rank
    mine, theirs = torch.full((2 ** 16,), float(group.rank)), torch.empty(2 ** 16)
    group.sendrecv(mine, peer, theirs, peer)
    return theirs[0].item()

print("with sendrecv:", launch(swap, 2))
assert launch(swap, 2) == [1.0, 0.0]


# %% [markdown]
# ## 2. All-reduce four ways
#
# **All-reduce**: every rank starts with a vector `x` of n elements; at the end every rank holds the
# element-wise sum over all ranks. It is the collective of data-parallel training: each rank computes
# the gradient on its share of the batch, and the all-reduce sums the gradients.
#
# Homework 1 builds it four ways from `send`/`recv`. All four live in `minitorch_dist.collectives`:
#
# | algorithm | how | rounds | bytes sent by the busiest rank |
# |---|---|---|---|
# | **naive** | everyone sends to rank 0, rank 0 adds and sends the sum back to each | 2(p-1) | (p-1) n |
# | **tree** | binomial-tree reduce to rank 0, then binomial-tree broadcast | 2 ⌈log₂ p⌉ | ⌈log₂ p⌉ n |
# | **butterfly** | recursive doubling: in round k, swap the whole vector with rank `r XOR 2^k` and add | log₂ p | log₂ p · n |
# | **ring** | cut x in p chunks; reduce-scatter around the ring (p-1 steps), then all-gather (p-1 steps) | 2(p-1) | 2(p-1)/p · n |
#
# (n in bytes. For p not a power of two the butterfly first folds the extra ranks into their neighbours
# and unfolds at the end: two more full-size rounds.)
#
# Naive and tree move the *whole* vector at every step. The ring sends a chunk of n/p per step, so each
# rank sends under 2n bytes in total, whatever p is. No algorithm can do better (each rank must send out
# and take in its n bytes of information, a reduce-scatter and an all-gather's worth). The price is
# 2(p-1) rounds.
#
# Let us run all four on real processes, on 4 ranks and on 6 (not a power of two), with a random input
# per rank. We check each result against a sum computed in this process, and each busiest rank's
# traffic against `cost_model.traffic`.

# %%
def all_reduce_random(group, name, n, seed):
    torch.manual_seed(seed + group.rank)     # rank r's input; the caller can rebuild it
    x = torch.randn(n)
    ALL_REDUCES[name](x, group)              # in place
    return x

def check_all_reduce(name, p, n=1200, seed=0):
    results = launch(all_reduce_random, p, args=(name, n, seed), collectives=False)
    inputs = []
    for r in range(p):
        torch.manual_seed(seed + r)
        inputs.append(torch.randn(n))
    expected = torch.stack(inputs).sum(dim=0)
    for r, x in enumerate(results):
        assert torch.allclose(x, expected, rtol=1e-5, atol=1e-5), f"{name}, p={p}: wrong sum on rank {r}"
    busiest = max(results.counters, key=lambda c: c.bytes_sent)
    model = cost_model.traffic(f"{name}_all_reduce", p, 4 * n)
    return busiest.messages_sent, busiest.bytes_sent, model.messages, model.bytes

print(f"{'algorithm':>10} {'p':>3} {'msgs':>5} {'model':>5} {'bytes':>7} {'model':>7}")
for p in (4, 6):
    for name in ALGORITHMS:
        msgs, nbytes, model_msgs, model_bytes = check_all_reduce(name, p)
        print(f"{name:>10} {p:>3} {msgs:>5} {model_msgs:>5} {nbytes:>7} {model_bytes:>7.0f}")
        assert nbytes == model_bytes
print("all results correct (n = 1200 float32 = 4800 bytes per rank)")

# %% [markdown]
# `collectives=False` switches off the runtime's own collectives (`group.all_reduce` and friends), so
# these runs use only point-to-point messages. The counters match the table: the naive root sends p-1
# full vectors; the ring's busiest rank sends 2(p-1)/p · n bytes, the least of the four.
#
# ## 3. The alpha-beta cost model
#
# A message of n bytes between two ranks takes
#
# $$ t(n) = \alpha + n\beta $$
#
# where α is the **latency** (software overhead plus wire delay, paid once per message) and 1/β is the
# **bandwidth**. Counting the messages on each algorithm's critical path gives its time (`cost_model`):
#
# | algorithm | time |
# |---|---|
# | naive | 2(p-1)(α + nβ) |
# | tree | 2⌈log₂ p⌉(α + nβ) |
# | butterfly | log₂ p (α + nβ)  (p a power of two) |
# | ring | 2(p-1)α + 2(p-1)/p · nβ |
#
# Two regimes follow. **Small messages** are latency-bound, so the fewest rounds win: butterfly, log₂ p
# of them. **Large messages** are bandwidth-bound, so the fewest bytes win: the ring's 2n·β does not grow
# with p, while the butterfly's log₂ p · nβ does. We take a cluster-like network: α = 10 µs, and 1/β =
# 12.5 GB/s (100 Gb/s).

# %%
ALPHA, BETA = 10e-6, 1 / 12.5e9
KB, MB = 1024, 1024 ** 2

def predicted(name, p, n_bytes, alpha=ALPHA, beta=BETA):
    return cost_model.ALL_REDUCE_ALGORITHMS[name](p, n_bytes, alpha, beta)

print(f"{'p = 64':>10} " + " ".join(f"{name:>10}" for name in ALGORITHMS) + "   best")
for n_bytes in (1 * KB, 64 * KB, 1 * MB, 64 * MB):
    times = {name: predicted(name, 64, n_bytes) for name in ALGORITHMS}
    row = " ".join(f"{times[name] * 1e3:>8.3f}ms" for name in ALGORITHMS)
    print(f"{n_bytes // KB:>8}KB {row}   {min(times, key=times.get)}")

# %%
ps = [2 ** k for k in range(1, 11)]                # 2 .. 1024 ranks (cost_model wants Python ints)
fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained", sharey=True)
for ax, n_bytes in zip(axes, (1 * KB, 64 * MB)):
    for name in ALGORITHMS:
        ax.plot(ps, [predicted(name, p, n_bytes) for p in ps], "-o", ms=3, color=COLORS[name], label=name)
    ax.set(xscale="log", yscale="log", xlabel="ranks p", title=f"all-reduce of {n_bytes // KB:,} KB")
    ax.set_xticks(ps, [str(p) for p in ps], fontsize="small")
axes[0].set_ylabel("predicted time (s)")
axes[0].legend()
plt.show()


# %% [markdown]
# At 1 KB (left) the time is almost all α. The butterfly grows like log p; the naive and the ring both
# grow like p, the ring only because of its 2(p-1) rounds. At 64 MB (right) the ring stays flat: every
# rank sends about 2n bytes, whatever p is. The tree and the butterfly move the whole vector log p times.
#
# Now fix p = 64 and vary the message size. The ring and the butterfly cross where their times are
# equal. Solving log₂p (α + nβ) = 2(p-1)α + 2(p-1)/p · nβ for n gives the size above which the ring wins.

# %%
def crossover_bytes(p, alpha=ALPHA, beta=BETA):
    # log2(p)*(alpha + n*beta) = 2(p-1)*alpha + 2(p-1)/p*n*beta, solved for n (p a power of two >= 4)
    k = np.log2(p)
    return (2 * (p - 1) - k) * alpha / ((k - 2 * (p - 1) / p) * beta)

p = 64
sizes = 2.0 ** np.arange(8, 29)                    # 256 B .. 256 MB
fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
for name in ALGORITHMS:
    ax.plot(sizes, [predicted(name, p, n) for n in sizes], color=COLORS[name], label=name)
n_star = crossover_bytes(p)
ax.axvline(n_star, color="k", ls=":", lw=1)
ax.annotate(f"ring beats butterfly\nabove {n_star / MB:.1f} MB", (n_star, 1e-4), xytext=(8, 0),
            textcoords="offset points", fontsize="small")
ax.set(xscale="log", yscale="log", xlabel="message size n (bytes)", ylabel="predicted time (s)",
       title=f"all-reduce on p = {p}, alpha = 10 us, 1/beta = 12.5 GB/s")
ax.legend()
plt.show()
for n in (n_star / 2, n_star * 2):
    assert (predicted("ring", p, n) < predicted("butterfly", p, n)) == (n > n_star)

# %% [markdown]
# This is why real libraries switch algorithms by message size: NCCL and MPI use latency-optimal
# trees or recursive doubling for small messages and rings (or Rabenseifner's reduce-scatter +
# all-gather) for large ones. Gradient buckets in DDP are tens of MB, which is ring territory.
#
# ## 4. Measured on the simulated network, up to 1024 ranks
#
# A laptop cannot run 1024 processes, but `backend="sim"` can run 1024 *ranks*: each is a thread, and
# they run one at a time on a virtual clock. Every message costs exactly α + nβ of simulated time on a
# network where each rank has one full-duplex port, `SimNetwork(alpha, beta)`. The algorithms are the same
# code as above, unchanged. `results.sim_time` is the simulated length of the run.
#
# The ring sends 2p(p-1) messages in all, so simulating it at p = 1024 means about two million
# messages, which takes tens of seconds of wall time. Below, the ring and the naive all-reduce go up to
# p = 256 and the log-round algorithms to 1024. Each rank holds 256 KB (65,536 float32), a size that p
# divides, so the ring's chunks are equal and the formulas are exact.

# %%
NET = SimNetwork(alpha=ALPHA, beta=BETA)

def all_reduce_ones(group, name, n):
    x = torch.ones(n)
    ALL_REDUCES[name](x, group)
    return x[0].item() == group.size and x[-1].item() == group.size   # every rank checks its sum

def sim_time(name, p, n):
    results = launch(all_reduce_ones, p, args=(name, n), backend="sim", network=NET,
                     collectives=False, trace=False)
    assert all(results), f"{name}: wrong sum on p={p}"
    return results.sim_time

N_ELEMS = 65536                                     # 256 KB of float32
MAX_P = {"naive": 256, "ring": 256, "tree": 1024, "butterfly": 1024}
t0 = time.perf_counter()
measured_vs_p = {name: {p: sim_time(name, p, N_ELEMS) for p in ps if p <= MAX_P[name]}
                 for name in ALGORITHMS}
print(f"simulated {sum(map(len, measured_vs_p.values()))} runs in {time.perf_counter() - t0:.1f} s of wall time")

worst = max(abs(t / predicted(name, p, 4 * N_ELEMS) - 1)
            for name, runs in measured_vs_p.items() for p, t in runs.items())
print(f"largest relative gap between sim and formula: {worst:.1e}")
assert worst < 1e-6

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
ax = axes[0]
for name in ALGORITHMS:
    ax.plot(ps, [predicted(name, p, 4 * N_ELEMS) for p in ps], "-", color=COLORS[name], alpha=0.5)
    runs = measured_vs_p[name]
    ax.plot(list(runs), list(runs.values()), "o", color=COLORS[name], label=f"{name} (sim)")
ax.set(xscale="log", yscale="log", xlabel="ranks p", ylabel="time (s)", title="256 KB: sim (dots) vs formula (lines)")
ax.set_xticks(ps, [str(p) for p in ps], fontsize="small")
ax.legend(fontsize="small")

# vs message size on p = 16 (16 | every size, so the ring's chunks are equal)
p_small, elems = 16, 2 ** np.arange(8, 23, 2)       # 1 KB .. 16 MB
ax = axes[1]
for name in ALGORITHMS:
    nbytes = 4 * elems
    ax.plot(nbytes, [predicted(name, p_small, n) for n in nbytes], "-", color=COLORS[name], alpha=0.5)
    ax.plot(nbytes, [sim_time(name, p_small, int(e)) for e in elems], "o", color=COLORS[name], label=name)
ax.axvline(crossover_bytes(p_small), color="k", ls=":", lw=1)
ax.set(xscale="log", yscale="log", xlabel="message size n (bytes)", title=f"p = {p_small}: sim (dots) vs formula (lines)")
plt.show()


# %% [markdown]
# The dots sit on the lines: on this network the simulated runs of the real code cost what the formulas
# say. That is a useful check in both directions. When your homework's sim time is *above* the formula,
# some rank waits for something the algorithm did not mean it to wait for: a send posted too late,
# or a round done in two steps instead of one `sendrecv`. The homework's tests look at exactly that.
#
# (The formulas assume a perfect network: no contention, one port per rank, no compute. Real clusters add
# congestion, topology and reduction time, `gamma` in `cost_model`, but the regimes stay the same.)
#
# ## 5. A ring all-reduce, seen from inside
#
# `launch(..., trace=True)` (the default) records every operation of every rank: its kind, peer, bytes,
# start and end. `results.plot_timeline()` draws one lane per rank; `results.chrome_trace("ring.json")`
# writes the same trace for https://ui.perfetto.dev. Here is a 4 MB ring all-reduce on 4 real processes,
# next to the same run on the simulated network.

# %%
def ring_4mb(group):
    x = torch.ones(2 ** 20)                  # 4 MB of float32
    group.barrier()                          # start together, so the lanes line up
    ALL_REDUCES["ring"](x, group)
    return x[0].item()

real = launch(ring_4mb, 4, collectives=False, trace=True)
sim = launch(ring_4mb, 4, collectives=False, trace=True, backend="sim", network=NET)
assert list(real) == list(sim) == [4.0] * 4

fig, axes = plt.subplots(2, 1, figsize=(10, 5), layout="constrained")
for ax, run, unit, title in ((axes[0], real, "ms", "gloo: 4 processes on this machine"),
                             (axes[1], sim, "us", "sim: alpha = 10 us, 1/beta = 12.5 GB/s")):
    run.plot_timeline(ax=ax, unit=unit, title=title)
    scale = 1e3 if unit == "ms" else 1e6
    for e in run.events:                     # a white tick where each step ends
        ax.vlines(e.end * scale, e.rank - 0.4, e.rank + 0.4, color="white", lw=1.5)
plt.show()
steps = real.counters[0].op("sendrecv")
print(f"rank 0: {steps.calls} sendrecv steps, {steps.bytes_sent // KB} KB sent in all "
      f"(model: 2(p-1) = 6 steps of n/p = 1024 KB, 6144 KB)")
assert steps.calls == 6 and steps.bytes_sent == 6 * MB

# %% [markdown]
# Read the timeline left to right. After the barrier each rank does p-1 = 3 `sendrecv` steps of
# reduce-scatter (send one chunk right, receive one from the left, add it in), then 3 steps of
# all-gather (pass the finished chunks along). On the simulated network the steps are identical and
# back to back. On real processes they are uneven: the gaps are the additions, the copies and the two
# shared CPU cores, and one slow rank delays its right neighbour's next step. This lockstep coupling is
# why rings suffer from stragglers, and why later homeworks overlap communication with compute.


# %% [markdown]
# ## 6. Across real node boundaries: the emulated cluster
#
# Everything above ran on one machine's loopback. The kit can also build a small cluster on a Linux
# machine where you are root: each node a network namespace with its own hostname and address, joined
# to a switch by links shaped to a bandwidth (`tc htb`), and the real launchers (`torchrun`,
# `mpirun`, SLURM) across them. From the kit's root:
#
# ```bash
# sudo .venv/bin/python -m minitorch_dist.cluster up --nodes 4 --bandwidth 100mbit
# sudo .venv/bin/python -m minitorch_dist.cluster status        # nodes, shaping, a measured round trip
# sudo .venv/bin/python -m minitorch_dist.cluster torchrun examples/cluster/link_model.py --skip-allreduce
# sudo .venv/bin/python -m minitorch_dist.cluster down
# ```
#
# `examples/cluster/link_model.py` runs homework 1's `ping_pong` between node0 and node1 and fits it with
# `fit_alpha_beta`, then times naive, tree and ring all-reduce on the 4 nodes against the cost model
# with the measured α and the configured β (8 / bits per second). What it gave on a busy 2-core
# machine (load 5-19), with the reference (the README's cluster section has every run):
#
# | what | configured | measured |
# |---|---|---|
# | ping-pong fit, node0 ↔ node1 | 100 Mbit/s | 1/β = 104-108 Mbit/s (5 runs); α = 60-69 µs; 8-512 B one way 73-79 µs |
# | the same | 1 Gbit/s | 1/β = 955 Mbit/s; α = 76 µs |
# | naive / tree / ring all-reduce, 4 nodes, 1 MB | 20 Mbit/s | 1.05 / 1.09-1.14 / 1.07-1.15 × the model |
# | the same, 2 MB | 100 Mbit/s | 1.07-1.09 / 1.12-1.17 / 1.34 × the model |
# | PowerSGD r=2 against dense DDP, 2 nodes, 5 MB of gradients | 100 Mbit/s / 1 Gbit/s / unshaped | 5.1-10.7x / 2.6x as fast / 0.49-0.89x (slower) |
# | HSDP (shards in a node) against FSDP (shards on all 4), 2 nodes of 2 | 100 Mbit/s between nodes | 2.2-2.5x as fast |
#
# What the numbers teach:
#
# - **α is software.** The links add no delay (this kernel has no `netem`); the 65-75 µs are gloo, the
#   kit's framing and Python on each side, as on a real cluster, where α is mostly the stack, not light.
# - **A shaper is not a wire.** `htb` lets the first segment of a burst through at once and charges the
#   link afterwards, so a small message crosses faster than the link allows (at 1 Gbit/s, up to 32 KB
#   crossed at twice the rate). The exercise fits
#   latency-sized (8-512 B) and link-sized messages (30 ms of traffic and up), where that free packet
#   is a rounding error; over homework 1's full 8 B-16 MB sweep, whose fit weighs every size alike, the
#   mid-sized messages pull 1/β up (0.19 GB/s for 0.125 at 1 Gbit/s, 1.5x).
# - **The model's assumptions are network settings.** Before the cluster served small packets (TCP's
#   acknowledgements, gloo's ready-to-receive notices) ahead of data, a ring, which sends and receives on
#   every link at once, waited for them behind its own data: 1.43x the model at 20 Mbit/s, 1.07x after.
#   Before node sockets were capped at 10 ms of the link, a tree's root put its two broadcast messages on
#   its link at once (a send returned as soon as the message fit in the 4 MB socket buffer): 5 message
#   times instead of 4, 1.27x.
# - **Where the model stops: the CPU.** At 100 Mbit/s the ring moves 4 streams through 2 busy cores; the
#   same ring with no shaping took 2/3 of the modelled link time, so the ring ran 1.34x the model there.
# - Without root (or Linux), run the same code on the simulator with the α and β you would have had, as
#   the next cell does.

# %%
import os
import subprocess
import sys

import minitorch_dist
from minitorch_dist.cluster import load as load_cluster
from minitorch_dist.collectives import fit_alpha_beta, ping_pong

KIT = os.path.dirname(os.path.dirname(os.path.abspath(minitorch_dist.__file__)))
CLUSTER = load_cluster()                      # the record of `cluster up` (default name), or None
if CLUSTER is None or CLUSTER.phase != "up" or os.geteuid() != 0:
    print("no emulated cluster is up here (it needs root on Linux); to measure across nodes, from the kit's root:\n"
          "  sudo .venv/bin/python -m minitorch_dist.cluster up --nodes 4 --bandwidth 100mbit\n"
          "and run this notebook as root, or: sudo .venv/bin/python -m minitorch_dist.cluster torchrun "
          "examples/cluster/link_model.py")
else:
    done = subprocess.run([sys.executable, "-m", "minitorch_dist.cluster", "torchrun",
                           os.path.join(KIT, "examples", "cluster", "link_model.py")],
                          cwd=KIT, capture_output=True, text=True, timeout=600)
    print("\n".join(line for line in done.stdout.splitlines()
                    if line.startswith("[node0]") and "CLUSTER-RESULT" not in line) or done.stdout[-3000:])

# The same measurement on the simulator, with what a 100 Mbit/s cluster measured: alpha 70 us, beta 8e-8 s/B
SIM_LINK = SimNetwork(alpha=70e-6, beta=8 / 100e6)
LINK_SIZES = [8, 64, 512, 327680, 655360, 1310720]
sim_times = launch(lambda group: ping_pong(group, LINK_SIZES, repeats=3, warmup=1), 2, backend="sim",
                   network=SIM_LINK)[0]
sim_alpha, sim_beta = fit_alpha_beta(list(sim_times), list(sim_times.values()))
print(f"sim backend, same alpha and beta: fit alpha = {sim_alpha * 1e6:.1f} us, 1/beta = {8 / sim_beta / 1e6:.1f} Mbit/s")
sim_model = {name: cost_model.ALL_REDUCE_ALGORITHMS[name](4, 1 << 20, sim_alpha, sim_beta)
             for name in ("naive", "tree", "ring")}
print("cost model, 4 nodes, 1 MB: " + ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in sim_model.items()))

# %% [markdown]
# ## Summary
#
# - Ranks are processes; all they share is messages. Every collective is a choreography of `send`
#   and `recv`, and a bad choreography deadlocks. The wait-for cycle names the culprits.
# - The α-β model prices each choreography: rounds × α + bytes × β on the critical path.
# - Few rounds win for small messages (butterfly: log₂ p); few bytes win for large ones (ring: 2n,
#   independent of p). The crossover depends on α/β and p.
# - The simulator runs the same code at 1024 ranks and reproduces the formulas; real processes add
#   noise on top, which you will measure in homework 1.

# %%
print(f"notebook ran in {time.perf_counter() - START:.0f} s")
