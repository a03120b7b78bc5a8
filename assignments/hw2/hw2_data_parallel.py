# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
#   language_info:
#     name: python
#   title: 'Homework 2: data parallel and gossip'
# ---

# %% [markdown]
# # Homework 2: data parallel and gossip (notebook part)
#
# This notebook is the analysis half of homework 2. The code half is the package: fill in
# `minitorch_dist/data_parallel/` and `minitorch_dist/gossip/` first (tasks 2.1-2.7;
# `assignments/hw2/README.md`, public tests with `.venv/bin/python -m pytest assignments/hw2/tests -m task2_4` and so on).
# Parts B and C call **your** `BucketedDDP`, `push_sum_step_`, `DPSGD` and `SGP`, so they only work once
# those do.
#
# Run it from the kit's root (scripts/setup.sh installed your package in the venv):
# `.venv/bin/jupyter lab assignments/hw2/hw2_data_parallel.ipynb`. The whole notebook runs in under a minute.
#
# - **Part A** (8 points): communication by hand: parameter server against all-reduce, buckets, push-sum
#   mixing, when gossip is cheaper. No processes.
# - **Part B** (5 points): your bucketed data parallel on real processes: throughput against the number
#   of workers, and a bucket size sweep.
# - **Part C** (6 points): your gossip on the simulated network: push-sum consensus, and gossip against
#   all-reduce when workers straggle.
#
# Write your answers where it says `YOUR CODE HERE`, replacing the `raise NotImplementedError()`.
# Cells with tests check your answers; some tests are hidden and run when the notebook is graded.
# Before you submit, restart the kernel and run all cells (*Kernel → Restart & Run All*).

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
import math
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from minitorch_dist import SimNetwork, cost_model, launch
from minitorch_dist.data import make_classification
from minitorch_dist.data_parallel import BucketedDDP, plan_buckets, write_flat_
from minitorch_dist.data_parallel import stragglers
from minitorch_dist.gossip import exponential_peers, push_sum_step_
from minitorch_dist.models import MLP, CharTransformer

# %matplotlib inline
KB, MB = 1024, 1024 ** 2
X, Y = make_classification(n=512)            # (512, 16) float32, (512,) int64


# %% [markdown]
# ## Part A: communication by hand
#
# ### A.1 Parameter server against all-reduce (2 points)
#
# A model of `model_bytes` bytes trained on p ranks. Per step, counting only gradients and parameters
# (not the batch):
#
# - the parameter server (rank 0) receives every worker's gradient and sends every worker the new parameters;
# - a worker sends its gradient to the server and receives the parameters;
# - with a ring all-reduce of the gradients (lecture 1), every rank does the same.
#
# Write `bytes_sent_per_step(scheme, p, model_bytes)`, the bytes that one rank **sends** per step, for
# `scheme` in `"ps_server"`, `"ps_worker"`, `"ring_all_reduce"` (for p = 1 nothing is sent). Write the
# formulas yourself: do not call `cost_model`.

# %% nbgrader={"grade": false, "grade_id": "bytes_per_step", "locked": false, "schema_version": 3, "solution": true, "task": false}
def bytes_sent_per_step(scheme: str, p: int, model_bytes: float) -> float:
    ### BEGIN SOLUTION
    if p <= 1:
        return 0.0
    if scheme == "ps_server":
        return (p - 1) * model_bytes
    if scheme == "ps_worker":
        return float(model_bytes)
    if scheme == "ring_all_reduce":
        return 2 * (p - 1) / p * model_bytes
    raise ValueError(f"unknown scheme {scheme!r}")
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_bytes_per_step", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
for scheme in ("ps_server", "ps_worker", "ring_all_reduce"):
    print(f"{scheme:>16}, p = 8, 100 MB model: {bytes_sent_per_step(scheme, 8, 100 * MB) / MB:6.1f} MB per step")
