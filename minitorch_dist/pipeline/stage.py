"""PipelineStage: one rank's part of a pipeline, what the student code of homework 5 works on.

    stage = PipelineStage(module, group, spec, loss_fn=cross_entropy)    # rank j holds stage j
    y = stage.run(x)                 # the stage's layers on x (charges stage_time on sim)
    stage.stash[i] = ...             # what forward_step keeps of micro-batch i until its backward
    stage.post_receives(range(m))    # optional: post the step's receives now (posting.py), faster

Ranks of `group` are stages in order: rank j receives activations from rank j-1 (`prev_rank`)
and sends them to rank j+1 (`next_rank`); gradients flow the other way. Messages of micro-batch i
carry tag forward_tag(i) (activations) or backward_tag(i) (gradients), so a wrong pairing fails
loudly. Provided code.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

from minitorch_dist.pipeline.posting import PostingGroup
from minitorch_dist.pipeline.spec import StageSpec

__all__ = ["PipelineStage", "forward_tag", "backward_tag", "MAX_MICROBATCHES"]

MAX_MICROBATCHES = 1024           # tags: activations 0..1023, gradients 1024..2047


def forward_tag(microbatch: int) -> int:
    """The tag of micro-batch i's activation message."""
    return microbatch


def backward_tag(microbatch: int) -> int:
    """The tag of micro-batch i's gradient message."""
    return MAX_MICROBATCHES + microbatch


class _ChargeBackward(torch.autograd.Function):
    """forward: identity | backward: identity, charging `seconds` of compute on sim (the stage's backward)."""

    @staticmethod
    def forward(ctx, y, group, seconds):
        ctx.group, ctx.seconds = group, seconds
        return y.view_as(y)

    @staticmethod
    def backward(ctx, grad):
        ctx.group.compute(ctx.seconds)
        return grad, None, None


class PipelineStage:
    """Stage `group.rank` of a pipeline of `group.size` stages.

    Args:
        module: this stage's layers (partition.stages_of(model, p)[rank]).
        group: the pipeline's ranks, stage j on rank j.
        spec: this stage's StageSpec (input and output shape and dtype of one micro-batch).
        loss_fn: loss_fn(output, target) -> the micro-batch's mean loss; needed on the last stage.
        checkpoint: keep only each micro-batch's input and recompute the forward in backward (task 5.5).
        stage_time: (forward seconds, backward seconds) charged per micro-batch on sim (timing studies).
        post_ahead: False makes post_receives do nothing, so each receive is posted when it is needed
            (the hidden tests do so on sim, where a send waits for its receive: a message order that
            deadlocks then shows, whatever was posted ahead).
    """

    def __init__(self, module: nn.Module, group, spec: StageSpec, loss_fn: Callable | None = None,
                 checkpoint: bool = False, stage_time: tuple[float, float] | None = None, post_ahead: bool = True):
        if spec.n_stages != group.size or spec.index != group.rank:
            raise ValueError(f"PipelineStage on rank {group.rank}: got the spec of stage {spec.index} of "
                             f"{spec.n_stages}; rank j of a group of {group.size} holds stage j: pass "
                             f"specs[group.rank] of a {group.size}-stage split")
        if group.rank == group.size - 1 and loss_fn is None:
            raise ValueError(f"PipelineStage on rank {group.rank}: the last stage computes the loss; pass "
                             f"loss_fn(output, target)")
        self.module, self.group, self.spec, self.loss_fn = module, PostingGroup(group), spec, loss_fn
        self.checkpoint, self.stage_time, self.post_ahead = checkpoint, stage_time, post_ahead
        self.index, self.n_stages = group.rank, group.size
        self.prev_rank = self.index - 1 if self.index > 0 else None
        self.next_rank = self.index + 1 if self.index < self.n_stages - 1 else None
        self.stash: dict[int, object] = {}

    @property
    def is_first(self) -> bool:
        return self.index == 0

    @property
    def is_last(self) -> bool:
        return self.index == self.n_stages - 1

    def post_receives(self, microbatches) -> None:
        """Post now the receives of these micro-batches (their input from the previous stage, their
        output's gradient from the next); recv_forward / recv_backward are then served by them."""
        for i in microbatches if self.post_ahead else ():
            if not self.is_first:
                self.group.post(self.spec.input_buffer(self.group.device), self.prev_rank, forward_tag(i))
            if not self.is_last:
                self.group.post(self.spec.output_buffer(self.group.device), self.next_rank, backward_tag(i))

    def parameters(self):
        return self.module.parameters()

    def run(self, x: Tensor) -> Tensor:
        """The stage's layers on x; on sim with stage_time, charges the forward now and the backward
        when autograd passes back through the output."""
        if self.stage_time is None:
            return self.module(x)
        forward_s, backward_s = self.stage_time
        self.group.compute(forward_s)
        y = self.module(x)
        return _ChargeBackward.apply(y, self.group, backward_s) if y.requires_grad else y

    def __repr__(self) -> str:
        return (f"PipelineStage({self.index} of {self.n_stages}, in {self.spec.in_shape} -> out "
                f"{self.spec.out_shape}, {self.spec.n_params} parameters)")
