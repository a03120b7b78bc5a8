# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
#   language_info:
#     name: python
#   title: 'Homework 1: collectives from send/recv'
# ---

# %% [markdown]
# # Homework 1: collectives from send/recv (notebook part)
#
# This notebook is the analysis half of homework 1. The code half is the package: fill in
# `minitorch_dist/collectives/` first (tasks 1.1-1.7; `assignments/hw1/README.md`, public tests with
# `.venv/bin/python -m pytest assignments/hw1/tests -m task1_1` and so on). The cells below call **your** `ping_pong`,
# `fit_alpha_beta` and all-reduces, so parts B and C only work once those do.
#
# Run it from the kit's root (scripts/setup.sh installed your package in the venv):
# `.venv/bin/jupyter lab assignments/hw1/hw1_collectives.ipynb`. The whole notebook runs in well under a minute.
#
# - **Part A** (9 points): the alpha-beta cost model, by hand. No processes.
# - **Part B** (4 points): measure alpha and beta of this machine with your ping-pong.
# - **Part C** (5 points): run your four all-reduces on the simulated network and on real processes,
#   and compare them with the model.
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
from minitorch_dist.collectives import ALL_REDUCES, fit_alpha_beta, ping_pong
from minitorch_dist.collectives.timing import best_of, noise_report

# %matplotlib inline
KB, MB = 1024, 1024 ** 2
ALGORITHMS = ["naive", "tree", "butterfly", "ring"]


# %% [markdown]
# ## Part A: the alpha-beta cost model
#
# A message of n bytes costs α + nβ seconds (α: latency, 1/β: bandwidth). For an all-reduce of n bytes
# per rank on p ranks, counting the messages on the critical path of each algorithm gives:
#
# | algorithm | time |
# |---|---|
# | naive | 2(p-1)(α + nβ) |
# | tree (binomial reduce + broadcast) | 2⌈log₂ p⌉(α + nβ) |
# | butterfly, p a power of two | log₂ p · (α + nβ) |
# | butterfly, other p (fold the extra ranks in and out) | (⌊log₂ p⌋ + 2)(α + nβ) |
# | ring (reduce-scatter + all-gather) | 2(p-1)α + 2(p-1)/p · nβ |
#
# For p = 1 every algorithm costs 0 (no messages).
#
# ### A.1 (3 points)
#
# Write `predicted_time(algorithm, p, n_bytes, alpha, beta)`, returning the predicted time in seconds of
# the named all-reduce (`"naive"`, `"tree"`, `"butterfly"` or `"ring"`). Write the formulas yourself:
# the tests compare your function with `minitorch_dist.cost_model`, so do not call it. Use integer
# arithmetic for the logarithms (`p.bit_length()`), or round carefully: `math.log2` of a large
# power of two is exact, but `math.ceil(math.log2(p))` for other p deserves a thought.

# %% nbgrader={"grade": false, "grade_id": "predicted_time", "locked": false, "schema_version": 3, "solution": true, "task": false}
def predicted_time(algorithm: str, p: int, n_bytes: float, alpha: float, beta: float) -> float:
    ### BEGIN SOLUTION
    if p <= 1:
        return 0.0
    ceil_log2 = (p - 1).bit_length()            # ceil(log2 p) for p >= 2
    floor_log2 = p.bit_length() - 1             # floor(log2 p)
    message = alpha + n_bytes * beta
    if algorithm == "naive":
        return 2 * (p - 1) * message
    if algorithm == "tree":
        return 2 * ceil_log2 * message
    if algorithm == "butterfly":
        rounds = floor_log2 if p == 1 << floor_log2 else floor_log2 + 2
        return rounds * message
    if algorithm == "ring":
        return 2 * (p - 1) * alpha + 2 * (p - 1) / p * n_bytes * beta
    raise ValueError(f"unknown algorithm {algorithm!r}; use one of {ALGORITHMS}")
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_predicted_time", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
# p = 8, 1 MB, alpha = 10 us, 1/beta = 1 GB/s: compare with the cost model
for name in ALGORITHMS:
    mine = predicted_time(name, 8, 1 * MB, 10e-6, 1e-9)
    model = cost_model.ALL_REDUCE_ALGORITHMS[name](8, 1 * MB, 10e-6, 1e-9)
    assert math.isclose(mine, model, rel_tol=1e-9), f"{name}: you predict {mine:.6g} s, the model {model:.6g} s"
