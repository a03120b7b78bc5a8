# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
#   language_info:
#     name: python
#   title: 'Lecture 3: gradient compression'
# ---

# %% [markdown]
# # Lecture 3: gradient compression
#
# **How to run this notebook.** It imports `minitorch_dist.compression`, the code you write in homework 3,
# and never re-defines it. Your copy shows the outputs of the course's run on the reference
# implementation, so you can read it now. Once your homework passes its public tests, run it yourself
# on *your* code from the kit's root: `.venv/bin/jupyter lab lectures/03_compression.ipynb`.
#
# **Plan.** Data parallelism (lecture 2) all-reduces every gradient, every step: 2(p-1)/p · Ψs bytes per
# rank for Ψ parameters of s bytes. On a slow link that, not the compute, sets the step time. So: send less.
# 1. What a compressor sends and what it loses, on one real gradient of the `CharTransformer`: 8-bit
#    levels, one bit per element, k of n elements, a rank-r approximation.
# 2. Why error feedback is needed: signSGD on a quadratic stalls without it.
# 3. Bytes against loss: the same training run with every compressor, with and without error feedback.
# 4. Why low rank works: the singular values of real gradients.
# 5. Time to a target loss over a fast and a slow link: where compression wins, and where its encoding
#    costs more than the bytes it saves.

# %%
import math
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.ticker import NullFormatter

from minitorch_dist import RankError, SimNetwork, cost_model, launch
from minitorch_dist.compression import (CompressionState, ErrorFeedback, GradBucket, HookedDDP, PowerSGDState,
                                        RandomK, SignQuantizer, TopK, Uint8Quantizer, allreduce_hook,
                                        compressed_all_reduce, compression_hook, powersgd_hook)
from minitorch_dist.data import (CharTokenizer, char_batches, global_batches, load_text, local_part,
                                 make_classification)
from minitorch_dist.models import MLP, CharTransformer

# %matplotlib inline
START = time.perf_counter()
KB, MB = 1024, 1024 ** 2
torch.set_num_threads(1)          # a simulated rank computes on one thread; so does this notebook

# Fail early, and say why, if the packages still hold the stubs.
try:
    launch(lambda group: compressed_all_reduce(torch.ones(4), group, Uint8Quantizer(2)), 2, backend="sim")
    launch(lambda group: HookedDDP(MLP(), group).finish_gradient_synchronization(), 1, backend="sim")
except RankError as err:
    if err.exc_type == "NotImplementedError":
        raise RuntimeError("minitorch_dist.compression (or data_parallel) holds the stubs; run this notebook "
                           "the reference (your copy shows its outputs); write homework 3 first (assignments/hw3/README.md)") from None
    raise

# %% [markdown]
# ## 1. What a compressor sends, and what it loses
#
# A compressor turns a flat gradient g of n elements into a **payload** (a few tensors whose shapes depend
# on n only) and back into an approximation ĝ. The homework's compressors:
#
# | compressor | payload | bytes (float32 gradient) |
# |---|---|---|
# | `Uint8Quantizer(c)` | a level 0..255 per element; a scale and a zero point per chunk of c | n + 8 ⌈n/c⌉ |
# | `SignQuantizer(c)` | one bit per element; the mean \|g\| per chunk | ⌈n/8⌉ + 4 ⌈n/c⌉ |
# | `TopK(k)` | the k largest magnitudes and their int32 indices | 8k |
# | `RandomK(k, seed)` | k values at indices every rank draws alike | 4k |
# | PowerSGD, rank r | per matrix (n × m): P (n × r) and Q (m × r); vectors as they are | (n + m) r per matrix |
#
# Below, one gradient of the provided `CharTransformer` (29 472 parameters, one batch of 16 × 32
# characters) goes through each of them on a one-rank simulated group (p = 1: the "all-reduce" returns
# ĝ itself), and the runtime counts the bytes that went into the collectives.

# %%
TEXT = load_text()
TOKENIZER = CharTokenizer(TEXT)
TOKENS = TOKENIZER.encode(TEXT)
CHAR_MODEL = dict(vocab_size=TOKENIZER.vocab_size, seed=0)       # d_model 32, 4 heads, 2 layers

