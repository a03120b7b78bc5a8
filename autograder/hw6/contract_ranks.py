"""Rank code and helpers of test_contracts.py (split off to keep files short): the hidden contract tests' rank
functions, sent to the ranks by value (the sandbox cannot import autograder/), and the launching and
comparison helpers the tests share."""

from __future__ import annotations

import functools
import sys

import cloudpickle
import torch
import torch.nn.functional as F
from torch import nn

from assignments.common.rank_runs import error_text, fail, try_launch
from assignments.common.verdicts import fail_on as _check_all
from assignments.hw6.tests.hw6_setup import Case, batch, build_model, loss_fn

cloudpickle.register_pickle_by_value(sys.modules[__name__])   # the ranks cannot import the hidden tests

P = 2                                   # ranks of every run here (sim: threads, cheap)
STEPS = 2
SGD = {"lr": 0.2, "momentum": 0.9}
SMALL_LR, SMALL_STEPS = 1e-4, 3         # 6.5: updates far below a bf16 step of the weights
CKPT_LAYERS = 6                         # 6.4: a deeper model, so one block's activations show
CKPT_FACTOR = 0.15                      # 6.4: checkpointed saved bytes at most this share of the plain run's


class UnusedMiddle(nn.Module):
    """Linear(3, 5) -> tanh -> Linear(5, 1); `unused` (between them in parameter order) gets no gradient."""

    def __init__(self):
        super().__init__()
        gen = torch.Generator().manual_seed(5)
        self.first = nn.Linear(3, 5).double()
        self.unused = nn.Linear(2, 2).double()
        self.last = nn.Linear(5, 1).double()
        with torch.no_grad():
            for prm in self.parameters():
                prm.copy_(0.5 * torch.randn(prm.shape, generator=gen, dtype=torch.float64))

    def forward(self, x):
        return self.last(torch.tanh(self.first(x)))


