# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
#   language_info:
#     name: python
#   title: 'Lecture 4: tensor parallelism (Megatron-LM)'
# ---

# %% [markdown]
# # Lecture 4: tensor parallelism (Megatron-LM)
#
# **How to run this notebook.** It imports `minitorch_dist.tensor_parallel`, the code you write in homework 4,
# and never re-defines it. Your copy shows the outputs of the course's run on the reference
# implementation, so you can read it now. Once your homework passes its public tests, run it yourself
# on *your* code from the kit's root: `.venv/bin/jupyter lab lectures/04_tensor_parallel.ipynb` (a full run takes about a minute on a
# 2-core laptop).
#
# **Plan.** Data parallelism (lecture 2) keeps a whole replica of the model on every rank. When one layer's
# weights, gradients and optimizer state no longer fit on one device, or one device computes a layer too
# slowly, we split **inside** the layer: tensor (intra-layer) parallelism, as in Megatron-LM
# (Shoeybi et al. 2019).
# 1. The matrix split by hand, with small explicit tensors: why "columns, then rows" needs no
#    communication in between.
# 2. The two conjugate operators f and g, and where they sit in the MLP and in attention.
# 3. A real run: the tensor-parallel block on gloo processes against the dense block.
# 4. Counting: one all-reduce forward and one backward per MLP and per attention.
# 5. Memory and communication per layer, from the cost model.
# 6. Tensor against data parallelism: bytes per step.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.patches import FancyBboxPatch
from torch import nn

from minitorch_dist import RankError, cost_model, launch
from minitorch_dist.models import CharTransformer
from minitorch_dist.tensor_parallel import (ParallelBlock, ParallelCharTransformer, ParallelMLP,
                                            ParallelSelfAttention)

# %matplotlib inline
START = time.perf_counter()
KB, MB, GB = 1024, 1024 ** 2, 1024 ** 3
torch.set_printoptions(precision=3, sci_mode=False, linewidth=110)

# Fail early, and say why, if minitorch_dist.tensor_parallel still holds the HW4 stubs.
try:
    launch(lambda group: ParallelMLP(nn.Linear(4, 8), nn.Linear(8, 4), group)(torch.ones(1, 4)), 2,
           backend="sim")
except RankError as err:
    if err.exc_type == "NotImplementedError":
        raise RuntimeError("minitorch_dist.tensor_parallel holds the HW4 stubs; run this notebook "
                           "through the reference (your copy shows its outputs); write homework 4 first (assignments/hw4/README.md)") from None
    raise

# %% [markdown]
# ## 1. The MLP split by hand
#
# A transformer's MLP is Y = GELU(X A) B, with X of shape (tokens, h), A of shape (h, 4h) and B of shape
# (4h, h). Two ranks each hold half of A and half of B. Which halves?
#
# **Split A by columns**, A = [A₀ | A₁]. Then X A = [X A₀ | X A₁]: rank r computes its block of columns
# from the full X, alone. **GELU acts on each element**, so GELU([Z₀ | Z₁]) = [GELU(Z₀) | GELU(Z₁)]: still
# alone. **Split B by rows**, B = [B₀ ; B₁], matching A's columns. Then
#
# $$ Y = [H_0 \mid H_1] \begin{bmatrix} B_0 \\ B_1 \end{bmatrix} = H_0 B_0 + H_1 B_1 $$
#
# Each rank computes its partial product H_r B_r alone; **one sum** over the ranks (an all-reduce) gives
# Y. Small explicit tensors, two "ranks" as two Python variables:

# %%
gen = torch.Generator().manual_seed(0)
X = torch.tensor([[1., 0., -1., 2.],
                  [0., 1., 1., -1.]], dtype=torch.float64)              # (tokens=2, h=4)
A = torch.randint(-2, 3, (4, 8), generator=gen).double() / 2            # (h, 4h) = (4, 8)
B = torch.randint(-2, 3, (8, 4), generator=gen).double() / 2            # (4h, h) = (8, 4)
Y_dense = F.gelu(X @ A) @ B                                              # (2, 4)

