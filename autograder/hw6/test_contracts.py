"""Hidden tests of homework 6: promises of each task's contract that the training checks do not show
(assignments/hw6/README.md, "What your code must handle", and the docstrings).

Behaviour checks run WITHOUT the memory tracker (its saved-tensor hooks make torch skip its in-place
version checks); memory is measured in runs of its own.

6.1: a trainable parameter that gets no gradient (unused in the forward) counts as zeros: the others'
     gradients stay on their own parameters (2 SGD steps, float64, against one process).
6.2: gradient accumulation: two backward passes before each step (ZeRO-2, several buckets).
6.3: the same with FSDP; memory right after construction and after a forward under torch.no_grad():
     the shards only (and the eval forward's output is the model's).
     Parameters in no unit, named in replicate=, are averaged (ranks on different rows match one
     process); local_shard's pieces of each parameter, over the ranks, make the whole parameter.
6.4: checkpointing with frozen embeddings (the first block's input does not require grad): every
     block parameter still gets its gradient; checkpointing keeps the saved activations of no block
     (against the same run without checkpointing, a deeper model).
6.5: full_parameters() gives every parameter, frozen ones too, in float32; the float32 master shard
     keeps updates smaller than a bf16 step (small learning rate, several steps).

The rank code is in this file (sent to the ranks by value); the verdicts are taken here.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from assignments.hw6.tests.hw6_setup import Case, batch, build_model, loss_fn
from autograder.hw6.contract_ranks import (CKPT_FACTOR, CKPT_LAYERS, P, SMALL_LR, SMALL_STEPS, STEPS, _check_all, _model,
                                           _param_problems, _ranks, _sgd_reference, _unused_batch)


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


@pytest.mark.task6_3
@pytest.mark.points(1)
@pytest.mark.time_limit(60)
def test_contract_fsdp_replicated_parameters_and_local_shards():
    got = _ranks("fsdp_replicated")
    want = _sgd_reference("unused", lambda s: _unused_batch(s), F.mse_loss)
    problems = _param_problems(got, want, f"FSDP, p={P}, one unit (`first`), `last` and `unused` named in "
                                          f"replicate= (their gradients averaged over the ranks), {STEPS} SGD steps")
    for name, sharded in (("first.weight", True), ("first.bias", True), ("last.weight", False)):
        numel, covered = want[name].numel(), []
        for r, rep in enumerate(got):
            start, data, grad_numel = rep["pieces"][name]
            if grad_numel != data.numel():
                problems.append(f"rank {r}: local_shard({name!r}).grad after a backward: {grad_numel} elements "
                                f"for {data.numel()} of data")
            if not 0 <= start <= start + data.numel() <= numel or not torch.allclose(
                    data, want[name].reshape(-1)[start:start + data.numel()], atol=1e-9):
                problems.append(f"rank {r}: local_shard({name!r}) holds elements {start}..{start + data.numel() - 1} "
                                f"that are not the parameter's (it has {numel})")
            covered += list(range(start, start + data.numel()))
        expected = list(range(numel)) * (1 if sharded else len(got))      # shards: each element once
        if sorted(covered) != sorted(expected):
            problems.append(f"local_shard({name!r}) over the ranks covers {len(covered)} elements "
                            f"({'each once' if sharded else 'the whole parameter on every rank'} was due: "
                            f"{len(expected)})")
    _check_all(problems)
