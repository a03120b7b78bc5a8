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
    # BEGIN SOLUTION  (HW5 task 5.6)
    if not isinstance(n_stages, int) or n_stages < 1 or group.size % n_stages:
        raise ValueError(f"pipeline_grid: {group.size} ranks do not form replicas of n_stages={n_stages!r} stages; "
                         f"pass a number of stages that divides {group.size}")
    replica, j = divmod(group.rank, n_stages)
    pipe = group.subgroup(range(replica * n_stages, (replica + 1) * n_stages))
    data = group.subgroup(range(j, group.size, n_stages))
    return pipe, data
    # END SOLUTION


def replica_share(batch: Tensor, data_group) -> Tensor:
    """This replica's contiguous share of `batch` along dim 0: share k of data_group.size equal shares
    (k = data_group.rank). Raises ValueError naming the size when the replicas do not divide it."""
    # BEGIN SOLUTION  (HW5 task 5.6)
    n, k = data_group.size, data_group.rank
    if batch.shape[0] % n:
        raise ValueError(f"replica_share: a batch of {batch.shape[0]} samples does not split into {n} equal "
                         f"replica shares; use a batch size divisible by {n} x n_microbatches")
    size = batch.shape[0] // n
    return batch[k * size:(k + 1) * size]
    # END SOLUTION


def average_gradients(parameters, data_group) -> None:
    """Average every parameter's .grad over data_group, in place (one all_reduce of them all)."""
    # BEGIN SOLUTION  (HW5 task 5.6)
    grads = [prm.grad for prm in parameters if prm.grad is not None]
    if data_group.size == 1 or not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    data_group.all_reduce(flat)
    flat.div_(data_group.size)
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()
    # END SOLUTION


def data_parallel_step(stage: PipelineStage, data_group, schedule, batch: Tensor, target: Tensor, optimizer,
                       n_microbatches: int) -> Tensor | None:
    """One step of this replica's pipeline on its share of the batch, gradients averaged over the
    data group, one optimizer step. Returns the replica's mean loss on its last stage, else None."""
    # BEGIN SOLUTION  (HW5 task 5.6)
    lanes = validate_schedule(schedule, n_microbatches)
    inputs = split_microbatches(replica_share(batch, data_group), n_microbatches)
    targets = split_microbatches(replica_share(target, data_group), n_microbatches)
    optimizer.zero_grad()
    loss = run_actions(stage, lanes[stage.index], inputs, targets)
    average_gradients(stage.parameters(), data_group)
    optimizer.step()
    return loss
    # END SOLUTION
