"""Check a schedule before running it: every micro-batch forward and backward on every rank, every
receive matched by a send, each rank's order possible, and no wait-for cycle.

    validate_schedule(schedule, n_microbatches)     # raises ScheduleError naming the rank and action

The run is simulated with non-blocking sends and blocking receives (what the executor does): a
receive waits until its sender has reached the matching send. With n_chunks = v, rank j's chunk c
is virtual stage c p + j (actions.py). Provided code.
"""

from __future__ import annotations

from minitorch_dist.pipeline.actions import Action, parse_schedule

__all__ = ["ScheduleError", "validate_schedule"]

# kind -> (virtual-stage offset of the peer, the matching kind on the peer): a send on virtual stage s
# pairs with a receive on s + offset
PAIRS = {"SEND_F": (1, "RECV_F"), "RECV_F": (-1, "SEND_F"), "SEND_B": (-1, "RECV_B"), "RECV_B": (1, "SEND_B")}
# what must come before an action on the same rank, when the rank needs it
BEFORE = {"F": ("RECV_F",), "SEND_F": ("F",), "RECV_B": ("F",), "B": ("F", "RECV_B"), "SEND_B": ("B",)}


class ScheduleError(ValueError):
    """A schedule that cannot run: the message names the rank, the action and what is wrong."""


def _needs(kind: str, s: int, n: int) -> bool:
    """Whether virtual stage s of n must run `kind` for every micro-batch."""
    if kind in ("RECV_F", "SEND_B"):
        return s > 0
    if kind in ("SEND_F", "RECV_B"):
        return s < n - 1
    return True


def _where(j: int, pos: int, a: Action) -> str:
    return f"rank {j}, action {pos} ({a})"


def _peer(j: int, a: Action, p: int) -> tuple[int, int]:
    """(rank, chunk) of the stage that action a of rank j talks to."""
    t = a.chunk * p + j + PAIRS[a.kind][0]
    return t % p, t // p


def _check_lane(j: int, p: int, m: int, v: int, lane: list[Action]) -> dict[tuple[str, int, int], int]:
    """Kinds, micro-batches, chunks and duplicates of rank j; returns (kind, chunk, micro-batch) -> position."""
    seen = {}
    for pos, a in enumerate(lane):
        if a.microbatch >= m:
            raise ScheduleError(f"{_where(j, pos, a)}: micro-batch {a.microbatch} does not exist (there are {m}, 0..{m - 1})")
        if a.chunk >= v:
            raise ScheduleError(f"{_where(j, pos, a)}: chunk {a.chunk} does not exist (each rank holds {v} "
                                f"chunk{'s' if v > 1 else ''}, 0..{v - 1}; pass n_chunks)")
        if not _needs(a.kind, a.chunk * p + j, p * v):
            peer = "previous" if a.kind in ("RECV_F", "SEND_B") else "next"
            raise ScheduleError(f"{_where(j, pos, a)}: stage {a.chunk * p + j} of {p * v} has no {peer} stage; "
                                f"remove this action")
        key = (a.kind, a.chunk, a.microbatch)
        if key in seen:
            raise ScheduleError(f"{_where(j, pos, a)}: runs twice (first at action {seen[key]})")
        seen[key] = pos
    return seen


def _check_matching(schedule, seen, p: int) -> None:
    for j, lane in enumerate(schedule):
        for pos, a in enumerate(lane):
            if a.kind in PAIRS:
                other = PAIRS[a.kind][1]
                peer, chunk = _peer(j, a, p)
                if (other, chunk, a.microbatch) not in seen[peer]:
                    verb = "receive" if a.kind.startswith("RECV") else "send"
                    raise ScheduleError(f"{_where(j, pos, a)}: this {verb} has no matching "
                                        f"{Action(other, a.microbatch, chunk)} on rank {peer}")


