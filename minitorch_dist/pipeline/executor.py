"""Run any valid schedule (actions.py) on this rank, with the stage-boundary code of task 5.1.

    loss = schedule_step(stage, one_f_one_b_schedule(p, m), batch, target, optimizer, m)

One optimizer step per batch: gradients zeroed, this rank's actions run in order, the sends
waited, one step. The loss of each micro-batch is scaled by 1/m, so the gradients are those of
the batch's mean loss. With validate=True (the default) validate_schedule checks the whole
schedule first, the same on every rank; validate=False runs it as written (a deadlocking
schedule then ends in the runtime's wait-for report). Provided code.

Interleaved schedules (v chunks per rank, chunks.py): pass this rank's chunks, a list of v
PipelineStages (chunk_stages), instead of one stage; action Action(kind, i, c) runs on chunk c.

    loss = schedule_step(chunk_stages(...), interleaved_schedule(p, v, m), batch, target, optimizer, m)
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


def _chunks(stage) -> list[PipelineStage]:
    return list(stage) if isinstance(stage, (list, tuple)) else [stage]


def run_actions(stage, actions, inputs: list[Tensor], targets: list[Tensor]) -> Tensor | None:
    """Run one rank's actions over the micro-batches (stage: a PipelineStage, or the rank's chunks);
    wait for its sends. Returns the batch's mean loss on the last stage (the sum of the scaled
    micro-batch losses), else None."""
    runs = [_Run(chunk, inputs, targets) for chunk in _chunks(stage)]
    for chunk in _chunks(stage):
        chunk.post_receives(range(len(inputs)))        # every receive of the step posted now (posting.py)
    for a in actions:
        runs[a.chunk].do(a.kind, a.microbatch)
    for run in runs:
        for h in run.handles:
            h.wait()
    losses = [x for run in runs for x in run.losses]
    return sum(losses[1:], losses[0]) if losses else None


def schedule_step(stage, schedule, batch: Tensor, target: Tensor, optimizer,
                  n_microbatches: int, validate: bool = True) -> Tensor | None:
    """One training step of the pipeline following `schedule` (schedule[j]: rank j's actions).
    stage: this rank's PipelineStage, or its v chunks (a list, chunk c first at index c)."""
    chunks = _chunks(stage)
    v = len(chunks)
    if v == 0 or any(not isinstance(c, PipelineStage) for c in chunks):
        raise TypeError(f"schedule_step: stage must be a PipelineStage or a list of this rank's chunks "
                        f"(chunk_stages), got {stage!r}")
    rank, p = chunks[0].index, chunks[0].n_stages // v
    if n_microbatches > MAX_MICROBATCHES // v:
        raise ValueError(f"schedule_step: at most {MAX_MICROBATCHES // v} micro-batches with {v} chunk(s) "
                         f"(message tags), got {n_microbatches}")
    if [c.index for c in chunks] != [c * p + rank for c in range(v)]:
        raise ValueError(f"schedule_step: chunk c of rank {rank} must be virtual stage c p + {rank}; got stages "
                         f"{[c.index for c in chunks]}: pass chunk_stages(...) in order")
    if len(schedule) != p:
        raise ValueError(f"schedule_step on rank {rank}: the schedule has {len(schedule)} lanes for "
                         f"{p} ranks; give one action list per rank")
    lanes = validate_schedule(schedule, n_microbatches, v) if validate else parse_schedule(schedule)
    inputs, targets = split_microbatches(batch, n_microbatches), split_microbatches(target, n_microbatches)
    optimizer.zero_grad()
    loss = run_actions(chunks, lanes[rank], inputs, targets)
    optimizer.step()
    return loss
