"""Homework 5, task 5.4: schedules as data. A schedule is, per rank, the list of actions it runs
(actions.py); one provided executor (executor.schedule_step) runs any valid schedule.

    forward_actions(j, p, i)     [RECV_Fi] Fi [SEND_Fi]      (no receive on stage 0, no send on the last)
    backward_actions(j, p, i)    [RECV_Bi] Bi [SEND_Bi]      (no receive on the last stage, no send on 0)
    gpipe_schedule(p, m)         rank j: the forwards of 0..m-1, then the backwards of 0..m-1
    one_f_one_b_schedule(p, m)   rank j: min(p-j-1, m) forwards, then 1F1B, then the remaining backwards
    interleaved_schedule(p, v, m)   bonus 5.7: v chunks per rank (virtual stages j, p+j, ...), 1F1B over them

    print(format_schedule(one_f_one_b_schedule(3, 4)))
    rank 0: F0 F1 F2 B0 F3 B1 B2 B3
    rank 1: F0 F1 B0 F2 B1 F3 B2 B3
    rank 2: F0 B0 F1 B1 F2 B2 F3 B3

These are pure functions: test them without processes (validate_schedule, format_schedule).
"""

from __future__ import annotations

from minitorch_dist.pipeline.actions import Action

__all__ = ["forward_actions", "backward_actions", "gpipe_schedule", "one_f_one_b_schedule", "interleaved_schedule"]


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


def interleaved_schedule(n_stages: int, n_chunks: int, n_microbatches: int) -> list[list[Action]]:
    """Interleaved 1F1B as data (bonus, task 5.7): p = n_stages ranks, v = n_chunks chunks per rank;
    chunk c of rank j is virtual stage c p + j of p v, and its actions carry chunk=c.

    Micro-batches go in rounds of p (the last round may be shorter when p does not divide m): a rank
    runs a round's forwards on chunk 0, then on chunk 1, ..., then the next round; backwards go in
    the same rounds with the chunks from v-1 down to 0. Rank j first runs
    min(2 (p-j-1) + (v-1) p, m v) forwards (warm-up), then one forward and one backward in turn,
    then the remaining backwards. Each forward or backward comes with its messages, as in
    forward_actions / backward_actions of its virtual stage.
    """
    # BEGIN SOLUTION  (HW5 task 5.7)
    p, v, m = n_stages, n_chunks, n_microbatches
    rounds = max(1, m // p)
    if m % rounds:
        raise ValueError(f"interleaved_schedule: {m} micro-batches do not split into {rounds} rounds of at least "
                         f"p = {p}; use m < 2p or a multiple of m // p (e.g. {rounds * p} or {rounds * (p + 1)})")
    r = m // rounds
    order = [(c, i) for start in range(0, m, r) for c in range(v) for i in range(start, start + r)]

    def fwd(j, k):
        c, i = order[k]
        return [Action(a.kind, i, c) for a in forward_actions(c * p + j, p * v, i)]

    def bwd(j, k):
        c, i = order[k]
        c = v - 1 - c
        return [Action(a.kind, i, c) for a in backward_actions(c * p + j, p * v, i)]

    schedule = []
    for j in range(p):
        warmup = min(2 * (p - j - 1) + (v - 1) * r, m * v)
        lane = [a for k in range(warmup) for a in fwd(j, k)]
        for k in range(m * v - warmup):
            lane += fwd(j, warmup + k) + bwd(j, k)
        lane += [a for k in range(m * v - warmup, m * v) for a in bwd(j, k)]
        schedule.append(lane)
    return schedule
    # END SOLUTION
