# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
#   language_info:
#     name: python
#   title: 'Homework 5: pipeline parallelism'
# ---

# %% [markdown]
# # Homework 5: pipeline parallelism (notebook part)
#
# This notebook is the analysis half of homework 5. The code half is the package: fill in
# `minitorch_dist/pipeline/` first (tasks 5.1-5.5; `assignments/hw5/README.md`, public tests with
# `.venv/bin/python -m pytest assignments/hw5/tests -m task5_2` and so on). Parts B and C call **your** `gpipe_step`,
# `one_f_one_b_step` and checkpointing, so they only work once those do.
#
# Run it from the kit's root (scripts/setup.sh installed your package in the venv):
# `.venv/bin/jupyter lab assignments/hw5/hw5_pipeline.ipynb`. The whole notebook runs in well under a minute.
#
# - **Part A** (6 points): the bubble, the messages and the memory of a pipeline, by hand. No processes.
# - **Part B** (3 points): your GPipe on gloo processes against the model trained in one process.
# - **Part C** (5 points): on the simulated network, speed-up against m and p, and activation memory
#   against m with and without checkpointing.
#
# Write your answers where it says `YOUR CODE HERE`, replacing the `raise NotImplementedError()`.
# Cells with tests check your answers; some tests are hidden and run when the notebook is graded.
# Before you submit, restart the kernel and run all cells (*Kernel → Restart & Run All*).

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
import math
import weakref

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from minitorch_dist import SimNetwork, launch
from minitorch_dist.models import MLP
from minitorch_dist.pipeline import PipelineStage, gpipe_step, one_f_one_b_step, pipeline_spec, stages_of

# %matplotlib inline
T_F, T_B = 1e-3, 2e-3                       # sim: seconds per stage and micro-batch, forward and backward
FREE = SimNetwork(alpha=0.0, beta=0.0)      # sim: messages cost nothing


# %% [markdown]
# ## Part A: a pipeline by hand
#
# Notation: p stages of equal cost, m micro-batches per batch, t_f and t_b the forward and backward time of
# one micro-batch on one stage.
#
# ### A.1 The bubble (2 points)
#
# - Write `bubble_fraction(p, m)`: the fraction of a GPipe step during which a stage idles, and
#   `ideal_speedup(p, m)`: a GPipe step's speed-up over one device that runs all p stages itself (free
#   messages). For p = 1 there is no bubble.
# - Store in `MIN_M_10_PERCENT` the smallest m for which the bubble of p = 8 stages is at most 10%.
#   Compute it with your function (e.g. a search); don't just write a number.

# %% nbgrader={"grade": false, "grade_id": "bubble", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
def bubble_fraction(p: int, m: int) -> float:
    return (p - 1) / (m + p - 1)

def ideal_speedup(p: int, m: int) -> float:
    return m * p / (m + p - 1)

MIN_M_10_PERCENT = 1
while bubble_fraction(8, MIN_M_10_PERCENT) > 0.1:
    MIN_M_10_PERCENT += 1
### END SOLUTION
print(f"p = 8: bubble {bubble_fraction(8, 8):.2f} at m = 8, speed-up {ideal_speedup(8, 8):.2f}; "
      f"bubble <= 10% from m = {MIN_M_10_PERCENT}")

# %% nbgrader={"grade": true, "grade_id": "test_bubble", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
assert bubble_fraction(1, 7) == 0 and ideal_speedup(1, 7) == 1
assert math.isclose(bubble_fraction(2, 1), 0.5)
### BEGIN HIDDEN TESTS
for _p in range(1, 17):
    for _m in (1, 2, 3, 8, 31, 100):
        assert math.isclose(bubble_fraction(_p, _m), (_p - 1) / (_m + _p - 1), abs_tol=1e-12), ("A.1", _p, _m)
        assert math.isclose(ideal_speedup(_p, _m), _m * _p / (_m + _p - 1), rel_tol=1e-12), ("A.1", _p, _m)
