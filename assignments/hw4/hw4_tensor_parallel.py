# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
#   language_info:
#     name: python
#   title: 'Homework 4: tensor parallelism'
# ---

# %% [markdown]
# # Homework 4: tensor parallelism (notebook part)
#
# This notebook is the analysis half of homework 4. The code half is the package: fill in
# `minitorch_dist/tensor_parallel/` first (tasks 4.1-4.4; `assignments/hw4/README.md`, public tests with
# `.venv/bin/python -m pytest assignments/hw4/tests -m task4_3` and so on). Parts B and C call **your** `ParallelBlock` and
# `ParallelCharTransformer`, so they only work once those do.
#
# Run it from the kit's root (scripts/setup.sh installed your package in the venv):
# `.venv/bin/jupyter lab assignments/hw4/hw4_tensor_parallel.ipynb`. The whole notebook runs in under a minute.
#
# - **Part A** (7 points): communication and memory by hand: bytes per layer against data parallelism,
#   parameters per rank, and when tensor parallelism pays off on fast and slow links. No processes.
# - **Part B** (6 points): your tensor-parallel block against the dense one on gloo processes, and the
#   all-reduces of a training step measured against the cost model.
# - **Part C** (4 points): TP = 1 to 8 on the simulated network, NVLink-like against Ethernet-like links.
#
# Write your answers where it says `YOUR CODE HERE`, replacing the `raise NotImplementedError()`.
# Cells with tests check your answers; some tests are hidden and run when the notebook is graded.
# Before you submit, restart the kernel and run all cells (*Kernel → Restart & Run All*).

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
import math

import matplotlib.pyplot as plt
import numpy as np
import torch

from minitorch_dist import SimNetwork, cost_model, launch
from minitorch_dist.data import CharTokenizer, char_batches, load_text
from minitorch_dist.models import CharTransformer
from minitorch_dist.models.char_transformer import Block
from minitorch_dist.tensor_parallel import ParallelBlock, ParallelCharTransformer

# %matplotlib inline
KB, MB, GB = 1024, 1024 ** 2, 1024 ** 3
TEXT = load_text()
TOKENS = CharTokenizer(TEXT).encode(TEXT)     # ids in [0, 61); the models below pad the vocabulary to 64


# %% [markdown]
# ## Part A: communication and memory by hand
#
# Notation: b sequences of s tokens per step, hidden size h, TP size p, e bytes per element. One
# transformer layer (attention + MLP) holds 12h² weights (q, k, v and the output projection: 4h²; the MLP:
# 8h²). With tensor parallelism a training step runs **4 all-reduces per layer** of the (b, s, h)
# activations: g after attention and after the MLP in the forward pass, f before them in the backward pass.
#
# ### A.1 Bytes per layer: tensor against data parallelism (2 points)
#
# All all-reduces are rings: an all-reduce of n bytes has every rank send 2(p-1)/p · n bytes.
#
# - Write `tp_bytes_sent_per_layer(b, s, h, p, element_bytes)`: the bytes one rank sends per layer and
#   training step with TP size p.
# - Write `dp_bytes_sent_per_layer(h, p, element_bytes)`: the bytes one rank sends per layer and step
#   with **data** parallelism over p ranks, which all-reduces the gradients of the layer's 12h² weights
#   once per step (ignore biases and layer norms).
# - Store in `BREAK_EVEN_TOKENS` the number of tokens b·s per step at which the two are equal, for
#   h = 4096 (any p > 1). Compute it with your functions, e.g. by a search; don't just write a number.
#
# Write the formulas yourself: do not call `cost_model`. For p = 1 nothing is sent.

# %% nbgrader={"grade": false, "grade_id": "tp_vs_dp_bytes", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
def tp_bytes_sent_per_layer(b: int, s: int, h: int, p: int, element_bytes: int) -> float:
    if p <= 1:
        return 0.0
    return 4 * 2 * (p - 1) / p * b * s * h * element_bytes

