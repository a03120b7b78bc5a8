"""Homework 5, task 5.2: GPipe. All forwards of the m micro-batches, then all backwards.

    loss = gpipe_step(stage, batch, target, optimizer, n_microbatches=m)   # every rank calls it

Steps:  1. split the batch (and the targets) into m equal micro-batches (split_microbatches);
        2. zero the gradients once;
        3. for i = 0..m-1: receive x_i (not on the first stage), forward, send y_i (not on the last);
           the last stage's loss of micro-batch i is scaled by 1/m;
        4. for i = 0..m-1: receive the gradient of y_i (not on the last stage), backward,
           send x_i's gradient (not on the first stage); gradients accumulate over micro-batches;
        5. wait for the sends; one optimizer step.
At cycle k of the forward phase stage j runs micro-batch k - j: m + p - 1 cycles per direction,
a bubble of (p-1)/(m+p-1). Every stage keeps m micro-batches of activations alive.
"""

from __future__ import annotations

from torch import Tensor

from minitorch_dist.pipeline.boundary import (backward_step, forward_step, recv_backward, recv_forward, send_backward,
                                              send_forward)
from minitorch_dist.pipeline.spec import split_microbatches
from minitorch_dist.pipeline.stage import PipelineStage

__all__ = ["gpipe_step"]


def gpipe_step(stage: PipelineStage, batch: Tensor, target: Tensor, optimizer, n_microbatches: int) -> Tensor | None:
    """One GPipe training step; returns the batch's mean loss on the last stage, None elsewhere.

    Shapes: batch (B, ...) and target (B, ...) on every rank (the first stage reads the batch, the
    last the targets); B must be divisible by n_microbatches (else ValueError).
    """
    inputs, targets = split_microbatches(batch, n_microbatches), split_microbatches(target, n_microbatches)
    stage.post_receives(range(n_microbatches))    # provided: the step's receives posted now (pipeline/posting.py)
    # BEGIN SOLUTION  (HW5 task 5.2)
    m = n_microbatches
    optimizer.zero_grad()
    handles, losses = [], []
    for i in range(m):                                               # 3. all forwards
        x = inputs[i] if stage.is_first else recv_forward(stage, i)
        y = forward_step(stage, i, x, targets[i], 1.0 / m)
        if stage.is_last:
            losses.append(y.detach())
        else:
            handles.append(send_forward(stage, y, i))
    for i in range(m):                                               # 4. all backwards
        grad_output = None if stage.is_last else recv_backward(stage, i)
        grad_input = backward_step(stage, i, grad_output)
        if not stage.is_first:
            handles.append(send_backward(stage, grad_input, i))
    for h in handles:                                                # 5. one step per batch
        h.wait()
    optimizer.step()
    return sum(losses) if stage.is_last else None
    # END SOLUTION
