"""Rank code and helpers of test_contracts.py (split off to keep files short): the hidden contract tests' rank
functions, sent to the ranks by value (the sandbox cannot import autograder/), and the launching and
comparison helpers the tests share."""

from __future__ import annotations

import functools
import sys

import cloudpickle
import torch

from assignments.common.rank_runs import error_text, fail, try_launch
from assignments.common.verdicts import fail_on as _check_all
from assignments.hw5.tests.hw5_setup import LR, MICRO, MOMENTUM, STEPS, batch, build_model, loss_fn
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


# -- 5.1 ----------------------------------------------------------------------------------------------------