A_cols = A.chunk(2, dim=1)          # A0 = A[:, :4], A1 = A[:, 4:]   rank r keeps columns of A
B_rows = B.chunk(2, dim=0)          # B0 = B[:4, :], B1 = B[4:, :]   and the matching rows of B
H = [F.gelu(X @ A_cols[r]) for r in range(2)]                            # (2, 4) each, no communication
partial = [H[r] @ B_rows[r] for r in range(2)]                           # (2, 4) each: partial sums of Y

print("A =\n", A, "\nB =\n", B)
print("\nX A (dense)         =\n", X @ A)
print("[X A0 | X A1]       =\n", torch.cat([X @ A_cols[0], X @ A_cols[1]], dim=1))
print("\nY (dense)           =\n", Y_dense)
print("rank 0's partial    =\n", partial[0])
print("rank 1's partial    =\n", partial[1])
print(f"\nmax |partial0 + partial1 - Y| = {(partial[0] + partial[1] - Y_dense).abs().max().item():.1e}")
assert torch.allclose(partial[0] + partial[1], Y_dense, rtol=0, atol=1e-12)

# %% [markdown]
# Neither partial is Y; their sum is (up to rounding). Why not the other way round? **Split A by rows**
# (and X by columns): X A = X₀ A₀ + X₁ A₁ is then a *sum* of partials, and GELU of a sum is not the sum of
# the GELUs. The ranks would have to all-reduce **before** the GELU, and again after B: two
# all-reduces per MLP instead of one.

# %%
X_cols = X.chunk(2, dim=1)
A_rows = A.chunk(2, dim=0)
wrong = F.gelu(X_cols[0] @ A_rows[0]) + F.gelu(X_cols[1] @ A_rows[1])   # GELU on each partial sum
right = F.gelu(X_cols[0] @ A_rows[0] + X_cols[1] @ A_rows[1])           # GELU after the sum (= GELU(X A))
print(f"rows first: max |GELU(X0 A0) + GELU(X1 A1) - GELU(X A)| = {(wrong - right).abs().max().item():.3f}")
assert (wrong - right).abs().max() > 0.1

# %% [markdown]
# **A note on PyTorch's layout.** `nn.Linear(h, 4h)` stores `weight` as (out, in) = Aᵀ and computes
# x Aᵀ... so "split A by columns" means "split `weight` by **rows**" (the output features), and "split B by
# rows" means "split `weight` along its **columns**" (the input features). That is what the homework's
# `ColumnParallelLinear` and `RowParallelLinear` do: they are named for the math, not for the tensor.

# %%
fc, fc_proj = nn.Linear(4, 16), nn.Linear(16, 4)
print("fc.weight", tuple(fc.weight.shape), "-> column-parallel on 2 ranks keeps", (8, 4), "of it (output rows)")
print("fc_proj.weight", tuple(fc_proj.weight.shape), "-> row-parallel on 2 ranks keeps", (4, 8),
      "of it (input columns)")

# %% [markdown]
# ## 2. f and g: the two conjugate operators
#
# Where is the communication, forward **and** backward?
#
# - Before the column-parallel layer every rank needs the full X. In the forward pass X is already on
#   every rank: nothing to do. In the backward pass, X fed p branches (one per rank), so its gradient is the
#   **sum** of the p branches' gradients: an all-reduce. Megatron calls this operator **f**:
#   *forward: identity | backward: all-reduce*.
# - After the row-parallel layer the partial sums are added: an all-reduce. In the backward pass the
#   gradient of a sum with respect to each term is the same dY, which every rank already has: nothing to do.
#   This is **g**: *forward: all-reduce | backward: identity*.
#
# The backward half of f, checked on the same small tensors: each rank's own gradient with respect to X is
# only part of the dense one; their sum is all of it.