assert MIN_M_10_PERCENT == 63, "A.1: MIN_M_10_PERCENT"
### END HIDDEN TESTS

# %% [markdown]
# ### A.2 Messages and bytes (2 points)
#
# A transformer pipeline sends, per micro-batch, its (b/m, s, h) activation across each of the p - 1
# boundaries, and the gradient of the same shape back.
#
# - Write `pipeline_messages(p, m)`: point-to-point messages of one training step, all ranks together.
# - Write `pipeline_bytes(p, b, s, h, element_bytes)`: bytes those messages carry, all ranks together.
#   Does it depend on m?
# - Store in `PP_OVER_TP_BYTES` the ratio of a pipeline's bytes per step (p = 8 stages of a 96-layer model)
#   to tensor parallelism's (TP size 8 over the same 96 layers: every rank sends 4 ring all-reduces of
#   (b, s, h) per layer, 2 (p - 1)/p times the all-reduced bytes each; count all 8 ranks), for b = 8,
#   s = 2048, h = 12288 and 2-byte elements.

# %% nbgrader={"grade": false, "grade_id": "messages", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
def pipeline_messages(p: int, m: int) -> int:
    return 2 * (p - 1) * m

def pipeline_bytes(p: int, b: int, s: int, h: int, element_bytes: int) -> int:
    return 2 * (p - 1) * b * s * h * element_bytes

_tp_bytes = 8 * 96 * 4 * 2 * (8 - 1) / 8 * 8 * 2048 * 12288 * 2
PP_OVER_TP_BYTES = pipeline_bytes(8, 8, 2048, 12288, 2) / _tp_bytes
### END SOLUTION
print(f"p = 4, m = 8: {pipeline_messages(4, 8)} messages; pipeline / tensor parallel bytes: {PP_OVER_TP_BYTES:.5f}")

# %% nbgrader={"grade": true, "grade_id": "test_messages", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
assert pipeline_messages(1, 5) == 0 and pipeline_bytes(1, 2, 3, 4, 4) == 0
### BEGIN HIDDEN TESTS
for _p in (1, 2, 3, 8):
    for _m in (1, 4, 9):
        assert pipeline_messages(_p, _m) == 2 * (_p - 1) * _m, ("A.2", _p, _m)
    assert pipeline_bytes(_p, 6, 5, 7, 2) == 2 * (_p - 1) * 6 * 5 * 7 * 2, ("A.2 bytes", _p)
assert math.isclose(PP_OVER_TP_BYTES, 2 * 7 / (96 * 4 * 2 * 7), rel_tol=1e-9), "A.2: PP_OVER_TP_BYTES"
### END HIDDEN TESTS

# %% [markdown]
# ### A.3 Activations alive (2 points)
#
# - Write `live_microbatches(schedule, j, p, m)`: the most micro-batches whose activations stage j
#   (0-based) holds at once, for `schedule` "gpipe" or "1f1b".
# - Store in `GPIPE_OVER_1F1B` the ratio of the two on stage 0 for p = 8, m = 64.

# %% nbgrader={"grade": false, "grade_id": "live", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
def live_microbatches(schedule: str, j: int, p: int, m: int) -> int:
    return m if schedule == "gpipe" else min(p - j, m)

GPIPE_OVER_1F1B = live_microbatches("gpipe", 0, 8, 64) / live_microbatches("1f1b", 0, 8, 64)
### END SOLUTION
print(f"p = 8, m = 64, stage 0: GPipe keeps {GPIPE_OVER_1F1B:.0f}x the activations of 1F1B")

# %% nbgrader={"grade": true, "grade_id": "test_live", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
assert live_microbatches("gpipe", 0, 4, 6) == 6
### BEGIN HIDDEN TESTS
for _p in (1, 2, 4, 8):
    for _m in (1, 3, 8, 20):
        for _j in range(_p):
            assert live_microbatches("gpipe", _j, _p, _m) == _m, ("A.3 gpipe", _j, _p, _m)
            assert live_microbatches("1f1b", _j, _p, _m) == min(_p - _j, _m), ("A.3 1f1b", _j, _p, _m)
