"""Homework 5, task 5.6 (bonus): 2D parallelism, data parallel over pipeline replicas.

    pipe, data = pipeline_grid(group, n_stages=2)       # a world of 4: 2 replicas x 2 stages
    stage = PipelineStage(stages[pipe.rank], pipe, specs[pipe.rank], loss_fn=...)
    loss = data_parallel_step(stage, data, one_f_one_b_schedule(2, m), batch, target, optimizer, m)

Layout: world rank r = k S + j is stage j of replica k (S = n_stages, R = world size / S
replicas). Replica k's pipeline group holds ranks k S .. k S + S - 1 (stage j is its rank j); stage
j's data group holds ranks j, S + j, ..., (R-1) S + j (replica k is its rank k). Every rank is given
the whole batch: replica k trains on its k-th contiguous share (B / R samples, cut into m
micro-batches), runs the schedule with the provided executor's run_actions, then every gradient of
its stage is averaged over the data group, once per step, before the one optimizer step. The
stages then hold what the whole model trained on the whole batch would hold (equal shares: the
mean of the replicas' mean losses is the batch's mean loss).

Messages per step: the pipelines' 2 (S-1) m point-to-point messages in each replica, and per rank
all-reduces of its stage's gradient bytes, once (not per micro-batch).
"""

from __future__ import annotations

import torch
from torch import Tensor

from minitorch_dist.pipeline.executor import run_actions
from minitorch_dist.pipeline.spec import split_microbatches
from minitorch_dist.pipeline.stage import PipelineStage
from minitorch_dist.pipeline.validate import validate_schedule

__all__ = ["pipeline_grid", "replica_share", "average_gradients", "data_parallel_step"]


def pipeline_grid(group, n_stages: int):
    """(pipeline group of this rank's replica, data group of this rank's stage), from group.subgroup.

    Raises ValueError when n_stages does not divide the group's size.
    """
    # BEGIN YOUR CODE  (HW5 task 5.6)
    raise NotImplementedError("HW5 task 5.6: pipeline_grid is not implemented yet (see assignments/hw5/README.md)")
    # END YOUR CODE


def replica_share(batch: Tensor, data_group) -> Tensor:
    """This replica's contiguous share of `batch` along dim 0: share k of data_group.size equal shares
    (k = data_group.rank). Raises ValueError naming the size when the replicas do not divide it."""
    # BEGIN YOUR CODE  (HW5 task 5.6)
    raise NotImplementedError("HW5 task 5.6: replica_share is not implemented yet (see assignments/hw5/README.md)")
    # END YOUR CODE


def average_gradients(parameters, data_group) -> None:
    """Average every parameter's .grad over data_group, in place (one all_reduce of them all)."""
    # BEGIN YOUR CODE  (HW5 task 5.6)
    raise NotImplementedError("HW5 task 5.6: average_gradients is not implemented yet (see assignments/hw5/README.md)")
    # END YOUR CODE


def data_parallel_step(stage: PipelineStage, data_group, schedule, batch: Tensor, target: Tensor, optimizer,
                       n_microbatches: int) -> Tensor | None:
    """One step of this replica's pipeline on its share of the batch, gradients averaged over the
    data group, one optimizer step. Returns the replica's mean loss on its last stage, else None."""
    # BEGIN YOUR CODE  (HW5 task 5.6)
    raise NotImplementedError("HW5 task 5.6: data_parallel_step is not implemented yet (see assignments/hw5/README.md)")
    # END YOUR CODE