# %%
dY = torch.randn(2, 4, generator=gen, dtype=torch.float64)              # the gradient arriving at Y
Xd = X.clone().requires_grad_()
(F.gelu(Xd @ A) @ B).backward(dY)                                        # dense dL/dX
grads = []
for r in range(2):
    Xr = X.clone().requires_grad_()
    (F.gelu(Xr @ A_cols[r]) @ B_rows[r]).backward(dY)                   # g's backward: the same dY on each rank
    grads.append(Xr.grad)
print(f"max |dX on rank 0 - dense dX|        = {(grads[0] - Xd.grad).abs().max().item():.3f}")
print(f"max |dX0 + dX1 - dense dX| (f's sum) = {(grads[0] + grads[1] - Xd.grad).abs().max().item():.1e}")
assert torch.allclose(grads[0] + grads[1], Xd.grad, rtol=0, atol=1e-12)


# %% [markdown]
# Attention splits the same way, by **heads**: the fused q, k, v projection is column-parallel (rank r
# keeps the columns of its nh/p heads, in q, in k and in v), each head's softmax(q kᵀ) v needs only that
# head, and the output projection is row-parallel. One f before, one g after. A transformer block (drawn
# below for 2 ranks) is f, attention, g, then f, MLP, g: **two all-reduces forward and two backward**.

# %%
def box(ax, x, y, text, color, width=1.45, height=0.9):
    ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height, boxstyle="round,pad=0.04",
                                fc=color, ec="k", lw=1))
    ax.text(x, y, text, ha="center", va="center", fontsize=8.5)

def arrow(ax, x0, y0, x1, y1):
    ax.annotate("", xy=(x1, y1), xytext=(x0, y0), arrowprops=dict(arrowstyle="-|>", lw=1.1, color="0.25"))

def draw_tp_layer(ax, title, lanes):
    # X -> f -> per-rank stages -> g -> Y; lanes[r] = the labels of rank r's stages
    xs = [1.9 + 1.8 * (k + 1) for k in range(len(lanes[0]))]
    x_g, x_y = xs[-1] + 1.9, xs[-1] + 3.6
    box(ax, 0, 0, "X\n(b, s, h)\non every rank", "0.92")
    box(ax, 1.9, 0, "f", "tab:orange", width=0.8)
    ax.text(1.9, -0.75, "fwd: identity\nbwd: all-reduce", ha="center", va="top", fontsize=8, color="tab:orange")
    box(ax, x_g, 0, "g", "tab:green", width=0.8)
    ax.text(x_g, -0.75, "fwd: all-reduce\nbwd: identity", ha="center", va="top", fontsize=8, color="tab:green")
    box(ax, x_y, 0, "Y\n(b, s, h)\non every rank", "0.92")
    arrow(ax, 0.73, 0, 1.5, 0)
    arrow(ax, x_g + 0.4, 0, x_y - 0.73, 0)
    for r, (y, stages) in enumerate(zip((1.4, -2.2), lanes)):
        ax.text(xs[0] - 1.0, y + 0.62, f"rank {r}", fontsize=9, weight="bold", color="tab:blue")
        arrow(ax, 2.3, 0, xs[0] - 0.73, y)
        for k, label in enumerate(stages):
            box(ax, xs[k], y, label.format(r=r, sub="₀₁"[r]), "#9ecae1" if k != 1 else "#deebf7")
            if k:
                arrow(ax, xs[k - 1] + 0.73, y, xs[k] - 0.73, y)
        arrow(ax, xs[-1] + 0.73, y, x_g - 0.4, 0)
    ax.set(xlim=(-0.9, x_y + 0.9), ylim=(-3.0, 2.3), title=title)
    ax.axis("off")

fig, axes = plt.subplots(2, 1, figsize=(10, 7.5), layout="constrained")
draw_tp_layer(axes[0], "MLP: column-parallel A, GELU, row-parallel B", [
    ["X A{sub}\n(b, s, 4h/p)\ncolumns of A", "GELU\nelementwise", "H{sub} B{sub}\n(b, s, h)\npartial sum"]] * 2)
