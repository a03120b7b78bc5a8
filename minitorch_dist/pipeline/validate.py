"""Check a schedule before running it: every micro-batch forward and backward on every rank, every
receive matched by a send, each rank's order possible, and no wait-for cycle.

    validate_schedule(schedule, n_microbatches)     # raises ScheduleError naming the rank and action

The run is simulated with non-blocking sends and blocking receives (what the executor does): a
receive waits until its sender has reached the matching send. Provided code.
"""

from __future__ import annotations

from minitorch_dist.pipeline.actions import Action, parse_schedule

__all__ = ["ScheduleError", "validate_schedule"]

# kind -> (peer offset, the matching kind on the peer); a send on rank j pairs with a receive on j + offset
PAIRS = {"SEND_F": (1, "RECV_F"), "RECV_F": (-1, "SEND_F"), "SEND_B": (-1, "RECV_B"), "RECV_B": (1, "SEND_B")}
# what must come before an action on the same rank, when the rank needs it
BEFORE = {"F": ("RECV_F",), "SEND_F": ("F",), "RECV_B": ("F",), "B": ("F", "RECV_B"), "SEND_B": ("B",)}


class ScheduleError(ValueError):
    """A schedule that cannot run: the message names the rank, the action and what is wrong."""


def _needs(kind: str, j: int, p: int) -> bool:
    """Whether rank j of p must run `kind` for every micro-batch."""
    if kind in ("RECV_F", "SEND_B"):
        return j > 0
    if kind in ("SEND_F", "RECV_B"):
        return j < p - 1
    return True


def _where(j: int, pos: int, a: Action) -> str:
    return f"rank {j}, action {pos} ({a})"


def _check_lane(j: int, p: int, m: int, lane: list[Action]) -> dict[tuple[str, int], int]:
    """Kinds, micro-batches and duplicates of rank j; returns (kind, micro-batch) -> position."""
    seen = {}
    for pos, a in enumerate(lane):
        if a.microbatch >= m:
            raise ScheduleError(f"{_where(j, pos, a)}: micro-batch {a.microbatch} does not exist (there are {m}, 0..{m - 1})")
        if not _needs(a.kind, j, p):
            peer = "previous" if a.kind in ("RECV_F", "SEND_B") else "next"
            raise ScheduleError(f"{_where(j, pos, a)}: stage {j} of {p} has no {peer} stage; remove this action")
        if (a.kind, a.microbatch) in seen:
            raise ScheduleError(f"{_where(j, pos, a)}: runs twice (first at action {seen[a.kind, a.microbatch]})")
        seen[a.kind, a.microbatch] = pos
    return seen


def _check_matching(schedule, seen) -> None:
    for j, lane in enumerate(schedule):
        for pos, a in enumerate(lane):
            if a.kind in PAIRS:
                offset, other = PAIRS[a.kind]
                if (other, a.microbatch) not in seen[j + offset]:
                    verb = "receive" if a.kind.startswith("RECV") else "send"
                    raise ScheduleError(f"{_where(j, pos, a)}: this {verb} has no matching {other}{a.microbatch} "
                                        f"on rank {j + offset}")


def _check_order(j: int, p: int, m: int, lane: list[Action], seen) -> None:
    for i in range(m):
        for kind in ("F", "B", "RECV_F", "SEND_F", "RECV_B", "SEND_B"):
            if _needs(kind, j, p) and (kind, i) not in seen:
                what = {"B": f"F{i} has no backward", "F": f"micro-batch {i} has no forward"}.get(
                    kind, f"micro-batch {i} has no {kind} action")
                raise ScheduleError(f"rank {j}: {what} ({kind}{i}); every rank runs F, B and its messages for "
                                    f"each of the {m} micro-batches")
    for pos, a in enumerate(lane):
        for kind in BEFORE.get(a.kind, ()):
            if _needs(kind, j, p) and seen[kind, a.microbatch] > pos:
                raise ScheduleError(f"{_where(j, pos, a)}: comes before {kind}{a.microbatch} (action "
                                    f"{seen[kind, a.microbatch]}), which it needs")


def _check_progress(schedule) -> None:
    """Simulate: sends never block, a receive waits for its send. Raise on a wait-for cycle."""
    p = len(schedule)
    done = [0] * p
    sent: set[tuple[int, str, int]] = set()      # (sender rank, kind, micro-batch)
    while True:
        moved = False
        for j in range(p):
            while done[j] < len(schedule[j]):
                a = schedule[j][done[j]]
                if a.kind in ("RECV_F", "RECV_B"):
                    offset, other = PAIRS[a.kind]
                    if (j + offset, other, a.microbatch) not in sent:
                        break
                elif a.kind in ("SEND_F", "SEND_B"):
                    sent.add((j, a.kind, a.microbatch))
                done[j] += 1
                moved = True
        if all(done[j] == len(schedule[j]) for j in range(p)):
            return
        if not moved:
            break
    waits = {j: j + PAIRS[schedule[j][done[j]].kind][0] for j in range(p) if done[j] < len(schedule[j])}
    start = min(waits)
    path = [start]
    while waits.get(path[-1]) is not None and waits[path[-1]] not in path:
        path.append(waits[path[-1]])
    cycle = path[path.index(waits[path[-1]]):] if waits.get(path[-1]) in path else path
    lines = [f"rank {j} waits at action {done[j]} ({schedule[j][done[j]]}) for rank {waits[j]}" for j in cycle]
    raise ScheduleError("deadlock: " + "; ".join(lines) + "; wait-for cycle: "
                        + " -> ".join(str(j) for j in cycle + cycle[:1]))


def validate_schedule(schedule, n_microbatches: int) -> list[list[Action]]:
    """Raise ScheduleError for a schedule that cannot run; return it as lists of Action.

    Checks, in order: one lane per rank; actions a rank of its position can run, each once, on
    micro-batches 0..m-1; every send and receive matched on the neighbour; every micro-batch's
    F and B (and messages) on every rank, in an order each needs; no deadlock.
    """
    if not isinstance(schedule, (list, tuple)) or not schedule:
        raise ScheduleError(f"a schedule is a list of per-rank action lists; got {type(schedule).__name__}")
    schedule = parse_schedule(schedule)
    p, m = len(schedule), n_microbatches
    seen = [_check_lane(j, p, m, lane) for j, lane in enumerate(schedule)]
    _check_matching(schedule, seen)
    for j, lane in enumerate(schedule):
        _check_order(j, p, m, lane, seen[j])
    _check_progress(schedule)
    return schedule