assert predicted_time("ring", 1, 1 * MB, 10e-6, 1e-9) == 0
print("A.1: p = 8 agrees with the cost model")
### BEGIN HIDDEN TESTS
import inspect
assert "cost_model" not in inspect.getsource(predicted_time), "A.1: write the formulas, do not call cost_model"
for p in [1, 2, 3, 4, 5, 6, 7, 9, 12, 16, 17, 31, 33, 63, 64, 65, 100, 127, 128, 129, 1000, 1024, 1025, 4096]:
    for n_bytes in [0, 1, 1000, 3 * MB, 1 << 30]:
        for alpha, beta in [(10e-6, 1e-9), (1e-3, 1e-11), (0.0, 2e-10)]:
            for name in ALGORITHMS:
                mine = predicted_time(name, p, n_bytes, alpha, beta)
                model = cost_model.ALL_REDUCE_ALGORITHMS[name](p, n_bytes, alpha, beta)
                assert math.isclose(mine, model, rel_tol=1e-9, abs_tol=1e-15), (name, p, n_bytes, mine, model)
### END HIDDEN TESTS

# %% [markdown]
# ### A.2 (2 points)
#
# Take p = 8, α = 20 µs and β = 1 ns/byte (1 GB/s). Small messages favour the butterfly, large ones the
# ring. Above which message size (in bytes) is the ring faster than the butterfly? Solve the equation
# (a closed form, not a search over a grid), and store the size in `CROSSOVER_BYTES`.

# %% nbgrader={"grade": false, "grade_id": "crossover", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
# butterfly: 3*(alpha + n*beta); ring: 14*alpha + 14/8*n*beta; equal when 11*alpha = 1.25*n*beta
alpha, beta, p = 20e-6, 1e-9, 8
k = math.log2(p)
CROSSOVER_BYTES = (2 * (p - 1) - k) * alpha / ((k - 2 * (p - 1) / p) * beta)
### END SOLUTION
print(f"ring beats butterfly above {CROSSOVER_BYTES:,.0f} bytes")

# %% nbgrader={"grade": true, "grade_id": "test_crossover", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
assert isinstance(CROSSOVER_BYTES, (int, float)) and math.isfinite(CROSSOVER_BYTES) and CROSSOVER_BYTES > 0
### BEGIN HIDDEN TESTS
def _ring_minus_butterfly(n):
    return (cost_model.ring_all_reduce(8, n, 20e-6, 1e-9)
            - cost_model.butterfly_all_reduce(8, n, 20e-6, 1e-9))
assert _ring_minus_butterfly(CROSSOVER_BYTES * 0.995) > 0, "A.2: below your size the ring is still faster"
assert _ring_minus_butterfly(CROSSOVER_BYTES * 1.005) < 0, "A.2: above your size the ring is not yet faster"
### END HIDDEN TESTS

# %% [markdown]
# ### A.3 (2 points)
#
# A ring all-reduce of 64 MB (64 · 2²⁰ bytes) per rank on p = 8 ranks: how many messages does each rank
# send, and how many bytes in total? Store them in `RING_MESSAGES_PER_RANK` and `RING_BYTES_PER_RANK`
# (integers). Then compare with what the naive algorithm's rank 0 sends.

# %% nbgrader={"grade": false, "grade_id": "ring_bytes", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
p, n_bytes = 8, 64 * MB
RING_MESSAGES_PER_RANK = 2 * (p - 1)
RING_BYTES_PER_RANK = 2 * (p - 1) * n_bytes // p
### END SOLUTION
print(f"{RING_MESSAGES_PER_RANK} messages, {RING_BYTES_PER_RANK / MB:.0f} MB per rank; "
      f"the naive root sends {7 * 64} MB")

# %% nbgrader={"grade": true, "grade_id": "test_ring_bytes", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
assert isinstance(RING_MESSAGES_PER_RANK, (int, np.integer)) and isinstance(RING_BYTES_PER_RANK, (int, np.integer))
assert 0 < RING_BYTES_PER_RANK < 8 * 64 * MB
### BEGIN HIDDEN TESTS
_expected = cost_model.traffic("ring_all_reduce", 8, 64 * MB)
assert RING_MESSAGES_PER_RANK == _expected.messages, "A.3: wrong number of messages"
assert RING_BYTES_PER_RANK == _expected.bytes, "A.3: wrong number of bytes"
### END HIDDEN TESTS

