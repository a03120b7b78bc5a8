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
import sys

import cloudpickle
import pytest
import torch

from assignments.common.rank_runs import error_text, fail, try_launch
from assignments.hw5.tests.hw5_setup import (LR, MICRO, MOMENTUM, STAGE_TIME, STEPS, batch, build_model, loss_fn,
                                             reference)
from minitorch_dist import SimNetwork

cloudpickle.register_pickle_by_value(sys.modules[__name__])   # the ranks cannot import the hidden tests

FREE = SimNetwork(alpha=0.0, beta=0.0, eager_limit=0)   # free messages, each send waiting for its receive
PREFILL = 0.25                                           # what .grad holds before the call
SEED = 4321
WARMUP_SIZES = [(p, j, m) for p in range(1, 6) for j in range(p) for m in range(1, 7)]
INTERLEAVED_ORDER_SIZES = ((2, 2, 4), (3, 2, 3), (3, 2, 6), (4, 2, 8), (2, 3, 4))
INTERLEAVED_ACCEPTED = ((3, 2, 8), (4, 2, 10), (2, 2, 6))


# -- rank code ----------------------------------------------------------------------------------------------
def _stage(group, m: int, checkpoint: bool = False):
    from assignments.hw5.tests.hw5_ranks import make_stage
    from assignments.hw5.tests.hw5_setup import Case
    return make_stage(Case("ckpt_gpipe" if checkpoint else "boundary", "mlp", m), group)


def _microbatches(m: int, device):
    from minitorch_dist.pipeline.spec import split_microbatches
    x, y = batch("mlp", MICRO["mlp"] * m)
    return [t.to(device) for t in split_microbatches(x, m)], [t.to(device) for t in split_microbatches(y, m)]


def _grads(stage) -> dict:
    return {n: None if prm.grad is None else prm.grad.detach().clone() for n, prm in stage.module.named_parameters()}


def _prefill(stage) -> None:
    for prm in stage.module.parameters():
        prm.grad = torch.full_like(prm, PREFILL)


def rank_backward_accumulates(group) -> dict:
    """p = 1: two micro-batches' forward_step / backward_step (loss scale 1/2) onto a pre-filled .grad."""
    from minitorch_dist import pipeline as pp
    stage = _stage(group, 2)
    xs, ys = _microbatches(2, group.device)
    _prefill(stage)
    for i in range(2):
        pp.forward_step(stage, i, xs[i], ys[i], 0.5)
        pp.backward_step(stage, i, None)
    return {"grads": _grads(stage)}


def rank_boundary_1f1b_sim(group, m: int) -> dict:
    """The provided executor running the harness's 1F1B lanes with the student's boundary, STEPS steps."""
    from assignments.hw5.tests.hw5_setup import expected_lanes
    from minitorch_dist import pipeline as pp
    stage = _stage(group, m)
    opt = torch.optim.SGD(stage.module.parameters(), lr=LR, momentum=MOMENTUM)
    x, y = (t.to(group.device) for t in batch("mlp", MICRO["mlp"] * m))
    lanes, times = expected_lanes("1f1b", group.size, m), []
    for _ in range(STEPS):
        group.barrier()
        t0 = group.now()
        pp.schedule_step(stage, lanes, x, y, opt, m, validate=False)
        times.append((t0, group.now()))
    return {"times": times, "params": {n: prm.detach().clone() for n, prm in stage.module.named_parameters()}}


def rank_gpipe_step(group, m: int) -> dict:
    """One gpipe_step onto a pre-filled .grad: what it returns, .grad and the parameters after it."""
    from minitorch_dist import pipeline as pp
    stage = _stage(group, m)
    opt = torch.optim.SGD(stage.module.parameters(), lr=LR, momentum=MOMENTUM)
    x, y = (t.to(group.device) for t in batch("mlp", MICRO["mlp"] * m))
    _prefill(stage)
    out = pp.gpipe_step(stage, x, y, opt, m)
    return {"returned": None if out is None else (type(out).__name__, float(out)), "grads": _grads(stage),
            "params": {n: prm.detach().clone() for n, prm in stage.module.named_parameters()}}


