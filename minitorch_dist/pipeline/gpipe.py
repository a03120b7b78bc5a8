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
    # BEGIN YOUR CODE  (HW5 task 5.2)
    raise NotImplementedError("HW5 task 5.2: gpipe_step is not implemented yet (see assignments/hw5/README.md)")
    # END YOUR CODE