def _check_order(j: int, p: int, m: int, v: int, lane: list[Action], seen) -> None:
    for c in range(v):
        for i in range(m):
            for kind in ("F", "B", "RECV_F", "SEND_F", "RECV_B", "SEND_B"):
                if _needs(kind, c * p + j, p * v) and (kind, c, i) not in seen:
                    a = Action(kind, i, c)
                    what = {"B": f"{Action('F', i, c)} has no backward", "F": f"micro-batch {i} has no forward"}.get(
                        kind, f"micro-batch {i} has no {kind} action")
                    raise ScheduleError(f"rank {j}: {what} ({a}); every rank runs F, B and its messages for "
                                        f"each of the {m} micro-batches" + (f" on each of its {v} chunks" if v > 1 else ""))
    for pos, a in enumerate(lane):
        for kind in BEFORE.get(a.kind, ()):
            if _needs(kind, a.chunk * p + j, p * v) and seen[kind, a.chunk, a.microbatch] > pos:
                raise ScheduleError(f"{_where(j, pos, a)}: comes before {Action(kind, a.microbatch, a.chunk)} "
                                    f"(action {seen[kind, a.chunk, a.microbatch]}), which it needs")


def _check_progress(schedule) -> None:
    """Simulate: sends never block, a receive waits for its send. Raise on a wait-for cycle."""
    p = len(schedule)
    done = [0] * p
    sent: set[tuple[int, str, int, int]] = set()      # (sender rank, kind, chunk, micro-batch)
    while True:
        moved = False
        for j in range(p):
            while done[j] < len(schedule[j]):
                a = schedule[j][done[j]]
                if a.kind in ("RECV_F", "RECV_B"):
                    peer, chunk = _peer(j, a, p)
                    if (peer, PAIRS[a.kind][1], chunk, a.microbatch) not in sent:
                        break
                elif a.kind in ("SEND_F", "SEND_B"):
                    sent.add((j, a.kind, a.chunk, a.microbatch))
                done[j] += 1
                moved = True
        if all(done[j] == len(schedule[j]) for j in range(p)):
            return
        if not moved:
            break
    waits = {j: _peer(j, schedule[j][done[j]], p)[0] for j in range(p) if done[j] < len(schedule[j])}
    start = min(waits)
    path = [start]
    while waits.get(path[-1]) is not None and waits[path[-1]] not in path:
        path.append(waits[path[-1]])
    cycle = path[path.index(waits[path[-1]]):] if waits.get(path[-1]) in path else path
    lines = [f"rank {j} waits at action {done[j]} ({schedule[j][done[j]]}) for rank {waits[j]}" for j in cycle]
    raise ScheduleError("deadlock: " + "; ".join(lines) + "; wait-for cycle: "
                        + " -> ".join(str(j) for j in cycle + cycle[:1]))


def validate_schedule(schedule, n_microbatches: int, n_chunks: int = 1) -> list[list[Action]]:
    """Raise ScheduleError for a schedule that cannot run; return it as lists of Action.

    Checks, in order: one lane per rank; actions a rank of its position can run, each once, on
    micro-batches 0..m-1 and chunks 0..n_chunks-1; every send and receive matched on the neighbour
    stage (chunk c of rank j is virtual stage c p + j; its next stage is c p + j + 1); every
    micro-batch's F and B (and messages) on every chunk of every rank, in an order each needs; no deadlock.
    """
    if not isinstance(schedule, (list, tuple)) or not schedule:
        raise ScheduleError(f"a schedule is a list of per-rank action lists; got {type(schedule).__name__}")
    schedule = parse_schedule(schedule)
    p, m, v = len(schedule), n_microbatches, n_chunks
    if not isinstance(v, int) or v < 1:
        raise ScheduleError(f"validate_schedule: n_chunks must be an int >= 1, got {v!r}")
    seen = [_check_lane(j, p, m, v, lane) for j, lane in enumerate(schedule)]
    _check_matching(schedule, seen, p)
    for j, lane in enumerate(schedule):
        _check_order(j, p, m, v, lane, seen[j])
    _check_progress(schedule)
    return schedule
