"""Homework 4 test harness, the inputs: what each rank of the tensor-parallel group holds, made in the
test process.

    own = make_inputs(case, p)           # [rank 0's input, ..., rank p-1's]: each rank is sent its own
    reference(case, p)                   # (output, input gradient, parameter gradients) of the dense piece

Everything a value check depends on is drawn from the grading's secret (assignments/common/
rank_inputs.py): the dense model's weights, the piece's input, the targets and the loss weight. Rank
r is sent
  "state"    the dense piece's parameters with only rank r's shard filled in (zeros elsewhere;
             replicated ones, such as norms and a row-parallel layer's bias, whole): the constructors
             take the dense layer and keep their shard, so a correct piece never reads the rest, and
             a rank cannot compute the dense piece alone;
  "x"        its view of the input (IN_VIEW: the whole of a replicated one; reduce_from_region: its own);
  "w"        its view of the loss weight (OUT_VIEW; copy_to_region: its own weight);
  "targets"  the targets (the cross-entropies and the model), replicated by design.
So a piece that skips its collectives holds neither the other ranks' weights nor their inputs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from assignments.common.rank_inputs import secret, seed
from assignments.hw4.tests.hw4_setup import (BATCH, COMM_KINDS, CONFIGS, IN_VIEW, OUT_VIEW, SEQ, Case, build_dense,
                                             config_for, dense_input, dense_piece, dense_run, loss_weight,
                                             reduce_input, shard_only, view)


@dataclass
class Draw:
    """Everything the ranks of a case hold between them (dense tensors), made here."""

    model_seed: int
    x: torch.Tensor                       # the dense input (for reduce_from_region: rank 0's)
    xs: list                              # reduce_from_region: every rank's input; else []
    ws: list                              # every rank's loss weight (dense shape; None for the model)
    targets: torch.Tensor


def draw(case: Case, p: int) -> Draw:
    """The case's dense model seed, inputs, loss weights and targets at p, from the secret."""
    return _draw(case, p, secret())


@functools.lru_cache(maxsize=64)
def _draw(case: Case, p: int, _secret: bytes) -> Draw:
    key, cfg, kind = ("hw4", repr(case), p), config_for(p), case.kind
    targets = torch.randint(0, CONFIGS[cfg]["vocab"], (BATCH, SEQ),
                            generator=torch.Generator().manual_seed(seed("targets", *key)))
    xs = [reduce_input(seed("reduce", *key, r)) for r in range(p)] if kind == "reduce" else []
    x = xs[0] if xs else dense_input(kind, cfg, seed("input", *key))
    if kind == "copy":
        ws = [loss_weight(kind, cfg, seed("loss weight", *key, r)) for r in range(p)]
    else:
        ws = [loss_weight(kind, cfg, seed("loss weight", *key))] * p
    return Draw(seed("model", *key), x, xs, ws, targets)


def make_inputs(case: Case, p: int) -> list:
    """Every rank's input of `case` at p (the same on every call with the same secret)."""
    return _make(case, p, secret())


@functools.lru_cache(maxsize=64)
def _make(case: Case, p: int, _secret: bytes) -> list:
    kind = case.kind
    if kind.startswith("bad_"):
        return [None] * p
    d, cfg = draw(case, p), config_for(p)
    out = []
    for r in range(p):
        module = dense_piece(kind, build_dense(cfg, seed=d.model_seed))[0]
        x = d.xs[r] if kind == "reduce" else view(d.x, IN_VIEW.get(kind, "full"), r, p)
        w = None if d.ws[r] is None else view(d.ws[r], OUT_VIEW.get(kind, "full"), r, p)
        out.append({"state": None if module is None else shard_only(kind, module, r, p), "x": x.clone(),
                    "w": None if w is None else w.clone(), "targets": d.targets})
    return out


def reference(case: Case, p: int):
    """(output, input gradient, {dense parameter name: gradient}) of the dense piece on the whole
    input: the full tensors (for the comm ops, whose answers depend on p: their closed forms)."""
    return _reference(case, p, secret())


@functools.lru_cache(maxsize=64)
def _reference(case: Case, p: int, _secret: bytes):
    kind, d = case.kind, draw(case, p)
    if kind == "copy":
        return d.x, sum(d.ws), {}
    if kind == "reduce":
        return sum(d.xs), d.ws[0], {}
    if kind in COMM_KINDS:
        return d.x, d.ws[0], {}
    return dense_run(kind, build_dense(config_for(p), seed=d.model_seed), d.x, d.ws[0], d.targets)
