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
    # BEGIN YOUR CODE  (HW5 task 5.4)
    raise NotImplementedError("HW5 task 5.4: forward_actions is not implemented yet (see assignments/hw5/README.md)")
    # END YOUR CODE


def backward_actions(stage_index: int, n_stages: int, microbatch: int) -> list[Action]:
    """The actions of micro-batch `microbatch`'s backward on stage j: receive, backward, send."""
    # BEGIN YOUR CODE  (HW5 task 5.4)
    raise NotImplementedError("HW5 task 5.4: backward_actions is not implemented yet (see assignments/hw5/README.md)")
    # END YOUR CODE


def gpipe_schedule(n_stages: int, n_microbatches: int) -> list[list[Action]]:
    """GPipe as data: schedule[j] = every forward of stage j, then every backward, in micro-batch order."""
    # BEGIN YOUR CODE  (HW5 task 5.4)
    raise NotImplementedError("HW5 task 5.4: gpipe_schedule is not implemented yet (see assignments/hw5/README.md)")
    # END YOUR CODE


def one_f_one_b_schedule(n_stages: int, n_microbatches: int) -> list[list[Action]]:
    """1F1B as data: on stage j, min(p-j-1, m) warm-up forwards, then one forward and one backward
    in turn, then the remaining backwards."""
    # BEGIN YOUR CODE  (HW5 task 5.4)
    raise NotImplementedError("HW5 task 5.4: one_f_one_b_schedule is not implemented yet (see assignments/hw5/README.md)")
    # END YOUR CODE


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
    # BEGIN YOUR CODE  (HW5 task 5.7)
    raise NotImplementedError("HW5 task 5.7: interleaved_schedule is not implemented yet (see assignments/hw5/README.md)")
    # END YOUR CODE
