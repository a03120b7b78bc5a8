"""Provided: the straggler experiment of lecture 2 and homework 2 (all-reduce DP vs D-PSGD vs SGP).

Every rank trains the default MLP on its part of the same global batches and charges
`compute_seconds` of compute per step with group.compute (sim), so a slow rank shows up in the
simulated time. Every `every` steps a rank logs (simulated time, its flat parameters).

    scenario "no straggler"       every rank `base` seconds per step
             "one slow rank"      rank 3 always `slow` times longer
             "random straggler"   one rank drawn per step (seeded by the step) `slow` times longer
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from minitorch_dist.data import global_batches, local_part
from minitorch_dist.data_parallel.bucketed import BucketedDDP
from minitorch_dist.data_parallel.common import flat_parameters
from minitorch_dist.gossip import DPSGD, SGP
from minitorch_dist.models import MLP

__all__ = ["SCENARIOS", "METHODS", "compute_seconds", "train_decentralized"]

SCENARIOS = ("no straggler", "one slow rank", "random straggler")
METHODS = ("all-reduce", "D-PSGD", "SGP")


def compute_seconds(rank: int, step: int, scenario: str, p: int, base: float = 5e-3, slow: float = 5.0) -> float:
    """Seconds of compute rank `rank` is charged at `step` in `scenario` (p ranks)."""
    if scenario == "one slow rank":
        return base * (slow if rank == 3 else 1.0)
    if scenario == "random straggler":
        late = int(torch.randint(p, (1,), generator=torch.Generator().manual_seed(step)))
        return base * (slow if rank == late else 1.0)
    if scenario != "no straggler":
        raise ValueError(f"compute_seconds: scenario {scenario!r}; use one of {SCENARIOS}")
    return base


def train_decentralized(group, method: str, scenario: str, x: torch.Tensor, y: torch.Tensor, steps: int = 120,
                        lr: float = 0.2, batch: int = 64, every: int = 10, base: float = 5e-3,
                        slow: float = 5.0) -> list[tuple[float, torch.Tensor]]:
    """Train with `method` (BucketedDDP with one 1 MB bucket and SGD, DPSGD or SGP); return the log.

    Shapes: x (n, d_in), y (n,); the log holds steps // every pairs (simulated time, flat parameters).
    """
    model = MLP()
    if method == "all-reduce":
        ddp = BucketedDDP(model, group, bucket_size_mb=1.0)
        opt = torch.optim.SGD(ddp.parameters(), lr=lr)
    elif method in METHODS:
        trainer = (DPSGD if method == "D-PSGD" else SGP)(model, group, F.cross_entropy, lr=lr)
    else:
        raise ValueError(f"train_decentralized: method {method!r}; use one of {METHODS}")
    batches = global_batches(len(x), batch, seed=0, epoch=0) + global_batches(len(x), batch, seed=0, epoch=1)
    log = []
    for step in range(steps):
        mine = local_part(batches[step % len(batches)], group.rank, group.size)
        group.compute(compute_seconds(group.rank, step, scenario, group.size, base, slow))
        if method == "all-reduce":
            opt.zero_grad()
            F.cross_entropy(ddp(x[mine]), y[mine]).backward()
            ddp.finish_gradient_synchronization()
            opt.step()
        else:
            trainer.step(x[mine], y[mine])
        if (step + 1) % every == 0:
            log.append((group.now(), flat_parameters(list(model.parameters()))))
    return log