def dp_bytes_sent_per_layer(h: int, p: int, element_bytes: int) -> float:
    if p <= 1:
        return 0.0
    return 2 * (p - 1) / p * 12 * h * h * element_bytes

_tokens = 1
while tp_bytes_sent_per_layer(1, _tokens, 4096, 8, 2) < dp_bytes_sent_per_layer(4096, 8, 2):
    _tokens += 1
BREAK_EVEN_TOKENS = _tokens
### END SOLUTION
print(f"h = 4096, p = 8, 16-bit: TP sends {tp_bytes_sent_per_layer(8, 2048, 4096, 8, 2) / MB:.0f} MB per layer "
      f"for b = 8, s = 2048; DP sends {dp_bytes_sent_per_layer(4096, 8, 2) / MB:.0f} MB; "
      f"equal at {BREAK_EVEN_TOKENS} tokens per step")

# %% nbgrader={"grade": true, "grade_id": "test_tp_vs_dp_bytes", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
assert tp_bytes_sent_per_layer(2, 8, 16, 1, 4) == 0 and dp_bytes_sent_per_layer(16, 1, 4) == 0
assert math.isclose(tp_bytes_sent_per_layer(1, 1, 1, 2, 1), 4.0), "4 ring all-reduces of 1 byte at p = 2"
### BEGIN HIDDEN TESTS
import inspect
for _fn in (tp_bytes_sent_per_layer, dp_bytes_sent_per_layer):
    assert "cost_model" not in inspect.getsource(_fn), "A.1: write the formulas, do not call cost_model"
for _p in [1, 2, 3, 4, 8, 16, 64]:
    for _b, _s, _h, _e in [(1, 1, 8, 4), (8, 2048, 4096, 2), (3, 100, 768, 4), (16, 1024, 12288, 2)]:
        _ring = cost_model.traffic("ring_all_reduce", _p, _b * _s * _h * _e).bytes
        assert math.isclose(tp_bytes_sent_per_layer(_b, _s, _h, _p, _e), 4 * _ring, rel_tol=1e-9, abs_tol=1e-9), (
            "A.1: tp_bytes_sent_per_layer", _b, _s, _h, _p, _e)
        _per_layer = (cost_model.tp_step_traffic(_b, _s, _h, 1, _p, _e).bytes_sent
                      - cost_model.tp_step_traffic(_b, _s, _h, 0, _p, _e).bytes_sent)
        assert math.isclose(tp_bytes_sent_per_layer(_b, _s, _h, _p, _e), _per_layer, rel_tol=1e-9, abs_tol=1e-9)
        _dp = cost_model.traffic("ring_all_reduce", _p, 12 * _h * _h * _e).bytes
        assert math.isclose(dp_bytes_sent_per_layer(_h, _p, _e), _dp, rel_tol=1e-9, abs_tol=1e-9), (
            "A.1: dp_bytes_sent_per_layer", _h, _p, _e)
assert BREAK_EVEN_TOKENS == 3 * 4096, "A.1: BREAK_EVEN_TOKENS: 4 b s h = 12 h^2"
### END HIDDEN TESTS

# %% [markdown]
# ### A.2 Parameters per rank (2 points)
#
# A dense `Block(h, n_heads)` of the provided model holds: `ln1`, `ln2` (weight and bias, h each), `attn.qkv`
# (3h × h weight, 3h bias), `attn.proj` (h × h, bias h), `fc` (4h × h, bias 4h), `fc_proj` (h × 4h, bias h).
# Your `ParallelBlock` splits the weights and the column-parallel biases over p ranks, and keeps the layer
# norms and the row-parallel biases (added after the reduction) on every rank.
#
# - Write `block_params_per_rank(h, p)`: parameter elements one rank holds (p divides h).
# - Store in `MIN_TP_GPT3` the smallest TP size p (a power of two) at which the 96 blocks of a GPT-3-sized
#   model (h = 12288) fit their **weights, gradients and Adam state** in 80 GB (80 · 2³⁰ bytes) per GPU,
#   with mixed-precision Adam's 16 bytes per parameter (ignore the embeddings and all activations).
#
# A node has 8 GPUs. What does `MIN_TP_GPT3` tell you?

