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
    # BEGIN SOLUTION  (HW5 task 5.5)
    with torch.no_grad():
        output = stage.run(x)
        if stage.is_last:
            output = stage.loss_fn(output, target) * loss_scale
    stage.stash[microbatch] = (x, target, loss_scale)
    return output
    # END SOLUTION


def checkpointed_backward(stage: PipelineStage, microbatch: int, grad_output: Tensor | None) -> Tensor | None:
    """backward_step with checkpointing: recompute the forward of `microbatch` from its kept input,
    then the backward; returns the input's gradient (None on the first stage)."""
    # BEGIN SOLUTION  (HW5 task 5.5)
    x, target, loss_scale = stage.stash.pop(microbatch)
    with torch.enable_grad():
        recomputed = stage.run(x)
        if stage.is_last:
            recomputed = stage.loss_fn(recomputed, target) * loss_scale
    torch.autograd.backward(recomputed, grad_output)
    return None if stage.is_first else x.grad
    # END SOLUTION
