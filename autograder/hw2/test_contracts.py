"""Hidden tests of homework 2: promises of the contract that the value and trace tests do not show
(assignments/hw2/README.md, "What your code must handle").

2.4: after finish_gradient_synchronization every .grad of a bucket is a view of its slice of the
     bucket's one averaged flat tensor (no copy back, as torch DDP's gradient_as_bucket_view=True):
     the .grads of a bucket's members that have one share one storage, in disjoint slices, and hold
     the full-batch gradient. A copy per .grad gives the same values and the same all-reduces; only
     the storage shows it. 2 ranks on sim, the tower in one bucket of 1 MiB: step 0 uses every
     parameter, step 1 leaves the aux head unused (its .grads stay None, the rest still share).

The rank code is in this file (sent to the ranks by value); the batches are drawn here from the
grading's secret and each rank is sent its own part; the verdicts are taken here.
"""

from __future__ import annotations

import sys

import cloudpickle
import pytest
import torch

from assignments.common.rank_runs import error_text, fail, try_launch
from assignments.common.verdicts import fail_on
from assignments.hw2.tests.hw2_checks import TOL
from assignments.hw2.tests.hw2_inputs import batches
from assignments.hw2.tests.hw2_setup import Case, build_model, loss_of
from minitorch_dist.data import local_part

cloudpickle.register_pickle_by_value(sys.modules[__name__])   # the ranks cannot import the hidden tests

P = 2
VIEWS = Case("bucketed", "tower", "sgd", edge="unused", steps=2, bucket_kb=1024.0, tag="contract")


# -- rank code ----------------------------------------------------------------------------------------------
def rank_bucket_views(group, own: list) -> list[list]:
    """Per step (this rank's part of the batch): for every parameter, None (no .grad) or where its .grad
    lives (storage address, byte offset, bytes) and its value, right after finish."""
    from minitorch_dist.data_parallel import BucketedDDP
    model = build_model(VIEWS).to(group.device)
    ddp = BucketedDDP(model, group, bucket_size_mb=VIEWS.bucket_kb / 1024)
    report = []
    for step, (x, y) in enumerate(own):
        for param in model.parameters():
            param.grad = None
        loss_of(VIEWS, ddp, x.to(group.device), y.to(group.device), step).backward()
        ddp.finish_gradient_synchronization()
        report.append([None if (g := param.grad) is None else
                       {"storage": g.untyped_storage().data_ptr(), "start": g.storage_offset() * g.element_size(),
                        "nbytes": g.numel() * g.element_size(), "value": g.detach().cpu().clone()}
                       for param in model.parameters()])
    return report


# -- in the grading process ---------------------------------------------------------------------------------
def _full_batch_grads(x, y, step: int) -> list[torch.Tensor | None]:
    model = build_model(VIEWS)
    loss_of(VIEWS, model, x, y, step).backward()
    return [None if param.grad is None else param.grad.clone() for param in model.parameters()]


@pytest.mark.task2_4
@pytest.mark.points(1)
@pytest.mark.time_limit(60)
def test_contract_bucketed_grads_are_views_of_the_bucket():
    from minitorch_dist.data_parallel import plan_buckets
    global_batches = batches(VIEWS, P)
    own = [[(local_part(x, r, P), local_part(y, r, P)) for x, y in global_batches] for r in range(P)]
    result, err = try_launch(rank_bucket_views, P, (), "sim", collectives=True, rank_args=[(o,) for o in own])
    if err is not None:
        fail(error_text(err))
    model = build_model(VIEWS)
    names = [n for n, _ in model.named_parameters()]
    plan = plan_buckets([q for q in model.parameters() if q.requires_grad], int(VIEWS.bucket_kb * 1024))
    assert len(plan) == 1 and len(plan[0]) == len(names), plan       # the case: every gradient in one bucket
    problems = []
    for step, (x, y) in enumerate(global_batches):
        want = _full_batch_grads(x, y, step)
        for r, rep in enumerate(result):
            where = f"BucketedDDP (p={P}, sim, tower, one bucket of {VIEWS.bucket_kb:g} KiB), rank {r}, step {step}"
            got = rep[step]
            for name, g, w in zip(names, got, want):
                if (g is None) != (w is None):
                    problems.append(f"{where}: {name}.grad is {'None' if g is None else 'set'}; expected "
                                    f"{'None (unused in this step)' if w is None else 'the mean gradient'}")
                elif g is not None and not float((g["value"] - w).abs().max()) <= TOL:
                    problems.append(f"{where}: {name}.grad differs from the full-batch gradient by "
                                    f"{float((g['value'] - w).abs().max()):.3g}")
            present = [(name, g) for name, g in zip(names, got) if g is not None]
            storages = {g["storage"] for _, g in present}
            if len(storages) > 1:
                problems.append(f"{where}: the {len(present)} .grads of one bucket ({', '.join(n for n, _ in present)}) "
                                f"lie in {len(storages)} separate tensors; after finish_gradient_synchronization "
                                f"each .grad must be a view of its slice of the bucket's averaged flat tensor "
                                f"(no copy back, as torch DDP's gradient_as_bucket_view=True)")
                continue
            spans = sorted((g["start"], g["start"] + g["nbytes"], name) for name, g in present)
            overlap = [(a[2], b[2]) for a, b in zip(spans, spans[1:]) if b[0] < a[1]]
            if overlap:
                problems.append(f"{where}: .grads {overlap[0][0]} and {overlap[0][1]} overlap in the bucket's "
                                f"flat tensor; each gradient needs a slice of its own")
    fail_on(problems)