# %% nbgrader={"grade": false, "grade_id": "params_per_rank", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
def block_params_per_rank(h: int, p: int) -> int:
    split = 12 * h * h + 3 * h + 4 * h             # weights, qkv and fc biases
    replicated = 4 * h + 2 * h                     # ln1, ln2, proj and fc_proj biases
    return split // p + replicated

MIN_TP_GPT3 = 1
while 96 * block_params_per_rank(12288, MIN_TP_GPT3) * 16 > 80 * GB:
    MIN_TP_GPT3 *= 2
### END SOLUTION
print(f"h = 12288: {block_params_per_rank(12288, 8) / 1e6:.0f} M parameters per rank and block at TP = 8; "
      f"96 blocks fit in 80 GB from TP = {MIN_TP_GPT3}")

# %% nbgrader={"grade": true, "grade_id": "test_params_per_rank", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
assert block_params_per_rank(64, 1) == sum(q.numel() for q in Block(64, 8).parameters()), "p = 1: the dense block"
assert isinstance(MIN_TP_GPT3, (int, np.integer))
### BEGIN HIDDEN TESTS
for _h in [8, 64, 96, 768, 4096, 12288]:
    for _p in [1, 2, 4, 8, 16, 32]:
        if _h % _p:
            continue
        _expected = (cost_model.tp_parameters_per_rank(64 * 64, _h, 1, 8, _p)
                     - cost_model.tp_parameters_per_rank(64 * 64, _h, 0, 8, _p))
        assert block_params_per_rank(_h, _p) == _expected, ("A.2: block_params_per_rank", _h, _p, _expected)
assert MIN_TP_GPT3 == 64, "A.2: MIN_TP_GPT3"
### END HIDDEN TESTS

# %% [markdown]
# ### A.3 When does tensor parallelism pay off? (3 points)
#
# Predict the time of one layer's training step (forward + backward) at TP size p, with nothing overlapped:
#
# - compute: the layer's weight matmuls take 72 b s h² floating-point operations per step (forward 24 b s h²,
#   backward twice that), split evenly over the p ranks, at `flop_rate` operations per second per rank;
# - communication: the 4 all-reduces of b s h e bytes, each a ring all-reduce on an α-β network
#   (`cost_model.ring_all_reduce(p, n_bytes, alpha, beta)` from homework 1; you may call it).
#
# Write `tp_layer_time(p, tokens, h, alpha, beta, flop_rate, element_bytes)` (tokens = b·s). Then, for a
# layer with h = 4096 and 2048 tokens per step, 16-bit activations, 300 TFLOP/s per GPU and the two links of
# `LINKS`, store
#
# - `SPEEDUP_TP8 = {link: time at p = 1 / time at p = 8}`;
# - `BEST_TP = {link: the p in TP_SIZES with the smallest time}`.
#
# Plot the predicted time against p for both links in `FIG_LINKS` (log x axis). Before you run it, guess:
# does TP = 8 pay off over Ethernet?

# %% nbgrader={"grade": false, "grade_id": "links", "locked": true, "schema_version": 3, "solution": false, "task": false}
LINKS = {"nvlink": dict(alpha=2e-6, beta=1 / 150e9),          # inside a node: NVLink-like, 150 GB/s
         "ethernet": dict(alpha=20e-6, beta=1 / 12.5e9)}      # across nodes: 100 Gb/s Ethernet-like
LAYER = dict(tokens=2048, h=4096, flop_rate=300e12, element_bytes=2)
TP_SIZES = [1, 2, 4, 8, 16, 32, 64]


