"""Split a model into p pipeline stages of consecutive layers, balanced by parameter count.

    layers = char_transformer_layers(model)        # [embedding, block 0, ..., block L-1, head]
    bounds = balance_by_params(layers, p)          # [(0, 2), (2, 4), ...]: layers [start, end) per stage
    stages = split_layers(layers, bounds)          # one nn.Sequential per stage

A stage is a run of consecutive layers; stage j's output is stage j+1's input. The partition
minimises the largest stage's parameter count (ties: the earliest boundaries), with at least one
layer per stage. Provided code (not part of the homework).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from minitorch_dist.models import MLP, CharTransformer

__all__ = ["balance_by_params", "split_layers", "char_transformer_layers", "mlp_layers", "stages_of",
           "Embedding", "Head"]


def _n_params(module: nn.Module) -> int:
    return sum(prm.numel() for prm in module.parameters())


def balance_by_params(layers, p: int) -> list[tuple[int, int]]:
    """Cut `layers` (modules, or their parameter counts) into p runs minimising the largest run.

    Returns [(start, end)] per stage, layers [start, end). Dynamic programming over
    (layers used, stages used): O(p n^2) for n layers, exact.
    """
    sizes = [int(x) if isinstance(x, int) else _n_params(x) for x in layers]
    n = len(sizes)
    if p < 1:
        raise ValueError(f"balance_by_params: the number of stages must be >= 1, got {p}")
    if n < p:
        raise ValueError(f"balance_by_params: {n} layers cannot fill {p} stages (each stage needs at least one "
                         f"layer); use at most {n} stages or a deeper model")
    prefix = [0]
    for s in sizes:
        prefix.append(prefix[-1] + s)
    inf = float("inf")
    best = [[inf] * (n + 1) for _ in range(p + 1)]        # best[k][i]: first i layers in k stages
    cut = [[0] * (n + 1) for _ in range(p + 1)]
    best[0][0] = 0
    for k in range(1, p + 1):
        for i in range(k, n + 1):
            for s in range(k - 1, i):                      # the last stage holds layers [s, i)
                cost = max(best[k - 1][s], prefix[i] - prefix[s])
                if cost < best[k][i]:
                    best[k][i], cut[k][i] = cost, s
    bounds, end = [], n
    for k in range(p, 0, -1):
        bounds.append((cut[k][end], end))
        end = cut[k][end]
    return bounds[::-1]


def split_layers(layers, bounds) -> list[nn.Sequential]:
    """One nn.Sequential per stage holding layers [start, end) (the same module objects)."""
    return [nn.Sequential(*layers[start:end]) for start, end in bounds]


class Embedding(nn.Module):
    """CharTransformer's first layer: token + position embeddings. (B, T) int64 -> (B, T, C)."""

    def __init__(self, model: CharTransformer):
        super().__init__()
        self.tok_emb, self.pos_emb = model.tok_emb, model.pos_emb

    def forward(self, idx: Tensor) -> Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)          # (T,)
        return self.tok_emb(idx) + self.pos_emb(pos)                  # (B, T, C)


class Head(nn.Module):
    """CharTransformer's last layer: final LayerNorm and LM head. (B, T, C) -> logits (B, T, V)."""

    def __init__(self, model: CharTransformer):
        super().__init__()
        self.ln_f, self.lm_head = model.ln_f, model.lm_head

    def forward(self, x: Tensor) -> Tensor:
        return self.lm_head(self.ln_f(x))                             # (B, T, V)


def char_transformer_layers(model: CharTransformer) -> list[nn.Module]:
    """[Embedding, block 0, ..., block L-1, Head]: running them in order equals model(idx).

    The tied embedding / LM head weight would live on the first and the last stage at once;
    build the model with tie_weights=False for a pipeline.
    """
    if model.tie_weights:
        raise ValueError("char_transformer_layers: this CharTransformer ties its token embedding and LM head "
                         "(one weight on the first and the last stage); build it with tie_weights=False to "
                         "split it into pipeline stages")
    return [Embedding(model), *model.blocks, Head(model)]


def mlp_layers(model: MLP) -> list[nn.Module]:
    """[Linear+ReLU, ..., Linear]: each hidden Linear with its ReLU, then the output Linear."""
    net = list(model.net)
    return [nn.Sequential(net[i], net[i + 1]) for i in range(0, len(net) - 1, 2)] + [net[-1]]


def stages_of(model: nn.Module, p: int) -> list[nn.Sequential]:
    """The p stages of a CharTransformer or an MLP, balanced by parameter count."""
    if isinstance(model, CharTransformer):
        layers = char_transformer_layers(model)
    elif isinstance(model, MLP):
        layers = mlp_layers(model)
    else:
        raise TypeError(f"stages_of: expected a CharTransformer or an MLP, got {type(model).__name__}; split "
                        f"other models with balance_by_params(layers, p) and split_layers(layers, bounds)")
    return split_layers(layers, balance_by_params(layers, p))