# %% [markdown]
# ### A.4 (2 points)
#
# Same network (α = 20 µs, β = 1 ns/byte), now p = 64. Which of the four algorithms is fastest for an
# all-reduce of 1 KB per rank, and which for 64 MB per rank? Store the names (`"naive"`, `"tree"`,
# `"butterfly"` or `"ring"`) in `BEST_1KB` and `BEST_64MB`. You may use your `predicted_time`.

# %% nbgrader={"grade": false, "grade_id": "best_algorithm", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
def _best(n_bytes):
    return min(ALGORITHMS, key=lambda name: predicted_time(name, 64, n_bytes, 20e-6, 1e-9))
BEST_1KB, BEST_64MB = _best(1 * KB), _best(64 * MB)
### END SOLUTION
print("1 KB:", BEST_1KB, "| 64 MB:", BEST_64MB)

# %% nbgrader={"grade": true, "grade_id": "test_best_algorithm", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
assert BEST_1KB in ALGORITHMS and BEST_64MB in ALGORITHMS
### BEGIN HIDDEN TESTS
_times = {n: cost_model.all_reduce_costs(64, n, 20e-6, 1e-9) for n in (1 * KB, 64 * MB)}
assert BEST_1KB == min(ALGORITHMS, key=_times[1 * KB].get), "A.4: not the fastest for 1 KB"
assert BEST_64MB == min(ALGORITHMS, key=_times[64 * MB].get), "A.4: not the fastest for 64 MB"
### END HIDDEN TESTS

# %% [markdown]
# ## Part B: measure α and β of this machine (4 points)
#
# Your `ping_pong(group, sizes_bytes, repeats, warmup, peer)` (task 1.1) bounces buffers between ranks 0 and
# 1 and returns, on rank 0, `{size: one-way seconds}`; `fit_alpha_beta(sizes, seconds)` fits α + nβ to them.
#
# Run `ping_pong` on **2 gloo ranks** (`launch(..., collectives=False)`) for sizes from 1 byte up to at
# least 1 MB (powers of 4 work well; stay at or below 4 MB so that it runs in seconds), keep rank 0's
# dictionary in `MEASURED`, and fit it with your `fit_alpha_beta` into `ALPHA` (seconds) and `BETA`
# (seconds per byte). The tests check that the numbers are plausible for a computer, and (hidden) that
# `ALPHA` and `BETA` fit your `MEASURED` as well as a least-squares fit can.
#
# On a busy laptop these times are noise (an α of milliseconds, small messages slower than large ones):
# measure a few passes and keep the best of each size (`best_of` from `minitorch_dist.collectives.timing`:
# noise only ever adds time). The cell prints a NOTE, with what to do, when the numbers look like noise.

# %% nbgrader={"grade": false, "grade_id": "measure", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
SIZES = [4 ** k for k in range(12)]                 # 1 B .. 4 MB
passes = [launch(ping_pong, 2, args=(SIZES,), kwargs={"repeats": 10, "warmup": 2}, collectives=False)[0]
          for _ in range(3)]
MEASURED = best_of(passes)
ALPHA, BETA = fit_alpha_beta(list(MEASURED), list(MEASURED.values()))
### END SOLUTION
print(f"alpha = {ALPHA * 1e6:.1f} us, " + (f"1/beta = {1 / BETA / 1e9:.2f} GB/s" if BETA > 0 else
      "beta = 0: no size term fits these times (noise; see the NOTE)"))
for note in noise_report([MEASURED]):
    print("NOTE:", note)

# %% nbgrader={"grade": true, "grade_id": "test_measure", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
assert isinstance(MEASURED, dict) and len(set(MEASURED)) >= 4, "MEASURED: at least 4 sizes"
assert min(MEASURED) <= 1 * KB and max(MEASURED) >= 1 * MB, "MEASURED: sizes from <= 1 KB to >= 1 MB"
assert all(math.isfinite(t) and t > 0 for t in MEASURED.values()), "MEASURED: times must be positive"
# on a busy machine the times can be noise, and the fit (alpha, beta >= 0) then puts one of them at 0:
# that is the right fit of those times, so only units and signs are checked here
for name, value in (("ALPHA", ALPHA), ("BETA", BETA)):
    assert isinstance(value, float) and math.isfinite(value) and value >= 0, f"{name} = {value!r}"
assert ALPHA + BETA > 0, "ALPHA and BETA are both 0"
assert ALPHA <= 1e-1, f"ALPHA = {ALPHA:.3g} s is not a plausible latency (at most 100 ms): seconds, not microseconds?"
assert BETA <= 1e-7, f"BETA = {BETA:.3g} s per byte is under 10 MB/s: seconds per byte, not per megabyte?"