# %% nbgrader={"grade": false, "grade_id": "when_tp_pays", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
def tp_layer_time(p: int, tokens: int, h: int, alpha: float, beta: float, flop_rate: float,
                  element_bytes: int) -> float:
    compute = 72 * tokens * h * h / p / flop_rate
    comm = 4 * cost_model.ring_all_reduce(p, tokens * h * element_bytes, alpha, beta)
    return compute + comm

TIMES = {link: [tp_layer_time(p, **LAYER, **net) for p in TP_SIZES] for link, net in LINKS.items()}
SPEEDUP_TP8 = {link: times[0] / times[TP_SIZES.index(8)] for link, times in TIMES.items()}
BEST_TP = {link: TP_SIZES[int(np.argmin(times))] for link, times in TIMES.items()}

FIG_LINKS, ax = plt.subplots(figsize=(6.5, 4), layout="constrained")
for link, times in TIMES.items():
    ax.plot(TP_SIZES, np.array(times) * 1e3, "o-", label=link)
ax.set(xscale="log", xlabel="TP size p", ylabel="predicted ms per layer and step",
       title="h = 4096, 2048 tokens, 300 TFLOP/s")
ax.set_xticks(TP_SIZES, [str(p) for p in TP_SIZES])
ax.set_xticks([], minor=True)
ax.legend()
### END SOLUTION
plt.show()
print("speed-up at TP = 8:", {k: round(v, 2) for k, v in SPEEDUP_TP8.items()}, " best TP size:", BEST_TP)

# %% nbgrader={"grade": true, "grade_id": "test_when_tp_pays", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
import matplotlib
assert set(SPEEDUP_TP8) == set(BEST_TP) == set(LINKS)
assert tp_layer_time(1, 1000, 64, 1e-5, 1e-9, 1e12, 4) == 72 * 1000 * 64 * 64 / 1e12, "p = 1: compute only"
assert isinstance(FIG_LINKS, matplotlib.figure.Figure)
assert any(ax.get_xscale() == "log" for ax in FIG_LINKS.axes)
### BEGIN HIDDEN TESTS
def _layer_time(p, tokens, h, alpha, beta, flop_rate, element_bytes):
    return 72 * tokens * h * h / p / flop_rate + 4 * cost_model.ring_all_reduce(p, tokens * h * element_bytes,
                                                                                alpha, beta)

for _p in [1, 2, 3, 8, 64]:
    for _args in [(2048, 4096, 2e-6, 1 / 150e9, 300e12, 2), (512, 768, 1e-5, 1e-9, 1e12, 4),
                  (8192, 12288, 20e-6, 1 / 12.5e9, 900e12, 2)]:
        assert math.isclose(tp_layer_time(_p, *_args), _layer_time(_p, *_args), rel_tol=1e-9), ("A.3", _p, _args)
for _link, _net in LINKS.items():
    _times = [_layer_time(p, **LAYER, **_net) for p in TP_SIZES]
    assert math.isclose(SPEEDUP_TP8[_link], _times[0] / _times[3], rel_tol=1e-6), f"A.3: SPEEDUP_TP8[{_link!r}]"
    assert BEST_TP[_link] == TP_SIZES[int(np.argmin(_times))], f"A.3: BEST_TP[{_link!r}]"
assert SPEEDUP_TP8["nvlink"] > 1 > SPEEDUP_TP8["ethernet"] and BEST_TP["ethernet"] == 1
### END HIDDEN TESTS

