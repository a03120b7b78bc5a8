"""Homework 5 test harness: the models, the data, the cases and the single-process reference.
Used on the ranks (hw5_ranks.py) and in the grading process (hw5_checks.py). The graded runs' batches
are drawn from the grading's secret in the grading process (hw5_inputs.py): the first stage is sent
the inputs, the last the targets (the other stages zeros of their shapes); batch() and reference()
below keep the public batches (the contract tests and the bad-input cases use them).

Models (float64, every parameter random so that a missing or doubled gradient shows):
    "mlp"          MLP(d_in 12, hidden 16, 4 classes, depth 3): 4 layers, cross-entropy
    "deep_mlp"     the same with depth 7: 8 layers, for interleaved schedules (p v stages, up to 4 x 2)
    "transformer"  CharTransformer(vocab 24, d_model 16, 2 heads, 2 layers, max_len 8), untied:
                   [embedding, block, block, head], next-token cross-entropy over (B, T)
Batches: MICRO samples per micro-batch times m (B not divisible by m only in the bad-input case).
Training: STEPS steps of SGD(lr 0.3, momentum 0.9) on the mean loss of the whole batch.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from minitorch_dist.models import MLP, CharTransformer
from minitorch_dist.pipeline.partition import stages_of
from minitorch_dist.pipeline.spec import pipeline_spec, split_microbatches

STEPS, LR, MOMENTUM = 2, 0.3, 0.9
MICRO = {"mlp": 3, "deep_mlp": 3, "transformer": 2}               # samples per micro-batch
SEQ, VOCAB, D_IN, CLASSES = 8, 24, 12, 4
STAGE_TIME = (1e-3, 2e-3)                          # sim: forward and backward seconds per stage and micro-batch

# kind -> (task, what it runs)
KINDS = {"boundary": ("task5_1", "one micro-batch at a time through the stages (send/recv, forward/backward steps)"),
         "gpipe": ("task5_2", "gpipe_step"), "1f1b": ("task5_3", "one_f_one_b_step"),
         "sched_gpipe": ("task5_4", "schedule_step(gpipe_schedule)"),
         "sched_1f1b": ("task5_4", "schedule_step(one_f_one_b_schedule)"),
         "generators": ("task5_4", "gpipe_schedule and one_f_one_b_schedule as data"),
         "deadlock": ("task5_4", "a deadlocking hand-written schedule, run unvalidated and validated"),
         "ckpt_gpipe": ("task5_5", "gpipe_step with activation checkpointing"),
         "ckpt_1f1b": ("task5_5", "one_f_one_b_step with activation checkpointing"),
         "bad_batch": ("task5_2", "gpipe_step on a batch that m does not divide"),
         "bad_batch_1f1b": ("task5_3", "one_f_one_b_step on a batch that m does not divide"),
         "data_parallel": ("task5_6", "data_parallel_step: 2 pipeline replicas of p/2 stages, gradients averaged"),
         "interleaved": ("task5_7", "schedule_step(interleaved_schedule) with 2 chunks per rank"),
         "interleaved_generators": ("task5_7", "interleaved_schedule as data, valid sizes and clear errors"),
         "vocab_layers": ("task5_8", "the vocabulary layers sharded over every rank, large logits"),
         "vocab_pipeline": ("task5_8", "vocab_pipeline_step: a CharTransformer's body pipelined, its vocabulary "
                                       "layers sharded over every rank")}
TRAINING = ("boundary", "gpipe", "1f1b", "sched_gpipe", "sched_1f1b", "ckpt_gpipe", "ckpt_1f1b")
GENERATOR_SIZES = ((1, 1), (1, 3), (2, 1), (2, 2), (2, 5), (3, 2), (3, 7), (4, 4), (4, 9), (5, 3))


@dataclass(frozen=True)
class Case:
    """One run on every rank of the pipeline: kind (KINDS), model, m micro-batches, tag (a test's)."""

    kind: str
    model: str = "mlp"
    m: int = 1
    tag: str = ""

    @property
    def task(self) -> str:
        return KINDS[self.kind][0]

    def describe(self, p: int) -> str:
        return f"{KINDS[self.kind][1]} ({self.model}, p={p} stages, m={self.m} micro-batches)"


def build_model(name: str):
    """A fresh float64 model, every parameter drawn at random from a fixed seed."""
    if name.endswith("mlp"):
        model = MLP(d_in=D_IN, d_hidden=16, d_out=CLASSES, depth=7 if name == "deep_mlp" else 3, seed=0).double()
    else:
        model = CharTransformer(VOCAB, d_model=16, n_heads=2, n_layers=2, max_len=SEQ, seed=0,
                                tie_weights=False).double()
    return randomized(model, seed=77)


def randomized(model, seed: int):
    """`model` with every parameter drawn at random (norm weights around 1), in place; returns it."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, prm in model.named_parameters():
            noise = torch.randn(prm.shape, generator=gen, dtype=torch.float64)
            norm_weight = name.split(".")[-2].startswith("ln") and name.endswith("weight")
            prm.copy_((1.0 if norm_weight else 0.0) + (0.3 if prm.dim() > 1 else 0.1) * noise)
    return model


@functools.lru_cache(maxsize=None)
def batch(name: str, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, targets) of `size` samples, the same for every step: the public batch."""
    return draw_batch(name, size, 1000 + size)


def draw_batch(name: str, size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, targets) of `size` samples drawn from `seed`."""
    gen = torch.Generator().manual_seed(seed)
    if name.endswith("mlp"):
        return (torch.randn(size, D_IN, generator=gen, dtype=torch.float64),
                torch.randint(0, CLASSES, (size,), generator=gen))
    tokens = torch.randint(0, VOCAB, (size, SEQ + 1), generator=gen)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy: logits (N, C) or (B, T, V)."""
    return F.cross_entropy(output.flatten(0, -2), target.flatten())


def batch_size(case: Case) -> int:
    return MICRO[case.model] * case.m


def stage_parts(name: str, p: int, m: int):
    """(the p stage modules of a fresh model, their specs for one micro-batch of m)."""
    stages = stages_of(build_model(name), p)
    x, _ = batch(name, MICRO[name] * m)
    return stages, pipeline_spec(stages, split_microbatches(x, m)[0])


def train_reference(name: str, x: torch.Tensor, y: torch.Tensor, n_stages: int):
    """(stage by stage {parameter name: value} of the whole model after STEPS full-batch steps on (x, y),
    the batch's mean loss before each step)."""
    model = build_model(name)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    stages = [{n: prm.detach().clone() for n, prm in stage.named_parameters()} for stage in stages_of(model, n_stages)]
    return stages, losses


@functools.lru_cache(maxsize=None)
def reference(name: str, p: int, m: int) -> list[dict[str, torch.Tensor]]:
    """Stage by stage, {parameter name: value} of the whole model after STEPS steps on the public batch."""
    return train_reference(name, *batch(name, MICRO[name] * m), p)[0]


def reference_losses(name: str, m: int) -> list[float]:
    """The public batch's mean loss before each of the STEPS steps."""
    return train_reference(name, *batch(name, MICRO[name] * m), 1)[1]


def schedule_of(kind: str) -> str:
    """The order a case's kind runs in: "gpipe", "1f1b" or "boundary" (one micro-batch at a time)."""
    return "1f1b" if kind.endswith("1f1b") else "boundary" if kind == "boundary" else "gpipe"


def expected_order(schedule: str, j: int, p: int, m: int) -> list[str]:
    """F/B order of stage j: GPipe, 1F1B, or one micro-batch at a time ("boundary")."""
    if schedule == "boundary":
        return [f"{k}{i}" for i in range(m) for k in "FB"]
    if schedule == "gpipe":
        return [f"F{i}" for i in range(m)] + [f"B{i}" for i in range(m)]
    warm = min(p - j - 1, m)
    steady = [x for k in range(m - warm) for x in (f"F{warm + k}", f"B{k}")]
    return [f"F{i}" for i in range(warm)] + steady + [f"B{i}" for i in range(m - warm, m)]


def expected_lanes(schedule: str, p: int, m: int) -> list[list[str]]:
    """Every rank's actions as text: expected_order with each F and B wrapped in its messages."""
    lanes = []
    for j in range(p):
        lane = []
        for mark in expected_order(schedule, j, p, m):
            i = mark[1:]
            if mark[0] == "F":
                lane += ([f"RECV_F{i}"] if j > 0 else []) + [mark] + ([f"SEND_F{i}"] if j < p - 1 else [])
            else:
                lane += ([f"RECV_B{i}"] if j < p - 1 else []) + [mark] + ([f"SEND_B{i}"] if j > 0 else [])
        lanes.append(lane)
    return lanes
