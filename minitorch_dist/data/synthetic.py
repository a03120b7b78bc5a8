"""make_classification: Gaussian inputs labelled by a fixed random teacher network."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .seeding import generator


def make_classification(n: int = 512, d_in: int = 16, n_classes: int = 4, seed: int = 0) -> tuple[Tensor, Tensor]:
    """A learnable classification data set: x ~ N(0, I), y = argmax of a random teacher MLP.

    Shapes: x (n, d_in) float32, y (n,) int64 with values in [0, n_classes).
    Steps:  1. x from N(0, 1); 2. teacher: one tanh hidden layer of width 32, weights N(0, 1/fan_in);
            3. an output bias that centres its logits over a fixed reference sample (so no class
            is rare); 4. y = argmax. A sample's label depends on its x only (not on n), and
            x[:k] is the same for every n >= k. Everything comes from torch.Generators seeded
            from `seed`: the same arguments give the same tensors in every process, whatever
            the global RNG state.
    An MLP (minitorch_dist.models.MLP) fits it to > 90% training accuracy in a few hundred steps.
    """
    if n < 0 or d_in < 1 or n_classes < 1:
        raise ValueError(f"make_classification needs n >= 0, d_in >= 1, n_classes >= 1; "
                         f"got n={n}, d_in={d_in}, n_classes={n_classes}")
    gen = generator(seed, 0)
    hidden = 32
    w1 = torch.randn(d_in, hidden, generator=gen) / math.sqrt(d_in)           # (d_in, 32)
    b1 = 0.5 * torch.randn(hidden, generator=gen)                            # (32,)
    w2 = torch.randn(hidden, n_classes, generator=gen) / math.sqrt(hidden)   # (32, n_classes)
    x = torch.randn(n, d_in, generator=gen)                                  # (n, d_in)
    reference = torch.randn(2048, d_in, generator=generator(seed, 1))        # (2048, d_in)
    b2 = -(torch.tanh(reference @ w1 + b1) @ w2).mean(dim=0)                 # (n_classes,)
    logits = torch.tanh(x @ w1 + b1) @ w2 + b2                               # (n, n_classes)
    y = logits.argmax(dim=1)                                                 # (n,) int64
    return x.float(), y.long()