# %% nbgrader={"grade": true, "grade_id": "test_measure_fit", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Hidden test (2 points): ALPHA and BETA fit MEASURED.
### BEGIN HIDDEN TESTS
def _relative_rms(a, b, n, t):
    return float(np.sqrt(np.mean(((a + n * b - t) / t) ** 2)))

def _best_fit(n, t):
    # the least relative-squares line with alpha, beta >= 0: unconstrained, or on an edge
    A, y = np.stack([np.ones_like(n), n], axis=1) / t[:, None], np.ones_like(t)
    candidates = [tuple(np.linalg.lstsq(A, y, rcond=None)[0])]
    candidates.append((0.0, float(np.linalg.lstsq(A[:, 1:], y, rcond=None)[0][0])))
    candidates.append((float(np.linalg.lstsq(A[:, :1], y, rcond=None)[0][0]), 0.0))
    feasible = [(a, b) for a, b in candidates if a >= 0 and b >= 0]
    return min(feasible, key=lambda ab: _relative_rms(ab[0], ab[1], n, t))

_n = np.array(list(MEASURED), dtype=float)
_t = np.array(list(MEASURED.values()), dtype=float)
_a, _b = _best_fit(_n, _t)
_mine, _best_rms = _relative_rms(ALPHA, BETA, _n, _t), _relative_rms(_a, _b, _n, _t)
assert _mine <= 1.05 * _best_rms + 1e-3, (
    f"ALPHA, BETA miss MEASURED by {_mine:.3f} (relative rms); a fit reaches {_best_rms:.3f}")
### END HIDDEN TESTS

# %% [markdown]
# How good is a straight line? The plot shows your measurements and the fitted model. Small messages sit on
# α, large ones on nβ; in between, real transports switch protocols (inline messages, then a rendezvous),
# which shows up as steps that one line cannot follow.

# %%
sizes = np.array(sorted(MEASURED), dtype=float)
fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
ax.plot(sizes, [MEASURED[int(n)] for n in sizes], "o", label="ping-pong (one way)")
ax.plot(sizes, ALPHA + sizes * BETA, "-", label=f"alpha + n*beta: {ALPHA * 1e6:.0f} us, "
        + (f"{1 / BETA / 1e9:.2f} GB/s" if BETA > 0 else "beta = 0"))
ax.set(xscale="log", yscale="log", xlabel="message size (bytes)", ylabel="seconds", title="gloo, 2 ranks")
ax.legend(fontsize="small")
plt.show()


# %% [markdown]
# ## Part C: your all-reduces against the model (5 points)
#
# ### C.1 On the simulated network (2 points)
#
# On `backend="sim"` every message costs exactly α + nβ of simulated time (`SimNetwork(alpha, beta)`), so an
# algorithm that sends what it should, when it should, takes exactly the model's time: the `sim_time` of the
# run. An algorithm that waits for something it need not wait for (a send posted late, a round split in two)
# comes out slower.
#
# Run each of your four all-reduces on p = 64 simulated ranks with 64 KB per rank (16,384 float32), on
# `SimNetwork(alpha=20e-6, beta=1e-9)`, with `collectives=False`. Store each run's `sim_time` in
# `SIM_TIMES = {name: seconds}`. The test compares them with the cost model.

# %% nbgrader={"grade": false, "grade_id": "sim_times", "locked": false, "schema_version": 3, "solution": true, "task": false}
def all_reduce_ones(group, name, n_elems):
    x = torch.ones(n_elems)
    ALL_REDUCES[name](x, group)
    return x[0].item()

### BEGIN SOLUTION
SIM_TIMES = {}
for name in ALGORITHMS:
    runs = launch(all_reduce_ones, 64, args=(name, 16384), backend="sim",
                  network=SimNetwork(alpha=20e-6, beta=1e-9), collectives=False, trace=False)
    assert list(runs) == [64.0] * 64
    SIM_TIMES[name] = runs.sim_time
### END SOLUTION
for name, seconds in SIM_TIMES.items():
    print(f"{name:>10}: {seconds * 1e3:8.3f} ms simulated")

# %% nbgrader={"grade": true, "grade_id": "test_sim_times", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
assert set(SIM_TIMES) == set(ALGORITHMS)
for name in ALGORITHMS:
    model = cost_model.ALL_REDUCE_ALGORITHMS[name](64, 64 * KB, 20e-6, 1e-9)
    assert math.isclose(SIM_TIMES[name], model, rel_tol=1e-6), (
        f"{name}: {SIM_TIMES[name] * 1e3:.4f} ms on sim, the model says {model * 1e3:.4f} ms")