draw_tp_layer(axes[1], "self-attention: heads split over the ranks", [
    ["X W_qkv{sub}\nq, k, v of\nheads of rank {r}", "softmax(q kᵀ) v\nnh/p heads\n(b, s, h/p)",
     "· W_proj{sub}\n(b, s, h)\npartial sum"]] * 2)
plt.show()

# %% [markdown]
# ## 3. A real run: the tensor-parallel block against the dense one
#
# `ParallelBlock(dense_block, group)` (homework task 4.3) slices the weights of a dense block of the
# provided `CharTransformer`; with the same input it must give the same output on every rank, and every
# shard's gradient must be the matching slice of the dense gradient. Below, in float64 on gloo processes
# (TP = 1, 2, 4, 8): each rank builds the dense block too, runs both, and reports the largest differences,
# for the output, the input's gradient, and the MLP's two weight gradients (the first layer's output rows,
# the second layer's input columns). Then the whole 2-layer model: the loss of
# `ParallelCharTransformer` (vocabulary-parallel embedding and cross-entropy, task 4.4) against the dense loss.

# %%
D_MODEL, N_HEADS, VOCAB = 64, 8, 64
x_block = torch.randn(4, 16, D_MODEL, generator=torch.Generator().manual_seed(1), dtype=torch.float64)

def compare_block(group):
    p, r = group.size, group.rank
    dense = CharTransformer(VOCAB, d_model=D_MODEL, n_heads=N_HEADS, n_layers=1, seed=0).double().blocks[0]
    tp = ParallelBlock(dense, group)
    x_dense, x_tp = x_block.clone().requires_grad_(), x_block.clone().requires_grad_()
    y_dense, y_tp = dense(x_dense), tp(x_tp)
    y_dense.pow(2).sum().backward()
    y_tp.pow(2).sum().backward()
    hidden = 4 * D_MODEL // p                                    # this rank's share of the 4h MLP features
    mine = slice(r * hidden, (r + 1) * hidden)
    return {"output": (y_tp - y_dense).abs().max().item(),
            "input grad": (x_tp.grad - x_dense.grad).abs().max().item(),
            "fc grad": (tp.mlp.fc.weight.grad - dense.fc.weight.grad[mine]).abs().max().item(),
            "fc_proj grad": (tp.mlp.fc_proj.weight.grad - dense.fc_proj.weight.grad[:, mine]).abs().max().item()}

def compare_loss(group):
    dense = CharTransformer(VOCAB, d_model=D_MODEL, n_heads=N_HEADS, n_layers=2, seed=0).double()
    idx = torch.randint(VOCAB, (4, 16), generator=torch.Generator().manual_seed(2))
    targets = torch.roll(idx, -1, dims=1)
    dense_loss = F.cross_entropy(dense(idx).flatten(0, 1), targets.flatten())
    return abs(ParallelCharTransformer(dense, group).loss(idx, targets).item() - dense_loss.item())

print(f"{'TP':>3} {'output':>9} {'input grad':>11} {'fc grad':>9} {'fc_proj grad':>13} {'2-layer loss':>13}")
for p in (1, 2, 4, 8):
    diffs = launch(compare_block, p)
    worst = {key: max(d[key] for d in diffs) for key in diffs[0]}
    loss_diff = max(launch(compare_loss, p))
    print(f"{p:>3} " + " ".join(f"{worst[k]:>{w}.1e}" for k, w in zip(worst, (9, 11, 9, 13)))
          + f" {loss_diff:>13.1e}")
    assert max(worst.values()) < 1e-12 and loss_diff < 1e-12
print("TP block equals the dense block on every rank")

# %% [markdown]
# Differences of 1e-16 to 1e-15: rounding, because the p partial sums are added in another order than
# the dense matmul adds them. Nothing else differs.
#
# ## 4. Counting the all-reduces
#
# The runtime counts every provided collective a rank calls (`group.counters.op("all_reduce")`: `calls`,
# and `tensor_bytes`, the summed size of the tensors). Reading them before and after the forward and the
# backward pass shows where the communication is. Megatron's claim: **one all-reduce forward and one
# backward per MLP and per attention**, of the (b, s, h) activations, and nothing else.

