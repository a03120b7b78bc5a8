"""Provided: the arithmetic every benchmark of the kit shares, so that each compares like with like.

    for step in range(warmup + steps):
        for version in rotated(versions, step):          # who goes first takes turns
            group.barrier(); t = time.perf_counter(); ...; times[version].append(time.perf_counter() - t)
    ours = slowest_per_step([r["times"]["ours"] for r in results])     # a step ends when its last rank ends
    theirs = slowest_per_step([r["times"]["torch"] for r in results])
    s = Spread.of(paired_ratios(ours, theirs))          # ours_i / theirs_i: the two timed side by side
    print(f"ours / torch: {s}")                          # 1.05x (quartiles 1.01-1.09, range 0.97-1.20, 20 pairs)
    diff = max_abs_diff(flat_parameters(a), flat_parameters(b))

On a shared machine the time of one step drifts by 2x within a run; a ratio of two medians taken
over different moments carries that drift. Timing the two versions next to each other, step by
step, and taking the median of the per-pair ratios lets the drift cancel; the quartiles and the
range of those ratios say how far to trust the median. Every benchmark prints the machine's load
(load_line) beside its numbers.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass

import torch

__all__ = ["rotated", "slowest_per_step", "paired_ratios", "Spread", "flat_parameters", "max_abs_diff",
           "load_line"]


def rotated(items: list, step: int) -> list:
    """`items` started at position step mod len: over len(items) steps each goes first once."""
    items = list(items)
    if not items:
        return items
    k = step % len(items)
    return items[k:] + items[:k]


def slowest_per_step(per_rank: list[list[float]]) -> list[float]:
    """[max over ranks of step i's time]: one list of step times per rank, all of the same length."""
    return [max(times) for times in zip(*per_rank)]


def paired_ratios(a: list[float], b: list[float]) -> list[float]:
    """[a_i / b_i]: a and b timed side by side, repetition i of each next to the other."""
    if len(a) != len(b):
        raise ValueError(f"paired timings need as many repetitions on both sides, got {len(a)} and {len(b)}")
    return [x / y for x, y in zip(a, b)]


@dataclass(frozen=True)
class Spread:
    """The median of some ratios with their quartiles and range."""
    median: float
    q1: float
    q3: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: list[float]) -> "Spread":
        values = sorted(values)
        if not values:
            raise ValueError("no values")
        if len(values) == 1:
            q1 = q3 = values[0]
        else:
            q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
        return cls(statistics.median(values), q1, q3, values[0], values[-1], len(values))

    def __str__(self) -> str:
        return (f"{self.median:.2f}x (quartiles {self.q1:.2f}-{self.q3:.2f}, range {self.low:.2f}-{self.high:.2f}, "
                f"{self.n} pair{'s' if self.n != 1 else ''})")


def flat_parameters(tensors) -> torch.Tensor:
    """One float64 vector of the tensors (a module's parameters, a dict's values, a list), in order."""
    if isinstance(tensors, torch.nn.Module):
        tensors = list(tensors.parameters())
    elif isinstance(tensors, dict):
        tensors = list(tensors.values())
    tensors = [t.detach().to(torch.float64).reshape(-1) for t in tensors]
    return torch.cat(tensors) if tensors else torch.zeros(0, dtype=torch.float64)


def max_abs_diff(a, b) -> float:
    """max |a - b| of two sets of parameters (see flat_parameters); inf when their sizes differ."""
    a, b = flat_parameters(a), flat_parameters(b)
    if a.shape != b.shape:
        return float("inf")
    return (a - b).abs().max().item() if a.numel() else 0.0


def load_line() -> str:
    """'load avg 1.23 (1 min) on 2 cores': how busy the machine was (more than the cores: noisy)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"load avg {load:.2f} (1 min) on {os.cpu_count()} cores"
