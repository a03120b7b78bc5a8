"""Homework 2, task 2.1: naive data parallel through a parameter server (rank 0).

Rank 0 holds the model that counts and the only optimizer. Every step it cuts the global
batch into p parts, sends part r to worker r, computes the gradient of part 0 itself, receives
the workers' gradients, averages them (weighted by part size, so the result is the full-batch
gradient), takes the optimizer step, and sends the new parameters to every worker.

    Cost per step (Psi parameters of s bytes, batch of B bytes):
        rank 0 sends (p-1)/p * B + (p-1) * Psi * s and receives (p-1) * Psi * s;
        every worker sends and receives Psi * s. Rank 0's link carries p-1 times a worker's.

Allocate on group.device (a GPU on backend nccl): a receive buffer is torch.empty(..., device=group.device)
or torch.empty_like(a tensor of this rank).
"""

from __future__ import annotations

import torch
from torch import nn

from minitorch_dist.data_parallel.common import (flat_grads, flat_parameters, recv_shaped, send_shaped,
                                                trainable_parameters, write_flat_)

__all__ = ["ParameterServer"]


class ParameterServer:
    """Naive data parallel: everything moves through rank 0, and only rank 0 steps.

        ps = ParameterServer(model, group, loss_fn, optimizer if group.rank == 0 else None)
        loss = ps.step(x, y)          # rank 0: the global batch; workers: ps.step(None, None)

    Args:
        model: the same architecture on every rank. The constructor sends rank 0's parameters
            to every worker, so all replicas start equal.
        group: the Group of all ranks; rank 0 is the server.
        loss_fn: loss_fn(model(x), y) -> scalar mean loss over the samples given.
        optimizer: an optimizer over `model.parameters()` on rank 0; None on workers.
    """

    def __init__(self, model: nn.Module, group, loss_fn, optimizer=None):
        if group.rank == 0 and optimizer is None:
            raise ValueError("ParameterServer on rank 0: the server needs an optimizer over model.parameters()")
        self.model, self.group, self.loss_fn, self.optimizer = model, group, loss_fn, optimizer
        self.params = trainable_parameters(model)
        self._send_parameters()

    def _send_parameters(self) -> None:
        """Rank 0 sends its flat parameter vector to every worker; workers write it in."""
        # BEGIN YOUR CODE  (HW2 task 2.1)
        raise NotImplementedError("HW2 task 2.1: _send_parameters is not implemented yet (see assignments/hw2/README.md)")
        # END YOUR CODE

    def step(self, inputs: torch.Tensor | None, targets: torch.Tensor | None) -> float | None:
        """One training step; returns the global batch's mean loss on rank 0, None on workers.

        Shapes: inputs (B, ...) and targets (B, ...) on rank 0, B >= p; None on workers.
        Steps:
            1. rank 0 splits the batch into p parts along dim 0 (torch.tensor_split) and sends part r
               to rank r (send_shaped: workers do not know the part's shape);
            2. every rank computes the mean loss of its part and its gradient;
            3. workers send their flat gradient to rank 0; rank 0 sets each .grad to the average of
               the p gradients weighted by part size (the full-batch gradient) and steps;
            4. rank 0 sends the new parameters to every worker.
        """
        # BEGIN YOUR CODE  (HW2 task 2.1)
        raise NotImplementedError("HW2 task 2.1: step is not implemented yet (see assignments/hw2/README.md)")
        # END YOUR CODE