# %%
B_, T_ = 4, 16

def count_all_reduces(group, what):
    dense_model = CharTransformer(VOCAB, d_model=D_MODEL, n_heads=N_HEADS, n_layers=2, seed=0)
    block = dense_model.blocks[0]
    x = torch.randn(B_, T_, D_MODEL, generator=torch.Generator().manual_seed(3), requires_grad=True)
    idx = torch.randint(VOCAB, (B_, T_), generator=torch.Generator().manual_seed(4))
    if what == "MLP":
        module = ParallelMLP(block.fc, block.fc_proj, group)
    elif what == "attention":
        module = ParallelSelfAttention(block.attn, group)
    elif what == "block":
        module = ParallelBlock(block, group)
    else:
        module = ParallelCharTransformer(dense_model, group)
    ops = group.counters.op

    def snapshot():
        return ops("all_reduce").calls, ops("all_reduce").tensor_bytes, ops("all_gather").calls

    before = snapshot()
    out = module.loss(idx, torch.roll(idx, -1, dims=1)) if what == "2-layer model" else module(x).sum()
    middle = snapshot()
    out.backward()
    after = snapshot()
    return [m - b for m, b in zip(middle, before)], [a - m for a, m in zip(after, middle)]

ACT_BYTES = B_ * T_ * D_MODEL * 4                 # one (b, s, h) float32 activation
print(f"TP = 2, activations (b, s, h) = ({B_}, {T_}, {D_MODEL}) float32 = {ACT_BYTES / KB:.0f} KB\n")
print(f"{'module':>14} {'fwd all-reduces':>16} {'bwd all-reduces':>16} {'fwd KB':>8} {'bwd KB':>8} {'all-gathers':>12}")
COUNTS = {}
for what in ("MLP", "attention", "block", "2-layer model"):
    fwd, bwd = launch(count_all_reduces, 2, args=(what,))[0]
    COUNTS[what] = (fwd[0], bwd[0])
    print(f"{what:>14} {fwd[0]:>16} {bwd[0]:>16} {fwd[1] / KB:>8.2f} {bwd[1] / KB:>8.2f} {fwd[2] + bwd[2]:>12}")
print("one all-reduce forward and one backward per MLP:", COUNTS["MLP"] == (1, 1))
assert COUNTS["MLP"] == COUNTS["attention"] == (1, 1) and COUNTS["block"] == (2, 2)
assert COUNTS["2-layer model"] == cost_model.tp_all_reduce_counts(2)

# %% [markdown]
# The whole model adds four more forward and one more backward: the vocabulary-parallel embedding ends
# with a g (one all-reduce of (b, s, h) forward); the LM head, tied to that embedding, starts with an f (one
# all-reduce backward); and the vocabulary-parallel cross-entropy needs three small all-reduces of shape
# (b, s): the max of the logits, the target's logit, and the sum of exponentials, 0.25 KB each here,
# instead of gathering (b, s, V) logits. That is 2L + 4 forward and 2L + 1 backward, what
# `cost_model.tp_all_reduce_counts(L)` says.
#
# ## 5. Memory and communication per layer, from the cost model
#
# `minitorch_dist.cost_model` has the tensor-parallel formulas (`tp_parameters_per_rank`,
# `tp_activation_bytes_per_rank`, `tp_step_traffic`, `tp_step_time`; read their docstrings). Take one
# layer of a GPT-3-sized model (h = 12288, 96 heads, sequence 2048, one sequence per step, 16-bit
# activations) and count what **one rank** holds and sends for **one layer**, as the TP size grows:
#
# - parameters: 12h² + 13h per layer, split except the layer norms and the row-parallel biases. With
#   mixed-precision Adam a parameter costs 16 bytes (16-bit weight and gradient, 32-bit master weight, two
#   32-bit moments);
# - activations kept for backward (Korthikanti et al. 2022): the inputs of the layer norms and of the
#   first projections are **replicated**, everything between f and g is split;
# - communication: 4 all-reduces of the (b, s, h) activations per layer and step; on a ring, a rank sends
#   2(p-1)/p of each.