# %% [markdown]
# ### C.2 On real processes (3 points)
#
# `time_all_reduce(name, p, n_bytes)` (given) times one of your all-reduces on `p` gloo ranks: each
# repetition starts with a barrier; a repetition lasts until its slowest rank finishes; it returns the
# median over repetitions, after one warm-up run.
#
# Time all four algorithms on `P = 4` ranks for at least three message sizes from 4 KB to 4 MB. Store
# the times in `TIMES = {name: {n_bytes: seconds}}`, the model's predictions with your measured `ALPHA` and
# `BETA` in `PREDICTED` (same layout, from `predicted_time`), and draw both on one log-log figure, one
# colour per algorithm, with dots for measurements and lines for predictions. Keep the figure in `FIG`.
# Then look at it: which algorithm wins at each size, and does the model say so too?

# %% nbgrader={"grade": false, "grade_id": "timing_helper", "locked": true, "schema_version": 3, "solution": false, "task": false}
def _timed_all_reduce(group, name, n_elems, repeats):
    x = torch.ones(n_elems)
    seconds = []
    for _ in range(repeats + 1):                       # the first run is a warm-up
        x.fill_(1.0)
        group.barrier()
        start = group.now()
        ALL_REDUCES[name](x, group)
        seconds.append(group.now() - start)
        if n_elems and x[0].item() != group.size:
            raise AssertionError(f"{name}: rank {group.rank} got {x[0].item()} instead of {group.size}")
    return seconds[1:]

