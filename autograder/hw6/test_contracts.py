"""Hidden tests of homework 6: promises of each task's contract that the training checks do not show
(assignments/hw6/README.md, "What your code must handle", and the docstrings).

Behaviour checks run WITHOUT the memory tracker (its saved-tensor hooks make torch skip its in-place
version checks); memory is measured in runs of its own.

6.1: a trainable parameter that gets no gradient (unused in the forward) counts as zeros: the others'
     gradients stay on their own parameters (2 SGD steps, float64, against one process).
6.2: gradient accumulation: two backward passes before each step (ZeRO-2, several buckets).
6.3: the same with FSDP; memory right after construction and after a forward under torch.no_grad():
     the shards only (and the eval forward's output is the model's).
6.4: checkpointing with frozen embeddings (the first block's input does not require grad): every
     block parameter still gets its gradient; checkpointing keeps the saved activations of no block
     (against the same run without checkpointing, a deeper model).
6.5: full_parameters() gives every parameter, frozen ones too, in float32; the float32 master shard
     keeps updates smaller than a bf16 step (small learning rate, several steps).

The rank code is in this file (sent to the ranks by value); the verdicts are taken here.
"""

from __future__ import annotations

import functools
import sys

import cloudpickle
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from assignments.common.rank_runs import error_text, fail, try_launch
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