def char_gradient(model, step, batch=16, seq=32):
    x, y = char_batches(TOKENS, batch, seq, step)
    model.zero_grad()
    F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
    return {name: p.grad.clone() for name, p in model.named_parameters()}

GRAD = char_gradient(CharTransformer(**CHAR_MODEL), step=0)
FLAT = torch.cat([g.reshape(-1) for g in GRAD.values()])          # (29472,) float32
N = FLAT.numel()
COMPRESSORS = {"uint8, chunk 256": Uint8Quantizer(256), "sign, chunk 256": SignQuantizer(256),
               "top-k 10%": TopK(N // 10), "top-k 1%": TopK(N // 100),
               "random-k 10%": RandomK(N // 10, seed=0), "random-k 1%": RandomK(N // 100, seed=0)}

def counted(group):
    ops = group.counters.op
    return ops("all_reduce").tensor_bytes + ops("all_gather").tensor_bytes

def one_gradient(group):
    out = {}
    for name, comp in COMPRESSORS.items():
        before = counted(group)
        approx = compressed_all_reduce(FLAT, group, comp, "sum")
        out[name] = (counted(group) - before, comp.payload_bytes(N), approx)
    for r in (1, 2, 4):                     # PowerSGD: one power step from a random Q, as at its start
        model = CharTransformer(**CHAR_MODEL)
        for name, p in model.named_parameters():
            p.grad = GRAD[name].clone()
        state = PowerSGDState(group, matrix_approximation_rank=r, start_powerSGD_iter=0,
                              use_error_feedback=False, warm_start=False)
        before = counted(group)
        approx = powersgd_hook(state, GradBucket(0, list(model.parameters()), 1)).wait()
        formula = sum(4 * ((a + b) * min(a, b, r) if (a + b) * min(a, b, r) * 2 < a * b else a * b)
                      for a, b in ((g.shape[0], g[0].numel() if g.dim() > 1 else 1) for g in GRAD.values()))
        out[f"PowerSGD rank {r}"] = (counted(group) - before, formula, approx)
    return out

ONE = launch(one_gradient, 1, backend="sim")[0]
RESULTS = {}
print(f"one gradient of {N} float32 = {4 * N / KB:.1f} KB\n")
print(f"{'compressor':>17} {'bytes':>7} {'formula':>8} {'x smaller':>10} {'|g - ĝ| / |g|':>15}")
for name, (sent, formula, approx) in ONE.items():
    error = ((approx - FLAT).norm() / FLAT.norm()).item()
    RESULTS[name] = (sent, error)
    print(f"{name:>17} {sent:>7} {formula:>8} {4 * N / sent:>10.1f} {error:>15.3f}")
    assert sent == formula, name
print("bytes counted by the runtime equal the payload formula for every compressor")

fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
for name, (sent, error) in RESULTS.items():
    color = "tab:blue" if "PowerSGD" in name else "tab:orange" if "-k" in name else "tab:green"
    ax.plot(sent / KB, error, "o", color=color)
    ax.annotate(name, (sent / KB, error), textcoords="offset points", xytext=(5, 4), fontsize=8)
ax.axvline(4 * N / KB, color="k", ls=":", lw=1)
ax.text(4 * N / KB, 0.5, " dense", fontsize=8)
ax.set(xscale="log", xlabel="KB sent by one rank (one gradient)", ylabel="relative error |g - ĝ| / |g|",
       title="one CharTransformer gradient, p = 1", ylim=(-0.03, 1.1))
plt.show()

# %% [markdown]
# Four observations.
#
# - **8 bits are almost free**: 4x fewer bytes for about 1% error. Each chunk of 256 elements gets its own
#   range, so a few large elements elsewhere do not wash out the small ones.
# - **One bit is a direction, not a value**: 28x fewer bytes, but every element of a chunk gets the same
#   magnitude, so the error is nearly as large as the gradient (0.9).
# - **Top-k beats random-k** at the same k: gradients are heavy-tailed, so the k largest carry much more of
#   the norm than k random ones. Random-k keeps about k/n of the squared norm: its error is close to
#   √(1 - k/n), near 1 at k = 1% (it would need rescaling by n/k to be unbiased, and then its variance explodes).
# - **PowerSGD**: rank 1 already sends 14x fewer bytes, with an error of about 0.3, like top-k 1%. That is
#   one power step from a random start; with warm start (homework 3.4) Q keeps improving from step to step,
#   toward the best rank-r approximation of section 4.
#
# Every compressor but random-k (rescaled) is **biased**: the average of ĝ over steps is not g. Section 2
# shows what that does to training, and the fix.
#
# ## 2. Error feedback: what is dropped comes back later
#
# Error feedback keeps, per tensor, the residual e of what compression dropped and adds it to the next
# gradient:
#
# $$ \delta_t = g_t + e_t, \qquad \text{send } C(\delta_t), \qquad e_{t+1} = \delta_t - C(\delta_t). $$
#
# Nothing is lost, only delayed: after T steps, the sum of everything sent plus the last residual equals the
# sum of the gradients. The classic failure it fixes (Karimireddy et al. 2019, *Error feedback fixes
# SignSGD*): 4 ranks, each with its own quadratic ½ Σᵢ aᵢ (xᵢ - c_{r,i})², whose average has its minimum at
# the mean of the centres. Each rank's gradient goes through `SignQuantizer` (one scale for the 16
# elements) and the ranks average; the step size decays by 2% per step.

# %%
DIM, Q_STEPS, Q_LR, DECAY, Q_RANKS = 16, 150, 0.3, 0.98, 4

def quadratic(rank):
    gen = torch.Generator().manual_seed(7)
    a = 0.5 + 1.5 * torch.rand(DIM, generator=gen, dtype=torch.float64)          # curvatures, every rank
    center = 2.0 * torch.randn(DIM, generator=gen, dtype=torch.float64)
    own = torch.randn(DIM, generator=torch.Generator().manual_seed(100 + rank), dtype=torch.float64)
    return a, center + own                                                     # this rank's centre

X_STAR = sum(quadratic(r)[1] for r in range(Q_RANKS)) / Q_RANKS                 # the minimum of the mean

def descend(group, mode):
    a, c = quadratic(group.rank)
    x, ef, distances = torch.zeros(DIM, dtype=torch.float64), ErrorFeedback(SignQuantizer(DIM)), []
    for t in range(Q_STEPS):
        g = a * (x - c)
        if mode == "exact average":
            step = group.all_reduce(g.clone(), "avg")
        elif mode == "signSGD":
            step = compressed_all_reduce(g, group, SignQuantizer(DIM))
        else:
            step = ef.all_reduce("x", g, group)
        x = x - Q_LR * DECAY ** t * step
        distances.append(((x - X_STAR).norm() / X_STAR.norm()).item())
    return distances

Q_CURVES = {mode: launch(descend, Q_RANKS, args=(mode,), backend="sim", trace=False)[0]
            for mode in ("exact average", "signSGD", "signSGD + error feedback")}

fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
for (mode, dist), color in zip(Q_CURVES.items(), ("k", "tab:red", "tab:green")):
    ax.plot(dist, color=color, label=mode)
ax.set(yscale="log", xlabel="step", ylabel="|x - x*| / |x*|", title=f"{Q_RANKS} ranks, one quadratic each")
ax.legend()
plt.show()
for mode, dist in Q_CURVES.items():
    print(f"{mode:>25}: distance to the minimum after {Q_STEPS} steps {dist[-1]:.1e}")
assert Q_CURVES["signSGD"][-1] > 20 * Q_CURVES["signSGD + error feedback"][-1]


# %% [markdown]
# Plain signSGD stops far from the minimum. Near x*, the ranks' gradients in a coordinate have different
# signs; each rank sends ± its mean |g|, and the average of those is not the average gradient: it vanishes
# where the ranks' *signs and scales* balance, which is not where their gradients do. The step size keeps
# shrinking, so x freezes there. With error feedback, the part each rank did not send piles up in its
# residual until it changes the sign that rank sends: over time, every rank sends its whole gradient,
# and x goes to the true minimum.
#
# The residual also keeps exact books. Error feedback with top-k in float64: after 50 steps, the sum of
# what was applied plus the residual against the sum of the inputs.

# %%
def bookkeeping(group, steps=50, n=1000):
    ef, applied, inputs = ErrorFeedback(TopK(10)), torch.zeros(n, dtype=torch.float64), torch.zeros(n, dtype=torch.float64)
    gen = torch.Generator().manual_seed(group.rank)
    for _ in range(steps):
        g = torch.randn(n, generator=gen, dtype=torch.float64)
        applied += ef.compressor.decompress(ef.compress("w", g), n, g.dtype)
        inputs += g
    return (applied + ef.error("w") - inputs).abs().max().item(), ef.error("w").norm().item()

gap, residual = launch(bookkeeping, 1, backend="sim")[0]
print(f"|sum applied + residual - sum of inputs| = {gap:.1e}   (the residual itself has norm {residual:.1f})")
assert gap < 1e-9

# %% [markdown]
# ## 3. Bytes against loss
#
# Now a real training run. An `MLP` (16 → 128 → 128 → 4, 19 204 parameters, 75 KB) learns the provided
# classification data on **4 simulated ranks**, with `HookedDDP` (homework 3.5: homework 2's bucketed DDP,
# one bucket here, whose bucket goes through a communication hook): the same batches, plain SGD
# (learning rate 0.3), 100 steps, for each compressor. The loss is the full data set's, evaluated every
# 5 steps. The bytes are what the runtime counted going into rank 0's collectives in the last step.
# Three compressors also run **without** error feedback.

# %%
P, BATCH, LR, STEPS, EVERY = 4, 64, 0.3, 100, 5
MLP_SIZE = dict(d_hidden=128, depth=2)
X, Y = make_classification(n=512)
N_MLP = sum(p.numel() for p in MLP(**MLP_SIZE).parameters())
BATCHES = [b for epoch in range(STEPS * BATCH // len(X) + 1) for b in global_batches(len(X), BATCH, epoch=epoch)]

def powersgd(rank, error_feedback=True):
    return lambda group: (PowerSGDState(group, matrix_approximation_rank=rank, start_powerSGD_iter=2,
                                        use_error_feedback=error_feedback),
                          powersgd_hook)

def compressed(make, error_feedback=False):
    return lambda group: (CompressionState(group, make(), error_feedback=error_feedback), compression_hook)

METHODS = {                                    # name -> a function group -> (state, hook); None: plain
    "dense": None,
    "uint8": compressed(lambda: Uint8Quantizer(256)),
    "sign + EF": compressed(lambda: SignQuantizer(256), error_feedback=True),
    "top-k 1% + EF": compressed(lambda: TopK(N_MLP // 100), error_feedback=True),
    "PowerSGD r=1 + EF": powersgd(1),
    "PowerSGD r=2 + EF": powersgd(2),
    "top-k 1%, no EF": compressed(lambda: TopK(N_MLP // 100)),
    "sign, no EF": compressed(lambda: SignQuantizer(256)),
    "PowerSGD r=1, no EF": powersgd(1, error_feedback=False),
}

def full_loss(model):
    with torch.no_grad():
        return F.cross_entropy(model(X), Y).item()

def build(group, method):
    model = HookedDDP(MLP(**MLP_SIZE), group)            # one bucket: the whole model (25 MB buckets)
    if METHODS[method] is not None:
        model.register_comm_hook(*METHODS[method](group))
    return model, torch.optim.SGD(model.parameters(), lr=LR)

def train(group, method):
    model, opt = build(group, method)
    losses = []
    for step in range(STEPS):
        mine = local_part(BATCHES[step], group.rank, group.size)
        opt.zero_grad()
        before = counted(group)
        F.cross_entropy(model(X[mine]), Y[mine]).backward()     # the hook runs when the bucket is full
        model.finish_gradient_synchronization()
        sent = counted(group) - before
        opt.step()
        if group.rank == 0 and (step + 1) % EVERY == 0:
            losses.append(full_loss(model.module))
    return np.array(losses), sent

t0 = time.perf_counter()
RUNS = {method: launch(train, P, args=(method,), backend="sim", trace=False)[0] for method in METHODS}
print(f"{len(METHODS)} trainings on {P} simulated ranks in {time.perf_counter() - t0:.1f} s of wall time\n")
print(f"bytes per step counted by the runtime (rank 0, last step) and the loss after {STEPS} steps:")
print(f"{'method':>20} {'bytes':>7} {'x smaller':>10} {'loss':>7}")
for method, (losses, sent) in RUNS.items():
    print(f"{method:>20} {sent:>7} {4 * N_MLP / sent:>10.1f} {losses[-1]:>7.3f}")

# %%
COLORS = {"dense": "k", "uint8": "tab:purple", "sign + EF": "tab:green",
          "top-k 1% + EF": "tab:red", "PowerSGD r=1 + EF": "tab:cyan", "PowerSGD r=2 + EF": "tab:blue"}
NO_EF = {"top-k 1%, no EF": "top-k 1% + EF", "sign, no EF": "sign + EF", "PowerSGD r=1, no EF": "PowerSGD r=1 + EF"}
steps = EVERY * np.arange(1, STEPS // EVERY + 1)

fig, axes = plt.subplots(1, 2, figsize=(12, 4.3), layout="constrained")
for method, (losses, sent) in RUNS.items():
    color = COLORS.get(method) or COLORS[NO_EF[method]]
    style = "--" if method in NO_EF else "-"
    axes[0].plot(steps, losses, style, color=color, label=method)
    axes[1].plot(sent / KB, losses[-1], "o" if method not in NO_EF else "x", color=color, ms=8)
    axes[1].annotate(method, (sent / KB, losses[-1]), textcoords="offset points", xytext=(5, 3), fontsize=8)
for plain, with_ef in NO_EF.items():
    axes[1].annotate("", xy=(RUNS[with_ef][1] / KB, RUNS[with_ef][0][-1]),
                     xytext=(RUNS[plain][1] / KB, RUNS[plain][0][-1]),
                     arrowprops=dict(arrowstyle="->", color="0.5", lw=1))
axes[0].set(yscale="log", xlabel="step", ylabel="full-data loss", title=f"{P} ranks, SGD, lr {LR}")
axes[0].legend(fontsize=7, ncol=2)
axes[1].set(xscale="log", yscale="log", xlabel="KB sent per rank and step",
            ylabel=f"loss after {STEPS} steps", title="bytes against loss (arrows: adding error feedback)")
for axis in (axes[0].yaxis, axes[1].xaxis, axes[1].yaxis):
    axis.set_minor_formatter(NullFormatter())
plt.show()
final = {method: losses[-1] for method, (losses, _) in RUNS.items()}
assert all(final[plain] > 1.5 * final[with_ef] for plain, with_ef in NO_EF.items())
assert final["PowerSGD r=2 + EF"] < 1.5 * final["dense"] and RUNS["PowerSGD r=2 + EF"][1] < RUNS["dense"][1] / 8

# %% [markdown]
# What the runs say:
#
# - **uint8** follows the dense curve step for step, at a quarter of the bytes.
# - **With error feedback**, the heavily compressed runs (sign: 28x fewer bytes; top-k 1%: 50x; PowerSGD:
#   12 to 24x) train about as fast as dense on this small problem, ending within a fifth of its loss. On
#   harder problems the gap to dense is larger and grows as k or r shrink: the points then trace a
#   frontier, bytes against loss (homework 3's notebook sweeps it).
# - **Without error feedback** (dashed) every one of them falls behind, and PowerSGD rank 1 nearly stalls:
#   the rank-1 approximation drops the same directions of the gradient every step, so those directions
#   are never trained. With error feedback they pile up in the residual until they are the largest and
#   get sent.
#
# ## 4. Why low rank works: the spectrum of real gradients
#
# PowerSGD bets that a gradient matrix is close to a matrix of rank r ≪ min(n, m). The gradient of a
# linear layer is a sum over the batch's tokens of outer products, G = Σₜ δₜ xₜᵀ (backpropagated error
# times input), and those inputs and errors are strongly correlated: they live mostly in a few directions.
# The singular values σ₁ ≥ σ₂ ≥ ... of the CharTransformer's gradient matrices say how few: the best
# rank-r approximation keeps the share Σ_{i≤r} σᵢ² / Σᵢ σᵢ² of the squared norm (Eckart-Young). Below, at
# initialisation and after 60 Adam steps, against a random Gaussian matrix of the same shape.

# %%
MATRICES = ["blocks.0.attn.qkv.weight", "blocks.0.fc.weight", "blocks.1.fc_proj.weight", "tok_emb.weight"]
model = CharTransformer(**CHAR_MODEL)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(60):
    char_gradient(model, step=1000 + step)
    opt.step()
TRAINED = char_gradient(model, step=0)

def energy(s, r):
    return (s[:r] ** 2).sum().item() / (s ** 2).sum().item()

spectra = {}
for name in MATRICES:
    shape = GRAD[name].shape
    noise = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    spectra[name] = {"init": torch.linalg.svdvals(GRAD[name]), "after 60 steps": torch.linalg.svdvals(TRAINED[name]),
                     "random": torch.linalg.svdvals(noise)}

fig, axes = plt.subplots(1, len(MATRICES), figsize=(14, 3.6), layout="constrained", sharey=True)
for ax, name in zip(axes, MATRICES):
    for label, style in (("init", "o-"), ("after 60 steps", "s-"), ("random", "k:")):
        s = spectra[name][label]
        ax.plot(np.arange(1, len(s) + 1), (s / s[0]).numpy(), style, ms=3, label=label)
    ax.set(yscale="log", xlabel="i", title=f"{name}\n{tuple(GRAD[name].shape)}", ylim=(1e-4, 1.5))
axes[0].set_ylabel("σᵢ / σ₁")
axes[0].legend(fontsize=8)
plt.show()

print(f"{'matrix':>25} {'':>15} " + " ".join(f"{'rank ' + str(r):>7}" for r in (1, 2, 4, 8)))
for name in MATRICES:
    for label, s in spectra[name].items():
        print(f"{name if label == 'init' else '':>25} {label:>15} "
              + " ".join(f"{energy(s, r):>7.1%}" for r in (1, 2, 4, 8)))
print("(energy in the top r singular values: the share of the squared norm a rank-r approximation keeps)")
low = [energy(spectra[name]["init"], 2) for name in MATRICES]
assert min(low) > 2 * max(energy(spectra[name]["random"], 2) for name in MATRICES)

# %% [markdown]
# The gradients' singular values fall off fast: at initialisation by an order of magnitude within about
# ten, after 60 steps by two to three orders within the first five, while a random matrix's hardly fall at
# all. Rank 2 keeps three quarters or more of a real gradient's squared norm (nearly all of it after a
# few steps), and about an eighth of a random one's. What the top directions do not catch is exactly what error feedback carries over to the next step,
# and warm start lets the power iteration track the top subspace as it drifts during training.
#
# ## 5. Time to a target loss: a fast and a slow link
#
# Fewer bytes are not free: compressing costs time (top-k sorts n elements, PowerSGD multiplies every matrix
# twice and orthogonalizes), and a compressor may need more steps to reach the same loss. Whether it wins
# is a race between
#
# $$ t_\text{step} = t_\text{compute} + t_\text{encode} + t_\text{comm}(\alpha, \beta) $$
#
# and the number of steps to the target. We measure on this CPU the compute of one rank's step and the
# hook's own work (its time on one rank, where nothing travels), charge both with `group.compute` on the
# `sim` backend, and let the simulated network time the collectives over two links:
#
# - **fast**: α = 2 µs, 150 GB/s, like NVLink inside a node;
# - **slow**: α = 100 µs, 100 Mbit/s, like a congested link between machines or over the internet.

# %%
LINKS = {"fast": SimNetwork(alpha=2e-6, beta=1 / 150e9), "slow": SimNetwork(alpha=1e-4, beta=8 / 100e6)}
TARGET = 0.3
SHOWN = ["dense", "uint8", "sign + EF", "top-k 1% + EF", "PowerSGD r=1 + EF", "PowerSGD r=2 + EF"]

def measure(group, method, reps=12):
    # compute: forward + backward of one rank's batch; encode: one call of the hook, at p = 1
    model = MLP(**MLP_SIZE)
    state, hook = METHODS[method](group) if METHODS[method] else (group, allreduce_hook)
    mine = local_part(BATCHES[0], 0, P)
    compute, encode = [], []
    for _ in range(reps):
        model.zero_grad()
        t = time.perf_counter()
        F.cross_entropy(model(X[mine]), Y[mine]).backward()
        compute.append(time.perf_counter() - t)
        bucket = GradBucket(0, list(model.parameters()), 1)
        t = time.perf_counter()
        hook(state, bucket).wait()
        encode.append(time.perf_counter() - t)
    return float(np.median(compute)), float(np.median(encode[3:]))   # PowerSGD compresses from call 3

MEASURED = {method: launch(measure, 1, args=(method,), backend="sim", trace=False)[0] for method in SHOWN}
COMPUTE = min(c for c, _ in MEASURED.values())
ENCODE = {method: e for method, (_, e) in MEASURED.items()}

def timed_steps(group, method, steps=4):
    # simulated seconds of the last of `steps` steps (PowerSGD compresses from step 3)
    model, opt = build(group, method)
    for step in range(steps):
        mine = local_part(BATCHES[step], group.rank, group.size)
        group.barrier()
        start = group.now()
        group.compute(COMPUTE + ENCODE[method])
        opt.zero_grad()
        F.cross_entropy(model(X[mine]), Y[mine]).backward()
        model.finish_gradient_synchronization()
        opt.step()
        seconds = group.now() - start
    return seconds

STEP_TIME = {link: {m: launch(timed_steps, P, args=(m,), backend="sim", network=net, trace=False)[0]
                    for m in SHOWN} for link, net in LINKS.items()}

def steps_to(losses, target=TARGET):
    reached = np.nonzero(losses <= target)[0]
    return EVERY * (reached[0] + 1) if len(reached) else math.inf

print(f"compute {COMPUTE * 1e3:.2f} ms per step and rank (measured); target loss {TARGET}\n")
print(f"{'method':>18} {'encode ms':>10} {'steps':>6} {'fast: ms/step':>14} {'to target':>10} "
      f"{'slow: ms/step':>14} {'to target':>10}")
TIME_TO_TARGET = {link: {} for link in LINKS}
for m in SHOWN:
    n_steps = steps_to(RUNS[m][0])
    row = f"{m:>18} {ENCODE[m] * 1e3:>10.3f} {n_steps:>6}"
    for link in LINKS:
        TIME_TO_TARGET[link][m] = n_steps * STEP_TIME[link][m]
        row += f" {STEP_TIME[link][m] * 1e3:>14.3f} {TIME_TO_TARGET[link][m]:>9.3f}s"
    print(row)
for link in LINKS:
    best = min(TIME_TO_TARGET[link], key=TIME_TO_TARGET[link].get)
    if best == "dense":
        second = min((m for m in SHOWN if m != "dense"), key=TIME_TO_TARGET[link].get)
        print(f"time to reach loss {TARGET} over the {link} link: dense is fastest; the best compressor, "
              f"{second}, takes {TIME_TO_TARGET[link][second] / TIME_TO_TARGET[link]['dense']:.1f}x as long")
    else:
        print(f"time to reach loss {TARGET} over the {link} link: {best} is fastest, "
              f"{TIME_TO_TARGET[link]['dense'] / TIME_TO_TARGET[link][best]:.1f}x faster than dense")
assert min(TIME_TO_TARGET["fast"], key=TIME_TO_TARGET["fast"].get) == "dense"
assert min(TIME_TO_TARGET["slow"].values()) < TIME_TO_TARGET["slow"]["dense"] / 2


# %% [markdown]
# Over the fast link, communication takes a few microseconds: nothing to save, and every compressor *adds*
# its encoding (plus, for PowerSGD, three all-reduces instead of one, each paying the latency). Dense wins.
# Over the slow link, the dense all-reduce of 75 KB takes about 10 ms, forty times the compute, and sign
# and PowerSGD with error feedback win several-fold even though they need a few more steps. Look at the
# encoding column: the homework's top-k sorts all n elements (for its deterministic tie-break), several
# times the compute of this small model's step; a partial selection such as `torch.topk` is far cheaper.
# An expensive encoder can lose even where the bytes it saves are worth a lot.
#
# In between? The simulated network's collectives cost exactly the cost model's formulas, so we can count
# a step's collectives once (calls and bytes) and price them for any link. Below, time to the target
# against the link's bandwidth (α = 20 µs), with the measured compute and encode times.

# %%
def collectives(group, method):
    # calls and bytes of rank 0's collectives in a compressed step (the 4th)
    model, opt = build(group, method)
    for step in range(4):
        mine = local_part(BATCHES[step], group.rank, group.size)
        ops = group.counters.op
        before = {op: (ops(op).calls, ops(op).tensor_bytes) for op in ("all_reduce", "all_gather")}
        opt.zero_grad()
        F.cross_entropy(model(X[mine]), Y[mine]).backward()
        model.finish_gradient_synchronization()
        opt.step()
    return {op: (ops(op).calls - c, ops(op).tensor_bytes - b) for op, (c, b) in before.items()}

COUNTS = {m: launch(collectives, P, args=(m,), backend="sim", trace=False)[0] for m in SHOWN}

def predicted_step(method, alpha, beta):
    (ar_calls, ar_bytes), (ag_calls, ag_bytes) = COUNTS[method]["all_reduce"], COUNTS[method]["all_gather"]
    comm = (ar_calls * cost_model.ring_all_reduce(P, 0, alpha, 0) + cost_model.ring_all_reduce(P, ar_bytes, 0, beta)
            + ag_calls * cost_model.ring_all_gather(P, 0, alpha, 0)
            + cost_model.ring_all_gather(P, P * ag_bytes, 0, beta))       # an all-gather's result is p inputs
    return COMPUTE + ENCODE[method] + comm

for link, net in LINKS.items():                    # the formula is the simulator, to rounding
    for m in SHOWN:
        assert math.isclose(predicted_step(m, net.alpha, net.beta), STEP_TIME[link][m], rel_tol=1e-6), (link, m)

BANDWIDTHS = np.logspace(7, 12, 60) / 8            # 10 Mbit/s .. 1 Tbit/s, in bytes per second
fig, ax = plt.subplots(figsize=(8, 4.5), layout="constrained")
for m in SHOWN:
    n_steps = steps_to(RUNS[m][0])
    times = [n_steps * predicted_step(m, 20e-6, 1 / bw) for bw in BANDWIDTHS]
    ax.plot(BANDWIDTHS * 8, times, "-" if m == "dense" else "--", color=COLORS[m], label=f"{m} ({n_steps} steps)")
crossings = {}
for m in SHOWN[1:]:
    faster = [bw for bw in BANDWIDTHS if steps_to(RUNS[m][0]) * predicted_step(m, 20e-6, 1 / bw)
              < steps_to(RUNS["dense"][0]) * predicted_step("dense", 20e-6, 1 / bw)]
    crossings[m] = max(faster) * 8 if faster else 0.0
ax.set(xscale="log", yscale="log", xlabel="link bandwidth (bit/s), α = 20 µs",
       ylabel=f"seconds to loss {TARGET}", title=f"time to target, {P} ranks, measured compute and encode")
ax.legend(fontsize=8)
plt.show()
print("compression beats dense below:")
for m, bits in crossings.items():
    print(f"{m:>18}: {bits / 1e9:8.3f} Gbit/s" if bits else f"{m:>18}: never, on this range")

# %% [markdown]
# Read the crossings as a rule of thumb. Compression pays when the time it saves on the wire,
# roughly 2(p-1)/p · (dense bytes - compressed bytes) · β, is more than its encoding time plus the
# extra latencies it adds, and when the extra steps it needs to converge do not eat the gain. For this
# 75 KB model that happens only below about a gigabit per second; for a real model of 1 GB of gradients the
# bytes grow 10 000-fold while a GPU's encoding time grows much less, so the crossing moves to tens of
# Gbit/s: the range of the Ethernet between the nodes of a cluster, not of NVLink inside one.
#
# ## Summary
#
# - Quantization (8 bits: 4x, 1 bit: 30x), sparsification (top-k, random-k) and low rank (PowerSGD) send
#   less; all but random-k are biased, and the quantizers and top-k must be *gathered*, not summed, since
#   each rank's payload means something different.
# - Error feedback carries over what compression dropped: the books balance exactly, and biased compressors
#   (signSGD, top-k, rank 1) train where they otherwise stall or lag.
# - Real gradient matrices are nearly low-rank: their singular values fall off within a few, which is why
#   PowerSGD at rank 1 to 4 works.
# - Compression wins on slow links and loses on fast ones: t_compute + t_encode + t_comm, times the number
#   of steps, decides.

# %%
print(f"notebook ran in {time.perf_counter() - START:.0f} s")