# %%
H, HEADS, SEQ, BATCH, E = 12288, 96, 2048, 1, 2
TP_SIZES = [1, 2, 4, 8, 16, 32, 64]

def per_layer(fn, **kw):
    # what one layer adds: the model with one block minus the model with none
    return fn(n_layers=1, **kw) - fn(n_layers=0, **kw)

rows = []
for p in TP_SIZES:
    params = per_layer(cost_model.tp_parameters_per_rank, vocab_size=64 * 64, d_model=H, max_len=SEQ, p=p)
    acts = cost_model.tp_activation_bytes_per_rank(BATCH, SEQ, H, HEADS, 1, p, element_bytes=E)
    acts_sp = cost_model.tp_activation_bytes_per_rank(BATCH, SEQ, H, HEADS, 1, p, element_bytes=E,
                                                      sequence_parallel=True)
    sent = (cost_model.tp_step_traffic(BATCH, SEQ, H, 1, p, E).bytes_sent
            - cost_model.tp_step_traffic(BATCH, SEQ, H, 0, p, E).bytes_sent)
    rows.append((p, params, 16 * params, acts, acts_sp, sent))

print(f"one layer, h = {H}, {HEADS} heads, s = {SEQ}, b = {BATCH}, 16-bit activations; per rank:\n")
print(f"{'TP':>3} {'parameters':>12} {'weights+Adam':>13} {'activations':>12} {'(with SP)':>10} {'sent per step':>14}")
for p, params, state, acts, acts_sp, sent in rows:
    print(f"{p:>3} {params / 1e6:>10.1f} M {state / GB:>10.2f} GB {acts / GB:>9.2f} GB {acts_sp / GB:>7.2f} GB"
          f" {sent / MB:>11.0f} MB")

fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
ps = np.array(TP_SIZES)
axes[0].plot(ps, [r[2] / GB for r in rows], "o-", label="weights + grads + Adam (16 B/param)")
axes[0].plot(ps, [r[3] / GB for r in rows], "s-", label="activations")
axes[0].plot(ps, [r[4] / GB for r in rows], "s--", label="activations, sequence parallel")
axes[0].set(xscale="log", yscale="log", xlabel="TP size p", ylabel="GB per rank, one layer",
            title="memory of one layer")
axes[0].set_xticks(TP_SIZES, [str(p) for p in TP_SIZES])
axes[0].legend(fontsize="small")
axes[1].plot(ps[1:], [r[5] / MB for r in rows[1:]], "o-", color="tab:red", label="bytes sent (ring)")
axes[1].axhline(4 * 2 * BATCH * SEQ * H * E / MB, color="k", ls=":", lw=1, label="limit 4 x 2 b s h e")
axes[1].set(xscale="log", xlabel="TP size p", ylabel="MB sent per rank per step",
            title="communication of one layer")
axes[1].set_xticks(TP_SIZES[1:], [str(p) for p in TP_SIZES[1:]])
for ax in axes:
    ax.set_xticks([], minor=True)
axes[1].legend(fontsize="small")
plt.show()
assert rows[3][2] < rows[0][2] / 7.5 and rows[3][5] > rows[1][5]

