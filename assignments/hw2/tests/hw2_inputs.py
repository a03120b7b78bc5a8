"""Homework 2 test harness, the inputs: what each rank trains on or averages, made in the test process.

    own = make_inputs(case, p)           # [rank 0's input, ..., rank p-1's]: each rank is sent its own
    batches(case, p)                     # the global batch of every step of a training case
    reference(case, p)                   # the single-process run on those batches (hw2_checks)
    decentralized(case, p)               # D-PSGD / SGP: every rank's initial weights and own batches

Everything a value check depends on is drawn from the grading's secret (assignments/common/
rank_inputs.py), and a rank receives only its own part of it, so a rank that skips the communication
cannot rebuild what the others hold:
  data parallel  the global batches (secret seeds); rank r gets its part of each (local_part), and
                 with edge "outside" its own initial weights (rank 0's are the run's: the wrapper
                 must send them);
  ps             rank 0 gets the global batches (the workers get their parts from it);
  dpsgd, sgp     rank r's initial weights and own batches (and its push-sum weight w);
  ring_gossip, moshpit   rank r's x: multiples of 6 (sums, /2 and /3 stay exact in float64);
  push_sum       rank r's x (multiples of 8, or random) and w (1, or multiples of 1/4 for seed 2).
The model every data-parallel replica starts from (seed 0) stays public: the replicas share it by design.
"""

from __future__ import annotations

import functools

import torch

from assignments.common.rank_inputs import generator, secret, seed
from assignments.hw2.tests.hw2_setup import (Case, build_model, flat_all, global_batch, initial_weights,
                                             reference_steps)
from minitorch_dist.data import local_part

DP_KINDS = ("allreduce", "overlap", "bucketed")
GOSSIP_SHAPE = (3, 5)
PUSH_SUM_SHAPE = (3, 4)


def make_inputs(case: Case, p: int) -> list:
    """Every rank's input of `case` at p (the same on every call with the same secret)."""
    if case.kind in DP_KINDS:
        parts = [[(local_part(x, r, p), local_part(y, r, p)) for x, y in batches(case, p)] for r in range(p)]
        inits = outside_inits(case, p) if case.edge == "outside" else [None] * p
        return [{"batches": parts[r], "init": inits[r]} for r in range(p)]
    if case.kind == "ps":
        return [batches(case, p)] + [None] * (p - 1)
    if case.kind in ("dpsgd", "sgp"):
        inits, own, w = decentralized(case, p)
        return [{"init": inits[r], "batches": own[r], "w": w[r]} for r in range(p)]
    if case.kind in ("ring_gossip", "moshpit"):
        return gossip_values(case, p)
    if case.kind == "push_sum":
        xs, ws = push_sum_values(case, p)
        return [{"x": x, "w": w} for x, w in zip(xs, ws)]
    raise ValueError(f"hw2 inputs: unknown kind {case.kind!r}")


def _key(case: Case, p: int) -> tuple:
    return ("hw2", repr(case), p)


def batches(case: Case, p: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The global batch (x, y) of every training step of `case` at p, from the secret."""
    return _batches(case, p, secret())


@functools.lru_cache(maxsize=64)
def _batches(case: Case, p: int, _secret: bytes) -> list[tuple[torch.Tensor, torch.Tensor]]:
    s = seed("batches", *_key(case, p))
    return [global_batch(case, step, s) for step in range(case.steps)]


def outside_inits(case: Case, p: int) -> list[torch.Tensor]:
    """Edge "outside": every rank's own initial weights (flat_all's layout), each from the secret."""
    return _inits(case, p, secret())


@functools.lru_cache(maxsize=64)
def _inits(case: Case, p: int, _secret: bytes) -> list[torch.Tensor]:
    return [flat_all(build_model(case, seed=seed("init", *_key(case, p), r))) for r in range(p)]


def reference(case: Case, p: int) -> tuple[list[torch.Tensor], list[float]]:
    """(flat parameters after each step, each step's loss) of the single-process run on the case's
    global batches, from rank 0's weights (the case's model, or rank 0's own with edge "outside")."""
    return _reference(case, p, secret())


@functools.lru_cache(maxsize=128)
def _reference(case: Case, p: int, _secret: bytes):
    init = outside_inits(case, p)[0] if case.edge == "outside" else None
    return reference_steps(case, batches(case, p), init)


def decentralized(case: Case, p: int) -> tuple[list[torch.Tensor], list[list[tuple]], list[float]]:
    """D-PSGD / SGP: (every rank's initial weights, every rank's own batch of each step, every rank's
    initial push-sum weight w)."""
    return _decentralized(case, p, secret())


@functools.lru_cache(maxsize=32)
def _decentralized(case: Case, p: int, _secret: bytes):
    inits = [flat_all(build_model(case, seed=seed("init", *_key(case, p), r))) for r in range(p)]
    own = []
    for r in range(p):
        s = seed("own batches", *_key(case, p), r)
        own.append([global_batch(case, step, s) for step in range(case.steps)])
    return inits, own, initial_weights(case, p)


def gossip_values(case: Case, p: int) -> list[torch.Tensor]:
    """Every rank's float64 x for ring_gossip_ / moshpit: multiples of 6 of integers in [-500, 500]
    (sums, halves and thirds of sums are exact)."""
    return [6.0 * torch.randint(-500, 501, GOSSIP_SHAPE, generator=generator("gossip", *_key(case, p), r),
                                dtype=torch.int64).to(torch.float64) for r in range(p)]


def push_sum_values(case: Case, p: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Every rank's (x, w) at the start of a push-sum case.

    seed 0: x small integers times 8 (halving stays exact), w = 1; seed 2: the same kind of x, w a
    multiple of 1/4 in [1/4, 2] (so the weights matter); other seeds: random x, w = 1.
    """
    xs, ws = [], []
    for r in range(p):
        g = generator("push_sum", *_key(case, p), r)
        if case.seed in (0, 2):
            x = 8.0 * torch.randint(-200, 201, PUSH_SUM_SHAPE, generator=g, dtype=torch.int64).to(torch.float64)
        else:
            x = torch.randn(PUSH_SUM_SHAPE, generator=g, dtype=torch.float64)
        w = 0.25 * float(torch.randint(1, 9, (1,), generator=g)) if case.seed == 2 else 1.0
        xs.append(x)
        ws.append(torch.full((1,), w, dtype=torch.float64))
    return xs, ws