assert GPIPE_OVER_1F1B == 8, "A.3: GPIPE_OVER_1F1B"
### END HIDDEN TESTS

# %% [markdown]
# ## Part B: your GPipe on real processes (3 points)
#
# `make_stage(group, m, ...)` (given) builds, on every rank, the same float64 MLP with one layer per stage,
# keeps this rank's stage and returns `(stage, x, y, optimizer)`: a batch of 4 m samples and SGD with
# learning rate 0.1. `one_process_step(p, m)` (given) trains the whole model one step on the whole batch
# and returns its parameters, stage by stage.
#
# Write `check_gpipe(group, m)`: one `gpipe_step`, then return a dict with `"diff"`, the largest absolute
# difference between this stage's parameters and the same stage of `one_process_step`, and `"sent"`, the
# point-to-point messages this rank sent (`group.counters.messages_sent`). Store
# `GPIPE_DIFF = {(p, m): the largest "diff" over the ranks}` and `GPIPE_MESSAGES = {(p, m): messages of
# all ranks}` for p = 2, 4 and m = 1, 3, 8.

# %% nbgrader={"grade": false, "grade_id": "gpipe_helper", "locked": true, "schema_version": 3, "solution": false, "task": false}
def make_stage(group, m, checkpoint=False, stage_time=None, width=8):
    stages = stages_of(MLP(width, width, 4, depth=max(group.size - 1, 1), seed=0).double(), group.size)
    gen = torch.Generator().manual_seed(m)
    x = torch.randn(4 * m, width, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 4, (4 * m,), generator=gen)
    spec = pipeline_spec(stages, x[:4])[group.rank]
    stage = PipelineStage(stages[group.rank], group, spec, loss_fn=F.cross_entropy, checkpoint=checkpoint,
                          stage_time=stage_time)
    return stage, x, y, torch.optim.SGD(stage.parameters(), lr=0.1)

def one_process_step(p, m, width=8):
    model = MLP(width, width, 4, depth=max(p - 1, 1), seed=0).double()
    gen = torch.Generator().manual_seed(m)
    x = torch.randn(4 * m, width, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 4, (4 * m,), generator=gen)
    F.cross_entropy(model(x), y).backward()
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    return [[q.detach() for q in stage.parameters()] for stage in stages_of(model, p)]


# %% nbgrader={"grade": false, "grade_id": "check_gpipe", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
def check_gpipe(group, m):
    stage, x, y, opt = make_stage(group, m)
    gpipe_step(stage, x, y, opt, m)
    want = one_process_step(group.size, m)[group.rank]
    diff = max((a - b).abs().max().item() for a, b in zip(stage.parameters(), want))
    return {"diff": diff, "sent": group.counters.messages_sent}

GPIPE_DIFF, GPIPE_MESSAGES = {}, {}
for _p in (2, 4):
    for _m in (1, 3, 8):
        _res = launch(check_gpipe, _p, args=(_m,))
        GPIPE_DIFF[_p, _m] = max(r["diff"] for r in _res)
        GPIPE_MESSAGES[_p, _m] = sum(r["sent"] for r in _res)
### END SOLUTION
for key in GPIPE_DIFF:
    print(f"p = {key[0]}, m = {key[1]}: largest difference {GPIPE_DIFF[key]:.1e}, {GPIPE_MESSAGES[key]} messages")

# %% nbgrader={"grade": true, "grade_id": "test_check_gpipe", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
assert set(GPIPE_DIFF) == set(GPIPE_MESSAGES) == {(p, m) for p in (2, 4) for m in (1, 3, 8)}
### BEGIN HIDDEN TESTS
assert all(0 <= v < 1e-12 for v in GPIPE_DIFF.values()), f"B: {GPIPE_DIFF}"
assert all(GPIPE_MESSAGES[p, m] == 2 * (p - 1) * m for p, m in GPIPE_MESSAGES), f"B: {GPIPE_MESSAGES}"

