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
        # BEGIN SOLUTION  (HW2 task 2.1)
        g = self.group
        if g.rank == 0:
            flat = flat_parameters(self.params)
            handles = [g.isend(flat, r) for r in range(1, g.size)]
            for h in handles:
                h.wait()
        else:
            flat = torch.empty(sum(p.numel() for p in self.params), dtype=self.params[0].dtype, device=g.device)
            write_flat_(self.params, g.recv(flat, 0))
        # END SOLUTION

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
        # BEGIN SOLUTION  (HW2 task 2.1)
        g = self.group
        if g.rank == 0:
            if inputs is None or targets is None or inputs.shape[0] < g.size:
                raise ValueError(f"ParameterServer.step on rank 0: needs the global batch with at least "
                                 f"{g.size} samples (one per rank); got {None if inputs is None else tuple(inputs.shape)}")
            xs, ys = torch.tensor_split(inputs, g.size), torch.tensor_split(targets, g.size)
            for r in range(1, g.size):
                send_shaped(g, xs[r], r)
                send_shaped(g, ys[r], r)
            x, y = xs[0], ys[0]
        else:
            x, y = recv_shaped(g, 0), recv_shaped(g, 0)
        for p in self.params:
            p.grad = None
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        grad = flat_grads(self.params)
        if g.rank != 0:
            g.send(grad, 0)
            g.send(torch.tensor([float(loss.detach()), float(x.shape[0])], dtype=torch.float64, device=g.device), 0)
            self._send_parameters()
            return None
        total = grad * x.shape[0]
        total_loss, count = float(loss.detach()) * x.shape[0], x.shape[0]
        for r in range(1, g.size):
            other = g.recv(torch.empty_like(grad), r)
            loss_r, n_r = g.recv(torch.empty(2, dtype=torch.float64, device=g.device), r).tolist()
            total += other * n_r
            total_loss, count = total_loss + loss_r * n_r, count + int(n_r)
        total /= count
        offset = 0
        for p in self.params:
            p.grad = total[offset:offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        self.optimizer.step()
        self._send_parameters()
        return total_loss / count
        # END SOLUTION
