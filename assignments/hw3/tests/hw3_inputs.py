"""Homework 3 test harness, the inputs: what each rank compresses, averages or trains on, made in the
test process.

    own = make_inputs(case, p)           # [rank 0's input, ..., rank p-1's]: each rank is sent its own

Everything a value check depends on is drawn from the grading's secret (assignments/common/
rank_inputs.py), and a rank receives only its own part, so a rank that skips the communication
cannot rebuild what the others hold:
  compressors (round trips, all-reduces, error feedback)   rank r's input of every step, in the
        families of hw3_setup.py (the spikes of "spiky" are the same on every rank, by design);
  ef_sign_quadratic   rank r's (a, c_r): the minimum of the mean loss is mean_r c_r;
  powersgd_ddp, allreduce_ddp, compress_ddp   rank r's batch of every step (torch's reference runs on
        the same batches, hw3_powersgd.torch_powersgd);
  powersgd_rank1      rank r's gradients (a shared column space U, each rank's own B_r);
  boundary_*          rank 0's tokens, rank 1's targets.
Not drawn here: orthogonalize and lowrank_round_trip run on one rank and send nothing; char_training's
verdict is a claim on the loss (hw3_training.py), which a rank training alone on its rows could meet
as well, so its batches stay the public char_batches; the bad-input cases use fixed values.
"""

from __future__ import annotations

import functools

import torch

from assignments.common.rank_inputs import secret, seed
from assignments.hw3.tests.hw3_boundary import batch as boundary_batch
from assignments.hw3.tests.hw3_powersgd import batch as ddp_batch
from assignments.hw3.tests.hw3_powersgd import rank1_grads
from assignments.hw3.tests.hw3_setup import EF_STEPS, RANDOMK_STEPS, Case, draw_input, quadratic

DDP_KINDS = ("powersgd_ddp", "allreduce_ddp", "compress_ddp")


def make_inputs(case: Case, p: int) -> list:
    """Every rank's input of `case` at p (the same on every call with the same secret)."""
    return _make(case, p, secret())


def steps_of(case: Case) -> int:
    """How many inputs a compressor case gives each rank (one per step)."""
    if case.kind.startswith("randomk"):
        return RANDOMK_STEPS
    return EF_STEPS if case.kind.startswith("ef_") else 1


def _key(case: Case, p: int) -> tuple:
    return ("hw3", repr(case), p)


@functools.lru_cache(maxsize=256)
def _make(case: Case, p: int, _secret: bytes) -> list:
    k = case.kind
    if k == "ef_sign_quadratic":
        a, centers = quadratic(p, seed("quadratic", *_key(case, p)))
        return [(a, c) for c in centers]
    if k in DDP_KINDS:
        return [[ddp_batch(seed("batch", *_key(case, p), r, step), scale=1.0 + r) for step in range(case.n)]
                for r in range(p)]
    if k == "powersgd_rank1":
        return rank1_grads(p, case.param, seed("rank1", *_key(case, p)))
    if k.startswith("boundary_"):
        idx, targets = boundary_batch(seed("boundary", *_key(case, p)))
        return [idx, targets] + [None] * (p - 2) if p >= 2 else [idx]
    if k.startswith("bad") or k in ("orthogonalize", "lowrank_round_trip", "char_training"):
        return [None] * p
    return [[draw_input(case, seed("input", *_key(case, p), r, step), seed("spikes", *_key(case, p), step))
             for step in range(steps_of(case))] for r in range(p)]
