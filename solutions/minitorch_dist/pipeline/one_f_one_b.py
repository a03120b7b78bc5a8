"""Homework 5, task 5.3: 1F1B (one forward, one backward), the schedule of PipeDream-Flush and Megatron.

    loss = one_f_one_b_step(stage, batch, target, optimizer, n_microbatches=m)

Steps on stage j of p, with w = min(p - j - 1, m) warm-up forwards:
        1. warm-up: w forwards (receive, forward, send);
        2. steady state, m - w times: one forward, then one backward of the oldest micro-batch
           in flight (receive its gradient, backward, send the input's gradient);
        3. drain (cool-down): the w backwards left.
Same gradients and the same bubble as GPipe ((p-1)/(m+p-1) with uniform stages), but stage j
holds at most p - j micro-batches of activations at once (at most p), not m. Sends are
non-blocking, so the send of a forward never waits for the neighbour's backward.
"""

from __future__ import annotations

from torch import Tensor

from minitorch_dist.pipeline.boundary import (backward_step, forward_step, recv_backward, recv_forward, send_backward,
                                              send_forward)
from minitorch_dist.pipeline.spec import split_microbatches
from minitorch_dist.pipeline.stage import PipelineStage

__all__ = ["one_f_one_b_step", "warmup_forwards"]


def warmup_forwards(stage_index: int, n_stages: int, n_microbatches: int) -> int:
    """How many forwards stage j runs before its first backward: min(p - j - 1, m)."""
    # BEGIN SOLUTION  (HW5 task 5.3)
    return min(n_stages - stage_index - 1, n_microbatches)
    # END SOLUTION


def one_f_one_b_step(stage: PipelineStage, batch: Tensor, target: Tensor, optimizer,
                     n_microbatches: int) -> Tensor | None:
    """One 1F1B training step; returns the batch's mean loss on the last stage, None elsewhere.

    Shapes and errors as gpipe_step. Micro-batches go forward and backward in order 0..m-1.
    """
    inputs, targets = split_microbatches(batch, n_microbatches), split_microbatches(target, n_microbatches)
    stage.post_receives(range(n_microbatches))    # provided: the step's receives posted now (pipeline/posting.py)
    # BEGIN SOLUTION  (HW5 task 5.3)
    m = n_microbatches
    warmup = warmup_forwards(stage.index, stage.n_stages, m)
    optimizer.zero_grad()
    handles, losses = [], []

    def one_forward(i: int) -> None:
        x = inputs[i] if stage.is_first else recv_forward(stage, i)
        y = forward_step(stage, i, x, targets[i], 1.0 / m)
        if stage.is_last:
            losses.append(y.detach())
        else:
            handles.append(send_forward(stage, y, i))

    def one_backward(i: int) -> None:
        grad_input = backward_step(stage, i, None if stage.is_last else recv_backward(stage, i))
        if not stage.is_first:
            handles.append(send_backward(stage, grad_input, i))

    for i in range(warmup):                                          # 1. warm-up
        one_forward(i)
    for k in range(m - warmup):                                      # 2. steady: 1F, 1B
        one_forward(warmup + k)
        one_backward(k)
    for i in range(m - warmup, m):                                   # 3. drain
        one_backward(i)
    for h in handles:
        h.wait()
    optimizer.step()
    return sum(losses) if stage.is_last else None
    # END SOLUTION
