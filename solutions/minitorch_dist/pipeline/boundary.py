"""Homework 5, task 5.1: the stage boundary. Activations go forward to the next stage, their
gradients come back; a stage runs forward and backward on tensors it received.

    h = send_forward(stage, y, i)         # isend y to rank j+1, tag forward_tag(i)
    x = recv_forward(stage, i)            # recv from rank j-1 into a buffer of stage.spec.in_shape
    h = send_backward(stage, x_grad, i)   # isend the input's gradient to rank j-1, tag backward_tag(i)
    g = recv_backward(stage, i)           # recv the output's gradient from rank j+1
    y = forward_step(stage, i, x, target, loss_scale)     # stage.run(x); the last stage: the scaled loss
    x_grad = backward_step(stage, i, g)                   # backward of micro-batch i; its input's gradient

Sends are non-blocking: they return the Handle, and the caller waits for it (at the end of the
step) once it no longer needs to overlap anything. Receives block. A received activation is a leaf
of this stage's graph: it must require grad (when it is floating point) so that backward fills
its gradient, which is what the previous stage needs.

Per step on p stages with m micro-batches: (p-1) m activation messages and (p-1) m gradient
messages, 2 (p-1) m in all; one send and one receive per boundary per micro-batch and direction.
"""

from __future__ import annotations

import torch
from torch import Tensor

from minitorch_dist.pipeline.checkpoint import checkpointed_backward, checkpointed_forward
from minitorch_dist.pipeline.stage import PipelineStage, backward_tag, forward_tag

__all__ = ["send_forward", "recv_forward", "send_backward", "recv_backward", "forward_step", "backward_step"]


def send_forward(stage: PipelineStage, output: Tensor, microbatch: int):
    """Start sending micro-batch `microbatch`'s output to the next stage; return the Handle.

    Shapes: output stage.spec.out_shape. The graph stays here: send the values only.
    """
    # BEGIN SOLUTION  (HW5 task 5.1)
    return stage.group.isend(output.detach(), stage.next_rank, tag=forward_tag(microbatch))
    # END SOLUTION


def recv_forward(stage: PipelineStage, microbatch: int) -> Tensor:
    """Receive micro-batch `microbatch`'s input from the previous stage (blocks); return it as a
    leaf that requires grad when it is floating point. Shapes: stage.spec.in_shape. The buffer goes
    on group.device: stage.spec.input_buffer(stage.group.device)."""
    # BEGIN SOLUTION  (HW5 task 5.1)
    activation = stage.spec.input_buffer(stage.group.device)
    stage.group.recv(activation, stage.prev_rank, tag=forward_tag(microbatch))
    return activation.requires_grad_() if activation.is_floating_point() else activation
    # END SOLUTION


def send_backward(stage: PipelineStage, grad_input: Tensor, microbatch: int):
    """Start sending the gradient of micro-batch `microbatch`'s input to the previous stage; return
    the Handle. Shapes: stage.spec.in_shape."""
    # BEGIN SOLUTION  (HW5 task 5.1)
    return stage.group.isend(grad_input, stage.prev_rank, tag=backward_tag(microbatch))
    # END SOLUTION


def recv_backward(stage: PipelineStage, microbatch: int) -> Tensor:
    """Receive the gradient of micro-batch `microbatch`'s output from the next stage (blocks).
    Shapes: stage.spec.out_shape. The buffer goes on group.device: stage.spec.output_buffer(stage.group.device)."""
    # BEGIN SOLUTION  (HW5 task 5.1)
    grad_output = stage.spec.output_buffer(stage.group.device)
    return stage.group.recv(grad_output, stage.next_rank, tag=backward_tag(microbatch))
    # END SOLUTION


def forward_step(stage: PipelineStage, microbatch: int, x: Tensor, target: Tensor, loss_scale: float) -> Tensor:
    """Forward of one micro-batch on this stage; keep in stage.stash[microbatch] what its backward needs.

    Returns the stage's output, or on the last stage the micro-batch's loss times `loss_scale`
    (stage.loss_fn(output, target) * loss_scale). With stage.checkpoint, task 5.5 does it.
    """
    if stage.checkpoint:
        return checkpointed_forward(stage, microbatch, x, target, loss_scale)
    # BEGIN SOLUTION  (HW5 task 5.1)
    output = stage.run(x)
    if stage.is_last:
        output = stage.loss_fn(output, target) * loss_scale
    stage.stash[microbatch] = (x, output)
    return output
    # END SOLUTION


def backward_step(stage: PipelineStage, microbatch: int, grad_output: Tensor | None) -> Tensor | None:
    """Backward of micro-batch `microbatch` (grad_output: its output's gradient; None on the last
    stage, whose output is the loss). Accumulates the parameters' gradients, frees what the
    forward kept, and returns the input's gradient (None on the first stage)."""
    if stage.checkpoint:
        return checkpointed_backward(stage, microbatch, grad_output)
    # BEGIN SOLUTION  (HW5 task 5.1)
    x, output = stage.stash.pop(microbatch)
    torch.autograd.backward(output, grad_output)
    return None if stage.is_first else x.grad
    # END SOLUTION
