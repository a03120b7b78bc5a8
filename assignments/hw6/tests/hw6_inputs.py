"""Homework 6 test harness, the inputs: what each rank trains on, made in the test process.

    own = make_inputs(case, p)           # [rank 0's input, ..., rank p-1's]: each rank is sent its own
    reference(case, p)                   # {name: tensor}: one process on the global batches

Drawn from the grading's secret (assignments/common/rank_inputs.py), keyed by (case, p):
  "batches"  the global batch of every step; rank r is sent its rows only (hw6_setup.rows_of), so a
             ZeRO or FSDP step that skips its reduce-scatter cannot average the other ranks' gradients;
  "init"     with init "different": rank r's own starting weights ({name: tensor}); rank 0's are the
             run's (the reference starts from them), so a piece that skips the broadcast from rank 0
             cannot rebuild them. With init "same" every rank builds the public model of seed 0: the
             replicas share it by design.
The bad-input cases train on the public batches (hw6_setup.batch): nothing there is compared.
"""

from __future__ import annotations

import functools

from assignments.common.rank_inputs import secret, seed
from assignments.hw6.tests.hw6_setup import Case, build_model, draw_batch, rows_of, train_one_process


def _key(case: Case, p: int) -> tuple:
    return ("hw6", repr(case), p)


def batches(case: Case, p: int) -> list:
    """The global batch (x, y) of every step of `case` at p."""
    return _batches(case, p, secret())


@functools.lru_cache(maxsize=64)
def _batches(case: Case, p: int, _secret: bytes) -> list:
    return [draw_batch(case, seed("batch", *_key(case, p), step)) for step in range(case.steps)]


def inits(case: Case, p: int) -> list:
    """Every rank's starting weights ({name: tensor}) with init "different", else [None] * p."""
    return _inits(case, p, secret())


@functools.lru_cache(maxsize=64)
def _inits(case: Case, p: int, _secret: bytes) -> list:
    if case.init == "same":
        return [None] * p
    out = []
    for r in range(p):
        model = build_model(case, seed=seed("init", *_key(case, p), r) % (1 << 62))
        out.append({n: q.detach().clone() for n, q in model.named_parameters()})
    return out


def make_inputs(case: Case, p: int) -> list:
    """Every rank's input of `case` at p (the same on every call with the same secret)."""
    if case.stage.startswith("bad_"):
        return [None] * p
    whole, start = batches(case, p), inits(case, p)
    return [{"batches": [(x[rows_of(r, p)], y[rows_of(r, p)]) for x, y in whole], "init": start[r]}
            for r in range(p)]


def reference(case: Case, p: int) -> dict:
    """{name: tensor} after case.steps steps of one process on the global batches, from rank 0's
    starting weights."""
    return {n: t.clone() for n, t in _reference(case, p, secret()).items()}


@functools.lru_cache(maxsize=64)
def _reference(case: Case, p: int, _secret: bytes) -> dict:
    plain = Case(case.stage, case.optim, case.model, case.dtype, steps=case.steps)    # full precision
    return train_one_process(plain, batches(case, p), inits(case, p)[0])