def rank_warmup(group) -> dict:
    from minitorch_dist import pipeline as pp
    return {"warmup": {(p, j, m): pp.warmup_forwards(j, p, m) for p, j, m in WARMUP_SIZES}}


def rank_lanes_distinct(group) -> dict:
    from minitorch_dist import pipeline as pp
    out = {}
    for name, gen in (("gpipe_schedule", pp.gpipe_schedule), ("one_f_one_b_schedule", pp.one_f_one_b_schedule)):
        for p, m in ((4, 3), (5, 2)):
            lanes = gen(p, m)
            out[f"{name}({p}, {m})"] = len({id(lane) for lane in lanes}), len(lanes)
    return {"lanes": out}


def _tensor_bytes(obj) -> int:
    if isinstance(obj, torch.Tensor):
        return obj.nbytes
    if isinstance(obj, (tuple, list)):
        return sum(_tensor_bytes(o) for o in obj)
    if isinstance(obj, dict):
        return sum(_tensor_bytes(o) for o in obj.values())
    return 0


def rank_checkpoint(group) -> dict:
    """p = 2, one checkpointed micro-batch through both stages: grad mode after the forward, the stash's
    tensor bytes against its input's and target's, and the global RNG drawn between and after."""
    from minitorch_dist import pipeline as pp
    stage = _stage(group, 2, checkpoint=True)
    xs, ys = _microbatches(2, group.device)
    x = xs[0] if stage.is_first else pp.recv_forward(stage, 0)
    torch.manual_seed(SEED)
    out = pp.forward_step(stage, 0, x, ys[0], 0.5)
    grad_mode = torch.is_grad_enabled()
    torch.set_grad_enabled(True)                       # the rest of the run as it should be
    kept = _tensor_bytes(stage.stash.get(0))
    allowed = x.nbytes + ys[0].nbytes
    between = torch.rand(4, dtype=torch.float64)
    if stage.is_last:
        handle = None
        grad_in = pp.backward_step(stage, 0, None)
        handle = pp.send_backward(stage, grad_in, 0)
    else:
        handle = pp.send_forward(stage, out, 0)
        grad_out = pp.recv_backward(stage, 0)
        pp.backward_step(stage, 0, grad_out)
    after = torch.rand(4, dtype=torch.float64)
    if handle is not None:
        handle.wait()
    return {"grad_mode": grad_mode, "kept": kept, "allowed": allowed, "between": between, "after": after}


class CountingGroup:
    """A group that counts its all_reduce calls (op by op) and forwards everything to the real one."""

    def __init__(self, group):
        self._group, self.calls = group, []

    def all_reduce(self, tensor, op="sum", *args, **kwargs):
        self.calls.append(str(op))
        return self._group.all_reduce(tensor, op, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._group, name)


def rank_data_parallel(group) -> dict:
    """p = 4, 2 stages x 2 replicas: replica_share of 0..11, average_gradients of three parameters."""
    from minitorch_dist.pipeline import data_parallel as dp
    _, data = dp.pipeline_grid(group, 2)
    share = dp.replica_share(torch.arange(12, device=group.device), data)
    params = [torch.nn.Parameter(torch.zeros(n, dtype=torch.float64, device=group.device)) for n in (5, 3, 4)]
    for k, prm in enumerate(params):
        prm.grad = torch.arange(prm.numel(), dtype=torch.float64, device=group.device) + 10 * group.rank + k
    counting = CountingGroup(data)
    dp.average_gradients(params, counting)
    return {"data_rank": data.rank, "data_size": data.size, "share": share.cpu(), "calls": counting.calls,
            "grads": [prm.grad.cpu() for prm in params]}


