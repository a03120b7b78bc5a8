"""MLP: a few Linear+ReLU layers and an output Linear, initialised from a seeded generator."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


class MLP(nn.Module):
    """Multi-layer perceptron: `depth` hidden Linear+ReLU layers, then an output Linear.

    Shapes: forward(x (B, d_in) float32) -> logits (B, d_out).
    Parameters: net.0.weight (d_hidden, d_in), net.0.bias (d_hidden,), ..., and the output
    layer's weight (d_out, d_hidden) and bias (d_out,); with depth=0 the model is one Linear.
    Init: PyTorch's default Linear ranges (weight and bias uniform in +-1/sqrt(fan_in)),
    drawn from torch.Generator().manual_seed(seed) in parameter order, so the same arguments
    give bitwise-identical models in every process; the global RNG is neither read nor advanced.

    Args:
        d_in: input features.
        d_hidden: width of every hidden layer.
        d_out: outputs (classes).
        depth: number of hidden Linear+ReLU layers (>= 0).
        seed: seed of the initialisation.
    """

    def __init__(self, d_in: int = 16, d_hidden: int = 32, d_out: int = 4, depth: int = 2, seed: int = 0):
        super().__init__()
        if min(d_in, d_hidden, d_out) < 1 or depth < 0:
            raise ValueError(f"MLP needs d_in, d_hidden, d_out >= 1 and depth >= 0; got d_in={d_in}, "
                             f"d_hidden={d_hidden}, d_out={d_out}, depth={depth}")
        self.d_in, self.d_hidden, self.d_out, self.depth = d_in, d_hidden, d_out, depth
        widths = [d_in] + [d_hidden] * depth
        layers: list[nn.Module] = []
        with torch.random.fork_rng(devices=[]):   # nn.Linear's own init draws from the global RNG
            for fan_in, fan_out in zip(widths[:-1], widths[1:]):
                layers += [nn.Linear(fan_in, fan_out), nn.ReLU()]
            layers.append(nn.Linear(widths[-1], d_out))
        self.net = nn.Sequential(*layers)
        self.reset_parameters(seed)

    @torch.no_grad()
    def reset_parameters(self, seed: int = 0) -> None:
        """Re-draw every parameter from a generator seeded with `seed` (in place)."""
        gen = torch.Generator().manual_seed(seed)
        for layer in self.net:
            if isinstance(layer, nn.Linear):
                bound = 1.0 / math.sqrt(layer.in_features)
                layer.weight.uniform_(-bound, bound, generator=gen)
                layer.bias.uniform_(-bound, bound, generator=gen)

    def forward(self, x: Tensor) -> Tensor:
        """x (B, d_in) float32 -> logits (B, d_out)."""
        if x.dim() != 2 or x.shape[1] != self.d_in:
            raise ValueError(f"MLP expects x of shape (B, {self.d_in}); got {tuple(x.shape)}")
        return self.net(x)   # (B, d_out)