def _unused_batch(step: int, rank: int = 0, p: int = 1):
    gen = torch.Generator().manual_seed(900 + step)
    x = torch.randn(8, 3, generator=gen, dtype=torch.float64)
    y = torch.randn(8, 1, generator=gen, dtype=torch.float64)
    rows = slice(rank * 8 // p, (rank + 1) * 8 // p)
    return x[rows], y[rows]


def _frozen_embeddings(model):
    model.tok_emb.weight.requires_grad_(False)        # the tied LM head too: one tensor
    model.pos_emb.weight.requires_grad_(False)
    return model


def _model(kind: str):
    if kind == "unused":
        return UnusedMiddle()
    if kind == "tied":
        return build_model(Case("fsdp", "sgd", "tied"))
    if kind == "frozen_emb":
        return _frozen_embeddings(build_model(Case("fsdp", "sgd", "tied")))
    if kind == "frozen32":
        return build_model(Case("fsdp", "sgd", "frozen", dtype="float32"))
    raise ValueError(kind)


# -- rank code ----------------------------------------------------------------------------------------------
def _params(named) -> dict:
    return {n: q.detach().clone().cpu() for n, q in named}


def _fsdp_params(fsdp) -> dict:
    from assignments.hw6.tests.hw6_ranks import _full_params
    return {n: t.cpu() for n, t in _full_params(None, fsdp.group, fsdp.module, fsdp).items()}


def rank_zero1_unused(group) -> dict:
    from minitorch_dist.sharded import ZeroOptimizer
    model = UnusedMiddle().to(group.device)
    opt = ZeroOptimizer(model.parameters(), torch.optim.SGD, group, **SGD)
    for step in range(STEPS):
        x, y = (t.to(group.device) for t in _unused_batch(step, group.rank, group.size))
        F.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    return {"params": _params(model.named_parameters())}


def _accumulate(model, opt, group, case) -> None:
    """STEPS steps, each of two backward passes (half of the rank's rows each, loss / 2) before step."""
    for step in range(STEPS):
        x, y = (t.to(group.device) for t in batch(case, step, group.rank, group.size))
        half = x.shape[0] // 2
        for rows in (slice(0, half), slice(half, None)):
            (loss_fn(case, model(x[rows]), y[rows]) / 2).backward()
        opt.step()
        opt.zero_grad()


def rank_zero2_accumulate(group) -> dict:
    from minitorch_dist.sharded import Zero2Optimizer
    case = Case("zero2", "sgd", "tied")
    model = _model("tied").to(group.device)
    opt = Zero2Optimizer(model.parameters(), torch.optim.SGD, group, bucket_numel=1500, **SGD)
    _accumulate(model, opt, group, case)
    return {"params": _params(model.named_parameters())}


def rank_fsdp_accumulate(group) -> dict:
    from minitorch_dist.sharded import FullyShardedModel
    case = Case("fsdp", "sgd", "tied")
    fsdp = FullyShardedModel(_model("tied").to(group.device), group)
    opt = torch.optim.SGD(fsdp.parameters(), **SGD)
    _accumulate(fsdp, opt, group, case)
    return {"params": _fsdp_params(fsdp)}


def rank_fsdp_memory(group) -> dict:
    """Params bytes right after construction, after a no_grad forward (and its output), and the
    shards' bytes; then one training forward's all-gathers."""
    from minitorch_dist.memory import MemoryTracker
    from minitorch_dist.sharded import FullyShardedModel
    case = Case("fsdp", "sgd", "tied")
    fsdp = FullyShardedModel(_model("tied").to(group.device), group)
    opt = torch.optim.SGD(fsdp.parameters(), **SGD)
    tracker = MemoryTracker(fsdp, opt, hooks=False)
    shards = sum(u.shard.untyped_storage().nbytes() for u in fsdp.units)
    built = tracker.sample("after construction")["params"]
    x, _ = (t.to(group.device) for t in batch(case, 0, group.rank, group.size))
    with torch.no_grad():
        out = fsdp(x)
    after_eval = tracker.sample("after a no_grad forward")["params"]
    before = group.counters.op("all_gather").calls
    fsdp(x)
    gathers = group.counters.op("all_gather").calls - before
    return {"shards": shards, "built": built, "after_eval": after_eval, "eval_out": out.detach().cpu(),
            "x": x.cpu(), "gathers": gathers, "units": len(fsdp.units)}


def rank_ckpt_frozen_embeddings(group) -> dict:
    from minitorch_dist.sharded import FullyShardedModel
    case = Case("fsdp", "sgd", "tied")
    fsdp = FullyShardedModel(_model("frozen_emb").to(group.device), group, checkpoint=True)
    opt = torch.optim.SGD([q for q in fsdp.parameters() if q.requires_grad], **SGD)
    for step in range(STEPS):
        x, y = (t.to(group.device) for t in batch(case, step, group.rank, group.size))
        loss_fn(case, fsdp(x), y).backward()
        opt.step()
        opt.zero_grad()
    return {"params": _fsdp_params(fsdp)}


def rank_ckpt_saved(group) -> dict:
    """Saved-activation bytes of one forward of a 6-block model, without and with checkpointing."""
    from minitorch_dist.memory import MemoryTracker
    from minitorch_dist.models import CharTransformer
    from minitorch_dist.sharded import FullyShardedModel
    case = Case("fsdp", "sgd", "tied")
    x, y = (t.to(group.device) for t in batch(case, 0, group.rank, group.size))
    out = {}
    for checkpoint in (False, True):
        model = CharTransformer(vocab_size=13, d_model=10, n_heads=2, n_layers=CKPT_LAYERS, max_len=8, seed=0)
        fsdp = FullyShardedModel(model.double().to(group.device), group, checkpoint=checkpoint)
        tracker = MemoryTracker(fsdp, None, hooks=False)
        with tracker.saved_activations():
            loss = loss_fn(case, fsdp(x), y)
            out[checkpoint] = tracker.sample("after forward")["activations"]
            loss.backward()
        tracker.close()
    return {"plain": out[False], "checkpointed": out[True]}


def rank_full_parameters_dtypes(group) -> dict:
    from minitorch_dist.sharded import FullyShardedModel
    fsdp = FullyShardedModel(_model("frozen32").to(group.device), group, compute_dtype=torch.bfloat16)
    return {"dtypes": {n: str(t.dtype) for n, t in fsdp.full_parameters().items()}}


def rank_mixed_small_lr(group) -> dict:
    from minitorch_dist.sharded import FullyShardedModel
    case = Case("fsdp", "sgd", "tied", dtype="float32", mixed=True)
    fsdp = FullyShardedModel(build_model(case).to(group.device), group, compute_dtype=torch.bfloat16)
    opt = torch.optim.SGD(fsdp.parameters(), lr=SMALL_LR)
    for step in range(SMALL_STEPS):
        x, y = (t.to(group.device) for t in batch(case, step, group.rank, group.size))
        loss_fn(case, fsdp(x), y).backward()
        opt.step()
        opt.zero_grad()
    return {"params": {n: t.cpu() for n, t in fsdp.full_parameters().items()}}


def rank_fsdp_replicated(group) -> dict:
    """FSDP with one unit (`first`); `last` and `unused` are in no unit and named in replicate=.
    After the steps, each rank's local_shard pieces of every parameter (and of its gradient, after
    one more backward)."""
    from minitorch_dist.sharded import FullyShardedModel
    from minitorch_dist.sharded.policy import make_unit
    model = UnusedMiddle().to(group.device)
    fsdp = FullyShardedModel(model, group, units=[make_unit("first", model.first)], replicate=["last", "unused"])
    opt = torch.optim.SGD(fsdp.parameters(), **SGD)
    for step in range(STEPS):
        x, y = (t.to(group.device) for t in _unused_batch(step, group.rank, group.size))
        F.mse_loss(fsdp(x), y).backward()
        opt.step()
        opt.zero_grad()
    params = _fsdp_params(fsdp)
    x, y = (t.to(group.device) for t in _unused_batch(STEPS, group.rank, group.size))
    F.mse_loss(fsdp(x), y).backward()
    pieces = {}
    for name in ("first.weight", "first.bias", "last.weight"):
        data, grad, start = fsdp.local_shard(name)
        pieces[name] = (start, data.clone().cpu(), None if grad is None else grad.numel())
    return {"params": params, "pieces": pieces}


RANK_CODE = {"fsdp_replicated": rank_fsdp_replicated, "zero1_unused": rank_zero1_unused, "zero2_accumulate": rank_zero2_accumulate,
             "fsdp_accumulate": rank_fsdp_accumulate, "fsdp_memory": rank_fsdp_memory,
             "ckpt_frozen_embeddings": rank_ckpt_frozen_embeddings, "ckpt_saved": rank_ckpt_saved,
             "full_parameters_dtypes": rank_full_parameters_dtypes, "mixed_small_lr": rank_mixed_small_lr}


def contract_rank(group, what: str) -> dict:
    return RANK_CODE[what](group)


# -- in the grading process ---------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _run(what: str):
    result, err = try_launch(contract_rank, P, (what,), "sim", None, collectives=True)
    return (None, error_text(err)) if err is not None else (list(result), None)


def _ranks(what: str) -> list[dict]:
    got, err = _run(what)
    if err is not None:
        fail(err)
    return got


def _sgd_reference(kind: str, batch_of, loss, lr_kwargs=SGD, steps=STEPS, case=None) -> dict:
    model = _model(kind) if case is None else build_model(case)
    opt = torch.optim.SGD([q for q in model.parameters() if q.requires_grad], **lr_kwargs)
    for step in range(steps):
        x, y = batch_of(step)
        loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    return {n: q.detach().clone() for n, q in model.named_parameters()}


def _param_problems(got: list[dict], want: dict, what: str, tol: float = 1e-9) -> list[str]:
    problems = []
    for r, rep in enumerate(got):
        params = rep["params"]
        for name, w in want.items():
            g = params.get(name)
            if g is None or g.shape != w.shape:
                problems.append(f"rank {r}: {name} missing or of shape {None if g is None else tuple(g.shape)}")
                continue
            diff = (g.double() - w.double()).abs().max().item()
            if diff > tol:
                problems.append(f"rank {r}: {what}: {name} differs from one process on the global batch by "
                                f"{diff:.3g} (> {tol:g})")
    return problems


# -- 6.1 ----------------------------------------------------------------------------------------------------