RANK_CODE = {"zero1_unused": rank_zero1_unused, "zero2_accumulate": rank_zero2_accumulate,
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


def _check_all(problems: list[str]) -> None:
    if problems:
        fail("\n".join(problems[:6] + ([f"... and {len(problems) - 6} more"] if len(problems) > 6 else [])))


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
@pytest.mark.task6_1
@pytest.mark.points(1)
@pytest.mark.time_limit(60)
def test_contract_zero1_parameter_without_gradient():
    got = _ranks("zero1_unused")
    want = _sgd_reference("unused", lambda s: _unused_batch(s), F.mse_loss)
    _check_all(_param_problems(got, want, f"ZeRO-1, p={P}, {STEPS} SGD steps, a model whose parameter `unused` "
                                          "gets no gradient (its .grad is None: count it as zeros, keep every "
                                          "other gradient at its own parameter's place)"))


# -- 6.2 ----------------------------------------------------------------------------------------------------
def _accumulated_reference() -> dict:
    case = Case("fsdp", "sgd", "tied")
    return _sgd_reference("tied", lambda s: batch(case, s), lambda out, y: loss_fn(case, out, y))


@pytest.mark.task6_2
@pytest.mark.points(1)
@pytest.mark.time_limit(60)
def test_contract_zero2_gradient_accumulation():
    _check_all(_param_problems(_ranks("zero2_accumulate"), _accumulated_reference(),
                               f"ZeRO-2, p={P}, {STEPS} SGD steps of two backward passes each (gradient "
                               "accumulation: each backward's buckets are reduce-scattered and ADDED to shard.grad)"))


# -- 6.3 ----------------------------------------------------------------------------------------------------
@pytest.mark.task6_3
@pytest.mark.points(1)
@pytest.mark.time_limit(60)
def test_contract_fsdp_gradient_accumulation():
    _check_all(_param_problems(_ranks("fsdp_accumulate"), _accumulated_reference(),
                               f"FSDP, p={P}, {STEPS} SGD steps of two backward passes each (gradient "
                               "accumulation: each backward's reduce-scattered gradient is ADDED to shard.grad)"))


@pytest.mark.task6_3
@pytest.mark.points(1)
@pytest.mark.time_limit(60)
def test_contract_fsdp_memory_after_construction_and_no_grad_forward():
    got = _ranks("fsdp_memory")
    model = _model("tied")
    problems = []
    for r, rep in enumerate(got):
        if rep["built"] > rep["shards"]:
            problems.append(f"rank {r}: right after construction the tracker counts {rep['built']} bytes of "
                            f"parameters; the shards are {rep['shards']}: free every unit's full buffer at construction")
        if rep["after_eval"] > rep["shards"]:
            problems.append(f"rank {r}: after a forward under torch.no_grad() the tracker counts "
                            f"{rep['after_eval']} bytes of parameters; the shards are {rep['shards']}: free each "
                            "unit after its forward whether or not the output requires grad")
        with torch.no_grad():
            want = model(rep["x"])
        if (rep["eval_out"] - want).abs().max().item() > 1e-9:
            problems.append(f"rank {r}: the output of a forward under torch.no_grad() is not the model's")
        if rep["gathers"] != rep["units"]:
            problems.append(f"rank {r}: the forward after a torch.no_grad() forward made {rep['gathers']} all-gathers; "
                            f"expected one per unit ({rep['units']})")
    _check_all(problems)


# -- 6.4 ----------------------------------------------------------------------------------------------------
@pytest.mark.task6_4
@pytest.mark.points(1)
@pytest.mark.time_limit(60)
def test_contract_checkpointing_with_frozen_embeddings():
    case = Case("fsdp", "sgd", "tied")
    want = _sgd_reference("frozen_emb", lambda s: batch(case, s), lambda out, y: loss_fn(case, out, y))
    _check_all(_param_problems(_ranks("ckpt_frozen_embeddings"), want,
                               f"FSDP with checkpointing, p={P}, {STEPS} SGD steps, token and position embeddings "
                               "frozen (the first block's input does not require grad): every block parameter must "
                               "still get its gradient (non-reentrant checkpointing)"))


@pytest.mark.task6_4
@pytest.mark.points(1)
@pytest.mark.time_limit(60)
def test_contract_checkpointing_covers_every_block():
    problems = []
    for r, rep in enumerate(_ranks("ckpt_saved")):
        if rep["checkpointed"] > CKPT_FACTOR * rep["plain"]:
            problems.append(f"rank {r}: a forward of a {CKPT_LAYERS}-block model keeps {rep['checkpointed']} bytes of "
                            f"saved activations with checkpointing, {rep['plain']} without: more than "
                            f"{CKPT_FACTOR:g} of them; every block's forward must run under checkpointing")
    _check_all(problems)


# -- 6.5 ----------------------------------------------------------------------------------------------------
@pytest.mark.task6_5
@pytest.mark.points(1)
@pytest.mark.time_limit(60)
def test_contract_full_parameters_float32_frozen_included():
    want = [n for n, _ in _model("frozen32").named_parameters()]
    problems = []
    for r, rep in enumerate(_ranks("full_parameters_dtypes")):
        if sorted(rep["dtypes"]) != sorted(want):
            problems.append(f"rank {r}: full_parameters() gives {sorted(rep['dtypes'])}; expected {sorted(want)}")
        bad = {n: d for n, d in rep["dtypes"].items() if d != "torch.float32"}
        if bad:
            problems.append(f"rank {r}: under bf16 compute, full_parameters() must give every parameter, frozen ones "
                            f"included, in float32 (the shards' dtype); got {bad}")
    _check_all(problems)


@pytest.mark.task6_5
@pytest.mark.points(1)
@pytest.mark.time_limit(60)
def test_contract_master_shard_keeps_small_updates():
    case = Case("fsdp", "sgd", "tied", dtype="float32", mixed=True)
    start = {n: q.detach().clone() for n, q in build_model(case).named_parameters()}
    want = _sgd_reference("", lambda s: batch(case, s), lambda out, y: loss_fn(case, out, y),
                          lr_kwargs={"lr": SMALL_LR}, steps=SMALL_STEPS, case=case)
    problems = []
    for r, rep in enumerate(_ranks("mixed_small_lr")):
        for name, w in want.items():
            moved = (rep["params"][name].float() - start[name]).flatten()
            should = (w - start[name]).flatten()
            err, size = (moved - should).norm().item(), should.norm().item()
            if err > 0.25 * size:
                problems.append(f"rank {r}: bf16 compute, SGD lr {SMALL_LR:g}, {SMALL_STEPS} steps: {name} moved by "
                                f"{moved.norm().item():.3g} (norm), one float32 process by {size:.3g} (difference "
                                f"{err:.3g}): the float32 master shard must keep updates smaller than a bf16 step")
                break
    _check_all(problems)