# %% [markdown]
# ## Part B: your tensor-parallel block on real processes (6 points)
#
# ### B.1 The TP block against the dense block (3 points)
#
# `dense_block()` (given) is the first block of a `CharTransformer` with h = 64 and 8 heads, in float64;
# `X_BLOCK` is a (4, 16, 64) float64 input. Write `compare_block(group)`, run on every rank of a gloo
# group: build the dense block and your `ParallelBlock` from it; run both on `X_BLOCK` (each with its own
# copy that requires grad) with the loss `(y ** 2).sum()`, backward; and return a dict of the largest
# absolute differences on this rank:
#
# - `"output"`: the TP block's output against the dense output;
# - `"input grad"`: the gradients of the two inputs;
# - `"qkv grad"`, `"fc grad"`, `"fc_proj grad"`: the gradient of this rank's shard of `attn.qkv.weight`,
#   `mlp.fc.weight` and `mlp.fc_proj.weight` (the names the tests expect) against the **matching slice** of
#   the dense block's `attn.qkv.weight`, `fc.weight` and `fc_proj.weight` gradients. Careful with qkv: rank r
#   keeps its heads' rows of q, of k and of v.
#
# Store `BLOCK_DIFFS = {p: {key: the largest value over the ranks}}` for p = 1, 2 and 4.

# %% nbgrader={"grade": false, "grade_id": "block_helper", "locked": true, "schema_version": 3, "solution": false, "task": false}
X_BLOCK = torch.randn(4, 16, 64, generator=torch.Generator().manual_seed(1), dtype=torch.float64)

def dense_block():
    return CharTransformer(64, d_model=64, n_heads=8, n_layers=1, seed=0).double().blocks[0]


# %% nbgrader={"grade": false, "grade_id": "compare_block", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
def compare_block(group):
    p, r = group.size, group.rank
    dense = dense_block()
    tp = ParallelBlock(dense, group)
    x_dense, x_tp = X_BLOCK.clone().requires_grad_(), X_BLOCK.clone().requires_grad_()
    y_dense, y_tp = dense(x_dense), tp(x_tp)
    (y_dense ** 2).sum().backward()
    (y_tp ** 2).sum().backward()

    def rows(t, parts):                          # rank r's rows of each of `parts` equal blocks of t
        return torch.cat([block.chunk(p, dim=0)[r] for block in t.chunk(parts, dim=0)])

    def gap(a, b):
        return (a - b).abs().max().item()

    return {"output": gap(y_tp, y_dense), "input grad": gap(x_tp.grad, x_dense.grad),
            "qkv grad": gap(tp.attn.qkv.weight.grad, rows(dense.attn.qkv.weight.grad, 3)),
            "fc grad": gap(tp.mlp.fc.weight.grad, rows(dense.fc.weight.grad, 1)),
            "fc_proj grad": gap(tp.mlp.fc_proj.weight.grad, dense.fc_proj.weight.grad.chunk(p, dim=1)[r])}

BLOCK_DIFFS = {}
for _p in (1, 2, 4):
    _per_rank = launch(compare_block, _p)
    BLOCK_DIFFS[_p] = {key: max(d[key] for d in _per_rank) for key in _per_rank[0]}
### END SOLUTION
for p, diffs in BLOCK_DIFFS.items():
    print(f"TP = {p}: " + ", ".join(f"{k} {v:.1e}" for k, v in diffs.items()))

# %% nbgrader={"grade": true, "grade_id": "test_compare_block", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
KEYS = {"output", "input grad", "qkv grad", "fc grad", "fc_proj grad"}
assert set(BLOCK_DIFFS) == {1, 2, 4} and all(set(d) == KEYS for d in BLOCK_DIFFS.values())
assert all(math.isfinite(v) for d in BLOCK_DIFFS.values() for v in d.values())
### BEGIN HIDDEN TESTS
assert all(0 <= v < 1e-10 for d in BLOCK_DIFFS.values() for v in d.values()), f"B.1: {BLOCK_DIFFS}"

def _hidden_block_check(group):
    dense = dense_block()
    x_dense, x_tp = X_BLOCK.clone().requires_grad_(), X_BLOCK.clone().requires_grad_()
    y_dense, y_tp = dense(x_dense), ParallelBlock(dense, group)(x_tp)
    (y_dense * X_BLOCK).sum().backward()
    (y_tp * X_BLOCK).sum().backward()
    return max((y_tp - y_dense).abs().max().item(), (x_tp.grad - x_dense.grad).abs().max().item())