assert math.isclose(bytes_sent_per_step("ps_worker", 4, 1000), 1000)
assert bytes_sent_per_step("ring_all_reduce", 1, 1000) == 0
### BEGIN HIDDEN TESTS
import inspect
assert "cost_model" not in inspect.getsource(bytes_sent_per_step), "A.1: write the formulas, do not call cost_model"
for _p in [1, 2, 3, 4, 5, 7, 8, 16, 33, 64, 1000]:
    for _n in [0, 1, 4096, 100 * MB, 3e9]:
        _server = cost_model.traffic("naive_all_reduce", _p, _n).bytes      # the naive root = the server
        _ring = cost_model.traffic("ring_all_reduce", _p, _n).bytes
        assert math.isclose(bytes_sent_per_step("ps_server", _p, _n), _server, rel_tol=1e-9, abs_tol=1e-9), (_p, _n)
        assert math.isclose(bytes_sent_per_step("ring_all_reduce", _p, _n), _ring, rel_tol=1e-9, abs_tol=1e-9), (_p, _n)
        assert math.isclose(bytes_sent_per_step("ps_worker", _p, _n), _n if _p > 1 else 0, rel_tol=1e-9, abs_tol=1e-9)
### END HIDDEN TESTS

# %% [markdown]
# ### A.2 How many buckets? (2 points)
#
# `BucketedDDP` plans its buckets by torch DDP's rule (the module docstring of `bucketed.py`): walk the
# parameters in **reverse** registration order (the order backward produces gradients); parameters join the
# current bucket until it holds **at least** `bucket_bytes`, then it closes and the next parameter starts a
# new bucket. So a bucket may pass `bucket_bytes` by its last parameter. Its number of all-reduces per step
# is the number of buckets.
#
# Write `count_buckets(param_bytes, bucket_bytes)`, the number of buckets for parameters of the given sizes
# in bytes (in registration order, all of one dtype), **without** calling `plan_buckets`. Then store in
# `N_BUCKETS_CHAR` the number of all-reduces per step of `BucketedDDP(CharTransformer(vocab_size=65),
# group, bucket_size_mb=1/64)` (16 KB buckets; float32; mind the tied weight), and in `UPPER_BOUND_CHAR`
# the bound ⌈total bytes / bucket bytes⌉ that this rule never exceeds (every bucket but the last holds at
# least `bucket_bytes`).

# %% nbgrader={"grade": false, "grade_id": "count_buckets", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
def count_buckets(param_bytes: list[int], bucket_bytes: int) -> int:
    count, filled = 0, 0
    for nbytes in reversed(param_bytes):
        if count == 0 or filled >= bucket_bytes:
            count, filled = count + 1, 0
        filled += nbytes
    return count

_char_bytes = [4 * p.numel() for p in CharTransformer(vocab_size=65).parameters() if p.requires_grad]
N_BUCKETS_CHAR = count_buckets(_char_bytes, 16 * KB)
UPPER_BOUND_CHAR = math.ceil(sum(_char_bytes) / (16 * KB))
### END SOLUTION
print(f"CharTransformer, 16 KB buckets: {N_BUCKETS_CHAR} all-reduces per step (at most {UPPER_BOUND_CHAR})")