def _hidden_check(group):
    stage, x, y, opt = make_stage(group, 5)
    gpipe_step(stage, x, y, opt, 5)
    want = one_process_step(group.size, 5)[group.rank]
    return max((a - b).abs().max().item() for a, b in zip(stage.parameters(), want))

assert max(launch(_hidden_check, 3)) < 1e-12, "B: your gpipe_step differs from one process at p = 3, m = 5"
### END HIDDEN TESTS

# %% [markdown]
# ## Part C: on the simulated network (5 points)
#
# ### C.1 Speed-up against m and p (3 points)
#
# On `sim`, `make_stage(..., stage_time=(T_F, T_B))` makes each stage charge T_F per forward and T_B per
# backward of a micro-batch to its rank's clock, and `FREE` makes messages cost nothing. Write
# `sim_step(group, m, step)`: build the stage, `group.barrier()`, note `group.now()`, run `step` (your
# `gpipe_step` or `one_f_one_b_step`) and return the simulated seconds it took. Store
#
# - `SIM_SPEEDUP = {(p, m): one device's time m p (T_F + T_B) / the slowest rank's step time}` with GPipe,
#   for p = 2, 4, 8 and m = 1, 2, 4, 8, 16, 32;
# - `SIM_1F1B_TIME = {(p, m): step time}` with 1F1B, for p = 4 and the same m;
#
# and plot the speed-up against m, one line per p, with `ideal_speedup` drawn over it, in `FIG_SPEEDUP`.

# %% nbgrader={"grade": false, "grade_id": "sim_speedup", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
def sim_step(group, m, step):
    stage, x, y, opt = make_stage(group, m, stage_time=(T_F, T_B))
    group.barrier()
    start = group.now()
    step(stage, x, y, opt, m)
    return group.now() - start

MS = (1, 2, 4, 8, 16, 32)
SIM_SPEEDUP, SIM_1F1B_TIME = {}, {}
for _p in (2, 4, 8):
    for _m in MS:
        _took = max(launch(sim_step, _p, args=(_m, gpipe_step), backend="sim", network=FREE, trace=False))
        SIM_SPEEDUP[_p, _m] = _m * _p * (T_F + T_B) / _took
for _m in MS:
    SIM_1F1B_TIME[4, _m] = max(launch(sim_step, 4, args=(_m, one_f_one_b_step), backend="sim", network=FREE,
                                      trace=False))

FIG_SPEEDUP, ax = plt.subplots(figsize=(6.5, 4), layout="constrained")
for _p in (2, 4, 8):
    line, = ax.plot(MS, [SIM_SPEEDUP[_p, m] for m in MS], "o", label=f"p = {_p}, sim")
    ax.plot(MS, [ideal_speedup(_p, m) for m in MS], "-", color=line.get_color())
ax.set(xscale="log", xlabel="micro-batches m", ylabel="speed-up over one device", title="GPipe on sim")
ax.legend()
### END SOLUTION
plt.show()
print({k: round(v, 3) for k, v in SIM_SPEEDUP.items() if k[0] == 8})

# %% nbgrader={"grade": true, "grade_id": "test_sim_speedup", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
import matplotlib
assert set(SIM_SPEEDUP) == {(p, m) for p in (2, 4, 8) for m in (1, 2, 4, 8, 16, 32)}
assert set(SIM_1F1B_TIME) == {(4, m) for m in (1, 2, 4, 8, 16, 32)}
assert isinstance(FIG_SPEEDUP, matplotlib.figure.Figure)
### BEGIN HIDDEN TESTS
for (_p, _m), _s in SIM_SPEEDUP.items():
    assert math.isclose(_s, _m * _p / (_m + _p - 1), rel_tol=1e-6), f"C.1: SIM_SPEEDUP[{_p, _m}] = {_s}"
