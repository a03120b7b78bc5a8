"""Hidden tests of homework 5: promises of each task's contract that the training checks do not show
(assignments/hw5/README.md, "What your code must handle" and the docstrings).

5.1: backward_step adds to a .grad that already holds values (two micro-batches onto a pre-filled
     .grad, p = 1); the boundary driven in 1F1B order by the provided executor on sim (p = 2, 3, m = 3;
     rendezvous messages, each stage charging its time through stage.run) neither deadlocks nor takes
     longer than (m+p-1)(t_f+t_b), and trains exactly.
5.2: gpipe_step at p = 2 onto a pre-filled .grad: returns None on stage 0, leaves this step's gradient
     (only this step's) in .grad, and the step's parameters.
5.3: warmup_forwards(j, p, m) for p <= 5 and m in 1..6: min(p - j - 1, m).
5.4: gpipe_schedule and one_f_one_b_schedule give p distinct lane lists.
5.5: a checkpointed forward leaves autograd on, keeps only (x, target, loss_scale) per micro-batch, and
     the forward and backward draw nothing from (nor rewind) the global torch RNG.
5.6: replica_share is replica k's contiguous k-th share; average_gradients is one all_reduce (p = 4,
     2 stages x 2 replicas).
5.7: interleaved_schedule's forwards and backwards in the README's order; m a multiple of m // p is
     accepted (p = 3, m = 8).
5.8: embed_backward adds to a pre-filled weight.grad; head_forward_backward calls all_reduce twice (max,
     then sum) on every rank.

The rank code is in this file (sent to the ranks by value); the verdicts are taken here.
"""

from __future__ import annotations

import functools

import pytest
import torch

from assignments.common.rank_runs import fail
from assignments.hw5.tests.hw5_setup import (LR, MICRO, MOMENTUM, STAGE_TIME, STEPS, batch, build_model, loss_fn,
                                             reference)
from autograder.hw5.contract_ranks import (PREFILL, SEED, WARMUP_SIZES, _check_all, _differs, _model_grads,
                                           _ranks, _run)


@pytest.mark.task5_1
@pytest.mark.points(3)
def test_contract_backward_step_accumulates_into_grad():
    got = _ranks("backward_accumulates", 1)[0]["grads"]
    problems = []
    for name, want in _model_grads(2, 1)[0].items():
        bad = _differs(got[name], want + PREFILL)
        if bad:
            problems.append(f"p=1, micro-batches 0 and 1 (loss scale 1/2) after .grad was set to {PREFILL}: {name}.grad "
                            f"{bad} from {PREFILL} + the gradient: backward_step must add to .grad (autograd "
                            "accumulates), never assign it, on every micro-batch")
    _check_all(problems)


@pytest.mark.bound_to("test_boundary_send_recv_forward_backward")
@pytest.mark.task5_1
@pytest.mark.points(4)
@pytest.mark.time_limit(60)
@pytest.mark.parametrize("p", [2, 3])
def test_contract_boundary_in_1f1b_order_on_sim(p):
    m, per = 3, sum(STAGE_TIME)
    got, err = _run("boundary_1f1b_sim", p, m, free=True)
    if err is not None:
        fail(f"the provided executor running 1F1B's order with your boundary functions on sim (p={p}, m={m}; a send "
             f"waits for its receive) failed: are your sends non-blocking (isend, waited for by the caller)?\n{err}")
    problems = []
    for s in range(STEPS):
        took = max(r["times"][s][1] for r in got) - min(r["times"][s][0] for r in got)
        if abs(took - (m + p - 1) * per) > 1e-9:
            problems.append(f"p={p}, m={m}, step {s}: took {took:.6g} s simulated; expected (m+p-1)(t_f+t_b) = "
                            f"{(m + p - 1) * per:.6g} s: forward_step must run the stage with stage.run(x), which "
                            "charges its forward and backward time")
    for j, (rep, want) in enumerate(zip(got, reference("mlp", p, m))):
        for name, value in want.items():
            bad = _differs(rep["params"][name], value)
            if bad:
                problems.append(f"p={p}, m={m}, stage {j}: {name} {bad} from the whole model's after {STEPS} steps")
    _check_all(problems)


# -- 5.2 ----------------------------------------------------------------------------------------------------
@pytest.mark.task5_2
@pytest.mark.points(3)
def test_contract_gpipe_grad_is_this_steps_gradient():
    m, p = 3, 2
    got = _ranks("gpipe_step", p, m)
    want_grads = _model_grads(m, p)
    problems = []
    for j, rep in enumerate(got):
        for name, want in want_grads[j].items():
            bad = _differs(rep["grads"][name], want)
            if bad:
                problems.append(f"p={p}, m={m}, stage {j}: after gpipe_step (its .grad set to {PREFILL} before), "
                                f"{name}.grad {bad} from this batch's gradient: zero the gradients once, at the "
                                "start of the step, and leave them in .grad after it")
        model_after = _after_one_step(p, m)[j]
        for name, want in model_after.items():
            bad = _differs(rep["params"][name], want)
            if bad:
                problems.append(f"p={p}, m={m}, stage {j}: {name} after the step {bad} from the whole model's "
                                f"(a .grad left from before the step must not count)")
    _check_all(problems)


