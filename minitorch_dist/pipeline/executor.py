"""Run any valid schedule (actions.py) on this rank, with the stage-boundary code of task 5.1.

    loss = schedule_step(stage, one_f_one_b_schedule(p, m), batch, target, optimizer, m)

One optimizer step per batch: gradients zeroed, this rank's actions run in order, the sends
waited, one step. The loss of each micro-batch is scaled by 1/m, so the gradients are those of
the batch's mean loss. With validate=True (the default) validate_schedule checks the whole
schedule first, the same on every rank; validate=False runs it as written (a deadlocking
schedule then ends in the runtime's wait-for report). Provided code.
"""

from __future__ import annotations

from torch import Tensor

from minitorch_dist.pipeline.actions import parse_schedule
from minitorch_dist.pipeline.boundary import (backward_step, forward_step, recv_backward, recv_forward, send_backward,
                                              send_forward)
from minitorch_dist.pipeline.spec import split_microbatches
from minitorch_dist.pipeline.stage import MAX_MICROBATCHES, PipelineStage
from minitorch_dist.pipeline.validate import validate_schedule

__all__ = ["run_actions", "schedule_step"]


class _Run:
    """The state of one rank's pass over its actions: what arrived, what waits to go out."""

    def __init__(self, stage: PipelineStage, inputs: list[Tensor], targets: list[Tensor]):
        self.stage, self.inputs, self.targets = stage, inputs, targets
        self.scale = 1.0 / len(inputs)
        self.arrived: dict[int, Tensor] = {}          # micro-batch -> activation received
        self.outgoing: dict[int, Tensor] = {}         # micro-batch -> activation to send
        self.grad_out: dict[int, Tensor] = {}         # micro-batch -> gradient of its output
        self.grad_in: dict[int, Tensor] = {}          # micro-batch -> gradient of its input
        self.handles, self.losses = [], []

    def do(self, kind: str, i: int) -> None:
        getattr(self, kind.lower())(i)

    def recv_f(self, i: int) -> None:
        self.arrived[i] = recv_forward(self.stage, i)

    def f(self, i: int) -> None:
        x = self.inputs[i] if self.stage.is_first else self.arrived.pop(i)
        y = forward_step(self.stage, i, x, self.targets[i], self.scale)
        if self.stage.is_last:
            self.losses.append(y.detach())
        else:
            self.outgoing[i] = y

    def send_f(self, i: int) -> None:
        self.handles.append(send_forward(self.stage, self.outgoing.pop(i), i))

    def recv_b(self, i: int) -> None:
        self.grad_out[i] = recv_backward(self.stage, i)

    def b(self, i: int) -> None:
        grad = backward_step(self.stage, i, self.grad_out.pop(i, None))
        if not self.stage.is_first:
            self.grad_in[i] = grad

    def send_b(self, i: int) -> None:
        self.handles.append(send_backward(self.stage, self.grad_in.pop(i), i))


def run_actions(stage: PipelineStage, actions, inputs: list[Tensor], targets: list[Tensor]) -> Tensor | None:
    """Run one rank's actions over the micro-batches; wait for its sends. Returns the batch's mean
    loss on the last stage (the sum of the scaled micro-batch losses), else None."""
    run = _Run(stage, inputs, targets)
    for a in actions:
        run.do(a.kind, a.microbatch)
    for h in run.handles:
        h.wait()
    return sum(run.losses[1:], run.losses[0]) if run.losses else None


def schedule_step(stage: PipelineStage, schedule, batch: Tensor, target: Tensor, optimizer,
                  n_microbatches: int, validate: bool = True) -> Tensor | None:
    """One training step of the pipeline following `schedule` (schedule[j]: rank j's actions)."""
    if n_microbatches > MAX_MICROBATCHES:
        raise ValueError(f"schedule_step: at most {MAX_MICROBATCHES} micro-batches (message tags), got {n_microbatches}")
    if len(schedule) != stage.n_stages:
        raise ValueError(f"schedule_step on rank {stage.index}: the schedule has {len(schedule)} lanes for "
                         f"{stage.n_stages} stages; give one action list per rank")
    lanes = validate_schedule(schedule, n_microbatches) if validate else parse_schedule(schedule)
    inputs, targets = split_microbatches(batch, n_microbatches), split_microbatches(target, n_microbatches)
    optimizer.zero_grad()
    loss = run_actions(stage, lanes[stage.index], inputs, targets)
    optimizer.step()
    return loss