# %% nbgrader={"grade": true, "grade_id": "test_count_buckets", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
assert count_buckets([100, 100, 100], 150) == 2            # [2, 1] (200 bytes: closed), then [0]
assert count_buckets([300, 10, 10], 250) == 1              # [2, 1, 0]: the 300 bytes close it, past 250
assert count_buckets([10, 10, 300], 250) == 2              # [2] alone (300 >= 250), then [1, 0]
assert isinstance(N_BUCKETS_CHAR, (int, np.integer)) and isinstance(UPPER_BOUND_CHAR, (int, np.integer))
assert N_BUCKETS_CHAR <= UPPER_BOUND_CHAR
### BEGIN HIDDEN TESTS
import inspect
assert "plan_buckets" not in inspect.getsource(count_buckets), "A.2: count the buckets yourself"
_gen = torch.Generator().manual_seed(2)
for _trial in range(300):
    _sizes = [4 * int(s) for s in torch.randint(1, 400, (int(torch.randint(1, 12, (1,), generator=_gen)),), generator=_gen)]
    _bucket = 4 * int(torch.randint(1, 900, (1,), generator=_gen))
    _expected = len(plan_buckets([torch.empty(s // 4) for s in _sizes], _bucket))
    assert count_buckets(_sizes, _bucket) == _expected, (_sizes, _bucket, _expected)
_params = [p for p in CharTransformer(vocab_size=65).parameters() if p.requires_grad]
assert N_BUCKETS_CHAR == len(plan_buckets(_params, 16 * KB)), "A.2: N_BUCKETS_CHAR"
assert UPPER_BOUND_CHAR == math.ceil(sum(4 * p.numel() for p in _params) / (16 * KB)), "A.2: UPPER_BOUND_CHAR"
### END HIDDEN TESTS

# %% [markdown]
# ### A.3 Push-sum as a matrix (2 points)
#
# One push-sum step of SGP on the exponential graph (task 2.6) is linear: with x the vector of the p
# ranks' values, x ← A x and w ← A w, where column i of A says where rank i's mass goes: half stays
# (A[i, i] = 1/2) and half goes to its out-peer j = `exponential_peers(i, p, step)[0]` (A[j, i] = 1/2).
#
# Write `mixing_matrix(p, step)`, that A as a float64 numpy array of shape (p, p) (for p = 1, `[[1.0]]`).
# Then store in `STEPS_TO_EXACT_MEAN` a dict `{p: k}` for p in 2, 4, 8, 16, 32, 64: the smallest number
# of steps k (starting at step 0) after which every rank holds exactly the mean of any starting values,
# that is, A(k-1) ··· A(1) A(0) = (1/p) · ones. Compute it with your matrices; don't just write the answer.

# %% nbgrader={"grade": false, "grade_id": "mixing_matrix", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
def mixing_matrix(p: int, step: int) -> np.ndarray:
    if p == 1:
        return np.ones((1, 1))
    A = np.eye(p) / 2
    for i in range(p):
        A[exponential_peers(i, p, step)[0], i] += 0.5
    return A

def _steps_to_mean(p, max_steps=20):
    product = np.eye(p)
    for k in range(max_steps + 1):
        if np.array_equal(product, np.full((p, p), 1 / p)):
            return k
        product = mixing_matrix(p, k) @ product
    return None

STEPS_TO_EXACT_MEAN = {p: _steps_to_mean(p) for p in (2, 4, 8, 16, 32, 64)}
### END SOLUTION
print(STEPS_TO_EXACT_MEAN)

# %% nbgrader={"grade": true, "grade_id": "test_mixing_matrix", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_A = mixing_matrix(4, 0)
assert _A.shape == (4, 4) and np.allclose(_A.sum(axis=0), 1), "the columns of A sum to 1"
assert set(STEPS_TO_EXACT_MEAN) == {2, 4, 8, 16, 32, 64}
### BEGIN HIDDEN TESTS
for _p in range(1, 13):
    for _k in range(6):
        _expected = np.ones((1, 1))
        if _p > 1:
            _expected = np.eye(_p) / 2
            for _i in range(_p):
                _expected[(_i + 2 ** (_k % math.ceil(math.log2(_p)))) % _p, _i] += 0.5
        assert np.allclose(np.asarray(mixing_matrix(_p, _k), dtype=float), _expected), (_p, _k)
assert STEPS_TO_EXACT_MEAN == {p: int(math.log2(p)) for p in (2, 4, 8, 16, 32, 64)}, "A.3: log2 p"
### END HIDDEN TESTS

# %% [markdown]
# ### A.4 When is gossip cheaper than all-reduce? (2 points)
#
# Count communication only. A D-PSGD step on a ring sends and receives the whole model twice (two
# `sendrecv`s of n bytes, one after the other): 2(α + nβ). A ring all-reduce of n bytes costs
# 2(p-1)α + 2(p-1)/p · nβ.
#
# Write `smallest_p_gossip_cheaper(n_bytes, alpha, beta)`: the smallest p ≥ 3 at which the D-PSGD step
# costs **strictly less** than the ring all-reduce. Solve the inequality (a closed form, or a search over
# p that stops at the first p). Then store in `P_GOSSIP_100MB` its value for a 100 MB model (100 · 2²⁰
# bytes) on a cluster with α = 20 µs and 1/β = 12.5 GB/s.
#
# Before you run it, guess: which term makes gossip cheaper at large p, the α term or the β term?

# %% nbgrader={"grade": false, "grade_id": "gossip_cheaper", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
def smallest_p_gossip_cheaper(n_bytes: float, alpha: float, beta: float) -> int:
    # 2(p-1)a + 2(p-1)/p n b > 2a + 2 n b  <=>  p (p - 2) a > n b
    p = 3
    while p * (p - 2) * alpha <= n_bytes * beta:
        p += 1
    return p

P_GOSSIP_100MB = smallest_p_gossip_cheaper(100 * MB, 20e-6, 1 / 12.5e9)
### END SOLUTION
print(f"100 MB model: gossip's step is cheaper than a ring all-reduce from p = {P_GOSSIP_100MB}")

# %% nbgrader={"grade": true, "grade_id": "test_gossip_cheaper", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
assert isinstance(P_GOSSIP_100MB, (int, np.integer)) and P_GOSSIP_100MB >= 3
assert smallest_p_gossip_cheaper(0, 1e-5, 1e-9) == 3       # latency only: 2(p-1) > 2 already at p = 3
### BEGIN HIDDEN TESTS
def _gossip_cheaper(p, n, a, b):
    return 2 * (a + n * b) < cost_model.ring_all_reduce(p, n, a, b)

for _n in [1, 1000, 1 * MB, 100 * MB, 2 ** 34]:
    for _a, _b in [(20e-6, 1 / 12.5e9), (1e-6, 1e-9), (1e-3, 1e-11), (5e-6, 1 / 100e9)]:
        _mine = int(smallest_p_gossip_cheaper(_n, _a, _b))
        assert _gossip_cheaper(_mine, _n, _a, _b), ("A.4: not cheaper at your p", _n, _a, _b, _mine)
        assert _mine == 3 or not _gossip_cheaper(_mine - 1, _n, _a, _b), ("A.4: cheaper already below", _n, _a, _b)
assert P_GOSSIP_100MB == smallest_p_gossip_cheaper(100 * MB, 20e-6, 1 / 12.5e9)
### END HIDDEN TESTS

# %% [markdown]
# ## Part B: bucketed data parallel on real processes (5 points)
#
# `train_steps` (given) trains a 5-layer MLP (`MLP(d_hidden=512, depth=4)`, about 800k parameters, 3.2 MB)
# with **your** `BucketedDDP` on random samples of `local_batch` per rank. It runs `steps + 1` steps (the
# first is a warm-up), each starting with a barrier, and returns the wall-clock seconds of the timed steps
# on this rank. A step lasts until its slowest rank is done: take the maximum over ranks.

# %% nbgrader={"grade": false, "grade_id": "train_helper", "locked": true, "schema_version": 3, "solution": false, "task": false}
DEEP = dict(d_hidden=512, depth=4)

def train_steps(group, bucket_size_mb, local_batch, steps):
    model = BucketedDDP(MLP(**DEEP), group, bucket_size_mb=bucket_size_mb)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(group.rank)
    seconds = []
    for _ in range(steps + 1):
        idx = torch.randint(len(X), (local_batch,), generator=gen)
        group.barrier()
        start = time.perf_counter()
        opt.zero_grad()
        F.cross_entropy(model(X[idx]), Y[idx]).backward()
        model.finish_gradient_synchronization()
        opt.step()
        seconds.append(time.perf_counter() - start)
    return seconds[1:]

def median_step(runs):
    # runs: the launch result (one list of step times per rank) -> median over steps of the slowest rank
    return float(np.median(np.max(np.array(list(runs)), axis=0)))


# %% [markdown]
# ### B.1 Throughput against the number of workers (2 points)
#
# Weak scaling: every worker keeps `local_batch = 64` samples, so p workers process 64p samples per step.
# For p = 1, 2 and 4 gloo ranks (25 MB buckets, at least 8 timed steps), store the throughput in
# samples per second in `THROUGHPUT = {p: samples/s}`, from `median_step`. Plot it against p with the ideal
# linear scaling from p = 1 (two lines), and keep the figure in `FIG_THROUGHPUT`.
#
# This machine's ranks share its CPU cores (`os.cpu_count()`), so do not expect the ideal line. What
# limits you here, and what would on a cluster? On a busy machine these times are noise (run the cell
# again when it is quiet before drawing conclusions); the tests check what you store and its units, not
# how fast your machine is.

# %% nbgrader={"grade": false, "grade_id": "throughput", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
WORKERS = [1, 2, 4]
THROUGHPUT = {p: p * 64 / median_step(launch(train_steps, p, args=(25.0, 64, 8))) for p in WORKERS}

FIG_THROUGHPUT, ax = plt.subplots(figsize=(6, 4), layout="constrained")
ax.plot(WORKERS, [THROUGHPUT[p] for p in WORKERS], "o-", label="BucketedDDP, measured")
ax.plot(WORKERS, [p * THROUGHPUT[1] for p in WORKERS], "k:", label="ideal (linear)")
ax.set(xlabel="workers p (gloo)", ylabel="samples / s", title="weak scaling, 64 samples per worker")
ax.set_xticks(WORKERS)
ax.legend()
### END SOLUTION
plt.show()
print({p: round(t) for p, t in THROUGHPUT.items()})

# %% nbgrader={"grade": true, "grade_id": "test_throughput", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
import matplotlib
assert set(THROUGHPUT) == {1, 2, 4}
assert all(math.isfinite(t) and t > 0 for t in THROUGHPUT.values()), "throughputs must be positive"
assert isinstance(FIG_THROUGHPUT, matplotlib.figure.Figure)
assert len([l for ax in FIG_THROUGHPUT.axes for l in ax.get_lines()]) >= 2, "measured and ideal lines"
### BEGIN HIDDEN TESTS
# units only (samples per second, not seconds per sample): a busy machine makes the numbers small, and
# below 1 sample/s, 4 of the 8 timed steps alone take over 4 minutes (a grading cell's limit is 5)
assert all(1 <= t <= 1e8 for t in THROUGHPUT.values()), f"implausible samples/s: {THROUGHPUT}"
### END HIDDEN TESTS

# %% [markdown]
# ### B.2 Bucket size sweep (3 points)
#
# On 2 gloo ranks with `local_batch = 64`, run `train_steps` for bucket sizes of 0.01, 0.5, 1.5, 2.5, 4 and
# 25 MB (at least 8 timed steps each). Store
#
# - `STEP_TIME = {bucket_mb: seconds}`, from `median_step`;
# - `ALL_REDUCES_PER_STEP = {bucket_mb: n}`: the all-reduces per step that your `BucketedDDP` issued, read
#   from the run's counters (`runs.counters[0].op("all_reduce").calls`, over all `steps + 1` steps);
#
# and draw both against the bucket size (log x axis; e.g. a second y axis with `ax.twinx()`), in
# `FIG_BUCKETS`. The hidden test compares your counts with the buckets `plan_buckets` makes.
# Which size is fastest here, and why would it be larger on a network with a larger α?

# %% nbgrader={"grade": false, "grade_id": "bucket_sweep", "locked": false, "schema_version": 3, "solution": true, "task": false}
BUCKET_SIZES = [0.01, 0.5, 1.5, 2.5, 4.0, 25.0]
### BEGIN SOLUTION
STEP_TIME, ALL_REDUCES_PER_STEP = {}, {}
for mb in BUCKET_SIZES:
    runs = launch(train_steps, 2, args=(mb, 64, 8))
    STEP_TIME[mb] = median_step(runs)
    ALL_REDUCES_PER_STEP[mb] = runs.counters[0].op("all_reduce").calls / 9

FIG_BUCKETS, ax = plt.subplots(figsize=(7, 4), layout="constrained")
ax.plot(BUCKET_SIZES, [STEP_TIME[mb] * 1e3 for mb in BUCKET_SIZES], "o-", color="tab:blue")
ax.set(xscale="log", xlabel="bucket size (MB)", ylabel="ms per step (2 gloo ranks)")
twin = ax.twinx()
twin.plot(BUCKET_SIZES, [ALL_REDUCES_PER_STEP[mb] for mb in BUCKET_SIZES], "s--", color="tab:orange")
twin.set_ylabel("all-reduces per step", color="tab:orange")
### END SOLUTION
plt.show()
for mb in BUCKET_SIZES:
    print(f"{mb:>6} MB: {STEP_TIME[mb] * 1e3:6.1f} ms, {ALL_REDUCES_PER_STEP[mb]:g} all-reduces")

# %% nbgrader={"grade": true, "grade_id": "test_bucket_sweep", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
import matplotlib
assert set(STEP_TIME) == set(BUCKET_SIZES) == set(ALL_REDUCES_PER_STEP)
assert all(math.isfinite(t) and t > 0 for t in STEP_TIME.values())
assert isinstance(FIG_BUCKETS, matplotlib.figure.Figure)
assert any(ax.get_xscale() == "log" for ax in FIG_BUCKETS.axes)
assert ALL_REDUCES_PER_STEP[25.0] == 1, "one 25 MB bucket holds the whole 3.2 MB model"
### BEGIN HIDDEN TESTS
_params = list(MLP(**DEEP).parameters())
for _mb in BUCKET_SIZES:
    _expected = len(plan_buckets(_params, int(_mb * MB)))
    assert ALL_REDUCES_PER_STEP[_mb] == _expected, f"B.2: {_mb} MB buckets: {ALL_REDUCES_PER_STEP[_mb]} all-reduces per step, expected {_expected}"
### END HIDDEN TESTS

# %% [markdown]
# ## Part C: gossip on the simulated network (6 points)
#
# ### C.1 Push-sum consensus (2 points)
#
# Run log₂ 16 = 4 steps (steps 0, 1, 2, 3) of **your** `push_sum_step_` on 16 ranks of the `sim` backend.
# Rank r starts from x_r = [r, r²] (float64) and w_r = [1.0] (float64). Store the de-biased values
# z_r = x_r / w_r after the last step in `Z`, a list of 16 tensors in rank order, and the sum of the
# final w_r over ranks in `SUM_W`. Compare with A.3.

# %% nbgrader={"grade": false, "grade_id": "push_sum", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
def push_sum_run(group, steps):
    x = torch.tensor([float(group.rank), float(group.rank) ** 2], dtype=torch.float64)
    w = torch.ones(1, dtype=torch.float64)
    for k in range(steps):
        push_sum_step_(x, w, group, k)
    return x / w, w.item()

_finals = launch(push_sum_run, 16, args=(4,), backend="sim")
Z = [z for z, _ in _finals]
SUM_W = sum(w for _, w in _finals)
### END SOLUTION
print("z on rank 0:", Z[0].tolist(), " sum of w:", SUM_W)

# %% nbgrader={"grade": true, "grade_id": "test_push_sum", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
assert len(Z) == 16 and all(torch.is_tensor(z) and z.shape == (2,) for z in Z)
assert all(torch.equal(z, Z[0]) for z in Z), "after log2 p steps every rank holds the same value"
### BEGIN HIDDEN TESTS
assert Z[0].tolist() == [7.5, 77.5], f"C.1: the mean of [r, r^2] over 16 ranks is [7.5, 77.5], not {Z[0].tolist()}"
assert SUM_W == 16

def _push_sum_history(group, steps):
    x = torch.tensor([float(group.rank) ** 2], dtype=torch.float64)
    w = torch.ones(1, dtype=torch.float64)
    out = []
    for k in range(steps):
        push_sum_step_(x, w, group, k)
        out.append((x.item(), w.item()))
    return out

_runs = launch(_push_sum_history, 6, args=(6,), backend="sim")          # p = 6: not a power of two
_mean = sum(r ** 2 for r in range(6)) / 6
for _k in range(6):
    assert math.isclose(sum(_runs[r][_k][0] for r in range(6)), 6 * _mean), "C.1: push-sum must keep sum x"
    assert math.isclose(sum(_runs[r][_k][1] for r in range(6)), 6.0), "C.1: push-sum must keep sum w"
_dist = [max(abs(_runs[r][_k][0] / _runs[r][_k][1] - _mean) for r in range(6)) for _k in range(6)]
assert _dist[-1] < 0.5 * _dist[0], f"C.1: consensus distance does not shrink on p = 6: {_dist}"
### END HIDDEN TESTS

# %% [markdown]
# ### C.2 Gossip against all-reduce under stragglers (3 points)
#
# `train_decentralized(group, method, scenario)` (given) trains the default MLP on P = 8 simulated
# ranks for 120 steps with `method` in `"all-reduce"` (your `BucketedDDP`, one bucket, SGD), `"D-PSGD"`
# or `"SGP"` (yours, same learning rate), each rank on its part of the same global batches. Each step
# charges compute with `group.compute`: 5 ms per rank with `scenario="no straggler"`; with
# `"random straggler"`, one rank drawn at random per step takes 5x longer. Every 10 steps it logs the
# simulated time and the rank's parameters; `mean_loss` turns one step's logs into the mean loss of the
# 8 models on the full data set.

# %% nbgrader={"grade": false, "grade_id": "gossip_helper", "locked": true, "schema_version": 3, "solution": false, "task": false}
P, STEPS, LR, BATCH, EVERY = 8, 120, 0.2, 64, 10
BASE_COMPUTE, SLOW, TARGET = 5e-3, 5.0, 0.55
NET = SimNetwork(alpha=20e-6, beta=1 / 1e9)
SCENARIOS, METHODS = ["no straggler", "random straggler"], ["all-reduce", "D-PSGD", "SGP"]

def train_decentralized(group, method, scenario):   # minitorch_dist/data_parallel/stragglers.py
    return stragglers.train_decentralized(group, method, scenario, X, Y, STEPS, LR, BATCH, EVERY,
                                          BASE_COMPUTE, SLOW)

def mean_loss(flats):
    losses = []
    for flat in flats:
        model = MLP()
        write_flat_(list(model.parameters()), flat)
        with torch.no_grad():
            losses.append(F.cross_entropy(model(X), Y).item())
    return float(np.mean(losses))


# %% [markdown]
# Run the 3 methods in both scenarios on `NET` (pass `trace=False` to `launch`: faster). Store
#
# - `CURVES[scenario][method] = (times, losses)`: two lists, one entry per logged step (12 of them); the
#   time is the simulated time at which the **last** rank logged that step, the loss is `mean_loss` of
#   the 8 ranks' parameters at that step;
# - `TIME_TO_TARGET[scenario][method]`: the first logged time at which the loss is at most `TARGET`
#   (`math.inf` if never);
#
# and plot loss against simulated time, one panel per scenario, one line per method, in `FIG_GOSSIP`.

# %% nbgrader={"grade": false, "grade_id": "stragglers", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
CURVES, TIME_TO_TARGET = {}, {}
for scenario in SCENARIOS:
    CURVES[scenario], TIME_TO_TARGET[scenario] = {}, {}
    for method in METHODS:
        logs = launch(train_decentralized, P, args=(method, scenario), backend="sim", network=NET, trace=False)
        times = [max(logs[r][i][0] for r in range(P)) for i in range(len(logs[0]))]
        losses = [mean_loss([logs[r][i][1] for r in range(P)]) for i in range(len(logs[0]))]
        CURVES[scenario][method] = (times, losses)
        TIME_TO_TARGET[scenario][method] = next((t for t, l in zip(times, losses) if l <= TARGET), math.inf)

FIG_GOSSIP, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained", sharey=True)
for ax, scenario in zip(axes, SCENARIOS):
    for method in METHODS:
        ax.plot(*CURVES[scenario][method], "o-", ms=3, label=method)
    ax.axhline(TARGET, color="k", ls=":", lw=1)
    ax.set(xlabel="simulated seconds", title=scenario)
axes[0].set_ylabel("mean loss of the 8 models")
axes[0].legend()
### END SOLUTION
plt.show()
for scenario in SCENARIOS:
    print(f"{scenario:>17}: " + ", ".join(f"{m} {TIME_TO_TARGET[scenario][m]:.2f} s" for m in METHODS))

# %% nbgrader={"grade": true, "grade_id": "test_stragglers", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
import matplotlib
assert set(CURVES) == set(TIME_TO_TARGET) == set(SCENARIOS)
for _s in SCENARIOS:
    assert set(CURVES[_s]) == set(TIME_TO_TARGET[_s]) == set(METHODS)
    for _m in METHODS:
        _times, _losses = CURVES[_s][_m]
        assert len(_times) == len(_losses) == STEPS // EVERY, f"{_s}, {_m}: one entry per logged step"
        assert all(b > a for a, b in zip(_times, _times[1:])), f"{_s}, {_m}: times must increase"
assert isinstance(FIG_GOSSIP, matplotlib.figure.Figure) and len(FIG_GOSSIP.axes) >= 2
### BEGIN HIDDEN TESTS
for _s in SCENARIOS:
    for _m in METHODS:
        _times, _losses = CURVES[_s][_m]
        _first = next((t for t, l in zip(_times, _losses) if l <= TARGET), math.inf)
        assert TIME_TO_TARGET[_s][_m] == _first, f"C.2: TIME_TO_TARGET[{_s!r}][{_m!r}]"
        assert _losses[-1] < 0.8 * _losses[0], f"C.2: {_m} does not train ({_s}): {_losses}"
# all-reduce with a random straggler: every step waits for a 5x rank, then one ring all-reduce of the model
_model_bytes = 4 * sum(p.numel() for p in MLP().parameters())
_per_step = SLOW * BASE_COMPUTE + cost_model.ring_all_reduce(P, _model_bytes, NET.alpha, NET.beta)
_times = CURVES["random straggler"]["all-reduce"][0]
assert math.isclose(_times[-1] - _times[0], (STEPS - EVERY) * _per_step, rel_tol=1e-3), (
    "C.2: all-reduce's simulated time per step is not the straggler's compute + one all-reduce")
### END HIDDEN TESTS

# %% [markdown]
# ### C.3 When does gossip win? (1 point)
#
# From your measurements: store in `GOSSIP_WINS = {scenario: bool}` whether the faster of D-PSGD and SGP
# reaches `TARGET` in less simulated time than all-reduce, for both scenarios. Then explain to yourself
# why, in each case (think about what one step costs, and how much one step gains).

# %% nbgrader={"grade": false, "grade_id": "gossip_wins", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
GOSSIP_WINS = {s: min(TIME_TO_TARGET[s]["D-PSGD"], TIME_TO_TARGET[s]["SGP"]) < TIME_TO_TARGET[s]["all-reduce"]
               for s in SCENARIOS}
### END SOLUTION
print(GOSSIP_WINS)

# %% nbgrader={"grade": true, "grade_id": "test_gossip_wins", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
assert set(GOSSIP_WINS) == set(SCENARIOS) and all(isinstance(v, (bool, np.bool_)) for v in GOSSIP_WINS.values())
### BEGIN HIDDEN TESTS
assert GOSSIP_WINS["random straggler"], "C.3: with a random straggler, gossip reaches the target first"
for _s in SCENARIOS:
    _t = TIME_TO_TARGET[_s]
    assert GOSSIP_WINS[_s] == (min(_t["D-PSGD"], _t["SGP"]) < _t["all-reduce"]), f"C.3: {_s} disagrees with your times"
### END HIDDEN TESTS

# %% [markdown]
# **To think about (not graded).** In the lecture, a rank that is *always* slow slowed gossip down as much
# as all-reduce. What would you change in D-PSGD or SGP so that a persistently slow worker no longer sets
# everyone's pace, and what would it cost in how well the models agree?