for (_p, _m), _t in SIM_1F1B_TIME.items():
    assert math.isclose(_t, (_m + _p - 1) * (T_F + T_B), rel_tol=1e-6), f"C.1: SIM_1F1B_TIME[{_p, _m}] = {_t}"
### END HIDDEN TESTS

# %% [markdown]
# ### C.2 Memory against m, with and without checkpointing (2 points)
#
# `SavedBytes` (given) counts the bytes autograd saves for backward while they are alive: `with SavedBytes()
# as meter:` around a step, then `meter.peak`. Write `peak_saved(group, m, step, checkpoint)`: build the
# stage (with `checkpoint`), run one `step` under a `SavedBytes` and return its peak. Store `PEAK = {(name,
# m): [peak of each stage]}` for p = 4, m = 1, 2, 4, 8 and the three names "gpipe", "1f1b", "gpipe+ckpt"
# (on sim), and plot stage 0's peak against m for the three in `FIG_MEMORY`.

# %% nbgrader={"grade": false, "grade_id": "memory_helper", "locked": true, "schema_version": 3, "solution": false, "task": false}
class _Box:
    def __init__(self, tensor):
        self.tensor = tensor

class SavedBytes:
    def __init__(self):
        self.live = self.peak = 0

    def _pack(self, t):
        box, n = _Box(t), t.numel() * t.element_size()
        self.live += n
        self.peak = max(self.peak, self.live)
        weakref.finalize(box, self._free, n)
        return box

    def _free(self, n):
        self.live -= n

    def __enter__(self):
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda box: box.tensor)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        self._hooks.__exit__(*exc)


# %% nbgrader={"grade": false, "grade_id": "peak_memory", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
def peak_saved(group, m, step, checkpoint):
    stage, x, y, opt = make_stage(group, m, checkpoint=checkpoint)
    with SavedBytes() as meter:
        step(stage, x, y, opt, m)
    return meter.peak

RUNS = {"gpipe": (gpipe_step, False), "1f1b": (one_f_one_b_step, False), "gpipe+ckpt": (gpipe_step, True)}
PEAK = {}
for _name, (_step, _ckpt) in RUNS.items():
    for _m in (1, 2, 4, 8):
        PEAK[_name, _m] = list(launch(peak_saved, 4, args=(_m, _step, _ckpt), backend="sim", trace=False))

FIG_MEMORY, ax = plt.subplots(figsize=(6.5, 4), layout="constrained")
for _name in RUNS:
    ax.plot((1, 2, 4, 8), [PEAK[_name, m][0] for m in (1, 2, 4, 8)], "o-", label=_name)
ax.set(xlabel="micro-batches m", ylabel="peak saved bytes, stage 0", title="p = 4")
ax.legend()
### END SOLUTION
plt.show()
for key, peaks in PEAK.items():
    print(key, peaks)

# %% nbgrader={"grade": true, "grade_id": "test_peak_memory", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
assert set(PEAK) == {(n, m) for n in ("gpipe", "1f1b", "gpipe+ckpt") for m in (1, 2, 4, 8)}
assert all(len(v) == 4 for v in PEAK.values())
### BEGIN HIDDEN TESTS
for _j in range(4):
    _one = PEAK["gpipe", 1][_j]
    for _m in (1, 2, 4, 8):
        assert PEAK["gpipe", _m][_j] == _m * _one, ("C.2 gpipe", _j, _m, PEAK["gpipe", _m])
        assert PEAK["1f1b", _m][_j] == min(4 - _j, _m) * _one, ("C.2 1f1b", _j, _m, PEAK["1f1b", _m])
        assert PEAK["gpipe+ckpt", _m][_j] == _one, ("C.2 checkpointing", _j, _m, PEAK["gpipe+ckpt", _m])
### END HIDDEN TESTS

# %% [markdown]
# **To think about (not graded).** Checkpointing costs one more forward per micro-batch. With t_b = 2 t_f,
# by how much does it stretch the step? When would you rather take more micro-batches with 1F1B than
# checkpoint?