@functools.lru_cache(maxsize=None)
def _after_one_step(p: int, m: int) -> list[dict[str, torch.Tensor]]:
    from minitorch_dist.pipeline import stages_of
    model = build_model("mlp")
    x, y = batch("mlp", MICRO["mlp"] * m)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    loss_fn(model(x), y).backward()
    opt.step()
    return [{n: prm.detach().clone() for n, prm in stage.named_parameters()} for stage in stages_of(model, p)]


@pytest.mark.task5_2
@pytest.mark.points(2)
def test_contract_gpipe_returns_none_off_the_last_stage():
    m, p = 3, 2
    got = _ranks("gpipe_step", p, m)
    problems = [f"p={p}, m={m}: gpipe_step returned {rep['returned']} on stage {j}; expected None on every stage "
                "but the last" for j, rep in enumerate(got[:-1]) if rep["returned"] is not None]
    if got[-1]["returned"] is None:
        problems.append(f"p={p}, m={m}: gpipe_step returned None on the last stage; expected the batch's loss")
    _check_all(problems)


# -- 5.3 ----------------------------------------------------------------------------------------------------
@pytest.mark.task5_3
@pytest.mark.points(2)
def test_contract_warmup_forwards_is_clamped_to_m():
    got = _ranks("warmup", 1)[0]["warmup"]
    problems = [f"warmup_forwards({j}, {p}, {m}) = {got[(p, j, m)]}; expected min(p - j - 1, m) = "
                f"{min(p - j - 1, m)}" for p, j, m in WARMUP_SIZES if got[(p, j, m)] != min(p - j - 1, m)]
    _check_all(problems)


# -- 5.4 ----------------------------------------------------------------------------------------------------
@pytest.mark.task5_4
@pytest.mark.points(2)
def test_contract_schedule_lanes_are_separate_lists():
    got = _ranks("lanes_distinct", 1)[0]["lanes"]
    problems = [f"{name}: {n} distinct list objects for {p} lanes; every rank's lane must be a list of its own (a "
                "schedule is edited lane by lane)" for name, (n, p) in got.items() if n != p]
    _check_all(problems)


# -- 5.5 ----------------------------------------------------------------------------------------------------
@pytest.mark.task5_5
@pytest.mark.points(2)
def test_contract_checkpointed_forward_leaves_autograd_on():
    got = _ranks("checkpoint", 2, backend="gloo")
    _check_all([f"p=2, stage {j}: torch.is_grad_enabled() is False after a checkpointed forward_step; run the "
                "forward under a `with torch.no_grad():` block, which restores the caller's mode"
                for j, rep in enumerate(got) if not rep["grad_mode"]])


@pytest.mark.task5_5
@pytest.mark.points(2)
def test_contract_checkpointing_leaves_the_global_rng_alone():
    got = _ranks("checkpoint", 2, backend="gloo")
    gen = torch.Generator().manual_seed(SEED)
    first = torch.rand(4, generator=gen, dtype=torch.float64)
    second = torch.rand(4, generator=gen, dtype=torch.float64)
    problems = []
    for j, rep in enumerate(got):
        if not torch.equal(rep["between"], first) or not torch.equal(rep["after"], second):
            problems.append(f"p=2, stage {j}: after torch.manual_seed({SEED}), a checkpointed forward, a draw, and the "
                            "backward, the global RNG's draws are not the seed's first and second: checkpointing must "
                            "neither draw from the global RNG nor set its state (the caller's random state is theirs)")
    _check_all(problems)


@pytest.mark.task5_5
@pytest.mark.points(2)
def test_contract_checkpoint_stash_holds_only_the_input():
    got = _ranks("checkpoint", 2, backend="gloo")
    _check_all([f"p=2, stage {j}: the stash holds {rep['kept']} bytes of tensors for one micro-batch after a "
                f"checkpointed forward; its input and target are {rep['allowed']} bytes: keep only (x, target, "
                "loss_scale)" for j, rep in enumerate(got) if rep["kept"] > rep["allowed"]])


