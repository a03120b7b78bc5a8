"""Homework 6 test harness: what a case trains (model, data, optimizer) and the single-process
reference it must match. Used on the ranks (hw6_ranks.py) and in the grading process (hw6_checks.py).
The graded runs' batches, and the weights of ranks that start apart, are drawn from the grading's
secret in the grading process (hw6_inputs.py): each rank is sent its own rows and its own weights.

Model: CharTransformer(vocab 13, d_model 10, 2 heads, 3 blocks, max_len 8), tied embedding / LM
head, every weight drawn at random (float64 unless the case says float32). Units: 1,330 parameters
per block and 230 in the outer unit: no world size 2, 3, 4 divides them (padding everywhere).
    model "tied"     that model
    model "frozen"   pos_emb and blocks.1.ln1.weight frozen, and a buffer `scale` (vocab,) that
                     multiplies the logits
    model "tiny"     Linear(1, 1) (2 parameters): at p = 3 and 4 some ranks own only padding
Data: a global batch of 12 sequences of 8 tokens per step (graded runs: drawn from the secret,
draw_batch; batch() keeps the public one seeded by the step); rank r of p takes rows
[r 12/p, (r+1) 12/p); the loss is the mean cross-entropy (the tiny model: mean squared error).
Optimizers (torch.optim): AdamW(lr 0.05, weight decay 0.1) or SGD(lr 0.2, momentum 0.9).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from minitorch_dist.models import CharTransformer

VOCAB, D_MODEL, HEADS, LAYERS, SEQ, GLOBAL_BATCH = 13, 10, 2, 3, 8, 12
OPTIMS = {"adamw": (torch.optim.AdamW, {"lr": 0.05, "weight_decay": 0.1}),
          "sgd": (torch.optim.SGD, {"lr": 0.2, "momentum": 0.9})}
STAGES = ("ddp", "zero1", "zero2", "fsdp", "hsdp")
ZERO2_BUCKET = 1500                                  # elements per ZeRO-2 bucket (a block and a bit)
TASK_OF = {"zero1": "task6_1", "zero2": "task6_2", "fsdp": "task6_3", "ddp": "task6_1", "bad_zero": "task6_1",
           "bad_fsdp": "task6_3", "hsdp": "task6_6", "bad_hsdp": "task6_6"}


@dataclass(frozen=True)
class Case:
    """One training run on every rank.

    stage:  "ddp" (the harness's own all-reduce: a baseline), "zero1", "zero2", "fsdp", "hsdp" (6.6,
            shard groups of shard_size ranks); "bad_zero", "bad_fsdp", "bad_hsdp" (a valid construction
            and step, then an invalid construction that must raise)
    optim:  "adamw" or "sgd";  model: "tied", "frozen", "tiny";  dtype: "float64" or "float32"
    prefetch, checkpoint, mixed (bf16 compute): FSDP options;  init "same" or "different" (rank r
    starts from weights of its own, hw6_inputs.py; rank 0's are the reference's);  steps;  tag: which
    test looks;
    for_task: the task whose tests use the case, when not its own (a baseline run).
    """

    stage: str
    optim: str = "adamw"
    model: str = "tied"
    dtype: str = "float64"
    prefetch: bool = False
    checkpoint: bool = False
    mixed: bool = False
    init: str = "same"
    steps: int = 2
    tag: str = ""
    for_task: str = ""
    shard_size: int = 0

    @property
    def kind(self) -> str:
        """The piece that runs (the stub memo's key)."""
        if self.stage != "fsdp":
            return self.stage
        return "fsdp" + "_prefetch" * self.prefetch + "_ckpt" * self.checkpoint + "_mixed" * self.mixed

    @property
    def task(self) -> str:
        if self.for_task:
            return self.for_task
        if self.stage == "fsdp":
            return "task6_5" if self.mixed else "task6_4" if self.checkpoint else "task6_3"
        return TASK_OF[self.stage]

    def describe(self, p: int) -> str:
        extra = [self.optim, self.model, self.dtype, f"{self.steps} steps"]
        extra += [f"shard groups of {self.shard_size}"] if self.shard_size else []
        extra += [w for w, on in (("prefetch", self.prefetch), ("checkpointing", self.checkpoint),
                                  ("bf16 compute", self.mixed), ("ranks start apart", self.init != "same")) if on]
        return f"{self.stage}(p={p}, {', '.join(extra)})"


class ScaledCharTransformer(CharTransformer):
    """CharTransformer whose logits are multiplied by a buffer `scale` (vocab,)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.register_buffer("scale", 1.0 + 0.5 * torch.rand(VOCAB, generator=torch.Generator().manual_seed(3)))

    def forward(self, idx):
        return super().forward(idx) * self.scale


def build_model(case: Case, seed: int = 0) -> nn.Module:
    """The case's model (a new object), random weights of `seed`, in the case's dtype."""
    dtype = getattr(torch, case.dtype)
    gen = torch.Generator().manual_seed(1000 + seed)
    if case.model == "tiny":
        model = nn.Linear(1, 1)
    else:
        cls = ScaledCharTransformer if case.model == "frozen" else CharTransformer
        model = cls(vocab_size=VOCAB, d_model=D_MODEL, n_heads=HEADS, n_layers=LAYERS, max_len=SEQ, seed=seed)
    model = model.to(dtype)
    with torch.no_grad():
        for name, prm in model.named_parameters():
            noise = torch.randn(prm.shape, generator=gen, dtype=torch.float64).to(dtype)
            is_norm = "ln" in name
            prm.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * noise if is_norm else 0.3 * noise)
    if case.model == "frozen":
        model.pos_emb.weight.requires_grad_(False)
        model.blocks[1].ln1.weight.requires_grad_(False)
    return model


def rows_of(rank: int, p: int) -> slice:
    """Rank `rank`'s rows of a global batch at p."""
    return slice(rank * GLOBAL_BATCH // p, (rank + 1) * GLOBAL_BATCH // p)


def draw_batch(case: Case, seed: int):
    """A global batch (inputs, targets) drawn from `seed`."""
    gen = torch.Generator().manual_seed(seed)
    if case.model == "tiny":
        x = torch.randn(GLOBAL_BATCH, 1, generator=gen, dtype=torch.float64).to(getattr(torch, case.dtype))
        return x, 3.0 * x - 1.0
    idx = torch.randint(0, VOCAB, (GLOBAL_BATCH, SEQ + 1), generator=gen)
    return idx[:, :-1], idx[:, 1:]


def batch(case: Case, step: int, rank: int = 0, p: int = 1):
    """(inputs, targets) of rank `rank` of p at `step` of the public batches, seeded by the step (p = 1:
    the global batch); the graded runs draw theirs from the secret (hw6_inputs.py)."""
    x, y = draw_batch(case, 77 + step)
    rows = rows_of(rank, p)
    return x[rows], y[rows]


def loss_fn(case: Case, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    if case.model == "tiny":
        return F.mse_loss(out.float() if case.mixed else out, target)
    return F.cross_entropy(out.flatten(0, 1).to(torch.float32 if case.mixed else out.dtype), target.flatten())


def make_optimizer(case: Case, params):
    cls, kwargs = OPTIMS[case.optim]
    return cls(params, **kwargs)


def train_one_process(case: Case, batches, init: dict | None = None) -> dict:
    """{name: tensor} after case.steps steps of one process on the global `batches` ((x, y) per step),
    from the case's model (seed 0) or from the parameters `init` ({name: tensor})."""
    model = build_model(case)
    if init is not None:
        load_params(model, init)
    opt = make_optimizer(case, [q for q in model.parameters() if q.requires_grad])
    for step in range(case.steps):
        x, y = batches[step]
        loss_fn(case, model(x), y).backward()
        opt.step()
        opt.zero_grad()
    return {n: q.detach() for n, q in model.named_parameters()}


def load_params(model: nn.Module, values: dict) -> nn.Module:
    """Copy {name: tensor} into the model's parameters of those names."""
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, value in values.items():
            params[name].copy_(value)
    return model


def unit_sizes(case: Case) -> list[int]:
    """Trainable elements of each FSDP unit (blocks, then the outer unit) of the case's model."""
    from minitorch_dist.sharded.policy import make_unit, transformer_units
    model = build_model(case)
    units = [make_unit("outer", model)] if case.model == "tiny" else transformer_units(model)
    return [sum(s.param.numel() for s in u.slots) for u in units]
