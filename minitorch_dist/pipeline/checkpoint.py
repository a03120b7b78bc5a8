"""Homework 5, task 5.5: activation checkpointing per stage.

A stage keeps only the input of each micro-batch in flight (not the tensors autograd saves in
the forward), and recomputes its forward in the backward:

    checkpointed_forward:   output = stage.run(x) without autograd; stash (x, target, loss_scale)
    checkpointed_backward:  recompute output = stage.run(x) with autograd, backward, free

Gradients are unchanged (the recomputation is the same computation); the saved activations of a
stage drop from one set per micro-batch in flight to one set at a time, for one more forward per
micro-batch. forward_step and backward_step (task 5.1) call these when stage.checkpoint is set.
"""

from __future__ import annotations

import torch
from torch import Tensor

from minitorch_dist.pipeline.stage import PipelineStage

__all__ = ["checkpointed_forward", "checkpointed_backward"]


def checkpointed_forward(stage: PipelineStage, microbatch: int, x: Tensor, target: Tensor,
                         loss_scale: float) -> Tensor:
    """forward_step with checkpointing: the same return value, and only (x, target, loss_scale) kept."""
    # BEGIN YOUR CODE  (HW5 task 5.5)
    raise NotImplementedError("HW5 task 5.5: checkpointed_forward is not implemented yet (see assignments/hw5/README.md)")
    # END YOUR CODE


def checkpointed_backward(stage: PipelineStage, microbatch: int, grad_output: Tensor | None) -> Tensor | None:
    """backward_step with checkpointing: recompute the forward of `microbatch` from its kept input,
    then the backward; returns the input's gradient (None on the first stage)."""
    # BEGIN YOUR CODE  (HW5 task 5.5)
    raise NotImplementedError("HW5 task 5.5: checkpointed_backward is not implemented yet (see assignments/hw5/README.md)")
    # END YOUR CODE