# -- 5.6 ----------------------------------------------------------------------------------------------------
@pytest.mark.task5_6
@pytest.mark.points(2)
def test_contract_replica_share_is_contiguous():
    got = _ranks("data_parallel", 4, collectives=True)
    problems = []
    for r, rep in enumerate(got):
        k, n = rep["data_rank"], rep["data_size"]
        want = torch.arange(12)[k * 12 // n:(k + 1) * 12 // n]
        if not torch.equal(rep["share"], want):
            problems.append(f"rank {r} (replica {k} of {n}): replica_share(0..11) = {rep['share'].tolist()}; expected "
                            f"its contiguous share {want.tolist()}")
    _check_all(problems)


@pytest.mark.task5_6
@pytest.mark.points(2)
def test_contract_average_gradients_one_all_reduce():
    got = _ranks("data_parallel", 4, collectives=True)
    problems = []
    for r, rep in enumerate(got):
        if len(rep["calls"]) != 1:
            problems.append(f"rank {r}: average_gradients of 3 parameters called all_reduce {len(rep['calls'])} "
                            "times; expected once (all the gradients flattened into one tensor)")
        for k, g in enumerate(rep["grads"]):     # stage r % 2's data group: ranks r % 2 and r % 2 + 2
            want = torch.arange(g.numel(), dtype=torch.float64) + k + 10 * (r % 2 + 1)
            bad = _differs(g, want)
            if bad:
                problems.append(f"rank {r}: parameter {k}'s averaged gradient {bad} from the mean over its data group")
    _check_all(problems)


# -- 5.7 ----------------------------------------------------------------------------------------------------
def interleaved_order(p: int, v: int, m: int) -> list[list[str]]:
    """The README's interleaved 1F1B: each rank's forwards and backwards (micro-batch, chunk) as text."""
    r = m // max(1, m // p)
    fwd = [(i, c) for s in range(0, m, r) for c in range(v) for i in range(s, s + r)]
    bwd = [(i, c) for s in range(0, m, r) for c in reversed(range(v)) for i in range(s, s + r)]
    name = lambda k, i, c: f"{k}{i}" + (f"c{c}" if c else "")  # noqa: E731
    lanes = []
    for j in range(p):
        warm = min(2 * (p - j - 1) + (v - 1) * r, m * v)
        lane = [name("F", *f) for f in fwd[:warm]]
        for k in range(m * v - warm):
            lane += [name("F", *fwd[warm + k]), name("B", *bwd[k])]
        lane += [name("B", *b) for b in bwd[m * v - warm:]]
        lanes.append(lane)
    return lanes


@pytest.mark.task5_7
@pytest.mark.points(2)
def test_contract_interleaved_order_is_the_readmes():
    got = _ranks("interleaved", 1)[0]["order"]
    problems = []
    for (p, v, m), lanes in got.items():
        want = interleaved_order(p, v, m)
        for j, (lane, w) in enumerate(zip(lanes, want)):
            if lane != w:
                problems.append(f"interleaved_schedule({p}, {v}, {m}), rank {j}: {' '.join(lane)}; expected "
                                f"{' '.join(w)} (warm-up min(2(p-j-1) + (v-1) r, m v), rounds of r = {m // max(1, m // p)})")
                break
    _check_all(problems)


@pytest.mark.task5_7
@pytest.mark.points(2)
def test_contract_interleaved_accepts_multiples_of_the_rounds():
    got = _ranks("interleaved", 1)[0]["accepted"]
    _check_all([f"interleaved_schedule({p}, {v}, {m}) raised {err[:200]}; m = {m} is a multiple of m // p = "
                f"{m // p}: rounds of {m // (m // p)}" for (p, v, m), err in got.items() if err is not None])


# -- 5.8 ----------------------------------------------------------------------------------------------------
@pytest.mark.task5_8
@pytest.mark.points(2)
def test_contract_embed_backward_accumulates():
    from assignments.hw5.tests.hw5_vocab_ranks import layer_inputs
    x = layer_inputs()
    got = _ranks("vocab", 3, collectives=True)
    problems = []
    for r, rep in enumerate(got):
        start, stop = rep["rows"]
        full = torch.zeros_like(x["embedding"]).index_add_(0, x["idx"].reshape(-1),
                                                           x["grad_tokens"].reshape(-1, x["grad_tokens"].shape[-1]))
        bad = _differs(rep["embedding_grad"], full[start:stop] + PREFILL)
        if bad:
            problems.append(f"p=3, rank {r}: embed_backward onto a weight.grad of {PREFILL}: the gradient {bad} from "
                            f"{PREFILL} + the rows of its ids: add into weight.grad, never assign it")
    _check_all(problems)


@pytest.mark.task5_8
@pytest.mark.points(2)
def test_contract_head_two_all_reduces():
    got = _ranks("vocab", 3, collectives=True)
    _check_all([f"p=3, rank {r}: head_forward_backward called all_reduce {len(rep['calls'])} times "
                f"({', '.join(rep['calls'])}); expected 2: the row max (max), then the sums of exp and the target's "
                "logit in one all_reduce (sum) of 2N values" for r, rep in enumerate(got) if len(rep["calls"]) != 2])