assert max(launch(_hidden_block_check, 2)) < 1e-10, "B.1: ParallelBlock differs from the dense block at TP = 2"
### END HIDDEN TESTS

# %% [markdown]
# ### B.2 The all-reduces of a training step, measured against the formula (3 points)
#
# `MODEL` is a 2-layer `CharTransformer` (vocabulary padded to 64 so that 2 and 4 divide it); a step is
# the loss of `ParallelCharTransformer(CharTransformer(**MODEL), group)` on `char_batches(TOKENS, BATCH,
# SEQ, step=0)`, then its backward. The runtime counts every provided collective: on a rank,
# `group.counters.op("all_reduce")` has `.calls` and `.tensor_bytes` (the summed size of the tensors).
#
# - Write `measure_step(group)`: run one step and return a dict with `"forward calls"`,
#   `"backward calls"`, `"forward bytes"`, `"backward bytes"`: the all-reduces of the forward pass (the loss)
#   and of the backward pass, and their tensor bytes, read from the counters before and after each pass.
# - Store `MEASURED = {p: rank 0's dict}` for p = 2 and 4 on gloo.
# - Store `PREDICTED = {p: the same dict}` from `cost_model.tp_step_traffic(...)` (read its docstring),
#   and `RING_BYTES_SENT = {p: bytes}`: what one rank would send per step if every all-reduce were a ring.

# %% nbgrader={"grade": false, "grade_id": "step_helper", "locked": true, "schema_version": 3, "solution": false, "task": false}
MODEL = dict(vocab_size=64, d_model=64, n_heads=8, n_layers=2, max_len=64, seed=0)
BATCH, SEQ = 8, 32
STEP_KEYS = ("forward calls", "backward calls", "forward bytes", "backward bytes")


# %% nbgrader={"grade": false, "grade_id": "measure_step", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
def measure_step(group):
    model = ParallelCharTransformer(CharTransformer(**MODEL), group)
    idx, targets = char_batches(TOKENS, BATCH, SEQ, step=0)
    counts = group.counters.op

    def snapshot():
        return counts("all_reduce").calls, counts("all_reduce").tensor_bytes

    start = snapshot()
    loss = model.loss(idx, targets)
    middle = snapshot()
    loss.backward()
    end = snapshot()
    return {"forward calls": middle[0] - start[0], "backward calls": end[0] - middle[0],
            "forward bytes": middle[1] - start[1], "backward bytes": end[1] - middle[1]}

MEASURED, PREDICTED, RING_BYTES_SENT = {}, {}, {}
for _p in (2, 4):
    MEASURED[_p] = launch(measure_step, _p)[0]
    _t = cost_model.tp_step_traffic(BATCH, SEQ, MODEL["d_model"], MODEL["n_layers"], _p, 4)
    PREDICTED[_p] = dict(zip(STEP_KEYS, (_t.forward_all_reduces, _t.backward_all_reduces,
                                         _t.forward_payload_bytes, _t.backward_payload_bytes)))
    RING_BYTES_SENT[_p] = _t.bytes_sent
### END SOLUTION
print(f"{'TP':>3} {'':>9} " + " ".join(f"{k:>15}" for k in STEP_KEYS) + f" {'ring KB sent':>13}")
for p in MEASURED:
    for name, row in (("measured", MEASURED[p]), ("formula", PREDICTED[p])):
        print(f"{p:>3} {name:>9} " + " ".join(f"{row[k]:>15}" for k in STEP_KEYS)
              + (f" {RING_BYTES_SENT[p] / KB:>13.1f}" if name == "formula" else ""))

