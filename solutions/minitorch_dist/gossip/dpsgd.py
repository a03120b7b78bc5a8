"""Homework 2, task 2.5: decentralized SGD (D-PSGD) with gossip on a ring.

No all-reduce: each rank averages its model with its two ring neighbours only, then takes
its own gradient step. The mixing matrix W (W_ij = 1/3 for j in {i-1, i, i+1}) is symmetric
and doubly stochastic, so a gossip step keeps the sum (hence the mean) of the models, and
repeated steps pull every model toward the mean (consensus), without any global step.

    x_i <- sum_j W_ij x_j - lr * grad_i(x_i)          (Lian et al. 2017)

    Cost per step: 2 messages of Psi * s bytes per rank, whatever p (all-reduce: 2(p-1)).
"""

from __future__ import annotations

import torch
from torch import nn

from minitorch_dist.data_parallel.common import flat_grads, flat_parameters, trainable_parameters, write_flat_

__all__ = ["ring_gossip_", "DPSGD"]


def ring_gossip_(x: torch.Tensor, group) -> torch.Tensor:
    """In place: x becomes the average of this rank's x and its ring neighbours'; returns x.

    p >= 3: x <- (x_left + x + x_right) / 3; p == 2: x <- (x + x_other) / 2; p == 1: unchanged.
    Shapes: any; the same on every rank. Floating dtypes.
    Steps: sendrecv x to the right while receiving from the left, then to the left while
    receiving from the right (both copies of the old x), then combine.
    """
    # BEGIN SOLUTION  (HW2 task 2.5)
    p, r = group.size, group.rank
    if p == 1:
        return x
    right, left = (r + 1) % p, (r - 1) % p
    mine = x.contiguous().clone()
    from_left = group.sendrecv(mine, right, torch.empty_like(mine), left)
    if p == 2:
        return x.copy_(((mine + from_left) / 2).view_as(x))
    from_right = group.sendrecv(mine, left, torch.empty_like(mine), right)
    return x.copy_(((from_left + mine + from_right) / 3).view_as(x))
    # END SOLUTION


class DPSGD:
    """Decentralized parallel SGD on a ring: gossip the parameters, then a local SGD step.

        trainer = DPSGD(model, group, loss_fn, lr=0.1)
        loss = trainer.step(x, y)          # x, y: this rank's own mini-batch

    Steps of step(): compute the local loss and the gradient at the current parameters x_i;
    mix the flat parameter vector with ring_gossip_; x_i <- mixed - lr * gradient; write back.
    """

    def __init__(self, model: nn.Module, group, loss_fn, lr: float):
        self.model, self.group, self.loss_fn, self.lr = model, group, loss_fn, lr
        self.params = trainable_parameters(model)

    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> float:
        """One D-PSGD step; returns this rank's loss (before the step)."""
        # BEGIN SOLUTION  (HW2 task 2.5)
        for p in self.params:
            p.grad = None
        loss = self.loss_fn(self.model(inputs), targets)
        loss.backward()
        grad = flat_grads(self.params)
        x = ring_gossip_(flat_parameters(self.params), self.group)
        write_flat_(self.params, x - self.lr * grad)
        return float(loss.detach())
        # END SOLUTION
