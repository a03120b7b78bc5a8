"""Homework 6 test harness, the verdict on HSDP's traffic (6.6), taken in the grading process.

    judge(outcomes, result_problems, hybrid_comm_problems, memory_problems)

What a correct run calls on each group, per unit and step: hw6_hybrid_groups.py (two all-gathers and
a reduce-scatter in the shard group, an all-reduce of the gradient shard across the replica group).
Read from the trace: each collective's group and bytes. The trace is written in the rank processes,
so its group names count only as the groups a correct run makes (this rank's shard and replica
groups, by the names the runtime gives them; known here from the case and p), and each step's events
must add up to that step's counters (which the grader holds to the kernel's counts, cases.py).
Collectives on a group of one rank send nothing: they may be left out, or called as a correct run
calls them, no more.
"""

from __future__ import annotations

from assignments.hw6.tests.hw6_harness import Outcome
from assignments.hw6.tests.hw6_hybrid_groups import members_of, step_comm

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")


def got_hybrid_comm(step: dict, rank: int, p: int, s: int) -> dict:
    """{(op, group's world ranks, or its name if no correct run makes it): [calls, tensor bytes]} from a
    step's trace events, every group."""
    got: dict = {}
    for op, _start, _end, nbytes, group in step["events"]:
        if op not in OPS:
            continue
        calls = got.setdefault((op, members_of(group, rank, p, s)), [0, 0])
        calls[0] += 1
        calls[1] += nbytes
    return got


def _untold(step: dict, got: dict) -> list[str]:
    """Where a step's trace events and its counters disagree, per collective."""
    traced = {op: [sum(v[i] for (o, _), v in got.items() if o == op) for i in (0, 1)] for op in OPS}
    return [f"{op} {traced[op][0]} calls / {traced[op][1]} B in the trace, {step['comm'][op][0]} / "
            f"{step['comm'][op][1]} B counted" for op in OPS if traced[op] != list(step["comm"][op])]


def _lone_extra(got: dict, want: dict) -> dict:
    """Collectives on one-rank groups beyond what a correct run calls there (all of them or none)."""
    return {k: v for k, v in got.items() if len(k[1]) == 1 and isinstance(k[1][0], int) and v != want.get(k)}


def ring_bytes(comm: dict) -> float:
    """Bytes a rank sends per step if every collective is a ring over its group of g ranks."""
    total = 0.0
    for (op, members), (_calls, nbytes) in comm.items():
        g = len(members)
        total += {"all_reduce": 2 * (g - 1) / g, "reduce_scatter": (g - 1) / g,
                  "all_gather": g - 1, "broadcast": 1}[op] * nbytes
    return total


def _show(comm: dict) -> str:
    return "; ".join(f"{op} over ranks {list(m)}: {c} calls / {b} B" for (op, m), (c, b) in sorted(comm.items(), key=str))


def hybrid_comm_problems(o: Outcome) -> list[str]:
    """Each step's collectives, per group: the reduce-scatter and all-gathers inside the shard group, the
    all-reduce of the gradient shards across the replica group, with their bytes; no point to point."""
    if o.error is not None:
        return [o.error]
    problems, s = [], o.case.shard_size
    for r, rep in enumerate(o.ranks):
        every = step_comm(o.case, r, o.p)
        want = {k: v for k, v in every.items() if len(k[1]) > 1}
        for k, step in enumerate(rep["steps"]):
            got = got_hybrid_comm(step, r, o.p, s)
            if step["comm"]["p2p"] != [0, 0]:
                problems.append(f"rank {r}, step {k}: {step['comm']['p2p'][0]} point-to-point messages; HSDP uses "
                                f"only the collectives")
            untold, extra = _untold(step, got), _lone_extra(got, every)
            if untold or extra:
                problems.append(f"rank {r}, step {k}: the trace does not account for the step's collectives ("
                                f"{'; '.join(untold) or _show(extra) + ' on a group of one rank'}): leave the "
                                f"runtime's trace and counters alone")
                break
            got = {key: v for key, v in got.items() if not (len(key[1]) == 1 and isinstance(key[1][0], int))}
            if got != want:
                problems.append(
                    f"rank {r}, step {k}: {_show(got) or 'no collective'}. Expected {_show(want) or 'none'}: per unit "
                    f"two all-gathers and a reduce-scatter in the shard group of {s} consecutive ranks, then "
                    f"an all-reduce of the gradient shard (1/{s} of the unit) across the {o.p // s} replicas "
                    f"(ranks at the same place in every shard group). As rings that sends {ring_bytes(got):.0f} B "
                    f"per rank; expected {ring_bytes(want):.0f} B")
                break
    return problems