def rank_vocab(group) -> dict:
    """embed_backward onto a pre-filled weight.grad; head_forward_backward's all_reduce calls."""
    from assignments.hw5.tests.hw5_vocab_ranks import VOCAB_V, layer_inputs
    from minitorch_dist.pipeline import vocab as vp
    x = {k: v.to(group.device) for k, v in layer_inputs().items()}
    rows = vp.vocab_shard(VOCAB_V, group)
    emb = torch.nn.Parameter(x["embedding"][rows].clone())
    emb.grad = torch.full_like(emb, PREFILL)
    vp.embed_backward(emb, rows.start, x["idx"], x["grad_tokens"] if group.rank == 0 else None, group, owner=0)
    head = torch.nn.Parameter(x["head"][rows].clone())
    counting, last = CountingGroup(group), group.size - 1
    vp.head_forward_backward(head, rows.start, x["hidden"] if group.rank == last else None, x["target"], counting,
                             owner=last)
    return {"rows": (rows.start, rows.stop), "embedding_grad": emb.grad.cpu(), "calls": counting.calls}


def rank_interleaved(group) -> dict:
    from minitorch_dist import pipeline as pp
    order, accepted = {}, {}
    for p, v, m in INTERLEAVED_ORDER_SIZES:
        order[(p, v, m)] = [[str(a) for a in lane if a.kind in ("F", "B")] for lane in pp.interleaved_schedule(p, v, m)]
    for p, v, m in INTERLEAVED_ACCEPTED:
        try:
            pp.interleaved_schedule(p, v, m)
            accepted[(p, v, m)] = None
        except NotImplementedError:
            raise
        except Exception as exc:  # noqa: BLE001 - judged in the grading process
            accepted[(p, v, m)] = f"{type(exc).__name__}: {exc}"
    return {"order": order, "accepted": accepted}


RANK_CODE = {"backward_accumulates": rank_backward_accumulates, "boundary_1f1b_sim": rank_boundary_1f1b_sim,
             "gpipe_step": rank_gpipe_step, "warmup": rank_warmup, "lanes_distinct": rank_lanes_distinct,
             "checkpoint": rank_checkpoint, "data_parallel": rank_data_parallel, "vocab": rank_vocab,
             "interleaved": rank_interleaved}


def contract_rank(group, what: str, *args):
    return RANK_CODE[what](group, *args)


# -- in the grading process ---------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _run(what: str, p: int, *args, backend: str = "sim", collectives: bool = False, free: bool = False):
    result, err = try_launch(contract_rank, p, (what, *args), backend, FREE if free else None, collectives=collectives)
    return (None, error_text(err)) if err is not None else (list(result), None)


def _ranks(what: str, p: int, *args, **options) -> list[dict]:
    got, err = _run(what, p, *args, **options)
    if err is not None:
        fail(err)
    return got


def _differs(got, want: torch.Tensor, tol: float = 1e-10) -> str | None:
    if got is None:
        return "is None"
    if tuple(got.shape) != tuple(want.shape):
        return f"has shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    diff = (got.detach().cpu().to(torch.float64) - want.to(torch.float64)).abs().max().item()
    return None if diff <= tol * max(1.0, want.abs().max().item()) else f"differs by {diff:.3g}"


def _model_grads(m: int, p: int) -> list[dict[str, torch.Tensor]]:
    """Stage by stage, the whole MLP's gradient of the whole batch's mean loss (m micro-batches)."""
    from minitorch_dist.pipeline import stages_of
    model = build_model("mlp")
    x, y = batch("mlp", MICRO["mlp"] * m)
    loss_fn(model(x), y).backward()
    return [{n: prm.grad.clone() for n, prm in stage.named_parameters()} for stage in stages_of(model, p)]


def _check_all(problems: list[str]) -> None:
    if problems:
        fail("\n".join(problems[:6] + ([f"... and {len(problems) - 6} more"] if len(problems) > 6 else [])))


# -- 5.1 ----------------------------------------------------------------------------------------------------
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