# %% nbgrader={"grade": true, "grade_id": "test_measure_step", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
assert set(MEASURED) == set(PREDICTED) == set(RING_BYTES_SENT) == {2, 4}
assert all(set(MEASURED[p]) == set(PREDICTED[p]) == set(STEP_KEYS) for p in (2, 4))
### BEGIN HIDDEN TESTS
for _p in (2, 4):
    _t = cost_model.tp_step_traffic(BATCH, SEQ, MODEL["d_model"], MODEL["n_layers"], _p, 4)
    _expected = dict(zip(STEP_KEYS, (_t.forward_all_reduces, _t.backward_all_reduces,
                                     _t.forward_payload_bytes, _t.backward_payload_bytes)))
    assert PREDICTED[_p] == _expected, f"B.2: PREDICTED[{_p}] should be {_expected}"
    assert MEASURED[_p] == _expected, f"B.2: your step's all-reduces at TP = {_p}: {MEASURED[_p]}, formula {_expected}"
    assert math.isclose(RING_BYTES_SENT[_p], _t.bytes_sent, rel_tol=1e-9), f"B.2: RING_BYTES_SENT[{_p}]"
### END HIDDEN TESTS

# %% [markdown]
# ## Part C: when TP pays off, on the simulated network (4 points)
#
# ### C.1 Step time against TP size (3 points)
#
# On the `sim` backend a provided all-reduce of n bytes costs `cost_model.ring_all_reduce(p, n)` on the
# network you pass, and `group.compute(seconds)` charges compute to a rank's clock. `SIM_MODEL` is a larger
# 2-layer model (h = 128, 8 heads); a step is the loss on `char_batches(TOKENS, SIM_BATCH, SIM_SEQ,
# step=0)` and its backward.
#
# - Write `sim_step(group)`: build the model, `group.barrier()`, note `group.now()`, charge this rank's share
#   of the step's compute, `cost_model.tp_flops_per_step(...) / p / FLOP_RATE` seconds, with one
#   `group.compute`, run the step, and return the simulated seconds since the barrier.
# - Store `SIM_TIME = {link: {p: seconds}}` (rank 0's) for both networks of `NETWORKS` and p = 1, 2, 4, 8
#   (pass `trace=False` to `launch`), and `FORMULA_TIME` in the same shape from `cost_model.tp_step_time`.
# - Plot both against p, one colour per link (simulated: markers; formula: a line), in `FIG_SIM`.

# %% nbgrader={"grade": false, "grade_id": "sim_helper", "locked": true, "schema_version": 3, "solution": false, "task": false}
SIM_MODEL = dict(vocab_size=64, d_model=128, n_heads=8, n_layers=2, max_len=128, seed=0)
SIM_BATCH, SIM_SEQ, FLOP_RATE = 8, 128, 1e12          # a 1 TFLOP/s device, scaled down with the model
NETWORKS = {"nvlink": SimNetwork(alpha=2e-6, beta=1 / 150e9), "ethernet": SimNetwork(alpha=20e-6, beta=1 / 12.5e9)}
SIM_SIZES = [1, 2, 4, 8]


# %% nbgrader={"grade": false, "grade_id": "sim_times", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
def sim_step(group):
    model = ParallelCharTransformer(CharTransformer(**SIM_MODEL), group)
    idx, targets = char_batches(TOKENS, SIM_BATCH, SIM_SEQ, step=0)
    flops = cost_model.tp_flops_per_step(SIM_BATCH, SIM_SEQ, SIM_MODEL["d_model"], SIM_MODEL["vocab_size"],
                                         SIM_MODEL["n_layers"])
    group.barrier()
    start = group.now()
    group.compute(flops / group.size / FLOP_RATE)
    model.loss(idx, targets).backward()
    return group.now() - start

SIM_TIME, FORMULA_TIME = {}, {}
for _link, _net in NETWORKS.items():
    SIM_TIME[_link] = {p: launch(sim_step, p, backend="sim", network=_net, trace=False)[0] for p in SIM_SIZES}
    FORMULA_TIME[_link] = {p: cost_model.tp_step_time(SIM_BATCH, SIM_SEQ, SIM_MODEL["d_model"],
                                                      SIM_MODEL["vocab_size"], SIM_MODEL["n_layers"], p,
                                                      _net.alpha, _net.beta, FLOP_RATE).total
                           for p in SIM_SIZES}

