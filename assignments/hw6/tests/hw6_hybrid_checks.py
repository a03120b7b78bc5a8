"""Homework 6 test harness, the verdict on HSDP's traffic (6.6), taken in the grading process.

    judge(outcomes, result_problems, hybrid_comm_problems, memory_problems)

With N ranks and shard groups of s: rank w's shard group is the s consecutive ranks of its block
[w - w % s, w - w % s + s), its replica group the N/s ranks w % s, w % s + s, ... Each step, per unit
of padded n elements (a multiple of s), a rank must call, and nothing else:
    in its shard group:    2 all-gathers of n/s elements, 1 reduce-scatter of n elements
    in its replica group:  1 all-reduce of n/s elements (the gradient shard: 1/s of the gradient)
Collectives on a group of one rank send nothing; they may be called or left out. Read from the
trace: each collective's group (by name; the ranks report each group's world ranks) and bytes.
"""

from __future__ import annotations

from assignments.hw6.tests.hw6_checks import _itemsize
from assignments.hw6.tests.hw6_harness import Outcome
from assignments.hw6.tests.hw6_setup import unit_sizes
from minitorch_dist.sharded.flat import padded_numel

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")


def hybrid_members(rank: int, p: int, s: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(shard group, replica group) of world rank `rank`, as tuples of world ranks."""
    first = rank - rank % s
    return tuple(range(first, first + s)), tuple(range(rank % s, p, s))


def expected_hybrid_comm(o: Outcome, rank: int) -> dict:
    """{(op, group's world ranks): [calls, tensor bytes]} of one step on `rank`, groups of one rank left out."""
    s, es = o.case.shard_size, _itemsize(o.case)
    shard, replica = hybrid_members(rank, o.p, s)
    padded = [padded_numel(n, s) for n in unit_sizes(o.case)]
    want = {("all_gather", shard): [2 * len(padded), 2 * sum(padded) // s * es],
            ("reduce_scatter", shard): [len(padded), sum(padded) * es],
            ("all_reduce", replica): [len(padded), sum(padded) // s * es]}
    return {k: v for k, v in want.items() if len(k[1]) > 1}


def got_hybrid_comm(step: dict, groups: dict) -> dict:
    """{(op, group's world ranks or its name): [calls, tensor bytes]} from a step's trace events."""
    got: dict = {}
    for op, _start, _end, nbytes, group in step["events"]:
        if op not in OPS:
            continue
        members = tuple(groups.get(group, [group]))
        if len(members) == 1 and isinstance(members[0], int):
            continue                                            # a group of one rank sends nothing
        calls = got.setdefault((op, members), [0, 0])
        calls[0] += 1
        calls[1] += nbytes
    return got


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
    problems = []
    for r, rep in enumerate(o.ranks):
        want = expected_hybrid_comm(o, r)
        for k, step in enumerate(rep["steps"]):
            got = got_hybrid_comm(step, rep["groups"])
            if step["comm"]["p2p"] != [0, 0]:
                problems.append(f"rank {r}, step {k}: {step['comm']['p2p'][0]} point-to-point messages; HSDP uses "
                                f"only the collectives")
            if got != want:
                s = o.case.shard_size
                problems.append(
                    f"rank {r}, step {k}: {_show(got) or 'no collective'}. Expected {_show(want) or 'none'}: per unit "
                    f"two all-gathers and a reduce-scatter in the shard group of {s} consecutive ranks, then "
                    f"an all-reduce of the gradient shard (1/{s} of the unit) across the {o.p // s} replicas "
                    f"(ranks at the same place in every shard group). As rings that sends {ring_bytes(got):.0f} B "
                    f"per rank; expected {ring_bytes(want):.0f} B")
                break
    return problems
