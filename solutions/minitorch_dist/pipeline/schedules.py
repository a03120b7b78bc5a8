"""Homework 5, task 5.4: schedules as data. A schedule is, per rank, the list of actions it runs
(actions.py); one provided executor (executor.schedule_step) runs any valid schedule.

    forward_actions(j, p, i)     [RECV_Fi] Fi [SEND_Fi]      (no receive on stage 0, no send on the last)
    backward_actions(j, p, i)    [RECV_Bi] Bi [SEND_Bi]      (no receive on the last stage, no send on 0)
    gpipe_schedule(p, m)         rank j: the forwards of 0..m-1, then the backwards of 0..m-1
    one_f_one_b_schedule(p, m)   rank j: min(p-j-1, m) forwards, then 1F1B, then the remaining backwards

    print(format_schedule(one_f_one_b_schedule(3, 4)))
    rank 0: F0 F1 F2 B0 F3 B1 B2 B3
    rank 1: F0 F1 B0 F2 B1 F3 B2 B3
    rank 2: F0 B0 F1 B1 F2 B2 F3 B3

These are pure functions: test them without processes (validate_schedule, format_schedule).
"""

from __future__ import annotations

from minitorch_dist.pipeline.actions import Action

__all__ = ["forward_actions", "backward_actions", "gpipe_schedule", "one_f_one_b_schedule"]


def forward_actions(stage_index: int, n_stages: int, microbatch: int) -> list[Action]:
    """The actions of micro-batch `microbatch`'s forward on stage j: receive, forward, send."""
    # BEGIN SOLUTION  (HW5 task 5.4)
    actions = [Action("RECV_F", microbatch)] if stage_index > 0 else []
    actions.append(Action("F", microbatch))
    if stage_index < n_stages - 1:
        actions.append(Action("SEND_F", microbatch))
    return actions
    # END SOLUTION


def backward_actions(stage_index: int, n_stages: int, microbatch: int) -> list[Action]:
    """The actions of micro-batch `microbatch`'s backward on stage j: receive, backward, send."""
    # BEGIN SOLUTION  (HW5 task 5.4)
    actions = [Action("RECV_B", microbatch)] if stage_index < n_stages - 1 else []
    actions.append(Action("B", microbatch))
    if stage_index > 0:
        actions.append(Action("SEND_B", microbatch))
    return actions
    # END SOLUTION


def gpipe_schedule(n_stages: int, n_microbatches: int) -> list[list[Action]]:
    """GPipe as data: schedule[j] = every forward of stage j, then every backward, in micro-batch order."""
    # BEGIN SOLUTION  (HW5 task 5.4)
    schedule = []
    for j in range(n_stages):
        lane = [a for i in range(n_microbatches) for a in forward_actions(j, n_stages, i)]
        lane += [a for i in range(n_microbatches) for a in backward_actions(j, n_stages, i)]
        schedule.append(lane)
    return schedule
    # END SOLUTION


def one_f_one_b_schedule(n_stages: int, n_microbatches: int) -> list[list[Action]]:
    """1F1B as data: on stage j, min(p-j-1, m) warm-up forwards, then one forward and one backward
    in turn, then the remaining backwards."""
    # BEGIN SOLUTION  (HW5 task 5.4)
    schedule = []
    for j in range(n_stages):
        warmup = min(n_stages - j - 1, n_microbatches)
        lane = [a for i in range(warmup) for a in forward_actions(j, n_stages, i)]
        for k in range(n_microbatches - warmup):
            lane += forward_actions(j, n_stages, warmup + k) + backward_actions(j, n_stages, k)
        lane += [a for i in range(n_microbatches - warmup, n_microbatches) for a in backward_actions(j, n_stages, i)]
        schedule.append(lane)
    return schedule
    # END SOLUTION