def time_all_reduce(name, p, n_bytes, repeats=5):
    runs = launch(_timed_all_reduce, p, args=(name, n_bytes // 4, repeats), collectives=False)
    slowest = np.max(np.array(list(runs)), axis=0)      # (repeats,): the last rank to finish
    return float(np.median(slowest))


# %% nbgrader={"grade": false, "grade_id": "all_reduce_times", "locked": false, "schema_version": 3, "solution": true, "task": false}
P = 4
### BEGIN SOLUTION
SIZES_C = [4 * KB, 16 * KB, 64 * KB, 256 * KB, 1 * MB, 4 * MB]
TIMES = {name: {n: time_all_reduce(name, P, n) for n in SIZES_C} for name in ALGORITHMS}
PREDICTED = {name: {n: predicted_time(name, P, n, ALPHA, BETA) for n in SIZES_C} for name in ALGORITHMS}

FIG, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
for name, color in zip(ALGORITHMS, ["tab:gray", "tab:green", "tab:purple", "tab:blue"]):
    ax.plot(SIZES_C, list(TIMES[name].values()), "o", color=color, label=f"{name} measured")
    ax.plot(SIZES_C, list(PREDICTED[name].values()), "-", color=color, alpha=0.6, label=f"{name} model")
ax.set(xscale="log", yscale="log", xlabel="message size (bytes)", ylabel="seconds",
       title=f"all-reduce on {P} gloo ranks: measured vs alpha-beta model")
ax.legend(fontsize="small", ncol=2)
### END SOLUTION
plt.show()

# %% nbgrader={"grade": true, "grade_id": "test_all_reduce_times", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
import matplotlib
assert set(TIMES) == set(ALGORITHMS) and set(PREDICTED) == set(ALGORITHMS)
for name in ALGORITHMS:
    assert len(TIMES[name]) >= 3 and set(TIMES[name]) == set(PREDICTED[name]), f"{name}: sizes"
    assert all(math.isfinite(t) and t > 0 for t in TIMES[name].values()), f"{name}: times must be positive"
    for n_bytes, t in PREDICTED[name].items():
        assert math.isclose(t, predicted_time(name, P, n_bytes, ALPHA, BETA), rel_tol=1e-9), f"{name}, {n_bytes}"
assert isinstance(FIG, matplotlib.figure.Figure)
_lines = [line for ax in FIG.axes for line in ax.get_lines()]
assert len(_lines) >= 8, f"FIG has {len(_lines)} lines; expected measured and predicted for 4 algorithms"
assert all(ax.get_xscale() == "log" and ax.get_yscale() == "log" for ax in FIG.axes if ax.get_lines())
### BEGIN HIDDEN TESTS
for name in ALGORITHMS:
    _small, _large = min(TIMES[name]), max(TIMES[name])
    assert _large >= 64 * _small, f"{name}: measure sizes at least 64x apart"
    assert any(not math.isclose(TIMES[name][n], PREDICTED[name][n], rel_tol=1e-6) for n in TIMES[name]), \
        f"{name}: TIMES holds the model's predictions; time the all-reduces with time_all_reduce"
### END HIDDEN TESTS

# %% [markdown]
# **To think about (not graded).** On this machine all ranks share a few CPU cores and one memory bus, so
# the "network" is memory copies and the ranks compete for it. Where does the model fit your measurements,
# and where does it miss? Which algorithm would you pick for 1 KB and for 64 MB here, and would the answer
# change on a cluster with α = 20 µs and 1/β = 12.5 GB/s?

# %% [markdown]
# ## Part D (optional, not graded): your α and β across real node boundaries
#
# Parts B and C measured one machine's memory copies. On a Linux machine where you are root, the kit
# builds a small cluster: each node a network namespace with its own hostname and address, its link to
# a switch shaped to a bandwidth you choose. From the kit's root, in a terminal:
#
# ```bash
# sudo .venv/bin/python -m minitorch_dist.cluster up --nodes 4 --bandwidth 100mbit
# sudo .venv/bin/python -m minitorch_dist.cluster status      # a measured round trip between nodes
# ```
#
# then run the next cell as root (or the command it prints, in the terminal). It runs
# `examples/cluster/link_model.py` under `torchrun`, one rank a node, with **your** `ping_pong` and
# `fit_alpha_beta` (node0 ↔ node1) and your naive, tree and ring all-reduce on the 4 nodes, against the
# cost model with your measured α and the configured β = 8 / 10⁸ s per byte.
#
# 1. Does your fit give back 100 Mbit/s within 10%? The exercise measures 8-512 B messages (α) and
#    messages of 30 ms of traffic and more (β), not the sizes between: the shaper (`tc htb`) lets the
#    first packet of a burst cross at once and charges the link afterwards, so a message of a few KB
#    crosses faster than the link allows. Try your fit on Part B's full sweep of sizes on the cluster
#    (`sudo .venv/bin/python -m minitorch_dist.cluster torchrun assignments/hw1/ping_pong.py`): which sizes
#    pull β?
# 2. Your α there is tens of µs although the links add no delay. Where does it come from?
# 3. Which all-reduce lands closest to the model? Run it again with `up --bandwidth 20mbit` (after
#    `down`): at 100 Mbit/s on a 2-core machine the ring, which uses every link both ways at once,
#    can be held back by the CPU rather than the links.
# 4. `sudo .venv/bin/python -m minitorch_dist.cluster down` when you are done.
#
# **Without root (or on macOS/Windows):** the simulator takes the same α and β:
# `launch(fn, 4, backend="sim", network=SimNetwork(alpha=70e-6, beta=8e-8))` runs your all-reduces on
# a 100 Mbit/s network with 70 µs of latency, in virtual time.

# %%
import os
import subprocess
import sys

import minitorch_dist
from minitorch_dist.cluster import load as load_cluster

KIT = os.path.dirname(os.path.dirname(os.path.abspath(minitorch_dist.__file__)))
LINK_MODEL = os.path.join(KIT, "examples", "cluster", "link_model.py")
CLUSTER = load_cluster()                      # the record of `cluster up` (default name), or None
COMMAND = f"sudo .venv/bin/python -m minitorch_dist.cluster torchrun {os.path.relpath(LINK_MODEL, KIT)}"
if CLUSTER is None or CLUSTER.phase != "up" or os.geteuid() != 0 or not os.path.exists(LINK_MODEL):
    print("Part D needs the emulated cluster (root on Linux): start it with\n"
          "  sudo .venv/bin/python -m minitorch_dist.cluster up --nodes 4 --bandwidth 100mbit\n"
          f"then run this cell as root, or in a terminal at the kit's root: {COMMAND}\n"
          "Without root: launch(fn, 4, backend=\"sim\", network=SimNetwork(alpha=70e-6, beta=8e-8)).")
else:
    done = subprocess.run([sys.executable, "-m", "minitorch_dist.cluster", "torchrun", LINK_MODEL],
                          cwd=KIT, capture_output=True, text=True, timeout=600)
    print("\n".join(line for line in done.stdout.splitlines()
                    if line.startswith("[node0]") and "CLUSTER-RESULT" not in line) or done.stdout[-3000:])
