"""Homework 2 test harness: what a case trains (model, data, optimizer) and the single-process
reference it must match. Used on the ranks (hw2_ranks.py) and in the grading process (hw2_checks.py),
so both sides build bitwise-identical models and batches from the same seeds.

Models (float64, so a data-parallel run can match the reference to ~1e-15):
    mlp          MLP(16 -> 32 -> 32 -> 4), 1,732 parameters
    deep         MLP(16 -> 128 x 6 -> 4), ~85k parameters: backward long enough to see overlap
    transformer  CharTransformer(vocab 61, d_model 32, 2 layers, max_len 16), tied embedding / LM head
    tower        mlp plus an `aux` Linear(4, 4) used only on even steps (unused on odd steps)
Data: make_classification(512, seed=1) cut by global_batches(seed=...); char_batches for text. The
seeds of the batches a case trains on, and every rank's own values, come from the grading's secret in
the test process (hw2_inputs.py): each rank receives only its own.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from minitorch_dist.data import CharTokenizer, char_batches, global_batches, load_text, make_classification
from minitorch_dist.models import MLP, CharTransformer

SEQ_LEN = 16
N_SAMPLES = 512
TASK_OF = {"ps": "task2_1", "allreduce": "task2_2", "overlap": "task2_3", "bucketed": "task2_4",
           "ring_gossip": "task2_5", "dpsgd": "task2_5", "push_sum": "task2_6", "sgp": "task2_6",
           "moshpit": "task2_7"}


@dataclass(frozen=True)
class Case:
    """One run of a homework-2 piece on every rank.

    kind:    "ps", "allreduce", "overlap", "bucketed" (training runs), "ring_gossip", "dpsgd",
             "push_sum", "sgp", "moshpit"
    model:   "mlp", "deep", "transformer", "tower", "tiedmid" (float32, a weight tied in the middle)
    optim:   "sgd" (lr 0.1, momentum 0.9), "adamw" (lr 0.01, weight decay 0.1) or "torchsgd" (the
             real torch.optim.SGD, lr 0.1)
    edge:    "" or "frozen" (net.0.weight frozen), "unused" (tower), "accum" (2 micro-batches, no_sync),
             "outside" (rank r starts from weights of its own, hw2_inputs.py: the wrapper must make every
             replica rank 0's, the frozen parameter included; parameters checked after every step)
    batch:   global batch size; steps: training steps (or gossip steps); start: first gossip step
    bucket_kb: BucketedDDP bucket size in KiB; lr: the D-PSGD / SGP learning rate; tag: which test
             looks at the case
    """

    kind: str
    model: str = "mlp"
    optim: str = "sgd"
    edge: str = ""
    batch: int = 24
    steps: int = 3
    start: int = 0
    seed: int = 0
    bucket_kb: float = 4.0
    lr: float = 0.1
    tag: str = ""

    @property
    def task(self) -> str:
        return TASK_OF[self.kind]

    def describe(self, p: int) -> str:
        """"bucketed(p=3, transformer, adamw, 2 steps, batch 24)" for messages."""
        if self.kind in ("ring_gossip", "push_sum", "moshpit"):
            return f"{self.kind}(p={p}, steps {self.start}..{self.start + self.steps - 1})"
        what = [self.model, self.optim if self.kind not in ("dpsgd", "sgp") else f"lr {self.lr}"]
        what += [f"{self.steps} steps", f"batch {self.batch}"] + ([f"edge: {self.edge}"] if self.edge else [])
        if self.kind == "bucketed":
            what.append(f"bucket {self.bucket_kb:g} KiB")
        return f"{self.kind}(p={p}, {', '.join(what)})"


class Tower(nn.Module):
    """mlp with an extra head: forward(x, use_aux) = mlp(x) + aux(mlp(x)) if use_aux else mlp(x)."""

    def __init__(self):
        super().__init__()
        self.body = MLP(seed=0)
        self.aux = nn.Linear(4, 4)
        with torch.no_grad():
            gen = torch.Generator().manual_seed(7)
            self.aux.weight.copy_(torch.rand(4, 4, generator=gen) - 0.5)
            self.aux.bias.copy_(torch.rand(4, generator=gen) - 0.5)

    def forward(self, x, use_aux: bool = True):
        out = self.body(x)
        return out + self.aux(out) if use_aux else out


class TiedMiddle(nn.Module):
    """float32: in -> a -> b -> out with tanh, where a and b share one weight (tied in the middle of
    the network, listed once by parameters()) and a frozen per-feature scale; initialised from `seed`."""

    def __init__(self, seed: int = 0):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.inp, self.a, self.b, self.out = nn.Linear(16, 24), nn.Linear(24, 24), nn.Linear(24, 24), nn.Linear(24, 4)
        self.b.weight = self.a.weight
        self.scale = nn.Parameter(torch.empty(24), requires_grad=False)
        with torch.no_grad():
            for param in self.parameters():
                param.copy_(torch.rand(param.shape, generator=gen) - 0.5)
            self.scale.add_(1.0)

    def forward(self, x):
        h = torch.tanh(self.inp(x.float()))
        h = torch.tanh(self.a(h)) * self.scale
        return self.out(torch.tanh(self.b(h)))


@functools.lru_cache(maxsize=1)
def text_tokens() -> tuple[torch.Tensor, int]:
    text = load_text()
    tokenizer = CharTokenizer(text)
    return tokenizer.encode(text), tokenizer.vocab_size


@functools.lru_cache(maxsize=4)
def classification(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = make_classification(N_SAMPLES, seed=seed)
    return x.double(), y


def build_model(case: Case, seed: int = 0) -> nn.Module:
    """The case's model in float64 (the same bits in every process for the same seed)."""
    if case.model == "transformer":
        model = CharTransformer(text_tokens()[1], d_model=32, n_heads=4, n_layers=2, max_len=SEQ_LEN, seed=seed)
    elif case.model == "deep":
        model = MLP(d_hidden=128, depth=6, seed=seed)
    elif case.model == "tower":
        model = Tower()
    elif case.model == "tiedmid":
        return TiedMiddle(seed)
    else:
        model = MLP(seed=seed)
    model = model.double()
    if case.edge == "frozen":
        model.net[0].weight.requires_grad_(False)
    return model


class Optimizer:
    """SGD with momentum (lr 0.1, momentum 0.9) or AdamW (lr 0.01, betas (0.9, 0.999), eps 1e-8,
    weight decay 0.1): torch.optim's update formulas (default flags), written out. torch.optim's
    constructor imports torch._dynamo, about 2 s in every fresh process; these tests start many.
    A parameter whose .grad is None is skipped, as torch.optim does (its state does not advance).
    """

    def __init__(self, params, kind: str):
        self.params, self.kind, self.state = list(params), kind, {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        for param in self.params:
            param.grad = None

    @torch.no_grad()
    def step(self) -> None:
        for param in self.params:
            if param.grad is None:
                continue
            g, state = param.grad, self.state.setdefault(param, {})
            if self.kind == "sgd":                                        # buf <- 0.9 buf + g; p -= 0.1 buf
                buf = state["buf"] = g.clone() if "buf" not in state else state["buf"].mul_(0.9).add_(g)
                param.add_(buf, alpha=-0.1)
                continue
            lr, (b1, b2), t = 0.01, (0.9, 0.999), state.get("t", 0) + 1
            m, v = state.setdefault("m", torch.zeros_like(param)), state.setdefault("v", torch.zeros_like(param))
            state["t"] = t
            param.mul_(1 - lr * 0.1)                                      # decoupled weight decay
            m.lerp_(g, 1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            denom = (v.sqrt() / math.sqrt(1 - b2 ** t)).add_(1e-8)
            param.addcdiv_(m, denom, value=-lr / (1 - b1 ** t))


def make_optimizer(case: Case, model: nn.Module):
    if case.optim == "torchsgd":
        return torch.optim.SGD(model.parameters(), lr=0.1)
    return Optimizer(model.parameters(), "adamw" if case.optim == "adamw" else "sgd")


def global_batch(case: Case, step: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The whole batch of training step `step` from the batches' `seed` (the tests draw it from the
    grading's secret: hw2_inputs.py)."""
    if case.model == "transformer":
        return char_batches(text_tokens()[0], case.batch, SEQ_LEN, step, seed=seed)
    x, y = classification()
    batches = global_batches(N_SAMPLES, case.batch, seed=seed)
    idx = batches[step % len(batches)]
    return x[idx], y[idx]


def uses_aux(case: Case, step: int) -> bool:
    """The tower's aux head is used on even steps only (so on odd steps its .grad stays None)."""
    return step % 2 == 0


def initial_weights(case: Case, p: int) -> list[float]:
    """Each rank's push-sum weight at the start of an SGP case: 1, or for seed 2 (as after uneven
    mixing) 1.5 and 0.5 alternating by rank (the last rank 1 when p is odd), so that z = x / w and
    x differ; they still sum to p."""
    if case.kind != "sgp" or case.seed != 2:
        return [1.0] * p
    return [1.5 if r % 2 == 0 else 0.5 for r in range(p - p % 2)] + [1.0] * (p % 2)


def cross_entropy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over every sample (every token for the transformer): the loss_fn of every case."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def loss_of(case: Case, model: nn.Module, x, y, step: int) -> torch.Tensor:
    """The case's loss of the model on (x, y) at `step` (the tower's aux head on even steps only)."""
    return cross_entropy(model(x, uses_aux(case, step)) if case.model == "tower" else model(x), y)


def flat_all(model: nn.Module) -> torch.Tensor:
    """Every parameter (trainable or not) of the model, flattened and concatenated, float64."""
    return torch.cat([p.detach().reshape(-1).to(torch.float64) for p in model.parameters()])


def trainable_bytes(model: nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)


def load_flat(model: nn.Module, flat: torch.Tensor) -> nn.Module:
    """Copy a flat vector (flat_all's layout, float64) into the model's parameters, in their dtype."""
    offset = 0
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(flat[offset:offset + param.numel()].view_as(param))
            offset += param.numel()
    if offset != flat.numel():
        raise ValueError(f"load_flat: the model holds {offset} values, the vector {flat.numel()}")
    return model


def reference_steps(case: Case, batches, init: torch.Tensor | None = None) -> tuple[list[torch.Tensor], list[float]]:
    """(flat parameters after each step, loss of each step) of the single-process run on the global
    `batches` ((x, y) per step), from the case's model (or from `init`, flat_all's layout)."""
    model = build_model(case)
    if init is not None:
        load_flat(model, init)
    opt = make_optimizer(case, model)
    losses, flats = [], []
    for step in range(case.steps):
        x, y = batches[step]
        opt.zero_grad(set_to_none=True)
        loss = loss_of(case, model, x, y, step)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        flats.append(flat_all(model))
    return flats, losses