# %% [markdown]
# Memory per rank falls like 1/p, except the replicated activations (the inputs of the layer norms and the
# residual stream), which sequence parallelism (the homework's bonus 4.5) splits too. Communication per rank
# does **not** fall: every all-reduce moves the whole (b, s, h) activation, and 2(p-1)/p grows toward 2. And
# it sits on the critical path: the next layer cannot start before g has summed. So TP is worth it only
# where those all-reduces are fast, which is why Megatron keeps TP inside one node (p ≤ 8 GPUs on NVLink)
# and goes across nodes with data and pipeline parallelism. Homework 4 asks you to put numbers on that.
#
# ## 6. Tensor against data parallelism: bytes per step
#
# Same p ranks, same model, same global batch of tokens:
#
# - **data parallel**: every rank holds the model, sees 1/p of the batch and all-reduces the gradients once
#   per step: a rank sends 2(p-1)/p · Ψe bytes, **independent of the batch**;
# - **tensor parallel**: every rank holds 1/p of each layer, sees the whole batch, and all-reduces the
#   activations 4 times per layer: 2(p-1)/p · 4 L b s h e bytes, **proportional to the batch**.
#
# Per layer the ratio is 4 b s h / (12 h²) = b s / (3h): TP sends less than DP only while a step's tokens
# b·s stay below 3h. For a GPT-2-small-sized model (h = 768, 12 layers, vocabulary 50304), p = 8,
# 16-bit gradients and activations:

# %%
GPT2 = dict(vocab_size=50304, d_model=768, n_layers=12)
P_CMP, S_CMP = 8, 1024
dense_params = cost_model.tp_parameters_per_rank(max_len=S_CMP, p=1, **GPT2)
dp_sent = cost_model.traffic("ring_all_reduce", P_CMP, dense_params * E).bytes
batches = [1, 2, 4, 8, 16, 32, 64]
tp_sent = [cost_model.tp_step_traffic(b, S_CMP, GPT2["d_model"], GPT2["n_layers"], P_CMP, E).bytes_sent
           for b in batches]

print(f"model: {dense_params / 1e6:.0f} M parameters, p = {P_CMP}, sequence {S_CMP}")
print(f"{'batch':>6} {'tokens':>7} {'DP MB sent':>11} {'TP MB sent':>11} {'TP / DP':>8}")
for b, tp in zip(batches, tp_sent):
    print(f"{b:>6} {b * S_CMP:>7} {dp_sent / MB:>11.0f} {tp / MB:>11.0f} {tp / dp_sent:>8.2f}")

fig, ax = plt.subplots(figsize=(6.5, 4), layout="constrained")
tokens = np.array(batches) * S_CMP
ax.plot(tokens, [dp_sent / MB] * len(batches), "o-", label="data parallel (gradients)")
ax.plot(tokens, np.array(tp_sent) / MB, "s-", label="tensor parallel (activations)")
ax.axvline(3 * GPT2["d_model"], color="k", ls=":", lw=1, label="b s = 3h (the blocks alone)")
ax.set(xscale="log", yscale="log", xlabel="tokens per step (b s)", ylabel="MB sent per rank per step",
       title=f"GPT-2 small, p = {P_CMP}")
ax.legend(fontsize="small")
plt.show()
assert tp_sent[0] < dp_sent < tp_sent[-1]

# %% [markdown]
# The curves cross a little to the right of b s = 3h: data parallelism also all-reduces the gradient of the
# embedding (50304 × 768, a third of this small model), and tensor parallelism adds the embedding's, the LM
# head's and the cross-entropy's all-reduces. With a realistic batch, tensor parallelism sends several times more than data parallelism, and it cannot
# hide those bytes behind the backward pass the way bucketed DDP does (each all-reduce blocks the next
# layer). What it buys is memory: no rank ever holds a whole layer, its gradients or its optimizer state,
# and the activations of one sequence are split too. In practice the two are combined: TP inside a node,
# where links are fast, data (and pipeline) parallelism across nodes.
#
# ## Summary
#
# - Column-parallel then row-parallel: the elementwise GELU (and per-head attention) in between needs no
#   communication; one sum at the end does.
# - f (forward identity, backward all-reduce) and g (forward all-reduce, backward identity) are conjugate:
#   one all-reduce forward and one backward per MLP and per attention.
# - The tensor-parallel block computes the dense block's numbers, up to rounding, and its shards' gradients
#   are slices of the dense gradients.
# - Memory per rank falls like 1/p; bytes per rank per step do not, and scale with the batch: TP belongs on
#   fast links, inside a node.

# %%
print(f"notebook ran in {time.perf_counter() - START:.0f} s")