FIG_SIM, ax = plt.subplots(figsize=(6.5, 4), layout="constrained")
for (_link, _times), _color in zip(SIM_TIME.items(), ("tab:green", "tab:red")):
    ax.plot(SIM_SIZES, [_times[p] * 1e3 for p in SIM_SIZES], "o", color=_color, label=f"{_link}, simulated")
    ax.plot(SIM_SIZES, [FORMULA_TIME[_link][p] * 1e3 for p in SIM_SIZES], "-", color=_color,
            label=f"{_link}, formula")
ax.set(xscale="log", xlabel="TP size p", ylabel="ms per training step", title="simulated step time")
ax.set_xticks(SIM_SIZES, [str(p) for p in SIM_SIZES])
ax.set_xticks([], minor=True)
ax.legend()
### END SOLUTION
plt.show()
for link in SIM_TIME:
    print(f"{link:>9}: " + "  ".join(f"p={p}: {SIM_TIME[link][p] * 1e3:.3f} ms" for p in SIM_SIZES))

# %% nbgrader={"grade": true, "grade_id": "test_sim_times", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
import matplotlib
assert set(SIM_TIME) == set(FORMULA_TIME) == set(NETWORKS)
assert all(set(SIM_TIME[k]) == set(FORMULA_TIME[k]) == set(SIM_SIZES) for k in NETWORKS)
assert isinstance(FIG_SIM, matplotlib.figure.Figure)
### BEGIN HIDDEN TESTS
for _link, _net in NETWORKS.items():
    for _p in SIM_SIZES:
        _want = cost_model.tp_step_time(SIM_BATCH, SIM_SEQ, SIM_MODEL["d_model"], SIM_MODEL["vocab_size"],
                                        SIM_MODEL["n_layers"], _p, _net.alpha, _net.beta, FLOP_RATE).total
        assert math.isclose(FORMULA_TIME[_link][_p], _want, rel_tol=1e-9), f"C.1: FORMULA_TIME[{_link!r}][{_p}]"
        assert math.isclose(SIM_TIME[_link][_p], _want, rel_tol=1e-6), (
            f"C.1: simulated {SIM_TIME[_link][_p]:.6g} s at TP = {_p} on {_link}, formula {_want:.6g} s")
### END HIDDEN TESTS

# %% [markdown]
# ### C.2 Inside a node or across nodes? (1 point)
#
# From your simulated times, store in `TP_PAYS_OFF = {link: bool}` whether TP = 8 is faster than one rank
# on that link. Then explain to yourself which term of the formula decides it on each link (the α term,
# the β term or the compute), and why Megatron keeps tensor parallelism inside a node.

# %% nbgrader={"grade": false, "grade_id": "tp_pays_off", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
TP_PAYS_OFF = {link: SIM_TIME[link][8] < SIM_TIME[link][1] for link in SIM_TIME}
### END SOLUTION
print(TP_PAYS_OFF)

# %% nbgrader={"grade": true, "grade_id": "test_tp_pays_off", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
assert set(TP_PAYS_OFF) == set(NETWORKS) and all(isinstance(v, (bool, np.bool_)) for v in TP_PAYS_OFF.values())
### BEGIN HIDDEN TESTS
assert TP_PAYS_OFF == {"nvlink": True, "ethernet": False}, f"C.2: {TP_PAYS_OFF}"
assert all(TP_PAYS_OFF[k] == (SIM_TIME[k][8] < SIM_TIME[k][1]) for k in NETWORKS), "C.2 disagrees with SIM_TIME"
### END HIDDEN TESTS

# %% [markdown]
# **To think about (not graded).** The formula of C.1 assumes nothing overlaps. Which of a step's
# all-reduces could overlap with computation, and which cannot because the next layer needs their result?
# How does that change the comparison with data parallelism, whose gradient all-reduces overlap with the
# backward pass?
