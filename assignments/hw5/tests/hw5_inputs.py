"""Homework 5 test harness, the inputs: what each rank of the pipeline holds, made in the test process.

    own = make_inputs(case, p)           # [rank 0's input, ..., rank p-1's]: each rank is sent its own
    reference(case, p)                   # (every stage's parameters after STEPS steps, the losses)

Drawn from the grading's secret (assignments/common/rank_inputs.py), keyed by (case, p):
  training cases, 5.7   the batch (x, y); the rank of the first stage is sent x, the rank of the last
                        stage y, every other tensor zeros of its shape: a stage cannot run the model
                        alone (the first lacks the targets, the last the inputs), so a step that skips
                        the boundary's messages cannot be right;
  5.6 (grid)            the same per replica: the first stage of replica k is sent x with only
                        replica k's rows (replica_share's: contiguous), its last stage y likewise;
  5.8 layers            the weights, ids, targets, h and the embedding's gradient; rank r is sent its
                        rows of both weights (zeros elsewhere), the ids and targets (every rank reads
                        them), h on the last rank and the embedding's gradient on rank 0;
  5.8 pipeline          the model and the batch; rank r is sent the model with only its vocabulary
                        rows (embedding and LM head) filled in, and the batch (every rank reads it).
The model the stages are cut from stays public (seed 77): a stage's weights alone compute nothing
without the boundary's activations and gradients. Not drawn here: the generators, the deadlocking
schedule and the bad batch (nothing compared is a value).
"""

from __future__ import annotations

import functools

import torch

from assignments.common.rank_inputs import secret, seed
from assignments.hw5.tests.hw5_bonus_ranks import CHUNKS, GRID_STAGES
from assignments.hw5.tests.hw5_setup import MICRO, TRAINING, Case, draw_batch, train_reference
from assignments.hw5.tests.hw5_vocab_ranks import VOCAB_V, layer_inputs, pipeline_batch, vocab_model

PIPELINED = TRAINING + ("interleaved", "data_parallel")
VOCAB_ROWS = ("tok_emb.weight", "lm_head.weight")        # the vocabulary layers' weights: rows by vocab_shard


def expected_rows(v: int, p: int, r: int) -> tuple[int, int]:
    """The ids [start, stop) that vocab_shard(v) gives rank r of p: v // p each, one more on the first
    v mod p ranks."""
    base, extra = divmod(v, p)
    start = r * base + min(r, extra)
    return start, start + base + (r < extra)


def _key(case: Case, p: int) -> tuple:
    return ("hw5", repr(case), p)


def batch_of(case: Case, p: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The whole batch (x, y) of a pipelined case at p."""
    return _batch(case, p, secret())


@functools.lru_cache(maxsize=64)
def _batch(case: Case, p: int, _secret: bytes):
    replicas = p // GRID_STAGES if case.kind == "data_parallel" else 1
    return draw_batch(case.model, MICRO[case.model] * replicas * case.m, seed("batch", *_key(case, p)))


def _only(t: torch.Tensor, rows: slice | None) -> torch.Tensor:
    """t with only `rows` kept (None: none), zeros elsewhere."""
    out = torch.zeros_like(t)
    if rows is not None:
        out[rows] = t[rows]
    return out


def make_inputs(case: Case, p: int) -> list:
    """Every rank's input of `case` at p (the same on every call with the same secret)."""
    return _make(case, p, secret())


@functools.lru_cache(maxsize=64)
def _make(case: Case, p: int, _secret: bytes) -> list:
    kind, everything = case.kind, slice(None)
    if kind in PIPELINED:
        x, y = batch_of(case, p)
        if kind != "data_parallel":
            return [(_only(x, everything if r == 0 else None), _only(y, everything if r == p - 1 else None))
                    for r in range(p)]
        share = x.shape[0] // (p // GRID_STAGES)
        out = []
        for r in range(p):
            k, j = divmod(r, GRID_STAGES)                  # replica k, stage j (hw5_bonus_checks: the grid)
            rows = slice(k * share, (k + 1) * share)
            out.append((_only(x, rows if j == 0 else None), _only(y, rows if j == GRID_STAGES - 1 else None)))
        return out
    if kind == "vocab_layers":
        full = layer_inputs(seed("layers", *_key(case, p)))
        out = []
        for r in range(p):
            rows = slice(*expected_rows(VOCAB_V, p, r))
            out.append({"embedding": _only(full["embedding"], rows), "head": _only(full["head"], rows),
                        "idx": full["idx"], "target": full["target"],
                        "hidden": full["hidden"] if r == p - 1 else None,
                        "grad_tokens": full["grad_tokens"] if r == 0 else None})
        return out
    if kind == "vocab_pipeline":
        model = vocab_model(seed("model", *_key(case, p)))
        idx, target = pipeline_batch(case.m, seed("batch", *_key(case, p)))
        state = model.state_dict()
        out = []
        for r in range(p):
            rows = slice(*expected_rows(VOCAB_V, p, r))
            mine = {k: _only(v, rows) if k in VOCAB_ROWS else v.clone() for k, v in state.items()}
            out.append({"state": mine, "idx": idx, "target": target})
        return out
    return [None] * p


def reference(case: Case, p: int):
    """(stage by stage {parameter name: value} after STEPS steps of the whole model on the whole batch,
    the batch's mean loss before each step), cut into the case's stages (p; p v interleaved; the
    grid's stages)."""
    return _reference(case, p, secret())


@functools.lru_cache(maxsize=64)
def _reference(case: Case, p: int, _secret: bytes):
    stages = p * CHUNKS if case.kind == "interleaved" else GRID_STAGES if case.kind == "data_parallel" else p
    return train_reference(case.model, *batch_of(case, p), stages)


def layer_inputs_of(case: Case, p: int) -> dict:
    """The "vocab_layers" case's whole inputs at p (what the ranks hold between them)."""
    return layer_inputs(seed("layers", *_key(case, p)))


def vocab_pipeline_of(case: Case, p: int):
    """The "vocab_pipeline" case's (model, (idx, target)) at p."""
    return vocab_model(seed("model", *_key(case, p))), pipeline_batch(case.m, seed("batch", *_key(case, p)))
