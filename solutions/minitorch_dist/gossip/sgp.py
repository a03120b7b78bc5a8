"""Homework 2, task 2.6: Stochastic Gradient Push (Assran et al. 2019).

Push-sum gossip over a directed graph: every rank keeps a numerator x_i and a weight w_i
(w_i = 1 at the start). A gossip step keeps half of (x_i, w_i) and pushes the other half to
one out-peer; x_i and w_i become what was kept plus what came in. The mixing is column
stochastic, so sum_i x_i and sum_i w_i = p are conserved exactly; the de-biased model
z_i = x_i / w_i is what a rank evaluates and differentiates.

The graph is the directed exponential graph with one peer that rotates: at step k, rank i
pushes to i + 2^(k mod m) (mod p), with m = ceil(log2 p) distances 1, 2, 4, ... < p. For p a
power of two, any log2 p consecutive steps give every rank the exact mean.

    SGP step at rank i:  x_i <- x_i - lr * grad F_i(z_i);  push-sum (x_i, w_i);  z_i <- x_i / w_i
    Cost per step: 1 message of Psi * s bytes (plus the weight) per rank.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from minitorch_dist.data_parallel.common import flat_grads, flat_parameters, trainable_parameters, write_flat_

__all__ = ["exponential_peers", "push_sum_step_", "SGP"]


def exponential_peers(rank: int, size: int, step: int) -> tuple[int, int]:
    """(out-peer, in-peer) of `rank` at `step`: distance 2^(step mod ceil(log2 size)). size >= 2."""
    distance = 2 ** (step % max(1, math.ceil(math.log2(size))))
    return (rank + distance) % size, (rank - distance) % size


def push_sum_step_(x: torch.Tensor, w: torch.Tensor, group, step: int) -> None:
    """One push-sum step, in place on x (any shape) and w (a 1-element tensor).

    Keep half of (x, w), send the other half to exponential_peers(rank, p, step)[0], receive
    the in-peer's half, add it. p == 1: nothing changes.
    """
    # BEGIN SOLUTION  (HW2 task 2.6)
    p = group.size
    if p == 1:
        return
    out_peer, in_peer = exponential_peers(group.rank, p, step)
    x.mul_(0.5)
    w.mul_(0.5)
    x_in = group.sendrecv(x.contiguous(), out_peer, torch.empty_like(x, memory_format=torch.contiguous_format),
                          in_peer)
    w_in = group.sendrecv(w.contiguous(), out_peer, torch.empty_like(w), in_peer)
    x.add_(x_in.view_as(x))
    w.add_(w_in.view_as(w))
    # END SOLUTION


class SGP:
    """Stochastic Gradient Push with plain SGD.

        trainer = SGP(model, group, loss_fn, lr=0.1)
        loss = trainer.step(x, y)          # x, y: this rank's own mini-batch

    State: self.x (flat numerator, starts as the parameters), self.w (float64 tensor [1.0]),
    self.k (steps taken). The model's parameters always hold z = x / w.
    Steps of step(): loss and gradient at z (the model as it is); x <- x - lr * gradient;
    push_sum_step_(x, w, group, k); write z = x / w into the model; k += 1.
    """

    def __init__(self, model: nn.Module, group, loss_fn, lr: float):
        self.model, self.group, self.loss_fn, self.lr = model, group, loss_fn, lr
        self.params = trainable_parameters(model)
        self.x = flat_parameters(self.params)
        self.w = torch.ones(1, dtype=torch.float64, device=group.device)
        self.k = 0

    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> float:
        """One SGP step; returns this rank's loss at z (before the step)."""
        # BEGIN SOLUTION  (HW2 task 2.6)
        for p in self.params:
            p.grad = None
        loss = self.loss_fn(self.model(inputs), targets)
        loss.backward()
        self.x.sub_(self.lr * flat_grads(self.params))
        push_sum_step_(self.x, self.w, self.group, self.k)
        write_flat_(self.params, self.x / self.w.to(self.x.dtype))
        self.k += 1
        return float(loss.detach())
        # END SOLUTION
