"""One place that turns (seed, counter) pairs into torch Generators, so data streams never collide."""

from __future__ import annotations

import torch

_MASK = (1 << 63) - 1


def generator(seed: int, *counters: int) -> torch.Generator:
    """A CPU torch.Generator seeded from `seed` and any counters (epoch, step), same in every process.

    The pair is mixed with a splitmix64-style hash so that (seed=0, step=1) and (seed=1, step=0)
    give unrelated streams; Python's hash() is not used (it is salted per process for strings).
    """
    state = int(seed) & _MASK
    for value in counters:
        state = (state * 0x9E3779B97F4A7C15 + int(value) + 0x632BE59BD9B4E019) & ((1 << 64) - 1)
        state ^= state >> 31
        state = (state * 0xBF58476D1CE4E5B9) & ((1 << 64) - 1)
        state ^= state >> 27
    return torch.Generator().manual_seed(state & _MASK)
